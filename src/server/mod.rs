//! The in-process server: sessions and private files, the single-instance lock, the
//! HTTP accept thread and the per-project worker threads.
//!
//! [`AgentToolServer`] is the spec's "In-Process Server". Its parts, one module each:
//! - `session`: the session store and bearer-token lookup (constant-time compare).
//! - `lock`: `server.lock`, one server per data directory.
//! - `http`: the tiny_http accept thread and the threads that read bodies and answer.
//! - `queue`: one worker thread per project with work queued.
//! - `effects`: what the server does to its process, and how an embedder turns it off
//!   ([`ProcessEffects`]).
//!
//! Private files, ids, secrets, locks and the socket calls tiny_http does not offer are
//! in `crate::base`, shared with the default host; the activity trail it records each
//! call in is [`crate::activity`].
//!
//! Callbacks into the app (`valid`, `execute`, `on_status`, …) are never called while
//! one of the server's locks is held, so they may call back into the server.

mod effects;
mod http;
mod lock;
mod queue;
mod session;
mod unserved;
mod waits;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::protocol::{
    guide, is_browser_operation, validate_tool_request, IntegrationState, IntegrationStatus,
    ToolIdentity, ToolRequest, ToolResult, ToolSession, AGENT_TOOLS, GUIDE_TOPICS,
};

// Kept here for embedders that used them from `server` (their home is `base`).
use crate::activity;
use crate::base::files::regenerated_write;
pub use crate::base::files::{
    private_dir, private_json, private_write, read_json, read_private_json,
};
use crate::base::lock_or_recover;
pub use effects::ProcessEffects;
pub use http::{ACCEPT_JOIN_WAIT, FORGET_ENDED_AFTER};
pub use waits::{
    Awaited, Outcome, Wait, WaitSlot, Waker, TICK, WAITS_MAX, WAITS_PER_AGENT, WAITS_PER_PROJECT,
};

/// A queued operation that waited longer than this fails without running.
pub const QUEUE_EXPIRY: Duration = Duration::from_secs(15);

/// How long a caller waits for its queued operation's answer before giving up on it:
/// [`QUEUE_EXPIRY`] plus a budget covering the longest runtime operation (45 s).
pub const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// The answer to a call whose queued operation did not finish within [`ANSWER_WAIT`].
pub(crate) const ANSWER_TIMEOUT_ERROR: &str =
    "Operation did not finish in time; its outcome is unknown. Inspect before retrying.";

/// The answer to a call whose operation panicked.
const FAILED_ERROR: &str = "The operation failed unexpectedly; no result was returned";

/// A call's answer on the wire: its HTTP status (200 ok, 400 refused or failed) and JSON.
pub(crate) type WireAnswer = (u16, Vec<u8>);

/// What [`AgentToolServer::invoke_wire`] made of a call.
pub(crate) enum Invoked<'a> {
    Now(WireAnswer),
    /// To run behind its project: see [`Pending::queue`].
    Queue(Pending<'a>),
}

/// An admitted operation that runs behind its project.
pub(crate) struct Pending<'a> {
    server: &'a AgentToolServer,
    session: &'a ToolSession,
    request: ToolRequest,
    /// When the request was parsed (its activity line's duration counts from here).
    started: Instant,
    /// Held until someone decides ([`Admission::Hold`]): queued only if it answers `Ok`.
    held: Option<Wait>,
}

impl Pending<'_> {
    /// Steps 6 to 8: queues the operation behind its project; when its turn comes it is
    /// checked again and executed, recorded in the activity trail, and `later` gets its
    /// answer on the project's worker. `Err`: it could not be queued, and this is its
    /// answer (`later` is dropped). An operation that waits ([`Execution::Wait`]) leaves
    /// the worker: `waiting` is told its deadline, and `later` is called by the waiter.
    /// A held call waits the same way (`waiting` is told when the hold ends), off the
    /// queue, and is queued once its hold answers `Ok`. A wait (or hold) ends early once
    /// `hung_up` says its caller is gone: no answer could reach it.
    pub(crate) fn queue(
        self,
        later: impl FnOnce(WireAnswer) + Send + 'static,
        waiting: impl Fn(Instant) + Send + Sync + 'static,
        hung_up: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Result<(), WireAnswer> {
        let (server, session, started) = (self.server, self.session, self.started);
        let Some(owner) = server.me.upgrade() else {
            return Err(wire(&ToolResult::Err(
                "Tool service is shutting down; try again".into(),
            )));
        };
        let (operation, project) = (self.request.operation.clone(), session.project_id.clone());
        let waiting = Arc::new(waiting);
        let hung_up: HungUp = Arc::new(hung_up);
        let (request, caller) = (self.request, session.clone());
        let (runs, waits) = (Arc::clone(&owner), Arc::clone(&waiting));
        let caller_gone = Arc::clone(&hung_up);
        // `Some(refusal)`: answered with it, never run (a held call refused); `decided`:
        // who let a held call run, for the trail.
        let run = move |refused: Option<String>, decided: Option<String>, queued_at: Instant| {
            // A panicking operation still gets an answer.
            let turn = || match refused {
                Some(refused) => Execution::Done(Err(refused)),
                None => runs.take_turn(&caller, &request, queued_at),
            };
            let execution = catch_unwind(AssertUnwindSafe(turn))
                .unwrap_or_else(|_| Execution::Done(Err(FAILED_ERROR.into())));
            let (owner, session) = (Arc::clone(&runs), caller.clone());
            // Recorded in the trail when the answer is known (a wait's end included).
            let finish = move |result: Outcome| {
                let result = ToolResult::from(result);
                let (args, operation) = (Some(&request.args), &request.operation);
                let decided = decided.as_deref();
                owner
                    .activity
                    .call_decided(&caller, operation, args, &result, started, decided);
                later(wire(&result));
            };
            match execution {
                Execution::Done(result) => finish(result),
                Execution::Wait(wait) => {
                    waits(wait.deadline);
                    runs.add_wait(wait, session, caller_gone, Box::new(finish));
                }
            }
        };
        let Some(hold) = self.held else {
            let queued_at = owner.clock.now();
            let work = Box::new(move || run(None, None, queued_at));
            return server.queues.push(&project, work).map_err(|error| {
                let refused = ToolResult::Err(error);
                server
                    .activity
                    .call(session, &operation, None, &refused, started);
                wire(&refused)
            });
        };
        waiting(hold.deadline);
        let queues = Arc::clone(&owner);
        let decided = move |decision: Outcome| match decision {
            Ok(decided) => {
                let decided = decided.as_str().map(String::from);
                let queued_at = queues.clock.now();
                // Kept here too: if no worker can be started, the call is answered so.
                let run = Arc::new(Mutex::new(Some(run)));
                let job = Arc::clone(&run);
                let work = Box::new(move || {
                    if let Some(run) = lock_or_recover(&job).take() {
                        run(None, decided, queued_at)
                    }
                });
                if let Err(error) = queues.queues.push(&project, work) {
                    if let Some(run) = lock_or_recover(&run).take() {
                        run(Some(error), None, queued_at)
                    }
                }
            }
            Err(refused) => run(Some(refused), None, queues.clock.now()),
        };
        owner.add_wait(hold, session.clone(), hung_up, Box::new(decided));
        Ok(())
    }
}

/// Whether a waiting call's caller is gone (its connection closed): asked at each check.
type HungUp = Arc<dyn Fn() -> bool + Send + Sync>;

/// The answer (and the trail's line) of a call whose caller hung up while it waited.
const HUNG_UP: &str =
    "The caller hung up; the call stopped waiting (what it started goes on, nothing was answered)";

/// True while `session_info` would mark this status connected (and write it to disk).
/// The spec names claude-mcp and codex-mcp; every `<agent>-mcp` adapter (e.g. the
/// runtime's opencode-mcp) is wired the same way, so it connects the same way.
pub(crate) fn connects_on_session_info(status: &IntegrationStatus) -> bool {
    status.adapter.ends_with("-mcp") && status.state != IntegrationState::Connected
}

/// `{"ok":true,"value":<value>}`: a `ToolResult::Ok`'s wire JSON, from a borrowed value.
fn wire_ok(value: &impl Serialize) -> Vec<u8> {
    #[derive(Serialize)]
    struct WireOk<'a, T> {
        ok: bool,
        value: &'a T,
    }
    serde_json::to_vec(&WireOk { ok: true, value }).unwrap_or_default()
}

fn wire(result: &ToolResult) -> WireAnswer {
    let status = match result {
        ToolResult::Ok(_) => 200,
        ToolResult::Err(_) => 400,
    };
    (status, serde_json::to_vec(result).unwrap_or_default())
}

/// What an operation made of its turn: its answer, or a wait whose answer comes later
/// (see [`Wait`]; the project's worker moves on meanwhile).
pub enum Execution {
    /// The answer now.
    Done(Outcome),
    /// The operation did its immediate part; the answer comes when the wait ends.
    Wait(Wait),
}

/// What the app makes of an admitted call before it is queued
/// ([`ServerCallbacks::admission`]).
pub enum Admission {
    /// Queue it.
    Run,
    /// Answer this error; nothing runs.
    Refuse(String),
    /// Hold it off the queue (as a waiting call, within the same bounds) until the wait
    /// answers: `Ok` queues it (a string names who let it run, for its activity line),
    /// `Err` is its answer and nothing runs.
    Hold(Wait),
}

/// What the server needs from the app around it.
pub trait ServerCallbacks: Send + Sync + 'static {
    /// Runs an accepted operation (already validated, authenticated and serialized
    /// behind its project). The error text is shown to the agent.
    fn execute(&self, identity: &ToolIdentity, request: &ToolRequest) -> Result<Value, String>;
    /// [`execute`](Self::execute), for an operation that may answer later: the server
    /// calls this one. The default: `execute`'s answer, now.
    fn execute_or_wait(&self, identity: &ToolIdentity, request: &ToolRequest) -> Execution {
        Execution::Done(self.execute(identity, request))
    }
    /// Whether an admitted call runs, is refused or is held until someone decides (an
    /// app's policy). Called on the accept thread: it must not block. The default: runs.
    fn admission(&self, _identity: &ToolIdentity, _request: &ToolRequest) -> Admission {
        Admission::Run
    }
    /// Whether `identity` is offered `operation` in `session_info`'s `operations` (what an
    /// MCP client lists); the default: every operation.
    fn offers(&self, _identity: &ToolIdentity, _operation: &str) -> bool {
        true
    }
    /// What `session_info` says of the agent's policy (its `policy` field, e.g. each
    /// class's rule); the default: nothing (no field).
    fn policy_summary(&self, _identity: &ToolIdentity) -> Option<Value> {
        None
    }
    /// How the agent's own terminal is confined (`session_info`'s `isolation`); the
    /// default: nothing (no field). Shared: asked for every `session_info`, which compares
    /// it with what its kept answer was made from.
    fn isolation(&self, _identity: &ToolIdentity) -> Option<Arc<Value>> {
        None
    }
    /// The git worktree the agent works in (`session_info`'s and `agent_status`'s
    /// `worktree`: `{path, branch, base}`); the default: none. Shared, as `isolation`.
    fn worktree(&self, _identity: &ToolIdentity) -> Option<Arc<Value>> {
        None
    }
    /// What the agent is doing as the person needs to know it (`agent_status`'s
    /// `attention`: `{state, why?, reason?, source, since}`); the default: nothing known.
    fn attention(&self, _identity: &ToolIdentity) -> Option<Value> {
        None
    }
    /// A number that changes whenever [`offers`](Self::offers) or
    /// [`policy_summary`](Self::policy_summary) may answer differently (cached
    /// `session_info` answers are made again); the default: 0.
    fn offers_generation(&self) -> u64 {
        0
    }
    /// Whether this identity may still act (its project and node still exist).
    fn valid(&self, identity: &ToolIdentity) -> bool;
    /// Why `identity` is not [`valid`](Self::valid), said after `Session revoked: `;
    /// `None` (the default): `Session revoked` alone.
    fn why_invalid(&self, _identity: &ToolIdentity) -> Option<String> {
        None
    }
    /// Whether the user has enabled agent browser control.
    fn browser_enabled(&self) -> bool;
    /// Told every time a node's integration status is set.
    fn on_status(&self, _node_id: &str, _status: &IntegrationStatus) {}
    /// The app's version, reported by `session_info`.
    fn app_version(&self) -> String {
        "development".to_string()
    }
    /// Whether `session_info` may mark this agent's MCP adapter connected now: false once
    /// the app knows its program has ended (its status then keeps saying why).
    fn may_connect(&self, _node_id: &str) -> bool {
        true
    }
    /// The answer to an admitted `request` when the app can give it at once on the accept
    /// thread, never waiting (from what it knows to be current), skipping the project's
    /// queue; `None` (the default): queue it. The same `Arc` is serialized only once.
    fn answer_at_once(&self, _: &ToolIdentity, _: &ToolRequest) -> Option<Arc<Value>> {
        None
    }
}

/// Where queued operations read the time, so tests can move it (see [`QUEUE_EXPIRY`]).
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
    /// How long a caller waits for a queued answer ([`ANSWER_WAIT`]; tests shorten it).
    fn answer_wait(&self) -> Duration {
        ANSWER_WAIT
    }
}

/// The real clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Where a started server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `http://127.0.0.1:PORT/call`.
    pub url: String,
    /// The port on 127.0.0.1.
    pub port: u16,
    /// This server's instance id (also in `endpoint.json` and `server.lock`).
    pub instance_id: String,
}

/// Why a server call failed.
#[derive(Debug)]
pub enum ServerError {
    /// A node id that does not match `^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$`.
    InvalidNodeId,
    /// No session is provisioned for this node.
    UnknownSession(String),
    /// `start` was called on a running server.
    AlreadyStarted,
    /// `start` was called after `close`.
    Closed,
    /// A live process holds `server.lock` (its pid, when the lock names one).
    DataDirInUse {
        /// The pid in the lock.
        pid: Option<i32>,
    },
    /// `server.lock` exists but cannot be trusted.
    BadLock {
        /// The lock file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A file or socket operation failed.
    Io {
        /// What the server was doing.
        action: &'static str,
        /// The underlying error.
        source: io::Error,
    },
}

impl ServerError {
    fn io(action: &'static str, source: io::Error) -> ServerError {
        ServerError::Io { action, source }
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::InvalidNodeId => f.write_str("Invalid agent node ID"),
            ServerError::UnknownSession(node) => {
                write!(f, "No tool session for agent node {node}; provision it first")
            }
            ServerError::AlreadyStarted => f.write_str("Tool service already started"),
            ServerError::Closed => {
                f.write_str("Tool service was closed; create a new server to start again")
            }
            ServerError::DataDirInUse { pid } => write!(
                f,
                "Another instance{} is already using this data directory; quit it or choose another data directory",
                pid.map_or(String::new(), |pid| format!(" (pid {pid})"))
            ),
            ServerError::BadLock { path, detail } => write!(
                f,
                "Cannot read {} ({detail}); if no other instance is running, delete it and start again",
                path.display()
            ),
            ServerError::Io { action, source } => write!(f, "Could not {action}: {source}"),
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServerError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

enum Lifecycle {
    New,
    Running {
        http: http::Http,
        endpoint: Endpoint,
        /// The data directory's flock (see `lock`), released after `server.lock`.
        held: lock::Held,
    },
    Closed,
}

/// The authenticated localhost tool server of one data directory.
///
/// Shared as `Arc<AgentToolServer>`; its threads hold a strong reference only while they
/// serve a call. Call [`close`](Self::close) before dropping a started server: `close` is
/// what removes `endpoint.json` and `server.lock` and ends the connections.
pub struct AgentToolServer {
    me: Weak<AgentToolServer>,
    directory: PathBuf,
    /// `<directory>/launch` and `<directory>/preferences.json`, for `session_info`.
    launch_directory: PathBuf,
    preferences_file: PathBuf,
    instance_id: String,
    callbacks: Arc<dyn ServerCallbacks>,
    clock: Arc<dyn Clock>,
    sessions: Mutex<session::SessionStore>,
    /// Held while a session file is written or deleted along with its in-memory session
    /// (provision, set_status, revoke), so the two never disagree and a revoked session's
    /// file is never written again. Separate from `sessions`, which the accept thread
    /// takes to authenticate, so that it never waits for a disk write.
    session_files: Mutex<()>,
    queues: queue::ProjectQueues,
    waits: waits::Waits,
    lifecycle: Mutex<Lifecycle>,
    /// The last `session_info` answer on the wire for each node, with what it was made
    /// from (see [`AgentToolServer::session_info_wire`]).
    session_info_answers: Mutex<HashMap<String, (SessionInfoSource, Vec<u8>)>>,
    /// The last answer given at once on the wire, with what it was made from (see
    /// [`AgentToolServer::at_once_wire`]).
    at_once_answer: Mutex<Option<(Arc<Value>, Vec<u8>)>>,
    activity: activity::Recorder,
    /// What the server may do to its process; read by `start`.
    effects: Mutex<ProcessEffects>,
}

/// What a `session_info` answer depends on beyond the server's fixed paths and ids.
#[derive(Clone, PartialEq)]
struct SessionInfoSource {
    project_id: String,
    status: IntegrationStatus,
    browser_enabled: bool,
    app_version: String,
    activity_dropped: u64,
    /// The app's [`ServerCallbacks::offers_generation`].
    offers_generation: u64,
    /// The app's [`ServerCallbacks::isolation`].
    isolation: Option<Arc<Value>>,
    /// The app's [`ServerCallbacks::worktree`].
    worktree: Option<Arc<Value>>,
}

/// At most this many `session_info` answers are kept (then all are dropped and made
/// again as asked): a bound on memory with 10,000 sessions.
const SESSION_INFO_ANSWERS_MAX: usize = 256;

/// `session_info`'s value. Fields in alphabetical order: the wire order of the
/// `serde_json` map it used to be built as.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionInfo<'a> {
    activity_dropped: u64,
    app_version: &'a str,
    browser_enabled: bool,
    guides_directory: PathBuf,
    host: &'static str,
    instance_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    isolation: Option<&'a Value>,
    node_id: &'a str,
    operations: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<Value>,
    preferences_file: &'a Path,
    project_id: &'a str,
    status: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    worktree: Option<&'a Value>,
}

/// Every operation's name, without the browser's unless `browser_enabled`; built once.
fn operation_names(browser_enabled: bool) -> &'static [&'static str] {
    static NAMES: OnceLock<[Vec<&'static str>; 2]> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let all = || AGENT_TOOLS.iter().map(|tool| tool.name);
        [
            all().filter(|name| !is_browser_operation(name)).collect(),
            all().collect(),
        ]
    });
    &names[usize::from(browser_enabled)]
}

/// `bytes` random bytes in hex, as the server's error.
fn random_hex(bytes: usize) -> Result<String, ServerError> {
    crate::base::random_hex(bytes).map_err(|e| ServerError::io("get random bytes", e))
}

impl AgentToolServer {
    /// Creates the server of `<user_data_path>/agent-tools` (its `sessions/` made or
    /// re-tightened to 0700). Nothing listens until [`start`](Self::start).
    pub fn new(
        user_data_path: &Path,
        callbacks: Arc<dyn ServerCallbacks>,
    ) -> Result<Arc<Self>, ServerError> {
        Self::with_clock(user_data_path, callbacks, Arc::new(SystemClock))
    }

    /// [`new`](Self::new) with the clock queued operations expire by.
    pub fn with_clock(
        user_data_path: &Path,
        callbacks: Arc<dyn ServerCallbacks>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, ServerError> {
        let directory = user_data_path.join("agent-tools");
        private_dir(&directory).map_err(|e| ServerError::io("create agent-tools", e))?;
        private_dir(&directory.join("sessions"))
            .map_err(|e| ServerError::io("create agent-tools/sessions", e))?;
        let instance_id = random_hex(16)?;
        Ok(Arc::new_cyclic(|me| AgentToolServer {
            me: me.clone(),
            launch_directory: directory.join("launch"),
            activity: activity::Recorder::new(directory.join("activity")),
            preferences_file: directory.join("preferences.json"),
            directory,
            instance_id,
            callbacks,
            clock,
            sessions: Mutex::default(),
            session_files: Mutex::default(),
            queues: queue::ProjectQueues::default(),
            waits: waits::Waits::default(),
            lifecycle: Mutex::new(Lifecycle::New),
            session_info_answers: Mutex::default(),
            at_once_answer: Mutex::default(),
            effects: Mutex::default(),
        }))
    }

    /// Sets what the server may do to the process beyond its own sockets, files and
    /// threads ([`ProcessEffects`]; default: everything, as `serve` runs it);
    /// effective at [`start`](Self::start).
    pub fn set_process_effects(&self, effects: ProcessEffects) {
        *lock_or_recover(&self.effects) = effects;
    }

    /// Sets where the activity trail is written (`None`: no trail), instead of the
    /// default `<data>/agent-tools/activity`; effective at [`start`](Self::start).
    pub fn set_activity_directory(&self, directory: Option<PathBuf>) {
        self.activity.set_directory(directory);
    }

    /// The trail file of `project_id` (`<activity>/<projectId>.jsonl`), unless there is
    /// no trail or the id is no safe file name. Read it with [`activity::read_tail`].
    pub fn activity_file(&self, project_id: &str) -> Option<PathBuf> {
        self.activity.file(project_id)
    }

    /// Records in `project_id`'s trail what the person did through the host (the canvas
    /// view), as `operation` with `args`: the line has `by: "person"` and no node id.
    pub fn record_person(
        &self,
        project_id: &str,
        operation: &str,
        args: Option<&Map<String, Value>>,
        result: &ToolResult,
        started: Instant,
    ) {
        self.activity
            .person(project_id, operation, args, result, started);
    }

    /// Records in `project_id`'s trail that agent `node_id`'s state changed as the person
    /// sees it (`working`, `waiting`, `done`): operation `attention` with `state` as its
    /// arguments (`{state, why?, reason?}`).
    pub fn record_attention(&self, project_id: &str, node_id: &str, state: &Map<String, Value>) {
        self.activity.attention(project_id, node_id, state);
    }

    /// Activity lines dropped so far (the writer was behind, or the disk full).
    pub fn activity_dropped(&self) -> u64 {
        self.activity.dropped()
    }

    /// `<data>/agent-tools` (mode 0700).
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// This server's random instance id.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// `sessions/<node_id>.json`, once `node_id` is known to be a safe file name.
    pub fn session_file(&self, node_id: &str) -> Result<PathBuf, ServerError> {
        if !session::valid_node_id(node_id) {
            return Err(ServerError::InvalidNodeId);
        }
        Ok(self.directory.join(format!("sessions/{node_id}.json")))
    }

    /// Gives `identity` a session with `status`, writes its file and reports the status.
    /// With `reuse`, a persisted token is kept when its file names the same node and
    /// project and holds 64 lowercase hex characters; otherwise a fresh random token. A
    /// file that already holds this very session (a restart) is not written again.
    pub fn provision(
        &self,
        identity: &ToolIdentity,
        status: IntegrationStatus,
        reuse: bool,
    ) -> Result<ToolSession, ServerError> {
        self.session_file(&identity.node_id)?; // refuses an unsafe node id
        let files = lock_or_recover(&self.session_files);
        let saved = reuse
            .then(|| self.saved(&identity.node_id))
            .flatten()
            .filter(|saved| saved.project_id == identity.project_id);
        let persisted = saved.as_ref().map(|saved| saved.token.clone());
        let token = {
            let sessions = lock_or_recover(&self.sessions);
            let usable = |token: &str| {
                session::decode_token(token)
                    .is_some_and(|s| sessions.key_free(&identity.node_id, &s))
            };
            match persisted.filter(|t| usable(t)) {
                Some(token) => token,
                None => loop {
                    let token = random_hex(session::TOKEN_BYTES)?;
                    if usable(&token) {
                        break token;
                    }
                },
            }
        };
        let session = ToolSession {
            node_id: identity.node_id.clone(),
            project_id: identity.project_id.clone(),
            token,
            status: status.clone(),
        };
        if saved.as_ref() != Some(&session) {
            self.persist(&session)?;
        }
        lock_or_recover(&self.sessions).insert(session.clone());
        drop(files);
        self.activity.add_project(&session.project_id);
        self.callbacks.on_status(&session.node_id, &status);
        Ok(session)
    }

    /// `node_id`'s persisted session, if its file may be reused.
    fn saved(&self, node_id: &str) -> Option<ToolSession> {
        let file = self.session_file(node_id).ok()?;
        // Only a file this user wrote privately: never a planted one (see the function).
        let saved: ToolSession = serde_json::from_value(read_private_json(&file).ok()??).ok()?;
        let usable = saved.node_id == node_id && session::decode_token(&saved.token).is_some();
        usable.then_some(saved)
    }

    fn persist(&self, session: &ToolSession) -> Result<(), ServerError> {
        let file = self.session_file(&session.node_id)?;
        let value = serde_json::to_value(session)
            .map_err(|e| ServerError::io("encode a session", io::Error::other(e.to_string())))?;
        private_json(&file, &value).map_err(|e| ServerError::io("write a session file", e))
    }

    /// The live session of `node_id`.
    pub fn session(&self, node_id: &str) -> Option<ToolSession> {
        lock_or_recover(&self.sessions).get(node_id).cloned()
    }

    /// True when `node_id` has a live session or a reusable persisted one.
    pub fn has_credentials(&self, node_id: &str) -> bool {
        self.session(node_id).is_some() || self.saved(node_id).is_some()
    }

    /// Sets `node_id`'s status, persists it and reports it through `on_status`.
    pub fn set_status(&self, node_id: &str, status: IntegrationStatus) -> Result<(), ServerError> {
        let files = lock_or_recover(&self.session_files);
        // Still present (under `session_files`, so a revoke cannot come in between).
        let session = lock_or_recover(&self.sessions)
            .set_status(node_id, status.clone())
            .cloned()
            .ok_or_else(|| ServerError::UnknownSession(node_id.to_string()))?;
        self.persist(&session)?;
        drop(files);
        self.callbacks.on_status(node_id, &status);
        Ok(())
    }

    /// The statuses of `project_id`'s sessions whose identity is still `valid`, by node id.
    pub fn statuses(&self, project_id: &str) -> Vec<(String, IntegrationStatus)> {
        let sessions = lock_or_recover(&self.sessions).of_project(project_id);
        sessions
            .into_iter()
            .filter(|(identity, _)| self.callbacks.valid(identity))
            .map(|(identity, status)| (identity.node_id, status))
            .collect()
    }

    /// Forgets `node_id`'s session and deletes its file; its queued work then fails
    /// with `Session revoked`.
    pub fn revoke(&self, node_id: &str) {
        let _files = lock_or_recover(&self.session_files);
        lock_or_recover(&self.sessions).remove(node_id);
        lock_or_recover(&self.session_info_answers).remove(node_id);
        if let Ok(file) = self.session_file(node_id) {
            let _ = std::fs::remove_file(file);
        }
        // Its waiting calls end now, with `Session revoked`.
        self.waits.waker().wake();
    }

    /// Waits for `wait` (answered by `finish`), ended early when `session` is revoked or
    /// its caller `hung_up`.
    fn add_wait(
        self: &Arc<Self>,
        wait: Wait,
        session: ToolSession,
        hung_up: HungUp,
        finish: Box<dyn FnOnce(Outcome) + Send>,
    ) {
        let me = Arc::downgrade(self);
        let gone = move || {
            if hung_up() {
                return Some(HUNG_UP.to_string());
            }
            match me.upgrade()?.revoked(&session)? {
                ToolResult::Err(why) => Some(format!("{why}; the call stopped waiting")),
                ToolResult::Ok(_) => None,
            }
        };
        self.waits.add(wait, Box::new(gone), finish);
    }

    /// A place for one more waiting call of agent `identity` (take it before acting, so
    /// a call past the bound is refused having done nothing), or the refusal for the
    /// agent. One agent holds at most [`WAITS_PER_AGENT`] places.
    pub fn reserve_wait(&self, identity: &ToolIdentity) -> Result<WaitSlot, String> {
        self.waits.reserve(&identity.project_id, &identity.node_id)
    }

    /// A handle that has the waiting calls checked now: the host calls it when a
    /// terminal's output or command state changed, or a terminal closed.
    pub fn waker(&self) -> Waker {
        self.waits.waker()
    }

    /// How many calls wait now.
    pub fn waiting_calls(&self) -> usize {
        self.waits.waiting()
    }

    /// The session whose bearer token is `token` (constant-time; see `session`).
    fn authenticate(&self, token: &str) -> Option<Arc<ToolSession>> {
        lock_or_recover(&self.sessions).authenticate(token).cloned()
    }

    /// Runs one raw request for an authenticated session: the spec's eight steps,
    /// waiting up to [`Clock::answer_wait`] for a queued operation. The HTTP front's
    /// path (`invoke_wire`), its wire answer read back.
    pub fn invoke(&self, session: &ToolSession, raw: &Value) -> ToolResult {
        let unwire = |(_, answer): WireAnswer| {
            serde_json::from_slice(&answer).unwrap_or_else(|_| ToolResult::Err(FAILED_ERROR.into()))
        };
        let pending = match self.invoke_wire(session, raw) {
            Invoked::Now(answer) => return unwire(answer),
            Invoked::Queue(pending) => pending,
        };
        // `Ok`: the answer; `Err`: the operation waits until then.
        let (reply, answer) = mpsc::channel();
        let waiting = reply.clone();
        // This caller waits here until the answer: it never hangs up.
        let queued = pending.queue(
            move |answer| drop(reply.send(Ok(answer))),
            move |deadline| drop(waiting.send(Err(deadline))),
            || false,
        );
        if let Err(refused) = queued {
            return unwire(refused);
        }
        let mut until = Instant::now() + self.clock.answer_wait();
        // The operation may still run after we stop waiting: its outcome is unknown.
        loop {
            match answer.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(Ok(answer)) => return unwire(answer),
                Ok(Err(deadline)) => until = deadline + self.clock.answer_wait(),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return ToolResult::Err(ANSWER_TIMEOUT_ERROR.into())
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return ToolResult::Err(FAILED_ERROR.into())
                }
            }
        }
    }

    /// [`invoke`](Self::invoke) for the HTTP front, which must not wait: the answer as
    /// wire bytes now, or the operation to queue ([`Invoked::Queue`]).
    /// `session_info`, the most frequent call, comes from [`Self::session_info_wire`].
    pub(crate) fn invoke_wire<'a>(&'a self, session: &'a ToolSession, raw: &Value) -> Invoked<'a> {
        let started = Instant::now();
        let request = match self.admit(session, raw) {
            Ok(request) => request,
            Err(refused) => {
                // The operation it names, if any, for the trail.
                let operation = raw.get("operation").and_then(Value::as_str).unwrap_or("?");
                self.activity
                    .call(session, operation, None, &refused, started);
                return Invoked::Now(wire(&refused));
            }
        };
        if request.operation == "session_info" {
            let answer = self.session_info_wire(session);
            let ok = ToolResult::Ok(Value::Null);
            self.activity
                .call(session, "session_info", Some(&request.args), &ok, started);
            return Invoked::Now((200, answer));
        }
        let (args, operation) = (Some(&request.args), request.operation.as_str());
        if let Some(result) = self.answer_now(session, &request) {
            self.activity
                .call(session, operation, args, &result, started);
            return Invoked::Now(wire(&result));
        }
        let identity = session.identity();
        // The app's admission (its policy): runs, refused, or held until decided.
        let held = match self.callbacks.admission(&identity, &request) {
            Admission::Run => None,
            Admission::Refuse(why) => {
                let refused = ToolResult::Err(why);
                self.activity
                    .call(session, operation, args, &refused, started);
                return Invoked::Now(wire(&refused));
            }
            Admission::Hold(wait) => Some(wait),
        };
        // An answer the app already holds (the runtime's: an unchanged `canvas_list`).
        if held.is_none() {
            if let Some(value) = self.callbacks.answer_at_once(&identity, &request) {
                let ok = ToolResult::Ok(Value::Null);
                self.activity.call(session, operation, args, &ok, started);
                return Invoked::Now((200, self.at_once_wire(value)));
            }
        }
        Invoked::Queue(Pending {
            server: self,
            session,
            request,
            started,
            held,
        })
    }

    /// `{"ok":true,"value":<value>}` as wire bytes, made again only when `value` is not
    /// the `Arc` the last one was made from (the app's answer changed).
    fn at_once_wire(&self, value: Arc<Value>) -> Vec<u8> {
        let mut last = lock_or_recover(&self.at_once_answer);
        if !last
            .as_ref()
            .is_some_and(|(made_from, _)| Arc::ptr_eq(made_from, &value))
        {
            *last = Some((Arc::clone(&value), wire_ok(&*value)));
        }
        last.as_ref()
            .map_or_else(Vec::new, |(_, answer)| answer.clone())
    }

    /// Steps 1 and 2: the validated request, or why it is refused.
    fn admit(&self, session: &ToolSession, raw: &Value) -> Result<ToolRequest, ToolResult> {
        // 1. Validate.
        let request = validate_tool_request(raw).map_err(|e| ToolResult::Err(e.to_string()))?;
        // 2. The session's token must still be the node's current one, and its identity
        // still valid: a session revoked since it authenticated is never answered.
        self.revoked(session).map_or(Ok(request), Err)
    }

    /// `Session revoked` when `session` may no longer act: its token is no longer the
    /// node's, or its identity is not valid (then with the app's reason, if it has one).
    fn revoked(&self, session: &ToolSession) -> Option<ToolResult> {
        if !lock_or_recover(&self.sessions).is_current(session) {
            return Some(ToolResult::Err("Session revoked".into()));
        }
        let identity = session.identity();
        (!self.callbacks.valid(&identity)).then(|| {
            ToolResult::Err(match self.callbacks.why_invalid(&identity) {
                Some(reason) => format!("Session revoked: {reason}"),
                None => "Session revoked".into(),
            })
        })
    }

    /// Steps 3 to 5: the answer of a request answered without its project's queue
    /// (discovery, status, and browser operations while browser control is off).
    fn answer_now(&self, session: &ToolSession, request: &ToolRequest) -> Option<ToolResult> {
        // 3 and 4. Discovery and status (`session_info`: see `invoke_wire`).
        match request.operation.as_str() {
            "guide_read" => {
                let topic = request.args["topic"].as_str().unwrap_or("");
                return Some(match guide(topic) {
                    Some(text) => ToolResult::Ok(json!({ "topic": topic, "guide": text })),
                    // Not reached while every topic the validator admits has a guide.
                    None => ToolResult::Err(format!(
                        "Invalid topic: must be one of {}",
                        GUIDE_TOPICS.join(", ")
                    )),
                });
            }
            "agent_status" => {
                let project_id = &session.project_id;
                let agents: Vec<Value> = self
                    .statuses(project_id)
                    .into_iter()
                    .map(|(node_id, status)| {
                        let identity = ToolIdentity {
                            node_id: node_id.clone(),
                            project_id: project_id.clone(),
                        };
                        let mut agent = json!({ "nodeId": node_id, "status": status });
                        if let Some(worktree) = self.callbacks.worktree(&identity) {
                            agent["worktree"] = (*worktree).clone();
                        }
                        if let Some(attention) = self.callbacks.attention(&identity) {
                            agent["attention"] = attention;
                        }
                        agent
                    })
                    .collect();
                return Some(ToolResult::Ok(json!({ "agents": agents })));
            }
            _ => {}
        }
        // 5. Browser operations need browser control.
        let off = is_browser_operation(&request.operation) && !self.callbacks.browser_enabled();
        off.then(|| ToolResult::Err(crate::protocol::BROWSER_CONTROL_OFF.into()))
    }

    /// Steps 7 and 8, on the project's worker thread.
    fn take_turn(
        &self,
        session: &ToolSession,
        request: &ToolRequest,
        queued_at: Instant,
    ) -> Execution {
        if matches!(*lock_or_recover(&self.lifecycle), Lifecycle::Closed) {
            return Execution::Done(Err(
                "Tool service is shutting down; no change applied".into()
            ));
        }
        if self.clock.now().saturating_duration_since(queued_at) > QUEUE_EXPIRY {
            return Execution::Done(Err(
                "Queued operation expired before execution; no change applied".into(),
            ));
        }
        if let Some(ToolResult::Err(revoked)) = self.revoked(session) {
            return Execution::Done(Err(revoked));
        }
        let identity = session.identity();
        if is_browser_operation(&request.operation) && !self.callbacks.browser_enabled() {
            return Execution::Done(Err("Browser control was disabled while waiting".into()));
        }
        self.callbacks.execute_or_wait(&identity, request)
    }

    /// `{"ok":true,"value":<session_info>}` as wire bytes (never the token): serialized
    /// straight from borrowed fields (the same JSON as through a `Value`), and only again
    /// when what it is made from changed; an agent asks for the same answer again and again.
    fn session_info_wire(&self, session: &ToolSession) -> Vec<u8> {
        let source = self.session_info_source(session);
        let mut answers = lock_or_recover(&self.session_info_answers);
        let cached = answers
            .get(&session.node_id)
            .filter(|(from, _)| *from == source);
        if let Some((_, answer)) = cached {
            return answer.clone();
        }
        let identity = session.identity();
        let offered = operation_names(source.browser_enabled)
            .iter()
            .filter(|operation| self.callbacks.offers(&identity, operation));
        let value = &SessionInfo {
            activity_dropped: source.activity_dropped,
            app_version: &source.app_version,
            browser_enabled: source.browser_enabled,
            guides_directory: self.launch_directory.join(&session.node_id).join("skills"),
            host: "local",
            instance_id: &self.instance_id,
            isolation: source.isolation.as_deref(),
            node_id: &session.node_id,
            operations: offered.copied().collect(),
            policy: self.callbacks.policy_summary(&identity),
            preferences_file: &self.preferences_file,
            project_id: &session.project_id,
            // Through a `Value`, so its keys stay sorted as they always were.
            status: serde_json::to_value(&source.status).unwrap_or(Value::Null),
            worktree: source.worktree.as_deref(),
        };
        let answer = wire_ok(value);
        if answers.len() >= SESSION_INFO_ANSWERS_MAX {
            answers.clear();
        }
        answers.insert(session.node_id.clone(), (source, answer.clone()));
        answer
    }

    /// What `session_info` answers depend on; marks MCP adapters connected (step 4).
    fn session_info_source(&self, session: &ToolSession) -> SessionInfoSource {
        let mut status = lock_or_recover(&self.sessions)
            .get(&session.node_id)
            .map_or_else(|| session.status.clone(), |s| s.status.clone());
        if connects_on_session_info(&status) && self.callbacks.may_connect(&session.node_id) {
            status.state = IntegrationState::Connected;
            status.reason = Some("Authenticated tool connection established".into());
            // The status still reaches the app if only the file could not be written
            // (not if the session is gone: a revoked session is never marked connected).
            if let Err(ServerError::Io { .. }) = self.set_status(&session.node_id, status.clone()) {
                self.callbacks.on_status(&session.node_id, &status);
            }
        }
        SessionInfoSource {
            project_id: session.project_id.clone(),
            status,
            browser_enabled: self.callbacks.browser_enabled(),
            app_version: self.callbacks.app_version(),
            activity_dropped: self.activity_dropped(),
            offers_generation: self.callbacks.offers_generation(),
            isolation: self.callbacks.isolation(&session.identity()),
            worktree: self.callbacks.worktree(&session.identity()),
        }
    }

    /// Takes `server.lock`, listens on `127.0.0.1:0` and writes `endpoint.json`.
    pub fn start(&self) -> Result<Endpoint, ServerError> {
        let mut lifecycle = lock_or_recover(&self.lifecycle);
        match *lifecycle {
            Lifecycle::New => {}
            Lifecycle::Running { .. } => return Err(ServerError::AlreadyStarted),
            Lifecycle::Closed => return Err(ServerError::Closed),
        }
        let lock_file = self.directory.join("server.lock");
        let held = lock::acquire(&lock_file, &self.instance_id)?;
        let projects = lock_or_recover(&self.sessions).project_ids();
        let started = match self.activity.start(projects) {
            Ok(()) => self
                .listen()
                .map_err(|e| ServerError::io("start listening", e)),
            Err(e) => Err(ServerError::io("start the activity trail", e)),
        };
        let (http, endpoint) =
            started.inspect_err(|_| lock::release(&lock_file, &self.instance_id))?;
        *lifecycle = Lifecycle::Running {
            http,
            endpoint: endpoint.clone(),
            held,
        };
        Ok(endpoint)
    }

    /// Starts the HTTP front and writes `endpoint.json` (the front stopped if it cannot).
    fn listen(&self) -> io::Result<(http::Http, Endpoint)> {
        let effects = *lock_or_recover(&self.effects);
        let http = http::Http::start(self.me.clone(), effects)?;
        let port = http.port();
        let endpoint = Endpoint {
            url: format!("http://127.0.0.1:{port}/call"),
            port,
            instance_id: self.instance_id.clone(),
        };
        // Not fsynced: it describes this process, and each start writes it again.
        let file = self.directory.join("endpoint.json");
        let value = json!({ "url": endpoint.url, "instanceId": endpoint.instance_id });
        if let Err(e) = regenerated_write(&file, format!("{value:#}\n").as_bytes(), 0o600) {
            http.stop();
            return Err(e);
        }
        Ok((http, endpoint))
    }

    /// Where the server listens, while it runs.
    pub fn endpoint(&self) -> Option<Endpoint> {
        match &*lock_or_recover(&self.lifecycle) {
            Lifecycle::Running { endpoint, .. } => Some(endpoint.clone()),
            _ => None,
        }
    }

    /// Stops listening, ends open connections, joins the accept thread (waiting at most
    /// [`ACCEPT_JOIN_WAIT`] for an app callback it is inside), and removes
    /// `endpoint.json` and `server.lock` where they are this instance's. Idempotent.
    /// Call it from an ordinary thread (e.g. one woken by SIGTERM), not from inside a
    /// signal handler. Operations already running finish on their own threads.
    pub fn close(&self) {
        let previous = std::mem::replace(&mut *lock_or_recover(&self.lifecycle), Lifecycle::Closed);
        let Lifecycle::Running { http, held, .. } = previous else {
            return;
        };
        let endpoint_file = self.directory.join("endpoint.json");
        if let Ok(Some(endpoint)) = read_json(&endpoint_file) {
            if endpoint.get("instanceId").and_then(Value::as_str) == Some(&self.instance_id) {
                let _ = std::fs::remove_file(&endpoint_file);
            }
        }
        // Before the front stops: their shutdown answers still reach their callers.
        self.waits.close();
        http.stop();
        // After the front: its last answers (503 while shutting down) are recorded too.
        self.activity.stop();
        lock::release(&self.directory.join("server.lock"), &self.instance_id);
        drop(held);
    }

    /// How many project worker threads are alive (for tests and diagnostics).
    pub fn project_workers(&self) -> usize {
        self.queues.active()
    }
}
