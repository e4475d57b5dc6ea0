//! `termsprawlctl mcp` as a process: scripted JSON-RPC over real pipes, against the test
//! host, with every stdout line checked to be a JSON-RPC message.
#![deny(unsafe_code)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};
use support::{closed_port, ctl, Behaviour, DataDir, TestHost, TOKEN};

struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    received: Vec<String>,
}

impl Mcp {
    fn spawn(session: Option<&std::path::Path>) -> Self {
        let mut command = ctl();
        if let Some(session) = session {
            command.arg("--session").arg(session);
        }
        let mut child = command
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Mcp {
            stdin: child.stdin.take(),
            child,
            lines,
            received: Vec::new(),
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: Value) {
        self.send_raw(message.to_string().as_bytes());
    }

    fn recv(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a reply line");
        self.received.push(line.clone());
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    fn ask(&mut self, message: Value) -> Value {
        let id = message["id"].clone();
        self.send(message);
        let reply = self.recv();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// Closes stdin, expects exit 0, and checks that every stdout line was JSON-RPC.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "EOF ends mcp with exit 0");
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.received.push(line);
        }
        for line in &self.received {
            let message: Value = serde_json::from_str(line).unwrap();
            assert_eq!(message["jsonrpc"], json!("2.0"), "{line}");
            assert!(
                message.get("result").is_some() != message.get("error").is_some(),
                "{line}"
            );
            assert!(message.get("id").is_some(), "{line}");
        }
    }
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn setup(name: &str) -> (DataDir, TestHost, std::path::PathBuf) {
    let data = DataDir::new(name);
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);
    (data, host, session)
}

#[test]
fn a_legacy_session_through_the_binary() {
    let (_data, host, session) = setup("mcp-legacy");
    let mut mcp = Mcp::spawn(Some(&session));
    let init = mcp.ask(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "codex", "version": "1"}
    }}));
    assert_eq!(init["result"]["protocolVersion"], json!("2025-06-18"));
    assert_eq!(init["result"]["serverInfo"]["version"], json!("7.7.7-test"));
    assert_eq!(host.seen()[0].body["operation"], json!("session_info"));
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let list = mcp.ask(json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"browser_screenshot") && names.contains(&"canvas_move"));

    let info = mcp.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "session_info", "arguments": {}}}));
    assert_eq!(info["result"]["isError"], json!(false));
    assert_eq!(
        info["result"]["structuredContent"]["nodeId"],
        json!("agent-1")
    );

    let bad = mcp.ask(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "canvas_move", "arguments": {"nodeId": "n1", "x": "left", "y": 0}}}));
    assert_eq!(bad["result"]["isError"], json!(true));
    assert!(bad["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Invalid x"));

    let shot = mcp.ask(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "browser_screenshot", "arguments": {"nodeId": "b1"}}}));
    let image = &shot["result"]["content"][0];
    assert_eq!(image["type"], json!("image"));
    assert_eq!(image["mimeType"], json!("image/png"));
    assert!(image["data"].as_str().unwrap().starts_with("iVBORw0KGgo"));

    assert_eq!(
        host.requests(),
        5,
        "one host request per tools/call plus initialize and tools/list (session_info)"
    );
    mcp.finish();
}

#[test]
fn a_modern_session_through_the_binary() {
    let (_data, host, session) = setup("mcp-modern");
    let mut mcp = Mcp::spawn(Some(&session));
    let discover = mcp.ask(json!({"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": modern_meta()}}));
    assert_eq!(
        discover["result"]["supportedVersions"],
        json!(["2026-07-28"])
    );
    assert_eq!(discover["result"]["resultType"], json!("complete"));
    let list = mcp.ask(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta()}}));
    assert_eq!(list["result"]["cacheScope"], json!("public"));
    let call = mcp.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"_meta": modern_meta(), "name": "canvas_list"}}));
    assert_eq!(
        call["result"]["structuredContent"]["result"][1]["id"],
        json!("n2")
    );
    // tools/list asked session_info which operations it may list.
    assert_eq!(host.seen()[1].body["operation"], json!("session_info"));
    assert_eq!(
        host.seen()[2].body,
        json!({"operation": "canvas_list", "args": {}})
    );
    mcp.finish();
}

#[test]
fn protocol_errors_long_lines_and_notifications() {
    let (_data, host, session) = setup("mcp-errors");
    let mut mcp = Mcp::spawn(Some(&session));
    mcp.send_raw(b"{this is not json");
    assert_eq!(mcp.recv()["error"]["code"], json!(-32700));
    mcp.send_raw(b"[1,2]");
    assert_eq!(mcp.recv()["error"]["code"], json!(-32600));
    let unknown = mcp.ask(json!({"jsonrpc": "2.0", "id": 7, "method": "resources/list"}));
    assert_eq!(unknown["error"]["code"], json!(-32601));

    let mut long = br#"{"jsonrpc":"2.0","id":99,"method":"ping","params":{"pad":""#.to_vec();
    long.resize(300 * 1024, b'a');
    long.extend_from_slice(br#""}}"#);
    mcp.send_raw(&long);
    let reply = mcp.recv();
    assert_eq!(reply["error"]["code"], json!(-32600));
    assert_eq!(reply["id"], Value::Null);

    // Notifications get no reply: the next line out answers the ping sent after them.
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    let ping = mcp.ask(json!({"jsonrpc": "2.0", "id": "after", "method": "ping"}));
    assert_eq!(ping["result"], json!({}));
    assert_eq!(host.requests(), 0);
    mcp.finish();
}

#[test]
fn without_a_host_initialize_fails_with_the_reason_and_the_process_stays() {
    let data = DataDir::new("mcp-down");
    let session = data.write_session("agent-1", TOKEN);
    data.write_endpoint(&format!("http://127.0.0.1:{}/call", closed_port()));
    let mut mcp = Mcp::spawn(Some(&session));
    let init = mcp.ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}));
    assert_eq!(init["error"]["code"], json!(-32603));
    assert!(init["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Tool connection unavailable: "));
    let call = mcp.ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"_meta": modern_meta(), "name": "canvas_list"}}));
    assert_eq!(call["result"]["isError"], json!(true));
    assert!(call["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Check that the host is running (start it with termsprawl-tools serve)"));
    mcp.finish();

    let mut no_session = Mcp::spawn(None);
    let init = no_session.ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}));
    assert!(init["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("No session file"));
    no_session.finish();
}
