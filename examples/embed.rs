//! The smallest correct embedder: one project whose canvas (two nodes) is owned by a
//! thread of its own, no terminals and no browsers (`NoTerminals`, `NoBrowsers`), and
//! the app's own binary as `termsprawlctl` (run by that name, it is the CLI). It calls
//! itself through the CLI as an agent would, then exits:
//!
//! ```text
//! cargo run --example embed            # self-test, exits 0 on success
//! cargo run --example embed -- --serve # keeps serving until Enter
//! ```
#![deny(unsafe_code)]

use std::io::BufRead;
use std::path::Path;
use std::process::ExitCode;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use termsprawl_tools::protocol::{CanvasToolReply, CanvasToolRequest, ToolIdentity, ToolResult};
use termsprawl_tools::runtime::{
    unix_millis, AgentToolRuntime, CanvasNode, CanvasOwner, CanvasReplier, Host, NoBrowsers,
    NoTerminals, NodeKind, ProjectSnapshot, Workspace,
};

const PROJECT: &str = "demo";
const AGENT: &str = "agent1";
const NOTE: &str = "note1";
/// The sender id the canvas thread replies as (the app has one canvas).
const CANVAS: u64 = 1;

/// The app's one project (not a folder).
struct App;

impl Workspace for App {
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        (project_id == PROJECT).then(|| ProjectSnapshot {
            id: PROJECT.into(),
            cwd: None,
            remote: false,
            node_ids: vec![AGENT.into(), NOTE.into()],
        })
    }
}

/// A canvas request and how to answer it.
type Job = (CanvasToolRequest, CanvasReplier);

/// Hands canvas requests to the canvas thread.
struct Canvas(Mutex<Sender<Job>>);

impl CanvasOwner for Canvas {
    fn target(&self, project_id: &str) -> Option<u64> {
        (project_id == PROJECT).then_some(CANVAS)
    }
    fn send(
        &self,
        _: u64,
        request: CanvasToolRequest,
        replier: CanvasReplier,
    ) -> Result<(), String> {
        let inbox = self.0.lock().map_err(|_| "the canvas is gone")?;
        inbox
            .send((request, replier))
            .map_err(|_| "the canvas is gone".into())
    }
}

/// The only writer of the canvas: answers `canvas_list` and `canvas_move`, refuses the
/// rest, and replies with the request's replier.
fn canvas_thread(jobs: Receiver<Job>) {
    // An agent's node names its agent: `agent_cards` lists it.
    let agent = NodeKind::Agent {
        agent_id: "custom".into(),
        command: "my-agent".into(),
        remote: false,
    };
    let note = NodeKind::Sticky {
        text: "hello".into(),
    };
    let mut nodes = [CanvasNode::new(AGENT, agent), CanvasNode::new(NOTE, note)];
    for (request, replier) in jobs {
        let args = &request.args;
        let result = match request.operation.as_str() {
            _ if request.expires_at < unix_millis() => ToolResult::Err("Request expired".into()),
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
                None => ToolResult::Err("No such node; call canvas_list".into()),
            },
            other => ToolResult::Err(format!("{other} is not supported by this canvas")),
        };
        let reply = CanvasToolReply {
            request_id: request.request_id,
            result,
        };
        // Refused only when nobody waits any more (timed out, or the app stopped).
        if let Err(why) = replier.reply(reply) {
            eprintln!("canvas reply refused: {why}");
        }
    }
}

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    // Run by the name `termsprawlctl` (the symlink made below), this binary is the CLI.
    let mut args = std::env::args();
    let name = args.next().unwrap_or_default();
    if Path::new(&name).file_name() == Some("termsprawlctl".as_ref()) {
        return Ok(termsprawl_tools::client::run(args));
    }
    let serve = args.any(|a| a == "--serve");
    let data = std::env::temp_dir().join(format!("termsprawl-embed-{}", std::process::id()));
    let outcome = serve_one_agent(&data, serve);
    let _ = std::fs::remove_dir_all(&data);
    outcome.map(|()| ExitCode::SUCCESS)
}

fn serve_one_agent(data: &Path, serve: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (inbox, requests) = mpsc::channel();
    let host = Host {
        workspace: Arc::new(App),
        canvas: Arc::new(Canvas(Mutex::new(inbox))),
        browsers: Arc::new(NoBrowsers),
        terminals: Arc::new(NoTerminals),
    };
    let runtime = AgentToolRuntime::new(data, host)?;
    std::thread::spawn(move || canvas_thread(requests));

    // The launcher agents run execs this symlink to our own binary.
    std::fs::create_dir_all(data)?;
    let ctl = data.join("termsprawlctl");
    std::os::unix::fs::symlink(std::env::current_exe()?, &ctl)?;
    let endpoint = runtime.start(&ctl)?;
    let agent = ToolIdentity {
        node_id: AGENT.into(),
        project_id: PROJECT.into(),
    };
    let session = runtime.provision_agent(&agent)?;
    println!(
        "serving {} (session file {})",
        endpoint.url,
        session.display()
    );

    let outcome = self_test(&session, runtime.launcher());
    if serve && outcome.is_ok() {
        println!("press Enter to stop");
        let _ = std::io::stdin().lock().lines().next();
    }
    runtime.close();
    outcome
}

/// Calls as an agent would: through the CLI in this process, then (outside `cargo test`,
/// whose binary is the test harness) through the launcher, which runs this binary as
/// `termsprawlctl`.
fn self_test(
    session: &Path,
    launcher: Option<std::path::PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    let session = session.to_string_lossy().into_owned();
    let calls = [
        vec!["call", "session_info"],
        vec!["call", "canvas_move", r#"{"nodeId":"note1","x":40,"y":60}"#],
        vec!["call", "canvas_list"],
    ];
    for call in calls {
        let args = ["--session", session.as_str()]
            .into_iter()
            .chain(call.iter().copied());
        if termsprawl_tools::client::run(args.map(String::from)) != ExitCode::SUCCESS {
            return Err(format!("termsprawlctl {call:?} failed").into());
        }
    }
    if cfg!(test) {
        return Ok(());
    }
    let launcher = launcher.ok_or("no launcher")?;
    let run = std::process::Command::new(launcher)
        .args(["--session", &session, "call", "canvas_list"])
        .output()?;
    let listed: Value = serde_json::from_slice(&run.stdout)?;
    if !run.status.success() || listed["value"][1]["position"] != json!({"x": 40.0, "y": 60.0}) {
        return Err(format!("the launcher's canvas_list: {listed}").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// `cargo test` runs the example end to end, so it can't rot.
    #[test]
    fn the_example_serves_one_agent() {
        super::main().expect("the embedding example's self-test");
    }
}
