//! The headless canvas owner: every project's [`Canvas`] behind one lock, and the code
//! that applies canvas requests to them (the spec's renderer).
//!
//! The runtime's [`CanvasOwner::send`] applies each `CanvasToolRequest` on the caller's
//! thread (a project worker) under that lock: it refuses a request that arrives after its
//! `expiresAt` (nothing applied), applies the rest, does their side effects and answers
//! through the [`CanvasReplier`] that came with it before `send`
//! returns, so the runtime's `recv_timeout` finds the reply waiting. Host code that needs
//! the canvases (adding a project or an `--agent` node, restoring terminals at start) runs
//! under the same lock with [`HeadlessCanvas::with`], so there is never a second writer.
//!
//! Why no thread of its own: the real app's renderer is another process, so its replies
//! arrive later; this owner is in-process, and a thread of its own only added two
//! context switches to every canvas call (half the throughput of `canvas_list`, measured
//! by the bench's `--handoffs queued` baseline). One lock serializes all projects, as the
//! one thread did. A panic while applying poisons the lock, and every later request is
//! then refused as "The canvas has stopped", as when that thread died.
//!
//! The runtime's 10 s acknowledgement wait starts only once `send` has returned, so a
//! request that waits for the lock is bounded instead by whoever holds it (at most
//! `BROWSER_OPEN_WAIT` for a `browser_open` of another project; a project's own requests
//! already come one at a time from its queue); one that got the lock after its
//! `expiresAt` is refused with nothing applied, as before.
//!
//! Side effects, in the order done:
//! - `terminal_open`: the node is added, then its shell starts in the project folder (the
//!   PTY request goes through `runtime.prepare`); if it cannot start, the node is removed.
//! - `agent_launch`: the same with the node's `data.command`; `prepare` provisions the
//!   agent's session and rewrites the command.
//! - `terminal_close`: the session is ended, the node removed, then `runtime.revoke`.
//! - `browser_open`: refused (nothing added) when there is no Chromium; else the node is
//!   added and its tab's page opens; the owner waits for it up to `BROWSER_OPEN_WAIT`
//!   so that starting Chromium fits in the request (the runtime then waits for the guest).
//! - `canvas_list`: terminal nodes carry `session: {backend, live, warm}`, or for one
//!   whose program ended `{backend, live: false, ended: {status} | {signal}, endedAt}`
//!   (`endedAt` an RFC 3339 UTC time); `null` without a session (not saved). A live
//!   shell terminal's (not an agent's) also has `shell`: its integration and last
//!   command ([`ShellStatus::to_json`]): at least what a call last answered about it,
//!   else as of at most 250 ms ago.
//!
//! A terminal's program ending by itself is reported by the terminals' watcher to
//! [`HeadlessCanvas::terminal_ended`]: its end and last screen are saved with the canvas
//! (under the lock), then the runtime is told (outside it), which sets or revokes an
//! agent's status.
//!
//! The runtime owns the owner (through the host) and the owner needs the runtime to
//! reply: the cycle is broken by a `OnceLock<Weak<AgentToolRuntime>>` set after both exist.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::base::terminal_text::escape_for_terminal;
use crate::host::browser::document_url_allowed;
use crate::host::browser::guests::{ChromiumBrowsers, BROWSER_OPEN_WAIT};
use crate::host::canvas::{Canvas, Node, NodeKind};
use crate::host::isolation::{Mode, Status};
use crate::host::terminals::shell::ShellStatus;
use crate::host::terminals::{rfc3339_utc, EndedTerminal, HostTerminals, SessionState};
use crate::host::workspace::HostWorkspace;
use crate::host::worktrees::Worktrees;
use crate::host::HostError;
use crate::protocol::{CanvasToolReply, CanvasToolRequest, ToolIdentity, ToolResult, ToolSession};
use crate::runtime::{unix_millis, LAUNCHER_NAME, URL_NOT_ALLOWED};
use crate::runtime::{AgentToolRuntime, CanvasOwner, CanvasReplier, PtyRequest, Workspace as _};

/// The sender id the owner answers with (there is one canvas view per project).
pub const CANVAS_SENDER_ID: u64 = 1;

/// The answer to a request that arrived after its `expiresAt`.
pub const EXPIRED: &str =
    "The canvas received this request after it expired; nothing was applied. Inspect the canvas before retrying.";

/// How long a `canvas_list` answer is reused while nothing was applied to its project:
/// what it shows of terminals (tmux's listing) is then at most this much older than a
/// fresh answer's.
pub const LIST_REUSE: Duration = Duration::from_millis(500);

/// What the owner holds: the canvases, and handles to publish and act through.
pub struct OwnerState {
    /// Project id -> (project folder, canvas).
    canvases: HashMap<String, (PathBuf, Canvas)>,
    /// Project id -> its last `canvas_list` answer, when it was made and the terminals'
    /// [`HostTerminals::changes`] then, kept while nothing else ran under the lock
    /// ([`CanvasOwner::current_list`]).
    lists: HashMap<String, (Instant, u64, Arc<Value>)>,
    workspace: Arc<HostWorkspace>,
    terminals: Arc<HostTerminals>,
    browsers: Arc<ChromiumBrowsers>,
    runtime: Arc<OnceLock<Weak<AgentToolRuntime>>>,
    /// Project id -> its agents' git worktrees.
    worktrees: HashMap<String, Arc<Worktrees>>,
    /// Every launched agent gets a worktree (`serve --worktrees`), unless its call says
    /// `worktree: false`.
    worktree_default: bool,
}

/// The [`CanvasOwner`] of the default host; see the module docs.
pub struct HeadlessCanvas {
    /// `None` once stopped.
    state: Mutex<Option<OwnerState>>,
    workspace: Arc<HostWorkspace>,
    runtime: Arc<OnceLock<Weak<AgentToolRuntime>>>,
}

/// Why a request or job was not run: stopped, or an earlier one panicked.
const STOPPED: &str = "The canvas has stopped";

impl HeadlessCanvas {
    /// Makes the owner (with no projects yet).
    pub fn new(
        workspace: Arc<HostWorkspace>,
        terminals: Arc<HostTerminals>,
        browsers: Arc<ChromiumBrowsers>,
    ) -> Arc<HeadlessCanvas> {
        let runtime = Arc::new(OnceLock::new());
        let state = OwnerState {
            canvases: HashMap::new(),
            lists: HashMap::new(),
            workspace: workspace.clone(),
            terminals,
            browsers,
            runtime: runtime.clone(),
            worktrees: HashMap::new(),
            worktree_default: false,
        };
        Arc::new(HeadlessCanvas {
            state: Mutex::new(Some(state)),
            workspace,
            runtime,
        })
    }

    /// Gives the owner the runtime it answers through (once; later calls are ignored).
    pub fn attach_runtime(&self, runtime: &Arc<AgentToolRuntime>) {
        let _ = self.runtime.set(Arc::downgrade(runtime));
    }

    /// Loads the folder project at `project_dir` with the agent nodes `agents` (see
    /// [`Canvas::load_with_agents`]) and hands its canvas to the owner. Returns the
    /// project id. A corrupt `project.json` is an error naming the file, which is left
    /// untouched.
    pub fn add_project(
        &self,
        project_dir: &Path,
        project_id: Option<&str>,
        agents: &[(&str, &str)],
    ) -> Result<String, HostError> {
        let folder = project_dir.canonicalize().map_err(|e| {
            HostError::Other(format!(
                "the project folder {} cannot be opened: {e}",
                project_dir.display()
            ))
        })?;
        let canvas = Canvas::load_with_agents(&folder, project_id, agents)?;
        for warning in canvas.warnings() {
            // A warning may quote the canvas file's contents.
            let warning = escape_for_terminal(&warning.to_string()).into_owned();
            eprintln!("termsprawl-tools: {}: {warning}", canvas.file().display());
        }
        let id = canvas.project_id().to_string();
        let taken = id.clone();
        let added = self.with(move |state| {
            if state.canvases.contains_key(&taken) {
                return Err(HostError::Other(format!("project {taken} is already open")));
            }
            for node in canvas.nodes() {
                for tab in node.data.tabs.iter().flatten() {
                    state.browsers.register(&node.id, &tab.id, &tab.url);
                }
            }
            let worktrees = Arc::new(Worktrees::new(&folder));
            state.workspace.publish_worktrees(&taken, worktrees.facts());
            state.worktrees.insert(taken.clone(), worktrees);
            state.canvases.insert(taken.clone(), (folder, canvas));
            state.publish(&taken);
            Ok(())
        })?;
        added.map(|()| id)
    }

    /// Every agent launched from now on works in a git worktree of its own (`serve
    /// --worktrees`), unless its call says `worktree: false`.
    pub fn set_worktree_default(&self, every_launch: bool) -> Result<(), HostError> {
        self.with(move |state| state.worktree_default = every_launch)
    }

    /// Runs `job` with the canvases, under the owner's lock, and returns its result.
    pub fn with<T>(&self, job: impl FnOnce(&mut OwnerState) -> T) -> Result<T, HostError> {
        let mut state = self.lock().map_err(|_| HostError::Stopped)?;
        let state = state.as_mut().ok_or(HostError::Stopped)?;
        // The job may change any canvas (or a terminal's recorded end).
        state.lists.clear();
        Ok(job(state))
    }

    /// [`with`](Self::with) for a job that only reads (the reused `canvas_list` answers
    /// stay).
    pub fn read<T>(&self, job: impl FnOnce(&OwnerState) -> T) -> Result<T, HostError> {
        let state = self.lock().map_err(|_| HostError::Stopped)?;
        Ok(job(state.as_ref().ok_or(HostError::Stopped)?))
    }

    /// Terminal node `node_id`'s program ended by itself (the terminals' watcher says so):
    /// keeps the end with its canvas, then tells the runtime (which updates an agent's
    /// status). Nothing when the node is on no canvas (closed meanwhile) or the owner
    /// has stopped.
    pub fn terminal_ended(&self, node_id: &str, ended: &EndedTerminal) {
        let recorded = self.with(|state| state.record_ended(node_id, ended));
        let Ok((true, Some(runtime))) = recorded else {
            return;
        };
        runtime.terminal_ended(node_id, ended.end, &ended.last_screen);
    }

    /// Stops the owner once the request or job in progress is done: later ones are
    /// refused. Idempotent.
    pub fn stop(&self) {
        let stopped = match self.state.lock() {
            Ok(mut state) => state.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        drop(stopped);
    }

    /// The state, unless an earlier request or job panicked while holding it (then it
    /// may be half-changed and is never used again).
    fn lock(&self) -> Result<MutexGuard<'_, Option<OwnerState>>, &'static str> {
        self.state.lock().map_err(|_| STOPPED)
    }
}

impl CanvasOwner for HeadlessCanvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        self.workspace.project(project_id).map(|_| CANVAS_SENDER_ID)
    }

    /// Applies `request` now and replies before returning (module docs).
    fn send(
        &self,
        _target: u64,
        request: CanvasToolRequest,
        replier: CanvasReplier,
    ) -> Result<(), String> {
        let mut state = self.lock()?;
        state.as_mut().ok_or(STOPPED)?.handle(request, &replier);
        Ok(())
    }

    /// The project's last `canvas_list` answer, if nothing but `canvas_list` ran for it
    /// since, nothing changed in the terminals (a write, a command's record moving on),
    /// it is younger than [`LIST_REUSE`] and the canvas has no browser (whose pages
    /// change by themselves). `None` at once while a request is being applied.
    fn current_list(&self, project_id: &str) -> Option<Arc<Value>> {
        let state = self.state.try_lock().ok()?;
        let state = state.as_ref()?;
        let (made, changes, list) = state.lists.get(project_id)?;
        let current = made.elapsed() < LIST_REUSE && *changes == state.terminals.changes();
        current.then(|| Arc::clone(list))
    }
}

impl OwnerState {
    /// The canvas of project `project_id`.
    pub fn canvas(&self, project_id: &str) -> Option<&Canvas> {
        self.canvases.get(project_id).map(|(_, canvas)| canvas)
    }

    /// The agents' worktrees of project `project_id`.
    pub fn worktrees(&self, project_id: &str) -> Option<Arc<Worktrees>> {
        self.worktrees.get(project_id).cloned()
    }

    /// The folder of project `project_id`.
    pub fn folder(&self, project_id: &str) -> Option<&Path> {
        self.canvases
            .get(project_id)
            .map(|(folder, _)| folder.as_path())
    }

    /// The open project ids, sorted.
    pub fn project_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.canvases.keys().cloned().collect();
        ids.sort();
        ids
    }

    fn runtime(&self) -> Option<Arc<AgentToolRuntime>> {
        self.runtime.get()?.upgrade()
    }

    /// Saves `ended` with the canvas holding terminal node `node_id`. Returns whether such
    /// a node was found, and the runtime to tell. A failed save is logged: the end is
    /// still known to the terminals until the host stops.
    fn record_ended(
        &mut self,
        node_id: &str,
        ended: &EndedTerminal,
    ) -> (bool, Option<Arc<AgentToolRuntime>>) {
        let found = self
            .canvases
            .values_mut()
            .find(|(_, canvas)| canvas.node(node_id).is_some());
        let Some((_, canvas)) = found else {
            return (false, None);
        };
        if let Err(error) = canvas.record_ended(node_id, ended) {
            eprintln!("termsprawl-tools: terminal {node_id} ended but its last screen was not saved: {error}");
        }
        eprintln!(
            "termsprawl-tools: terminal {node_id}: its program ended ({})",
            ended.end.describe()
        );
        (true, self.runtime())
    }

    /// Tells the workspace which nodes project `project_id` has now.
    fn publish(&self, project_id: &str) {
        if let Some((folder, canvas)) = self.canvases.get(project_id) {
            let ids = canvas.nodes().iter().map(|n| n.id.clone()).collect();
            self.workspace.publish(project_id, folder.clone(), ids);
        }
    }

    /// Puts agent node `node_id` (no process of its own; `data.agentId = agent`) on project
    /// `project_id`'s canvas unless a terminal with that id is there already.
    pub fn add_agent_node(
        &mut self,
        project_id: &str,
        node_id: &str,
        agent: &str,
    ) -> Result<bool, HostError> {
        let (_, canvas) = self
            .canvases
            .get_mut(project_id)
            .ok_or_else(|| HostError::Other(format!("project {project_id} is not open")))?;
        let added = canvas.add_agent_node(node_id, agent)?;
        self.publish(project_id);
        Ok(added)
    }

    /// At host start: keeps the sessions of terminal nodes still on a canvas and ends the
    /// rest; re-provisions agents whose session survived (their token is reused, or they
    /// get needs-setup if they predate their credentials); starts a fresh shell for every
    /// plain shell node without a session; resumes the persisted session of agents that run
    /// elsewhere (`--agent` nodes: `agentId`, no command). Agent nodes without a session are not
    /// relaunched (that would start a paid agent unasked): they stay on the canvas until
    /// closed. Returns what was done, one line each, for the log.
    pub fn restore_terminals(&mut self) -> Vec<String> {
        let mut log = Vec::new();
        let terminals: Vec<(String, PathBuf, Node)> = self
            .canvases
            .iter()
            .flat_map(|(project_id, (folder, canvas))| {
                canvas
                    .nodes()
                    .iter()
                    .filter(|n| n.kind == NodeKind::Terminal)
                    .map(move |n| (project_id.clone(), folder.clone(), n.clone()))
            })
            .collect();
        let on_canvas = |name: &str| terminals.iter().any(|(_, _, n)| n.id == name);
        match self.terminals.adopt(&on_canvas) {
            Ok(kept) if !kept.is_empty() => log.push(format!("kept sessions {}", kept.join(", "))),
            Ok(_) => {}
            Err(error) => log.push(format!("could not list earlier sessions: {error}")),
        }
        for (_, canvas) in self.canvases.values() {
            for (id, ended) in canvas.ended_terminals() {
                self.terminals.remember(id, ended.clone());
            }
        }
        let Some(runtime) = self.runtime() else {
            return log;
        };
        let states = self.terminals.states();
        for (project_id, folder, node) in terminals {
            let command = node.data.command.clone().filter(|c| !c.trim().is_empty());
            // Ended (recorded, or a tmux pane that died while no host ran): it keeps its
            // last screen, nothing is started; an agent keeps the status it had saved.
            let state = states.get(&node.id);
            if state.is_some_and(|s| !s.live && (s.ended.is_some() || command.is_some())) {
                let how = state
                    .and_then(|s| s.ended)
                    .map_or("ended".into(), |(end, _)| end.describe());
                log.push(format!(
                    "terminal {} has ended ({how}); kept until closed",
                    node.id
                ));
                if node.data.agent_id.is_some() {
                    if let Some(line) = resume_session(&runtime, &project_id, &node.id) {
                        log.push(line);
                    }
                }
                continue;
            }
            let alive = self.terminals.has_session(&node.id);
            if alive {
                // A session kept from before may have another size (an earlier host's).
                fit_terminal(&self.terminals, &node);
            }
            match (alive, command, node.data.agent_id.is_some()) {
                (true, Some(command), _) => {
                    let request = PtyRequest {
                        node_id: node.id.clone(),
                        project_id: Some(project_id),
                        command: Some(command),
                        env: BTreeMap::new(),
                    };
                    if let Err(error) = runtime.prepare(request) {
                        log.push(format!("agent {}: {error}", node.id));
                    }
                }
                (true, None, _) => {}
                (false, None, false) => {
                    // Who opened it is not kept: restarted, it is confined as an agent's
                    // (the person opens an unconfined one from the view).
                    let place = (project_id.as_str(), folder.as_path());
                    let started = start_session(
                        &self.terminals,
                        &runtime,
                        place,
                        &node,
                        StartedBy::Launch,
                        None,
                    );
                    match started {
                        Ok(_) => log.push(format!("started a fresh shell for {}", node.id)),
                        Err(error) => log.push(format!("could not start {}: {error}", node.id)),
                    }
                }
                (false, Some(_), _) => log.push(format!(
                    "agent node {} has no running session; close it and launch the agent again",
                    node.id
                )),
                // An agent that runs elsewhere (`serve --agent`): no process of its own;
                // its persisted session (token and status) is taken up again.
                (false, None, true) => {
                    if let Some(line) = resume_session(&runtime, &project_id, &node.id) {
                        log.push(line);
                    }
                }
            }
        }
        log
    }

    /// Applies one request with its side effects, or refuses it (nothing applied) when it
    /// arrived after its `expiresAt`.
    pub fn answer(&mut self, request: &CanvasToolRequest) -> ToolResult {
        let result = if unix_millis() > request.expires_at {
            Err(EXPIRED.to_string())
        } else {
            self.apply(request)
        };
        match result {
            Ok(value) => ToolResult::Ok(value),
            Err(error) => ToolResult::Err(error),
        }
    }

    /// Answers one request through the runtime's reply path.
    fn handle(&mut self, request: CanvasToolRequest, replier: &CanvasReplier) {
        let result = self.answer(&request);
        let reply = CanvasToolReply {
            request_id: request.request_id,
            result,
        };
        // Refused only when nobody waits any more (the runtime stopped meanwhile).
        let _ = replier.reply(reply);
    }

    fn apply(&mut self, request: &CanvasToolRequest) -> Result<Value, String> {
        let project_id = request.project_id.as_str();
        let operation = request.operation.as_str();
        let args = &request.args;
        let runtime = self.runtime();
        let terminals = self.terminals.clone();
        let browsers = self.browsers.clone();
        let worktree_default = self.worktree_default;
        let workspace = self.workspace.clone();
        let (folder, canvas) = self
            .canvases
            .get_mut(project_id)
            .ok_or("The project's canvas is not open")?;
        let worktrees = match self.worktrees.get(project_id) {
            Some(worktrees) => worktrees.clone(),
            None => Arc::new(Worktrees::new(folder)),
        };
        if operation != "canvas_list" {
            self.lists.remove(project_id);
        }
        let result = match operation {
            "canvas_list" => {
                sync_tabs(canvas, &browsers);
                // Taken first: a change while listing makes the answer not reused.
                let changes = terminals.changes();
                let list = with_sessions(canvas.apply(operation, args)?, &terminals);
                let (list, has_worktrees) = with_worktrees(list, &worktrees);
                let list = with_attention(list, runtime.clone(), project_id);
                workspace.publish_worktrees(project_id, worktrees.facts());
                let has_browser = canvas.nodes().iter().any(|n| n.kind == NodeKind::Browser);
                // A worktree's state changes with no call (the agent commits): not kept.
                if !has_browser && !has_worktrees {
                    let made = (Instant::now(), changes, Arc::new(list.clone()));
                    self.lists.insert(project_id.to_string(), made);
                }
                return Ok(list);
            }
            "terminal_open" | "agent_launch" => {
                let created = canvas.apply(operation, args)?;
                let node_id = created
                    .get("nodeId")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                // An agent launched in a worktree of its own, and a terminal an agent opens
                // in that agent's worktree.
                let worktree = match (operation, request.caller.as_deref()) {
                    ("agent_launch", _) => {
                        let wanted = args
                            .get("worktree")
                            .and_then(Value::as_bool)
                            .unwrap_or(worktree_default);
                        let branch = args.get("branch").and_then(Value::as_str);
                        match wanted {
                            true => match worktrees.create(&node_id, branch) {
                                Ok(made) => {
                                    workspace.publish_worktrees(project_id, worktrees.facts());
                                    Some(made.path)
                                }
                                Err(error) => {
                                    let _ = canvas.remove_node(&node_id);
                                    return Err(format!("{error}; no node was added"));
                                }
                            },
                            false => None,
                        }
                    }
                    (_, Some(caller)) => worktrees
                        .get(caller)
                        .map(|w| w.path)
                        .filter(|path| path.is_dir()),
                    _ => None,
                };
                let node = canvas.node(&node_id).cloned();
                let started = match (node, &runtime) {
                    (Some(node), Some(runtime)) => {
                        // The person's own terminals are theirs; anything an agent starts,
                        // and every agent, is confined.
                        let by = match (operation, request.caller.as_deref()) {
                            ("agent_launch", _) => StartedBy::Launch,
                            (_, Some(caller)) => StartedBy::Agent(caller),
                            (_, None) => StartedBy::Person,
                        };
                        let place = (project_id, folder.as_path());
                        start_session(&terminals, runtime, place, &node, by, worktree.as_deref())
                    }
                    _ => Err("The host is stopping".to_string()),
                };
                match started {
                    // Said in the answer (and so in the trail) only when not confined:
                    // a confined terminal's answer stays the protocol's `{nodeId}`.
                    Ok(status) if status.mode == Mode::None => {
                        let mut created = created;
                        created["isolation"] = status.to_json();
                        Ok(created)
                    }
                    Ok(_) => Ok(created),
                    Err(error) => {
                        let _ = canvas.remove_node(&node_id);
                        Err(format!(
                            "The terminal could not be started ({error}); no node was added"
                        ))
                    }
                }
            }
            "browser_open" => {
                if let Some(why) = browsers.unavailable() {
                    return Err(format!("{why}; no browser node was added"));
                }
                let url = args.get("url").and_then(Value::as_str).unwrap_or("");
                // Refused before a node is made (the canvas view's port, say): a node whose
                // page can never load would only wait for a guest that never comes.
                if !document_url_allowed(url) {
                    return Err(format!(
                        "{URL_NOT_ALLOWED}: this host's browser may not open it; no browser node was added"
                    ));
                }
                let created = canvas.apply(operation, args)?;
                let field = |key: &str| created.get(key).and_then(Value::as_str).unwrap_or("");
                // Waiting here (bounded) lets a cold Chromium start within the request.
                let page = browsers.open(field("nodeId"), field("tabId"), url);
                let _ = page.recv_timeout(BROWSER_OPEN_WAIT);
                Ok(created)
            }
            "terminal_close" => {
                let node_id = args.get("nodeId").and_then(Value::as_str).unwrap_or("");
                let is_terminal = canvas
                    .node(node_id)
                    .is_some_and(|n| n.kind == NodeKind::Terminal);
                if is_terminal {
                    if let Err(error) = terminals.close(node_id) {
                        return Err(format!(
                            "Could not end terminal {node_id}'s session ({error}); the node was kept"
                        ));
                    }
                }
                let closed = canvas.apply(operation, args);
                if closed.is_ok() {
                    if let Some(runtime) = &runtime {
                        runtime.revoke(node_id);
                    }
                }
                closed
            }
            "canvas_resize" => {
                let resized = canvas.apply(operation, args);
                let node_id = args.get("nodeId").and_then(Value::as_str).unwrap_or("");
                if let (Ok(_), Some(node)) = (&resized, canvas.node(node_id)) {
                    fit_terminal(&terminals, node);
                }
                resized
            }
            _ => canvas.apply(operation, args),
        };
        self.publish(project_id);
        result
    }
}

/// Provisions agent `node_id` again from its persisted session file, when that names the
/// same node and project (the token is reused). Returns a line for the log.
fn resume_session(runtime: &AgentToolRuntime, project_id: &str, node_id: &str) -> Option<String> {
    let server = runtime.server();
    let file = server.session_file(node_id).ok()?;
    let saved = crate::base::files::read_json(&file).ok()??;
    let saved: ToolSession = serde_json::from_value(saved).ok()?;
    if saved.node_id != node_id || saved.project_id != project_id {
        return None;
    }
    let identity = ToolIdentity {
        node_id: node_id.to_string(),
        project_id: project_id.to_string(),
    };
    Some(match server.provision(&identity, saved.status, true) {
        Ok(_) => format!("resumed the session of agent {node_id}"),
        Err(error) => format!("could not resume agent {node_id}: {error}"),
    })
}

/// Who a terminal is started for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StartedBy<'a> {
    /// The person, from the view: their own terminal, not confined.
    Person,
    /// This agent's call (`terminal_open`): its hands, confined, with its own session.
    Agent(&'a str),
    /// An agent the node runs (`agent_launch`), or a shell restarted for a node whose
    /// opener is not kept: confined.
    Launch,
}

/// Starts `node`'s session in `folder`: its `data.command` (an agent) or a shell, with the
/// environment the runtime's `prepare` gives it, confined unless the person opened it
/// (see [`HostTerminals::confinement`]); returns how it is confined. A terminal an agent opens carries that agent's
/// session (`TERMSPRAWL_SESSION_FILE`, `TERMSPRAWL_CTL`), so its `termsprawlctl` calls
/// there are its own.
fn start_session(
    terminals: &HostTerminals,
    runtime: &AgentToolRuntime,
    (project_id, folder): (&str, &Path),
    node: &Node,
    by: StartedBy<'_>,
    worktree: Option<&Path>,
) -> Result<Status, String> {
    let request = PtyRequest {
        node_id: node.id.clone(),
        project_id: Some(project_id.to_string()),
        command: node.data.command.clone().filter(|c| !c.trim().is_empty()),
        env: BTreeMap::new(),
    };
    let mut prepared = runtime.prepare(request).map_err(|e| e.to_string())?;
    if let StartedBy::Agent(caller) = by {
        let server = runtime.server();
        if let Ok(file) = server.session_file(caller) {
            let launcher = server.directory().join(LAUNCHER_NAME);
            let text = |path: &Path| path.to_string_lossy().into_owned();
            prepared
                .env
                .insert("TERMSPRAWL_SESSION_FILE".into(), text(&file));
            prepared
                .env
                .insert("TERMSPRAWL_CTL".into(), text(&launcher));
        }
    }
    let command = prepared.command.as_deref();
    let size = node.size.terminal_grid();
    let session_file = prepared.env.get("TERMSPRAWL_SESSION_FILE").map(Path::new);
    let agent = by != StartedBy::Person;
    let confinement = terminals.confinement(&node.id, folder, agent, session_file, worktree)?;
    let cwd = worktree.unwrap_or(folder);
    terminals.start(&node.id, cwd, &prepared.env, command, size, &confinement)?;
    Ok(confinement.status)
}

/// Sizes `node`'s terminal, if it is one, to the node ([`Size::terminal_grid`]). A
/// failure is logged: the node keeps its size either way.
///
/// [`Size::terminal_grid`]: crate::host::canvas::Size::terminal_grid
fn fit_terminal(terminals: &HostTerminals, node: &Node) {
    if node.kind != NodeKind::Terminal {
        return;
    }
    if let Err(error) = terminals.resize(&node.id, node.size.terminal_grid()) {
        let error = escape_for_terminal(&error).into_owned();
        eprintln!(
            "termsprawl-tools: terminal {}: cannot resize it: {error}",
            node.id
        );
    }
}

/// Brings every browser tab of `canvas` up to date with its open page's URL and title
/// (after `browser_navigate`, a link followed or a redirect), so that `canvas_list`, the
/// canvas view and the next start show where the page really is. A save that fails is
/// logged and retried at the next sync; the page itself is unaffected.
pub(crate) fn sync_tabs(canvas: &mut Canvas, browsers: &ChromiumBrowsers) {
    let mut current = Vec::new();
    for node in canvas
        .nodes()
        .iter()
        .filter(|n| n.kind == NodeKind::Browser)
    {
        for tab in node.data.tabs.iter().flatten() {
            let page = browsers.page_info(&node.id, &tab.id, false);
            // An error page's own address (chrome-error://) is not where the tab is.
            if let Some(page) = page.filter(|p| document_url_allowed(&p.url)) {
                current.push((node.id.clone(), tab.id.clone(), page));
            }
        }
    }
    for (node_id, tab_id, page) in current {
        if let Err(error) = canvas.set_tab_page(&node_id, &tab_id, &page.url, &page.title) {
            eprintln!("termsprawl-tools: browser {node_id}: cannot record its page: {error}");
        }
    }
}

/// `canvas_list`'s nodes with each agent's `worktree` where it has one, and whether any
/// has one.
pub(crate) fn with_worktrees(mut list: Value, worktrees: &Worktrees) -> (Value, bool) {
    let mut states = worktrees.states();
    let any = !states.is_empty();
    for node in list.as_array_mut().into_iter().flatten() {
        let id = node["id"].as_str().unwrap_or_default();
        if let Some(state) = states.remove(id) {
            if let Some(object) = node.as_object_mut() {
                object.insert("worktree".into(), state);
            }
        }
    }
    (list, any)
}

/// `canvas_list`'s agent nodes with what each agent is doing for the person
/// (`attention`, as `agent_status` gives it). A kept answer may show it up to
/// [`LIST_REUSE`] late.
fn with_attention(
    mut list: Value,
    runtime: Option<Arc<AgentToolRuntime>>,
    project_id: &str,
) -> Value {
    let Some(runtime) = runtime else {
        return list;
    };
    let mut states: HashMap<String, Value> = (runtime.agent_states(project_id).into_iter())
        .map(|(node_id, state)| (node_id, state.to_json()))
        .collect();
    for node in list.as_array_mut().into_iter().flatten() {
        let id = node["id"].as_str().unwrap_or_default();
        if let Some(state) = states.remove(id) {
            if let Some(object) = node.as_object_mut() {
                object.insert("attention".into(), state);
            }
        }
    }
    list
}

/// `canvas_list`'s nodes with each terminal's `session` (see the module docs; `null`
/// when it has none).
pub(crate) fn with_sessions(list: Value, terminals: &HostTerminals) -> Value {
    let is_terminal = |n: &Value| n["type"] == "terminal";
    let lists_terminal = list
        .as_array()
        .is_some_and(|nodes| nodes.iter().any(is_terminal));
    if !lists_terminal {
        // Nothing to annotate: don't ask the backend (for tmux, that is a process).
        return list;
    }
    with_states(list, terminals.backend_name(), &terminals.states())
}

/// `list` with each terminal node's `session` taken from `states`.
pub(crate) fn with_states(
    mut list: Value,
    backend: &str,
    states: &HashMap<String, SessionState>,
) -> Value {
    for node in list.as_array_mut().into_iter().flatten() {
        if node["type"] != "terminal" {
            continue;
        }
        let id = node["id"].as_str().unwrap_or_default();
        // An agent's terminal runs the agent, not a shell: no commands to report.
        let shell_terminal = node["data"]["agentId"].is_null();
        let session = states
            .get(id)
            .map(|state| session_json(backend, state, shell_terminal));
        if let Some(object) = node.as_object_mut() {
            object.insert("session".into(), session.unwrap_or(Value::Null));
        }
    }
    list
}

/// One terminal's `session` in `canvas_list`.
fn session_json(backend: &str, state: &SessionState, shell_terminal: bool) -> Value {
    match state.ended {
        Some((end, at)) => json!({
            "backend": backend,
            "live": false,
            "ended": end.to_json(),
            "endedAt": rfc3339_utc(at),
        }),
        None => {
            let mut session = json!({ "backend": backend, "live": state.live, "warm": state.warm });
            if shell_terminal && state.live {
                let shell = state.shell.as_ref().unwrap_or(&ShellStatus::NONE);
                session["shell"] = shell.to_json();
            }
            if let Some(isolation) = &state.isolation {
                session["isolation"] = isolation.to_json();
            }
            session
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::terminals::TerminalsMode;
    use serde_json::Map;

    fn request(
        project_id: &str,
        operation: &str,
        args: Value,
        expires_at: u64,
    ) -> CanvasToolRequest {
        CanvasToolRequest {
            request_id: "r1".into(),
            project_id: project_id.into(),
            expires_at,
            operation: operation.into(),
            args: args.as_object().cloned().unwrap_or_else(Map::new),
            caller: None,
        }
    }

    /// An owner with one project `p1` in a fresh folder: (root, workspace, owner, id).
    fn owner(name: &str) -> (PathBuf, Arc<HostWorkspace>, Arc<HeadlessCanvas>, String) {
        let root = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("project")).unwrap();
        let workspace = Arc::new(HostWorkspace::new(false));
        let terminals =
            Arc::new(HostTerminals::new(TerminalsMode::Pty, &root.join("data")).unwrap());
        let browsers = Arc::new(ChromiumBrowsers::new(&root.join("data")));
        let canvas = HeadlessCanvas::new(workspace.clone(), terminals, browsers);
        let id = canvas
            .add_project(&root.join("project"), Some("p1"), &[])
            .unwrap();
        (root, workspace, canvas, id)
    }

    #[test]
    fn expired_requests_are_refused_and_change_nothing() {
        let (root, workspace, canvas, id) = owner("canvas-owner");
        assert_eq!(canvas.target(&id), Some(CANVAS_SENDER_ID));
        assert_eq!(canvas.target("other"), None);
        let file = root.join("project/.termsprawl/project.json");
        let before = std::fs::read(&file).unwrap();

        let late = request(
            &id,
            "sticky_open",
            json!({"text": "late"}),
            unix_millis() - 1,
        );
        let answer = canvas.with(move |state| state.answer(&late)).unwrap();
        assert_eq!(answer, ToolResult::Err(EXPIRED.into()));
        assert_eq!(std::fs::read(&file).unwrap(), before);

        let timely = request(
            &id,
            "sticky_open",
            json!({"text": "on time"}),
            unix_millis() + 9_000,
        );
        let answer = canvas.with(move |state| state.answer(&timely)).unwrap();
        let ToolResult::Ok(created) = answer else {
            panic!("{answer:?}")
        };
        let node_id = created["nodeId"].as_str().unwrap().to_string();
        assert!(workspace.project(&id).unwrap().node_ids.contains(&node_id));
        assert_ne!(std::fs::read(&file).unwrap(), before);

        // A project the owner does not have is refused; a second add of one it has, too.
        let stray = request("nope", "canvas_list", json!({}), unix_millis() + 9_000);
        let answer = canvas.with(move |state| state.answer(&stray)).unwrap();
        assert!(matches!(answer, ToolResult::Err(_)));
        assert!(canvas
            .add_project(&root.join("project"), Some("p1"), &[])
            .is_err());
        canvas.stop();
        assert!(matches!(canvas.with(|_| ()), Err(HostError::Stopped)));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_canvas_list_is_reused_only_while_nothing_else_ran() {
        let (root, _, canvas, id) = owner("canvas-reuse");
        let send = |operation: &str, args: Value| {
            let request = request(&id, operation, args, unix_millis() + 9_000);
            let replier = CanvasReplier::unconnected(CANVAS_SENDER_ID);
            canvas.send(CANVAS_SENDER_ID, request, replier).unwrap();
        };
        assert_eq!(canvas.current_list(&id), None, "nothing listed yet");
        send("canvas_list", json!({}));
        assert_eq!(canvas.current_list(&id).as_deref(), Some(&json!([])));
        // Anything else applied drops it; the next list is the new one.
        send("sticky_open", json!({"text": "x"}));
        assert_eq!(canvas.current_list(&id), None);
        send("canvas_list", json!({}));
        let reused = canvas.current_list(&id).unwrap();
        assert_eq!(reused.as_array().map(Vec::len), Some(1), "{reused}");
        // A job that only reads keeps it; one that may change the canvases drops it.
        canvas.read(|_| ()).unwrap();
        assert!(canvas.current_list(&id).is_some());
        canvas.with(|_| ()).unwrap();
        assert_eq!(canvas.current_list(&id), None);
        // While a request is being applied: `None` at once, without waiting.
        send("canvas_list", json!({}));
        let applying = canvas.state.lock().unwrap();
        assert_eq!(canvas.current_list(&id), None);
        drop(applying);
        assert!(canvas.current_list(&id).is_some());
        // Older than LIST_REUSE: not reused.
        std::thread::sleep(LIST_REUSE);
        assert_eq!(canvas.current_list(&id), None);
        // A canvas with a browser node is never reused (its pages change by themselves).
        let args = json!({"url": "https://example.com/"});
        let added = canvas.with(move |state| {
            let (_, project) = state.canvases.get_mut("p1").unwrap();
            project.apply("browser_open", args.as_object().unwrap())
        });
        assert!(matches!(added, Ok(Ok(_))), "{added:?}");
        send("canvas_list", json!({}));
        assert_eq!(canvas.current_list(&id), None);
        canvas.stop();
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn after_a_panic_while_applying_nothing_more_is_applied() {
        let (root, _, canvas, id) = owner("canvas-panic");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            canvas.with(|_| panic!("half-way through a change"))
        }));
        assert!(panicked.is_err());
        // The canvases may be half-changed: refused from now on, as a dead thread was.
        assert!(matches!(canvas.with(|_| ()), Err(HostError::Stopped)));
        let sticky = request(
            &id,
            "sticky_open",
            json!({"text": "x"}),
            unix_millis() + 9_000,
        );
        assert_eq!(
            canvas.send(CANVAS_SENDER_ID, sticky, CanvasReplier::unconnected(1)),
            Err(STOPPED.to_string())
        );
        canvas.stop();
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn shell_terminals_list_their_last_command_and_agents_terminals_do_not() {
        use crate::runtime::{CommandRecord, CommandState, ShellIntegration};
        let record = CommandRecord {
            id: 4,
            command: "make".into(),
            state: CommandState::Exited,
            exit_code: Some(2),
            started_at: 1_000,
            ended_at: Some(4_000),
            cwd: Some("/src".into()),
            output: Default::default(),
            last_output_at: 3_000,
        };
        let live = |shell: Option<ShellStatus>| SessionState {
            isolation: None,
            live: true,
            warm: false,
            ended: None,
            shell,
        };
        let states = HashMap::from([
            (
                "shell".to_string(),
                live(Some(ShellStatus {
                    integration: ShellIntegration::Bash,
                    last: Some(record),
                })),
            ),
            ("agent".to_string(), live(Some(ShellStatus::NONE))),
            ("other".to_string(), live(None)),
        ]);
        let list = json!([
            {"id": "shell", "type": "terminal", "data": {}},
            {"id": "agent", "type": "terminal", "data": {"agentId": "claude"}},
            {"id": "other", "type": "terminal", "data": {}},
        ]);
        let list = with_states(list, "pty", &states);
        assert_eq!(
            list[0]["session"]["shell"],
            json!({"integration": "bash", "command": {
                "commandId": 4, "command": "make", "state": "exited", "exitCode": 2,
                "cwd": "/src", "durationMs": 3_000, "endedAt": "1970-01-01T00:00:04.000Z",
            }})
        );
        assert!(list[1]["session"].get("shell").is_none(), "{}", list[1]);
        // Nothing answers for it: nothing is claimed.
        assert_eq!(list[2]["session"]["shell"], json!({"integration": "none"}));
    }
}
