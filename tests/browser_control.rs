//! `termsprawl-tools browser-control on|off` switches a running `serve`: the next call
//! sees the new setting (`session_info`, `browser_*` refused or not), no agent token is
//! involved, and with no `serve` running it says so.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::process::{Command, Output};

use serde_json::{json, Value};
use serve_harness::{Dirs, Serve};

fn browser_control(dirs: &Dirs, switch: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["browser-control", switch, "--data"])
        .arg(&dirs.data)
        .output()
        .unwrap()
}

fn browser_operations(info: &Value) -> usize {
    let operations = info["operations"].as_array().unwrap();
    operations
        .iter()
        .filter(|op| op.as_str().unwrap().starts_with("browser_"))
        .count()
}

#[test]
fn browser_control_switches_a_running_serve_for_the_next_call() {
    let dirs = Dirs::new("browser-control");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let info = serve.ok(&dirs, "me", "session_info", json!({}));
    assert_eq!(info["browserEnabled"], false);
    assert_eq!(browser_operations(&info), 0);

    let on = browser_control(&dirs, "on");
    let said = String::from_utf8_lossy(&on.stderr);
    assert!(on.status.success(), "{said}");
    assert!(said.contains("browser control is on"), "{said}");
    let info = serve.ok(&dirs, "me", "session_info", json!({}));
    assert_eq!(info["browserEnabled"], true, "the very next call sees it");
    let all_browser = termsprawl_tools::protocol::AGENT_TOOLS
        .iter()
        .filter(|tool| tool.name.starts_with("browser_"))
        .count();
    assert_eq!(browser_operations(&info), all_browser);
    // browser_list needs no Chromium: allowed now.
    serve.ok(&dirs, "me", "browser_list", json!({}));

    let off = browser_control(&dirs, "off");
    assert!(
        off.status.success(),
        "{}",
        String::from_utf8_lossy(&off.stderr)
    );
    let info = serve.ok(&dirs, "me", "session_info", json!({}));
    assert_eq!(info["browserEnabled"], false);
    let refused = serve.err(&dirs, "me", "browser_list", json!({}));
    assert!(
        refused.contains("Enable agent browser control"),
        "{refused}"
    );
    assert!(serve.stderr().contains("browser control switched off"));

    // The files it used are private.
    use std::os::unix::fs::PermissionsExt;
    for name in ["browser-control.json", "browser-control-applied.json"] {
        let mode = std::fs::metadata(dirs.agent_tools().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{name}");
    }
    assert!(serve.stop().success());

    // No serve: a clear error, exit 1; a bad switch: named, exit 2.
    let none = browser_control(&dirs, "on");
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no serve is running"));
    let maybe = browser_control(&dirs, "maybe");
    assert_eq!(maybe.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&maybe.stderr)
        .starts_with("termsprawl-tools browser-control: expected on or off, not maybe\n"));
}
