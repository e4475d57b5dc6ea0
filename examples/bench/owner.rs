//! `owner-server`: the runtime embedded as an app embeds it, with the canvas owned by a
//! thread of its own (an app's UI thread) that answers through the replier each request
//! brings. With `--current-list on` the owner also answers `current_list` from the list
//! its thread last published, so the caller's presence check needs no trip through that
//! thread; with `off` every canvas operation pays the extra `canvas_list` trip (what
//! every owner paid before the runtime used `current_list` for that check).

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use termsprawl_tools::protocol::{CanvasToolReply, CanvasToolRequest, ToolIdentity, ToolResult};
use termsprawl_tools::runtime::{
    AgentToolRuntime, CanvasNode, CanvasOwner, CanvasReplier, Host, NoBrowsers, NoTerminals,
    NodeKind, ProjectSnapshot, Workspace,
};

const PROJECT: &str = "p0";
const NOTE: &str = "note";

struct App {
    node_ids: Vec<String>,
}

impl Workspace for App {
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        (project_id == PROJECT).then(|| ProjectSnapshot {
            id: PROJECT.into(),
            cwd: None,
            remote: false,
            node_ids: self.node_ids.clone(),
        })
    }
}

type Job = (CanvasToolRequest, CanvasReplier);

struct Canvas {
    inbox: Mutex<Sender<Job>>,
    current: Option<Arc<Mutex<Arc<Value>>>>,
    /// Requests handed to the canvas thread (each one a trip through it).
    trips: AtomicU64,
}

impl CanvasOwner for Canvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        (project_id == PROJECT).then_some(1)
    }
    fn send(
        &self,
        _: u64,
        request: CanvasToolRequest,
        replier: CanvasReplier,
    ) -> Result<(), String> {
        self.trips.fetch_add(1, Ordering::Relaxed);
        let inbox = self.inbox.lock().map_err(|_| "the canvas is gone")?;
        inbox
            .send((request, replier))
            .map_err(|_| "the canvas is gone".into())
    }
    fn current_list(&self, _project_id: &str) -> Option<Arc<Value>> {
        let list = Arc::clone(&*self.current.as_ref()?.lock().ok()?);
        (!list.is_null()).then_some(list)
    }
}

/// The app's canvas thread: `canvas_list` and `canvas_move`; publishes its list before
/// each reply, so a published list is always current.
fn canvas_thread(jobs: Receiver<Job>, mut nodes: Vec<CanvasNode>, current: Arc<Mutex<Arc<Value>>>) {
    for (request, replier) in jobs {
        let args = &request.args;
        let result = match request.operation.as_str() {
            "canvas_list" => ToolResult::Ok(CanvasNode::list(&nodes)),
            "canvas_move" => match nodes.iter_mut().find(|n| args["nodeId"] == n.id.as_str()) {
                Some(node) => {
                    node.x = args["x"].as_f64().unwrap_or(node.x);
                    node.y = args["y"].as_f64().unwrap_or(node.y);
                    let position = json!({"x": node.x, "y": node.y});
                    ToolResult::Ok(
                        json!({"nodeId": node.id, "position": position, "relativeTo": null}),
                    )
                }
                None => ToolResult::Err("No such node".into()),
            },
            other => ToolResult::Err(format!("{other} is not supported")),
        };
        if let Ok(mut list) = current.lock() {
            *list = Arc::new(CanvasNode::list(&nodes));
        }
        let reply = CanvasToolReply {
            request_id: request.request_id,
            result,
        };
        let _ = replier.reply(reply);
    }
}

/// `owner-server --data DIR [--sessions N] [--current-list on|off]`: N agents and a note
/// on one canvas, a ready line like `serve`'s; serves until stdin closes, then prints
/// the trips through the canvas thread to stderr.
pub fn main(args: &[String]) -> Result<(), String> {
    let data: PathBuf = crate::flag::<String>(args, "--data", String::new())?.into();
    if data.as_os_str().is_empty() {
        return Err("owner-server needs --data DIR".into());
    }
    let sessions: usize = crate::flag(args, "--sessions", 1)?.max(1);
    let offer_current = match crate::flag(args, "--current-list", "on".to_string())?.as_str() {
        "on" => true,
        "off" => false,
        other => return Err(format!("--current-list is on or off, not {other}")),
    };
    let agents: Vec<String> = (0..sessions).map(|i| format!("agent-{i}")).collect();
    let mut nodes: Vec<CanvasNode> = agents
        .iter()
        .map(|id| {
            let kind = NodeKind::Agent {
                agent_id: "custom".into(),
                command: "agent".into(),
                remote: false,
            };
            CanvasNode::new(id, kind)
        })
        .collect();
    nodes.push(CanvasNode::new(
        NOTE,
        NodeKind::Sticky {
            text: "note".into(),
        },
    ));
    let (inbox, jobs) = mpsc::channel();
    let current = Arc::new(Mutex::new(Arc::new(Value::Null)));
    let canvas = Arc::new(Canvas {
        inbox: Mutex::new(inbox),
        current: offer_current.then(|| Arc::clone(&current)),
        trips: AtomicU64::new(0),
    });
    let node_ids = nodes.iter().map(|n| n.id.clone()).collect();
    std::thread::spawn(move || canvas_thread(jobs, nodes, current));
    let host = Host {
        workspace: Arc::new(App { node_ids }),
        canvas: canvas.clone(),
        browsers: Arc::new(NoBrowsers),
        terminals: Arc::new(NoTerminals),
    };
    let runtime = AgentToolRuntime::new(&data, host).map_err(|e| e.to_string())?;
    runtime.set_activity_directory(None);
    let ctl = std::env::current_exe().map_err(|e| e.to_string())?;
    let endpoint = runtime.start(&ctl).map_err(|e| e.to_string())?;
    let mut listed = Vec::new();
    for agent in &agents {
        let identity = ToolIdentity {
            node_id: agent.clone(),
            project_id: PROJECT.into(),
        };
        let file = runtime
            .provision_agent(&identity)
            .map_err(|e| e.to_string())?;
        listed.push(json!({ "nodeId": agent, "sessionFile": file }));
    }
    println!(
        "{}",
        json!({
            "ready": true, "url": endpoint.url, "instanceId": endpoint.instance_id,
            "directory": runtime.server().directory(), "projectId": PROJECT, "sessions": listed,
        })
    );
    let mut line = String::new();
    while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {}
    runtime.close();
    eprintln!(
        "owner-server: {} trips through the canvas thread",
        canvas.trips.load(Ordering::Relaxed)
    );
    Ok(())
}
