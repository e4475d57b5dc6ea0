//! `serve` on the tmux backend (real tmux; skipped with a notice where it is not installed):
//! terminals that survive a restart with their output and programs, warm sessions, agent
//! credentials across restarts, sessions of removed nodes killed at start, a kept session
//! sized to its node at start, external attach through preferences.json, --kill-terminals
//! and stop-terminals. Every test's `Dirs` kills its private tmux server on drop, and the
//! tests check none is left where they end it.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

const TMUX: &[&str] = &["--terminals", "tmux", "--agent", "me"];

fn skip(name: &str) -> bool {
    if tmux_installed() {
        return false;
    }
    eprintln!("tmux is not installed: skipping {name}");
    true
}

/// `termsprawl-tools stop-terminals --data DATA`: (exit code, stderr).
fn stop_terminals(data: &std::path::Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg("stop-terminals")
        .arg("--data")
        .arg(data)
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

/// Every path under `dir` (itself included), sorted.
fn tree(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut paths = vec![dir.to_path_buf()];
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            paths.extend(tree(&entry.unwrap().path()));
        }
    }
    paths.sort();
    paths
}

#[test]
fn stop_terminals_where_none_run_says_so_and_creates_nothing() {
    if skip("stop_terminals_where_none_run_says_so_and_creates_nothing") {
        return;
    }
    let dirs = Dirs::new("tmuxstop0");
    let before = tree(&dirs.root);
    // An empty data folder, and one that does not exist (a mistyped --data).
    for data in [dirs.data.clone(), dirs.root.join("typo")] {
        let (code, said) = stop_terminals(&data);
        assert_eq!(code, Some(0), "{said}");
        assert_eq!(
            said,
            format!(
                "termsprawl-tools: no terminals' tmux server runs for {} (nothing to stop)\n",
                data.display()
            )
        );
        assert_eq!(tree(&dirs.root), before, "stop-terminals created something");
    }
}

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

fn open_terminal(serve: &Serve, dirs: &Dirs) -> String {
    let opened = serve.ok(dirs, "me", "terminal_open", json!({}));
    opened["nodeId"].as_str().unwrap().to_string()
}

/// The pid of the program running in `node`'s pane: the shell, the only child of the
/// pane filter that tmux runs (`serve` without `--no-query-filter`).
fn pane_pid(dirs: &Dirs, node: &str) -> u32 {
    let out = dirs.tmux(&[
        "display-message",
        "-p",
        "-t",
        &format!("={node}:"),
        "#{pane_pid}",
    ]);
    let filter: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{filter}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "termsprawl-tool", "tmux runs the pane filter");
    poll(
        "the pane filter's program",
        Duration::from_secs(5),
        || match children(filter)[..] {
            [program] => Some(program),
            _ => None,
        },
    )
}

fn fake_agent(dirs: &Dirs) {
    let agent = dirs.root.join("fake-agent");
    script(
        &agent,
        "#!/bin/sh\ncase \"$1\" in --help) echo 'usage: fake-agent'; exit 0;; --version) echo 'fake-agent 1.0'; exit 0;; esac\necho \"agent $TERMSPRAWL_NODE_ID up\"\nexec sleep 300\n",
    );
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"custom": {"executable": agent}}).to_string(),
    )
    .unwrap();
}

#[test]
fn a_restart_keeps_the_terminal_its_screen_and_its_program() {
    if skip("a_restart_keeps_the_terminal_its_screen_and_its_program") {
        return;
    }
    let dirs = Dirs::new("tmuxrs");
    let serve = Serve::start(&dirs, TMUX);
    let token = token(&dirs, "me");
    let term = open_terminal(&serve, &dirs);
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(
        session_without_shell(node(&listed, &term).unwrap()),
        json!({"backend": "tmux", "live": true, "warm": false})
    );
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo plain-$((6*7))"}),
    );
    wait_for_output(&serve, &dirs, &term, "\nplain-42");
    // Cursor movement: the read is the rendered screen, not the bytes.
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "clear; printf 'first\\nsecond\\n\\033[2A\\033[2Kreplaced\\n'"}),
    );
    // "first" was erased and overwritten; the prompt then overwrote the start of "second".
    let screen = wait_for_output(&serve, &dirs, &term, "replaced\n");
    assert!(!screen.contains("first"), "{screen:?}");
    assert!(screen
        .chars()
        .all(|c| c == '\n' || c == '\t' || !c.is_control()));
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "sleep 300"}),
    );
    let shell = pane_pid(&dirs, &term);
    poll("sleep to run", Duration::from_secs(5), || {
        runs_sleep(shell).then_some(())
    });

    assert!(serve.stop().success());
    assert!(!dirs.agent_tools().join("endpoint.json").exists());
    assert_eq!(
        dirs.tmux_sessions(),
        vec![term.clone()],
        "the session outlives serve"
    );
    assert!(runs_sleep(shell), "sleep still runs");

    let serve = Serve::start(&dirs, TMUX);
    assert_eq!(serve_harness::token(&dirs, "me"), token);
    let (status, _) = serve.call_token(&token, "session_info", json!({}));
    assert_eq!(status, 200);
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(
        session_without_shell(node(&listed, &term).unwrap()),
        json!({"backend": "tmux", "live": true, "warm": true})
    );
    let screen = read(&serve, &dirs, &term);
    assert!(
        screen.contains("replaced\n") && screen.contains("sleep 300"),
        "{screen:?}"
    );
    assert_eq!(
        pane_pid(&dirs, &term),
        shell,
        "the same shell, not a new one"
    );
    serve.ok(&dirs, "me", "terminal_interrupt", json!({"nodeId": term}));
    poll("sleep to end", Duration::from_secs(5), || {
        (!runs_sleep(shell)).then_some(())
    });
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo still-$((1+1))"}),
    );
    wait_for_output(&serve, &dirs, &term, "\nstill-2");
    // Closing it ends the session for good.
    serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": term}));
    assert!(dirs.tmux_sessions().is_empty());
    assert!(serve.stop().success());
    drop(dirs);
}

#[test]
fn agent_credentials_survive_with_their_session_or_need_setup() {
    if skip("agent_credentials_survive_with_their_session_or_need_setup") {
        return;
    }
    let dirs = Dirs::new("tmuxag");
    fake_agent(&dirs);
    let serve = Serve::start(&dirs, TMUX);
    let helper = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "custom"}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for_output(&serve, &dirs, &helper, &format!("agent {helper} up"));
    let helper_token = token(&dirs, &helper);
    assert!(serve.stop().success());

    // Its session survived, and so do its credentials: same token, still valid.
    let serve = Serve::start(&dirs, TMUX);
    assert_eq!(serve_harness::token(&dirs, &helper), helper_token);
    let (status, info) = serve.call_token(&helper_token, "session_info", json!({}));
    assert_eq!(status, 200, "{info}");
    assert_ne!(session(&dirs, &helper)["status"]["state"], "needs-setup");
    assert!(serve.stop().success());

    // A surviving agent whose credentials are gone predates tool integration.
    std::fs::remove_file(dirs.agent_tools().join(format!("sessions/{helper}.json"))).unwrap();
    let serve = Serve::start(&dirs, TMUX);
    let status = &session(&dirs, &helper)["status"];
    assert_eq!(status["state"], "needs-setup", "{status}");
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("launch it fresh"),
        "{status}"
    );
    let statuses = serve.ok(&dirs, "me", "agent_status", json!({}));
    assert!(statuses.to_string().contains("needs-setup"), "{statuses}");
    assert!(serve.stop().success());
}

#[test]
fn sessions_of_nodes_removed_while_down_are_killed_at_start() {
    if skip("sessions_of_nodes_removed_while_down_are_killed_at_start") {
        return;
    }
    let dirs = Dirs::new("tmuxrm");
    let serve = Serve::start(&dirs, TMUX);
    let kept = open_terminal(&serve, &dirs);
    let removed = open_terminal(&serve, &dirs);
    assert!(serve.stop().success());
    let mut sessions = dirs.tmux_sessions();
    sessions.sort();
    let mut both = vec![kept.clone(), removed.clone()];
    both.sort();
    assert_eq!(sessions, both);

    // While the host is down: the user deletes a node, and a stray session appears.
    let file = dirs.project_file();
    let mut canvas: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    canvas["nodes"]
        .as_array_mut()
        .unwrap()
        .retain(|n| n["id"] != removed);
    std::fs::write(&file, canvas.to_string()).unwrap();
    assert!(dirs
        .tmux(&["new-session", "-d", "-s", "stray"])
        .status
        .success());

    let serve = Serve::start(&dirs, TMUX);
    assert_eq!(dirs.tmux_sessions(), vec![kept.clone()]);
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(node(&listed, &kept).unwrap()["session"]["warm"], true);
    assert!(node(&listed, &removed).is_none());
    // --kill-terminals: this time shutdown ends them.
    assert!(serve.stop().success());
    let serve = Serve::start(
        &dirs,
        &["--terminals", "tmux", "--agent", "me", "--kill-terminals"],
    );
    assert!(dirs.tmux_running());
    assert!(serve.stop().success());
    assert!(
        !dirs.tmux_running(),
        "--kill-terminals left the tmux server running"
    );
}

#[test]
fn a_shell_node_without_a_session_gets_a_fresh_shell() {
    if skip("a_shell_node_without_a_session_gets_a_fresh_shell") {
        return;
    }
    let dirs = Dirs::new("tmuxfr");
    let serve = Serve::start(&dirs, TMUX);
    let term = open_terminal(&serve, &dirs);
    assert!(serve.stop().success());
    // stop-terminals ends every session while the host is down, and says so; a second
    // time there is nothing to stop.
    let (code, said) = stop_terminals(&dirs.data);
    assert_eq!(code, Some(0), "{said}");
    let data = dirs.data.display();
    assert_eq!(
        said,
        format!("termsprawl-tools: stopped the terminals' tmux server of {data}\n")
    );
    assert!(!dirs.tmux_running());
    let (code, said) = stop_terminals(&dirs.data);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("no terminals' tmux server runs"), "{said}");

    let serve = Serve::start(&dirs, TMUX);
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(
        session_without_shell(node(&listed, &term).unwrap()),
        json!({"backend": "tmux", "live": true, "warm": false})
    );
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo fresh-$((2+3))"}),
    );
    // Not "\nfresh-5": keys typed before the fresh shell's first prompt are echoed ahead
    // of it, and the result then follows the prompt on the same line.
    wait_for_output(&serve, &dirs, &term, "fresh-5");
    assert!(serve.stop().success());
}

#[test]
fn terminal_external_launches_the_configured_terminal_with_the_attach_command() {
    if skip("terminal_external_launches_the_configured_terminal_with_the_attach_command") {
        return;
    }
    let dirs = Dirs::new("tmuxext");
    let fake_terminal = dirs.root.join("fake-terminal");
    let record = dirs.root.join("attach-args");
    script(
        &fake_terminal,
        &format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\n", record.display()),
    );
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"externalTerminal": {"command": [fake_terminal, "--title", "x", "{attach}"]}})
            .to_string(),
    )
    .unwrap();
    let serve = Serve::start(&dirs, TMUX);
    let term = open_terminal(&serve, &dirs);
    let opened = serve.ok(&dirs, "me", "terminal_external", json!({"nodeId": term}));
    assert_eq!(opened["nodeId"], json!(term));
    assert!(opened["message"]
        .as_str()
        .unwrap()
        .contains("only detaches"));
    let args = poll("the fake terminal to run", Duration::from_secs(5), || {
        std::fs::read_to_string(&record)
            .ok()
            .filter(|s| !s.is_empty())
    });
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(&args[..2], &["--title", "x"]);
    let socket = dirs.tmux_socket();
    assert!(
        args.ends_with(&[
            "-S",
            socket.to_str().unwrap(),
            "attach-session",
            "-t",
            &format!("={term}")
        ]),
        "{args:?}"
    );
    // A broken preference is named.
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"externalTerminal": {"command": "xterm"}}).to_string(),
    )
    .unwrap();
    let error = serve.err(&dirs, "me", "terminal_external", json!({"nodeId": term}));
    assert!(
        error.contains("preferences.json") && error.contains("externalTerminal.command"),
        "{error}"
    );
    assert!(serve.stop().success());
}

/// The printf of `QUERIES_COMMAND` asks for device attributes (DA1, DA2), status and the
/// cursor position (DSR), the background colour (OSC 11), a mode (DECRQM) and the
/// version (XTVERSION): tmux answers each of these by typing into the pane's input.
const QUERIES_COMMAND: &str =
    r"printf '\033[c\033[>c\033[5n\033[6n\033]11;?\007\033[?2004$p\033[>q'; echo queries-sent";

/// The line of `screen` where `command` was typed, which must follow the prompt directly:
/// nothing was typed into the shell ahead of it.
fn assert_typed_after_the_prompt(screen: &str, command: &str) {
    let line = screen
        .lines()
        .find(|line| line.contains(command))
        .unwrap_or_else(|| panic!("{command:?} not on screen: {screen:?}"));
    assert!(
        line.ends_with(&format!("$ {command}")) || line.ends_with(&format!("# {command}")),
        "something was typed before {command:?}: {line:?} in {screen:?}"
    );
}

#[test]
fn terminal_queries_are_not_answered_into_the_shell() {
    if skip("terminal_queries_are_not_answered_into_the_shell") {
        return;
    }
    let dirs = Dirs::new("tmuxq");
    let serve = Serve::start(&dirs, TMUX);
    let term = open_terminal(&serve, &dirs);
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": QUERIES_COMMAND}),
    );
    wait_for_output(&serve, &dirs, &term, "\nqueries-sent");
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo ok-$((40+2))-marker"}),
    );
    let screen = wait_for_output(&serve, &dirs, &term, "\nok-42-marker");
    assert_typed_after_the_prompt(&screen, "echo ok-$((40+2))-marker");
    for reply in [
        "command not found",
        "1;2c",
        ";0c",
        "rgb:",
        "tmux 3",
        "$y",
        "1R",
    ] {
        assert!(!screen.contains(reply), "{reply:?} in {screen:?}");
    }
    assert!(serve.stop().success());
}

#[test]
fn a_kept_session_takes_its_nodes_size_at_start() {
    if skip("a_kept_session_takes_its_nodes_size_at_start") {
        return;
    }
    let dirs = Dirs::new("tmuxsz");
    let serve = Serve::start(&dirs, TMUX);
    let term = open_terminal(&serve, &dirs);
    assert!(serve.stop().success());
    // Sized otherwise while no host ran (as an earlier host sized every terminal).
    let target = format!("={term}:");
    let resized = dirs.tmux(&["resize-window", "-t", &target, "-x", "120", "-y", "32"]);
    assert!(resized.status.success(), "{resized:?}");

    let serve = Serve::start(&dirs, TMUX);
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let size = &node(&list, &term).unwrap()["size"];
    let grid = termsprawl_tools::host::canvas::Size {
        width: size["width"].as_f64().unwrap(),
        height: size["height"].as_f64().unwrap(),
    }
    .terminal_grid();
    let shown = dirs.tmux(&[
        "display-message",
        "-p",
        "-t",
        &target,
        "#{window_width}x#{window_height}",
    ]);
    let expected = format!("{}x{}", grid.cols, grid.rows);
    assert_eq!(String::from_utf8_lossy(&shown.stdout).trim(), expected);
    // The shell sees it (tmux may pass it on up to 250 ms after the first resize).
    poll(
        "the node's size in the shell",
        Duration::from_secs(20),
        || {
            let done = submit_and_wait(
                &serve,
                &dirs,
                &term,
                "echo size=$(tput cols)x$(tput lines)",
                json!({}),
            );
            let output = done["output"].as_str()?.to_string();
            output.contains(&format!("size={expected}")).then_some(())
        },
    );
    assert!(serve.stop().success());
}

/// Whether a `sleep` runs among `root`'s descendants (the pane's program, confined or not).
fn runs_sleep(root: u32) -> bool {
    let mut pending = vec![root];
    while let Some(pid) = pending.pop() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "sleep" {
            return true;
        }
        pending.extend(children(pid));
    }
    false
}
