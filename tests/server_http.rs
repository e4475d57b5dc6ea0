//! The HTTP boundary over real loopback connections: request checks in the spec's order,
//! auth, body limits, responses, and the operations answered directly.
#![deny(unsafe_code)]

mod common;

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const SESSION_INFO: &str = r#"{"operation":"session_info","args":{}}"#;

#[test]
fn session_info_reports_the_session_and_never_the_token() {
    let t = start("info");
    let reply = call(t.port, Some(&t.session.token), SESSION_INFO);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["ok"], true);
    let info = &body["value"];
    let dir = t.server.directory();
    assert_eq!(info["nodeId"], "agent-1");
    assert_eq!(info["projectId"], "project-a");
    assert_eq!(info["instanceId"], t.server.instance_id());
    assert_eq!(info["host"], "local");
    assert_eq!(info["status"]["adapter"], "external");
    assert_eq!(info["status"]["state"], "cli-fallback");
    assert_eq!(info["appVersion"], "development");
    assert_eq!(info["preferencesFile"], json!(dir.join("preferences.json")));
    assert_eq!(
        info["guidesDirectory"],
        json!(dir.join("launch/agent-1/skills"))
    );
    assert_eq!(info["browserEnabled"], false);
    let operations: Vec<&str> = info["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(operations.contains(&"canvas_list"));
    assert!(!operations.iter().any(|o| o.starts_with("browser_")));
    assert!(!String::from_utf8_lossy(&reply.body).contains(&t.session.token));

    t.app.browser.store(true, Ordering::SeqCst);
    let info = call(t.port, Some(&t.session.token), SESSION_INFO).json();
    assert_eq!(info["value"]["browserEnabled"], true);
    assert!(info["value"]["operations"]
        .as_array()
        .unwrap()
        .contains(&json!("browser_open")));
    t.server.close();
}

#[test]
fn session_info_connects_mcp_adapters_once() {
    let t = start("mcp");
    let mcp = t
        .server
        .provision(
            &identity("agent-2", "project-a"),
            status("claude-mcp"),
            false,
        )
        .unwrap();
    let info = call(t.port, Some(&mcp.token), SESSION_INFO).json();
    assert_eq!(info["value"]["status"]["state"], "connected");
    assert_eq!(
        info["value"]["status"]["reason"],
        "Authenticated tool connection established"
    );
    let broadcasts = |app: &FakeApp| {
        app.statuses
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, s)| n == "agent-2" && s.reason.is_some())
            .count()
    };
    assert_eq!(broadcasts(&t.app), 1);
    call(t.port, Some(&mcp.token), SESSION_INFO);
    assert_eq!(broadcasts(&t.app), 1, "already connected: no new broadcast");
    assert_eq!(
        t.server.session("agent-2").unwrap().status.state,
        termsprawl_tools::protocol::IntegrationState::Connected
    );
    // Every `-mcp` adapter connects the same way (the runtime also launches opencode-mcp).
    let opencode = t
        .server
        .provision(
            &identity("agent-3", "project-a"),
            status("opencode-mcp"),
            false,
        )
        .unwrap();
    let info = call(t.port, Some(&opencode.token), SESSION_INFO).json();
    assert_eq!(info["value"]["status"]["state"], "connected");
    // The external adapter is left alone.
    let info = call(t.port, Some(&t.session.token), SESSION_INFO).json();
    assert_eq!(info["value"]["status"]["state"], "cli-fallback");
    t.server.close();
}

#[test]
fn session_info_follows_status_and_browser_changes() {
    // The answer is kept between calls; each change must still show at once.
    let t = start("info-changes");
    let mut client = Client::connect(t.port);
    let mut info = || client.call(Some(&t.session.token), SESSION_INFO).json()["value"].clone();
    let first = info();
    assert_eq!(first, info(), "the same answer again");
    assert_eq!(first["status"]["state"], "cli-fallback");
    let mut ready = status("external");
    ready.state = termsprawl_tools::protocol::IntegrationState::Connected;
    t.server.set_status("agent-1", ready).unwrap();
    assert_eq!(info()["status"]["state"], "connected");
    let has_browser = |info: &serde_json::Value| {
        info["operations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o == "browser_open")
    };
    assert!(!has_browser(&info()));
    t.app
        .browser
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let on = info();
    assert!(has_browser(&on) && on["browserEnabled"] == true, "{on}");
    t.app
        .browser
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(!has_browser(&info()));
    t.server.close();
}

#[test]
fn guide_read_and_agent_status_are_answered_directly() {
    let t = start("direct");
    let guide = call(
        t.port,
        Some(&t.session.token),
        &op("guide_read", json!({"topic": "overview"})),
    )
    .json();
    assert_eq!(guide["value"]["topic"], "overview");
    assert!(guide["value"]["guide"]
        .as_str()
        .unwrap()
        .contains("session_info"));
    t.server
        .provision(
            &identity("agent-2", "project-a"),
            status("codex-mcp"),
            false,
        )
        .unwrap();
    t.server
        .provision(&identity("gone", "project-a"), status("external"), false)
        .unwrap();
    t.server
        .provision(&identity("other", "project-b"), status("external"), false)
        .unwrap();
    t.app.invalid.lock().unwrap().insert("gone".into());
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("agent_status", json!({})),
    );
    let agents = &reply.json()["value"]["agents"];
    let nodes: Vec<&str> = agents
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["nodeId"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, vec!["agent-1", "agent-2"]);
    assert_eq!(agents[1]["status"]["adapter"], "codex-mcp");
    assert!(!String::from_utf8_lossy(&reply.body).contains(&t.session.token));
    assert!(t.app.executed().is_empty(), "nothing went to execute");
    t.server.close();
}

#[test]
fn operations_run_through_execute_with_the_sessions_identity() {
    let t = start("execute");
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("canvas_list", json!({})),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["value"]["ran"], "canvas_list");
    assert_eq!(t.app.executed(), vec!["project-a/canvas_list"]);
    t.server.close();
}

#[test]
fn credentials_are_bound_to_the_identity() {
    let t = start("bound");
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("canvas_list", json!({"projectId": "project-b"})),
    );
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.error(),
        "Unknown argument: projectId (canvas_list takes no arguments)"
    );
    assert!(t.app.executed().is_empty());
    t.server.close();
}

#[test]
fn validation_errors_and_browser_gating_are_400s() {
    let t = start("reject");
    let token = Some(t.session.token.as_str());
    let reply = call(t.port, token, r#"{"operation":"nope","args":{}}"#);
    assert_eq!(reply.status, 400);
    assert!(
        reply.error().starts_with("Unknown operation: nope; "),
        "{}",
        reply.error()
    );
    let reply = call(t.port, token, "[1,2");
    assert_eq!(reply.status, 400);
    assert!(reply.error().contains("not JSON"));
    let reply = call(t.port, token, &op("browser_list", json!({})));
    assert_eq!(
        reply.error(),
        "Enable agent browser control in Settings first"
    );
    t.app.browser.store(true, Ordering::SeqCst);
    let reply = call(t.port, token, &op("browser_list", json!({})));
    assert_eq!(reply.status, 200);
    // An identity that is no longer valid is refused before anything runs.
    t.app.invalid.lock().unwrap().insert("agent-1".into());
    assert_eq!(call(t.port, token, SESSION_INFO).error(), "Session revoked");
    assert_eq!(t.app.executed(), vec!["project-a/browser_list"]);
    t.server.close();
}

fn request(method: &str, path: &str, host: &str, extra: &str, token: &str) -> Vec<u8> {
    let body = SESSION_INFO;
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn unsupported_requests_get_403_before_auth() {
    let t = start("forbidden");
    let host = format!("127.0.0.1:{}", t.port);
    let good = t.session.token.as_str();
    for (method, path, host, extra, token) in [
        (
            "POST",
            "/call",
            host.as_str(),
            "Origin: http://evil.example\r\n",
            good,
        ),
        ("POST", "/call", host.as_str(), "Origin: null\r\n", "forged"),
        ("GET", "/call", host.as_str(), "", good),
        ("PUT", "/call", host.as_str(), "", "forged"),
        ("POST", "/call/", host.as_str(), "", good),
        ("POST", "/call?x=1", host.as_str(), "", good),
        ("POST", "/", host.as_str(), "", "forged"),
        ("POST", "/call", "evil.example", "", good),
        ("POST", "/call", "127.0.0.1:1", "", good),
        ("POST", "/call", "localhost", "", good),
        (
            "POST",
            "/call",
            host.as_str(),
            "Connection: upgrade\r\nUpgrade: websocket\r\n",
            good,
        ),
    ] {
        let reply = raw(t.port, &request(method, path, host, extra, token)).unwrap();
        assert_eq!(reply.status, 403, "{method} {path} {host} {extra}");
        assert_eq!(
            reply.json(),
            json!({"ok": false, "error": "Unsupported request"})
        );
    }
    let localhost = format!("localhost:{}", t.port);
    let reply = raw(t.port, &request("POST", "/call", &localhost, "", good)).unwrap();
    assert_eq!(reply.status, 200);
    let no_host = format!(
        "POST /call HTTP/1.1\r\nAuthorization: Bearer {good}\r\nContent-Length: {}\r\n\r\n{SESSION_INFO}",
        SESSION_INFO.len()
    );
    assert_eq!(raw(t.port, no_host.as_bytes()).unwrap().status, 403);
    t.server.close();
}

#[test]
fn forged_and_foreign_tokens_get_401() {
    let t = start("auth");
    let other = start_in(&scratch("auth-other"), None);
    let almost = {
        let mut token = t.session.token.clone().into_bytes();
        token[63] = if token[63] == b'0' { b'1' } else { b'0' };
        String::from_utf8(token).unwrap()
    };
    for token in [
        Some("forged"),
        Some(""),
        Some(other.session.token.as_str()),
        Some(almost.as_str()),
        Some(&t.session.token[..63]),
        None,
    ] {
        let reply = call(t.port, token, SESSION_INFO);
        assert_eq!(reply.status, 401, "{token:?}");
        assert_eq!(
            reply.json(),
            json!({"ok": false, "error": "Unknown or revoked session"})
        );
    }
    let upper = t.session.token.to_uppercase();
    assert_eq!(call(t.port, Some(&upper), SESSION_INFO).status, 401);
    let basic = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Basic {}\r\nContent-Length: 2\r\n\r\n{{}}",
        t.port, t.session.token
    );
    assert_eq!(raw(t.port, basic.as_bytes()).unwrap().status, 401);
    // A revoked session's token stops working at once.
    t.server.revoke("agent-1");
    assert_eq!(
        call(t.port, Some(&t.session.token), SESSION_INFO).status,
        401
    );
    t.server.close();
    other.server.close();
}

#[test]
fn bodies_over_128_kib_are_refused() {
    let t = start("large");
    let token = t.session.token.clone();
    // Declared too large: refused from the headers, the body never sent.
    let head = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n",
        t.port,
        128 * 1024 + 1
    );
    let reply = raw(t.port, head.as_bytes()).unwrap();
    assert_eq!(
        (reply.status, reply.error()),
        (400, "Request too large".into())
    );
    // An absurd declared length is refused the same way and the server lives on.
    let head = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\nContent-Length: 99999999999999\r\n\r\n",
        t.port
    );
    let reply = raw(t.port, head.as_bytes()).unwrap();
    assert_eq!(
        (reply.status, reply.error()),
        (400, "Request too large".into())
    );
    // Exactly at the limit is accepted (and then validated).
    let text = "x".repeat(128 * 1024 - 60);
    let body = op("sticky_open", json!({ "text": text }));
    let padded = format!("{body}{}", " ".repeat(128 * 1024 - body.len()));
    let reply = call(t.port, Some(&token), &padded);
    assert_eq!(reply.status, 400);
    assert!(
        reply.error().starts_with("Invalid text"),
        "{}",
        reply.error()
    );
    // Chunked, so nothing is declared: refused once it grows past the limit.
    let mut client = Client::connect(t.port);
    client.send(
        format!(
            "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n",
            t.port
        )
        .as_bytes(),
    );
    let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, " ".repeat(64 * 1024));
    for _ in 0..3 {
        client.send(chunk.as_bytes());
    }
    let reply = client.read_reply().unwrap();
    assert_eq!(
        (reply.status, reply.error()),
        (400, "Request too large".into())
    );
    // An absurd length without a token: 401, and the server lives on.
    let head = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 99999999999999\r\n\r\n",
        t.port
    );
    assert_eq!(raw(t.port, head.as_bytes()).unwrap().status, 401);
    // Without a token the answer is 401: auth is checked before the length.
    let head = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 999999\r\n\r\n",
        t.port
    );
    assert_eq!(raw(t.port, head.as_bytes()).unwrap().status, 401);
    // Still serving.
    assert_eq!(call(t.port, Some(&token), SESSION_INFO).status, 200);
    t.server.close();
}

#[test]
fn large_bodies_and_keep_alive_work() {
    let t = start("keepalive");
    let mut client = Client::connect(t.port);
    let text = "y".repeat(50_000);
    for _ in 0..3 {
        let reply = client.call(
            Some(&t.session.token),
            &op("sticky_open", json!({ "text": text })),
        );
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.json()["value"]["args"]["text"].as_str().map(str::len),
            Some(50_000)
        );
        let reply = client.call(Some(&t.session.token), SESSION_INFO);
        assert_eq!(reply.status, 200);
    }
    // Expect: 100-continue is honoured.
    let body = op("sticky_open", json!({ "text": "z".repeat(2000) }));
    client.send(
        format!(
            "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            t.port,
            t.session.token,
            body.len()
        )
        .as_bytes(),
    );
    assert_eq!(client.read_reply().unwrap().status, 100);
    client.send(body.as_bytes());
    assert_eq!(client.read_reply().unwrap().status, 200);
    t.server.close();
}

#[test]
fn restart_keeps_the_token_and_moves_the_port() {
    let data = scratch("restart");
    let first = start_in(&data, None);
    let endpoint_file = first.server.directory().join("endpoint.json");
    let endpoint: Value = serde_json::from_slice(&std::fs::read(&endpoint_file).unwrap()).unwrap();
    assert_eq!(
        endpoint["url"],
        format!("http://127.0.0.1:{}/call", first.port)
    );
    assert_eq!(endpoint["instanceId"], first.server.instance_id());
    first.server.close();
    assert!(!endpoint_file.exists());
    assert!(!first.server.directory().join("server.lock").exists());

    let second = start_in(&data, None);
    assert_eq!(second.session.token, first.session.token, "token reused");
    assert_ne!(second.server.instance_id(), first.server.instance_id());
    let endpoint: Value = serde_json::from_slice(&std::fs::read(&endpoint_file).unwrap()).unwrap();
    assert_eq!(
        endpoint["url"],
        format!("http://127.0.0.1:{}/call", second.port)
    );
    assert_eq!(endpoint["instanceId"], second.server.instance_id());
    assert_eq!(
        call(second.port, Some(&first.session.token), SESSION_INFO).status,
        200
    );
    // The old port no longer answers.
    if first.port != second.port {
        assert!(std::net::TcpStream::connect(("127.0.0.1", first.port)).is_err());
    }
    second.server.close();
}

#[test]
fn close_ends_open_connections_and_is_idempotent() {
    let t = start("close");
    let mut idle = Client::connect(t.port);
    assert_eq!(idle.call(Some(&t.session.token), SESSION_INFO).status, 200);
    t.server.close();
    assert!(
        idle.read_reply().is_none(),
        "the idle keep-alive connection was ended"
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", t.port)).is_err());
    assert!(t.server.endpoint().is_none());
    t.server.close();
    assert_eq!(
        t.server.start().unwrap_err().to_string(),
        "Tool service was closed; create a new server to start again"
    );
}

#[test]
fn endpoint_of_another_instance_is_left_alone_at_close() {
    let t = start("foreign-endpoint");
    let file = t.server.directory().join("endpoint.json");
    std::fs::write(
        &file,
        r#"{"url":"http://127.0.0.1:1/call","instanceId":"someone-else"}"#,
    )
    .unwrap();
    t.server.close();
    assert!(file.exists());
}

#[test]
fn a_revoked_or_replaced_session_is_never_answered_or_connected() {
    let t = start("revoked-info");
    let mcp = t
        .server
        .provision(
            &identity("agent-2", "project-a"),
            status("claude-mcp"),
            false,
        )
        .unwrap();
    let raw: Value = serde_json::from_str(SESSION_INFO).unwrap();
    // As if it authenticated just before the revoke (a call in flight).
    t.server.revoke("agent-2");
    let result = t.server.invoke(&mcp, &raw);
    assert!(
        matches!(&result, termsprawl_tools::protocol::ToolResult::Err(e) if e == "Session revoked"),
        "{result:?}"
    );
    // A fresh provision replaces the token: the old session is still revoked.
    t.server
        .provision(
            &identity("agent-2", "project-a"),
            status("claude-mcp"),
            false,
        )
        .unwrap();
    let result = t.server.invoke(&mcp, &raw);
    assert!(
        matches!(&result, termsprawl_tools::protocol::ToolResult::Err(e) if e == "Session revoked"),
        "{result:?}"
    );
    let connected = t
        .app
        .statuses
        .lock()
        .unwrap()
        .iter()
        .any(|(_, s)| s.state == termsprawl_tools::protocol::IntegrationState::Connected);
    assert!(!connected, "a revoked session was broadcast as connected");
    t.server.close();
}

#[test]
fn a_connection_pipelining_past_the_cap_is_ended() {
    let t = start("pipeline-cap");
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let body = op("canvas_list", json!({}));
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    stream
        .write_all(&post_bytes(t.port, Some(&t.session.token), &body))
        .unwrap();
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    // 40 more behind the one in flight, never reading: far past the cap of 8 waiting.
    let many: Vec<u8> = (0..40)
        .flat_map(|_| post_bytes(t.port, Some(&t.session.token), &body))
        .collect();
    stream.write_all(&many).unwrap();
    // The server ends the connection while the first call still runs: end-of-file.
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = stream.read(&mut byte);
    assert!(
        matches!(read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "connection still open: {read:?}"
    );
    // Dropping the calls past the cap (tiny_http then answers each with a 500 once the
    // call in flight is answered) must not hold up the accept thread meanwhile.
    let begun = std::time::Instant::now();
    let other = call(t.port, Some(&t.session.token), SESSION_INFO);
    assert_eq!(other.status, 200);
    assert!(
        begun.elapsed() < Duration::from_secs(5),
        "another client waited {:?} behind the dropped calls",
        begun.elapsed()
    );
    drop(release);
    wait_until("the call in flight finishes", || {
        !t.app.executed().is_empty()
    });
    t.server.close();
    assert!(
        t.app.executed().len() <= 2,
        "waiting calls ran: {:?}",
        t.app.executed()
    );
}
