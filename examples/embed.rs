//! Embedding the agent tools in your own app: implement the four host traits, create the
//! runtime, start it, provision an agent. This one has an in-memory canvas owned by its
//! own thread, a browser that never has a page, and one real terminal without a PTY (a
//! `sh` on pipes). It calls itself over HTTP as an agent would, then exits:
//!
//! ```text
//! cargo run --example embed            # self-test, exits 0 on success
//! cargo run --example embed -- --serve # keeps serving until Enter
//! ```
#![deny(unsafe_code)]

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use termsprawl_tools::protocol::{
    CanvasToolReply, CanvasToolRequest, IntegrationState, IntegrationStatus, ToolIdentity,
    ToolResult,
};
use termsprawl_tools::runtime::{
    AgentToolRuntime, Browsers, CanvasOwner, Host, ProjectSnapshot, Terminals, Workspace,
};

const PROJECT: &str = "demo";
const AGENT: &str = "agent1";
const SHELL: &str = "shell1";
const CANVAS_SENDER: u64 = 1;

/// One local folder project holding the agent and the shell.
struct App {
    folder: std::path::PathBuf,
}

impl Workspace for App {
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        (project_id == PROJECT).then(|| ProjectSnapshot {
            id: PROJECT.into(),
            cwd: Some(self.folder.clone()),
            remote: false,
            node_ids: vec![AGENT.into(), SHELL.into()],
        })
    }
    fn browser_control_enabled(&self) -> bool {
        false
    }
    fn status_changed(&self, node_id: &str, status: &IntegrationStatus) {
        eprintln!("status of {node_id}: {:?}", status.state);
    }
}

/// The canvas owner: hands requests to the canvas thread, which owns the nodes.
struct Canvas {
    inbox: Mutex<Sender<CanvasToolRequest>>,
}

impl CanvasOwner for Canvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        (project_id == PROJECT).then_some(CANVAS_SENDER)
    }
    fn send(&self, _target: u64, request: CanvasToolRequest) -> Result<(), String> {
        let inbox = self.inbox.lock().map_err(|_| "canvas is gone")?;
        inbox
            .send(request)
            .map_err(|_| "canvas is gone".to_string())
    }
}

/// The only writer of the canvas: applies each request and replies through the runtime.
fn canvas_thread(requests: Receiver<CanvasToolRequest>, runtime: Weak<AgentToolRuntime>) {
    // Nodes and replies in the shapes the catalogue publishes (MCP clients check them
    // against each tool's `outputSchema`).
    let node = |id: &str, kind: &str, x: u32, data: Value| {
        json!({"id": id, "type": kind, "position": {"x": x, "y": 0},
               "size": {"width": 480, "height": 320}, "data": data})
    };
    let mut nodes = vec![
        node(
            AGENT,
            "terminal",
            0,
            json!({"title": "Agent", "agentId": "custom"}),
        ),
        node(SHELL, "terminal", 500, json!({"title": "Shell"})),
    ];
    for request in requests {
        let result = if request.expires_at < termsprawl_tools::runtime::unix_millis() {
            ToolResult::Err("Request expired; nothing was applied".into())
        } else if request.operation == "canvas_list" {
            ToolResult::Ok(Value::Array(nodes.clone()))
        } else if request.operation == "sticky_open" {
            let id = format!("sticky{}", nodes.len());
            let data = json!({"title": "Note", "text": request.args["text"]});
            nodes.push(node(&id, "sticky", 1000, data));
            ToolResult::Ok(json!({"nodeId": id}))
        } else {
            ToolResult::Err(format!(
                "{} is not supported by this demo canvas",
                request.operation
            ))
        };
        let reply = CanvasToolReply {
            request_id: request.request_id,
            result,
        };
        // A weak handle: the runtime owns this thread's inbox, so it must not be kept alive by it.
        let Some(runtime) = runtime.upgrade() else {
            return;
        };
        runtime.canvas_reply(CANVAS_SENDER, true, reply);
    }
}

/// No browser engine: guests never become ready.
struct NoBrowsers;

impl Browsers for NoBrowsers {
    fn watch_guest(&self, _node_id: &str, _tab_id: &str, _ready: Sender<String>) {}
    fn run(
        &self,
        _target: &str,
        _operation: &str,
        _args: &Map<String, Value>,
    ) -> Result<Value, String> {
        Err("This demo has no browser".into())
    }
}

/// One real shell on pipes; its output is kept as scrollback.
struct Shell {
    child: Mutex<Child>,
    stdin: Mutex<ChildStdin>,
    output: Arc<Mutex<String>>,
}

impl Shell {
    fn start(folder: &std::path::Path) -> std::io::Result<Shell> {
        let mut child = Command::new("/bin/sh")
            .current_dir(folder)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let output = Arc::new(Mutex::new(String::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buffer) {
                if let Ok(mut text) = sink.lock() {
                    text.push_str(&String::from_utf8_lossy(&buffer[..n]));
                }
            }
        });
        Ok(Shell {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            output,
        })
    }
}

impl Terminals for Shell {
    fn is_warm(&self, node_id: &str) -> bool {
        node_id == SHELL
    }
    fn has_ready_session(&self, node_id: &str) -> bool {
        node_id == SHELL
    }
    fn has_live_session(&self, node_id: &str) -> bool {
        node_id == SHELL
            && self
                .child
                .lock()
                .is_ok_and(|mut c| matches!(c.try_wait(), Ok(None)))
    }
    fn write(&self, _node_id: &str, text: &str) -> Result<(), String> {
        // A pipe is not a terminal: Enter arrives as "\r", which sh wants as "\n".
        let text = text.replace('\r', "\n");
        let mut stdin = self.stdin.lock().map_err(|_| "shell is gone")?;
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| e.to_string())
    }
    fn capture(&self, _node_id: &str) -> Option<String> {
        None
    }
    fn scrollback(&self, node_id: &str) -> Option<String> {
        (node_id == SHELL).then(|| self.output.lock().map(|t| t.clone()).unwrap_or_default())
    }
    fn attach_external(&self, _node_id: &str) -> Result<Value, String> {
        Err("This demo has no external terminal".into())
    }
}

/// What an agent does: POST one tool call with its bearer token.
fn call(url: &str, token: &str, operation: &str, args: Value) -> std::io::Result<Value> {
    let authority = url.trim_start_matches("http://").trim_end_matches("/call");
    let body = json!({"operation": operation, "args": args}).to_string();
    let mut stream = TcpStream::connect(authority)?;
    write!(
        stream,
        "POST /call HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let json_start = response.find("\r\n\r\n").map_or(0, |i| i + 4);
    serde_json::from_str(&response[json_start..]).map_err(std::io::Error::other)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve = std::env::args().any(|a| a == "--serve");
    let data = std::env::temp_dir().join(format!("termsprawl-embed-{}", std::process::id()));
    let folder = data.join("project");
    std::fs::create_dir_all(&folder)?;

    let shell = Arc::new(Shell::start(&folder)?);
    let (inbox, requests) = mpsc::channel();
    let host = Host {
        workspace: Arc::new(App {
            folder: folder.clone(),
        }),
        canvas: Arc::new(Canvas {
            inbox: Mutex::new(inbox),
        }),
        browsers: Arc::new(NoBrowsers),
        terminals: shell.clone(),
    };
    let runtime = Arc::new(AgentToolRuntime::new(&data, host)?);
    let canvas_runtime = Arc::downgrade(&runtime);
    std::thread::spawn(move || canvas_thread(requests, canvas_runtime));

    let ctl = std::env::current_exe()?.with_file_name("termsprawlctl");
    let endpoint = runtime.start(&ctl)?;
    let agent = ToolIdentity {
        node_id: AGENT.into(),
        project_id: PROJECT.into(),
    };
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    let session = runtime.server().provision(&agent, status, true)?;
    println!(
        "serving {} (session file {})",
        endpoint.url,
        runtime.server().session_file(AGENT)?.display()
    );

    let outcome = self_test(&endpoint.url, &session.token);
    if serve && outcome.is_ok() {
        println!("press Enter to stop");
        let _ = std::io::stdin().lock().lines().next();
    }
    runtime.close();
    if let Ok(mut child) = shell.child.lock() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_dir_all(&data);
    outcome.map_err(Into::into)
}

/// Lists the canvas, runs a command in the shell and reads it back, as an agent would.
fn self_test(url: &str, token: &str) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let listed = call(url, token, "canvas_list", json!({})).map_err(io)?;
    println!("canvas_list -> {listed}");
    let submitted = call(
        url,
        token,
        "terminal_submit",
        json!({"nodeId": SHELL, "command": "echo embed-$((6*7))"}),
    )
    .map_err(io)?;
    println!("terminal_submit -> {submitted}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let read = call(url, token, "terminal_read", json!({"nodeId": SHELL})).map_err(io)?;
        if read["value"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("embed-42"))
        {
            println!("terminal_read -> {read}");
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the shell's output never showed embed-42: {read}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    /// `cargo test` runs the example end to end, so it can't rot.
    #[test]
    fn the_example_serves_one_agent() {
        super::main().expect("the embedding example's self-test");
    }
}
