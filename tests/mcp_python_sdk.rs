//! A real MCP client no one here wrote: the official Python SDK's stdio client drives
//! `termsprawlctl --session FILE mcp` (tests/mcp_sdk_client.py), against the test host,
//! for every protocol version the SDK can be made to speak. Skipped with a notice when
//! python3 or the `mcp` package is missing (CI installs it with `pip install mcp`).
//! Against the real `serve --browser`: the tool list following browser control
//! (tests/mcp_list_changed.py), and every operation's answers validated against its
//! `outputSchema` (tests/mcp_output_schemas.py, which also needs Chromium and Python's
//! `jsonschema`).
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod support;
mod sys;

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::{chromium_on_path, tmux_installed, Dirs, Serve};
use support::{Behaviour, DataDir, TestHost, TOKEN};

fn python_with_mcp() -> Option<String> {
    serve_harness::python_package("mcp.client", "mcp")
}

/// Runs the SDK script against `session` and returns the versions it exercised and how
/// many client runs it made.
fn run_sdk_script(sdk_version: &str, session: &std::path::Path) -> (Vec<String>, u64) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_sdk_client.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_termsprawlctl"))
        .arg(session)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    println!("--- Python SDK {sdk_version} session ---\n{stdout}");
    let status = status.unwrap_or_else(|| panic!("the SDK script hung\n{stdout}\n{stderr}"));
    assert!(
        status.success(),
        "the SDK script failed\n{stdout}\n{stderr}"
    );
    let summary: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| panic!("no RESULT line\n{stdout}"));
    let versions: Vec<String> = summary["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    for expected in ["2025-06-18", "2025-11-25"] {
        assert!(
            versions.iter().any(|v| v == expected),
            "{expected} not exercised: {versions:?}"
        );
    }
    (versions, summary["runs"].as_u64().unwrap())
}

#[test]
fn the_python_sdk_lists_and_calls_tools_in_every_version_it_speaks() {
    let Some(sdk_version) = python_with_mcp() else {
        eprintln!("NOTICE: python3 with the `mcp` package is not installed; skipping the Python SDK test (pip install mcp)");
        return;
    };
    let data = DataDir::new("python-sdk");
    let host = TestHost::start(Behaviour::Answer);
    data.write_endpoint(&host.url());
    let session = data.write_session("agent-1", TOKEN);
    let (_, runs) = run_sdk_script(&sdk_version, &session);
    // Each run's session_info and bad call reached the host (plus initialize/discover).
    assert!(host.requests() >= 2 * runs as usize);
}

#[test]
fn the_python_sdk_works_against_the_real_serve() {
    let Some(sdk_version) = python_with_mcp() else {
        eprintln!("NOTICE: python3 with the `mcp` package is not installed; skipping the Python SDK test (pip install mcp)");
        return;
    };
    let dirs = Dirs::new("pysdk");
    let serve = Serve::start(&dirs, &["--agent", "agent-1", "--terminals", "pty"]);
    let session = dirs.agent_tools().join("sessions/agent-1.json");
    let (versions, runs) = run_sdk_script(&sdk_version, &session);
    assert!(runs >= 2, "runs: {runs}, versions: {versions:?}");
    assert!(serve.stop().success());
}

#[test]
fn the_python_sdk_hears_the_tool_list_change_when_browser_control_is_switched() {
    let Some(sdk_version) = python_with_mcp() else {
        eprintln!("NOTICE: python3 with the `mcp` package is not installed; skipping the Python SDK test (pip install mcp)");
        return;
    };
    let dirs = Dirs::new("pysdk-changed");
    let serve = Serve::start(&dirs, &["--agent", "agent-1", "--terminals", "pty"]);
    let session = dirs.agent_tools().join("sessions/agent-1.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_list_changed.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_termsprawlctl"))
        .arg(&session)
        .arg(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg(&dirs.data)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("--- Python SDK {sdk_version}: list_changed ---\n{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("RESULT "), "{stdout}");
    assert!(serve.stop().success());
}

fn python_has_jsonschema() -> bool {
    Command::new("python3")
        .args(["-c", "import jsonschema"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The fixtures the schema script's calls need: a file for `artifact_open`, a linked
/// transcript for `context_read`, an external terminal for `terminal_external` (a
/// script that exits; tmux only) and serve's PATH with the fake `claude` first.
fn schema_fixtures(dirs: &Dirs) -> String {
    std::fs::write(dirs.project.join("notes.md"), "# Notes\n").unwrap();
    let state = dirs.project.join(".termsprawl");
    serve_harness::private_dirs(&state.join("links"));
    serve_harness::private_dirs(&state.join("transcripts"));
    std::fs::write(
        state.join("links/me--peer.json"),
        json!({"version": 1, "a": "me", "b": "peer"}).to_string(),
    )
    .unwrap();
    for (a, b) in [("me", "other"), ("other", "me")] {
        let link = json!({"version": 1, "a": a, "b": b, "agentMessages": true});
        let file = state.join(format!("links/{a}--{b}.json"));
        std::fs::write(&file, link.to_string()).unwrap();
        // Private, as `termsprawl-tools link` writes it (else it grants reading only).
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let transcript = dirs.root.join("peer.jsonl");
    let turn = json!({"type": "user", "message": {"content": "check the schemas"}});
    std::fs::write(&transcript, turn.to_string()).unwrap();
    std::fs::write(
        state.join("transcripts/peer.json"),
        json!({"version": 1, "path": transcript}).to_string(),
    )
    .unwrap();
    let terminal = dirs.root.join("fake-terminal");
    std::fs::write(&terminal, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&terminal, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"externalTerminal": {"command": [terminal, "{attach}"]}}).to_string(),
    )
    .unwrap();
    let fakes = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agents");
    format!(
        "{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn every_answer_conforms_to_its_output_schema_in_the_python_sdk() {
    let Some(sdk_version) = python_with_mcp() else {
        eprintln!("NOTICE: python3 with the `mcp` package is not installed; skipping the output schema test (pip install mcp)");
        return;
    };
    if !python_has_jsonschema() || !chromium_on_path() {
        eprintln!(
            "NOTICE: the output schema test needs Python's jsonschema and Chromium; skipping it"
        );
        return;
    }
    // terminal_external needs tmux; without it the other 43 operations are validated.
    let (backend, expected) = if tmux_installed() {
        ("tmux", 44)
    } else {
        eprintln!("NOTICE: tmux is not installed; terminal_external is not validated");
        ("pty", 43)
    };
    let dirs = Dirs::new("pyschema");
    let path = schema_fixtures(&dirs);
    let args = [
        "--terminals",
        backend,
        "--agent",
        "me",
        "--agent",
        "other",
        "--browser",
    ];
    let serve = Serve::start_with_env(&dirs, &args, &[("PATH", &path)]);
    let session = dirs.agent_tools().join("sessions/me.json");
    // A task for "me" to answer (it has no terminal: the task waits in its inbox).
    let sent = serve.ok(
        &dirs,
        "other",
        "agent_send",
        json!({"nodeId": "me", "text": "hi"}),
    );
    assert_eq!(sent["state"], json!("submitted"), "{sent}");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_output_schemas.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_termsprawlctl"))
        .arg(&session)
        .arg(&dirs.project)
        .arg(expected.to_string())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("--- Python SDK {sdk_version}: output schemas ---\n{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let summary: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| panic!("no RESULT line\n{stdout}"));
    let validated = summary["validated"].as_object().unwrap();
    assert_eq!(
        validated.len(),
        3,
        "three versions with structured results: {summary}"
    );
    for (run, count) in validated {
        assert_eq!(count.as_u64(), Some(expected), "{run}: {summary}");
    }
    assert!(serve.stop().success());
}
