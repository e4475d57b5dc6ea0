//! `serve` when a terminal's program ends by itself, on both backends (tmux where it is
//! installed, else a notice; PTYs always): the node keeps its last screen and says how the
//! program ended (`exit 3`, `kill -9 $$`, a program printing a last line), writes into it
//! are refused with what to do instead, closing it removes it, a restart (also after the
//! tmux server is gone) still shows it ended, and no child of serve is left a zombie.
//! Agents: one whose CLI (`tests/fake_agents/claude`) prints an error and exits before
//! its MCP client connects gets needs-setup with a reason quoting its screen; one that
//! exits after connecting is revoked with a reason.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

const WAIT: Duration = Duration::from_secs(10);

/// The backends to run on: PTYs always, tmux where it is installed.
fn backends(test: &str) -> Vec<&'static str> {
    if tmux_installed() {
        vec!["pty", "tmux"]
    } else {
        eprintln!("tmux is not installed: {test} runs on the PTY backend only");
        vec!["pty"]
    }
}

fn args(backend: &str) -> Vec<&str> {
    vec!["--terminals", backend, "--agent", "me"]
}

fn open_terminal(serve: &Serve, dirs: &Dirs) -> String {
    let opened = serve.ok(dirs, "me", "terminal_open", json!({}));
    opened["nodeId"].as_str().unwrap().to_string()
}

fn submit(serve: &Serve, dirs: &Dirs, node: &str, command: &str) {
    serve.ok(
        dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": node, "command": command}),
    );
}

fn read(serve: &Serve, dirs: &Dirs, node: &str) -> String {
    let value = serve.ok(dirs, "me", "terminal_read", json!({"nodeId": node}));
    value["output"].as_str().unwrap().to_string()
}

/// `canvas_list`'s `session` of `node`.
fn session_of(serve: &Serve, dirs: &Dirs, node: &str) -> Value {
    let listed = serve.ok(dirs, "me", "canvas_list", json!({}));
    serve_harness::node(&listed, node).unwrap_or_else(|| panic!("{node} not listed: {listed}"))
        ["session"]
        .clone()
}

/// Waits until `node`'s session says it ended; returns that session.
fn wait_ended(serve: &Serve, dirs: &Dirs, node: &str) -> Value {
    poll(&format!("{node} to end"), WAIT, || {
        let session = session_of(serve, dirs, node);
        session.get("ended").is_some().then_some(session)
    })
}

/// Checks the shape the terminals guide documents: `{backend, live: false, ended, endedAt}`
/// and nothing else, `endedAt` an RFC 3339 UTC time.
fn assert_ended(session: &Value, backend: &str, ended: Value) {
    let at = session["endedAt"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        session,
        &json!({"backend": backend, "live": false, "ended": ended, "endedAt": at}),
    );
    let shape = at.len() == 24
        && at.ends_with('Z')
        && at.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            19 => c == '.',
            23 => c == 'Z',
            _ => c.is_ascii_digit(),
        });
    assert!(shape && at.starts_with("20"), "endedAt {at:?}");
}

fn ended_error(how: &str) -> String {
    format!("The program in this terminal has ended ({how}). Read its last screen with terminal_read, then close it or open a new terminal.")
}

/// Children of `pid` that are zombies (exited, not reaped).
fn zombie_children(pid: u32) -> Vec<u32> {
    children(pid)
        .into_iter()
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.split_whitespace().next() == Some("Z"))
        })
        .collect()
}

fn project_file(dirs: &Dirs) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dirs.project_file()).unwrap()).unwrap()
}

#[test]
fn an_ended_shell_keeps_its_last_screen_says_how_it_ended_and_survives_a_restart() {
    for backend in backends("an_ended_shell_keeps_its_last_screen") {
        let dirs = Dirs::new(&format!("end-{backend}"));
        let serve = Serve::start(&dirs, &args(backend));

        let exits = open_terminal(&serve, &dirs);
        submit(&serve, &dirs, &exits, "echo before-exit; exit 3");
        assert_ended(
            &wait_ended(&serve, &dirs, &exits),
            backend,
            json!({"status": 3}),
        );
        let screen = read(&serve, &dirs, &exits);
        assert!(
            screen.ends_with("\nbefore-exit\n[process exited with status 3]"),
            "{backend}: {screen:?}"
        );
        let refused = ended_error("exit status 3");
        for (operation, args) in [
            (
                "terminal_submit",
                json!({"nodeId": exits, "command": "echo again"}),
            ),
            ("terminal_input", json!({"nodeId": exits, "text": "x"})),
            ("terminal_interrupt", json!({"nodeId": exits})),
        ] {
            assert_eq!(
                serve.err(&dirs, "me", operation, args),
                refused,
                "{backend} {operation}"
            );
        }

        let killed = open_terminal(&serve, &dirs);
        submit(&serve, &dirs, &killed, "kill -9 $$");
        assert_ended(
            &wait_ended(&serve, &dirs, &killed),
            backend,
            json!({"signal": 9}),
        );
        let screen = read(&serve, &dirs, &killed);
        assert!(
            screen.ends_with("\n[process killed by signal 9]"),
            "{backend}: {screen:?}"
        );
        assert_eq!(
            serve.err(
                &dirs,
                "me",
                "terminal_input",
                json!({"nodeId": killed, "text": "x"})
            ),
            ended_error("killed by signal 9")
        );

        // A program of its own that prints a last message, then exits (0).
        let program = open_terminal(&serve, &dirs);
        submit(
            &serve,
            &dirs,
            &program,
            "exec sh -c 'printf \"report: 42 files\\n\"'",
        );
        assert_ended(
            &wait_ended(&serve, &dirs, &program),
            backend,
            json!({"status": 0}),
        );
        let screen = read(&serve, &dirs, &program);
        assert!(
            screen.ends_with("\nreport: 42 files\n[process exited with status 0]"),
            "{backend}: {screen:?}"
        );

        // Still running next to them: untouched.
        let running = open_terminal(&serve, &dirs);
        assert_eq!(session_of(&serve, &dirs, &running)["live"], true);
        assert!(
            zombie_children(serve.pid()).is_empty(),
            "{backend}: zombies"
        );

        // Closing an ended node removes it (and what was kept of it).
        serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": exits}));
        let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
        assert!(serve_harness::node(&listed, &exits).is_none(), "{listed}");
        assert_eq!(
            serve.err(&dirs, "me", "terminal_read", json!({"nodeId": exits})),
            format!(
                "Local terminal not found in this project: {exits} (canvas_list shows the terminals)"
            )
        );
        let kept = project_file(&dirs)["endedTerminals"].clone();
        assert!(
            kept.get(&exits).is_none() && kept.get(&killed).is_some(),
            "{kept}"
        );

        // A restart shows the ended ones as they were; with tmux, also once its server
        // (and the dead panes in it) is gone: the screen kept with the canvas is read.
        let before = (
            session_of(&serve, &dirs, &killed),
            read(&serve, &dirs, &killed),
        );
        assert!(serve.stop().success());
        let mut restarts = vec![false];
        if backend == "tmux" {
            restarts.push(true);
        }
        for stop_tmux in restarts {
            if stop_tmux {
                let stopped = std::process::Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
                    .args(["stop-terminals", "--data"])
                    .arg(&dirs.data)
                    .status()
                    .unwrap();
                assert!(stopped.success() && !dirs.tmux_running());
            }
            let serve = Serve::start(&dirs, &args(backend));
            assert_eq!(
                (
                    session_of(&serve, &dirs, &killed),
                    read(&serve, &dirs, &killed)
                ),
                before,
                "{backend}, tmux server stopped: {stop_tmux}"
            );
            assert_eq!(
                serve.err(
                    &dirs,
                    "me",
                    "terminal_submit",
                    json!({"nodeId": program, "command": "x"})
                ),
                ended_error("exit status 0")
            );
            assert!(serve.stop().success());
        }
        // And closing it after a restart forgets it for good.
        let serve = Serve::start(&dirs, &args(backend));
        serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": killed}));
        assert!(project_file(&dirs)["endedTerminals"].get(&killed).is_none());
        assert!(serve.stop().success());
    }
}

/// A folder whose `claude` is `tests/fake_agents/claude`, and PATH with it first.
fn fake_claude_path() -> String {
    let fakes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agents");
    format!(
        "{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn agent_status_of(serve: &Serve, dirs: &Dirs, agent: &str) -> Option<Value> {
    let value = serve.ok(dirs, "me", "agent_status", json!({}));
    value["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["nodeId"] == agent)
        .map(|a| a["status"].clone())
}

#[test]
fn an_agent_that_exits_before_connecting_says_why_in_its_status() {
    let path = fake_claude_path();
    for backend in backends("an_agent_that_exits_before_connecting") {
        let dirs = Dirs::new(&format!("noconn-{backend}"));
        let serve = Serve::start_with_env(&dirs, &args(backend), &[("PATH", &path)]);
        let launched = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "claude"}));
        let agent = launched["nodeId"].as_str().unwrap().to_string();
        assert_ended(
            &wait_ended(&serve, &dirs, &agent),
            backend,
            json!({"status": 1}),
        );
        let expected = json!({
            "state": "needs-setup",
            "adapter": "claude-mcp",
            "version": "2.1.3 (Claude Code)",
            "reason": "The agent exited (status 1) before connecting: \"Welcome to Claude Code / Error: Unable to connect to Anthropic services / Failed to connect to api.anthropic.com: ERR_BAD_REQUEST\"",
        });
        let status = poll("the exit in agent_status", WAIT, || {
            agent_status_of(&serve, &dirs, &agent).filter(|s| {
                s["reason"] != Value::Null
                    && s["reason"]
                        .as_str()
                        .unwrap()
                        .starts_with("The agent exited")
            })
        });
        assert_eq!(status, expected, "{backend}");
        // Its own session_info says the same, and does not mark it connected.
        let (code, info) = serve.call_token(&token(&dirs, &agent), "session_info", json!({}));
        assert_eq!(code, 200);
        assert_eq!(info["value"]["status"], expected, "{backend}");
        assert_eq!(
            agent_status_of(&serve, &dirs, &agent),
            Some(expected.clone())
        );
        let screen = read(&serve, &dirs, &agent);
        assert!(
            screen.contains("Error: Unable to connect to Anthropic services\n")
                && screen.ends_with("\n[process exited with status 1]"),
            "{backend}: {screen:?}"
        );
        assert!(
            zombie_children(serve.pid()).is_empty(),
            "{backend}: zombies"
        );

        // After a restart the node and its status still say so.
        assert!(serve.stop().success());
        let serve = Serve::start_with_env(&dirs, &args(backend), &[("PATH", &path)]);
        assert_ended(
            &session_of(&serve, &dirs, &agent),
            backend,
            json!({"status": 1}),
        );
        assert_eq!(
            agent_status_of(&serve, &dirs, &agent),
            Some(expected),
            "{backend}"
        );
        serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": agent}));
        assert_eq!(agent_status_of(&serve, &dirs, &agent), None);
        assert!(serve.stop().success());
    }
}

#[test]
fn an_agent_that_exits_after_connecting_is_revoked_with_a_reason() {
    let path = fake_claude_path();
    for backend in backends("an_agent_that_exits_after_connecting") {
        let dirs = Dirs::new(&format!("conn-{backend}"));
        let env = [("PATH", path.as_str()), ("FAKE_CLAUDE_CONNECT", "1")];
        let serve = Serve::start_with_env(&dirs, &args(backend), &env);
        let launched = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "claude"}));
        let agent = launched["nodeId"].as_str().unwrap().to_string();
        assert_ended(
            &wait_ended(&serve, &dirs, &agent),
            backend,
            json!({"status": 0}),
        );
        let said = format!("agent {agent}: connected");
        let revoked = format!("agent {agent}: needs-setup (The agent exited (status 0))");
        poll("the revocation", WAIT, || {
            let log = serve.stderr();
            log.find(&revoked)
                .filter(|at| log.find(&said).is_some_and(|c| c < *at))
        });
        let session_file = dirs.agent_tools().join(format!("sessions/{agent}.json"));
        assert!(!session_file.exists());
        assert_eq!(agent_status_of(&serve, &dirs, &agent), None);
        let screen = read(&serve, &dirs, &agent);
        assert!(
            screen.ends_with("connected; nothing to do\n[process exited with status 0]"),
            "{backend}: {screen:?}"
        );
        assert!(
            zombie_children(serve.pid()).is_empty(),
            "{backend}: zombies"
        );
        assert!(serve.stop().success());
    }
}
