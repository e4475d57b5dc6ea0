//! Terminal commands through the real `serve` on the PTY backend, for bash, zsh and dash:
//! `terminal_submit` with `wait` answers the command's end, exit status, folder and
//! output (head and tail); a prompt waiting for typing ends the wait as
//! `awaiting_input`; a forged end mark never gives a false status; `terminal_read` by
//! command and `terminal_wait` after a timeout.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use serde_json::json;
use serve_harness::*;

#[test]
fn waited_commands_report_their_end_status_folder_and_output_in_every_shell() {
    for (name, shell) in shells() {
        let dirs = Dirs::new(&format!("commands-{name}"));
        let home = dirs.data.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let home_text = home.to_string_lossy().into_owned();
        let env = [("SHELL", shell), ("HOME", home_text.as_str())];
        let serve = Serve::start_with_env(&dirs, &["--terminals", "pty", "--agent", "me"], &env);
        let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
            .as_str()
            .unwrap()
            .to_string();
        let integration = poll(
            &format!("{name}'s first prompt"),
            std::time::Duration::from_secs(10),
            || {
                let ok = submit_and_wait(&serve, &dirs, &term, "true", json!({}));
                (ok["state"] == "exited").then_some(ok)
            },
        );
        assert_eq!(integration["integration"], name, "{integration}");
        assert_eq!(integration["exitCode"], 0, "{integration}");

        // A failing build-like command: its status, and both ends of its output.
        let failed = submit_and_wait(
            &serve,
            &dirs,
            &term,
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
            output.contains("Compiling") && output.trim_end().ends_with("error: build failed"),
            "{output}"
        );
        assert!(output.contains("characters left out"), "{output}");
        assert!(output.chars().count() <= 400, "{}", output.chars().count());
        ends_are_listed_and_in_the_trail(&serve, &dirs, &term, &failed, name);

        // `(exit 7)`, then a folder change the next command sees.
        let seven = submit_and_wait(&serve, &dirs, &term, "(exit 7)", json!({}));
        assert_eq!(seven["exitCode"], 7, "{seven}");
        let moved = submit_and_wait(&serve, &dirs, &term, "cd /tmp", json!({}));
        assert_eq!(moved["cwd"], "/tmp", "{moved}");

        // A forged end with a made-up nonce, then the real status.
        let forged = submit_and_wait(
            &serve,
            &dirs,
            &term,
            r"printf '\033]5379;00112233445566778899aabbccddeeff;D;0\007'; sleep 1; (exit 4)",
            json!({}),
        );
        assert_eq!(
            (forged["state"].as_str(), forged["exitCode"].as_i64()),
            (Some("exited"), Some(4)),
            "{forged}"
        );

        // A prompt that waits for typing ends the wait and says so; typing ends it.
        let asked = submit_and_wait(
            &serve,
            &dirs,
            &term,
            "read answer; echo got $answer",
            json!({}),
        );
        assert_eq!(asked["state"], "awaiting_input", "{asked}");
        listed_shell(&serve, &dirs, &term, "the read waiting", |shell| {
            shell["command"]["state"] == "awaiting_input"
                && shell["command"]["commandId"] == asked["commandId"]
        });
        let id = asked["commandId"].clone();
        serve.ok(
            &dirs,
            "me",
            "terminal_input",
            json!({"nodeId": term, "text": "yes\r"}),
        );
        let answered = serve.ok(
            &dirs,
            "me",
            "terminal_wait",
            json!({"nodeId": term, "commandId": id, "until": "exit", "timeoutMs": 10000}),
        );
        assert_eq!(answered["state"], "exited", "{answered}");
        assert!(
            answered["output"].as_str().unwrap().contains("got yes"),
            "{answered}"
        );

        // A wait that times out, then waiting again for the same command.
        let slow = submit_and_wait(&serve, &dirs, &term, "sleep 3", json!({"timeoutMs": 300}));
        assert_eq!(slow["state"], "timed_out", "{slow}");
        let running = listed_shell(&serve, &dirs, &term, "the sleep running", |shell| {
            shell["command"]["commandId"] == slow["commandId"]
        });
        assert_eq!(running["command"]["state"], "running", "{running}");
        assert_eq!(running["command"]["command"], "sleep 3", "{running}");
        let refused = serve.err(
            &dirs,
            "me",
            "terminal_submit",
            json!({"nodeId": term, "command": "true", "wait": "exit"}),
        );
        assert!(refused.contains("still running"), "{refused}");
        let done = serve.ok(
            &dirs,
            "me",
            "terminal_wait",
            json!({"nodeId": term, "commandId": slow["commandId"], "until": "exit"}),
        );
        assert_eq!(
            (done["state"].as_str(), done["exitCode"].as_i64()),
            (Some("exited"), Some(0)),
            "{done}"
        );

        // The last command, by `terminal_read`.
        let last = serve.ok(
            &dirs,
            "me",
            "terminal_read",
            json!({"nodeId": term, "command": "last"}),
        );
        assert_eq!(last["command"], "sleep 3", "{last}");
        serve.stop();
    }
}

/// A waited command's answer follows its end at once: the shell's end mark wakes the
/// waiter rather than its next check. Prints how long after the command's recorded end
/// each answer came (the call's time less the command's duration); not asserted, the
/// machine is shared.
#[test]
fn a_waited_command_is_answered_right_after_its_end() {
    let dirs = Dirs::new("commands-wake");
    let home = dirs.data.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let home_text = home.to_string_lossy().into_owned();
    let env = [("SHELL", "/bin/bash"), ("HOME", home_text.as_str())];
    let serve = Serve::start_with_env(&dirs, &["--terminals", "pty", "--agent", "me"], &env);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    print_answer_delays(&serve, &dirs, &term, "pty");
    serve.stop();
}

#[test]
fn a_multi_line_command_is_answered_at_its_last_line_in_every_shell() {
    for (name, shell) in shells() {
        let dirs = Dirs::new(&format!("multi-{name}"));
        let home = dirs.data.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".zshrc"), "").unwrap();
        let home_text = home.to_string_lossy().into_owned();
        let env = [("SHELL", shell), ("HOME", home_text.as_str())];
        let serve = Serve::start_with_env(&dirs, &["--terminals", "pty", "--agent", "me"], &env);
        let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
            .as_str()
            .unwrap()
            .to_string();
        multi_line_commands_run_as_one(&serve, &dirs, &term, name);
        serve.stop();
    }
}

#[test]
fn a_terminal_whose_integration_is_lost_is_not_stuck() {
    let dirs = Dirs::new("lost");
    let home = dirs.data.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let home_text = home.to_string_lossy().into_owned();
    let env = [("SHELL", "/bin/bash"), ("HOME", home_text.as_str())];
    let serve = Serve::start_with_env(&dirs, &["--terminals", "pty", "--agent", "me"], &env);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    lost_integration_never_leaves_the_terminal_stuck(&serve, &dirs, &term);
    serve.stop();
}
