//! The core embedded as a newcomer would from the docs alone: its own workspace and
//! canvas owner (a thread of its own), no terminals or browsers (`NoTerminals`,
//! `NoBrowsers`), an agent provisioned with `provision_agent`, and every call made by the
//! real `termsprawlctl` (`client::run`) through the launcher `start` installed.
#![deny(unsafe_code)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, Weak};

use common::scratch;
use serde_json::{json, Value};
use termsprawl_tools::protocol::{CanvasToolReply, CanvasToolRequest, ToolIdentity, ToolResult};
use termsprawl_tools::runtime::{
    AgentToolRuntime, CanvasOwner, Host, NoBrowsers, NoTerminals, ProjectSnapshot, RuntimeError,
    Workspace,
};

const PROJECT: &str = "demo";
const AGENT: &str = "agent1";
const NOTE: &str = "note1";

/// The app's one project; the test takes nodes off its canvas.
struct App {
    node_ids: Mutex<Vec<String>>,
}

impl Workspace for App {
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        (project_id == PROJECT).then(|| ProjectSnapshot {
            id: PROJECT.into(),
            cwd: None,
            remote: false,
            node_ids: self.node_ids.lock().unwrap().clone(),
        })
    }
}

struct Canvas(Mutex<Sender<CanvasToolRequest>>);

impl CanvasOwner for Canvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        (project_id == PROJECT).then_some(7)
    }
    fn send(&self, _target: u64, request: CanvasToolRequest) -> Result<(), String> {
        let inbox = self.0.lock().map_err(|_| "the canvas is gone")?;
        inbox.send(request).map_err(|_| "the canvas is gone".into())
    }
}

/// The app's canvas thread: `canvas_list` and `canvas_move`, replies through the runtime.
fn canvas_thread(requests: Receiver<CanvasToolRequest>, runtime: Weak<AgentToolRuntime>) {
    let mut nodes = json!([
        {"id": AGENT, "type": "terminal", "position": {"x": 0, "y": 0},
         "size": {"width": 480, "height": 320}, "data": {"title": "Agent", "agentId": "custom"}},
        {"id": NOTE, "type": "sticky", "position": {"x": 500, "y": 0},
         "size": {"width": 240, "height": 160}, "data": {"title": "Note", "text": "hi"}},
    ]);
    for request in requests {
        let args = &request.args;
        let result = match request.operation.as_str() {
            "canvas_list" => ToolResult::Ok(nodes.clone()),
            "canvas_move" => {
                let all = nodes.as_array_mut().unwrap();
                let node = all.iter_mut().find(|n| n["id"] == args["nodeId"]).unwrap();
                node["position"] = json!({"x": args["x"], "y": args["y"]});
                ToolResult::Ok(json!({"nodeId": node["id"], "position": node["position"],
                                      "relativeTo": null}))
            }
            other => ToolResult::Err(format!("{other} is not supported")),
        };
        let reply = CanvasToolReply {
            request_id: request.request_id,
            result,
        };
        let Some(runtime) = runtime.upgrade() else {
            return;
        };
        runtime.canvas_reply(7, true, reply);
    }
}

struct Embedded {
    runtime: Arc<AgentToolRuntime>,
    app: Arc<App>,
    data: PathBuf,
}

fn embed(name: &str) -> Embedded {
    let data = scratch(name);
    let app = Arc::new(App {
        node_ids: Mutex::new(vec![AGENT.into(), NOTE.into()]),
    });
    let (inbox, requests) = mpsc::channel();
    let host = Host {
        workspace: app.clone(),
        canvas: Arc::new(Canvas(Mutex::new(inbox))),
        browsers: Arc::new(NoBrowsers),
        terminals: Arc::new(NoTerminals),
    };
    let runtime = Arc::new(AgentToolRuntime::new(&data, host).unwrap());
    let weak = Arc::downgrade(&runtime);
    std::thread::spawn(move || canvas_thread(requests, weak));
    Embedded { runtime, app, data }
}

/// `<launcher> --session FILE call OPERATION ARGS`: its exit code and its ToolResult.
fn call(launcher: &Path, session: &Path, operation: &str, args: Value) -> (i32, Value) {
    let output = Command::new(launcher)
        .arg("--session")
        .arg(session)
        .args(["call", operation, &args.to_string()])
        .output()
        .unwrap();
    let result = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{operation}: not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    (output.status.code().unwrap_or(-1), result)
}

#[test]
fn a_newcomers_host_answers_an_agent_through_the_launcher() {
    let e = embed("newcomer");
    e.runtime
        .start(Path::new(env!("CARGO_BIN_EXE_termsprawlctl")))
        .unwrap();
    let launcher = e.runtime.launcher().unwrap();
    let agent = ToolIdentity {
        node_id: AGENT.into(),
        project_id: PROJECT.into(),
    };
    let session = e.runtime.provision_agent(&agent).unwrap();

    let (code, info) = call(&launcher, &session, "session_info", json!({}));
    assert_eq!(code, 0, "{info}");
    let guides = Path::new(info["value"]["guidesDirectory"].as_str().unwrap());
    assert!(guides.is_dir(), "{} is not written", guides.display());
    assert!(guides.join("termsprawl-canvas/SKILL.md").is_file());

    let (code, moved) = call(
        &launcher,
        &session,
        "canvas_move",
        json!({"nodeId": NOTE, "x": 40, "y": 60}),
    );
    assert_eq!(code, 0, "{moved}");
    let (code, listed) = call(&launcher, &session, "canvas_list", json!({}));
    assert_eq!(code, 0, "{listed}");
    assert_eq!(listed["value"][1]["position"], json!({"x": 40, "y": 60}));

    // Its terminal node with `data.agentId` is an agent.
    let (code, cards) = call(&launcher, &session, "agent_cards", json!({}));
    assert_eq!(code, 0, "{cards}");
    assert!(cards.to_string().contains(AGENT), "{cards}");

    // A host without terminals says so.
    let (code, typed) = call(
        &launcher,
        &session,
        "terminal_input",
        json!({"nodeId": AGENT, "text": "x"}),
    );
    assert_eq!(code, 1, "{typed}");

    // Off the canvas, the agent is told why its session no longer works.
    e.app.node_ids.lock().unwrap().retain(|id| id != AGENT);
    let (code, gone) = call(&launcher, &session, "canvas_list", json!({}));
    assert_eq!(code, 1, "{gone}");
    assert_eq!(
        gone["error"],
        "Session revoked: node agent1 is not on project demo's canvas in the host's Workspace snapshot"
    );

    e.runtime.close();
    let _ = std::fs::remove_dir_all(&e.data);
}

#[test]
fn start_refuses_a_termsprawlctl_that_is_not_an_executable_file() {
    let e = embed("newcomer-ctl");
    let plain = e.data.join("termsprawlctl.txt");
    std::fs::write(&plain, "not a program").unwrap();
    for ctl in [e.data.join("missing"), plain, e.data.clone()] {
        let refused = e.runtime.start(&ctl).unwrap_err();
        assert!(matches!(&refused, RuntimeError::NotExecutable(path) if *path == ctl));
        let message = refused.to_string();
        assert!(message.contains("is not an executable file"), "{message}");
        assert!(message.contains("client::run"), "{message}");
        assert!(e.runtime.launcher().is_none());
        assert!(!e.data.join("agent-tools/endpoint.json").exists());
    }
    // A real one is taken.
    e.runtime
        .start(Path::new(env!("CARGO_BIN_EXE_termsprawlctl")))
        .unwrap();
    e.runtime.close();
    let _ = std::fs::remove_dir_all(&e.data);
}
