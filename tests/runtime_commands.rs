//! Calls that wait for terminal commands (`terminal_submit` with `wait`, `terminal_wait`,
//! `terminal_read` with `command`), against a fake `Terminals` that scripts what the shell
//! reports; the runtime and the server's waiter are the real ones.
#![deny(unsafe_code)]

mod fakes;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fakes::{run, who, Rig};
use serde_json::{json, Value};
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus, ToolResult};
use termsprawl_tools::runtime::{
    unix_millis, CommandOutput, CommandRecord, CommandState, Foreground, ShellIntegration,
};
use termsprawl_tools::server::{WAITS_PER_AGENT, WAITS_PER_PROJECT};

/// A rig with agent `a` and a live shell terminal `sh` whose shell reports commands
/// when `integration` is not none.
fn shell(name: &str, integration: ShellIntegration) -> Rig {
    shell_with_agents(name, integration, &["a"])
}

/// [`shell`] with these agents on the canvas.
fn shell_with_agents(name: &str, integration: ShellIntegration, agents: &[&str]) -> Rig {
    let rig = Rig::new(name, agents);
    rig.canvas
        .add(json!({"id": "sh", "type": "terminal", "data": {"title": "Shell"}}));
    rig.terminals.start("a");
    rig.terminals.start("sh");
    let terminals = &rig.terminals;
    terminals
        .integration
        .lock()
        .unwrap()
        .insert("sh".into(), integration);
    terminals
        .foreground
        .lock()
        .unwrap()
        .insert("sh".into(), Foreground::Shell);
    terminals.print("sh", "$ ");
    rig
}

fn record(
    id: u64,
    command: &str,
    state: CommandState,
    exit_code: Option<i32>,
    output: &str,
) -> CommandRecord {
    let now = unix_millis();
    CommandRecord {
        id,
        command: command.into(),
        state,
        exit_code,
        started_at: now,
        ended_at: (state == CommandState::Exited).then_some(now + 1234),
        cwd: Some("/tmp".into()),
        output: CommandOutput {
            head: output.into(),
            ..CommandOutput::default()
        },
        last_output_at: now,
    }
}

/// Runs `f` on another thread after `delay` (what the shell does while the call waits).
fn later(
    rig: &Rig,
    delay: Duration,
    f: impl FnOnce(&fakes::FakeTerminals) + Send + 'static,
) -> thread::JoinHandle<()> {
    let terminals = Arc::clone(&rig.terminals);
    thread::spawn(move || {
        thread::sleep(delay);
        f(&terminals);
    })
}

fn written(rig: &Rig) -> Vec<String> {
    let written = rig.terminals.written.lock().unwrap();
    written
        .iter()
        .filter(|(n, _)| n == "sh")
        .map(|(_, t)| t.clone())
        .collect()
}

#[test]
fn without_wait_the_answer_is_the_spec_one() {
    let rig = shell("cmd-plain", ShellIntegration::Bash);
    let answer = run(
        &rig,
        "a",
        "terminal_submit",
        json!({"nodeId": "sh", "command": "ls"}),
    );
    assert_eq!(answer, Ok(json!({"nodeId": "sh"})));
    assert_eq!(written(&rig), ["ls\r"]);
}

#[test]
fn a_failing_command_answers_its_exit_status_output_and_folder() {
    let rig = shell("cmd-exit", ShellIntegration::Bash);
    let shell_side = later(&rig, Duration::from_millis(300), |t| {
        t.report("sh", record(1, "false", CommandState::Running, None, ""));
        t.report(
            "sh",
            record(1, "false", CommandState::Exited, Some(1), "it failed\n"),
        );
    });
    let args = json!({"nodeId": "sh", "command": "false", "wait": "exit"});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "exited");
    assert_eq!(answer["exitCode"], 1);
    assert_eq!(answer["commandId"], 1);
    assert_eq!(answer["command"], "false");
    assert_eq!(answer["output"], "it failed\n");
    assert_eq!(answer["truncated"], false);
    assert_eq!(answer["durationMs"], 1234);
    assert_eq!(answer["cwd"], "/tmp");
    assert_eq!(answer["integration"], "bash");
    assert_eq!(written(&rig), ["false\r"]);
}

#[test]
fn a_command_older_than_the_submit_is_not_taken_for_it() {
    let rig = shell("cmd-older", ShellIntegration::Zsh);
    rig.terminals.report(
        "sh",
        record(4, "make", CommandState::Exited, Some(2), "old"),
    );
    let shell_side = later(&rig, Duration::from_millis(300), |t| {
        t.report("sh", record(5, "true", CommandState::Exited, Some(0), ""));
    });
    let args = json!({"nodeId": "sh", "command": "true", "wait": "exit"});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(
        (answer["commandId"].clone(), answer["exitCode"].clone()),
        (json!(5), json!(0))
    );
}

#[test]
fn a_timed_out_wait_names_the_command_to_wait_for_again() {
    let rig = shell("cmd-timeout", ShellIntegration::Bash);
    let shell_side = later(&rig, Duration::from_millis(50), |t| {
        t.report("sh", record(1, "sleep 2", CommandState::Running, None, ""));
    });
    let args = json!({"nodeId": "sh", "command": "sleep 2", "wait": "exit", "timeoutMs": 400});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "timed_out");
    assert_eq!(answer["commandId"], 1);
    assert_eq!(answer["exitCode"], Value::Null);
    // While it runs, a waited submit is refused, naming it and what to do; nothing is typed.
    let again = json!({"nodeId": "sh", "command": "ls", "wait": "exit"});
    let refused = run(&rig, "a", "terminal_submit", again).unwrap_err();
    assert!(
        refused.contains("Command 1 (sleep 2) is still running"),
        "{refused}"
    );
    assert!(
        refused.contains("terminal_wait") && refused.contains("terminal_interrupt"),
        "{refused}"
    );
    assert!(refused.contains("force: true"), "{refused}");
    assert_eq!(written(&rig), ["sleep 2\r"]);
    // terminal_wait takes it up again until it exits.
    let shell_side = later(&rig, Duration::from_millis(300), |t| {
        t.report(
            "sh",
            record(1, "sleep 2", CommandState::Exited, Some(0), "done"),
        );
    });
    let wait = json!({"nodeId": "sh", "commandId": 1, "until": "exit"});
    let answer = run(&rig, "a", "terminal_wait", wait).unwrap();
    shell_side.join().unwrap();
    assert_eq!(
        (answer["state"].clone(), answer["exitCode"].clone()),
        (json!("exited"), json!(0))
    );
    // A command the shell never reported is refused.
    let unknown = json!({"nodeId": "sh", "commandId": 9, "until": "exit"});
    let refused = run(&rig, "a", "terminal_wait", unknown).unwrap_err();
    assert!(refused.starts_with("No command 9"), "{refused}");
}

#[test]
fn force_types_into_a_running_command() {
    let rig = shell("cmd-force", ShellIntegration::Bash);
    rig.terminals
        .report("sh", record(1, "cat", CommandState::Running, None, ""));
    let args = json!({"nodeId": "sh", "command": "hello", "wait": "idle", "force": true, "timeoutMs": 100});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    assert_eq!(written(&rig), ["hello\r"]);
    assert_eq!(answer["state"], "timed_out");
    // Without integration the kernel's foreground says a program runs.
    let rig = shell("cmd-force-none", ShellIntegration::None);
    rig.terminals
        .foreground
        .lock()
        .unwrap()
        .insert("sh".into(), Foreground::Running);
    let args = json!({"nodeId": "sh", "command": "ls", "wait": "exit"});
    let refused = run(&rig, "a", "terminal_submit", args).unwrap_err();
    assert!(
        refused.starts_with("A program is still running"),
        "{refused}"
    );
    assert!(written(&rig).is_empty());
}

#[test]
fn input_prompts_and_full_screen_programs_end_exit_waits() {
    for (foreground, state) in [
        (Foreground::AwaitingInput, "awaiting_input"),
        (Foreground::Fullscreen, "fullscreen"),
    ] {
        let rig = shell("cmd-prompt", ShellIntegration::Bash);
        let shell_side = later(&rig, Duration::from_millis(200), move |t| {
            t.report(
                "sh",
                record(1, "read -p name", CommandState::Running, None, "name? "),
            );
            t.foreground.lock().unwrap().insert("sh".into(), foreground);
        });
        let args = json!({"nodeId": "sh", "command": "read -p name", "wait": "exit"});
        let answer = run(&rig, "a", "terminal_submit", args).unwrap();
        shell_side.join().unwrap();
        assert_eq!(answer["state"], state);
        assert_eq!(answer["output"], "name? ");
    }
}

#[test]
fn a_pattern_wait_ends_at_the_text_not_at_the_echoed_command_line() {
    let rig = shell("cmd-pattern", ShellIntegration::None);
    let shell_side = later(&rig, Duration::from_millis(100), |t| {
        t.foreground
            .lock()
            .unwrap()
            .insert("sh".into(), Foreground::Running);
        t.print("sh", "./serve --say ready\r\nstarting\r\n");
        thread::sleep(Duration::from_millis(700));
        t.print("sh", "server ready on :3000\r\n");
    });
    let args =
        json!({"nodeId": "sh", "command": "./serve --say ready", "wait": {"pattern": "ready"}});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "running");
    assert!(
        answer["output"]
            .as_str()
            .unwrap()
            .contains("server ready on :3000"),
        "{answer}"
    );
    assert_eq!(answer["command"], "./serve --say ready");
}

#[test]
fn an_idle_wait_ends_after_quiet_output() {
    let rig = shell("cmd-idle", ShellIntegration::None);
    let shell_side = later(&rig, Duration::from_millis(100), |t| {
        t.foreground
            .lock()
            .unwrap()
            .insert("sh".into(), Foreground::Running);
        t.print("sh", "npm run dev\r\nlistening\r\n");
    });
    let args = json!({"nodeId": "sh", "command": "npm run dev", "wait": "idle"});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "running");
    assert_eq!(answer["output"], "npm run dev\r\nlistening\r\n");
    // Idle means 2 s without output (a count, not a timing limit).
    assert!(answer["durationMs"].as_u64().unwrap() >= 2_000, "{answer}");
}

#[test]
fn without_integration_the_answer_says_what_is_known() {
    let rig = shell("cmd-none", ShellIntegration::None);
    let shell_side = later(&rig, Duration::from_millis(100), |t| {
        t.foreground
            .lock()
            .unwrap()
            .insert("sh".into(), Foreground::Running);
        t.print("sh", "make\r\nerror: no rule\r\n");
        thread::sleep(Duration::from_millis(300));
        t.foreground
            .lock()
            .unwrap()
            .insert("sh".into(), Foreground::Shell);
        t.print("sh", "$ ");
    });
    let args = json!({"nodeId": "sh", "command": "make", "wait": "exit"});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "exited");
    assert_eq!(answer["exitCode"], Value::Null);
    assert_eq!(answer["commandId"], Value::Null);
    assert_eq!(answer["integration"], "none");
    assert_eq!(answer["output"], "make\r\nerror: no rule\r\n$ ");
    // A command too quick to be seen running: the shell has the terminal and went quiet.
    let shell_side = later(&rig, Duration::from_millis(100), |t| {
        t.print("sh", "true\r\n$ ")
    });
    let args = json!({"nodeId": "sh", "command": "true", "wait": "exit"});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "exited");
    // terminal_read has no commands to show.
    let read = json!({"nodeId": "sh", "command": "last"});
    let refused = run(&rig, "a", "terminal_read", read).unwrap_err();
    assert!(refused.contains("integration none"), "{refused}");
}

#[test]
fn a_closed_terminal_ends_the_wait() {
    let rig = shell("cmd-ended", ShellIntegration::Bash);
    let shell_side = later(&rig, Duration::from_millis(300), |t| {
        t.live.lock().unwrap().remove("sh");
    });
    let args = json!({"nodeId": "sh", "command": "exit", "wait": "exit"});
    let answer = run(&rig, "a", "terminal_submit", args).unwrap();
    shell_side.join().unwrap();
    assert_eq!(answer["state"], "ended");
}

#[test]
fn long_output_keeps_head_and_tail_and_terminal_read_shows_a_command() {
    let rig = shell("cmd-long", ShellIntegration::Bash);
    let long = format!("FIRST{}LAST", "x".repeat(50_000));
    rig.terminals.report(
        "sh",
        record(1, "cargo test", CommandState::Exited, Some(101), &long),
    );
    let read = json!({"nodeId": "sh", "command": "last", "maxChars": 1000});
    let answer = run(&rig, "a", "terminal_read", read).unwrap();
    let output = answer["output"].as_str().unwrap();
    assert!(output.chars().count() <= 1000, "{}", output.len());
    assert!(
        output.starts_with("FIRST") && output.ends_with("LAST"),
        "{output}"
    );
    assert!(output.contains("characters left out"), "{output}");
    assert_eq!(answer["truncated"], true);
    assert_eq!(
        (answer["state"].clone(), answer["exitCode"].clone()),
        (json!("exited"), json!(101))
    );
    let by_id = json!({"nodeId": "sh", "command": 1});
    assert_eq!(
        run(&rig, "a", "terminal_read", by_id).unwrap()["command"],
        "cargo test"
    );
    let missing = json!({"nodeId": "sh", "command": 2});
    assert!(run(&rig, "a", "terminal_read", missing).is_err());
}

#[test]
fn agent_terminals_keep_their_rules() {
    let rig = shell("cmd-agents", ShellIntegration::Bash);
    let args = json!({"nodeId": "a", "command": "ls", "wait": "exit"});
    let refused = run(&rig, "a", "terminal_submit", args).unwrap_err();
    assert!(refused.contains("own agent"), "{refused}");
    assert!(rig.terminals.written.lock().unwrap().is_empty());
}

/// Through the server: a waiting call leaves its project's worker, the bounds (one agent's
/// share, the project's places) refuse one more having typed nothing, and revoking the
/// sessions ends the waits.
#[test]
fn waits_leave_the_worker_are_bounded_and_end_on_revoke() {
    let agents = ["a", "b", "c", "d", "e"];
    let rig = shell_with_agents("cmd-server", ShellIntegration::Bash, &agents);
    let server = Arc::clone(rig.runtime.server());
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    let sessions: Vec<_> = agents
        .iter()
        .map(|node| server.provision(&who(node), status.clone(), false).unwrap())
        .collect();
    let submit_one_more = |session| {
        let args = json!({"nodeId": "sh", "command": "one more", "wait": "exit", "force": true});
        server.invoke(
            session,
            &json!({"operation": "terminal_submit", "args": args}),
        )
    };
    // Four agents each take their share; the fifth finds the project full.
    let waiting: Vec<_> = (0..WAITS_PER_PROJECT)
        .map(|i| {
            let session = sessions[i / WAITS_PER_AGENT].clone();
            if i % WAITS_PER_AGENT == 0 && i > 0 {
                // The agent before has its share: one more of its own is refused.
                let deadline = Instant::now() + Duration::from_secs(30);
                while server.waiting_calls() < i {
                    assert!(Instant::now() < deadline, "{i} calls never waited");
                    thread::sleep(Duration::from_millis(10));
                }
                let ToolResult::Err(refused) = submit_one_more(&sessions[i / WAITS_PER_AGENT - 1])
                else {
                    panic!("an agent took more than its share")
                };
                assert!(
                    refused.starts_with("This agent has 16 calls waiting already"),
                    "{refused}"
                );
            }
            let server = Arc::clone(&server);
            let args = json!({"nodeId": "sh", "command": format!("sleep {i}"), "wait": "exit", "force": true});
            let call = json!({"operation": "terminal_submit", "args": args});
            thread::spawn(move || server.invoke(&session, &call))
        })
        .collect();
    while server.waiting_calls() < WAITS_PER_PROJECT {
        thread::sleep(Duration::from_millis(10));
    }
    // The worker is free: other calls of the project are answered meanwhile.
    let list = json!({"operation": "canvas_list", "args": {}});
    assert!(matches!(
        server.invoke(&sessions[4], &list),
        ToolResult::Ok(_)
    ));
    let ToolResult::Err(refused) = submit_one_more(&sessions[4]) else {
        panic!("one past the bound was accepted")
    };
    assert!(
        refused.starts_with("Too many calls are waiting already (64 in this project"),
        "{refused}"
    );
    assert!(!written(&rig).contains(&"one more\r".to_string()));
    for node in agents {
        server.revoke(node);
    }
    for call in waiting {
        let ToolResult::Err(ended) = call.join().unwrap() else {
            panic!("a wait outlived its session")
        };
        assert!(ended.starts_with("Session revoked"), "{ended}");
    }
    while server.waiting_calls() > 0 {
        thread::sleep(Duration::from_millis(10));
    }
}
