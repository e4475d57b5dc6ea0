//! A real MCP client no one here wrote: the official Python SDK's stdio client drives
//! `termsprawlctl --session FILE mcp` (tests/mcp_sdk_client.py), against the test host,
//! for every protocol version the SDK can be made to speak. Skipped with a notice when
//! python3 or the `mcp` package is missing (CI installs it with `pip install mcp`).

mod serve_harness;
mod support;

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_harness::{Dirs, Serve};
use support::{Behaviour, DataDir, TestHost, TOKEN};

fn python_with_mcp() -> Option<String> {
    let probe = Command::new("python3")
        .args([
            "-c",
            "import importlib.metadata as m, mcp.client; print(m.version('mcp'))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    probe
        .status
        .success()
        .then(|| String::from_utf8_lossy(&probe.stdout).trim().to_string())
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
