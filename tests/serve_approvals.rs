//! `serve --policy careful` with real PTY terminals, answered with the `approvals`
//! command: a command typed into a terminal another agent opened waits for the person
//! (listed with its arguments, as text), runs once allowed, and is refused with the
//! person's reason; the agent's own terminal is not asked about; a bad `--policy` is
//! refused at start; the saved rules are private; `policy set --agent` takes only an agent
//! with a session; `policy show` lists what was allowed for this session.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

/// `termsprawl-tools approvals ARGS --data D`: (exit code, stdout, stderr).
fn approvals(dirs: &Dirs, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg("approvals")
        .args(args)
        .arg("--data")
        .arg(&dirs.data)
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let code = output.status.code().unwrap_or(-1);
    (code, text(&output.stdout), text(&output.stderr))
}

/// The calls waiting for the person, once there are `n`.
fn listed(dirs: &Dirs, n: usize) -> Vec<Value> {
    poll("the approvals list", Duration::from_secs(10), || {
        let (code, out, err) = approvals(dirs, &["list", "--json"]);
        assert_eq!(code, 0, "{err}");
        let calls: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (calls.len() == n).then_some(calls)
    })
}

#[test]
fn a_command_into_another_agents_terminal_waits_for_the_approvals_command() {
    let dirs = Dirs::new("approvals-cli");
    let serve = Serve::start(
        &dirs,
        &[
            "--terminals",
            "pty",
            "--agent",
            "a",
            "--agent",
            "b",
            "--policy",
            "careful",
        ],
    );
    // `b` opens a shell; to `a` it is another's terminal.
    let shell = serve.ok(&dirs, "b", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, out, _) = approvals(&dirs, &["list"]);
    assert_eq!((code, out.trim()), (0, "no call waits for an answer"));

    let hostile = "echo '<img src=x onerror=alert(1)>' \u{1b}[31m";
    let submit = |command: &str| {
        let (port, token) = (serve.port, token(&dirs, "a"));
        let args = json!({"nodeId": shell, "command": command});
        let body = json!({"operation": "terminal_submit", "args": args});
        thread::spawn(move || post(port, &token, &body))
    };
    let waiting = submit(hostile);
    let call = &listed(&dirs, 1)[0];
    assert_eq!(call["nodeId"], "a");
    assert_eq!(call["operation"], "terminal_submit");
    assert_eq!(call["class"], "terminals-others");
    assert_eq!(call["args"]["command"], hostile);
    let id = call["id"].as_str().unwrap();
    // The text list shows the arguments as text: the escape is escaped.
    let (_, text, _) = approvals(&dirs, &["list"]);
    assert!(text.contains(id) && text.contains("<img src=x"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");

    let (code, out, err) = approvals(&dirs, &["allow", id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("allow: "), "{out}");
    let (status, answer) = waiting.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    // Answered already: the same answer again is refused (by the command when the list
    // no longer has it, else by `serve`).
    let (code, _, err) = approvals(&dirs, &["allow", id]);
    assert_eq!(code, 1);
    let err = err.to_lowercase();
    assert!(err.contains("no call waits for an answer"), "{err}");

    let waiting = submit("rm -rf build");
    let id = listed(&dirs, 1)[0]["id"].as_str().unwrap().to_string();
    let (code, _, err) = approvals(&dirs, &["deny", &id, "--reason", "not now"]);
    assert_eq!(code, 0, "{err}");
    let (status, answer) = waiting.join().unwrap();
    assert_eq!(status, 400);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .starts_with("The person denied this call: not now."),
        "{answer}"
    );

    // `a`'s own terminal is its own: not asked about under `careful`.
    let own = serve.ok(&dirs, "a", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    serve.ok(
        &dirs,
        "a",
        "terminal_submit",
        json!({"nodeId": own, "command": "true"}),
    );
    assert!(listed(&dirs, 0).is_empty());

    // The list `serve` writes is private.
    use std::os::unix::fs::PermissionsExt;
    let list = dirs.agent_tools().join("approvals.json");
    let mode = std::fs::metadata(list).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    serve.stop();
}

#[test]
fn an_unknown_policy_is_refused_at_start() {
    let dirs = Dirs::new("approvals-bad-policy");
    let (status, _, err) = serve_fails(&dirs, &["--terminals", "pty", "--policy", "carefull"]);
    assert!(!status.success());
    assert!(err.contains("open, careful, strict"), "{err}");
}

#[test]
fn the_python_sdk_hears_the_tool_list_change_when_the_policy_denies_a_class() {
    let sdk = Command::new("python3").args(["-c", "import mcp"]).output();
    if !sdk.is_ok_and(|out| out.status.success()) {
        eprintln!(
            "NOTICE: python3 with the `mcp` package is not installed; skipping (pip install mcp)"
        );
        return;
    }
    let dirs = Dirs::new("approvals-mcp");
    let serve = Serve::start(&dirs, &["--agent", "agent-1", "--terminals", "pty"]);
    let session = dirs.agent_tools().join("sessions/agent-1.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_policy_changed.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_termsprawlctl"))
        .arg(&session)
        .arg(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg(&dirs.data)
        .arg("agent-1")
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    println!("--- Python SDK: list_changed on a policy change ---\n{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("RESULT "), "{stdout}");
    // The rule the command set was saved privately, and `policy show` says so.
    let (code, shown, err) = policy(&dirs, &["show", "--json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(shown["starting"], "open");
    assert_eq!(
        shown["saved"]["projects"][serve.project_id()]["agents"]["agent-1"]["launch"],
        "allow"
    );
    assert!(serve.stop().success());
}

/// `termsprawl-tools policy ARGS --data D`: (exit code, stdout, stderr).
fn policy(dirs: &Dirs, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg("policy")
        .args(args)
        .arg("--data")
        .arg(&dirs.data)
        .output()
        .unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (
        output.status.code().unwrap_or(-1),
        text(&output.stdout),
        text(&output.stderr),
    )
}

#[test]
fn policy_set_for_an_agent_without_a_session_is_refused_naming_the_agents() {
    let dirs = Dirs::new("policy-agent");
    let serve = Serve::start(
        &dirs,
        &["--terminals", "pty", "--agent", "a", "--agent", "b"],
    );
    let saved_before = std::fs::read(dirs.agent_tools().join("policy.json")).ok();
    for (agent, near) in [("nobody", ""), ("bb", " (did you mean b?)")] {
        let (code, out, err) = policy(&dirs, &["set", "launch", "deny", "--agent", agent]);
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty(), "{out}");
        let sessions = dirs.agent_tools().join("sessions");
        assert_eq!(
            err.lines().next().unwrap(),
            format!(
                "termsprawl-tools policy: --agent {agent}{near}: no such agent has a session in {}; agents with one: a, b",
                sessions.display()
            )
        );
    }
    // Nothing was saved, and an agent with a session is taken.
    assert_eq!(
        std::fs::read(dirs.agent_tools().join("policy.json")).ok(),
        saved_before
    );
    let (code, out, err) = policy(&dirs, &["set", "launch", "deny", "--agent", "b"]);
    assert_eq!(
        (code, out.trim()),
        (0, "launch is now deny for agent b"),
        "{err}"
    );
    let (_, shown, _) = policy(&dirs, &["show", "--json"]);
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    let agents = &shown["saved"]["projects"][serve.project_id()]["agents"];
    assert_eq!(agents, &json!({"b": {"launch": "deny"}}), "{shown}");
    assert!(serve.stop().success());
}

#[test]
fn policy_show_lists_what_was_allowed_for_this_session() {
    let dirs = Dirs::new("policy-grants");
    let serve = Serve::start(
        &dirs,
        &[
            "--terminals",
            "pty",
            "--agent",
            "a",
            "--agent",
            "b",
            "--policy",
            "careful",
        ],
    );
    let (code, shown, err) = policy(&dirs, &["show"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.ends_with("\nallowed for this session: none\n"),
        "{shown}"
    );
    // `a` types into `b`'s shell: held, then allowed for the rest of this serve.
    let shell = serve.ok(&dirs, "b", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let (port, token) = (serve.port, token(&dirs, "a"));
    let body = json!({"operation": "terminal_submit",
        "args": {"nodeId": shell, "command": "true"}});
    let waiting = thread::spawn(move || post(port, &token, &body));
    let id = listed(&dirs, 1)[0]["id"].as_str().unwrap().to_string();
    let (code, _, err) = approvals(&dirs, &["allow", &id, "--for-session"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(waiting.join().unwrap().0, 200);
    // Shown at once, marked as this session's, and in --json.
    let (code, shown, err) = policy(&dirs, &["show"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.ends_with(
            "\nallowed for this session (until serve stops):\n  terminals-others for agent a\n"
        ),
        "{shown}"
    );
    let (_, shown, _) = policy(&dirs, &["show", "--json"]);
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(
        shown["grants"],
        json!([{"projectId": serve.project_id(), "nodeId": "a", "class": "terminals-others"}])
    );
    // Not saved: the next serve starts without it.
    assert!(serve.stop().success());
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "a"]);
    let (_, shown, _) = policy(&dirs, &["show"]);
    assert!(
        shown.ends_with("allowed for this session: none\n"),
        "{shown}"
    );
    assert!(serve.stop().success());
}
