//! `termsprawlctl call`: output, exit codes, discovery on every call, no retries.
#![deny(unsafe_code)]

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{closed_port, ctl, header, Behaviour, DataDir, TestHost, TOKEN};

fn call(session: &std::path::Path, args: &[&str]) -> Output {
    ctl()
        .arg("--session")
        .arg(session)
        .arg("call")
        .args(args)
        .output()
        .unwrap()
}

fn result_of(output: &Output) -> Value {
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {text:?}"))
}

fn error_of(output: &Output) -> String {
    let result = result_of(output);
    assert_eq!(result["ok"], json!(false), "{result}");
    result["error"].as_str().unwrap().to_string()
}

#[test]
fn an_ok_call_prints_pretty_json_and_exits_0() {
    let data = DataDir::new("ok");
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);

    let output = call(&session, &["canvas_list", "{}"]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout.clone()).unwrap();
    assert!(
        text.starts_with("{\n  \"ok\": true,\n  \"value\": "),
        "{text}"
    );
    assert_eq!(result_of(&output)["value"][1]["id"], json!("n2"));

    let seen = host.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].body,
        json!({"operation": "canvas_list", "args": {}})
    );
    let head = &seen[0].head;
    assert!(head.starts_with("POST /call HTTP/1.1\r\n"));
    assert_eq!(
        header(head, "authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(header(head, "content-type"), Some("application/json"));
    assert_eq!(header(head, "connection"), Some("close"));
    assert_eq!(header(head, "origin"), None);

    // JSON_ARGS may be omitted, and the environment names the session file too.
    let output = ctl()
        .env("TERMSPRAWL_SESSION_FILE", &session)
        .args(["call", "session_info"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        result_of(&output)["value"]["appVersion"],
        json!("7.7.7-test")
    );
    assert_eq!(
        host.seen()[1].body,
        json!({"operation": "session_info", "args": {}})
    );
}

#[test]
fn a_refusal_exits_1_and_prints_the_error() {
    let data = DataDir::new("refusal");
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);

    let bad = call(
        &session,
        &["canvas_move", r#"{"nodeId":"n1","x":"left","y":0}"#],
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        error_of(&bad).starts_with("Invalid x"),
        "{}",
        error_of(&bad)
    );

    let unknown = call(&session, &["no_such_operation", "{}"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(error_of(&unknown).starts_with("Unknown operation"));

    let refused = call(
        &session,
        &["canvas_move", r#"{"nodeId":"gone","x":1,"y":2}"#],
    );
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(error_of(&refused), "Unknown node: gone");

    let stale = data.write_session("agent-1", &"f".repeat(64));
    let revoked = call(&stale, &["session_info"]);
    assert_eq!(revoked.status.code(), Some(1));
    assert_eq!(error_of(&revoked), "Unknown or revoked session");
    assert_eq!(host.requests(), 4);
}

#[test]
fn usage_and_input_errors_exit_2_without_a_request() {
    let data = DataDir::new("usage");
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);

    // What was wrong first, then where the help is.
    for (args, said) in [
        (&["call"][..], "termsprawlctl call: missing OPERATION"),
        (
            &["call", "a", "{}", "extra"],
            "termsprawlctl call: unexpected argument extra",
        ),
        (&["frobnicate"], "termsprawlctl: unknown command frobnicate"),
        (
            &[],
            "termsprawlctl: missing COMMAND (call, doctor, mcp or hook)",
        ),
    ] {
        let output = ctl()
            .arg("--session")
            .arg(&session)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines[0], said, "{args:?}");
        assert!(lines[1].starts_with("Try 'termsprawlctl"), "{stderr}");
    }
    let no_file = ctl().arg("--session").output().unwrap();
    assert_eq!(no_file.status.code(), Some(2));

    let bad_json = call(&session, &["canvas_list", "{nope"]);
    assert_eq!(bad_json.status.code(), Some(2));
    assert!(error_of(&bad_json).starts_with("JSON_ARGS is not valid JSON"));
    let not_object = call(&session, &["canvas_list", "[1]"]);
    assert_eq!(not_object.status.code(), Some(2));
    assert!(error_of(&not_object).contains("must be a JSON object"));

    let unset = ctl().args(["call", "session_info"]).output().unwrap();
    assert_eq!(unset.status.code(), Some(2));
    assert!(error_of(&unset).starts_with("No session file"));

    let missing = call(
        &data.agent_tools().join("sessions/nobody.json"),
        &["session_info"],
    );
    assert_eq!(missing.status.code(), Some(2));
    assert!(error_of(&missing).starts_with("Unreadable session file"));

    std::fs::write(
        &session,
        "{\"nodeId\":\"agent-1\",\"projectId\":\"p1\",\"token\":\"short\"}",
    )
    .unwrap();
    let bad_token = call(&session, &["session_info"]);
    assert_eq!(bad_token.status.code(), Some(2));
    assert!(error_of(&bad_token).contains("no 64-hex token"));
    assert!(!String::from_utf8_lossy(&bad_token.stdout).contains("short"));

    assert_eq!(host.requests(), 0);
}

#[test]
fn a_host_restart_on_a_new_port_needs_no_client_change() {
    let data = DataDir::new("restart");
    let session = data.write_session("agent-1", TOKEN);
    let first = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&first.url());
    assert_eq!(call(&session, &["session_info"]).status.code(), Some(0));
    assert_eq!(first.requests(), 1);
    let old_port = first.port;
    drop(first);
    data.remove_endpoint();

    let down = call(&session, &["session_info"]);
    assert_eq!(down.status.code(), Some(2));
    assert!(error_of(&down).starts_with("Tool connection unavailable: "));

    let second = TestHost::start(Behaviour::Answer);
    assert_ne!(second.port, old_port);
    data.write_endpoint(&second.url());
    let output = call(&session, &["canvas_list"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(second.requests(), 1);
}

#[test]
fn a_stopped_host_gives_tool_connection_unavailable_and_exit_2() {
    let data = DataDir::new("stopped");
    let session = data.write_session("agent-1", TOKEN);
    data.write_endpoint(&format!("http://127.0.0.1:{}/call", closed_port()));
    let output = call(&session, &["canvas_move", r#"{"nodeId":"n1","x":1,"y":2}"#]);
    assert_eq!(output.status.code(), Some(2));
    let error = error_of(&output);
    assert!(
        error.starts_with("Tool connection unavailable: cannot connect to 127.0.0.1:"),
        "{error}"
    );
    assert!(error
        .ends_with(". Check that the host is running (start it with termsprawl-tools serve). Mutations are not automatically retried."));

    data.remove_endpoint();
    let no_endpoint = call(&session, &["session_info"]);
    assert_eq!(no_endpoint.status.code(), Some(2));
    assert!(error_of(&no_endpoint).contains("no endpoint file"));
}

#[test]
fn a_hanging_host_times_out_after_exactly_one_request() {
    let data = DataDir::new("hang");
    let session = data.write_session("agent-1", TOKEN);
    let host = TestHost::start(Behaviour::Hang);
    data.write_endpoint(&host.url());
    let started = Instant::now();
    let output = ctl()
        .env("TERMSPRAWL_CTL_TIMEOUT_MS", "700")
        .arg("--session")
        .arg(&session)
        .args([
            "call",
            "terminal_submit",
            r#"{"nodeId":"t1","text":"make deploy"}"#,
        ])
        .output()
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(output.status.code(), Some(2));
    let error = error_of(&output);
    assert!(
        error.starts_with("Tool connection unavailable: no answer within 700 ms"),
        "{error}"
    );
    assert!(error.ends_with("Mutations are not automatically retried."));
    assert_eq!(
        host.requests(),
        1,
        "a timed-out mutation is never sent again"
    );
}

#[test]
fn a_non_loopback_endpoint_is_refused_without_connecting() {
    let data = DataDir::new("remote");
    let session = data.write_session("agent-1", TOKEN);
    let host = TestHost::start(Behaviour::Answer);
    for url in [
        format!("http://localhost:{}/call", host.port),
        format!("http://127.0.0.1:{}/other", host.port),
        format!("https://127.0.0.1:{}/call", host.port),
        format!("http://192.168.1.20:{}/call", host.port),
        format!("http://127.0.0.1:{}@evil.example/call", host.port),
    ] {
        data.write_endpoint(&url);
        let output = call(&session, &["session_info"]);
        assert_eq!(output.status.code(), Some(2), "{url}");
        assert!(
            error_of(&output).starts_with("Invalid local endpoint"),
            "{url}"
        );
    }
    assert_eq!(host.requests(), 0);
}
