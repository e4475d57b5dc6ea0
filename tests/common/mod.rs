//! Shared test helpers: fake app callbacks, a scratch data directory and a tiny HTTP/1.1
//! client over std `TcpStream`.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use termsprawl_tools::protocol::{
    IntegrationState, IntegrationStatus, ToolIdentity, ToolRequest, ToolSession,
};
use termsprawl_tools::server::{AgentToolServer, Clock, ProcessEffects, ServerCallbacks};

/// The app side, faked: every identity is valid unless its node is in `invalid`;
/// `execute` records the call and, for a held project, waits for a release.
#[derive(Default)]
pub struct FakeApp {
    pub browser: AtomicBool,
    pub invalid: Mutex<HashSet<String>>,
    pub executed: Mutex<Vec<String>>,
    pub statuses: Mutex<Vec<(String, IntegrationStatus)>>,
    holds: Mutex<HashMap<String, Arc<Mutex<mpsc::Receiver<()>>>>>,
    started: Mutex<Option<mpsc::Sender<String>>>,
}

impl FakeApp {
    /// From now on each `execute` in `project` waits for one `()` on the returned sender.
    pub fn hold(&self, project: &str) -> mpsc::Sender<()> {
        let (release, gate) = mpsc::channel();
        self.holds
            .lock()
            .unwrap()
            .insert(project.into(), Arc::new(Mutex::new(gate)));
        release
    }

    /// Each `execute` sends "project/operation" here when it begins.
    pub fn watch_starts(&self) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        *self.started.lock().unwrap() = Some(tx);
        rx
    }

    pub fn executed(&self) -> Vec<String> {
        self.executed.lock().unwrap().clone()
    }
}

impl ServerCallbacks for FakeApp {
    fn execute(&self, identity: &ToolIdentity, request: &ToolRequest) -> Result<Value, String> {
        let name = format!("{}/{}", identity.project_id, request.operation);
        if let Some(started) = &*self.started.lock().unwrap() {
            let _ = started.send(name.clone());
        }
        let gate = self
            .holds
            .lock()
            .unwrap()
            .get(&identity.project_id)
            .cloned();
        if let Some(gate) = gate {
            let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(20));
        }
        self.executed.lock().unwrap().push(name);
        if request.operation == "terminal_read" {
            // A large answer, for clients that do not read theirs.
            return Ok(json!({ "text": "x".repeat(1_000_000) }));
        }
        Ok(json!({ "ran": request.operation, "args": request.args }))
    }

    fn valid(&self, identity: &ToolIdentity) -> bool {
        !self.invalid.lock().unwrap().contains(&identity.node_id)
    }

    fn browser_enabled(&self) -> bool {
        self.browser.load(Ordering::SeqCst)
    }

    fn on_status(&self, node_id: &str, status: &IntegrationStatus) {
        self.statuses
            .lock()
            .unwrap()
            .push((node_id.into(), status.clone()));
    }
}

/// A clock the test moves by hand.
pub struct FakeClock {
    base: Instant,
    offset_ms: AtomicU64,
}

impl FakeClock {
    pub fn new() -> Arc<FakeClock> {
        Arc::new(FakeClock {
            base: Instant::now(),
            offset_ms: AtomicU64::new(0),
        })
    }
    pub fn advance(&self, by: Duration) {
        self.offset_ms
            .fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.base + Duration::from_millis(self.offset_ms.load(Ordering::SeqCst))
    }
}

/// A fresh, empty directory under the system temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tst-server-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn status(adapter: &str) -> IntegrationStatus {
    IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: adapter.into(),
        version: None,
        reason: None,
    }
}

pub fn identity(node: &str, project: &str) -> ToolIdentity {
    ToolIdentity {
        node_id: node.into(),
        project_id: project.into(),
    }
}

/// A started server with a fake app and one provisioned session.
pub struct Running {
    pub server: Arc<AgentToolServer>,
    pub app: Arc<FakeApp>,
    pub port: u16,
    pub session: ToolSession,
    pub data: PathBuf,
}

pub fn start(name: &str) -> Running {
    start_in(&scratch(name), None)
}

pub fn start_in(data: &Path, clock: Option<Arc<FakeClock>>) -> Running {
    start_with(data, clock, ProcessEffects::default())
}

/// [`start_in`] with what the server may do to this process.
pub fn start_with(data: &Path, clock: Option<Arc<FakeClock>>, effects: ProcessEffects) -> Running {
    let app = Arc::new(FakeApp::default());
    let server = match clock {
        Some(clock) => AgentToolServer::with_clock(data, app.clone(), clock).unwrap(),
        None => AgentToolServer::new(data, app.clone()).unwrap(),
    };
    server.set_process_effects(effects);
    let port = server.start().unwrap().port;
    let session = server
        .provision(&identity("agent-1", "project-a"), status("external"), true)
        .unwrap();
    Running {
        server,
        app,
        port,
        session,
        data: data.to_path_buf(),
    }
}

/// A parsed HTTP response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {:?}", String::from_utf8_lossy(&self.body)))
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// One keep-alive HTTP/1.1 connection.
pub struct Client {
    pub port: u16,
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Client {
            port,
            reader: BufReader::new(stream),
        }
    }

    pub fn from_stream(stream: TcpStream) -> Client {
        let port = stream.peer_addr().unwrap().port();
        Client {
            port,
            reader: BufReader::new(stream),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    /// POST /call with a JSON body and an optional bearer token.
    pub fn call(&mut self, token: Option<&str>, body: &str) -> Reply {
        let request = post_bytes(self.port, token, body);
        self.send(&request);
        self.read_reply().expect("a reply")
    }

    /// Reads one response; `None` if the connection ended first.
    pub fn read_reply(&mut self) -> Option<Reply> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let status = line.split(' ').nth(1)?.parse().ok()?;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).ok()?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':')?;
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size).ok()?;
                let size = usize::from_str_radix(size.trim(), 16).ok()?;
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).ok()?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            let length = find("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            body = vec![0; length];
            self.reader.read_exact(&mut body).ok()?;
        }
        Some(Reply {
            status,
            headers,
            body,
        })
    }
}

/// The bytes of a POST /call request.
pub fn post_bytes(port: u16, token: Option<&str>, body: &str) -> Vec<u8> {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One request on a fresh connection.
pub fn call(port: u16, token: Option<&str>, body: &str) -> Reply {
    Client::connect(port).call(token, body)
}

/// One raw request on a fresh connection.
pub fn raw(port: u16, bytes: &[u8]) -> Option<Reply> {
    let mut client = Client::connect(port);
    client.send(bytes);
    client.read_reply()
}

pub fn op(operation: &str, args: Value) -> String {
    json!({ "operation": operation, "args": args }).to_string()
}

/// Polls `done` every millisecond until it holds, failing after 10 s.
pub fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Threads of this process, from /proc.
pub fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
