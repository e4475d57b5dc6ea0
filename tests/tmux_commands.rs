//! Terminal commands through the real `serve` on its default backend, tmux (skipped with
//! a notice where tmux is not installed), for bash, zsh and dash, with and without the
//! pane filter. Under the pane filter the shell has integration: the same checks as on
//! the PTY backend (exit status, folder, head and tail, a forged mark ignored, waiting
//! for typing, a timeout then `terminal_wait`, the last command by `terminal_read`), and
//! the records are found again by a restarted `serve`. Without the filter the shells
//! report no commands (`integration: "none"`), so the answers come from the kernel's
//! view of the pane's shell and tmux's view of the pane: a command that ends is `exited`
//! with no exit status, one blocked reading the terminal is `awaiting_input`, a
//! full-screen one `fullscreen`; a wait that times out can be waited again; output
//! printed to look like an end mark ends nothing.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

/// `serve` with `extra` flags and `shell` as the user's shell, in a home of its own (an
/// empty `.zshrc`, so zsh asks nothing at its first start), and a terminal at its prompt.
fn serve_with_shell(dirs: &Dirs, shell: &str, extra: &[&str]) -> (Serve, String) {
    let home = dirs.data.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".zshrc"), "").unwrap();
    let home_text = home.to_string_lossy().into_owned();
    let env = [("SHELL", shell), ("HOME", home_text.as_str())];
    let mut flags = vec!["--agent", "me"];
    flags.extend_from_slice(extra);
    let serve = Serve::start_with_env(dirs, &flags, &env);
    let term = serve.ok(dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        dirs.tmux_sessions().contains(&term),
        "the default backend is tmux here"
    );
    (serve, term)
}

/// Whether tmux is missing here (then the test is skipped, with a notice).
fn tmux_missing() -> bool {
    let missing = !tmux_installed();
    if missing {
        eprintln!("NOTICE: tmux is not installed: skipping the tmux command checks");
    }
    missing
}

/// The checks every shell and both pane set-ups pass.
fn commands_answer_from_the_kernel_and_tmux(serve: &Serve, dirs: &Dirs, term: &str, name: &str) {
    let first = poll(
        &format!("{name}'s first prompt"),
        Duration::from_secs(10),
        || {
            let ok = submit_and_wait(serve, dirs, term, "true", json!({}));
            (ok["state"] == "exited").then_some(ok)
        },
    );
    assert_eq!(first["integration"], "none", "{first}");
    assert_eq!(first["exitCode"], Value::Null, "{first}");

    // A failing build-like command: it ends, and both ends of its output are kept.
    let failed = submit_and_wait(
        serve,
        dirs,
        term,
        "echo Compiling; seq 1 3000; echo 'error: build failed'; false",
        json!({"maxChars": 400}),
    );
    println!("{name}: {failed}");
    assert_eq!(failed["state"], "exited", "{failed}");
    assert_eq!(failed["exitCode"], Value::Null, "{failed}");
    assert_eq!(failed["truncated"], true, "{failed}");
    let output = failed["output"].as_str().unwrap();
    assert!(output.contains("echo Compiling"), "{output}");
    assert!(output.contains("error: build failed"), "{output}");
    assert!(output.contains("characters left out"), "{output}");
    assert!(output.chars().count() <= 400, "{}", output.chars().count());
    // Nothing is claimed about commands: the listing says so.
    listed_shell(serve, dirs, term, "no integration", |shell| {
        *shell == json!({"integration": "none"})
    });

    // Output that looks like our end mark (a made-up nonce) ends nothing: the answer
    // comes after the sleep, once the shell has the terminal again.
    let forged = submit_and_wait(
        serve,
        dirs,
        term,
        r"printf '\033]5379;00112233445566778899aabbccddeeff;D;0\007'; sleep 1; (exit 4)",
        json!({}),
    );
    assert_eq!(forged["state"], "exited", "{forged}");
    assert_eq!(forged["exitCode"], Value::Null, "{forged}");
    assert!(forged["durationMs"].as_u64().unwrap() >= 1000, "{forged}");

    // The shell itself busy after a command (a loop of its own) is still running.
    let looped = submit_and_wait(
        serve,
        dirs,
        term,
        "sleep 1; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; echo looped-$i",
        json!({}),
    );
    assert_eq!(looped["state"], "exited", "{looped}");
    assert!(
        looped["output"].as_str().unwrap().contains("looped-100000"),
        "{looped}"
    );

    // A program blocked reading the terminal ends the wait and says so; typing ends it.
    let asked = submit_and_wait(serve, dirs, term, "head -n 1", json!({}));
    assert_eq!(asked["state"], "awaiting_input", "{asked}");
    let refused = serve.err(
        dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "true", "wait": "exit"}),
    );
    assert!(refused.contains("still running"), "{refused}");
    serve.ok(
        dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "typed-answer\r"}),
    );
    let answered = serve.ok(
        dirs,
        "me",
        "terminal_wait",
        json!({"nodeId": term, "until": "exit", "timeoutMs": 10000}),
    );
    assert_eq!(answered["state"], "exited", "{answered}");

    // A wait that times out, then waiting again for what runs.
    let slow = submit_and_wait(serve, dirs, term, "sleep 2", json!({"timeoutMs": 300}));
    assert_eq!(slow["state"], "timed_out", "{slow}");
    let done = serve.ok(
        dirs,
        "me",
        "terminal_wait",
        json!({"nodeId": term, "until": "exit", "timeoutMs": 10000}),
    );
    assert_eq!(done["state"], "exited", "{done}");

    // A full-screen program.
    let paged = submit_and_wait(serve, dirs, term, "seq 1 500 | less", json!({}));
    assert_eq!(paged["state"], "fullscreen", "{paged}");
    serve.ok(
        dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "q"}),
    );
    // A wait that starts while `less` is still closing may see it still full-screen.
    poll("less to close", Duration::from_secs(10), || {
        let closed = serve.ok(
            dirs,
            "me",
            "terminal_wait",
            json!({"nodeId": term, "until": "exit", "timeoutMs": 10000}),
        );
        (closed["state"] == "exited").then_some(())
    });

    // Without integration no command is recorded: reading one says what to do instead.
    let last = serve.err(
        dirs,
        "me",
        "terminal_read",
        json!({"nodeId": term, "command": "last"}),
    );
    assert!(last.contains("integration none"), "{last}");
}

/// The checks every shell passes under the pane filter, with integration.
fn commands_report_status_folder_and_output(serve: &Serve, dirs: &Dirs, term: &str, name: &str) {
    let first = poll(
        &format!("{name}'s first prompt"),
        Duration::from_secs(10),
        || {
            let ok = submit_and_wait(serve, dirs, term, "true", json!({}));
            (ok["state"] == "exited" && ok["integration"] != "none").then_some(ok)
        },
    );
    assert_eq!(first["integration"], name, "{first}");
    assert_eq!(first["exitCode"], 0, "{first}");

    // A failing build-like command: its status, and both ends of its output.
    let failed = submit_and_wait(
        serve,
        dirs,
        term,
        "echo Compiling; seq 1 3000; echo 'error: build failed' >&2; false",
        json!({"maxChars": 400}),
    );
    println!("{name}: {failed}");
    assert_eq!(
        (failed["state"].as_str(), failed["exitCode"].as_i64()),
        (Some("exited"), Some(1)),
        "{failed}"
    );
    assert_eq!(failed["truncated"], true, "{failed}");
    let output = failed["output"].as_str().unwrap();
    assert!(
        output.starts_with("Compiling") && output.trim_end().ends_with("error: build failed"),
        "{output}"
    );
    ends_are_listed_and_in_the_trail(serve, dirs, term, &failed, name);
    assert!(output.contains("characters left out"), "{output}");
    assert!(output.chars().count() <= 400, "{}", output.chars().count());

    // `(exit 7)`, then a folder change the command reports.
    let seven = submit_and_wait(serve, dirs, term, "(exit 7)", json!({}));
    assert_eq!(seven["exitCode"], 7, "{seven}");
    let moved = submit_and_wait(serve, dirs, term, "cd /tmp", json!({}));
    assert_eq!(moved["cwd"], "/tmp", "{moved}");

    // A forged end with a made-up nonce, then the real status after the sleep.
    let forged = submit_and_wait(
        serve,
        dirs,
        term,
        r"printf '\033]5379;00112233445566778899aabbccddeeff;D;0\007'; sleep 1; (exit 4)",
        json!({}),
    );
    println!("{name}: {forged}");
    assert_eq!(
        (forged["state"].as_str(), forged["exitCode"].as_i64()),
        (Some("exited"), Some(4)),
        "{forged}"
    );
    assert!(forged["durationMs"].as_u64().unwrap() >= 1000, "{forged}");

    // Marks with no nonce, and a log of another terminal's session, marks and all.
    let no_nonce = submit_and_wait(
        serve,
        dirs,
        term,
        r"printf '\033]5379;D;0\007\033]5379;;D;0\033\\'; (exit 6)",
        json!({}),
    );
    assert_eq!(no_nonce["exitCode"], 6, "{no_nonce}");
    let log = dirs.data.join("session.log");
    let marks = format!(
        "\x1b]5379;{0};B;make\x07\x1b]5379;{0};C\x07ok\n\x1b]5379;{0};D;0\x07\x1b]5379;{0};A\x07$ ",
        "ab".repeat(16)
    );
    std::fs::write(&log, marks).unwrap();
    let replayed = submit_and_wait(
        serve,
        dirs,
        term,
        &format!("cat '{}'; (exit 2)", log.display()),
        json!({}),
    );
    assert_eq!(
        (replayed["state"].as_str(), replayed["exitCode"].as_i64()),
        (Some("exited"), Some(2)),
        "{replayed}"
    );

    // A prompt that waits for typing ends the wait and says so; typing ends it.
    let asked = submit_and_wait(
        serve,
        dirs,
        term,
        "read answer; echo got $answer",
        json!({}),
    );
    println!("{name}: {asked}");
    assert_eq!(asked["state"], "awaiting_input", "{asked}");
    listed_shell(serve, dirs, term, "the read waiting", |shell| {
        shell["command"]["state"] == "awaiting_input"
            && shell["command"]["commandId"] == asked["commandId"]
    });
    serve.ok(
        dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "yes\r"}),
    );
    let answered = serve.ok(
        dirs,
        "me",
        "terminal_wait",
        json!({"nodeId": term, "commandId": asked["commandId"], "until": "exit", "timeoutMs": 10000}),
    );
    assert_eq!(answered["state"], "exited", "{answered}");
    assert!(
        answered["output"].as_str().unwrap().contains("got yes"),
        "{answered}"
    );

    // A wait that times out, then waiting again for the same command.
    // Long enough for the shell to report the start on a busy machine.
    let slow = submit_and_wait(serve, dirs, term, "sleep 3", json!({"timeoutMs": 1000}));
    assert!(slow["commandId"].is_u64(), "{slow}");
    assert_eq!(slow["state"], "timed_out", "{slow}");
    let running = listed_shell(serve, dirs, term, "the sleep running", |shell| {
        shell["command"]["commandId"] == slow["commandId"]
    });
    assert_eq!(running["command"]["state"], "running", "{running}");
    let refused = serve.err(
        dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "true", "wait": "exit"}),
    );
    assert!(refused.contains("still running"), "{refused}");
    let done = serve.ok(
        dirs,
        "me",
        "terminal_wait",
        json!({"nodeId": term, "commandId": slow["commandId"], "until": "exit", "timeoutMs": 10000}),
    );
    assert_eq!(
        (done["state"].as_str(), done["exitCode"].as_i64()),
        (Some("exited"), Some(0)),
        "{done}"
    );

    // A full-screen program.
    let paged = submit_and_wait(serve, dirs, term, "seq 1 500 | less", json!({}));
    assert_eq!(paged["state"], "fullscreen", "{paged}");
    serve.ok(
        dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "q"}),
    );
    // A wait that starts while `less` is still closing may still see it full-screen. On a
    // loaded machine the full screen can be seen before the shell's start mark is read,
    // so the answer may have no commandId yet: then wait on the last command.
    let mut wait = json!({"nodeId": term, "until": "exit", "timeoutMs": 10000});
    if paged["commandId"].is_u64() {
        wait["commandId"] = paged["commandId"].clone();
    }
    let closed = poll("less to close", Duration::from_secs(10), || {
        let closed = serve.ok(dirs, "me", "terminal_wait", wait.clone());
        (closed["state"] != "fullscreen").then_some(closed)
    });
    assert_eq!(
        (closed["state"].as_str(), closed["exitCode"].as_i64()),
        (Some("exited"), Some(0)),
        "{closed}"
    );

    // The last command, by `terminal_read`.
    let last = serve.ok(
        dirs,
        "me",
        "terminal_read",
        json!({"nodeId": term, "command": "last"}),
    );
    assert_eq!(last["command"], "seq 1 500 | less", "{last}");
}

#[test]
fn tmux_commands_under_the_pane_filter_report_their_status_in_every_shell() {
    if tmux_missing() {
        return;
    }
    for (name, shell) in shells() {
        let dirs = Dirs::new(&format!("tc-{name}"));
        let (serve, term) = serve_with_shell(&dirs, shell, &[]);
        commands_report_status_folder_and_output(&serve, &dirs, &term, name);
        let before = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "command": "last"}),
        );
        serve.stop();

        // The pane filter outlives `serve`: a new one finds the records again.
        let home = dirs.data.join("home").to_string_lossy().into_owned();
        let env = [("SHELL", shell), ("HOME", home.as_str())];
        let again = Serve::start_with_env(&dirs, &["--agent", "me"], &env);
        let after = again.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "command": "last"}),
        );
        assert_eq!(
            (&after["commandId"], &after["command"], &after["exitCode"]),
            (
                &before["commandId"],
                &before["command"],
                &before["exitCode"]
            ),
            "{after}"
        );
        let next = submit_and_wait(&again, &dirs, &term, "(exit 3)", json!({}));
        assert_eq!(
            (next["exitCode"].as_i64(), next["integration"].as_str()),
            (Some(3), Some(name)),
            "{next}"
        );
        again.stop();
    }
}

#[test]
fn tmux_commands_are_answered_without_the_pane_filter() {
    if tmux_missing() {
        return;
    }
    let dirs = Dirs::new("tc-nofilter");
    let (serve, term) = serve_with_shell(&dirs, "/bin/bash", &["--no-query-filter"]);
    commands_answer_from_the_kernel_and_tmux(&serve, &dirs, &term, "bash");
    serve.stop();
}

/// Under the pane filter a waited command's answer follows its end at once: the filter
/// tells `serve` of the end mark rather than the waiter's next check finding it. Prints
/// how long after the command's recorded end each answer came (the call's time less the
/// command's duration); not asserted, the machine is shared.
#[test]
fn a_waited_tmux_command_is_answered_right_after_its_end() {
    if tmux_missing() {
        return;
    }
    let dirs = Dirs::new("tc-wake");
    let (serve, term) = serve_with_shell(&dirs, "/bin/bash", &[]);
    print_answer_delays(&serve, &dirs, &term, "tmux");
    serve.stop();
}

/// Under the pane filter, a nested shell gives no false end (its commands are typing
/// into the command, which ends with the nested shell's status) and `exec sh` ends the
/// terminal's integration rather than reporting an end.
#[test]
fn nested_shells_and_exec_in_a_tmux_shell_give_no_false_end() {
    if tmux_missing() {
        return;
    }
    let dirs = Dirs::new("tc-nested");
    let (serve, term) = serve_with_shell(&dirs, "/bin/bash", &[]);
    poll("bash's first prompt", Duration::from_secs(10), || {
        let ok = submit_and_wait(&serve, &dirs, &term, "true", json!({}));
        (ok["integration"] == "bash").then_some(())
    });
    let nested = submit_and_wait(&serve, &dirs, &term, "bash --norc", json!({}));
    assert_eq!(nested["state"], "awaiting_input", "{nested}");
    let wait = |timeout: u64| {
        serve.ok(
            &dirs,
            "me",
            "terminal_wait",
            json!({"nodeId": term, "commandId": nested["commandId"], "until": "exit", "timeoutMs": timeout}),
        )
    };
    serve.ok(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "false\r(exit 9)\r"}),
    );
    let inside = wait(1500);
    assert_ne!(inside["state"], "exited", "{inside}");
    assert_eq!(inside["exitCode"], Value::Null, "{inside}");
    serve.ok(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "exit 3\r"}),
    );
    let ended = wait(10000);
    assert_eq!(
        (ended["state"].as_str(), ended["exitCode"].as_i64()),
        (Some("exited"), Some(3)),
        "{ended}"
    );

    let replaced = submit_and_wait(&serve, &dirs, &term, "exec sh", json!({"timeoutMs": 5000}));
    println!("exec sh: {replaced}");
    assert_eq!(replaced["integration"], "none", "{replaced}");
    assert_eq!(replaced["exitCode"], Value::Null, "{replaced}");
    serve.stop();
}

#[test]
fn a_multi_line_tmux_command_is_answered_at_its_last_line_or_refused() {
    if tmux_missing() {
        return;
    }
    for (name, shell) in shells() {
        let dirs = Dirs::new(&format!("tc-multi-{name}"));
        let (serve, term) = serve_with_shell(&dirs, shell, &[]);
        multi_line_commands_run_as_one(&serve, &dirs, &term, name);
        serve.stop();
    }
    // Without the pane filter nothing tells one line's end from the last's: refused.
    let dirs = Dirs::new("tc-multi-nofilter");
    let (serve, term) = serve_with_shell(&dirs, "/bin/bash", &["--no-query-filter"]);
    let args = json!({"nodeId": term, "command": "true\nsleep 1", "wait": "exit"});
    let refused = serve.err(&dirs, "me", "terminal_submit", args);
    assert!(refused.contains("multi-line"), "{refused}");
    serve.stop();
}

#[test]
fn a_tmux_terminal_whose_integration_is_lost_is_not_stuck() {
    if tmux_missing() {
        return;
    }
    let dirs = Dirs::new("tc-lost");
    let (serve, term) = serve_with_shell(&dirs, "/bin/bash", &[]);
    lost_integration_never_leaves_the_terminal_stuck(&serve, &dirs, &term);
    serve.stop();
}

/// A program that reads the nonce from its shell's memory, hands the terminal to the
/// shell's group and prints an end, a prompt and a start (`tests/attacks/forge_end.py`,
/// trying every run of 32 hex digits it finds) gets no early answer: the waited call
/// answers the command's real end, after its sleep, with its real status.
#[test]
fn a_forged_end_read_from_the_shells_memory_is_not_a_tmux_commands_end() {
    if tmux_missing() {
        return;
    }
    let forger = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/attacks/forge_end.py");
    for (name, shell) in shells() {
        let dirs = Dirs::new(&format!("tc-forge-{name}"));
        let (serve, term) = serve_with_shell(&dirs, shell, &[]);
        poll(
            &format!("{name}'s first prompt"),
            Duration::from_secs(10),
            || {
                let ok = submit_and_wait(&serve, &dirs, &term, "true", json!({}));
                (ok["integration"] == name).then_some(())
            },
        );
        let line = format!("python3 {forger} - /no-such-file 2");
        let answer = submit_and_wait(&serve, &dirs, &term, &line, json!({}));
        println!("{name}: {answer}");
        assert_eq!(
            (answer["state"].as_str(), answer["exitCode"].as_i64()),
            (Some("exited"), Some(1)),
            "{name}: {answer}"
        );
        assert!(answer["durationMs"].as_u64().unwrap() >= 2000, "{answer}");
        assert_ne!(answer["cwd"], "/forged", "{answer}");
        assert!(
            answer["output"]
                .as_str()
                .unwrap()
                .contains("nonce(s) from memory"),
            "{answer}"
        );
        serve.stop();
    }
}
