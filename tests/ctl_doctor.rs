//! `termsprawlctl doctor`: one readable line per check, exit 0 only when all pass, and
//! never the token.
#![deny(unsafe_code)]

mod support;

use std::process::Output;

use support::{closed_port, ctl, set_mode, Behaviour, DataDir, TestHost, TOKEN};

fn doctor(session: &std::path::Path) -> (Option<i32>, String) {
    let output: Output = ctl()
        .arg("--session")
        .arg(session)
        .arg("doctor")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(!text.contains(TOKEN), "doctor printed the token:\n{text}");
    assert!(!String::from_utf8_lossy(&output.stderr).contains(TOKEN));
    (output.status.code(), text)
}

fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

#[test]
fn all_checks_pass_against_a_running_host() {
    let data = DataDir::new("doctor-ok");
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);
    let (code, text) = doctor(&session);
    assert_eq!(code, Some(0), "{text}");
    for needle in [
        "exists",
        "mode is 0600",
        "parses: node \"agent-1\"",
        "64 hex characters",
        "is a loopback URL",
        "server answers",
        "token accepted (session_info)",
    ] {
        assert!(
            line_with(&text, needle).starts_with("ok"),
            "{needle}: {text}"
        );
    }
    assert!(line_with(&text, "integration: connected (claude-mcp)").starts_with("info"));
    assert!(line_with(&text, "browser control: on").starts_with("info"));
    assert_eq!(text.lines().last(), Some("all checks passed"));
    assert_eq!(host.requests(), 1);
    assert_eq!(
        host.seen()[0].body,
        serde_json::json!({"operation": "session_info", "args": {}})
    );
}

#[test]
fn each_broken_link_is_reported_and_exits_non_zero() {
    let data = DataDir::new("doctor-broken");
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);

    set_mode(&session, 0o644);
    let (code, text) = doctor(&session);
    assert_eq!(code, Some(1));
    assert!(line_with(&text, "mode is 0644, expected 0600").starts_with("FAIL"));
    assert!(
        line_with(&text, "token accepted").starts_with("ok"),
        "later checks still run"
    );
    set_mode(&session, 0o600);

    let stale = data.write_session("agent-1", &"e".repeat(64));
    let (code, text) = doctor(&stale);
    assert_eq!(code, Some(1));
    assert!(line_with(&text, "token refused: Unknown or revoked session").starts_with("FAIL"));
    assert!(!text.contains(&"e".repeat(64)));

    let session = data.write_session("agent-1", TOKEN);
    data.write_endpoint("http://localhost:80/call");
    let (code, text) = doctor(&session);
    assert_eq!(code, Some(1));
    assert!(line_with(&text, "Invalid local endpoint").starts_with("FAIL"));

    data.write_endpoint(&format!("http://127.0.0.1:{}/call", closed_port()));
    let (code, text) = doctor(&session);
    assert_eq!(code, Some(1));
    let down = line_with(&text, "server does not answer");
    assert!(down.starts_with("FAIL"), "{down}");
    assert!(
        down.ends_with("(start it with termsprawl-tools serve)"),
        "{down}"
    );

    data.remove_endpoint();
    let (code, text) = doctor(&session);
    assert_eq!(code, Some(1));
    let missing = line_with(&text, "endpoint file");
    assert!(missing.starts_with("FAIL"), "{missing}");
    assert!(
        missing.ends_with("(start it with termsprawl-tools serve)"),
        "{missing}"
    );

    let (code, text) = doctor(&data.agent_tools().join("sessions/missing.json"));
    assert_eq!(code, Some(1));
    assert!(text.lines().next().unwrap().starts_with("FAIL"));

    let output = ctl().arg("doctor").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("No session file"));
}

#[test]
fn text_from_a_path_reaches_the_terminal_escaped() {
    let data = DataDir::new("doctor-escaped");
    // A session file named with a cursor move, an erase, a window title, a C1 CSI and a
    // bidi override (missing: doctor quotes its name).
    let name = "\r\x1b[1A\x1b[2Kok\x1b]0;x\x07\u{9b}\u{202e}.json";
    let (code, text) = doctor(&data.agent_tools().join("sessions").join(name));
    assert_eq!(code, Some(1));
    let raw = text
        .chars()
        .find(|c| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c));
    assert_eq!(raw, None, "a raw control character: {text:?}");
    let line = line_with(&text, "session file");
    assert!(line.starts_with("FAIL"), "{line}");
    assert!(
        line.contains(r"sessions/\r\x1b[1A\x1b[2Kok\x1b]0;x\x07\x9b\u202e.json"),
        "{line}"
    );
}
