//! Browser-origin attacks: requests a web page could make (Origin present, DNS
//! rebinding Host, Sec-Fetch-Site, form posts without Origin or token) never reach
//! `execute`. Counted at the callback of the library server, by side effects through the
//! real `serve` (no sticky note is ever created), and from a real headless Chromium page
//! on another localhost port.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod common;
mod serve_harness;
mod sys;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};
use termsprawl_tools::host::browser::{BrowserEngine, EngineConfig, PageEvent};

/// `POST /call` with `headers` (each ending in CRLF) and `body`.
fn with_headers(headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /call HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The attacks, as (name, headers, body, expected status), for a server on `port`.
fn attacks(port: u16, token: &str) -> Vec<(&'static str, String, String, u16)> {
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let auth = format!("Authorization: Bearer {token}\r\n");
    let sticky = op("sticky_open", json!({ "text": "pwned" }));
    let form = "operation=sticky_open&args=%7B%22text%22%3A%22pwned%22%7D".to_string();
    vec![
        (
            "Origin: null",
            format!("{host}{auth}Origin: null\r\n"),
            sticky.clone(),
            403,
        ),
        (
            "Origin: our own address",
            format!("{host}{auth}Origin: http://127.0.0.1:{port}\r\n"),
            sticky.clone(),
            403,
        ),
        (
            "Origin: localhost",
            format!("{host}{auth}Origin: http://localhost:{port}\r\n"),
            sticky.clone(),
            403,
        ),
        (
            "DNS rebinding Host",
            format!("Host: attacker.example\r\n{auth}"),
            sticky.clone(),
            403,
        ),
        (
            "DNS rebinding Host with our port",
            format!("Host: attacker.example:{port}\r\n{auth}"),
            sticky.clone(),
            403,
        ),
        ("no Host", auth.clone(), sticky.clone(), 403),
        (
            "Sec-Fetch-Site: cross-site",
            format!("{host}{auth}Sec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"),
            sticky.clone(),
            403,
        ),
        (
            "Sec-Fetch-Site: same-origin",
            format!("{host}{auth}Sec-Fetch-Site: same-origin\r\n"),
            sticky.clone(),
            403,
        ),
        (
            "form POST without Origin or token",
            format!("{host}Content-Type: application/x-www-form-urlencoded\r\n"),
            form.clone(),
            401,
        ),
        (
            "text/plain form POST without Origin or token, JSON-shaped",
            format!("{host}Content-Type: text/plain\r\n"),
            sticky.clone(),
            401,
        ),
        (
            "form POST with a token but a form body",
            format!("{host}{auth}Content-Type: application/x-www-form-urlencoded\r\n"),
            form,
            400,
        ),
        (
            "CORS preflight",
            String::new(), // replaced below: OPTIONS
            String::new(),
            403,
        ),
    ]
}

fn run_attacks(port: u16, token: &str) {
    for (name, headers, body, expected) in attacks(port, token) {
        let bytes = if name == "CORS preflight" {
            format!(
                "OPTIONS /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:1\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization\r\nConnection: close\r\n\r\n"
            )
            .into_bytes()
        } else {
            with_headers(&headers, &body)
        };
        let reply = raw(port, &bytes).unwrap_or_else(|| panic!("{name}: no answer"));
        assert_eq!(
            reply.status,
            expected,
            "{name}: {:?}",
            String::from_utf8_lossy(&reply.body)
        );
        assert!(
            reply.header("Access-Control-Allow-Origin").is_none(),
            "{name}: no CORS grant"
        );
        assert_eq!(reply.json()["ok"], false, "{name}");
    }
}

#[test]
fn browser_shaped_requests_never_reach_execute() {
    let t = start("origin");
    run_attacks(t.port, &t.session.token);
    assert!(t.app.executed().is_empty(), "{:?}", t.app.executed());
    // The same token and body without the browser's headers does run: the refusals
    // above are the headers' doing.
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("sticky_open", json!({"text": "ok"})),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(t.app.executed(), ["project-a/sticky_open"]);
    t.server.close();
}

#[test]
fn browser_shaped_requests_through_serve_create_nothing() {
    let dirs = serve_harness::Dirs::new("origin");
    let serve = serve_harness::Serve::start(&dirs, &["--agent", "a1", "--terminals", "pty"]);
    let token = serve_harness::token(&dirs, "a1");
    let before = serve.ok(&dirs, "a1", "canvas_list", json!({}));
    run_attacks(serve.port, &token);
    let after = serve.ok(&dirs, "a1", "canvas_list", json!({}));
    assert_eq!(before, after, "no attack changed the canvas");
    assert!(!after.to_string().contains("pwned"));
    serve.stop();
}

/// A page server on its own port: `/` is `page`.
fn serve_page(page: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let page = page.clone();
            thread::spawn(move || {
                stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && head.len() < 16384 {
                    match stream.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                stream.write_all(answer.as_bytes()).ok();
            });
        }
    });
    port
}

/// The attacking page: five requests a page can make, each result written into `#out`,
/// then `done`.
fn attack_page(endpoint: &str, localhost: &str, token: &str) -> String {
    let body = op("sticky_open", json!({ "text": "pwned" }));
    format!(
        r#"<!doctype html><title>attack</title><p id="out"></p>
<iframe name="sink" style="display:none"></iframe>
<form id="f" method="POST" action="{endpoint}" enctype="text/plain" target="sink">
<input name='{{"operation":"sticky_open","args":{{"text":"pwned","x":"' value='"}}}}'></form>
<script>
const out = (s) => {{ document.getElementById('out').textContent += s + ';'; }};
const body = {body:?};
const tries = [
  ['no-cors', () => fetch("{endpoint}", {{method: 'POST', mode: 'no-cors', body}})],
  ['no-cors-plain', () => fetch("{endpoint}", {{method: 'POST', mode: 'no-cors', body, headers: {{'Content-Type': 'text/plain'}}}})],
  ['no-cors-localhost', () => fetch("{localhost}", {{method: 'POST', mode: 'no-cors', body}})],
  ['cors-with-token', () => fetch("{endpoint}", {{method: 'POST', body, headers: {{'Authorization': 'Bearer {token}', 'Content-Type': 'application/json'}}}})],
  ['beacon', () => Promise.resolve(navigator.sendBeacon("{endpoint}", body))],
];
(async () => {{
  for (const [name, go] of tries) {{
    try {{ const r = await go(); out(name + ':sent:' + (r && r.type ? r.type : r)); }}
    catch (e) {{ out(name + ':blocked:' + e.name); }}
  }}
  document.getElementById('f').submit();
  await new Promise((r) => setTimeout(r, 1500));
  out('done');
}})();
</script>"#
    )
}

#[test]
fn a_real_chromium_page_on_another_port_gets_no_tool_executed() {
    let profile = std::env::temp_dir().join(format!("tst-origin-chromium-{}", std::process::id()));
    let engine = BrowserEngine::new(EngineConfig {
        executable: None,
        profile_dir: profile.clone(),
    });
    if let Err(error) = engine.find_executable() {
        eprintln!("NOTICE: skipping the Chromium origin test: {error}");
        return;
    }
    let t = start("origin-chromium");
    let endpoint = format!("http://127.0.0.1:{}/call", t.port);
    let localhost = format!("http://localhost:{}/call", t.port);
    let page_port = serve_page(attack_page(&endpoint, &localhost, &t.session.token));
    let events = engine.subscribe();
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = engine
        .open_page(&format!("http://127.0.0.1:{page_port}/"), deadline)
        .unwrap();
    assert!(matches!(
        events.recv_timeout(Duration::from_secs(30)),
        Ok(PageEvent::Ready(_))
    ));
    let text = serve_harness::poll("the attack page to finish", Duration::from_secs(20), || {
        let seen = engine
            .inspect(&page, Instant::now() + Duration::from_secs(5))
            .ok()?;
        seen.text.contains("done").then_some(seen.text)
    });
    eprintln!("figure: Chromium page results: {text}");
    // The no-cors requests were sent and answered (an opaque response), so they reached
    // the server; the one carrying the token was stopped at its preflight.
    assert!(text.contains("no-cors:sent:opaque"), "{text}");
    assert!(text.contains("cors-with-token:blocked"), "{text}");
    assert!(
        t.app.executed().is_empty(),
        "executed: {:?}",
        t.app.executed()
    );
    engine.shutdown();
    t.server.close();
    let _ = std::fs::remove_dir_all(profile);
}

#[test]
fn the_refusals_name_no_secret() {
    // A refused browser request learns nothing it could use: the same fixed texts.
    let t = start("origin-texts");
    let texts: Vec<Value> = attacks(t.port, &t.session.token)
        .into_iter()
        .filter(|(name, ..)| *name != "CORS preflight")
        .map(|(_, headers, body, _)| raw(t.port, &with_headers(&headers, &body)).unwrap().json())
        .collect();
    for text in &texts {
        assert!(!text.to_string().contains(&t.session.token));
        assert!(!text.to_string().contains(&t.session.node_id), "{text}");
    }
    drop(TcpStream::connect(("127.0.0.1", t.port)));
    t.server.close();
}
