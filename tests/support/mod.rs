//! Test doubles for the black-box `termsprawlctl` tests: a data directory laid out like the
//! host's, and a small HTTP host on 127.0.0.1:0 that answers like the spec's server (the
//! real `serve` is built elsewhere; this stands in for it and is not the thing under test).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{json, Value};
use termsprawl_tools::protocol::{validate_tool_request, ToolResult};

/// A token of the shape the host issues.
pub const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The `termsprawlctl` binary under test.
pub fn ctl() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_termsprawlctl"));
    command.env_remove("TERMSPRAWL_SESSION_FILE");
    command.env_remove("TERMSPRAWL_CTL_TIMEOUT_MS");
    command
}

/// `<root>/agent-tools/{endpoint.json,sessions/<id>.json}` in a fresh temp folder.
pub struct DataDir {
    pub root: PathBuf,
}

impl DataDir {
    pub fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!(
            "termsprawlctl-{name}-{}-{:?}",
            std::process::id(),
            thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("agent-tools/sessions")).unwrap();
        DataDir { root }
    }

    pub fn agent_tools(&self) -> PathBuf {
        self.root.join("agent-tools")
    }

    /// Writes `sessions/<node>.json` with mode 0600 and returns its path.
    pub fn write_session(&self, node: &str, token: &str) -> PathBuf {
        let path = self.agent_tools().join(format!("sessions/{node}.json"));
        let session = json!({
            "nodeId": node, "projectId": "p1", "token": token,
            "status": {"state": "cli-fallback", "adapter": "external"},
        });
        std::fs::write(&path, serde_json::to_vec_pretty(&session).unwrap()).unwrap();
        set_mode(&path, 0o600);
        path
    }

    pub fn write_endpoint(&self, url: &str) {
        let endpoint = json!({ "url": url, "instanceId": "test-instance" });
        std::fs::write(
            self.agent_tools().join("endpoint.json"),
            endpoint.to_string(),
        )
        .unwrap();
    }

    pub fn remove_endpoint(&self) {
        let _ = std::fs::remove_file(self.agent_tools().join("endpoint.json"));
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// How the test host behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Answer like the spec's server.
    Answer,
    /// Read the request, then never answer (until the host is dropped).
    Hang,
}

/// One request as the test host saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub head: String,
    pub body: Value,
}

/// A loopback HTTP host standing in for `termsprawl-tools serve`.
pub struct TestHost {
    pub port: u16,
    requests: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl TestHost {
    pub fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (requests, seen, stop) = (requests.clone(), seen.clone(), stop.clone());
            thread::spawn(move || {
                let mut held = Vec::new();
                for socket in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(socket) = socket else { continue };
                    let (requests, seen, stop) = (requests.clone(), seen.clone(), stop.clone());
                    held.push(thread::spawn(move || {
                        serve_one(socket, port, behaviour, &requests, &seen, &stop)
                    }));
                }
                for connection in held {
                    let _ = connection.join();
                }
            })
        };
        TestHost {
            port,
            requests,
            seen,
            stop,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/call", self.port)
    }

    /// How many requests arrived (whatever their fate).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wake the accept loop
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve_one(
    mut socket: TcpStream,
    port: u16,
    behaviour: Behaviour,
    requests: &AtomicUsize,
    seen: &Mutex<Vec<Seen>>,
    stop: &AtomicBool,
) {
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let Some((head, body)) = read_request(&mut socket) else {
        return;
    };
    requests.fetch_add(1, Ordering::SeqCst);
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push(Seen {
        head: head.clone(),
        body: parsed.clone(),
    });
    if behaviour == Behaviour::Hang {
        while !stop.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(20));
        }
        return;
    }
    let (status, result) = answer(&head, &parsed, port);
    let body = serde_json::to_vec(&result).unwrap();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        _ => "Forbidden",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(response.as_bytes());
    let _ = socket.write_all(&body);
}

fn read_request(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut buffer).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let length = header(&head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    while raw.len() < head_end + length {
        let n = socket.read(&mut buffer).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buffer[..n]);
    }
    Some((head, raw[head_end..head_end + length].to_vec()))
}

pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// The spec's checks in the spec's order, then a canned answer per operation.
fn answer(head: &str, body: &Value, port: u16) -> (u16, ToolResult) {
    let request_line = head.split("\r\n").next().unwrap_or_default();
    let host_ok = header(head, "host") == Some(&format!("127.0.0.1:{port}"));
    if header(head, "origin").is_some() || request_line != "POST /call HTTP/1.1" || !host_ok {
        return (403, ToolResult::Err("Unsupported request".into()));
    }
    if header(head, "authorization") != Some(&format!("Bearer {TOKEN}")) {
        return (401, ToolResult::Err("Unknown or revoked session".into()));
    }
    let request = match validate_tool_request(body) {
        Ok(request) => request,
        Err(error) => return (400, ToolResult::Err(error.to_string())),
    };
    let value = match request.operation.as_str() {
        "session_info" => json!({
            "nodeId": "agent-1", "projectId": "p1", "instanceId": "test-instance", "host": "local",
            "status": {"state": "connected", "adapter": "claude-mcp", "reason": "Authenticated tool connection established"},
            "appVersion": "7.7.7-test", "browserEnabled": true,
            "operations": termsprawl_tools::protocol::AGENT_TOOLS.iter().map(|t| t.name).collect::<Vec<_>>(),
            "guidesDirectory": "/test/launch/agent-1/skills", "preferencesFile": "/test/preferences.json",
            "activityDropped": 0,
        }),
        // A 1x1 PNG, as browser_screenshot returns it: {image: base64}.
        "browser_screenshot" => json!({
            "image": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
        }),
        "canvas_list" => {
            json!([{ "id": "agent-1", "type": "agent" }, { "id": "n2", "type": "note" }])
        }
        "canvas_move" => {
            return (
                400,
                ToolResult::Err(format!(
                    "Unknown node: {}",
                    request.args["nodeId"].as_str().unwrap_or_default()
                )),
            )
        }
        other => json!({ "done": other, "args": request.args }),
    };
    (200, ToolResult::Ok(value))
}

/// A port with nothing listening on it (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
