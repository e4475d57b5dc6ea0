//! Fakes of the four host traits, shared by the runtime's black-box tests. They stand in
//! for the app only; the server behind the runtime is always the real one.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use serde_json::{json, Map, Value};
use termsprawl_tools::protocol::{
    CanvasToolReply, CanvasToolRequest, IntegrationStatus, ToolIdentity, ToolRequest, ToolResult,
};
use termsprawl_tools::runtime::{
    AgentToolRuntime, Browsers, CanvasOwner, CanvasReplier, CommandOutput, CommandRecord,
    Foreground, Host, OutputMark, ProjectSnapshot, ShellIntegration, Terminals, Workspace,
};
use termsprawl_tools::server::{Awaited, Outcome};

pub const PROJECT: &str = "proj";
pub const SENDER: u64 = 41;

/// A scratch directory unique to one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tst-rt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub struct FakeWorkspace {
    pub projects: Mutex<HashMap<String, ProjectSnapshot>>,
    pub browser_enabled: Mutex<bool>,
    pub status_log: Mutex<Vec<(String, IntegrationStatus)>>,
}

impl Workspace for FakeWorkspace {
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        self.projects.lock().unwrap().get(project_id).cloned()
    }
    fn browser_control_enabled(&self) -> bool {
        *self.browser_enabled.lock().unwrap()
    }
    fn status_changed(&self, node_id: &str, status: &IntegrationStatus) {
        self.status_log
            .lock()
            .unwrap()
            .push((node_id.to_string(), status.clone()));
    }
}

/// How the fake canvas answers one operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer {
    /// At once, from the right sender and the main frame.
    Now,
    /// After this long.
    Late(Duration),
    /// From another sender id (and then never from the right one).
    WrongSender,
    /// From a subframe.
    Subframe,
    /// Never.
    Never,
}

/// An in-memory canvas owner: it applies requests to its node list from its own thread
/// and replies through the runtime, as a renderer would.
pub struct FakeCanvas {
    pub runtime: OnceLock<Weak<AgentToolRuntime>>,
    pub nodes: Mutex<Vec<Value>>,
    pub sent: Mutex<Vec<CanvasToolRequest>>,
    pub answers: Mutex<HashMap<String, Answer>>,
    pub terminals: Arc<FakeTerminals>,
    pub open: Mutex<bool>,
    /// What `current_list` offers (`None`: ask through `send`, as by default).
    pub current: Mutex<Option<Value>>,
    counter: Mutex<u32>,
}

impl FakeCanvas {
    pub fn answer(&self, operation: &str, answer: Answer) {
        self.answers
            .lock()
            .unwrap()
            .insert(operation.into(), answer);
    }
    pub fn sent_count(&self, operation: &str) -> usize {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.operation == operation)
            .count()
    }
    pub fn add(&self, node: Value) {
        let mut nodes = self.nodes.lock().unwrap();
        nodes.retain(|n| n["id"] != node["id"]);
        nodes.push(node);
    }
    pub fn remove(&self, id: &str) {
        self.nodes.lock().unwrap().retain(|n| n["id"] != id);
    }

    fn apply(&self, request: &CanvasToolRequest) -> ToolResult {
        let mut counter = self.counter.lock().unwrap();
        *counter += 1;
        let n = *counter;
        drop(counter);
        match request.operation.as_str() {
            "canvas_list" => ToolResult::Ok(Value::Array(self.nodes.lock().unwrap().clone())),
            "browser_open" => {
                let id = format!("browser{n}");
                self.add(json!({"id": id, "type": "browser", "data": {"title": "Browser", "url": request.args["url"], "tabs": [{"id": "tab1"}], "activeTabId": "tab1"}}));
                ToolResult::Ok(json!({"nodeId": id, "tabId": "tab1"}))
            }
            "terminal_open" | "agent_launch" => {
                let id = format!("term{n}");
                let data = match request.operation.as_str() {
                    "agent_launch" => {
                        json!({"title": "Agent", "agentId": request.args["agent"], "command": request.args["command"]})
                    }
                    _ => json!({"title": "Shell"}),
                };
                self.add(json!({"id": id, "type": "terminal", "data": data}));
                self.terminals.start(&id);
                ToolResult::Ok(json!({"nodeId": id}))
            }
            "terminal_close" => {
                let id = request.args["nodeId"].as_str().unwrap_or("").to_string();
                self.remove(&id);
                ToolResult::Ok(json!({"nodeId": id, "closed": true}))
            }
            "canvas_fail" => ToolResult::Err("Canvas refused: nothing applied".into()),
            _ => ToolResult::Ok(json!({"applied": request.operation, "args": request.args})),
        }
    }
}

impl CanvasOwner for FakeCanvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        (project_id == PROJECT && *self.open.lock().unwrap()).then_some(SENDER)
    }

    fn current_list(&self, project_id: &str) -> Option<Arc<Value>> {
        let current = self.current.lock().unwrap().clone();
        current.filter(|_| project_id == PROJECT).map(Arc::new)
    }

    fn send(
        &self,
        target: u64,
        request: CanvasToolRequest,
        replier: CanvasReplier,
    ) -> Result<(), String> {
        assert_eq!(target, SENDER);
        self.sent.lock().unwrap().push(request.clone());
        let answer = self
            .answers
            .lock()
            .unwrap()
            .get(&request.operation)
            .copied()
            .unwrap_or(Answer::Now);
        let runtime = self.runtime.get().cloned().expect("runtime set");
        let result = self.apply(&request);
        std::thread::spawn(move || {
            let Some(runtime) = runtime.upgrade() else {
                return;
            };
            let reply = CanvasToolReply {
                request_id: request.request_id,
                result,
            };
            match answer {
                Answer::Now => drop(replier.reply(reply)),
                Answer::Late(delay) => {
                    std::thread::sleep(delay);
                    let _ = replier.reply(reply);
                }
                Answer::WrongSender => drop(runtime.canvas_reply(SENDER + 1, true, reply)),
                Answer::Subframe => drop(runtime.canvas_reply(SENDER, false, reply)),
                Answer::Never => {}
            }
        });
        Ok(())
    }
}

/// One page operation a guest was asked to run: (target, operation, args).
pub type PageRun = (String, String, Map<String, Value>);

/// Browser guests: ready at once, after a delay, or never; page operations answer with
/// what they were asked, or hang.
pub struct FakeBrowsers {
    pub ready_after: Mutex<Option<Duration>>,
    pub hang: Mutex<bool>,
    pub runs: Mutex<Vec<PageRun>>,
}

impl Browsers for FakeBrowsers {
    fn watch_guest(&self, node_id: &str, tab_id: &str, ready: Sender<String>) {
        let Some(delay) = *self.ready_after.lock().unwrap() else {
            // Never ready: keep the sender alive so the runtime has to time out.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(20));
                drop(ready);
            });
            return;
        };
        let target = format!("target-{node_id}-{tab_id}");
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let _ = ready.send(target);
        });
    }

    fn run(
        &self,
        target_id: &str,
        operation: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, String> {
        self.runs
            .lock()
            .unwrap()
            .push((target_id.into(), operation.into(), args.clone()));
        if *self.hang.lock().unwrap() {
            std::thread::sleep(Duration::from_secs(30));
        }
        Ok(json!({"target": target_id, "operation": operation}))
    }

    fn wait(&self, target_id: &str, args: &Map<String, Value>) -> Result<Box<dyn Awaited>, String> {
        let never = args.get("text") == Some(&json!("never"));
        let target = target_id.to_string();
        Ok(Box::new(FakePageWait { target, never }))
    }
}

/// A page wait: met at its first check, unless it waits for the text "never".
struct FakePageWait {
    target: String,
    never: bool,
}

impl Awaited for FakePageWait {
    fn check(&mut self) -> Option<Outcome> {
        (!self.never).then(|| Ok(json!({"state": "met", "target": self.target})))
    }

    fn at_deadline(&mut self) -> Outcome {
        Ok(json!({"state": "timed_out", "target": self.target}))
    }
}

/// Terminal sessions in memory: what was written is what a capture shows.
#[derive(Default)]
pub struct FakeTerminals {
    pub warm: Mutex<HashSet<String>>,
    pub ready: Mutex<HashSet<String>>,
    pub live: Mutex<HashSet<String>>,
    pub screens: Mutex<HashMap<String, String>>,
    pub scrollbacks: Mutex<HashMap<String, String>>,
    pub written: Mutex<Vec<(String, String)>>,
    /// New sessions start but never become ready.
    pub never_ready: Mutex<bool>,
    /// Scripted shell integration, command records (by terminal, in order), foreground
    /// and output (all of it, with when it last grew) of each terminal.
    pub integration: Mutex<HashMap<String, ShellIntegration>>,
    pub commands: Mutex<HashMap<String, Vec<CommandRecord>>>,
    pub foreground: Mutex<HashMap<String, Foreground>>,
    pub output: Mutex<HashMap<String, (String, u64)>>,
    /// Terminals whose program asked for application cursor keys.
    pub application_cursor: Mutex<HashSet<String>>,
}

impl FakeTerminals {
    pub fn start(&self, id: &str) {
        self.warm.lock().unwrap().insert(id.to_string());
        self.live.lock().unwrap().insert(id.to_string());
        if !*self.never_ready.lock().unwrap() {
            self.ready.lock().unwrap().insert(id.to_string());
        }
    }
}

impl Terminals for FakeTerminals {
    fn is_warm(&self, node_id: &str) -> bool {
        self.warm.lock().unwrap().contains(node_id)
    }
    fn has_ready_session(&self, node_id: &str) -> bool {
        self.ready.lock().unwrap().contains(node_id)
    }
    fn has_live_session(&self, node_id: &str) -> bool {
        self.live.lock().unwrap().contains(node_id)
    }
    fn write(&self, node_id: &str, text: &str) -> Result<(), String> {
        self.written
            .lock()
            .unwrap()
            .push((node_id.into(), text.into()));
        Ok(())
    }
    fn capture(&self, node_id: &str) -> Option<String> {
        self.screens.lock().unwrap().get(node_id).cloned()
    }
    fn scrollback(&self, node_id: &str) -> Option<String> {
        self.scrollbacks.lock().unwrap().get(node_id).cloned()
    }
    fn attach_external(&self, node_id: &str) -> Result<Value, String> {
        Ok(json!({"nodeId": node_id, "attached": true}))
    }
    fn integration(&self, node_id: &str) -> ShellIntegration {
        let integration = self.integration.lock().unwrap().get(node_id).copied();
        integration.unwrap_or(ShellIntegration::None)
    }
    fn command(&self, node_id: &str, id: Option<u64>) -> Option<CommandRecord> {
        let commands = self.commands.lock().unwrap();
        let records = commands.get(node_id)?;
        match id {
            Some(id) => records.iter().find(|c| c.id == id).cloned(),
            None => records.last().cloned(),
        }
    }
    fn foreground(&self, node_id: &str) -> Option<Foreground> {
        self.foreground.lock().unwrap().get(node_id).copied()
    }
    fn application_cursor(&self, node_id: &str) -> bool {
        self.application_cursor.lock().unwrap().contains(node_id)
    }
    fn output_mark(&self, node_id: &str) -> Option<OutputMark> {
        let output = self.output.lock().unwrap();
        let (text, last_output_at) = output.get(node_id)?;
        Some(OutputMark {
            position: text.len() as u64,
            last_output_at: *last_output_at,
        })
    }
    fn output_since(&self, node_id: &str, position: u64) -> Option<(CommandOutput, OutputMark)> {
        let mark = self.output_mark(node_id)?;
        let output = self.output.lock().unwrap();
        let text = output
            .get(node_id)?
            .0
            .get(position as usize..)
            .unwrap_or("");
        let head = text.to_string();
        let output = CommandOutput {
            head,
            ..CommandOutput::default()
        };
        Some((output, mark))
    }
}

impl FakeTerminals {
    /// The terminal's program writes `text` now.
    pub fn print(&self, node_id: &str, text: &str) {
        let mut output = self.output.lock().unwrap();
        let (all, at) = output.entry(node_id.to_string()).or_default();
        all.push_str(text);
        *at = termsprawl_tools::runtime::unix_millis();
    }

    /// The shell reports `record` (a new command, or a later state of one it reported).
    pub fn report(&self, node_id: &str, record: CommandRecord) {
        let mut commands = self.commands.lock().unwrap();
        let records = commands.entry(node_id.to_string()).or_default();
        records.retain(|c| c.id != record.id);
        records.push(record);
    }
}

/// A runtime over the four fakes, with one local folder project whose canvas holds the
/// given agent terminals.
pub struct Rig {
    pub dir: PathBuf,
    pub project_dir: PathBuf,
    pub workspace: Arc<FakeWorkspace>,
    pub canvas: Arc<FakeCanvas>,
    pub browsers: Arc<FakeBrowsers>,
    pub terminals: Arc<FakeTerminals>,
    pub runtime: Arc<AgentToolRuntime>,
}

impl Rig {
    pub fn new(name: &str, agents: &[&str]) -> Rig {
        Rig::with_data(name, agents, |_| {})
    }

    /// Like [`Rig::new`], with `<data>/agent-tools` prepared by `before` first.
    pub fn with_data(name: &str, agents: &[&str], before: impl FnOnce(&Path)) -> Rig {
        let dir = scratch(name);
        let tools = dir.join("data/agent-tools");
        std::fs::create_dir_all(&tools).unwrap();
        before(&tools);
        let project_dir = dir.join("project");
        std::fs::create_dir_all(&project_dir).unwrap();
        let terminals = Arc::new(FakeTerminals::default());
        let workspace = Arc::new(FakeWorkspace {
            projects: Mutex::new(HashMap::from([(
                PROJECT.to_string(),
                ProjectSnapshot {
                    id: PROJECT.into(),
                    cwd: Some(project_dir.clone()),
                    remote: false,
                    node_ids: agents.iter().map(|a| a.to_string()).collect(),
                },
            )])),
            browser_enabled: Mutex::new(true),
            status_log: Mutex::default(),
        });
        let canvas = Arc::new(FakeCanvas {
            runtime: OnceLock::new(),
            nodes: Mutex::new(
                agents
                    .iter()
                    .map(|a| json!({"id": a, "type": "terminal", "data": {"title": format!("Agent {a}"), "agentId": "claude"}}))
                    .collect(),
            ),
            sent: Mutex::default(),
            answers: Mutex::default(),
            current: Mutex::default(),
            terminals: terminals.clone(),
            open: Mutex::new(true),
            counter: Mutex::new(0),
        });
        let browsers = Arc::new(FakeBrowsers {
            ready_after: Mutex::new(Some(Duration::ZERO)),
            hang: Mutex::new(false),
            runs: Mutex::default(),
        });
        let host = Host {
            workspace: workspace.clone(),
            canvas: canvas.clone(),
            browsers: browsers.clone(),
            terminals: terminals.clone(),
        };
        let runtime = Arc::new(AgentToolRuntime::new(&dir.join("data"), host).unwrap());
        let _ = canvas.runtime.set(Arc::downgrade(&runtime));
        Rig {
            dir,
            project_dir,
            workspace,
            canvas,
            browsers,
            terminals,
            runtime,
        }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data/agent-tools")
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.runtime.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// POSTs one tool call to the real server over loopback and returns (status, body).
pub fn call(url: &str, token: &str, operation: &str, args: Value) -> (u16, Value) {
    let rest = url.strip_prefix("http://").expect("http url");
    let (authority, path) = rest.split_once('/').expect("path");
    let body = json!({"operation": operation, "args": args}).to_string();
    let mut stream = TcpStream::connect(authority).unwrap();
    // Longer than a call held for the person (`runtime::approvals::HOLD`, 40 s).
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    let request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response);
    let status: u16 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let body = decode_chunked_if_needed(body);
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn decode_chunked_if_needed(body: &str) -> String {
    if serde_json::from_str::<Value>(body).is_ok() {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// Writes an executable shell script.
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The identity of agent `node` in the fake project.
pub fn who(node: &str) -> ToolIdentity {
    ToolIdentity {
        node_id: node.into(),
        project_id: PROJECT.into(),
    }
}

/// Runs one operation through the runtime's `execute` as agent `node`.
pub fn run(rig: &Rig, node: &str, operation: &str, args: Value) -> Result<Value, String> {
    let request = ToolRequest {
        operation: operation.into(),
        args: args.as_object().cloned().unwrap(),
    };
    rig.runtime.execute(&who(node), &request)
}
