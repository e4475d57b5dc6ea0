//! The person acting from the canvas view of a real `serve`: `POST /api/act` refused for
//! anything a browser could send cross-site (raw HTTP, and real headless Chromium pages
//! on another port and another host name), `--view-only`, the host's own Chromium kept
//! off the view, the key never given to agents, and, through the real page, typing into
//! terminals and the controls. Chromium tests skip with a notice where it is not
//! installed.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;
use termsprawl_tools::host::browser::{BrowserEngine, PageId};

const WAIT: Duration = Duration::from_secs(15);

fn node_count(serve: &Serve, dirs: &Dirs) -> usize {
    let list = serve.ok(dirs, "me", "canvas_list", json!({}));
    list.as_array().unwrap().len()
}

fn person_lines(serve: &Serve, dirs: &Dirs) -> Vec<Value> {
    let lines = trail(serve, dirs);
    lines.into_iter().filter(|l| l["by"] == "person").collect()
}

#[test]
fn actions_are_refused_unless_they_come_from_the_view_page_itself() {
    let dirs = Dirs::new("act-guard");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let (port, key) = view_parts(&view_url(&serve));
    let token = token(&dirs, "me");
    let before = node_count(&serve, &dirs);
    let body = json!({"action": "terminal_open", "args": {"title": "from-anywhere"}}).to_string();
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let own = format!("http://127.0.0.1:{port}");
    let length = format!("Content-Length: {}\r\n", body.len());
    let auth = format!("Authorization: Bearer {key}\r\n");
    let json_type = "Content-Type: application/json\r\n";
    // (what, method, path, head lines, body, expected status)
    let cases: Vec<(&str, &str, &str, String, &str, u16)> = vec![
        (
            "a form POST from a page on another local port",
            "POST", "/api/act",
            format!("{host}Origin: http://127.0.0.1:1\r\nSec-Fetch-Site: same-site\r\nContent-Type: application/x-www-form-urlencoded\r\n{length}"),
            &body, 403,
        ),
        (
            "a form POST from another host name",
            "POST", "/api/act",
            format!("{host}Origin: http://attacker.test:1\r\nSec-Fetch-Site: cross-site\r\nContent-Type: text/plain\r\n{length}"),
            &body, 403,
        ),
        (
            "a text/plain fetch with the key",
            "POST", "/api/act",
            format!("{host}Origin: http://attacker.test:1\r\nSec-Fetch-Site: cross-site\r\nContent-Type: text/plain;charset=UTF-8\r\n{auth}{length}"),
            &body, 403,
        ),
        (
            "a JSON fetch with the key from another port (were it not preflighted)",
            "POST", "/api/act",
            format!("{host}Origin: http://127.0.0.1:1\r\nSec-Fetch-Site: same-site\r\n{json_type}{auth}{length}"),
            &body, 403,
        ),
        (
            "the preflight of a fetch with the header",
            "OPTIONS", "/api/act",
            format!("{host}Origin: http://attacker.test:1\r\nSec-Fetch-Site: cross-site\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\n"),
            "", 403,
        ),
        (
            "a preflight naming the view's own origin",
            "OPTIONS", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\nAccess-Control-Request-Method: POST\r\n"),
            "", 405,
        ),
        (
            "the page itself, as a frame of another origin's page",
            "GET", "/",
            format!("{host}Sec-Fetch-Site: same-site\r\nSec-Fetch-Dest: iframe\r\n"),
            "", 403,
        ),
        (
            "an <img> GET",
            "GET", "/api/act",
            format!("{host}Sec-Fetch-Site: cross-site\r\nSec-Fetch-Dest: image\r\n"),
            "", 403,
        ),
        (
            "a WebSocket handshake",
            "GET", "/api/act",
            format!("{host}Origin: http://attacker.test:1\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-Fetch-Site: cross-site\r\n"),
            "", 403,
        ),
        (
            "DNS rebinding (a foreign Host, its own Origin)",
            "POST", "/api/act",
            format!("Host: attacker.test:{port}\r\nOrigin: http://attacker.test:{port}\r\nSec-Fetch-Site: same-origin\r\n{json_type}{auth}{length}"),
            &body, 403,
        ),
        (
            "no Origin",
            "POST", "/api/act",
            format!("{host}Sec-Fetch-Site: same-origin\r\n{json_type}{auth}{length}"),
            &body, 403,
        ),
        (
            "no Sec-Fetch-Site",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\n{json_type}{auth}{length}"),
            &body, 403,
        ),
        (
            "Sec-Fetch-Site: none (typed in the address bar)",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: none\r\n{json_type}{auth}{length}"),
            &body, 403,
        ),
        (
            "text/plain from the view's own origin",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\nContent-Type: text/plain\r\n{auth}{length}"),
            &body, 415,
        ),
        (
            "no key",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\n{json_type}{length}"),
            &body, 401,
        ),
        (
            "an agent token",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\n{json_type}Authorization: Bearer {token}\r\n{length}"),
            &body, 401,
        ),
        (
            "a chunked body",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\n{json_type}{auth}Transfer-Encoding: chunked\r\n"),
            "0\r\n\r\n", 411,
        ),
        (
            "a body over 128 KiB",
            "POST", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\n{json_type}{auth}Content-Length: 200000\r\n"),
            "", 413,
        ),
        (
            "a GET of /api/act with the key",
            "GET", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\n{auth}"),
            "", 404,
        ),
        (
            "PUT",
            "PUT", "/api/act",
            format!("{host}Origin: {own}\r\nSec-Fetch-Site: same-origin\r\n{json_type}{auth}{length}"),
            &body, 405,
        ),
    ];
    for (what, method, path, head, body, expected) in cases {
        let (status, answer_head, answer) = request_with_body(port, method, path, &head, body);
        println!("figure: {what}: {status} {answer}");
        assert_eq!(status, expected, "{what}: {answer_head}\n{answer}");
        assert!(
            !answer_head.to_ascii_lowercase().contains("access-control"),
            "{what} got a CORS header: {answer_head}"
        );
        assert!(!answer.contains(&key), "{what}");
    }
    assert_eq!(
        node_count(&serve, &dirs),
        before,
        "a refused request changed the canvas"
    );

    // The page's own request acts, through the canvas owner, recorded as the person.
    let (status, answer) = act(port, &key, "terminal_open", json!({"title": "by-person"}));
    assert_eq!(status, 200, "{answer}");
    let opened = answer["value"]["nodeId"].as_str().unwrap().to_string();
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(
        node(&list, &opened).unwrap()["data"]["title"],
        "by-person",
        "{list}"
    );
    let line = poll("the person's line in the trail", WAIT, || {
        person_lines(&serve, &dirs).into_iter().next()
    });
    assert_eq!(line["operation"], "terminal_open", "{line}");
    assert_eq!(line["outcome"], "ok", "{line}");
    assert!(line.get("nodeId").is_none(), "{line}");
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["activity", "--data"])
        .arg(&dirs.data)
        .args(["--project-id", &serve.project_id()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(shown.contains("(person)  terminal_open"), "{shown}");

    // Bad actions are answered with what to do, and change nothing.
    let bad = [
        ("nope", json!({}), "Unknown action"),
        (
            "canvas_move",
            json!({"nodeId": opened, "x": "left", "y": 0}),
            "Invalid x",
        ),
        (
            "terminal_close",
            json!({"nodeId": "me", "extra": 1}),
            "Unknown argument: extra",
        ),
        ("link", json!({"a": "me", "b": opened}), "not an agent"),
        ("link", json!({"a": "me", "b": "me"}), "itself"),
        (
            "browser_control",
            json!({"enabled": "yes"}),
            "Invalid enabled",
        ),
        (
            "keys",
            json!({"nodeId": "../me", "text": "x"}),
            "Invalid nodeId",
        ),
        (
            "keys",
            json!({"nodeId": opened, "text": ""}),
            "Missing text",
        ),
    ];
    let count = node_count(&serve, &dirs);
    for (action, args, expected) in bad {
        let (status, answer) = act(port, &key, action, args.clone());
        assert_eq!(status, 400, "{action} {args}: {answer}");
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{action} {args}: {answer}");
    }
    let not_json = page_head(port, &key, "{nope");
    let (status, _, answer) = request_with_body(port, "POST", "/api/act", &not_json, "{nope");
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("Expected a JSON object"), "{answer}");
    assert_eq!(node_count(&serve, &dirs), count);
    assert!(serve.stop().success());
}

#[test]
fn view_only_refuses_every_action_and_hides_the_controls() {
    let dirs = Dirs::new("act-viewonly");
    let serve = Serve::start(
        &dirs,
        &["--agent", "me", "--terminals", "pty", "--view-only"],
    );
    let url = view_url(&serve);
    let (port, key) = view_parts(&url);
    let before = node_count(&serve, &dirs);
    for (action, args) in [
        ("terminal_open", json!({})),
        ("terminal_close", json!({"nodeId": "me"})),
        ("canvas_move", json!({"nodeId": "me", "x": 1, "y": 1})),
        ("browser_control", json!({"enabled": true})),
        ("keys", json!({"nodeId": "me", "text": "x"})),
    ] {
        let (status, answer) = act(port, &key, action, args);
        assert_eq!(status, 403, "{action}: {answer}");
        assert!(
            answer["error"].as_str().unwrap().contains("watch-only"),
            "{answer}"
        );
    }
    assert_eq!(node_count(&serve, &dirs), before);
    assert!(person_lines(&serve, &dirs).is_empty());
    // The page still shows the canvas, without its controls.
    if let Some((engine, root)) = chromium("viewonly", &[]) {
        let page = engine
            .open_page(&url, Instant::now() + Duration::from_secs(30))
            .unwrap();
        let shown = poll("the watch-only page", WAIT, || {
            let v = eval(
                &engine,
                &page,
                r#"() => ({
                    watchOnly: document.body.classList.contains("watch-only"),
                    control: document.getElementById("new-terminal").offsetParent !== null,
                    me: !!document.querySelector('.node[data-node-id="me"]'),
                    address: location.href,
                })"#,
                json!({}),
            )?;
            (v["watchOnly"] == true && v["me"] == true).then_some(v)
        });
        assert_eq!(shown["control"], false, "{shown}");
        // The key is gone from the address bar.
        assert!(
            !shown["address"].as_str().unwrap().contains(&key),
            "{shown}"
        );
        engine.shutdown();
        let _ = std::fs::remove_dir_all(root);
    }
    assert!(serve.stop().success());
}

/// A page server for the attack: `/attack` tries every cross-site way to act on the view
/// at `view_port` (with its key, the worst case) and frames the real page; `/ok` is a
/// plain page.
fn attack_server(view_port: u16, key: &str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = format!("http://127.0.0.1:{view_port}");
    let page = ATTACK_PAGE
        .replace("WSTARGET", &format!("ws://127.0.0.1:{view_port}"))
        .replace("TARGET", &target)
        .replace("KEY", key);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(n @ 1..) => request.extend_from_slice(&buffer[..n]),
                    _ => break,
                }
            }
            let body = if request.starts_with(b"GET /attack") {
                page.as_str()
            } else {
                "<!doctype html><title>plain</title><p>plain page</p>"
            };
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    port
}

const ATTACK_PAGE: &str = r#"<!doctype html><title>attack</title>
<form id="form" method="POST" action="TARGET/api/act" enctype="text/plain" target="sink">
<input name='{"action":"terminal_open","args":{"title":"pwned-form"},"pad":"' value='"}'></form>
<iframe name="sink"></iframe>
<iframe id="framed" src="TARGET/#key=KEY"></iframe>
<script>
const results = {};
const body = JSON.stringify({ action: "terminal_open", args: { title: "pwned" } });
const done = () => { document.body.dataset.results = JSON.stringify(results); };
async function attack() {
  document.getElementById("form").submit();
  results.form = "submitted";
  try {
    await fetch("TARGET/api/act", { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body });
    results.textPlain = "sent (opaque answer)";
  } catch (e) { results.textPlain = "failed: " + e.message; }
  try {
    const r = await fetch("TARGET/api/act", { method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer KEY" }, body });
    results.withHeader = "answered " + r.status;
  } catch (e) { results.withHeader = "failed: " + e.message; }
  results.beacon = navigator.sendBeacon("TARGET/api/act", new Blob([body], { type: "text/plain" })) ? "queued" : "refused";
  results.img = await new Promise((resolve) => {
    const img = new Image();
    img.onload = () => resolve("loaded");
    img.onerror = () => resolve("error");
    img.src = "TARGET/api/act?action=terminal_open";
  });
  results.ws = await new Promise((resolve) => {
    try {
      const ws = new WebSocket("WSTARGET/api/act");
      ws.onopen = () => { ws.send(body); resolve("open"); };
      ws.onerror = () => resolve("error");
    } catch (e) { resolve("threw: " + e.message); }
  });
  done();
}
attack();
</script>"#;

#[test]
fn cross_site_pages_cannot_act_or_frame_the_view() {
    let Some((engine, root)) = chromium(
        "attack",
        &["--host-resolver-rules=MAP attacker.test 127.0.0.1"],
    ) else {
        return;
    };
    let dirs = Dirs::new("act-attack");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let (view_port, key) = view_parts(&view_url(&serve));
    let before = node_count(&serve, &dirs);
    let attacker = attack_server(view_port, &key);
    let mut pages = Vec::new();
    for origin in [
        format!("http://127.0.0.1:{attacker}"),
        format!("http://attacker.test:{attacker}"),
    ] {
        let page = engine
            .open_page(
                &format!("{origin}/attack"),
                Instant::now() + Duration::from_secs(30),
            )
            .unwrap();
        let results = poll(&format!("the attack from {origin}"), WAIT, || {
            let v = eval(
                &engine,
                &page,
                "() => document.body.dataset.results || null",
                json!({}),
            )?;
            serde_json::from_str::<Value>(v.as_str()?).ok()
        });
        println!("figure: attack from {origin}: {results}");
        assert!(
            results["withHeader"]
                .as_str()
                .unwrap()
                .starts_with("failed"),
            "the preflight must stop it: {results}"
        );
        assert_eq!(results["img"], "error", "{results}");
        assert_eq!(results["ws"], "error", "{results}");
        pages.push(page);
    }
    // Give the form, the beacon and the frames time to arrive.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        node_count(&serve, &dirs),
        before,
        "a cross-site page changed the canvas"
    );
    assert!(person_lines(&serve, &dirs).is_empty());
    // Framed, the view would have polled as a viewer: all eight places are still free.
    // (Its document request from another origin is refused, Sec-Fetch-Site being
    // same-site or cross-site; served, frame-ancestors 'none' would keep it from showing.)
    let auth = format!("Host: 127.0.0.1:{view_port}\r\nAuthorization: Bearer {key}\r\n");
    for n in 1..=8 {
        let path = format!("/api/state?viewer={n:032x}");
        let (status, _, body) = request(view_port, "GET", &path, &auth);
        assert_eq!(
            status, 200,
            "viewer {n}: a framed view took a place: {body}"
        );
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
    assert!(serve.stop().success());
}

#[test]
fn the_hosts_own_browser_cannot_open_the_view() {
    // serve starts its own Chromium; this one only says whether there is one.
    let Some((_, root)) = chromium("hostbrowser", &[]) else {
        return;
    };
    let _ = std::fs::remove_dir_all(root);
    let dirs = Dirs::new("act-hostbrowser");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty", "--browser"]);
    let url = view_url(&serve);
    let (port, _) = view_parts(&url);
    let pages = attack_server(port, "none");
    for address in [
        url.clone(),
        format!("http://localhost:{port}/"),
        format!("http://127.0.0.1:{port}/api/state"),
    ] {
        let refused = serve.err(&dirs, "me", "browser_open", json!({"url": address}));
        println!("figure: browser_open {address}: {refused}");
        assert!(
            refused.starts_with("Browser URL is not allowed"),
            "{refused}"
        );
        assert!(refused.contains("no browser node was added"), "{refused}");
    }
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert!(!list.to_string().contains("\"browser\""), "{list}");
    let plain = serve.ok(
        &dirs,
        "me",
        "browser_open",
        json!({"url": format!("http://127.0.0.1:{pages}/ok")}),
    );
    let node = plain["nodeId"].as_str().unwrap();
    let refused = serve.err(
        &dirs,
        "me",
        "browser_navigate",
        json!({"nodeId": node, "url": url}),
    );
    println!("figure: browser_navigate to the view: {refused}");
    assert!(refused.to_lowercase().contains("not allowed"), "{refused}");
    // A page's own script sent there is stopped too.
    serve.ok(
        &dirs,
        "me",
        "browser_navigate",
        json!({"nodeId": node, "url": format!("http://127.0.0.1:{pages}/ok")}),
    );
    let inspected = serve.ok(&dirs, "me", "browser_inspect", json!({"nodeId": node}));
    assert!(inspected.to_string().contains("plain page"), "{inspected}");
    assert!(serve.stop().success());
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            files_under(&path, found);
        } else if kind.is_file() {
            found.push(path);
        }
    }
}

#[test]
fn agents_never_get_the_view_key() {
    let dirs = Dirs::new("act-nokey");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let (_, key) = view_parts(&view_url(&serve));
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let command = "env; tr '\\0' '\\n' < /proc/$PPID/environ";
    let env = submit_and_wait(&serve, &dirs, &term, command, json!({}));
    let mut seen = vec![env.to_string()];
    seen.push(serve.ok(&dirs, "me", "canvas_list", json!({})).to_string());
    seen.push(serve.ok(&dirs, "me", "session_info", json!({})).to_string());
    seen.push(
        serve
            .ok(
                &dirs,
                "me",
                "terminal_read",
                json!({"nodeId": term, "maxChars": 100000}),
            )
            .to_string(),
    );
    for topic in termsprawl_tools::protocol::GUIDE_TOPICS {
        seen.push(
            serve
                .ok(&dirs, "me", "guide_read", json!({"topic": topic}))
                .to_string(),
        );
    }
    for (n, text) in seen.iter().enumerate() {
        assert!(!text.contains(&key), "answer {n} holds the view key");
    }
    let mut files = Vec::new();
    files_under(&dirs.data, &mut files);
    files_under(&dirs.project, &mut files);
    assert!(files.len() > 3, "{files:?}");
    for file in files {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(&key),
            "{} holds the view key",
            file.display()
        );
    }
    assert!(serve.stop().success());
}

// ---- Through the real page --------------------------------------------------------------

/// Sends key presses to the focused terminal's key sink, as the page hears them
/// (`{key, ctrlKey}` each), or a paste of `paste`.
const PRESS: &str = r#"(args) => {
  const sink = document.activeElement;
  if (!sink || !sink.classList.contains("keys")) return "no terminal has the focus";
  if (args.paste !== undefined) {
    const data = new DataTransfer();
    data.setData("text/plain", args.paste);
    sink.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    return "pasted";
  }
  for (const k of args.keys) {
    sink.dispatchEvent(new KeyboardEvent("keydown", { key: k.key, ctrlKey: !!k.ctrl, bubbles: true, cancelable: true }));
  }
  return "typed";
}"#;

fn keys_of(text: &str) -> Value {
    let keys: Vec<Value> = text
        .chars()
        .map(|c| match c {
            '\n' => json!({"key": "Enter"}),
            c => json!({"key": c.to_string()}),
        })
        .collect();
    json!({ "keys": keys })
}

fn press(engine: &BrowserEngine, page: &PageId, args: Value) {
    let said = eval(engine, page, PRESS, args.clone());
    assert!(
        matches!(
            said.as_ref().and_then(Value::as_str),
            Some("typed" | "pasted")
        ),
        "{args}: {said:?}"
    );
}

fn page_screen(engine: &BrowserEngine, page: &PageId, node: &str) -> String {
    let script = r#"(args) => {
      const el = document.querySelector('.node[data-node-id="' + args.node + '"] .screen');
      return el ? el.textContent : "";
    }"#;
    eval(engine, page, script, json!({ "node": node }))
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn see_on_page(engine: &BrowserEngine, page: &PageId, node: &str, needle: &str, times: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        let screen = page_screen(engine, page, node);
        if screen.matches(needle).count() >= times {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} x{times} not on the page:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn click(engine: &BrowserEngine, page: &PageId, selector: &str) {
    engine
        .click(page, selector, Instant::now() + Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("click {selector}: {e}"));
}

/// The page, live, with the key cleared from its address.
fn open_view(engine: &BrowserEngine, url: &str) -> PageId {
    let page = engine
        .open_page(url, Instant::now() + Duration::from_secs(30))
        .unwrap();
    poll("the live page", WAIT, || {
        let v = eval(
            engine,
            &page,
            r#"() => document.getElementById("status").textContent"#,
            json!({}),
        )?;
        (v == "live").then_some(())
    });
    page
}

fn new_nodes(serve: &Serve, dirs: &Dirs, known: &[String]) -> Vec<Value> {
    let list = serve.ok(dirs, "me", "canvas_list", json!({}));
    let nodes = list.as_array().unwrap().clone();
    nodes
        .into_iter()
        .filter(|n| !known.contains(&n["id"].as_str().unwrap().to_string()))
        .collect()
}

fn ids(serve: &Serve, dirs: &Dirs) -> Vec<String> {
    new_nodes(serve, dirs, &[])
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_person_types_into_a_terminal_from_the_page() {
    let Some((engine, root)) = chromium("typing", &[]) else {
        return;
    };
    type_into_a_terminal(&engine, "pty");
    if tmux_installed() {
        type_into_a_terminal(&engine, "tmux");
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}

fn type_into_a_terminal(engine: &BrowserEngine, backend: &str) {
    let dirs = Dirs::new(&format!("act-typing-{backend}"));
    // The agent types into the person's own (unconfined) shell below, which the default
    // policy asks about (tests/isolation.rs): allowed here, to see the typing rule.
    let policy = dirs.root.join("allow-typing.json");
    let rules = json!({"version": 1, "classes": {"terminals-unconfined": "allow"}});
    std::fs::write(&policy, rules.to_string()).unwrap();
    let policy = policy.to_string_lossy().into_owned();
    let args = ["--agent", "me", "--terminals", backend, "--policy", &policy];
    let serve = Serve::start(&dirs, &args);
    let url = view_url(&serve);
    let page = open_view(engine, &url);
    let known = ids(&serve, &dirs);

    // A shell opened from the page.
    click(engine, &page, "#new-terminal");
    let term = poll("the new terminal", WAIT, || {
        let added = new_nodes(&serve, &dirs, &known);
        added.first().map(|n| n["id"].as_str().unwrap().to_string())
    });
    let body = format!(r#".node[data-node-id="{term}"] .body"#);
    poll("the terminal on the page", WAIT, || {
        eval(
            engine,
            &page,
            "(a) => !!document.querySelector(a.s)",
            json!({"s": body}),
        )
        .filter(|v| *v == json!(true))
    });
    click(engine, &page, &body);

    press(engine, &page, keys_of("echo typed-$((40+2))-here\n"));
    see_on_page(engine, &page, &term, "typed-42-here", 1);
    let read = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": term}));
    assert!(
        read["output"].as_str().unwrap().contains("typed-42-here"),
        "{read}"
    );
    // The person is typing: an agent's keys there are refused, with the rule.
    let refused = serve.err(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "x"}),
    );
    assert!(
        refused.starts_with("The person is typing in this terminal; try again shortly"),
        "{refused}"
    );
    let refused = serve.err(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "true"}),
    );
    assert!(
        refused.starts_with("The person is typing in this terminal"),
        "{refused}"
    );
    std::thread::sleep(Duration::from_millis(1600));
    serve.ok(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "# agent-after\r"}),
    );
    // Recorded as the person: the count of keys, never the text.
    let typed = poll("the person's keys in the trail", WAIT, || {
        let lines = person_lines(&serve, &dirs);
        lines
            .into_iter()
            .find(|l| l["operation"] == "terminal_input")
    });
    assert_eq!(typed["args"]["nodeId"], json!(term), "{typed}");
    assert!(typed["args"]["keys"].as_u64().unwrap() > 0, "{typed}");
    assert!(!typed.to_string().contains("typed-"), "{typed}");

    // Ctrl+C stops a sleep.
    press(engine, &page, keys_of("sleep 100\n"));
    std::thread::sleep(Duration::from_millis(500));
    press(engine, &page, json!({"keys": [{"key": "c", "ctrl": true}]}));
    press(engine, &page, keys_of("echo after-$((1+1))-int\n"));
    see_on_page(engine, &page, &term, "after-2-int", 1);

    // `y` + Enter answers a script waiting on read.
    press(
        engine,
        &page,
        keys_of("read -p 'Allow this command? y/n ' a; echo answer=$a.\n"),
    );
    see_on_page(engine, &page, &term, "Allow this command? y/n", 1);
    press(engine, &page, keys_of("y\n"));
    see_on_page(engine, &page, &term, "answer=y.", 1);

    // Backspace, arrows, Home/End: edit a line in bash (readline) before running it.
    press(engine, &page, keys_of("exec bash --norc --noprofile\n"));
    std::thread::sleep(Duration::from_millis(500));
    press(engine, &page, keys_of("echo edXt"));
    press(
        engine,
        &page,
        json!({"keys": [{"key": "ArrowLeft"}, {"key": "Backspace"}, {"key": "i"}, {"key": "End"}, {"key": "e"}, {"key": "d"}, {"key": "Home"}, {"key": "Enter"}]}),
    );
    see_on_page(engine, &page, &term, "edited", 1);

    // A multi-line paste into cat: each line once typed (echoed), once printed by cat.
    press(engine, &page, keys_of("cat\n"));
    std::thread::sleep(Duration::from_millis(300));
    press(engine, &page, json!({"paste": "pasted-one\npasted-two\n"}));
    see_on_page(engine, &page, &term, "pasted-two", 2);
    press(engine, &page, json!({"keys": [{"key": "d", "ctrl": true}]}));

    // Keys typed into the terminal trigger no control: Enter with the focus in the
    // terminal while a close is waiting for its confirmation does not close it.
    let count = node_count(&serve, &dirs);
    click(
        engine,
        &page,
        &format!(r#".node[data-node-id="{term}"] .close"#),
    );
    click(engine, &page, &body);
    press(engine, &page, keys_of("\n\n"));
    // A click that is no pointer's (a script's, or a key on a focused button) does nothing.
    eval(
        engine,
        &page,
        "(a) => { document.querySelector(a.s).click(); return true; }",
        json!({"s": format!(r#".node[data-node-id="{term}"] .confirm-close"#)}),
    );
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(node_count(&serve, &dirs), count);
    assert!(serve.stop().success());
}

/// PATH with `tests/fake_agents` first (its `claude` stands in for Claude Code).
fn fake_agent_path() -> String {
    let fakes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agents");
    format!(
        "{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Sets form control `id` of the page to `value` (a checkbox: `checked`).
fn choose(engine: &BrowserEngine, page: &PageId, id: &str, value: &str) {
    let script = r#"(a) => {
      const el = document.getElementById(a.id);
      if (![...el.options].some((o) => o.value === a.value)) return false;
      el.value = a.value;
      return el.value === a.value;
    }"#;
    poll(&format!("{value} in #{id}"), WAIT, || {
        eval(engine, page, script, json!({"id": id, "value": value})).filter(|v| *v == json!(true))
    });
}

/// Drags `selector` by (dx, dy) screen pixels with pointer events.
fn drag(engine: &BrowserEngine, page: &PageId, selector: &str, dx: f64, dy: f64) {
    let script = r#"(a) => {
      const el = document.querySelector(a.s);
      const box = el.getBoundingClientRect();
      const x = box.left + 5, y = box.top + 5;
      const at = (type, px, py) => el.dispatchEvent(new PointerEvent(type,
        { pointerId: 1, button: 0, clientX: px, clientY: py, bubbles: true, cancelable: true }));
      at("pointerdown", x, y);
      at("pointermove", x + a.dx / 2, y + a.dy / 2);
      at("pointermove", x + a.dx, y + a.dy);
      at("pointerup", x + a.dx, y + a.dy);
      return true;
    }"#;
    let done = eval(
        engine,
        page,
        script,
        json!({"s": selector, "dx": dx, "dy": dy}),
    );
    assert_eq!(done, Some(json!(true)), "drag {selector}");
}

fn canvas_node(serve: &Serve, dirs: &Dirs, id: &str) -> Option<Value> {
    let list = serve.ok(dirs, "me", "canvas_list", json!({}));
    node(&list, id).cloned()
}

#[test]
fn the_person_runs_the_canvas_from_the_page() {
    let Some((engine, root)) = chromium("controls", &[]) else {
        return;
    };
    let dirs = Dirs::new("act-controls");
    let path = fake_agent_path();
    let env = [("PATH", path.as_str()), ("FAKE_CLAUDE_CONNECT", "listen")];
    let serve = Serve::start_with_env(&dirs, &["--agent", "me", "--terminals", "pty"], &env);
    let page = open_view(&engine, &view_url(&serve));

    // Two agents launched from the page, with the fake Claude Code preset.
    let mut agents = Vec::new();
    for _ in 0..2 {
        let known = ids(&serve, &dirs);
        choose(&engine, &page, "agent-kind", "claude");
        click(&engine, &page, "#launch-agent");
        let agent = poll("the launched agent", WAIT, || {
            let added = new_nodes(&serve, &dirs, &known);
            let launched = added.iter().find(|n| n["data"]["agentId"] == "claude")?;
            Some(launched["id"].as_str().unwrap().to_string())
        });
        poll(&format!("{agent} listening"), WAIT, || {
            let read = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": agent}));
            read["output"]
                .as_str()?
                .contains(&format!("listening as {agent}"))
                .then_some(())
        });
        agents.push(agent);
    }
    let (a, b) = (agents[0].clone(), agents[1].clone());
    let send = json!({"nodeId": b, "text": "hello from a"});

    // A link without the messaging consent: reading only.
    choose(&engine, &page, "link-a", &a);
    choose(&engine, &page, "link-b", &b);
    click(&engine, &page, "#link");
    let link_file = dirs
        .project
        .join(format!(".termsprawl/links/{a}--{b}.json"));
    poll("the link file", WAIT, || link_file.is_file().then_some(()));
    let refused = serve.err(&dirs, &a, "agent_send", send.clone());
    assert!(refused.contains("allows reading only"), "{refused}");
    // With it: the message goes.
    click(&engine, &page, "#link-messages");
    click(&engine, &page, "#link");
    poll("the consent in the link file", WAIT, || {
        let text = std::fs::read_to_string(&link_file).ok()?;
        text.contains("agentMessages").then_some(())
    });
    let task = serve.ok(&dirs, &a, "agent_send", send.clone());
    assert_eq!(task["state"], "submitted", "{task}");
    let shown = poll("the link on the page", WAIT, || {
        let script = r##"() => Array.from(document.querySelectorAll("#links line.messages")).map((l) => l.dataset.link)"##;
        let v = eval(&engine, &page, script, json!({}))?;
        v.as_array().filter(|l| !l.is_empty()).cloned()
    });
    assert_eq!(shown, vec![json!(format!("{a}->{b}"))]);
    click(&engine, &page, "#unlink");
    poll("the link gone", WAIT, || {
        (!link_file.exists()).then_some(())
    });
    let refused = serve.err(&dirs, &a, "agent_send", send);
    assert!(refused.contains("link"), "{refused}");

    // Browser control on and off: an agent's browser_list follows.
    let off = termsprawl_tools::protocol::BROWSER_CONTROL_OFF;
    assert_eq!(serve.err(&dirs, "me", "browser_list", json!({})), off);
    let session_file = dirs.agent_tools().join("sessions/me.json");
    assert!(!mcp_tools(&session_file).contains(&"browser_click".to_string()));
    click(&engine, &page, "#browser-on");
    poll("browser control on", WAIT, || {
        (serve.call(&dirs, "me", "browser_list", json!({}))["ok"] == true).then_some(())
    });
    // What an agent's MCP client lists follows too.
    assert!(mcp_tools(&session_file).contains(&"browser_click".to_string()));
    // The page's own answer first: its notice can move the toolbar's buttons.
    poll("the page's answer to browser control on", WAIT, || {
        let notice = eval(
            &engine,
            &page,
            "() => document.getElementById('notice').textContent",
            json!({}),
        )?;
        (notice == "browser_control: done").then_some(())
    });
    click(&engine, &page, "#browser-off");
    poll("browser control off", WAIT, || {
        (serve.call(&dirs, "me", "browser_list", json!({}))["error"] == off).then_some(())
    });

    // Dragging a node's title moves it, its corner grip resizes it: canvas_list shows both.
    let before = canvas_node(&serve, &dirs, &a).unwrap();
    drag(
        &engine,
        &page,
        &format!(r#".node[data-node-id="{a}"] .head"#),
        60.0,
        40.0,
    );
    let moved = poll("the moved node", WAIT, || {
        let now = canvas_node(&serve, &dirs, &a)?;
        (now["position"] != before["position"]).then_some(now)
    });
    assert!(
        moved["position"]["x"].as_f64() > before["position"]["x"].as_f64(),
        "{moved}"
    );
    assert!(
        moved["position"]["y"].as_f64() > before["position"]["y"].as_f64(),
        "{moved}"
    );
    drag(
        &engine,
        &page,
        &format!(r#".node[data-node-id="{a}"] .grip"#),
        80.0,
        60.0,
    );
    let resized = poll("the resized node", WAIT, || {
        let now = canvas_node(&serve, &dirs, &a)?;
        (now["size"] != before["size"]).then_some(now)
    });
    assert!(
        resized["size"]["width"].as_f64() > before["size"]["width"].as_f64(),
        "{resized}"
    );

    // The page redraws (and refits) the resized node: clicks before that can land on
    // coordinates that were true a moment ago.
    let width = resized["size"]["width"].as_f64().unwrap();
    poll("the resized node on the page", WAIT, || {
        let v = eval(
            &engine,
            &page,
            "(a) => parseFloat(document.querySelector(a.s).style.width)",
            json!({"s": format!(r#".node[data-node-id="{a}"]"#)}),
        )?;
        (v.as_f64() == Some(width)).then_some(())
    });

    // Closing a node takes two real clicks: the button, then its confirmation.
    let close = format!(r#".node[data-node-id="{b}"] .close"#);
    let confirm = format!(r#".node[data-node-id="{b}"] .confirm-close"#);
    poll("the close confirmation shown", WAIT, || {
        click(&engine, &page, &close);
        let v = eval(
            &engine,
            &page,
            "(a) => !document.querySelector(a.s).hidden",
            json!({"s": confirm}),
        )?;
        (v == json!(true)).then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        canvas_node(&serve, &dirs, &b).is_some(),
        "closed without confirmation"
    );
    click(&engine, &page, &confirm);
    poll("the closed node", WAIT, || {
        canvas_node(&serve, &dirs, &b).is_none().then_some(())
    });
    poll("the node gone from the page", WAIT, || {
        let v = eval(
            &engine,
            &page,
            "(a) => !document.querySelector(a.s)",
            json!({"s": format!(r#".node[data-node-id="{b}"]"#)}),
        )?;
        (v == json!(true)).then_some(())
    });

    // The launched agents' files (launch/, sessions/) and the link files never hold the key.
    let (_, key) = view_parts(&view_url(&serve));
    let mut files = Vec::new();
    files_under(&dirs.data, &mut files);
    files_under(&dirs.project, &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().contains("/launch/")),
        "{files:?}"
    );
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap_or_default()).to_string();
        assert!(
            !text.contains(&key),
            "{} holds the view key",
            file.display()
        );
    }

    // Every action is in the trail as the person's.
    let done: Vec<String> = person_lines(&serve, &dirs)
        .iter()
        .filter(|l| l["outcome"] == "ok")
        .map(|l| l["operation"].as_str().unwrap().to_string())
        .collect();
    for expected in [
        "agent_launch",
        "link",
        "unlink",
        "browser_control",
        "canvas_move",
        "canvas_resize",
        "terminal_close",
    ] {
        assert!(done.iter().any(|d| d == expected), "{expected} in {done:?}");
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
    assert!(serve.stop().success());
}

/// Types one `k` into the focused terminal and has the page's `data-echo-ms` say how
/// many milliseconds after the key event the screen `s` ended in `typed`.
const TIMED_KEY: &str = r#"(args) => {
  const screen = document.querySelector(args.s);
  const sink = document.activeElement;
  if (!screen || !sink || !sink.classList.contains("keys")) return "no focused terminal";
  delete document.body.dataset.echoMs;
  const started = performance.now();
  const shows = () => screen.textContent.trimEnd().split("\n").pop().endsWith(args.typed);
  const observer = new MutationObserver(() => {
    if (!shows()) return;
    document.body.dataset.echoMs = String(performance.now() - started);
    observer.disconnect();
  });
  observer.observe(screen, { childList: true, characterData: true, subtree: true });
  sink.dispatchEvent(new KeyboardEvent("keydown", { key: "k", bubbles: true, cancelable: true }));
  return "typed";
}"#;

/// User and system CPU time of process `pid` so far, in clock ticks (10 ms each here).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The `n`th percentile (0–100) of `sorted`.
fn percentile(sorted: &[Duration], n: usize) -> Duration {
    sorted[(sorted.len() * n / 100).min(sorted.len() - 1)]
}

#[test]
fn a_key_typed_in_the_page_echoes_on_the_page() {
    let Some((engine, root)) = chromium("latency", &[]) else {
        return;
    };
    let mut backends = vec!["pty"];
    if tmux_installed() {
        backends.push("tmux");
    }
    for backend in backends {
        let dirs = Dirs::new(&format!("act-echo-{backend}"));
        let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", backend]);
        let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
            .as_str()
            .unwrap()
            .to_string();
        submit_and_wait(&serve, &dirs, &term, "true", json!({}));
        let page = open_view(&engine, &view_url(&serve));
        let body = format!(r#".node[data-node-id="{term}"] .body"#);
        poll("the terminal on the page", WAIT, || {
            eval(
                &engine,
                &page,
                "(a) => !!document.querySelector(a.s)",
                json!({"s": body}),
            )
            .filter(|v| *v == json!(true))
        });
        click(&engine, &page, &body);
        // Keys at a typist's pace; each timed in the page, from its key event to the
        // screen showing it (a mutation observer, so the test's own polling adds nothing).
        let mut times = Vec::new();
        let (cpu_before, wall_before) = (cpu_ticks(serve.pid()), Instant::now());
        for n in 1..=50 {
            let args = json!({"s": format!(r#".node[data-node-id="{term}"] .screen"#), "typed": "k".repeat(n)});
            let typed = eval(&engine, &page, TIMED_KEY, args);
            assert_eq!(typed, Some(json!("typed")), "key {n}");
            let ms = poll(&format!("the echo of key {n}"), WAIT, || {
                let v = eval(
                    &engine,
                    &page,
                    "() => document.body.dataset.echoMs || null",
                    json!({}),
                )?;
                v.as_str()?.parse::<f64>().ok()
            });
            times.push(Duration::from_secs_f64(ms / 1000.0));
            std::thread::sleep(Duration::from_millis(80));
        }
        let cpu = cpu_ticks(serve.pid()) - cpu_before;
        let wall = wall_before.elapsed();
        press(
            &engine,
            &page,
            json!({"keys": [{"key": "u", "ctrl": true}]}),
        );
        times.sort();
        println!(
            "figure: {backend}: serve's CPU while one view typed those keys: {} ms in {:?} ({:.1}% of one core)",
            cpu * 10,
            wall,
            cpu as f64 * 10.0 / wall.as_millis() as f64 * 100.0
        );
        println!(
            "figure: {backend}: a key typed in the view page to its echo on the page, 50 keys (2026-12-05): p50 {:?}, p95 {:?}, max {:?}",
            percentile(&times, 50),
            percentile(&times, 95),
            times[times.len() - 1]
        );
        assert!(serve.stop().success());
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}

/// A shell terminal opened from the page, with the keyboard focus in it: its node id.
fn open_focused_terminal(
    engine: &BrowserEngine,
    page: &PageId,
    serve: &Serve,
    dirs: &Dirs,
) -> String {
    let known = ids(serve, dirs);
    click(engine, page, "#new-terminal");
    let term = poll("the new terminal", WAIT, || {
        let added = new_nodes(serve, dirs, &known);
        added.first().map(|n| n["id"].as_str().unwrap().to_string())
    });
    let body = format!(r#".node[data-node-id="{term}"] .body"#);
    poll("the terminal on the page", WAIT, || {
        eval(
            engine,
            page,
            "(a) => !!document.querySelector(a.s)",
            json!({"s": body}),
        )
        .filter(|v| *v == json!(true))
    });
    click(engine, page, &body);
    term
}

/// The span of `.screen` `s` whose text is `text` and that has a colour of its own: its
/// computed colour and weight, and whether the screen holds any control character.
const STYLED_SPAN: &str = r#"(a) => {
  const screen = document.querySelector(a.s);
  if (!screen) return null;
  const span = [...screen.querySelectorAll("span")].find((s) => s.textContent === a.text && s.style.color);
  if (!span) return null;
  const style = getComputedStyle(span);
  return { color: style.color, weight: style.fontWeight, controls: /[\x00-\x08\x0b-\x1f\x7f-\x9f]/.test(screen.textContent) };
}"#;

/// The text left of the cursor's cell on its line, and whether the screen holds nothing but
/// spans and text.
const LEFT_OF_CURSOR: &str = r#"(a) => {
  const screen = document.querySelector(a.s);
  const cursor = screen && screen.querySelector(".cursor");
  if (!cursor) return null;
  let left = "";
  for (let n = cursor.previousSibling; n && n.nodeType !== Node.TEXT_NODE; n = n.previousSibling) left = n.textContent + left;
  return left;
}"#;

#[test]
fn the_page_draws_colours_and_the_cursor_and_brackets_pastes() {
    let Some((engine, root)) = chromium("screens", &[]) else {
        return;
    };
    draw_and_paste(&engine, "pty");
    if tmux_installed() {
        draw_and_paste(&engine, "tmux");
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}

fn draw_and_paste(engine: &BrowserEngine, backend: &str) {
    let dirs = Dirs::new(&format!("act-screens-{backend}"));
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", backend]);
    let page = open_view(engine, &view_url(&serve));
    // Any style the page's CSP refused would be reported here.
    eval(
        engine,
        &page,
        "() => { window.cspRefused = []; document.addEventListener('securitypolicyviolation', (e) => window.cspRefused.push(e.violatedDirective)); return true; }",
        json!({}),
    );
    let term = open_focused_terminal(engine, &page, &serve, &dirs);
    // A terminal is as wide as its node: wide enough that the lines typed below fit.
    let wide = json!({"nodeId": term, "width": 1400, "height": 500});
    serve.ok(&dirs, "me", "canvas_resize", wide);
    let screen = format!(r#".node[data-node-id="{term}"] .screen"#);
    press(engine, &page, keys_of("exec bash --norc --noprofile\n"));
    std::thread::sleep(Duration::from_millis(500));

    // Colours: SGR becomes a span's style, never text or markup.
    press(
        engine,
        &page,
        keys_of(r"printf '\033[31mred\033[0m \033[1;38;2;1;2;3mtc\033[0m\n'"),
    );
    press(engine, &page, keys_of("\n"));
    let red = poll("a red span", WAIT, || {
        eval(
            engine,
            &page,
            STYLED_SPAN,
            json!({"s": screen, "text": "red"}),
        )
        .filter(|v| !v.is_null())
    });
    assert_eq!(red["color"], "rgb(205, 0, 0)", "{red}");
    assert_eq!(red["controls"], false, "{red}");
    let tc = poll("a truecolor bold span", WAIT, || {
        eval(
            engine,
            &page,
            STYLED_SPAN,
            json!({"s": screen, "text": "tc"}),
        )
        .filter(|v| !v.is_null())
    });
    assert_eq!(
        (tc["color"].as_str(), tc["weight"].as_str()),
        (Some("rgb(1, 2, 3)"), Some("700")),
        "{tc}"
    );

    // Markup printed by a program is text.
    let hostile = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>";
    press(
        engine,
        &page,
        keys_of(&format!("printf '%s\\n' '{hostile}'\n")),
    );
    see_on_page(engine, &page, &term, hostile, 2);
    let inert = eval(
        engine,
        &page,
        "(a) => [document.querySelectorAll(a.s + ' *:not(span)').length, window.pwned === undefined, window.cspRefused]",
        json!({"s": screen}),
    );
    assert_eq!(inert, Some(json!([0, true, []])), "{inert:?}");

    // The cursor's cell is where the shell's cursor is: 3 past the prompt after `abc`.
    press(engine, &page, keys_of("PS1='P> '\n"));
    press(engine, &page, keys_of("abc"));
    poll("the cursor after abc", WAIT, || {
        let left = eval(engine, &page, LEFT_OF_CURSOR, json!({"s": screen}))?;
        (left == "P> abc").then_some(())
    });

    // bash asked for bracketed paste: a pasted two-line text waits on the command line
    // (nothing runs) until Enter runs it.
    press(engine, &page, json!({"keys": [{"key": "u", "ctrl": true}]}));
    press(
        engine,
        &page,
        json!({"paste": "echo pasted-$((1+1))\necho pasted-$((2+1))\n"}),
    );
    see_on_page(engine, &page, &term, "echo pasted-$((2+1))", 1);
    std::thread::sleep(Duration::from_millis(800));
    let held = page_screen(engine, &page, &term);
    assert!(
        !held.contains("pasted-2") && !held.contains("pasted-3"),
        "{held}"
    );
    press(engine, &page, keys_of("\n"));
    see_on_page(engine, &page, &term, "pasted-3", 1);
    see_on_page(engine, &page, &term, "pasted-2", 1);

    // cat did not ask for it: its lines arrive plain (typed back, then printed by cat).
    press(engine, &page, keys_of("cat\n"));
    std::thread::sleep(Duration::from_millis(300));
    press(engine, &page, json!({"paste": "plain-one\nplain-two\n"}));
    see_on_page(engine, &page, &term, "plain-two", 2);
    press(engine, &page, json!({"keys": [{"key": "d", "ctrl": true}]}));
    let shown = page_screen(engine, &page, &term);
    assert!(
        !shown.contains("200~") && !shown.contains("201~"),
        "{shown}"
    );

    // Recorded as the person's paste: its length, never its text.
    let pasted = poll("the person's paste in the trail", WAIT, || {
        person_lines(&serve, &dirs)
            .into_iter()
            .find(|l| l["args"]["paste"].is_u64())
    });
    assert!(!pasted.to_string().contains("plain-"), "{pasted}");
    assert!(serve.stop().success());
}

/// The tool names `termsprawlctl mcp` lists to an MCP client of `session_file` now.
fn mcp_tools(session_file: &std::path::Path) -> Vec<String> {
    use std::io::{BufRead, Write};
    let mut mcp = std::process::Command::new(env!("CARGO_BIN_EXE_termsprawlctl"))
        .arg("--session")
        .arg(session_file)
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "view-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ];
    let mut stdin = mcp.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    let reader = std::io::BufReader::new(mcp.stdout.take().unwrap());
    let mut names = Vec::new();
    for line in reader.lines() {
        let answer: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if answer["id"] == 2 {
            let tools = answer["result"]["tools"].as_array().unwrap();
            names = tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect();
            break;
        }
    }
    drop(stdin);
    let _ = mcp.kill();
    let _ = mcp.wait();
    assert!(names.contains(&"session_info".to_string()), "{names:?}");
    names
}
