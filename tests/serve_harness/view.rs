//! The canvas view of a real `serve`, as tests reach it: its URL parts, raw HTTP
//! requests to it (reads and the person's actions), and a headless Chromium to open it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use termsprawl_tools::host::browser::{BrowserEngine, EngineConfig, PageId};

use super::Serve;

/// The ready line's `viewUrl`.
pub fn view_url(serve: &Serve) -> String {
    serve.ready["viewUrl"]
        .as_str()
        .expect("the ready line has viewUrl")
        .to_string()
}

/// (port, key) of a view URL `http://127.0.0.1:PORT/#key=KEY`.
pub fn view_parts(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, key) = rest.split_once("/#key=").unwrap();
    (port.parse().unwrap(), key.to_string())
}

/// One raw HTTP/1.1 request with `head_lines` (each ending in CRLF) and `body`:
/// (status, head, body).
pub fn request_with_body(
    port: u16,
    method: &str,
    path: &str,
    head_lines: &str,
    body: &str,
) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let text = format!("{method} {path} HTTP/1.1\r\n{head_lines}Connection: close\r\n\r\n{body}");
    stream.write_all(text.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).to_string();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// One raw HTTP/1.1 request without a body.
pub fn request(port: u16, method: &str, path: &str, head_lines: &str) -> (u16, String, String) {
    request_with_body(port, method, path, head_lines, "")
}

/// The head lines of an action as the view's own page sends it.
pub fn page_head(port: u16, key: &str, body: &str) -> String {
    format!(
        "Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\nSec-Fetch-Site: same-origin\r\n\
         Authorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    )
}

/// `POST /api/act` as the page sends it: (status, JSON answer).
pub fn act(port: u16, key: &str, action: &str, args: Value) -> (u16, Value) {
    let body = json!({ "action": action, "args": args }).to_string();
    let head = page_head(port, key, &body);
    let (status, _, answer) = request_with_body(port, "POST", "/api/act", &head, &body);
    (status, serde_json::from_str(&answer).unwrap_or(Value::Null))
}

/// A headless Chromium engine on a fresh profile under the folder it returns (`name`
/// keeps the folders of one test process apart), started with `extra_flags` (through a
/// script that execs Chromium with them); `None`, with a notice, where Chromium is not
/// installed.
pub fn chromium(name: &str, extra_flags: &[&str]) -> Option<(BrowserEngine, PathBuf)> {
    let root = std::env::temp_dir().join(format!("tst-view-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let plain = BrowserEngine::new(EngineConfig {
        executable: None,
        profile_dir: root.join("profile"),
    });
    let executable = match plain.find_executable() {
        Ok(executable) => executable,
        Err(error) => {
            eprintln!("NOTICE: skipping a canvas view browser test: {error}");
            return None;
        }
    };
    if extra_flags.is_empty() {
        return Some((plain, root));
    }
    let wrapper = root.join("chromium-with-flags");
    let flags: Vec<String> = extra_flags.iter().map(|f| format!("'{f}'")).collect();
    super::script(
        &wrapper,
        &format!(
            "#!/bin/sh\nexec '{}' {} \"$@\"\n",
            executable.display(),
            flags.join(" ")
        ),
    );
    let engine = BrowserEngine::new(EngineConfig {
        executable: Some(wrapper),
        profile_dir: root.join("profile"),
    });
    Some((engine, root))
}

/// `script` (a function expression) on `args` in an isolated world of `page`.
pub fn eval(engine: &BrowserEngine, page: &PageId, script: &str, args: Value) -> Option<Value> {
    engine
        .evaluate(page, script, &args, Instant::now() + Duration::from_secs(5))
        .ok()
}

/// The project's activity trail, parsed.
pub fn trail(serve: &Serve, dirs: &super::Dirs) -> Vec<Value> {
    let file = dirs
        .agent_tools()
        .join(format!("activity/{}.jsonl", serve.project_id()));
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The view at `url` open in `engine`, once its status says it is live (within `within`).
pub fn open_live(engine: &BrowserEngine, url: &str, within: Duration) -> PageId {
    let page = engine
        .open_page(url, Instant::now() + Duration::from_secs(30))
        .unwrap();
    let status = r#"() => document.getElementById("status").textContent"#;
    super::poll("the live page", within, || {
        (eval(engine, &page, status, json!({}))? == "live").then_some(())
    });
    page
}
