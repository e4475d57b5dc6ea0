//! Agents cannot act as the person or as each other: from inside a terminal agent `me`
//! opened (confined by bubblewrap), on both backends, each attack of the person's state,
//! another agent's token and `serve` itself fails and changes nothing, while what a coding
//! agent needs (its own calls, git, `/tmp`) works; the same person's command from the
//! test (the person's own shell) works. `--isolation required` without bubblewrap refuses
//! with its reason, `off` starts terminals unconfined and says so. Skipped, with a notice,
//! where bubblewrap cannot confine (CI installs it).
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

const TOOLS: &str = env!("CARGO_BIN_EXE_termsprawl-tools");

/// Whether `bwrap` confines here (else the test is skipped, with a notice).
fn bwrap_works() -> bool {
    let works = Command::new("bwrap")
        .args([
            "--dev-bind",
            "/",
            "/",
            "--unshare-pid",
            "--proc",
            "/proc",
            "true",
        ])
        .status()
        .is_ok_and(|status| status.success());
    if !works {
        eprintln!("NOTICE: bubblewrap cannot confine here: skipping the isolation checks");
    }
    works
}

/// `line` typed into `term` and waited for: (exit code, output).
fn run(serve: &Serve, dirs: &Dirs, term: &str, line: &str) -> (Option<i64>, String) {
    let answer = submit_and_wait(serve, dirs, term, line, json!({}));
    assert_eq!(answer["state"], "exited", "{line}: {answer}");
    let output = answer["output"].as_str().unwrap_or_default().to_string();
    (answer["exitCode"].as_i64(), output)
}

/// `line` fails inside: a non-zero status, and `said` in its output.
fn fails(serve: &Serve, dirs: &Dirs, term: &str, line: &str, said: &str) {
    let (code, output) = run(serve, dirs, term, line);
    assert_ne!(code, Some(0), "{line} worked inside: {output}");
    assert!(
        output.contains(said),
        "{line}: {output:?} does not say {said:?}"
    );
}

/// `operation` with `args` called by agent `me` on a thread of its own, where the policy
/// holds it: the thread (whose answer comes once the person decides) and the call as
/// `approvals list --json` shows it.
fn held_call(
    serve: &Serve,
    dirs: &Dirs,
    operation: &str,
    args: Value,
) -> (std::thread::JoinHandle<(u16, Value)>, Value) {
    let (port, token) = (serve.port, token(dirs, "me"));
    let body = json!({"operation": operation, "args": args});
    let asker = std::thread::spawn(move || post(port, &token, &body));
    let call = poll("the held call", Duration::from_secs(10), || {
        let out = person(dirs, &["approvals", "list", "--json"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str::<Value>(text.lines().next()?).ok()
    });
    (asker, call)
}

/// A shell terminal agent `node` opens, at its prompt with integration.
fn open_terminal(serve: &Serve, dirs: &Dirs, node: &str) -> String {
    let term = serve.ok(dirs, node, "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    if node == "me" {
        poll("the shell's first prompt", Duration::from_secs(15), || {
            let answer = submit_and_wait(serve, dirs, &term, "true", json!({}));
            (answer["integration"] != "none").then_some(())
        });
    }
    term
}

fn person(dirs: &Dirs, words: &[&str]) -> std::process::Output {
    Command::new(TOOLS)
        .args(words)
        .arg("--data")
        .arg(&dirs.data)
        .env_remove("TERMSPRAWL_CONFINED")
        .output()
        .unwrap()
}

/// What the kernel says to each attack under a mechanism: (a hidden file, a signal to
/// `serve`, its `/proc`, a write into `.termsprawl`).
fn refusals(mechanism: &str) -> [&'static str; 4] {
    match mechanism {
        "namespaces" => [
            "No such file",
            "No such process",
            "No such file",
            "Read-only file system",
        ],
        _ => [
            "Permission denied",
            "Operation not permitted",
            "Permission denied",
            "Permission denied",
        ],
    }
}

/// Whether Landlock with signal scoping (ABI 6) works here (else skipped, with a notice).
fn landlock_scopes_signals() -> bool {
    let probe = Command::new("python3")
        .args([
            "-c",
            "import ctypes; print(ctypes.CDLL(None).syscall(444, None, 0, 1))",
        ])
        .output();
    let abi = probe.ok().and_then(|out| {
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<i64>()
            .ok()
    });
    let works = abi.is_some_and(|abi| abi >= 6);
    if !works {
        eprintln!("NOTICE: Landlock ABI 6 is not available here ({abi:?}): skipping");
    }
    works
}

/// The attack list from inside a terminal agent `me` opened, confined by `mechanism`
/// (`namespaces`: bubblewrap, or `landlock`) on `backend`.
fn attacks_fail_inside_and_the_person_still_acts(backend: &str, mechanism: &str) {
    // Under Landlock nothing new can be made directly in the folders on the way to the
    // data folder: keep `/tmp` off that way, as a home folder's data folder does.
    let base = match mechanism {
        "landlock" => "/var/tmp",
        _ => "/tmp",
    };
    let dirs = Dirs::new_in(
        std::path::Path::new(base),
        &format!("iso-{backend}-{mechanism}"),
    );
    let [hidden, no_signal, no_proc, read_only] = refusals(mechanism);
    let isolation = match mechanism {
        "namespaces" => "auto",
        _ => "landlock",
    };
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&dirs.project)
            .status();
        assert!(status.unwrap().success(), "git {args:?}");
    };
    git(&["init", "-q", "."]);
    let serve = Serve::start(
        &dirs,
        &[
            "--agent",
            "me",
            "--agent",
            "b",
            "--terminals",
            backend,
            "--policy",
            "careful",
            "--isolation",
            isolation,
        ],
    );
    assert_eq!(
        serve.ready["isolation"]["mode"], mechanism,
        "{}",
        serve.ready
    );
    let term = open_terminal(&serve, &dirs, "me");
    let b_term = open_terminal(&serve, &dirs, "b");
    let tools = dirs.agent_tools();
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let isolation = &node(&listed, &term).unwrap()["session"]["isolation"];
    assert_eq!(
        (&isolation["mode"], &isolation["boundary"]),
        (&json!(mechanism), &json!(true)),
        "{listed}"
    );

    // Another agent's token; the tmux socket; serve's processes.
    let b_file = tools.join("sessions/b.json");
    fails(
        &serve,
        &dirs,
        &term,
        &format!("cat {}", b_file.display()),
        hidden,
    );
    let socket = tools.join("tmux/socket");
    let send = format!(
        "tmux -S {} send-keys -t {b_term} 'echo pwned' Enter",
        socket.display()
    );
    fails(&serve, &dirs, &term, &send, "");
    let pid = serve.pid();
    fails(
        &serve,
        &dirs,
        &term,
        &format!("kill -STOP {pid}"),
        no_signal,
    );
    let environ = format!("cat /proc/{pid}/environ");
    fails(&serve, &dirs, &term, &environ, no_proc);
    serve.ok(&dirs, "b", "canvas_list", json!({})); // serve was not stopped

    // A call `me` asked for, held for the person: `me` cannot answer it itself.
    let args = json!({"nodeId": b_term, "text": "echo from-me\r"});
    let (asker, call) = held_call(&serve, &dirs, "terminal_input", args);
    let id = call["id"].as_str().unwrap().to_string();
    let data = dirs.data.display();
    let ctl = format!("{TOOLS} approvals allow {id} --data {data}");
    fails(&serve, &dirs, &term, &ctl, "confined terminal");
    fails(
        &serve,
        &dirs,
        &term,
        &format!("env -u TERMSPRAWL_CONFINED {ctl}"),
        "",
    );
    let policy = format!(
        "env -u TERMSPRAWL_CONFINED {TOOLS} policy set terminals-others allow --data {data}"
    );
    fails(&serve, &dirs, &term, &policy, "");
    let control = format!("env -u TERMSPRAWL_CONFINED {TOOLS} browser-control on --data {data}");
    fails(&serve, &dirs, &term, &control, "");
    let link = format!("env -u TERMSPRAWL_CONFINED {TOOLS} link me b --messages");
    fails(&serve, &dirs, &term, &link, "");
    let hand_made = "mkdir -p .termsprawl/links && echo '{}' > .termsprawl/links/me--b.json";
    fails(&serve, &dirs, &term, hand_made, read_only);
    let still = person(&dirs, &["approvals", "list", "--json"]);
    assert!(
        String::from_utf8_lossy(&still.stdout).contains(&id),
        "the held call is still waiting"
    );
    assert!(!asker.is_finished(), "the held call was answered");
    assert!(!tools.join("browser-control.json").exists());
    assert!(!dirs.project.join(".termsprawl/links/me--b.json").exists());

    // The person, from their own shell, answers it: it runs once.
    let allowed = person(&dirs, &["approvals", "allow", &id]);
    assert!(allowed.status.success(), "{allowed:?}");
    let (status, answer) = asker.join().unwrap();
    assert_eq!((status, &answer["ok"]), (200, &json!(true)), "{answer}");

    // What a coding agent needs works: its own calls, git, /tmp.
    let (code, info) = run(&serve, &dirs, &term, "$TERMSPRAWL_CTL call session_info");
    assert_eq!(code, Some(0), "{info}");
    // `me` itself runs outside serve (`--agent`): its own status says so.
    assert!(
        info.contains("\"nodeId\": \"me\"") && info.contains("serve --agent"),
        "{info}"
    );
    let commit =
        "git -c user.email=a@b -c user.name=a commit -q --allow-empty -m inside && echo ok";
    assert_eq!(
        run(&serve, &dirs, &term, commit),
        (Some(0), "ok\n".to_string())
    );
    let tmp = format!("echo hi > /tmp/iso-{backend}-{pid} && cat /tmp/iso-{backend}-{pid}");
    assert_eq!(
        run(&serve, &dirs, &term, &tmp),
        (Some(0), "hi\n".to_string())
    );
    serve.stop();
}

#[test]
fn inside_a_confined_pty_terminal_the_person_and_other_agents_are_out_of_reach() {
    if bwrap_works() {
        attacks_fail_inside_and_the_person_still_acts("pty", "namespaces");
    }
}

#[test]
fn inside_a_pty_terminal_confined_by_landlock_the_person_and_other_agents_are_out_of_reach() {
    if landlock_scopes_signals() {
        attacks_fail_inside_and_the_person_still_acts("pty", "landlock");
    }
}

#[test]
fn inside_a_confined_tmux_terminal_the_person_and_other_agents_are_out_of_reach() {
    if !tmux_installed() {
        eprintln!("NOTICE: tmux is not installed: skipping");
        return;
    }
    if bwrap_works() {
        attacks_fail_inside_and_the_person_still_acts("tmux", "namespaces");
    }
}

/// `--isolation required` where bubblewrap is missing: Landlock confines PTY terminals (a
/// boundary from ABI 6), and a tmux terminal, which Landlock cannot keep from the tmux
/// server's socket, is refused with why and what to do; `off` confines nothing and says so.
#[test]
fn required_refuses_without_a_boundary_and_off_says_it_confines_nothing() {
    let dirs = Dirs::new("iso-required");
    // No bubblewrap on this PATH; tmux alone.
    let bin = dirs.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let tmux = tmux_installed();
    if tmux {
        let found = Command::new("sh")
            .args(["-c", "command -v tmux"])
            .output()
            .unwrap();
        let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
        std::os::unix::fs::symlink(path, bin.join("tmux")).unwrap();
    }
    let env = [("PATH", bin.to_str().unwrap())];
    let landlock = landlock_scopes_signals();
    for backend in ["pty", "tmux"] {
        if backend == "tmux" && !tmux {
            continue;
        }
        let args = [
            "--agent",
            "me",
            "--terminals",
            backend,
            "--isolation",
            "required",
        ];
        let serve = Serve::start_with_env(&dirs, &args, &env);
        let why = serve.ready["isolation"]["why"].as_str().unwrap_or_default();
        assert!(
            why.contains("apt-get install bubblewrap"),
            "{}",
            serve.ready
        );
        if landlock && backend == "pty" {
            assert_eq!(
                serve.ready["isolation"]["mode"], "landlock",
                "{}",
                serve.ready
            );
            let opened = serve.ok(&dirs, "me", "terminal_open", json!({}));
            let term = opened["nodeId"].as_str().unwrap().to_string();
            let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
            let isolation = &node(&listed, &term).unwrap()["session"]["isolation"];
            assert_eq!(
                (&isolation["mode"], &isolation["boundary"]),
                (&json!("landlock"), &json!(true)),
                "{listed}"
            );
        } else {
            let refused = serve.err(&dirs, "me", "terminal_open", json!({}));
            let said = match landlock {
                true => "tmux server's socket",
                false => "apt-get install bubblewrap",
            };
            assert!(
                refused.contains("--isolation required") && refused.contains(said),
                "{refused}"
            );
        }
        serve.stop();
    }

    let dirs = Dirs::new("iso-off");
    let serve = Serve::start(
        &dirs,
        &["--agent", "me", "--terminals", "pty", "--isolation", "off"],
    );
    assert_eq!(
        serve.ready["isolation"]["setting"], "off",
        "{}",
        serve.ready
    );
    let opened = serve.ok(&dirs, "me", "terminal_open", json!({}));
    // An unconfined terminal's answer says so (a confined one's is `{nodeId}` only).
    assert_eq!(opened["isolation"]["mode"], "none", "{opened}");
    let term = opened["nodeId"].as_str().unwrap().to_string();
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let isolation = &node(&listed, &term).unwrap()["session"]["isolation"];
    assert_eq!(isolation["mode"], "none", "{listed}");
    let why = isolation["why"].as_str().unwrap();
    assert!(why.contains("--isolation off"), "{listed}");
    // The trail records that it ran unconfined.
    let trail = poll("the trail's line", Duration::from_secs(10), || {
        let project = serve.project_id();
        let out = person(&dirs, &["activity", "--json", "--project-id", &project]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.contains("\"unconfined\"").then_some(text)
    });
    assert!(trail.contains("--isolation off"), "{trail}");
    assert!(
        serve.stderr().contains("NOT confined"),
        "{}",
        serve.stderr()
    );
    // An agent started outside serve says it is not confined.
    let info = serve.ok(&dirs, "me", "session_info", json!({}));
    assert_eq!(info["isolation"]["mode"], "none", "{info}");
    serve.stop();
}

/// An agent `agent_launch` starts runs confined: its own calls work and say so
/// (`session_info`'s `isolation`), its launch folder and session file are there, the
/// rest of the data folder (the launching agent's token) is not.
#[test]
fn a_launched_agent_runs_confined_and_its_own_calls_say_so() {
    if !bwrap_works() {
        return;
    }
    let dirs = Dirs::new("iso-launch");
    let agent = dirs.root.join("fake-agent");
    let me_file = dirs.agent_tools().join("sessions/me.json");
    script(
        &agent,
        &format!(
            "#!/bin/sh\ncase \"$1\" in --help) echo 'usage: fake-agent'; exit 0;; --version) echo 'fake-agent 1.2.3'; exit 0;; esac\n\
             \"$TERMSPRAWL_CTL\" call session_info | tr -d ' \\n'; echo\n\
             ls \"$(dirname \"$TERMSPRAWL_SYSTEM_PROMPT_FILE\")\" | tr '\\n' ' '; echo\n\
             cat {} || echo no-token-of-me\nexec sleep 60\n",
            me_file.display()
        ),
    );
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"custom": {"executable": agent}}).to_string(),
    )
    .unwrap();
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let launched = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "custom"}));
    let helper = launched["nodeId"].as_str().unwrap().to_string();
    let output = poll("the agent's checks", Duration::from_secs(10), || {
        let read = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": helper}));
        let output = read["output"].as_str().unwrap().to_string();
        output.contains("no-token-of-me").then_some(output)
    });
    assert!(
        output.contains(&format!("\"nodeId\":\"{helper}\""))
            && output.contains("\"mode\":\"namespaces\""),
        "{output}"
    );
    assert!(output.contains("termsprawl-system.md"), "{output}");
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(
        node(&listed, &helper).unwrap()["session"]["isolation"]["mode"],
        "namespaces",
        "{listed}"
    );
    serve.stop();
}

/// A terminal the person opens from the view is theirs: not confined, and it says so. An
/// agent typing into it would run commands with the person's authority, so under the
/// default policy the call waits for the person (`terminals-unconfined`), who can refuse.
#[test]
fn typing_into_the_persons_own_terminal_waits_for_the_person() {
    if !bwrap_works() {
        return;
    }
    let dirs = Dirs::new("iso-person");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let (port, key) = view::view_parts(&view::view_url(&serve));
    let (status, opened) = view::act(port, &key, "terminal_open", json!({}));
    assert_eq!(status, 200, "{opened}");
    let term = opened["value"]["nodeId"]
        .as_str()
        .unwrap_or_else(|| panic!("{opened}"));
    let term = term.to_string();
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let isolation = &node(&listed, &term).unwrap()["session"]["isolation"];
    assert_eq!(isolation["mode"], "none", "{listed}");
    assert!(
        isolation["why"].as_str().unwrap().contains("person"),
        "{listed}"
    );
    let args = json!({"nodeId": term, "command": "echo typed-by-me"});
    let (asker, call) = held_call(&serve, &dirs, "terminal_submit", args);
    assert_eq!(call["class"], "terminals-unconfined", "{call}");
    let id = call["id"].as_str().unwrap();
    let denied = person(
        &dirs,
        &["approvals", "deny", id, "--reason", "not in my shell"],
    );
    assert!(denied.status.success(), "{denied:?}");
    let (_, answer) = asker.join().unwrap();
    assert_eq!(answer["ok"], false, "{answer}");
    let screen = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": term}));
    assert!(
        !screen["output"].as_str().unwrap().contains("typed-by-me"),
        "{screen}"
    );
    serve.stop();
}

/// As an unprivileged user (here `nobody`, when the tests run as root, as in CI), where
/// bubblewrap makes a user namespace first: the same boundary holds, and an agent's own
/// sandbox (a nested bubblewrap, as Codex runs its commands) starts inside ours. Skipped,
/// with a notice, when not root (the other tests then ran unprivileged already) or without
/// `setpriv`.
#[test]
fn an_unprivileged_users_agents_are_confined_too_and_can_nest_their_own_sandbox() {
    if unprivileged_user_can_run() && bwrap_works() {
        unprivileged_users_agents_are_confined("namespaces");
    }
}

/// Under Landlock, as an unprivileged user: the same refusals; an agent's own bubblewrap
/// cannot start (Landlock refuses mounts), as the guide says.
#[test]
fn an_unprivileged_users_agents_are_confined_by_landlock_too() {
    if unprivileged_user_can_run() && landlock_scopes_signals() {
        unprivileged_users_agents_are_confined("landlock");
    }
}

/// Whether this test runs as root with `setpriv` (to become `nobody`); else a notice.
fn unprivileged_user_can_run() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"));
    let setpriv = std::path::Path::new("/usr/bin/setpriv").exists();
    if !root || !setpriv {
        eprintln!("NOTICE: not root, or no setpriv: the unprivileged run is skipped");
    }
    root && setpriv
}

fn unprivileged_users_agents_are_confined(mechanism: &str) {
    let [hidden, no_signal, _, read_only] = refusals(mechanism);
    let (base, isolation) = match mechanism {
        "landlock" => ("/var/tmp", "landlock"),
        _ => ("/tmp", "auto"),
    };
    let dirs = Dirs::new_in(
        std::path::Path::new(base),
        &format!("iso-nobody-{mechanism}"),
    );
    // `nobody` owns the scratch folders and runs copies of the binaries it can reach.
    let bin = dirs.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["termsprawl-tools", "termsprawlctl"] {
        let built = std::path::Path::new(TOOLS).with_file_name(name);
        std::fs::copy(&built, bin.join(name)).unwrap();
    }
    let owned = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&dirs.root)
        .status();
    assert!(owned.unwrap().success());
    let mut command = Command::new("/usr/bin/setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(bin.join("termsprawl-tools"))
        .args(["serve", "--data"])
        .arg(&dirs.data)
        .arg("--project")
        .arg(&dirs.project)
        .args(["--agent", "me", "--agent", "b", "--terminals", "pty"])
        .args(["--isolation", isolation])
        .env("HOME", &dirs.root)
        .env("SHELL", "/bin/bash")
        .env_remove("TERMSPRAWL_SESSION_FILE")
        .current_dir(&dirs.project)
        .stdin(std::process::Stdio::null());
    let serve = Serve::start_command(command);
    assert_eq!(
        serve.ready["isolation"]["mode"], mechanism,
        "{}",
        serve.ready
    );
    let term = open_terminal(&serve, &dirs, "me");
    let (code, who) = run(&serve, &dirs, &term, "id -u");
    assert_eq!((code, who.trim()), (Some(0), "65534"));
    let b_file = dirs.agent_tools().join("sessions/b.json");
    fails(
        &serve,
        &dirs,
        &term,
        &format!("cat {}", b_file.display()),
        hidden,
    );
    let pid = serve.pid();
    fails(
        &serve,
        &dirs,
        &term,
        &format!("kill -STOP {pid}"),
        no_signal,
    );
    fails(&serve, &dirs, &term, "echo x > .termsprawl/x", read_only);
    let nested = "bwrap --ro-bind / / --unshare-pid --proc /proc true && echo nested-ok";
    match mechanism {
        "namespaces" => assert_eq!(
            run(&serve, &dirs, &term, nested),
            (Some(0), "nested-ok\n".into())
        ),
        _ => fails(&serve, &dirs, &term, nested, "Operation not permitted"),
    }
    serve.stop();
}

/// Landlock on tmux: the files are kept out as on PTY, but the tmux server's socket is not,
/// so the terminal says it is no boundary, and `serve` warns.
#[test]
fn a_tmux_terminal_under_landlock_says_it_is_no_boundary() {
    if !tmux_installed() || !landlock_scopes_signals() {
        eprintln!("NOTICE: no tmux or no Landlock ABI 6: skipping");
        return;
    }
    let dirs = Dirs::new_in(std::path::Path::new("/var/tmp"), "iso-tmux-landlock");
    let args = [
        "--agent",
        "me",
        "--agent",
        "b",
        "--terminals",
        "tmux",
        "--isolation",
        "landlock",
    ];
    let serve = Serve::start(&dirs, &args);
    let term = open_terminal(&serve, &dirs, "me");
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let isolation = &node(&listed, &term).unwrap()["session"]["isolation"];
    assert_eq!(
        (&isolation["mode"], &isolation["boundary"]),
        (&json!("landlock"), &json!(false)),
        "{listed}"
    );
    let why = isolation["why"].as_str().unwrap();
    assert!(why.contains("tmux server's socket"), "{why}");
    let b_file = dirs.agent_tools().join("sessions/b.json");
    let [hidden, ..] = refusals("landlock");
    fails(
        &serve,
        &dirs,
        &term,
        &format!("cat {}", b_file.display()),
        hidden,
    );
    assert!(
        serve.stderr().contains("NOT a boundary"),
        "{}",
        serve.stderr()
    );
    serve.stop();
}
