//! Starting a server under test as its own process, reading its ready line, and the
//! request bytes the clients send to it.

use std::fs;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::procfs::{self, ProcSample};
use crate::sys;

/// How long a server may take to print its ready line.
const READY_DEADLINE: Duration = Duration::from_secs(120);

/// A session a client can call with.
#[derive(Clone, Debug)]
pub struct Session {
    /// Its bearer token.
    pub token: String,
}

/// A running server process.
pub struct Server {
    child: Child,
    /// Held open: the bench's own harnesses exit when their stdin closes.
    stdin: Option<ChildStdin>,
    /// Whether closing stdin stops it (the bench's harnesses); else SIGTERM (`serve`).
    stops_on_eof: bool,
    /// Its pid.
    pub pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Sessions listed in the ready line (session files are read lazily).
    session_entries: Vec<Value>,
    /// Spawn -> ready line.
    pub ready_after: Duration,
    /// Its counters shortly after it became ready.
    pub idle: ProcSample,
    /// Where its stderr goes.
    pub log: PathBuf,
    /// The canvas view's address from the ready line (`serve` only).
    pub view_url: Option<String>,
}

/// Starts `command` with its threads pinned to `server_cpu` (the calling thread is
/// re-pinned to `client_cpu` afterwards) and waits for its ready line.
pub fn spawn(
    mut command: Command,
    log: &Path,
    pins: Option<(usize, usize)>,
    stops_on_eof: bool,
) -> Result<Server, String> {
    let log_file = fs::File::create(log).map_err(|e| format!("create {}: {e}", log.display()))?;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file));
    if let Some((server_cpu, _)) = pins {
        sys::pin_current_thread(server_cpu)?;
    }
    let started = Instant::now();
    let spawned = command.spawn();
    if let Some((_, client_cpu)) = pins {
        sys::pin_current_thread(client_cpu)?;
    }
    let mut child = spawned.map_err(|e| format!("start {command:?}: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let (lines, ready) = mpsc::channel();
    thread::spawn(move || {
        // Keep draining stdout for the server's whole life; only the first line matters.
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = lines.send(line);
        }
    });
    let line = match ready.recv_timeout(READY_DEADLINE) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "no ready line from {command:?}; its stderr: {}",
                tail(log)
            ));
        }
    };
    let ready_after = started.elapsed();
    let parsed: Value =
        serde_json::from_str(&line).map_err(|e| format!("ready line is not JSON ({e}): {line}"))?;
    let url = parsed["url"].as_str().ok_or("ready line has no url")?;
    let addr = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|host| host.parse().ok())
        .ok_or_else(|| format!("ready line url is not http://IP:PORT/…: {url}"))?;
    let session_entries = parsed["sessions"].as_array().cloned().unwrap_or_default();
    let pid = child.id();
    let stdin = child.stdin.take();
    // Let start-up allocations and threads settle before the idle sample.
    thread::sleep(Duration::from_millis(300));
    let idle = procfs::sample(pid).ok_or("the server exited right after its ready line")?;
    Ok(Server {
        child,
        stdin,
        stops_on_eof,
        pid,
        addr,
        session_entries,
        ready_after,
        idle,
        log: log.to_path_buf(),
        view_url: parsed["viewUrl"].as_str().map(str::to_string),
    })
}

impl Server {
    /// How many sessions the ready line listed.
    pub fn session_count(&self) -> usize {
        self.session_entries.len()
    }

    /// Session `index` (its token inline, else read from its session file).
    pub fn session(&self, index: usize) -> Result<Session, String> {
        let entry = self
            .session_entries
            .get(index)
            .ok_or_else(|| format!("the server listed no session {index}"))?;
        if let Some(token) = entry["token"].as_str() {
            return Ok(Session {
                token: token.to_string(),
            });
        }
        let file = entry["sessionFile"]
            .as_str()
            .ok_or("a session entry has neither token nor sessionFile")?;
        let text = fs::read_to_string(file).map_err(|e| format!("read {file}: {e}"))?;
        let saved: Value =
            serde_json::from_str(&text).map_err(|e| format!("{file} is not JSON: {e}"))?;
        let token = saved["token"].as_str().ok_or("session file has no token")?;
        Ok(Session {
            token: token.to_string(),
        })
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks it to stop (closes its stdin, or SIGTERM), then kills it after 5 s.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        if !self.stops_on_eof {
            sys::terminate(self.pid);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last lines of a log file, for error messages.
pub fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join(" | ")
}

/// `{"operation":OP,"args":{}}`, padded with JSON whitespace to at least `size` bytes.
pub fn body(operation: &str, size: usize) -> Vec<u8> {
    let mut body = format!("{{\"operation\":\"{operation}\",\"args\":{{}}}}").into_bytes();
    if body.len() < size {
        body.resize(size, b' ');
    }
    body
}

/// The head of `POST /call` with a bearer token and a declared body length.
pub fn head(addr: SocketAddr, token: &str, body_bytes: usize) -> Vec<u8> {
    format!(
        "POST /call HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
Content-Type: application/json\r\nContent-Length: {body_bytes}\r\n\r\n"
    )
    .into_bytes()
}

/// A whole request.
pub fn request(addr: SocketAddr, token: &str, body: &[u8]) -> Vec<u8> {
    let mut bytes = head(addr, token, body.len());
    bytes.extend_from_slice(body);
    bytes
}

/// The body length of the answer to one `operation` call on a fresh connection.
pub fn answer_bytes(addr: SocketAddr, token: &str, operation: &str) -> Result<usize, String> {
    use std::io::{Read, Write};
    let mut stream =
        std::net::TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| format!("timeout: {e}"))?;
    let mut bytes = head(addr, token, body(operation, 0).len());
    bytes.truncate(bytes.len() - 2);
    bytes.extend_from_slice(b"Connection: close\r\n\r\n");
    bytes.extend_from_slice(&body(operation, 0));
    stream
        .write_all(&bytes)
        .map_err(|e| format!("write: {e}"))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .map_err(|e| format!("read: {e}"))?;
    let head_end = reply
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no answer head")?;
    if !reply.starts_with(b"HTTP/1.1 200") {
        return Err(format!(
            "{operation} answered {}",
            String::from_utf8_lossy(&reply[..head_end])
        ));
    }
    Ok(reply.len() - head_end - 4)
}
