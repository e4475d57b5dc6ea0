//! Terminals through the real `serve` on the built-in PTY backend: open, submit, read,
//! interrupt, close; the own-node rule; revocation when another agent closes your node;
//! inert output; external attach needing tmux.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

fn read(serve: &Serve, dirs: &Dirs, node: &str) -> String {
    let value = serve.ok(dirs, "me", "terminal_read", json!({"nodeId": node}));
    value["output"].as_str().unwrap().to_string()
}

fn wait_for_output(serve: &Serve, dirs: &Dirs, node: &str, wanted: &str) -> String {
    poll(
        &format!("{wanted:?} in {node}"),
        Duration::from_secs(5),
        || {
            let output = read(serve, dirs, node);
            output.contains(wanted).then_some(output)
        },
    )
}

#[test]
fn open_submit_read_interrupt_close() {
    let dirs = Dirs::new("term");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let opened = serve.ok(&dirs, "me", "terminal_open", json!({"title": "work"}));
    let term = opened["nodeId"].as_str().unwrap().to_string();
    let shell = *children(serve.pid())
        .first()
        .expect("the shell is serve's child");
    // It starts in the project folder, without the identity serve itself inherited.
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo marker; pwd; echo \"[$TERMSPRAWL_SESSION_FILE]\"; echo end-$((1+1))"}),
    );
    // Wait for the last line: the shell writes each command's output separately.
    let output = wait_for_output(&serve, &dirs, &term, "end-2");
    assert!(output.contains("marker\n"), "{output}");
    assert!(output.contains(dirs.project.to_str().unwrap()), "{output}");
    // Not serve's inherited one: the session of the agent that opened it, its hands.
    let own = dirs.agent_tools().join("sessions/me.json");
    assert!(
        output.contains(&format!("\n[{}]", own.display())),
        "{output}"
    );

    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "sleep 30"}),
    );
    // `sleep` itself, not a process the shell's prompt hooks may start meanwhile.
    let is_sleep = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
    };
    poll("sleep to run", Duration::from_secs(5), || {
        session_members(shell).iter().any(is_sleep).then_some(())
    });
    serve.ok(&dirs, "me", "terminal_interrupt", json!({"nodeId": term}));
    poll("sleep to end", Duration::from_secs(5), || {
        (!session_members(shell).iter().any(is_sleep)).then_some(())
    });
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo after-$((1+1))"}),
    );
    wait_for_output(&serve, &dirs, &term, "after-2");

    // terminal_input types without Enter; maxChars bounds the read.
    serve.ok(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "echo typed"}),
    );
    serve.ok(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "-in\r"}),
    );
    wait_for_output(&serve, &dirs, &term, "\ntyped-in");
    let short = serve.ok(
        &dirs,
        "me",
        "terminal_read",
        json!({"nodeId": term, "maxChars": 5}),
    );
    assert_eq!(short["output"].as_str().unwrap().chars().count(), 5);

    let closed = serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": term}));
    assert_eq!(closed["closed"], true);
    poll("the shell to be gone", Duration::from_secs(3), || {
        session_members(shell).is_empty().then_some(())
    });
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert!(node(&list, &term).is_none());
    for (operation, args) in [
        ("terminal_read", json!({"nodeId": term})),
        ("terminal_submit", json!({"nodeId": term, "command": "ls"})),
        ("terminal_close", json!({"nodeId": term})),
    ] {
        let error = serve.err(&dirs, "me", operation, args);
        assert!(error.contains("not found"), "{operation}: {error}");
    }
    // Only terminals can be closed; nothing changes.
    let sticky = serve.ok(&dirs, "me", "sticky_open", json!({"text": "x"}));
    let error = serve.err(
        &dirs,
        "me",
        "terminal_close",
        json!({"nodeId": sticky["nodeId"]}),
    );
    assert!(error.contains("not found"), "{error}");
    assert!(serve.stop().success());
}

#[test]
fn output_is_inert_text() {
    let dirs = Dirs::new("inert");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "printf '\\033[31mred\\033[0m \\033]0;title\\007ab\\rX\\n'"}),
    );
    // Colours and the title sequence are gone; the carriage return overwrote the line start.
    let output = wait_for_output(&serve, &dirs, &term, "\nXed ab\n");
    assert!(
        output
            .chars()
            .all(|c| c == '\n' || c == '\t' || !c.is_control()),
        "{output:?}"
    );
    assert!(serve.stop().success());
}

#[test]
fn an_agent_cannot_write_into_its_own_node() {
    let dirs = Dirs::new("own");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    for (operation, args) in [
        ("terminal_submit", json!({"nodeId": "me", "command": "ls"})),
        ("terminal_input", json!({"nodeId": "me", "text": "x"})),
        ("terminal_interrupt", json!({"nodeId": "me"})),
        ("terminal_close", json!({"nodeId": "me"})),
    ] {
        let error = serve.err(&dirs, "me", operation, args);
        assert!(error.contains("your own agent"), "{operation}: {error}");
    }
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert!(node(&list, "me").is_some());
    assert!(serve.stop().success());
}

#[test]
fn closing_another_agents_node_revokes_it() {
    let dirs = Dirs::new("revoke");
    let serve = Serve::start(
        &dirs,
        &["--terminals", "pty", "--agent", "a", "--agent", "b"],
    );
    let a_token = token(&dirs, "a");
    let (status, _) = serve.call_token(&a_token, "session_info", json!({}));
    assert_eq!(status, 200);
    serve.ok(&dirs, "b", "terminal_close", json!({"nodeId": "a"}));
    let (status, body) = serve.call_token(&a_token, "session_info", json!({}));
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"ok": false, "error": "Unknown or revoked session"})
    );
    assert!(!dirs.agent_tools().join("sessions/a.json").exists());
    let list = serve.ok(&dirs, "b", "canvas_list", json!({}));
    assert!(node(&list, "a").is_none());
    // A restart without --agent a does not bring it back.
    assert!(serve.stop().success());
    let serve = Serve::start(&dirs, &["--terminals", "pty"]);
    let (status, _) = serve.call_token(&a_token, "session_info", json!({}));
    assert_eq!(status, 401);
    serve.ok(&dirs, "b", "session_info", json!({}));
    assert!(serve.stop().success());
}

#[test]
fn external_attach_needs_tmux() {
    let dirs = Dirs::new("extpty");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"].clone();
    let error = serve.err(&dirs, "me", "terminal_external", json!({"nodeId": term}));
    assert!(error.contains("needs the tmux backend"), "{error}");
    assert!(serve.stop().success());
}

#[test]
fn ten_terminals_at_once() {
    let dirs = Dirs::new("ten");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let ids: Vec<Value> = (0..10)
        .map(|_| serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"].clone())
        .collect();
    for (i, id) in ids.iter().enumerate() {
        serve.ok(
            &dirs,
            "me",
            "terminal_submit",
            json!({"nodeId": id, "command": format!("echo n{i}-$((i=7*6))")}),
        );
    }
    for (i, id) in ids.iter().enumerate() {
        wait_for_output(&serve, &dirs, id.as_str().unwrap(), &format!("n{i}-42"));
    }
    assert_eq!(children(serve.pid()).len(), 10);
    assert!(serve.stop().success());
}

#[test]
fn terminal_queries_get_no_answer_on_the_pty_backend_either() {
    let dirs = Dirs::new("termq");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let opened = serve.ok(&dirs, "me", "terminal_open", json!({}));
    let term = opened["nodeId"].as_str().unwrap().to_string();
    // Device attributes, status, cursor position, background colour, a mode, the version.
    let queries =
        r"printf '\033[c\033[>c\033[5n\033[6n\033]11;?\007\033[?2004$p\033[>q'; echo queries-sent";
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": queries}),
    );
    wait_for_output(&serve, &dirs, &term, "\nqueries-sent");
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo ok-$((40+2))-marker"}),
    );
    let screen = wait_for_output(&serve, &dirs, &term, "\nok-42-marker");
    let typed = screen
        .lines()
        .find(|line| line.contains("echo ok-$((40+2))-marker"))
        .unwrap();
    assert!(
        typed.ends_with("$ echo ok-$((40+2))-marker")
            || typed.ends_with("# echo ok-$((40+2))-marker"),
        "something was typed before the command: {typed:?} in {screen:?}"
    );
    assert!(!screen.contains("command not found"), "{screen:?}");
    assert!(serve.stop().success());
}
