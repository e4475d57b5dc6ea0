//! `termsprawl-tools browser-control on|off [--data DIR]`: a person switches agent
//! browser control while `serve` runs, without any agent token.
//!
//! The command writes `<data>/agent-tools/browser-control.json` (`{"enabled", "request"}`,
//! a private file: 0600, written atomically) and waits until the running `serve` echoes
//! its request id in `browser-control-applied.json`; so once the command returns, the
//! next call sees the new setting. `serve` looks at the file every [`WATCH_EVERY`] (one
//! `stat`). Turning control off fails browser work still queued with `Browser control
//! was disabled while waiting` (the server checks again at its turn). The switch lasts
//! while that `serve` runs: the next `serve` starts as `--browser` says, and only a
//! request written after it started changes it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::base::files::{private_json, read_private_json};
use crate::host::HostWorkspace;
use crate::runtime::Workspace;

/// How often `serve` looks for a new request.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long the command waits for `serve` to apply its request.
pub const APPLY_WAIT: Duration = Duration::from_secs(3);

/// The request file, under `<data>/agent-tools/`.
fn request_file(agent_tools: &Path) -> PathBuf {
    agent_tools.join("browser-control.json")
}

/// What `serve` writes once it applied a request.
fn applied_file(agent_tools: &Path) -> PathBuf {
    agent_tools.join("browser-control-applied.json")
}

/// Parses the words after `browser-control`: whether to enable, and the data directory.
pub fn parse(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<(bool, PathBuf), String> {
    let (switch, rest) = args.split_first().ok_or("missing on or off")?;
    let enabled = match switch.as_str() {
        "on" => true,
        "off" => false,
        other => return Err(format!("expected on or off, not {other}")),
    };
    let data = crate::host::options::parse_data("browser-control", rest, env)?;
    Ok((enabled, data))
}

/// Asks the `serve` of `data` to switch browser control, and waits until it has.
pub fn request(data: &Path, enabled: bool) -> Result<String, String> {
    let agent_tools = data.join("agent-tools");
    if !agent_tools.join("endpoint.json").exists() {
        return Err(format!(
            "no serve is running on {}; start it with --browser instead",
            data.display()
        ));
    }
    let id = crate::base::random_hex(16).map_err(|e| e.to_string())?;
    let file = request_file(&agent_tools);
    private_json(&file, &json!({ "enabled": enabled, "request": id }))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let deadline = Instant::now() + APPLY_WAIT;
    let state = if enabled { "on" } else { "off" };
    while Instant::now() < deadline {
        let applied = read_private_json(&applied_file(&agent_tools))
            .ok()
            .flatten();
        if applied
            .as_ref()
            .and_then(|a| a.get("request"))
            .and_then(Value::as_str)
            == Some(&id)
        {
            return Ok(format!("browser control is {state}"));
        }
        thread::sleep(WATCH_EVERY / 2);
    }
    Err(format!(
        "serve did not take the request within {} s; is it running on {}? (browser control will be {state} if it picks it up)",
        APPLY_WAIT.as_secs(),
        data.display()
    ))
}

/// Watches for requests on a thread until `stop` is set: each new one switches
/// `workspace`'s browser control and is acknowledged. Requests from before the watch
/// began are ignored.
pub fn watch(agent_tools: PathBuf, workspace: Arc<HostWorkspace>, stop: Arc<AtomicBool>) {
    let file = request_file(&agent_tools);
    // Each request is a new inode (written by rename), so a change always shows.
    let stamp = |file: &Path| {
        std::fs::symlink_metadata(file).ok().map(|m| {
            let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            (m.ino(), modified, m.len())
        })
    };
    let spawned = thread::Builder::new()
        .name("browser-control".into())
        .spawn(move || {
            let mut seen = stamp(&file);
            let mut applied_request = None::<String>;
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(WATCH_EVERY);
                let now = stamp(&file);
                if now == seen {
                    continue;
                }
                seen = now;
                let Ok(Some(asked)) = read_private_json(&file) else {
                    continue;
                };
                let (Some(enabled), Some(id)) = (
                    asked.get("enabled").and_then(Value::as_bool),
                    asked.get("request").and_then(Value::as_str),
                ) else {
                    continue;
                };
                if applied_request.as_deref() == Some(id) {
                    continue;
                }
                workspace.set_browser_control(enabled);
                let state = if enabled { "on" } else { "off" };
                eprintln!("termsprawl-tools: browser control switched {state}");
                let ack = json!({ "enabled": workspace.browser_control_enabled(), "request": id });
                if let Err(e) = private_json(&applied_file(&agent_tools), &ack) {
                    eprintln!("termsprawl-tools: cannot acknowledge browser-control: {e}");
                }
                applied_request = Some(id.to_string());
            }
        });
    if let Err(e) = spawned {
        eprintln!("termsprawl-tools: browser-control cannot be switched while serving: {e}");
    }
}
