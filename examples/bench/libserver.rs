//! `lib-server`: our `AgentToolServer` (the library, the real HTTP front, sessions and
//! project queues) with a trivial `execute` callback, as its own process. The growth
//! curves use it where `serve` cannot be shaped: thousands of sessions, many projects.

use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus, ToolIdentity, ToolRequest};
use termsprawl_tools::server::{AgentToolServer, ServerCallbacks};

/// Answers every queued operation at once with a small fixed value.
struct Trivial;

impl ServerCallbacks for Trivial {
    fn execute(&self, _identity: &ToolIdentity, _request: &ToolRequest) -> Result<Value, String> {
        Ok(json!({ "nodes": [] }))
    }

    fn valid(&self, _identity: &ToolIdentity) -> bool {
        true
    }

    fn browser_enabled(&self) -> bool {
        false
    }
}

/// `lib-server --data DIR [--sessions N] [--projects P]`: provisions N sessions, session
/// i in project `p{i % P}`, starts, prints a ready line like `serve`'s and serves until
/// its stdin closes.
pub fn main(args: &[String]) -> Result<(), String> {
    let data: PathBuf = crate::flag::<String>(args, "--data", String::new())?.into();
    if data.as_os_str().is_empty() {
        return Err("lib-server needs --data DIR".into());
    }
    let sessions: usize = crate::flag(args, "--sessions", 1)?;
    let projects: usize = crate::flag(args, "--projects", 1)?.max(1);
    let server = AgentToolServer::new(&data, Arc::new(Trivial)).map_err(|e| e.to_string())?;
    let mut listed = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let identity = ToolIdentity {
            node_id: format!("agent-{i}"),
            project_id: format!("p{}", i % projects),
        };
        let status = IntegrationStatus {
            state: IntegrationState::CliFallback,
            adapter: "external".into(),
            version: None,
            reason: None,
        };
        server
            .provision(&identity, status, false)
            .map_err(|e| e.to_string())?;
        let file = server
            .session_file(&identity.node_id)
            .map_err(|e| e.to_string())?;
        listed.push(json!({ "nodeId": identity.node_id, "sessionFile": file }));
    }
    let endpoint = server.start().map_err(|e| e.to_string())?;
    println!(
        "{}",
        json!({
            "ready": true, "url": endpoint.url, "instanceId": endpoint.instance_id,
            "directory": server.directory(), "projectId": "p0", "sessions": listed,
        })
    );
    let mut line = String::new();
    while std::io::stdin().lock().read_line(&mut line).unwrap_or(0) > 0 {}
    server.close();
    Ok(())
}
