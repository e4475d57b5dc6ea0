//! [`AgentToolRuntime`]: creates the server with the runtime's callbacks, owns the
//! runtime state (pending canvas requests, statuses, browser owners, active agents,
//! stopping) and exposes the host-facing entry points.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::{fmt, time::Duration};

use serde_json::{Map, Value};

use super::agents::{find_preset, probe_executable, AgentPreset, AgentProbe};
use super::attention::{AgentState, TerminalFacts};
use super::host::{Foreground, Host, ProgramEnd, ProjectSnapshot, PtyRequest};
use super::launch::{
    install_launcher, load_preferences, prepare_tool_launch, LaunchInput, Preferences,
    LAUNCHER_NAME,
};
use super::{canvas::CanvasBridge, canvas_node::node_field, owners::BrowserOwners};
use crate::base::unix_millis;
use crate::messaging::{Messaging, Task, TypedTails};
use crate::protocol::{
    CanvasToolReply, IntegrationState, IntegrationStatus, ToolIdentity, ToolRequest,
};
use crate::server::{AgentToolServer, Endpoint, ServerCallbacks, ServerError};

/// How long the host may take to report a browser guest ready (the spec's 60 × 50 ms).
pub const GUEST_READY_TIMEOUT: Duration = Duration::from_secs(3);
/// The error when a browser guest did not become ready in time or went away.
pub const GUEST_NOT_READY: &str = "Browser target is not ready or was closed";
/// How long a browser page operation may take.
pub const BROWSER_OPERATION_TIMEOUT: Duration = Duration::from_secs(15);

/// What can go wrong creating, starting or preparing the runtime.
#[derive(Debug)]
pub enum RuntimeError {
    /// The server refused (lock held, invalid node id, I/O).
    Server(ServerError),
    /// Writing the launcher or launch files failed.
    Io(std::io::Error),
    /// `preferences.json` is malformed (the message names the file).
    Preferences(String),
    /// [`AgentToolRuntime::start`]'s `termsprawlctl` path is not an executable file.
    NotExecutable(PathBuf),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Server(e) => write!(f, "{e}"),
            RuntimeError::Io(e) => write!(f, "agent tools: {e}"),
            RuntimeError::Preferences(message) => f.write_str(message),
            RuntimeError::NotExecutable(path) => write!(
                f,
                "agent tools: {} is not an executable file; pass the path of the \
                 termsprawlctl binary, or of your app's binary that calls \
                 termsprawl_tools::client::run",
                path.display()
            ),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<ServerError> for RuntimeError {
    fn from(error: ServerError) -> Self {
        RuntimeError::Server(error)
    }
}

impl From<std::io::Error> for RuntimeError {
    fn from(error: std::io::Error) -> Self {
        RuntimeError::Io(error)
    }
}

/// The runtime state the server's callbacks need. The server holds it through
/// `Arc<dyn ServerCallbacks>`; it reaches the server back through a `Weak`, so there is
/// no reference cycle.
pub(super) struct Core {
    pub(super) host: Host,
    pub(super) server: OnceLock<Weak<AgentToolServer>>,
    pub(super) directory: PathBuf,
    pub(super) bridge: Arc<CanvasBridge>,
    pub(super) statuses: Mutex<HashMap<String, IntegrationStatus>>,
    pub(super) owners: Mutex<BrowserOwners>,
    pub(super) active: Mutex<HashSet<String>>,
    pub(super) stopping: AtomicBool,
    pub(super) messaging: Messaging,
    /// What agents typed into agent terminals, as far as it could still join a message's
    /// framing.
    pub(super) typed: TypedTails,
    probes: Mutex<HashMap<PathBuf, AgentProbe>>,
    launcher: Mutex<Option<PathBuf>>,
    /// The person's policy and the calls waiting for their answer.
    pub(super) gate: super::gate::Gate,
    /// What each agent is doing, as the person needs to know it.
    pub(super) attention: super::attention::Attention,
}

impl Core {
    /// What `node_id` of `project_id` is doing now, as the person needs to know it
    /// (`attention.rs`): a call of its held for them, what it said, or its terminal.
    pub(super) fn agent_state(&self, project_id: &str, node_id: &str) -> Option<AgentState> {
        let held = self.gate.approvals.held_for(project_id, node_id);
        let terminals = &self.host.terminals;
        // Looked at most every `FACTS_FRESH`: `agent_status` asks on the accept thread.
        let terminal = self.attention.terminal(node_id, || {
            terminals
                .foreground(node_id)
                .map(|foreground| TerminalFacts {
                    ended: foreground == Foreground::Ended,
                    reading: foreground == Foreground::AwaitingInput
                        || terminals.reading(node_id) == Some(true),
                    last_output_at: terminals
                        .output_mark(node_id)
                        .map_or(0, |m| m.last_output_at),
                })
        });
        let now = unix_millis();
        self.attention
            .state(project_id, node_id, held.as_deref(), terminal, now)
    }
}

// Locks a mutex, taking over its state if a panic poisoned it: every guarded value here
// stays consistent between statements.
pub(super) use crate::base::lock_or_recover as lock;

/// The runtime: binds an [`AgentToolServer`] to a host app through the [`Host`] traits.
pub struct AgentToolRuntime {
    pub(super) core: Arc<Core>,
    server: Arc<AgentToolServer>,
}

impl AgentToolRuntime {
    /// Creates the server under `<user_data_path>/agent-tools` with the runtime's callbacks
    /// and loads `browser-owners.json`. Nothing listens until [`AgentToolRuntime::start`].
    pub fn new(user_data_path: &Path, host: Host) -> Result<AgentToolRuntime, RuntimeError> {
        let directory = user_data_path.join("agent-tools");
        let core = Arc::new(Core {
            host,
            server: OnceLock::new(),
            owners: Mutex::new(BrowserOwners::load(&directory.join("browser-owners.json"))),
            messaging: Messaging::new(Some(directory.join("tasks")), unix_millis()),
            typed: TypedTails::default(),
            directory,
            bridge: Arc::default(),
            statuses: Mutex::default(),
            active: Mutex::default(),
            stopping: AtomicBool::new(false),
            probes: Mutex::default(),
            launcher: Mutex::default(),
            gate: Default::default(),
            attention: Default::default(),
        });
        let server = AgentToolServer::new(user_data_path, core.clone())?;
        let _ = core.server.set(Arc::downgrade(&server));
        Ok(AgentToolRuntime { core, server })
    }

    /// Where the activity trail goes (`None`: none), instead of
    /// `<data>/agent-tools/activity`: an app can keep it with its own logs. Call it
    /// before [`AgentToolRuntime::start`].
    pub fn set_activity_directory(&self, directory: Option<PathBuf>) {
        self.server.set_activity_directory(directory);
    }

    /// The server (sessions, provisioning, endpoint).
    pub fn server(&self) -> &Arc<AgentToolServer> {
        &self.server
    }

    /// What each agent of `project_id` with a session is doing, as the person needs to
    /// know it (`attention.rs`); agents nothing is known of are left out.
    pub fn agent_states(&self, project_id: &str) -> Vec<(String, AgentState)> {
        let agents = self.server.statuses(project_id).into_iter();
        let states = agents.filter_map(|(node_id, _)| {
            let state = self.core.agent_state(project_id, &node_id)?;
            Some((node_id, state))
        });
        states.collect()
    }

    /// Starts the server and installs the launcher `<data>/agent-tools/termsprawlctl`,
    /// which `exec`s `ctl_executable` (refused unless an executable file: the launcher
    /// would point nowhere). Cargo builds no binary of a dependency: ship the CLI as
    /// your own binary calling [`crate::client::run`].
    pub fn start(&self, ctl_executable: &Path) -> Result<Endpoint, RuntimeError> {
        use std::os::unix::fs::PermissionsExt;
        let metadata = std::fs::metadata(ctl_executable);
        if !metadata.is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0) {
            return Err(RuntimeError::NotExecutable(ctl_executable.to_path_buf()));
        }
        let endpoint = self.server.start()?;
        let launcher = install_launcher(self.server.directory(), ctl_executable)
            .inspect_err(|_| self.server.close())?;
        *lock(&self.core.launcher) = Some(launcher);
        Ok(endpoint)
    }

    /// Provisions an agent that runs outside your terminals as `serve --agent` does, and
    /// returns the session file to give it: its session (`cli-fallback`, adapter
    /// `external`; the token kept when node and project match) and its launch folder
    /// (the guides `session_info`'s `guidesDirectory` names, its system prompt). Call it
    /// after [`start`](Self::start); agents your app starts go through `prepare` instead.
    pub fn provision_agent(&self, agent: &ToolIdentity) -> Result<PathBuf, RuntimeError> {
        let status = IntegrationStatus {
            state: IntegrationState::CliFallback,
            adapter: "external".into(),
            version: None,
            reason: None,
        };
        self.server.provision(agent, status, true)?;
        let session_file = self.server.session_file(&agent.node_id)?;
        let (directory, probe) = (self.server.directory(), AgentProbe::default());
        prepare_tool_launch(&LaunchInput {
            launch_root: &directory.join("launch"),
            node_id: &agent.node_id,
            command: "",
            probe: &AgentProbe {
                name: "external-cli".into(),
                ..probe
            },
            instruction_flag: None,
            session_file: &session_file,
            launcher: &self
                .launcher()
                .unwrap_or_else(|| directory.join(LAUNCHER_NAME)),
        })?;
        Ok(session_file)
    }

    /// The installed launcher, once started.
    pub fn launcher(&self) -> Option<PathBuf> {
        lock(&self.core.launcher).clone()
    }

    /// Stops: later revocations are ignored (the app is quitting, sessions stay), every
    /// pending canvas request fails with `App stopped during request <id>`, the server
    /// closes. Idempotent. It joins the reaper, the trail's writer and the accept thread,
    /// but waits at most [`ACCEPT_JOIN_WAIT`](crate::server::ACCEPT_JOIN_WAIT) for a
    /// [`Workspace`](super::Workspace) call blocked there: that thread then ends once the
    /// call returns, and answers nothing more.
    pub fn close(&self) {
        self.core.stopping.store(true, Ordering::SeqCst);
        self.core.bridge.fail_all();
        self.server.close();
        self.core.messaging.stop(unix_millis());
    }

    /// Hands the canvas owner's reply to the request waiting for it; returns whether it was
    /// taken. A reply not from the main frame, from another sender than the request went
    /// to, or for an unknown (finished, timed out) request id is ignored.
    pub fn canvas_reply(&self, sender_id: u64, main_frame: bool, reply: CanvasToolReply) -> bool {
        self.core.bridge.reply(sender_id, main_frame, reply)
    }

    /// Sends one canvas operation for `identity`'s project and waits for the owner.
    pub fn canvas(
        &self,
        identity: &ToolIdentity,
        operation: &str,
        args: Map<String, Value>,
    ) -> Result<Value, String> {
        self.core.canvas(identity, operation, args)
    }

    /// The target id of a browser node's guest (a node as `canvas_list` returns it).
    pub fn guest(&self, node: &Value) -> Result<String, String> {
        self.core.guest(node)
    }

    /// Fulfils an accepted operation (the server calls this from the project's queue).
    pub fn execute(&self, identity: &ToolIdentity, request: &ToolRequest) -> Result<Value, String> {
        self.core.execute(identity, request)
    }

    /// Runs a canvas operation for the person at the host (the canvas view, with its key)
    /// in project `project_id`, through the same code as an agent's call of it (the
    /// canvas bridge and owner; `agent_launch`'s presets; a new terminal waited for),
    /// without a caller node: `terminal_open`, `agent_launch`, `terminal_close`,
    /// `canvas_move`, `canvas_resize`. `request` must have passed
    /// [`validate_tool_request`](crate::protocol::validate_tool_request). Recording it
    /// (as the person) is the caller's part.
    pub fn act_for_person(&self, project_id: &str, request: &ToolRequest) -> Result<Value, String> {
        self.core.act_for_person(project_id, request)
    }

    /// Whether `identity` may call: its project is open and local, and the node is an
    /// active agent or still on that project's canvas.
    pub fn valid(&self, identity: &ToolIdentity) -> bool {
        self.core.valid(identity)
    }

    /// The latest `n` agent messages of a project, newest first, texts cut to `chars`.
    pub fn tasks(&self, project_id: &str, n: usize, chars: usize) -> Vec<Task> {
        self.core
            .messaging
            .recent(project_id, n, chars, unix_millis())
    }

    /// An agent's current integration status.
    pub fn status(&self, node_id: &str) -> Option<IntegrationStatus> {
        lock(&self.core.statuses).get(node_id).cloned()
    }

    /// The PTY integration point: call it with every terminal start request and run what
    /// it returns. Agent commands get their session, launch files, command and
    /// environment; everything else comes back unchanged.
    pub fn prepare(&self, mut request: PtyRequest) -> Result<PtyRequest, RuntimeError> {
        let (core, server) = (&self.core, &self.server);
        let Some(project_id) = request.project_id.clone() else {
            return Ok(request);
        };
        let Some(command) = request.command.clone().filter(|c| !c.trim().is_empty()) else {
            return Ok(request);
        };
        if core.local_project(&project_id).is_none() {
            return Ok(request);
        }
        let Some((preset, executable, instruction_flag)) = core.agent_of_command(&command)? else {
            return Ok(request);
        };
        let words: Vec<&str> = command.split_whitespace().collect();
        let login = words.contains(&"/login") || words.windows(2).any(|w| w == ["auth", "login"]);
        if preset.kind == "claude" && login {
            return Ok(request);
        }
        let identity = ToolIdentity {
            node_id: request.node_id.clone(),
            project_id: project_id.clone(),
        };
        lock(&core.active).insert(identity.node_id.clone());
        let warm = core.host.terminals.is_warm(&identity.node_id);
        let had_credentials = server.has_credentials(&identity.node_id);
        let Ok(probe) = core.probe(&executable) else {
            let status = IntegrationStatus {
                state: IntegrationState::NeedsSetup,
                adapter: preset.kind.to_string(),
                version: None,
                reason: Some(format!(
                    "Install {} ({executable} was not found), then launch it again",
                    preset.title
                )),
            };
            server.provision(&identity, status, true)?;
            return Ok(request);
        };
        let launcher = core.directory.join(super::launch::LAUNCHER_NAME);
        let session_file = server.session_file(&identity.node_id)?;
        let prepared = prepare_tool_launch(&LaunchInput {
            launch_root: &core.directory.join("launch"),
            node_id: &identity.node_id,
            command: &command,
            probe: &probe,
            instruction_flag: instruction_flag.as_deref(),
            session_file: &session_file,
            launcher: &launcher,
        })?;
        server.provision(&identity, prepared.status.clone(), true)?;
        if warm && !had_credentials {
            let status = IntegrationStatus {
                state: IntegrationState::NeedsSetup,
                reason: Some("This agent started before tool integration; close it and launch it fresh to connect".into()),
                ..prepared.status.clone()
            };
            server.set_status(&identity.node_id, status)?;
        }
        request.command = Some(prepared.command);
        request.env.extend(prepared.env);
        request.env.extend([
            ("TERMSPRAWL_NODE_ID".to_string(), identity.node_id),
            ("TERMSPRAWL_PROJECT_ID".to_string(), project_id),
        ]);
        Ok(request)
    }

    /// Ends an agent's tool access (its node was closed or removed). No-op while stopping.
    pub fn revoke(&self, node_id: &str) {
        self.core.revoke(node_id, REVOKED)
    }

    /// The host saw the program of terminal node `node_id` end, showing `last_screen`.
    /// An agent whose MCP client never connected keeps its session, with status
    /// needs-setup and a reason naming the exit and its last screen lines (so
    /// `agent_status` says why it could not start); any other agent is revoked, as when
    /// its node is closed, with a reason naming the exit. Nodes without a session
    /// (plain shells) need nothing. No-op while stopping.
    pub fn terminal_ended(&self, node_id: &str, end: ProgramEnd, last_screen: &str) {
        let (core, server) = (&self.core, &self.server);
        if core.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Some(session) = server.session(node_id) else {
            return;
        };
        let exited = format!("The agent exited ({})", exit_words(end));
        if session.status.state != IntegrationState::NeedsSetup {
            core.revoke(node_id, &exited);
            return;
        }
        let lines = last_lines(last_screen);
        let reason = if lines.is_empty() {
            format!("{exited} before connecting")
        } else {
            format!("{exited} before connecting: {lines:?}")
        };
        let status = IntegrationStatus {
            reason: Some(reason),
            ..session.status
        };
        // Only a revoke in between can fail it (then the agent's status is gone anyway)
        // or the file write (the status still reaches the app through `on_status`).
        if let Err(ServerError::Io { .. }) = server.set_status(node_id, status.clone()) {
            core.on_status(node_id, &status);
        }
    }
}

/// An agent a PTY command starts: its registry entry, its executable and (the custom
/// agent's, from the preferences) its instruction flag.
type AgentCommand = (&'static AgentPreset, String, Option<String>);

/// The reason given when a node's tool access is revoked because it was closed.
const REVOKED: &str = "Tool access was revoked; launch the agent again to reconnect";

/// At most this many characters of an ended agent's last screen go into its reason.
pub const EXIT_REASON_CHARS: usize = 300;

/// The last non-empty lines of `screen`, control characters removed, joined with " / ",
/// at most [`EXIT_REASON_CHARS`] characters (the end is kept: that is where an error is).
fn last_lines(screen: &str) -> String {
    let mut kept: Vec<String> = Vec::new();
    let mut length = 0;
    for line in screen.lines().rev() {
        let clean: String = line.chars().filter(|c| !c.is_control()).collect();
        let clean = clean.trim();
        if clean.is_empty() {
            continue;
        }
        let cost = clean.chars().count() + if kept.is_empty() { 0 } else { 3 };
        if length + cost > EXIT_REASON_CHARS {
            if kept.is_empty() {
                kept.push(super::context::last_chars(clean, EXIT_REASON_CHARS).to_string());
            }
            break;
        }
        length += cost;
        kept.push(clean.to_string());
    }
    kept.reverse();
    kept.join(" / ")
}

/// `status 1`, `signal 9`: how an agent ended, for its status reason.
fn exit_words(end: ProgramEnd) -> String {
    match end {
        ProgramEnd::Status(code) => format!("status {code}"),
        ProgramEnd::Signal(signal) => format!("signal {signal}"),
        ProgramEnd::Unknown => "status unknown".to_string(),
    }
}

impl Drop for AgentToolRuntime {
    fn drop(&mut self) {
        self.close();
    }
}

impl Core {
    pub(super) fn server(&self) -> Option<Arc<AgentToolServer>> {
        self.server.get()?.upgrade()
    }

    pub(super) fn local_project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        self.host
            .workspace
            .project(project_id)
            .filter(|p| !p.remote)
    }

    pub(super) fn canvas(
        &self,
        identity: &ToolIdentity,
        operation: &str,
        args: Map<String, Value>,
    ) -> Result<Value, String> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err("The app is stopping; retry once it has restarted".into());
        }
        let owner = self.host.canvas.as_ref();
        // The person acts with no node of their own.
        let caller = Some(identity.node_id.as_str()).filter(|id| !id.is_empty());
        self.bridge
            .request(owner, (&identity.project_id, caller), operation, args)
    }

    pub(super) fn guest(&self, node: &Value) -> Result<String, String> {
        let node_id = node_field(node, "id").ok_or(GUEST_NOT_READY)?;
        let field = |key: &str| {
            node.get("data")
                .and_then(|d| d.get(key))
                .or_else(|| node.get(key))
        };
        let tab_ids: Vec<&str> = field("tabs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str().or_else(|| t.get("id")?.as_str()))
            .collect();
        let active = field("activeTabId")
            .and_then(Value::as_str)
            .filter(|id| tab_ids.contains(id));
        let tab_id = active.or(tab_ids.first().copied()).ok_or(GUEST_NOT_READY)?;
        self.wait_for_guest(node_id, tab_id)
    }

    pub(super) fn wait_for_guest(&self, node_id: &str, tab_id: &str) -> Result<String, String> {
        let (ready, target) = mpsc::channel();
        self.host.browsers.watch_guest(node_id, tab_id, ready);
        target
            .recv_timeout(GUEST_READY_TIMEOUT)
            .map_err(|_| GUEST_NOT_READY.to_string())
    }

    /// Runs a page operation on another thread so a stuck page cannot hold the project's
    /// queue longer than [`BROWSER_OPERATION_TIMEOUT`].
    ///
    /// A timed-out operation is not cancelled (a host's `run` cannot be interrupted): it
    /// keeps running on its thread and may still change the page. The queue moves on, so
    /// the project's next operation, on this page or another, may overlap it; hence the
    /// timeout tells the agent to inspect the page before retrying. Its late result is
    /// dropped. If no thread can be started, nothing ran and the call fails at once.
    pub(super) fn run_page_operation(
        &self,
        target: String,
        operation: &str,
        args: Map<String, Value>,
    ) -> Result<Value, String> {
        let browsers = self.host.browsers.clone();
        let operation = operation.to_string();
        let (done, result) = mpsc::channel();
        std::thread::Builder::new()
            .name("page-operation".into())
            .spawn(move || {
                let _ = done.send(browsers.run(&target, &operation, &args));
            })
            .map_err(|e| {
                format!("Could not start the browser operation ({e}); nothing was run, try again")
            })?;
        match result.recv_timeout(BROWSER_OPERATION_TIMEOUT) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Timeout) => {
                Err("Browser operation timed out; inspect the page before retrying".into())
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err("Browser operation failed; inspect the page before retrying".into())
            }
        }
    }

    pub(super) fn preferences(&self) -> Result<Preferences, String> {
        load_preferences(&self.directory.join("preferences.json"))
    }

    /// Probes `command`, cached per resolved path.
    pub(super) fn probe(&self, command: &str) -> Result<AgentProbe, String> {
        let path = super::agents::resolve_executable(command, std::env::var_os("PATH").as_deref())
            .ok_or_else(|| format!("{command} is not installed or not executable"))?;
        if let Some(found) = lock(&self.probes).get(&path) {
            return Ok(found.clone());
        }
        let found = probe_executable(path.clone())?;
        lock(&self.probes).insert(path, found.clone());
        Ok(found)
    }

    pub(super) fn revoke(&self, node_id: &str, reason: &str) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        lock(&self.active).remove(node_id);
        self.gate.approvals.withdraw(node_id);
        self.attention.forget(node_id);
        if let Some(server) = self.server() {
            server.revoke(node_id);
        }
        self.messaging.agent_gone(node_id, unix_millis());
        let previous = lock(&self.statuses).remove(node_id);
        let status = IntegrationStatus {
            state: IntegrationState::NeedsSetup,
            adapter: previous.map_or_else(|| "external".to_string(), |s| s.adapter),
            version: None,
            reason: Some(reason.to_string()),
        };
        self.host.workspace.status_changed(node_id, &status);
        // Best effort: a failed write leaves the in-memory map right for this run.
        let _ = lock(&self.owners).release_all(node_id);
    }

    fn agent_of_command(&self, command: &str) -> Result<Option<AgentCommand>, RuntimeError> {
        fn file_name(path: &str) -> &str {
            Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(path)
        }
        let Some(first) = command.split_whitespace().next() else {
            return Ok(None);
        };
        let base = file_name(first);
        if let Some(preset) = super::agents::AGENT_REGISTRY
            .iter()
            .find(|p| p.command == Some(base))
        {
            return Ok(Some((preset, first.to_string(), None)));
        }
        let preferences = self.preferences().map_err(RuntimeError::Preferences)?;
        let custom = preferences
            .custom_executable
            .filter(|custom| custom == first || base == file_name(custom));
        let preset = find_preset("custom").expect("custom is in the registry");
        Ok(custom.map(|custom| (preset, custom, preferences.custom_instruction_flag)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_reason_quotes_the_last_lines_without_control_characters() {
        let screen = "Welcome\n\n  \u{1b}[31mError: no service\u{7}  \n\n";
        assert_eq!(last_lines(screen), "Welcome / [31mError: no service");
        assert_eq!(last_lines("\n \n"), "");
        // The end is kept; whole lines only, unless the last one alone is too long.
        let screen = format!("{}\n{}\nlast", "a".repeat(200), "b".repeat(100));
        assert_eq!(last_lines(&screen), format!("{} / last", "b".repeat(100)));
        let long = format!("start{}", "é".repeat(400));
        assert_eq!(last_lines(&long), "é".repeat(EXIT_REASON_CHARS));
        assert_eq!(exit_words(ProgramEnd::Status(1)), "status 1");
        assert_eq!(exit_words(ProgramEnd::Signal(9)), "signal 9");
    }
}
