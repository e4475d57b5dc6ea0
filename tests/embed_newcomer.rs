//! The core embedded as a newcomer would from the docs alone: its own workspace and
//! canvas owner (a thread of its own), no terminals or browsers (`NoTerminals`,
//! `NoBrowsers`), an agent provisioned with `provision_agent`, and every call made by the
//! real `termsprawlctl` (`client::run`) through the launcher `start` installed.
#![deny(unsafe_code)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use common::scratch;
use serde_json::{json, Value};
use termsprawl_tools::protocol::{CanvasToolReply, CanvasToolRequest, ToolIdentity, ToolResult};
use termsprawl_tools::runtime::{
    AgentToolRuntime, CanvasNode, CanvasOwner, CanvasReplier, Host, NoBrowsers, NoTerminals,
    NodeKind, ProjectSnapshot, RuntimeError, Workspace,
};
use termsprawl_tools::server::ACCEPT_JOIN_WAIT;

const PROJECT: &str = "demo";
const AGENT: &str = "agent1";
const NOTE: &str = "note1";

/// The app's one project; the test takes nodes off its canvas.
struct App {
    node_ids: Mutex<Vec<String>>,
    /// A lock the app's own UI holds at times; `project` takes it, as a real app would.
    ui: Mutex<()>,
    /// How many times `project` was entered.
    asked: AtomicUsize,
}

impl Workspace for App {
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let _ui = self.ui.lock().unwrap();
        (project_id == PROJECT).then(|| ProjectSnapshot {
            id: PROJECT.into(),
            cwd: None,
            remote: false,
            node_ids: self.node_ids.lock().unwrap().clone(),
        })
    }
}

/// The canvas owner; it records each trip to the canvas thread, and with `offer_current`
/// answers `current_list` from the list the canvas thread last published.
struct Canvas {
    inbox: Mutex<Sender<(CanvasToolRequest, CanvasReplier)>>,
    trips: Mutex<Vec<String>>,
    offer_current: bool,
    current: Arc<Mutex<Arc<Value>>>,
    /// Why the runtime refused the stray replies the canvas thread sends first.
    refusals: Arc<Mutex<Vec<String>>>,
}

impl CanvasOwner for Canvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        (project_id == PROJECT).then_some(7)
    }
    fn send(
        &self,
        _target: u64,
        request: CanvasToolRequest,
        replier: CanvasReplier,
    ) -> Result<(), String> {
        self.trips.lock().unwrap().push(request.operation.clone());
        let inbox = self.inbox.lock().map_err(|_| "the canvas is gone")?;
        let job = (request, replier);
        inbox.send(job).map_err(|_| "the canvas is gone".into())
    }
    fn current_list(&self, _project_id: &str) -> Option<Arc<Value>> {
        // Published by the canvas thread before it replies, so always current; `Null`
        // until the first list.
        let list = Arc::clone(&self.current.lock().unwrap());
        (self.offer_current && !list.is_null()).then_some(list)
    }
}

/// The app's canvas thread: `canvas_list` and `canvas_move`, answered from another
/// thread with the replier that came with each request.
fn canvas_thread(
    requests: Receiver<(CanvasToolRequest, CanvasReplier)>,
    current: Arc<Mutex<Arc<Value>>>,
    refusals: Arc<Mutex<Vec<String>>>,
) {
    let agent = NodeKind::Agent {
        agent_id: "custom".into(),
        command: "my-agent".into(),
        remote: false,
    };
    let note = NodeKind::Sticky { text: "hi".into() };
    let mut nodes = [CanvasNode::new(AGENT, agent), CanvasNode::new(NOTE, note)];
    nodes[1].x = 500.0;
    for (request, replier) in requests {
        let args = &request.args;
        let result = match request.operation.as_str() {
            "canvas_list" => ToolResult::Ok(CanvasNode::list(&nodes)),
            "canvas_move" => {
                let node = nodes
                    .iter_mut()
                    .find(|n| args["nodeId"] == n.id.as_str())
                    .unwrap();
                (node.x, node.y) = (args["x"].as_f64().unwrap(), args["y"].as_f64().unwrap());
                let position = json!({"x": node.x, "y": node.y});
                ToolResult::Ok(json!({"nodeId": node.id, "position": position, "relativeTo": null}))
            }
            other => ToolResult::Err(format!("{other} is not supported")),
        };
        *current.lock().unwrap() = Arc::new(CanvasNode::list(&nodes));
        let reply = CanvasToolReply {
            request_id: request.request_id,
            result,
        };
        // A stray first, from yet another thread: the wrong request id, refused.
        let mut stray = reply.clone();
        stray.request_id = "no-such-request".into();
        let stray_replier = replier.clone();
        let refused = std::thread::spawn(move || stray_replier.reply(stray))
            .join()
            .unwrap();
        refusals.lock().unwrap().extend(refused.err());
        let answer = std::thread::spawn(move || replier.reply(reply));
        if answer.join().unwrap().is_err() {
            return;
        }
    }
}

struct Embedded {
    runtime: Arc<AgentToolRuntime>,
    app: Arc<App>,
    canvas: Arc<Canvas>,
    data: PathBuf,
}

fn embed(name: &str, offer_current: bool) -> Embedded {
    let data = scratch(name);
    let app = Arc::new(App {
        node_ids: Mutex::new(vec![AGENT.into(), NOTE.into()]),
        ui: Mutex::new(()),
        asked: AtomicUsize::new(0),
    });
    let (inbox, requests) = mpsc::channel();
    let current = Arc::new(Mutex::new(Arc::new(Value::Null)));
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let canvas = Arc::new(Canvas {
        inbox: Mutex::new(inbox),
        trips: Mutex::default(),
        offer_current,
        current: current.clone(),
        refusals: refusals.clone(),
    });
    let host = Host {
        workspace: app.clone(),
        canvas: canvas.clone(),
        browsers: Arc::new(NoBrowsers),
        terminals: Arc::new(NoTerminals),
    };
    let runtime = Arc::new(AgentToolRuntime::new(&data, host).unwrap());
    std::thread::spawn(move || canvas_thread(requests, current, refusals));
    Embedded {
        runtime,
        app,
        canvas,
        data,
    }
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
    let e = embed("newcomer", false);
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
    assert_eq!(
        listed["value"][1]["position"],
        json!({"x": 40.0, "y": 60.0})
    );

    // Every stray reply was refused with its reason, none was taken.
    let refusals = e.canvas.refusals.lock().unwrap().clone();
    assert!(!refusals.is_empty());
    for refused in refusals {
        let reason = "No canvas request no-such-request is waiting: answered already, timed out, or the app stopped";
        assert_eq!(refused, reason);
    }

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
    let e = embed("newcomer-ctl", false);
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

/// The trips through the app's canvas thread each call costs: the caller's presence
/// check (a `canvas_list`, unless `current_list` answers it) and the operation itself.
fn trips_of(offer_current: bool) -> Vec<Vec<String>> {
    let name = if offer_current {
        "trips-current"
    } else {
        "trips"
    };
    let e = embed(name, offer_current);
    e.runtime
        .start(Path::new(env!("CARGO_BIN_EXE_termsprawlctl")))
        .unwrap();
    let agent = ToolIdentity {
        node_id: AGENT.into(),
        project_id: PROJECT.into(),
    };
    let session = e.runtime.provision_agent(&agent).unwrap();
    let launcher = e.runtime.launcher().unwrap();
    let mut trips = Vec::new();
    for (operation, args) in [
        ("canvas_list", json!({})),
        ("canvas_move", json!({"nodeId": NOTE, "x": 1, "y": 2})),
        ("canvas_move", json!({"nodeId": NOTE, "x": 3, "y": 4})),
        ("canvas_list", json!({})),
    ] {
        let (code, result) = call(&launcher, &session, operation, args);
        assert_eq!(code, 0, "{operation}: {result}");
        trips.push(std::mem::take(&mut *e.canvas.trips.lock().unwrap()));
    }
    e.runtime.close();
    let _ = std::fs::remove_dir_all(&e.data);
    trips
}

#[test]
fn an_owner_with_a_current_list_pays_one_trip_per_operation() {
    let asked = trips_of(false);
    println!("owner trips without current_list: {asked:?}");
    let expected: [&[&str]; 4] = [
        &["canvas_list"],
        &["canvas_list", "canvas_move"],
        &["canvas_list", "canvas_move"],
        &["canvas_list"],
    ];
    assert_eq!(asked, expected);
    let current = trips_of(true);
    println!("owner trips with current_list: {current:?}");
    // Only the first list is asked for (nothing published yet); then the presence check
    // and `canvas_list` itself come from the current list.
    let expected: [&[&str]; 4] = [&["canvas_list"], &["canvas_move"], &["canvas_move"], &[]];
    assert_eq!(current, expected);
}

/// `close` waits for a `Workspace` call blocked on the accept thread (the app holding
/// its UI lock) at most `ACCEPT_JOIN_WAIT`, then returns; the call, once let go, gets
/// no answer but its connection's end. Prints how long `close` took.
#[test]
fn close_returns_while_a_workspace_call_is_blocked_on_the_accept_thread() {
    let e = embed("newcomer-close", false);
    e.runtime
        .start(Path::new(env!("CARGO_BIN_EXE_termsprawlctl")))
        .unwrap();
    let agent = ToolIdentity {
        node_id: AGENT.into(),
        project_id: PROJECT.into(),
    };
    let session = e.runtime.provision_agent(&agent).unwrap();
    let launcher = e.runtime.launcher().unwrap();

    let ui = e.app.ui.lock().unwrap();
    let asked = e.app.asked.load(Ordering::SeqCst);
    let mut agent_call = Command::new(&launcher)
        .arg("--session")
        .arg(&session)
        .args(["call", "canvas_list"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    common::wait_until("the call to reach Workspace::project", || {
        e.app.asked.load(Ordering::SeqCst) > asked
    });
    let runtime = e.runtime.clone();
    let (closed, done) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        runtime.close();
        let _ = closed.send(started.elapsed());
    });
    // Bounded by the test's own patience, not by a time limit on `close`.
    let took = done
        .recv_timeout(ACCEPT_JOIN_WAIT * 30)
        .expect("close did not return while the callback stayed blocked");
    println!("close returned after {took:?} with Workspace::project blocked");
    assert!(
        took >= ACCEPT_JOIN_WAIT,
        "close waited for the callback first"
    );
    // Nothing listens any more; the blocked call ends once the app lets it go.
    assert!(!e.data.join("agent-tools/endpoint.json").exists());
    drop(ui);
    let _ = agent_call.wait();
    let _ = std::fs::remove_dir_all(&e.data);
}
