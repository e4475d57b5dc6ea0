//! The server's callbacks into the runtime, chiefly `execute`: the dispatch of accepted
//! operations, in the spec's order. First the live state is checked (the project is open
//! and local, the caller is still on its canvas), then each operation goes to the canvas
//! owner, a browser guest, a terminal session or is answered here.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::agents::find_preset;
use super::artifact::{check_artifact_path, check_upload_paths};
use super::canvas_node::node_field;
use super::commands::{typed_as_one, Watched};
use super::context::{last_chars, read_context, read_links};

/// The project's folder is not the one opened (see [`super::Workspace::state_intact`]).
const FOLDER_MOVED: &str = "The project's folder was moved or replaced since serve opened it: its links and transcripts are not read. Ask the person to restart serve in the project folder";
use super::host::{ProgramEnd, ProjectSnapshot, ShellIntegration, Terminals, Workspace};
use super::tool_runtime::{lock, Core};
use super::url::normalize_browser_url;
use crate::base::unix_millis;
use crate::messaging::{agents_of, Call, Delivery};
use crate::protocol::keys::{keys_text, KNOWN_KEYS};
use crate::protocol::{
    is_browser_operation, wait_timeout, IntegrationStatus, ToolIdentity, ToolRequest,
    BROWSER_CONTROL_OFF,
};
use crate::server::{Admission, Awaited, Execution, Outcome, ServerCallbacks, Wait};

/// How long a new terminal may take to become ready.
pub const TERMINAL_READY_TIMEOUT: Duration = Duration::from_secs(5);
/// `terminal_read` returns this many characters unless asked otherwise.
pub const DEFAULT_READ_CHARS: usize = 16_000;
/// `terminal_read` never returns more than this.
pub const MAX_READ_CHARS: usize = 100_000;
/// `terminal_read` with `search` returns at most this many lines unless asked otherwise.
pub const DEFAULT_MATCHES: u64 = 20;
/// The answer to `since` or `search` where the host keeps no output history.
const NO_HISTORY: &str = "This terminal keeps no output history (its host keeps none): read its screen with terminal_read without since or search";

const OWN_TERMINAL: &str =
    "Use a separate shell terminal instead of writing into or closing your own agent";
const NOT_ATTACHED: &str = "Terminal is not attached";
const SUBMIT_TO_SHELLS: &str =
    "Submit commands only into a plain shell terminal, not into an agent's terminal";
/// The answer to an agent's keys into a terminal the person is typing in.
pub const PERSON_TYPING: &str = "The person is typing in this terminal; try again shortly (agents' terminal_input and terminal_submit wait until the person has not typed there for 1.5 s)";
/// How long after the person's last key into a terminal agents' keys are refused there.
pub const PERSON_TYPING_WINDOW: Duration = Duration::from_millis(1500);
const CLAIM_FIRST: &str = "Claim this browser or ask its owner to transfer control first";

/// The answer to a write into a terminal whose program has ended. Closing it and opening
/// a new terminal is the one way to get a fresh shell (there is no respawn in place).
fn ended_error(end: ProgramEnd) -> String {
    format!(
        "The program in this terminal has ended ({}). Read its last screen with terminal_read, then close it or open a new terminal.",
        end.describe()
    )
}

fn data_field<'a>(node: &'a Value, key: &str) -> Option<&'a Value> {
    node.get("data")
        .and_then(|d| d.get(key))
        .filter(|v| !v.is_null())
}

/// The node list in a `canvas_list` answer (an array, or `{nodes: [...]}`).
fn nodes_of(list: &Value) -> &[Value] {
    list.as_array()
        .or_else(|| list.get("nodes").and_then(Value::as_array))
        .map_or(&[], Vec::as_slice)
}

fn find_node<'a>(nodes: &'a [Value], id: &str) -> Option<&'a Value> {
    nodes.iter().find(|n| node_field(n, "id") == Some(id))
}

fn arg<'a>(request: &'a ToolRequest, key: &str) -> &'a str {
    request.args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// An agent's terminal runs an agent command; a plain shell has neither.
fn is_agent_terminal(node: &Value) -> bool {
    data_field(node, "agentId").is_some()
        || data_field(node, "command")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.trim().is_empty())
}

impl Core {
    /// The caller's local project and its canvas list, once the caller is still on it:
    /// by the owner's current list if it shows the caller (no trip through the app), else
    /// by asking the owner.
    fn caller_canvas(&self, identity: &ToolIdentity) -> Result<(ProjectSnapshot, Value), String> {
        let project =
            (self.local_project(&identity.project_id)).ok_or("Local project not found")?;
        let current = self.host.canvas.current_list(&identity.project_id);
        let list = match current.filter(|l| find_node(nodes_of(l), &identity.node_id).is_some()) {
            Some(list) => Value::clone(&list),
            None => self.canvas(identity, "canvas_list", Map::new())?,
        };
        if find_node(nodes_of(&list), &identity.node_id).is_none() {
            return Err("Agent node is no longer on this canvas".into());
        }
        Ok((project, list))
    }
}

impl ServerCallbacks for Core {
    fn admission(&self, identity: &ToolIdentity, request: &ToolRequest) -> Admission {
        let terminals = &self.host.terminals;
        let unconfined = |node: &str| {
            terminals
                .isolation(node)
                .is_some_and(|isolation| isolation["mode"] == "none")
        };
        self.gate
            .admission(identity, request, self.server(), &unconfined)
    }

    fn offers(&self, identity: &ToolIdentity, operation: &str) -> bool {
        self.gate.offers(identity, operation)
    }

    fn policy_summary(&self, identity: &ToolIdentity) -> Option<Value> {
        self.gate.summary_for(identity)
    }

    fn isolation(&self, identity: &ToolIdentity) -> Option<Arc<Value>> {
        let own = self.host.terminals.isolation(&identity.node_id);
        // An agent with no terminal of this host's runs elsewhere (`serve --agent`).
        static ELSEWHERE: std::sync::OnceLock<Arc<Value>> = std::sync::OnceLock::new();
        own.or_else(|| {
            Some(Arc::clone(ELSEWHERE.get_or_init(|| {
                Arc::new(json!({"mode": "none", "boundary": false, "why": "not started by serve (serve --agent, or run elsewhere): not confined"}))
            })))
        })
    }

    fn worktree(&self, identity: &ToolIdentity) -> Option<Arc<Value>> {
        let workspace = &self.host.workspace;
        workspace.worktree(&identity.project_id, &identity.node_id)
    }

    fn attention(&self, identity: &ToolIdentity) -> Option<Value> {
        self.agent_state(&identity.project_id, &identity.node_id)
            .map(|state| state.to_json())
    }

    fn offers_generation(&self) -> u64 {
        self.gate.generation()
    }

    fn execute_or_wait(&self, identity: &ToolIdentity, request: &ToolRequest) -> Execution {
        let Some(timeout) = wait_timeout(&request.operation, &request.args) else {
            return Execution::Done(self.execute(identity, request));
        };
        let started = self
            .caller_canvas(identity)
            .and_then(|(_, list)| self.start_wait(identity, nodes_of(&list), request, timeout));
        started.map_or_else(|refused| Execution::Done(Err(refused)), Execution::Wait)
    }

    fn execute(&self, identity: &ToolIdentity, request: &ToolRequest) -> Result<Value, String> {
        // An agent saying what it does needs no canvas (nor its node on one).
        if request.operation == "agent_state" {
            let text = |key: &str| request.args.get(key).and_then(Value::as_str);
            let (project_id, node_id) = (&identity.project_id, &identity.node_id);
            let said = (
                text("state").unwrap_or_default(),
                text("why"),
                text("reason"),
            );
            self.attention
                .said(project_id, node_id, said.0, said.1, said.2, unix_millis());
            let attention = self.agent_state(project_id, node_id).map(|s| s.to_json());
            return Ok(json!({ "nodeId": node_id, "attention": attention }));
        }
        let (project, list) = self.caller_canvas(identity)?;
        let nodes = nodes_of(&list);
        if let Some(timeout) = wait_timeout(&request.operation, &request.args) {
            // Called directly (not through the server): wait on this thread.
            return self.start_wait(identity, nodes, request, timeout)?.block();
        }
        let operation = request.operation.as_str();
        match operation {
            "canvas_list" => Ok(list),
            "context_read" => {
                let cwd = self.intact_folder(&project, "context_read")?;
                Ok(read_context(cwd, &identity.node_id))
            }
            "artifact_open" => self.artifact_open(identity, &project, request),
            "agent_cards" | "agent_send" | "agent_task" | "agent_reply" => {
                self.message(identity, &project, nodes, request)
            }
            "agent_launch" => self.agent_launch(identity, request),
            "terminal_open" => {
                let opened = self.canvas(identity, operation, request.args.clone())?;
                if let Some(terminal) = opened.get("nodeId").and_then(Value::as_str) {
                    self.gate.opened(identity, terminal);
                }
                self.wait_for_terminal(opened)
            }
            "browser_list" => Ok(self.browser_list(nodes)),
            "browser_open" => self.browser_open(identity, request),
            op if is_browser_operation(op) => {
                self.browser_operation(identity, &project, nodes, request)
            }
            op if op.starts_with("terminal_") => self.terminal_operation(identity, nodes, request),
            _ => self.canvas(identity, operation, request.args.clone()),
        }
    }

    /// `canvas_list` from the owner's current list (`CanvasOwner::current_list`) while
    /// it still shows the caller: what `execute` would answer. While stopping it is
    /// queued, and refused there.
    fn answer_at_once(&self, identity: &ToolIdentity, request: &ToolRequest) -> Option<Arc<Value>> {
        if request.operation != "canvas_list" || self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let list = self.host.canvas.current_list(&identity.project_id)?;
        find_node(nodes_of(&list), &identity.node_id)?;
        Some(list)
    }

    fn valid(&self, identity: &ToolIdentity) -> bool {
        let node = &identity.node_id;
        let on_canvas = self.host.workspace.has_node(&identity.project_id, node);
        on_canvas.is_some_and(|on_canvas| on_canvas || lock(&self.active).contains(node))
    }

    fn why_invalid(&self, identity: &ToolIdentity) -> Option<String> {
        let (node, project) = (&identity.node_id, &identity.project_id);
        Some(match self.host.workspace.has_node(project, node) {
            None => format!("project {project} is not open and local in the host's Workspace"),
            Some(_) => format!(
                "node {node} is not on project {project}'s canvas in the host's Workspace snapshot"
            ),
        })
    }

    fn browser_enabled(&self) -> bool {
        self.host.workspace.browser_control_enabled()
    }

    fn on_status(&self, node_id: &str, status: &IntegrationStatus) {
        lock(&self.statuses).insert(node_id.to_string(), status.clone());
        self.host.workspace.status_changed(node_id, status);
    }

    fn may_connect(&self, node_id: &str) -> bool {
        self.host.terminals.ended(node_id).is_none()
    }
}

impl Core {
    /// An agent messaging operation (`crate::messaging`), given this project's agent
    /// nodes, its links and a way into its terminals.
    fn message(
        &self,
        identity: &ToolIdentity,
        project: &ProjectSnapshot,
        nodes: &[Value],
        request: &ToolRequest,
    ) -> Result<Value, String> {
        let agents = agents_of(nodes, |node| {
            let session = self.server()?.session(node)?;
            (session.project_id == identity.project_id).then_some(session.status)
        });
        let links = match self.host.workspace.state_intact(&project.id) {
            true => (project.cwd.as_deref()).map(read_links).unwrap_or_default(),
            false => return Err(FOLDER_MOVED.into()),
        };
        let terminals = &self.host.terminals;
        let deliver = |node: &str, text: &str| match terminals.ended(node) {
            Some(end) => Delivery::Failed(format!("its program has ended ({})", end.describe())),
            None if terminals.has_live_session(node) => match terminals.write(node, text) {
                Ok(()) => {
                    // A whole paste (or paste end) went in: see `TypedTails`.
                    self.typed.server_wrote(node);
                    Delivery::Pasted
                }
                Err(why) => Delivery::Failed(why),
            },
            None if terminals.is_warm(node) => Delivery::Failed(NOT_ATTACHED.to_string()),
            None => Delivery::Inbox,
        };
        let call = Call {
            project_id: &identity.project_id,
            caller: &identity.node_id,
            agents: &agents,
            links: &links,
            deliver: &deliver,
            now: unix_millis(),
        };
        self.messaging
            .call(&call, &request.operation, &request.args)
    }

    fn artifact_open(
        &self,
        identity: &ToolIdentity,
        project: &ProjectSnapshot,
        request: &ToolRequest,
    ) -> Result<Value, String> {
        let cwd = project
            .cwd
            .as_ref()
            .ok_or("artifact_open needs a folder project")?;
        let view = request.args.get("view").and_then(Value::as_str);
        let real = check_artifact_path(cwd, arg(request, "path"), view.unwrap_or("editor"))?;
        let mut args = request.args.clone();
        args.insert("path".into(), json!(real.to_string_lossy()));
        self.canvas(identity, "artifact_open", args)
    }

    fn agent_launch(
        &self,
        identity: &ToolIdentity,
        request: &ToolRequest,
    ) -> Result<Value, String> {
        const INSTALL: &str = "Install or configure this agent before launching it";
        let preset = find_preset(arg(request, "agent")).ok_or(INSTALL)?;
        let command = match preset.command {
            Some(command) => command.to_string(),
            None => self.preferences()?.custom_executable.ok_or(INSTALL)?,
        };
        self.probe(&command).map_err(|_| INSTALL.to_string())?;
        let mut args = request.args.clone();
        // The owner starts this command; its PTY request then goes through `prepare`.
        args.insert("command".into(), json!(command));
        self.wait_for_terminal(self.canvas(identity, "agent_launch", args)?)
    }

    /// What the person at the host asked for (see [`AgentToolRuntime::act_for_person`]):
    /// the canvas operations a person starts, run as an agent's call of them is, with no
    /// caller node.
    ///
    /// [`AgentToolRuntime::act_for_person`]: super::AgentToolRuntime::act_for_person
    pub(super) fn act_for_person(
        &self,
        project_id: &str,
        request: &ToolRequest,
    ) -> Result<Value, String> {
        self.local_project(project_id)
            .ok_or("Local project not found")?;
        // No node: the canvas bridge needs only the project.
        let person = ToolIdentity {
            node_id: String::new(),
            project_id: project_id.to_string(),
        };
        let operation = request.operation.as_str();
        match operation {
            "terminal_open" => {
                self.wait_for_terminal(self.canvas(&person, operation, request.args.clone())?)
            }
            "agent_launch" => self.agent_launch(&person, request),
            "terminal_close" => {
                let closed = self.canvas(&person, operation, request.args.clone())?;
                self.typed.forget(arg(request, "nodeId"));
                Ok(closed)
            }
            "canvas_move" | "canvas_resize" => {
                self.canvas(&person, operation, request.args.clone())
            }
            _ => Err(format!("{operation} is not an action of the person's view")),
        }
    }

    /// Waits for the terminal a canvas operation created (`{nodeId, …}`) to be ready, or
    /// to have ended already (an agent that could not start: its node, last screen and
    /// status say why, so the launch itself did happen).
    fn wait_for_terminal(&self, created: Value) -> Result<Value, String> {
        let node_id = node_field(&created, "nodeId")
            .ok_or("The canvas did not report the new terminal's nodeId")?;
        let deadline = Instant::now() + TERMINAL_READY_TIMEOUT;
        let terminals = &self.host.terminals;
        while !terminals.has_ready_session(node_id) && terminals.ended(node_id).is_none() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "Node {node_id} was created but its terminal did not become ready. Inspect it before retrying."
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Ok(created)
    }

    fn browser_list(&self, nodes: &[Value]) -> Value {
        let owners = lock(&self.owners);
        let browsers = nodes
            .iter()
            .filter(|n| node_field(n, "type") == Some("browser"));
        // Each is an object (it has a type), so indexing inserts `owner` into it.
        browsers
            .map(|n| {
                let mut entry = n.clone();
                entry["owner"] = json!(node_field(n, "id").and_then(|id| owners.owner(id)));
                entry
            })
            .collect()
    }

    fn browser_open(
        &self,
        identity: &ToolIdentity,
        request: &ToolRequest,
    ) -> Result<Value, String> {
        let url = normalize_browser_url(arg(request, "url"))?;
        let args = Map::from_iter([("url".to_string(), json!(url))]);
        let created = self.canvas(identity, "browser_open", args)?;
        let node_id = node_field(&created, "nodeId")
            .ok_or("The canvas did not report the new browser's nodeId")?;
        let tab_id = node_field(&created, "tabId").ok_or(super::tool_runtime::GUEST_NOT_READY)?;
        self.set_owner(node_id, &identity.node_id)?;
        let target_id = self.wait_for_guest(node_id, tab_id)?;
        Ok(json!({ "nodeId": node_id, "tabId": tab_id, "targetId": target_id }))
    }

    /// Records (and persists) who owns a browser node.
    fn set_owner(&self, node_id: &str, agent: &str) -> Result<(), String> {
        lock(&self.owners)
            .set(node_id, agent)
            .map_err(|e| format!("Could not record browser ownership: {e}"))
    }

    fn browser_operation(
        &self,
        identity: &ToolIdentity,
        project: &ProjectSnapshot,
        nodes: &[Value],
        request: &ToolRequest,
    ) -> Result<Value, String> {
        let node_id = arg(request, "nodeId");
        let node = find_node(nodes, node_id)
            .filter(|n| node_field(n, "type") == Some("browser"))
            .ok_or("Browser node not found in this project")?;
        let me = identity.node_id.as_str();
        let owner = lock(&self.owners).owner(node_id).map(str::to_string);
        let new_owner = match request.operation.as_str() {
            "browser_claim" if owner.as_deref().is_some_and(|o| o != me) => {
                return Err("Ask the current owner to transfer browser control".into())
            }
            "browser_claim" => me,
            _ if owner.as_deref() != Some(me) => return Err(CLAIM_FIRST.into()),
            "browser_transfer" => {
                let recipient = arg(request, "agentNodeId");
                let connected = self.server().is_some_and(|s| {
                    s.statuses(&identity.project_id)
                        .iter()
                        .any(|(id, _)| id == recipient)
                });
                if !connected {
                    return Err("Recipient agent is not connected to this project".into());
                }
                recipient
            }
            operation => {
                let mut args = request.args.clone();
                if operation == "browser_navigate" {
                    let url = normalize_browser_url(arg(request, "url"))?;
                    args.insert("url".into(), json!(url));
                }
                if operation == "browser_upload" {
                    // The files' real paths, and the folder the host checks them against
                    // again when it opens them (a checked file can be swapped).
                    let cwd = self.intact_folder(project, "browser_upload")?;
                    let paths = request.args.get("paths").and_then(Value::as_array);
                    let paths: Vec<&str> = paths
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let real = check_upload_paths(cwd, &paths)?;
                    args.insert("paths".into(), json!(real));
                    args.insert("projectRoot".into(), json!(cwd.to_string_lossy()));
                }
                let target = self.guest(node)?;
                // The user may have turned browser control off while this call waited.
                if !self.host.workspace.browser_control_enabled() {
                    return Err(BROWSER_CONTROL_OFF.into());
                }
                return self.run_page_operation(target, operation, args);
            }
        };
        self.set_owner(node_id, new_owner)?;
        Ok(json!({ "nodeId": node_id, "owner": new_owner }))
    }

    /// The project's folder for `operation`, refused for a project without one and for a
    /// folder moved or replaced (by a symlink elsewhere) since `serve` opened it.
    fn intact_folder<'a>(
        &self,
        project: &'a ProjectSnapshot,
        operation: &str,
    ) -> Result<&'a std::path::Path, String> {
        let cwd = (project.cwd.as_deref()).ok_or(format!("{operation} needs a folder project"))?;
        match self.host.workspace.state_intact(&project.id) {
            true => Ok(cwd),
            false => Err(FOLDER_MOVED.into()),
        }
    }

    fn terminal_operation(
        &self,
        identity: &ToolIdentity,
        nodes: &[Value],
        request: &ToolRequest,
    ) -> Result<Value, String> {
        let node_id = arg(request, "nodeId");
        let node = terminal_node(nodes, node_id)?;
        let operation = request.operation.as_str();
        let writes = !matches!(operation, "terminal_read" | "terminal_external");
        if writes && node_id == identity.node_id {
            return Err(OWN_TERMINAL.into());
        }
        let terminals = &self.host.terminals;
        match operation {
            "terminal_read" => read_terminal(terminals, node_id, request),
            "terminal_external" => {
                if !terminals.is_warm(node_id) {
                    return Err(NOT_ATTACHED.into());
                }
                terminals.attach_external(node_id)
            }
            "terminal_close" => {
                let closed = self.canvas(identity, operation, request.args.clone())?;
                self.typed.forget(node_id);
                Ok(closed)
            }
            _ => {
                if !terminals.has_live_session(node_id) {
                    return Err(match terminals.ended(node_id) {
                        Some(end) => ended_error(end),
                        None => NOT_ATTACHED.into(),
                    });
                }
                let typing = matches!(operation, "terminal_input" | "terminal_submit");
                if typing && terminals.person_typing(node_id) {
                    return Err(PERSON_TYPING.into());
                }
                let text = match operation {
                    "terminal_submit" if is_agent_terminal(node) => {
                        return Err(SUBMIT_TO_SHELLS.into())
                    }
                    "terminal_submit" => {
                        let command = arg(request, "command");
                        terminals.submit(node_id, command, command)?;
                        return Ok(json!({ "nodeId": node_id }));
                    }
                    "terminal_input" => typed_and_pressed(terminals.as_ref(), node_id, request)?,
                    "terminal_interrupt" => "\u{3}".to_string(),
                    _ => return self.canvas(identity, operation, request.args.clone()),
                };
                // Only agent_send frames a message in an agent's terminal: nothing agents
                // type there may form that framing, with what they typed before either.
                // (A shell's programs already obey whoever may type into it.)
                if is_agent_terminal(node) {
                    self.typed.admit(node_id, &text)?;
                }
                terminals.write(node_id, &text)?;
                Ok(json!({ "nodeId": node_id }))
            }
        }
    }
}

/// `terminal_read`: the screen, a command's output (`command`), the output after a
/// cursor (`since`) or the lines containing a text (`search`); every answer but a
/// command's carries the cursor where the output stands, when the host keeps a history.
fn read_terminal(
    terminals: &Arc<dyn Terminals>,
    node_id: &str,
    request: &ToolRequest,
) -> Result<Value, String> {
    let args = &request.args;
    let asked = ["command", "since", "search"].map(|name| args.contains_key(name));
    if asked.iter().filter(|&&given| given).count() > 1 {
        return Err(
            "Invalid args: give one of command, since and search to terminal_read, not several"
                .into(),
        );
    }
    if args.contains_key("maxMatches") && !args.contains_key("search") {
        return Err("Invalid maxMatches: it goes with search".into());
    }
    let max_chars = args
        .get("maxChars")
        .and_then(Value::as_f64)
        .map_or(DEFAULT_READ_CHARS, |n| {
            n.clamp(1.0, MAX_READ_CHARS as f64) as usize
        });
    if args.contains_key("command") {
        if terminals.integration(node_id) == ShellIntegration::None {
            return Err("This terminal's shell reports no commands (integration none): read its screen with terminal_read without command".into());
        }
        let mut args = args.clone();
        args.insert("maxChars".into(), json!(max_chars));
        let mut watched = Watched::new(terminals, node_id, None, &args)
            .map_err(|_| "No such command in this terminal: take commandId from terminal_submit's answer, or use \"last\"")?;
        let seen = watched.look();
        return Ok(watched.answer(&seen, false));
    }
    // Whole numbers, also when written as 5.0 (the validator takes those).
    let whole = |name: &str| args.get(name).and_then(Value::as_f64).map(|n| n as u64);
    if let Some(since) = whole("since") {
        let after = terminals
            .output_after(node_id, since, max_chars)
            .ok_or(NO_HISTORY)?;
        if since > after.cursor {
            return Err(format!("Invalid since: this terminal's output ends at cursor {}; take since from a terminal_read answer of this terminal", after.cursor));
        }
        let mut answer = json!({
            "nodeId": node_id,
            "output": after.text,
            "cursor": after.cursor,
            "lost": after.lost,
        });
        if after.omitted > 0 {
            answer["omitted"] = json!(after.omitted);
        }
        if after.fullscreen {
            answer["fullscreen"] = json!(true);
        }
        return Ok(answer);
    }
    if let Some(needle) = args.get("search").and_then(Value::as_str) {
        let max_matches = whole("maxMatches").unwrap_or(DEFAULT_MATCHES) as usize;
        let found = terminals
            .search_output(node_id, needle, max_matches)
            .ok_or(NO_HISTORY)?;
        let matches: Vec<Value> = found
            .matches
            .iter()
            .map(|m| json!({"line": m.line, "text": m.text, "before": m.before, "after": m.after}))
            .collect();
        return Ok(json!({
            "nodeId": node_id,
            "matches": matches,
            "matchCount": found.count,
            "cursor": found.cursor,
        }));
    }
    // The cursor before the screen: output written between the two is read again from
    // it, never skipped.
    let cursor = terminals.output_cursor(node_id);
    let output = terminals
        .capture(node_id)
        .or_else(|| terminals.scrollback(node_id))
        .ok_or("Terminal output is unavailable")?;
    let mut answer = json!({ "nodeId": node_id, "output": last_chars(&output, max_chars) });
    if let Some(cursor) = cursor {
        answer["cursor"] = json!(cursor);
    }
    Ok(answer)
}

/// What `terminal_input` sends: its `text`, then its `keys` as the terminal's program
/// expects them (see [`crate::protocol::keys`]).
fn typed_and_pressed(
    terminals: &dyn Terminals,
    node_id: &str,
    request: &ToolRequest,
) -> Result<String, String> {
    let mut text = request
        .args
        .get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(keys) = request.args.get("keys").and_then(Value::as_array) {
        let names = keys.iter().filter_map(Value::as_str);
        let pressed = keys_text(names, terminals.application_cursor(node_id)).map_err(|name| {
            format!("Invalid keys: unknown key {name:?}: each key is {KNOWN_KEYS}")
        })?;
        text.push_str(&pressed);
    }
    Ok(text)
}

/// The local terminal node `node_id` of `nodes`.
fn terminal_node<'a>(nodes: &'a [Value], node_id: &str) -> Result<&'a Value, String> {
    find_node(nodes, node_id)
        .filter(|n| node_field(n, "type") == Some("terminal"))
        .filter(|n| data_field(n, "remote") != Some(&Value::Bool(true)))
        .ok_or_else(|| {
            format!("Local terminal not found in this project: {node_id} (canvas_list shows the terminals)")
        })
}

impl Core {
    /// `terminal_submit` with `wait` (types the command, unless one still runs there),
    /// `terminal_wait` or `browser_wait`: the wait the server answers the call from.
    fn start_wait(
        &self,
        identity: &ToolIdentity,
        nodes: &[Value],
        request: &ToolRequest,
        timeout: Duration,
    ) -> Result<Wait, String> {
        if request.operation == "browser_wait" {
            return self.start_page_wait(identity, nodes, request, timeout);
        }
        let (args, node_id) = (&request.args, arg(request, "nodeId"));
        let (node, terminals) = (terminal_node(nodes, node_id)?, &self.host.terminals);
        let line = args.get("command").and_then(Value::as_str);
        if line.is_some() {
            match () {
                _ if node_id == identity.node_id => return Err(OWN_TERMINAL.into()),
                _ if is_agent_terminal(node) => return Err(SUBMIT_TO_SHELLS.into()),
                _ if !terminals.has_live_session(node_id) => {
                    return Err(terminals
                        .ended(node_id)
                        .map_or(NOT_ATTACHED.into(), ended_error))
                }
                _ if terminals.person_typing(node_id) => return Err(PERSON_TYPING.into()),
                _ if args.get("force") != Some(&Value::Bool(true)) => {
                    Watched::busy(&**terminals, node_id)?
                }
                _ => {}
            }
        }
        // Forced, the line is input to whatever runs there, not a shell command line.
        let typed = match (line, args.get("force") == Some(&Value::Bool(true))) {
            (Some(line), false) => Some(typed_as_one(line, terminals.integration(node_id))?),
            _ => None,
        };
        let watched = Watched::new(terminals, node_id, line, args)?;
        let server = self
            .server()
            .ok_or("Tool service is shutting down; try again")?;
        let slot = server.reserve_wait(identity)?;
        if let Some(line) = line {
            terminals.submit(node_id, line, typed.as_deref().unwrap_or(line))?;
        }
        let deadline = Instant::now() + timeout;
        Ok(Wait {
            slot,
            deadline,
            awaited: Box::new(watched),
        })
    }

    /// `browser_wait` on a browser the caller owns: the host's check of its page.
    fn start_page_wait(
        &self,
        identity: &ToolIdentity,
        nodes: &[Value],
        request: &ToolRequest,
        timeout: Duration,
    ) -> Result<Wait, String> {
        let given = ["text", "textGone", "idle"];
        if given
            .iter()
            .filter(|key| request.args.contains_key(**key))
            .count()
            != 1
        {
            return Err(
                "browser_wait needs exactly one of text, textGone or idle; nothing was waited for"
                    .into(),
            );
        }
        let node_id = arg(request, "nodeId");
        let node = find_node(nodes, node_id)
            .filter(|n| node_field(n, "type") == Some("browser"))
            .ok_or("Browser node not found in this project")?;
        if lock(&self.owners).owner(node_id) != Some(identity.node_id.as_str()) {
            return Err(CLAIM_FIRST.into());
        }
        let target = self.guest(node)?;
        if !self.host.workspace.browser_control_enabled() {
            return Err(BROWSER_CONTROL_OFF.into());
        }
        let server = self
            .server()
            .ok_or("Tool service is shutting down; try again")?;
        let slot = server.reserve_wait(identity)?;
        let page = self.host.browsers.wait(&target, &request.args)?;
        let workspace = Arc::clone(&self.host.workspace);
        Ok(Wait {
            slot,
            deadline: Instant::now() + timeout,
            awaited: Box::new(WhileBrowserControl(workspace, page)),
        })
    }
}

/// A page wait that ends when the user turns browser control off.
struct WhileBrowserControl(Arc<dyn Workspace>, Box<dyn Awaited>);

impl Awaited for WhileBrowserControl {
    fn check(&mut self) -> Option<Outcome> {
        if !self.0.browser_control_enabled() {
            return Some(Err(format!(
                "{BROWSER_CONTROL_OFF}: browser control was turned off while waiting"
            )));
        }
        self.1.check()
    }

    fn at_deadline(&mut self) -> Outcome {
        self.1.at_deadline()
    }
}
