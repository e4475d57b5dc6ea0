//! `termsprawl-tools serve` as a process: the ready line, stdout discipline, the lock,
//! a corrupt canvas file, clean SIGTERM, restarts, and `termsprawlctl` against it.
//! (PTY backend; tmux restarts are in serve_tmux.rs.)
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

const PTY: &[&str] = &["--terminals", "pty"];

fn ctl(session_file: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_termsprawlctl"));
    command
        .env("TERMSPRAWL_SESSION_FILE", session_file)
        .env_remove("TERMSPRAWL_CTL_TIMEOUT_MS");
    command
}

#[test]
fn ready_line_has_every_field_and_stdout_nothing_else() {
    let dirs = Dirs::new("ready");
    let serve = Serve::start(
        &dirs,
        &[
            "--terminals",
            "pty",
            "--agent",
            "me",
            "--agent",
            "cc=claude-mcp",
            "--project-id",
            "proj1",
        ],
    );
    let ready = &serve.ready;
    let keys: Vec<&str> = ready
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "ready",
        "url",
        "instanceId",
        "directory",
        "projectId",
        "sessions",
        "launcher",
        "isolation",
        "viewUrl",
    ];
    expected.sort();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, expected, "{ready}");
    assert_eq!(ready["ready"], true);
    assert_eq!(
        ready["url"],
        format!("http://127.0.0.1:{}/call", serve.port)
    );
    assert_eq!(ready["instanceId"].as_str().unwrap().len(), 32);
    let view = ready["viewUrl"].as_str().unwrap();
    let key = view.rsplit_once("/#key=").unwrap().1;
    assert!(
        view.starts_with("http://127.0.0.1:") && key.len() == 64,
        "{view}"
    );
    assert_eq!(ready["directory"], json!(dirs.agent_tools()));
    assert_eq!(
        ready["launcher"],
        json!(dirs.agent_tools().join("termsprawlctl"))
    );
    assert_eq!(ready["projectId"], "proj1");
    assert_eq!(
        ready["sessions"],
        json!([
            {"nodeId": "me", "sessionFile": dirs.agent_tools().join("sessions/me.json")},
            {"nodeId": "cc", "sessionFile": dirs.agent_tools().join("sessions/cc.json")},
        ])
    );
    let endpoint: Value =
        serde_json::from_slice(&std::fs::read(dirs.agent_tools().join("endpoint.json")).unwrap())
            .unwrap();
    assert_eq!(endpoint["url"], ready["url"]);
    assert_eq!(endpoint["instanceId"], ready["instanceId"]);

    // The --agent statuses: external CLI fallback, or the adapter waiting for setup.
    assert_eq!(session(&dirs, "me")["status"]["state"], "cli-fallback");
    assert_eq!(session(&dirs, "me")["status"]["adapter"], "external");
    assert_eq!(session(&dirs, "cc")["status"]["state"], "needs-setup");
    assert_eq!(session(&dirs, "cc")["status"]["adapter"], "claude-mcp");
    let info = serve.ok(&dirs, "me", "session_info", json!({}));
    assert_eq!(info["nodeId"], "me");
    let guides = std::path::PathBuf::from(info["guidesDirectory"].as_str().unwrap());
    assert!(
        guides.join("termsprawl-terminal/SKILL.md").is_file(),
        "{info}"
    );
    assert_eq!(info["projectId"], "proj1");
    // A claude-mcp agent's first session_info connects it.
    serve.ok(&dirs, "cc", "session_info", json!({}));
    assert_eq!(session(&dirs, "cc")["status"]["state"], "connected");
    // The agent nodes are on the canvas.
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(node(&list, "me").unwrap()["data"]["agentId"], "external");
    assert_eq!(node(&list, "cc").unwrap()["data"]["agentId"], "claude-mcp");

    let launcher = dirs.agent_tools().join("termsprawlctl");
    let script = std::fs::read_to_string(&launcher).unwrap();
    let beside = std::path::Path::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .with_file_name("termsprawlctl");
    assert!(script.contains(beside.to_str().unwrap()), "{script}");

    assert!(serve.stop().success());
    assert!(serve_extra_stdout_is_empty(&dirs));
    // Without --agent the persisted session of the agent node still on the canvas is kept.
}

/// A second start prints exactly one line too (checked on a fresh process).
fn serve_extra_stdout_is_empty(dirs: &Dirs) -> bool {
    let serve = Serve::start(dirs, PTY);
    serve.ok(dirs, "me", "session_info", json!({}));
    std::thread::sleep(Duration::from_millis(100));
    let extra = serve.extra_stdout();
    assert!(serve.stop().success());
    extra.is_empty()
}

#[test]
fn a_second_serve_on_a_live_data_directory_is_refused() {
    let dirs = Dirs::new("lock");
    let first = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let (status, stdout, stderr) = serve_fails(&dirs, PTY);
    assert!(!status.success());
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("already using"), "{stderr}");
    // The first one is unaffected; SIGINT stops it as cleanly as SIGTERM.
    assert!(dirs.agent_tools().join("endpoint.json").exists());
    first.ok(&dirs, "me", "session_info", json!({}));
    assert!(first.stop_with(libc::SIGINT).success());
    assert!(!dirs.agent_tools().join("endpoint.json").exists());
    assert!(!dirs.agent_tools().join("server.lock").exists());
}

#[test]
fn a_corrupt_project_file_is_named_and_left_untouched() {
    let dirs = Dirs::new("corrupt");
    private_dirs(&dirs.project.join(".termsprawl"));
    let garbage = b"{\"nodes\": [ this is not json";
    std::fs::write(dirs.project_file(), garbage).unwrap();
    let (status, stdout, stderr) = serve_fails(&dirs, &["--terminals", "pty", "--agent", "me"]);
    assert!(!status.success());
    assert!(stdout.is_empty());
    assert!(
        stderr.contains(dirs.project_file().to_str().unwrap()),
        "{stderr}"
    );
    assert_eq!(std::fs::read(dirs.project_file()).unwrap(), garbage);
    assert!(!dirs.agent_tools().join("server.lock").exists());
    assert!(!dirs.agent_tools().join("endpoint.json").exists());
}

#[test]
fn usage_errors_exit_2() {
    let dirs = Dirs::new("usage");
    let (status, _, stderr) = serve_fails(&dirs, &["--terminals", "screen"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("auto, tmux or pty"), "{stderr}");
    let (status, _, stderr) = serve_fails(&dirs, &["--agent", "bad id!"]);
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("Invalid agent node id"), "{stderr}");
    let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["stop-terminals", "--project", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sigterm_removes_endpoint_and_lock_and_ends_every_terminal() {
    let dirs = Dirs::new("sigterm");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let mut shells = Vec::new();
    for _ in 0..2 {
        let opened = serve.ok(&dirs, "me", "terminal_open", json!({}));
        let id = opened["nodeId"].as_str().unwrap().to_string();
        // A background job in its own process group must end too.
        serve.ok(
            &dirs,
            "me",
            "terminal_submit",
            json!({"nodeId": id, "command": "sleep 300 &"}),
        );
        shells.push(id);
    }
    let children = children(serve.pid());
    assert_eq!(children.len(), 2, "one shell per terminal: {children:?}");
    poll("the background sleeps", Duration::from_secs(5), || {
        children
            .iter()
            .all(|&sid| session_members(sid).len() >= 2)
            .then_some(())
    });
    assert!(dirs.agent_tools().join("server.lock").exists());
    let status = serve.stop();
    assert!(status.success(), "{status:?}");
    assert!(!dirs.agent_tools().join("endpoint.json").exists());
    assert!(!dirs.agent_tools().join("server.lock").exists());
    for sid in children {
        poll(
            &format!("session {sid} to have no processes left"),
            Duration::from_secs(3),
            || session_members(sid).is_empty().then_some(()),
        );
    }
    // Sessions (tokens) stay for the next start.
    assert!(dirs.agent_tools().join("sessions/me.json").exists());
}

#[test]
fn restart_keeps_canvas_tokens_and_node_ids_and_moves_the_port() {
    let dirs = Dirs::new("restart");
    let first = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let project_id = first.project_id();
    let token = token(&dirs, "me");
    let sticky = first.ok(&dirs, "me", "sticky_open", json!({"text": "remember"}));
    let term = first.ok(&dirs, "me", "terminal_open", json!({"title": "build"}));
    first.ok(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": sticky["nodeId"], "x": 5, "y": 6}),
    );
    let before = first.ok(&dirs, "me", "canvas_list", json!({}));
    let old_port = first.port;
    assert!(first.stop().success());

    let second = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    assert_eq!(second.project_id(), project_id);
    assert_ne!(second.port, old_port);
    assert_eq!(serve_harness::token(&dirs, "me"), token);
    let after = second.ok(&dirs, "me", "canvas_list", json!({}));
    let strip = |list: &Value| {
        let mut list = list.clone();
        for node in list.as_array_mut().unwrap() {
            node.as_object_mut().unwrap().remove("session");
        }
        list
    };
    assert_eq!(strip(&after), strip(&before));
    assert_eq!(
        node(&after, sticky["nodeId"].as_str().unwrap()).unwrap()["position"],
        json!({"x": 5.0, "y": 6.0})
    );
    // The shell node got a fresh shell that works.
    let id = term["nodeId"].as_str().unwrap();
    assert_eq!(node(&after, id).unwrap()["session"]["live"], true);
    second.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": id, "command": "echo again-$((40+2))"}),
    );
    poll(
        "the restarted shell's output",
        Duration::from_secs(5),
        || {
            let read = second.ok(&dirs, "me", "terminal_read", json!({"nodeId": id}));
            read["output"]
                .as_str()
                .unwrap()
                .contains("again-42")
                .then_some(())
        },
    );
    // The old token still works against the new port.
    let (status, body) = second.call_token(&token, "session_info", json!({}));
    assert_eq!((status, body["ok"].clone()), (200, json!(true)));
    assert!(second.stop().success());
}

#[test]
fn termsprawlctl_calls_the_real_serve_and_survives_a_restart() {
    let dirs = Dirs::new("ctl");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let file = serve.ready["sessions"][0]["sessionFile"]
        .as_str()
        .unwrap()
        .to_string();
    let run = |args: &[&str]| {
        let out = ctl(&file).args(args).output().unwrap();
        let value: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), value)
    };
    let (code, info) = run(&["call", "session_info"]);
    assert_eq!(code, Some(0), "{info}");
    assert_eq!(info["value"]["nodeId"], "me");
    let (code, opened) = run(&["call", "terminal_open", r#"{"title":"t"}"#]);
    assert_eq!(code, Some(0), "{opened}");
    // Through the installed launcher, as an agent calls it.
    let launcher = dirs.agent_tools().join("termsprawlctl");
    let out = Command::new(&launcher)
        .env("TERMSPRAWL_SESSION_FILE", &file)
        .args(["call", "canvas_list"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let old_port = serve.port;
    assert!(serve.stop().success());
    let (code, _) = run(&["call", "session_info"]);
    assert_eq!(code, Some(2), "no host: exit 2");

    let again = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    assert_ne!(again.port, old_port);
    let (code, info) = run(&["call", "session_info"]);
    assert_eq!(code, Some(0), "{info}");
    assert_eq!(info["value"]["instanceId"], again.ready["instanceId"]);
    let (code, refused) = run(&["call", "canvas_select", r#"{"nodeIds":["nope"]}"#]);
    assert_eq!(code, Some(1), "{refused}");
    assert!(again.stop().success());
}

#[test]
fn stop_terminals_without_a_server_is_fine() {
    let dirs = Dirs::new("stopnone");
    let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg("stop-terminals")
        .arg("--data")
        .arg(&dirs.data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_canvas_warning_quotes_the_file_escaped_on_stderr() {
    let dirs = Dirs::new("warning-escaped");
    private_dirs(&dirs.project.join(".termsprawl"));
    // A node whose type is a cursor move, an erase, a window title, a C1 CSI and a bidi
    // override: serve warns about it, quoting the type.
    let hostile = "g\r\x1b[1A\x1b[2K\x1b]0;x\x07\u{9b}\u{202e}";
    let canvas = json!({ "nodes": [
        { "id": "n1", "type": hostile, "position": { "x": 0, "y": 0 },
          "size": { "width": 100, "height": 100 }, "data": { "text": "t" } }
    ] });
    std::fs::write(dirs.project_file(), canvas.to_string()).unwrap();
    let serve = Serve::start(&dirs, PTY);
    let stderr = serve.stderr();
    assert!(serve.stop().success());
    let raw = stderr
        .chars()
        .find(|c| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c));
    assert_eq!(raw, None, "a raw control character: {stderr:?}");
    assert!(
        stderr.contains(r"g\r\x1b[1A\x1b[2K\x1b]0;x\x07\x9b\u202e"),
        "{stderr}"
    );
}

/// `cargo run --bin termsprawl-tools` builds that binary alone: its `serve` points the
/// agents' launcher at itself, and it answers termsprawlctl's commands, so an agent's
/// `call` works without `termsprawlctl` beside it.
#[test]
fn serve_built_alone_gives_agents_a_working_launcher() {
    let dirs = Dirs::new("built-alone");
    let alone = dirs.root.join("bin");
    std::fs::create_dir_all(&alone).unwrap();
    let exe = alone.join("termsprawl-tools");
    std::fs::copy(env!("CARGO_BIN_EXE_termsprawl-tools"), &exe).unwrap();
    assert!(!alone.join("termsprawlctl").exists());
    let command = serve_command(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let mut alone_command = Command::new(&exe);
    alone_command
        .args(command.get_args())
        .env("SHELL", "/bin/sh")
        .env_remove("TMUX")
        .stdin(std::process::Stdio::null());
    let serve = Serve::start_command(alone_command);
    let launcher = dirs.agent_tools().join("termsprawlctl");
    let session = serve.ready["sessions"][0]["sessionFile"].as_str().unwrap();
    let output = Command::new(&launcher)
        .args(["--session", session, "call", "session_info"])
        .output()
        .unwrap();
    let answer: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)));
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert_eq!(answer["value"]["nodeId"], json!("me"), "{answer}");
    assert!(output.status.success());
    assert!(serve.stop().success());
}
