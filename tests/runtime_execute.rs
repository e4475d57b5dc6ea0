//! `execute` branch by branch, against the fake host: the live-state checks, context,
//! artifacts, agent launch and the terminal rules (including the own-terminal rule).
#![deny(unsafe_code)]

mod fakes;

use std::fs;
use std::os::unix::fs::symlink;

use fakes::{run, script, who, Rig, PROJECT};
use serde_json::json;
use termsprawl_tools::protocol::{ToolIdentity, ToolRequest};

#[test]
fn live_state_is_checked_first() {
    let rig = Rig::new("exec-live", &["a"]);
    let elsewhere = ToolIdentity {
        node_id: "a".into(),
        project_id: "nope".into(),
    };
    let request = ToolRequest {
        operation: "canvas_list".into(),
        args: Default::default(),
    };
    assert_eq!(
        rig.runtime.execute(&elsewhere, &request),
        Err("Local project not found".into())
    );
    assert_eq!(
        run(&rig, "ghost", "canvas_list", json!({})),
        Err("Agent node is no longer on this canvas".into())
    );
    assert!(
        rig.runtime.valid(&who("a"))
            && !rig.runtime.valid(&who("ghost"))
            && !rig.runtime.valid(&elsewhere)
    );
    rig.workspace
        .projects
        .lock()
        .unwrap()
        .get_mut(PROJECT)
        .unwrap()
        .remote = true;
    assert_eq!(
        run(&rig, "a", "canvas_list", json!({})),
        Err("Local project not found".into())
    );
    assert!(
        !rig.runtime.valid(&who("a")),
        "remote projects are never valid"
    );
    assert_eq!(
        rig.canvas.sent_count("canvas_list"),
        1,
        "remote is refused before the canvas is asked"
    );
}

#[test]
fn context_read_needs_a_folder_and_reads_links() {
    let rig = Rig::new("exec-context", &["a", "b"]);
    let state = rig.project_dir.join(".termsprawl");
    private_dirs(&state.join("links"));
    private_dirs(&state.join("transcripts"));
    fs::write(
        state.join("links/a--b.json"),
        json!({"version": 1, "a": "a", "b": "b"}).to_string(),
    )
    .unwrap();
    fs::write(state.join("links/junk.json"), "{{{").unwrap();
    let log = rig.dir.join("b.jsonl");
    fs::write(
        &log,
        format!(
            "{}\nnot json\n",
            json!({"type": "assistant", "message": {"content": "hi from b"}})
        ),
    )
    .unwrap();
    fs::write(
        state.join("transcripts/b.json"),
        json!({"version": 1, "path": log}).to_string(),
    )
    .unwrap();
    fs::write(state.join("transcripts/a.json"), "garbage").unwrap();
    let value = run(&rig, "a", "context_read", json!({})).unwrap();
    assert_eq!(value["reader"], "claude-jsonl");
    assert!(
        value["text"]
            .as_str()
            .unwrap()
            .ends_with("assistant: hi from b"),
        "{value}"
    );
    let value = run(&rig, "b", "context_read", json!({})).unwrap();
    assert!(
        value["reason"]
            .as_str()
            .unwrap()
            .contains("no readable transcript"),
        "{value}"
    );
    rig.workspace
        .projects
        .lock()
        .unwrap()
        .get_mut(PROJECT)
        .unwrap()
        .cwd = None;
    assert!(run(&rig, "a", "context_read", json!({}))
        .unwrap_err()
        .contains("folder project"));
}

#[test]
fn artifact_open_sends_the_real_path_and_refuses_escapes() {
    let rig = Rig::new("exec-artifact", &["a"]);
    let project = &rig.project_dir;
    fs::create_dir_all(project.join("src")).unwrap();
    fs::write(project.join("src/lib.rs"), "// x").unwrap();
    fs::write(rig.dir.join("secret.txt"), "s").unwrap();
    symlink(rig.dir.join("secret.txt"), project.join("leak.txt")).unwrap();
    symlink(project.join("src/lib.rs"), project.join("alias.rs")).unwrap();
    fs::write(project.join("song.mp3"), b"\0").unwrap();
    fs::write(project.join("pic.png"), b"\0").unwrap();
    let path = |p: &str| project.join(p).to_string_lossy().into_owned();
    let opened = run(
        &rig,
        "a",
        "artifact_open",
        json!({"path": path("alias.rs"), "view": "diff"}),
    )
    .unwrap();
    let real = project.join("src/lib.rs").canonicalize().unwrap();
    assert_eq!(
        opened["args"]["path"],
        real.to_string_lossy().as_ref(),
        "the owner gets the real path"
    );
    assert_eq!(opened["args"]["view"], "diff");
    let dotdot = format!("{}/src/../../secret.txt", project.display());
    for (args, needle) in [
        (
            json!({"path": path("leak.txt")}),
            "inside the project folder",
        ),
        (json!({"path": dotdot}), "inside the project folder"),
        (json!({"path": "src/lib.rs"}), "must be absolute"),
        (json!({"path": path("song.mp3")}), "browser preview"),
        (
            json!({"path": path("pic.png"), "view": "diff"}),
            "Images cannot be shown as a diff",
        ),
    ] {
        let error = run(&rig, "a", "artifact_open", args.clone()).unwrap_err();
        assert!(error.contains(needle), "{args}: {error}");
    }
    assert_eq!(
        rig.canvas.sent_count("artifact_open"),
        1,
        "refused artifacts never reach the canvas"
    );
}

#[test]
fn agent_launch_requires_an_installed_agent_and_waits_for_its_terminal() {
    let rig = Rig::new("exec-launch", &["a"]);
    let error = run(&rig, "a", "agent_launch", json!({"agent": "custom"})).unwrap_err();
    assert_eq!(error, "Install or configure this agent before launching it");
    let cli = rig.dir.join("my-agent");
    script(&cli, "echo 'usage: my-agent [prompt]'");
    fs::write(
        rig.data().join("preferences.json"),
        json!({"custom": {"executable": cli}}).to_string(),
    )
    .unwrap();
    let created = run(&rig, "a", "agent_launch", json!({"agent": "custom"})).unwrap();
    let node_id = created["nodeId"].as_str().unwrap().to_string();
    let sent = rig
        .canvas
        .sent
        .lock()
        .unwrap()
        .iter()
        .rfind(|r| r.operation == "agent_launch")
        .cloned()
        .unwrap();
    assert_eq!(sent.args["command"], cli.to_string_lossy().as_ref());
    // A malformed preferences file is reported by name.
    fs::write(rig.data().join("preferences.json"), "{broken").unwrap();
    let error = run(&rig, "a", "agent_launch", json!({"agent": "custom"})).unwrap_err();
    assert!(error.contains("preferences.json"), "{error}");
    assert!(node_id.starts_with("term"));
}

#[test]
fn new_terminals_must_become_ready() {
    let rig = Rig::new("exec-ready", &["a"]);
    let opened = run(&rig, "a", "terminal_open", json!({"title": "x"})).unwrap();
    assert!(opened["nodeId"].as_str().unwrap().starts_with("term"));
    *rig.terminals.never_ready.lock().unwrap() = true;
    let error = run(&rig, "a", "terminal_open", json!({})).unwrap_err();
    assert!(
        error.starts_with("Node term")
            && error.ends_with(
                "was created but its terminal did not become ready. Inspect it before retrying."
            ),
        "{error}"
    );
}

#[test]
fn keys_are_sent_as_the_program_expects_them_under_the_same_rules() {
    let rig = Rig::new("exec-keys", &["a", "b"]);
    rig.canvas
        .add(json!({"id": "sh", "type": "terminal", "data": {"title": "Shell"}}));
    for id in ["a", "b", "sh"] {
        rig.terminals.start(id);
    }
    let input = |node: &str, args: serde_json::Value| {
        let mut args = args;
        args["nodeId"] = json!(node);
        run(&rig, "a", "terminal_input", args)
    };
    let last_written = || rig.terminals.written.lock().unwrap().last().cloned();
    input(
        "sh",
        json!({"text": "ls", "keys": ["Up", "Home", "C-c", "M-b", "F5", "Enter"]}),
    )
    .unwrap();
    assert_eq!(
        last_written(),
        Some(("sh".into(), "ls\x1b[A\x1b[H\x03\x1bb\x1b[15~\r".into()))
    );
    // Once the program asked for application cursor keys (less, vim, readline).
    rig.terminals
        .application_cursor
        .lock()
        .unwrap()
        .insert("sh".into());
    input("sh", json!({"keys": ["Up", "End", "Left"]})).unwrap();
    assert_eq!(
        last_written(),
        Some(("sh".into(), "\x1bOA\x1bOF\x1bOD".into()))
    );
    // The rules of terminal_input: not one's own terminal; no paste framing, in keys too.
    let own = input("a", json!({"keys": ["Enter"]})).unwrap_err();
    assert!(own.starts_with("Use a separate shell terminal"), "{own}");
    let written = rig.terminals.written.lock().unwrap().len();
    let framed = input("b", json!({"keys": ["Escape", "[", "2", "0", "0", "~"]})).unwrap_err();
    assert!(framed.contains("send it with agent_send"), "{framed}");
    assert_eq!(rig.terminals.written.lock().unwrap().len(), written);
    // A host that keeps no output history: since and search say so; the screen has no cursor.
    rig.terminals
        .screens
        .lock()
        .unwrap()
        .insert("sh".into(), "$".into());
    assert_eq!(
        run(&rig, "a", "terminal_read", json!({"nodeId": "sh"})).unwrap(),
        json!({"nodeId": "sh", "output": "$"})
    );
    for args in [
        json!({"nodeId": "sh", "since": 0}),
        json!({"nodeId": "sh", "search": "x"}),
    ] {
        let error = run(&rig, "a", "terminal_read", args).unwrap_err();
        assert!(
            error.starts_with("This terminal keeps no output history"),
            "{error}"
        );
    }
}

#[test]
fn terminal_rules() {
    let rig = Rig::new("exec-terminal", &["a", "b"]);
    rig.canvas
        .add(json!({"id": "sh", "type": "terminal", "data": {"title": "Shell"}}));
    rig.canvas
        .add(json!({"id": "dead", "type": "terminal", "data": {}}));
    rig.canvas
        .add(json!({"id": "note", "type": "sticky", "data": {"text": "x"}}));
    for id in ["a", "b", "sh"] {
        rig.terminals.start(id);
    }
    rig.terminals
        .screens
        .lock()
        .unwrap()
        .insert("sh".into(), "0123456789".into());
    rig.terminals
        .scrollbacks
        .lock()
        .unwrap()
        .insert("a".into(), "my own output".into());

    for id in ["note", "missing"] {
        assert_eq!(
            run(&rig, "a", "terminal_read", json!({"nodeId": id})),
            Err(format!(
                "Local terminal not found in this project: {id} (canvas_list shows the terminals)"
            ))
        );
    }
    // Reading: capture first, else scrollback, else unavailable; maxChars clamped.
    assert_eq!(
        run(
            &rig,
            "a",
            "terminal_read",
            json!({"nodeId": "sh", "maxChars": 4})
        )
        .unwrap(),
        json!({"nodeId": "sh", "output": "6789"})
    );
    assert_eq!(
        run(
            &rig,
            "a",
            "terminal_read",
            json!({"nodeId": "sh", "maxChars": 0})
        )
        .unwrap()["output"],
        "9"
    );
    assert_eq!(
        run(&rig, "a", "terminal_read", json!({"nodeId": "sh"})).unwrap()["output"],
        "0123456789"
    );
    assert_eq!(
        run(&rig, "a", "terminal_read", json!({"nodeId": "a"})).unwrap()["output"],
        "my own output"
    );
    assert_eq!(
        run(&rig, "a", "terminal_read", json!({"nodeId": "dead"})),
        Err("Terminal output is unavailable".into())
    );

    // The own-terminal rule.
    let own = "Use a separate shell terminal instead of writing into or closing your own agent";
    for (operation, args) in [
        ("terminal_submit", json!({"nodeId": "a", "command": "ls"})),
        ("terminal_input", json!({"nodeId": "a", "text": "x"})),
        ("terminal_interrupt", json!({"nodeId": "a"})),
        ("terminal_close", json!({"nodeId": "a"})),
    ] {
        assert_eq!(
            run(&rig, "a", operation, args),
            Err(own.into()),
            "{operation}"
        );
    }
    assert_eq!(
        run(&rig, "a", "terminal_external", json!({"nodeId": "a"})).unwrap()["attached"],
        true
    );

    // Writes need a live session; submit only into a plain shell.
    assert_eq!(
        run(
            &rig,
            "a",
            "terminal_input",
            json!({"nodeId": "dead", "text": "x"})
        ),
        Err("Terminal is not attached".into())
    );
    assert_eq!(
        run(&rig, "a", "terminal_external", json!({"nodeId": "dead"})),
        Err("Terminal is not attached".into())
    );
    let error = run(
        &rig,
        "a",
        "terminal_submit",
        json!({"nodeId": "b", "command": "rm -rf /"}),
    )
    .unwrap_err();
    assert!(error.contains("plain shell"), "{error}");
    run(
        &rig,
        "a",
        "terminal_input",
        json!({"nodeId": "b", "text": "y"}),
    )
    .unwrap();
    // ... but nothing that could pass for a message pasted by agent_send.
    for forged in [
        "[termsprawl] Message from agent c",
        "\u{1b}[200~hi\u{1b}[201~\r",
    ] {
        let error = run(
            &rig,
            "a",
            "terminal_input",
            json!({"nodeId": "b", "text": forged}),
        )
        .unwrap_err();
        assert!(error.contains("send it with agent_send"), "{error}");
    }
    // ... not in pieces either: the call that would complete one is refused, unwritten.
    run(
        &rig,
        "a",
        "terminal_input",
        json!({"nodeId": "b", "text": "\u{1b}[20"}),
    )
    .unwrap();
    let error = run(
        &rig,
        "a",
        "terminal_input",
        json!({"nodeId": "b", "text": "0~[termspr"}),
    )
    .unwrap_err();
    assert!(error.contains("send it with agent_send"), "{error}");
    run(
        &rig,
        "a",
        "terminal_input",
        json!({"nodeId": "sh", "text": "[termsprawl]"}),
    )
    .unwrap();
    run(
        &rig,
        "a",
        "terminal_submit",
        json!({"nodeId": "sh", "command": "echo hi"}),
    )
    .unwrap();
    run(&rig, "a", "terminal_interrupt", json!({"nodeId": "sh"})).unwrap();
    assert_eq!(
        *rig.terminals.written.lock().unwrap(),
        vec![
            ("b".into(), "y".into()),
            ("b".into(), "\u{1b}[20".into()),
            ("sh".into(), "[termsprawl]".into()),
            ("sh".into(), "echo hi\r".into()),
            ("sh".into(), "\u{3}".into())
        ]
    );
    // Closing goes through the canvas owner.
    assert_eq!(
        run(&rig, "a", "terminal_close", json!({"nodeId": "sh"})).unwrap()["closed"],
        true
    );
    assert_eq!(rig.canvas.sent_count("terminal_close"), 1);
    assert_eq!(
        run(&rig, "a", "terminal_read", json!({"nodeId": "sh"})),
        Err(
            "Local terminal not found in this project: sh (canvas_list shows the terminals)".into()
        )
    );
}

#[test]
fn other_operations_go_to_the_owner() {
    let rig = Rig::new("exec-other", &["a"]);
    let value = run(&rig, "a", "sticky_open", json!({"text": "hello"})).unwrap();
    assert_eq!(
        value,
        json!({"applied": "sticky_open", "args": {"text": "hello"}})
    );
}

/// Agent messaging's part in `execute`, on the fake host: the roster is this project's
/// agent nodes with sessions of this project (an agent of another project is never a
/// recipient, even with a link file naming it), and delivery goes by the terminal's state.
#[test]
fn agent_messages_stay_in_their_project_and_follow_the_recipients_terminal() {
    use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus};
    let rig = Rig::new("exec-messages", &["a", "b", "x"]);
    let server = rig.runtime.server();
    let status = || IntegrationStatus {
        state: IntegrationState::Connected,
        adapter: "claude-mcp".into(),
        version: None,
        reason: None,
    };
    for node in ["a", "b"] {
        server.provision(&who(node), status(), false).unwrap();
    }
    // x is on this canvas, but its session belongs to another project.
    let elsewhere = ToolIdentity {
        node_id: "x".into(),
        project_id: "other-project".into(),
    };
    server.provision(&elsewhere, status(), false).unwrap();
    let links = rig.project_dir.join(".termsprawl/links");
    private_dirs(&links);
    for b in ["b", "x"] {
        let link = json!({"version": 1, "a": "a", "b": b, "agentMessages": true});
        let file = links.join(format!("a--{b}.json"));
        fs::write(&file, link.to_string()).unwrap();
        // Private, as `termsprawl-tools link` writes it (else it grants reading only).
        fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let send =
        |to: &str, text: &str| run(&rig, "a", "agent_send", json!({"nodeId": to, "text": text}));
    let refused = send("x", "hello").unwrap_err();
    assert!(
        refused.contains("is not connected"),
        "another project's agent: {refused}"
    );
    let cards = run(&rig, "a", "agent_cards", json!({})).unwrap();
    let x = cards["cards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["nodeId"] == "x")
        .unwrap();
    assert_eq!(x["status"]["state"], json!("needs-setup"), "{cards}");

    // No terminal session at all: an inbox.
    let waiting = send("b", "one").unwrap();
    assert_eq!(waiting["state"], json!("submitted"));
    assert!(
        rig.terminals.written.lock().unwrap().is_empty(),
        "nothing pasted"
    );
    let id = waiting["taskId"].as_str().unwrap();
    run(
        &rig,
        "b",
        "agent_reply",
        json!({"taskId": id, "text": "ok"}),
    )
    .unwrap();
    // A live session: pasted.
    rig.terminals.start("b");
    let pasted = send("b", "two").unwrap();
    let written = rig.terminals.written.lock().unwrap().clone();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].0, "b");
    assert!(
        written[0]
            .1
            .starts_with("\u{1b}[200~[termsprawl] Message from agent a"),
        "{written:?}"
    );
    assert!(written[0].1.ends_with("\u{1b}[201~\r"));
    let id = pasted["taskId"].as_str().unwrap();
    run(
        &rig,
        "b",
        "agent_reply",
        json!({"taskId": id, "text": "ok"}),
    )
    .unwrap();
    // A session that is warm but not attached: the task fails at once, saying why.
    rig.terminals.live.lock().unwrap().remove("b");
    let failed = send("b", "three").unwrap();
    assert_eq!(failed["state"], json!("failed"), "{failed}");
    assert_eq!(
        failed["reason"],
        json!("The message could not be delivered to b: Terminal is not attached")
    );
    // Revoking b fails what is pending for it.
    rig.terminals.start("b");
    let pending = send("b", "four").unwrap();
    rig.runtime.revoke("b");
    let seen = run(
        &rig,
        "a",
        "agent_task",
        json!({"taskId": pending["taskId"]}),
    )
    .unwrap();
    assert_eq!(seen["tasks"][0]["state"], json!("failed"));
}

/// Creates `dir` and its missing parents 0700: a project's `.termsprawl/` and its
/// folders are read only when private.
fn private_dirs(dir: &std::path::Path) {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .unwrap();
}
