//! The tmux backend against a real tmux: each test runs its own private server in its own
//! temp directory and ends it (checking nothing is left), even when the test fails.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use termsprawl_tools::host::terminals::tmux::{TmuxError, TmuxServer};

const WAIT: Duration = Duration::from_secs(5);

/// A temp directory with a tmux server in `<dir>/tmux`; Drop kills the server and removes
/// the directory, so a failing test leaves nothing behind.
struct Fixture {
    dir: PathBuf,
    tmux: TmuxServer,
}

impl Fixture {
    /// `None` (after a notice) when tmux is not installed.
    fn new(name: &str) -> Option<Fixture> {
        if !TmuxServer::available() {
            eprintln!("tmux is not installed: skipping {name}");
            return None;
        }
        // Short on purpose: the socket path must fit a Unix socket address.
        let dir = PathBuf::from(format!("/tmp/tstt-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let tmux = TmuxServer::new(&dir.join("tmux")).unwrap();
        Some(Fixture { dir, tmux })
    }

    /// A new server instance on the same directory, as a restarted host makes.
    fn restart(&mut self) {
        self.tmux = TmuxServer::new(&self.dir.join("tmux")).unwrap();
    }

    /// Kills the server and checks that neither it nor its socket answers any more.
    fn finish(self) {
        let pid = self.server_pid();
        self.tmux.kill_server().unwrap();
        let ls = tmux_ls(self.tmux.socket());
        assert!(!ls.status.success(), "tmux still answers after kill_server");
        if let Some(pid) = pid {
            assert!(
                wait_for(|| !process_running(pid)),
                "tmux server {pid} still running"
            );
        }
        // Drop kills again (a no-op now) and removes the directory.
    }

    fn server_pid(&self) -> Option<u32> {
        let out = Command::new("tmux")
            .env_remove("TMUX")
            .arg("-S")
            .arg(self.tmux.socket())
            .args(["display-message", "-p", "#{pid}"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.tmux.kill_server();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn tmux_ls(socket: &Path) -> std::process::Output {
    Command::new("tmux")
        .env_remove("TMUX")
        .arg("-S")
        .arg(socket)
        .arg("ls")
        .output()
        .unwrap()
}

fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(25));
    }
}

/// Polls `capture` until it contains `needle`; returns the last capture either way.
fn capture_until(tmux: &TmuxServer, node: &str, needle: &str) -> String {
    let mut screen = String::new();
    wait_for(|| {
        screen = tmux.capture(node, 20_000).unwrap_or_default();
        screen.contains(needle)
    });
    screen
}

/// Running and not a zombie.
fn process_running(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// A child of `parent` whose command name is `comm`.
fn child_named(parent: u32, comm: &str) -> Option<u32> {
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some((head, rest))) = (stat.find('('), stat.rsplit_once(')')) else {
            continue;
        };
        let name = &head[open + 1..];
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if name == comm && ppid == Some(parent) {
            return Some(pid);
        }
    }
    None
}

fn pane_pid(tmux: &TmuxServer, node: &str) -> u32 {
    tmux.session(node)
        .unwrap()
        .expect("session exists")
        .pane_pid
}

/// Writes an executable script that records its arguments, one a line, to `<path>.args`.
fn fake_terminal(path: &Path, exit_code: u8) {
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}.args'\nexit {exit_code}\n",
        path.display()
    );
    fs::write(path, script).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

fn recorded_args(path: &Path) -> Vec<String> {
    let file = PathBuf::from(format!("{}.args", path.display()));
    let mut text = String::new();
    wait_for(|| {
        text = fs::read_to_string(&file).unwrap_or_default();
        !text.is_empty()
    });
    text.lines().map(str::to_string).collect()
}

#[test]
fn shell_runs_an_echo_with_its_env_in_its_folder() {
    let Some(fx) = Fixture::new("echo") else {
        return;
    };
    let env = [
        ("TERMSPRAWL_NODE_ID".to_string(), "shell-1".to_string()),
        ("GREETING".to_string(), "hello there".to_string()),
    ];
    fx.tmux
        .open("shell-1", &fx.dir, &env, None, 100, 30)
        .unwrap();
    assert!(wait_for(|| fx.tmux.has_ready_session("shell-1").unwrap()));
    assert!(fx.tmux.has_live_session("shell-1").unwrap());

    fx.tmux
        .submit(
            "shell-1",
            "echo marker-$((6*7)) \"$GREETING\" $TERMSPRAWL_NODE_ID \"$(pwd)\"",
        )
        .unwrap();
    let expected = format!("marker-42 hello there shell-1 {}", fx.dir.display());
    let screen = capture_until(&fx.tmux, "shell-1", &expected);
    assert!(screen.contains(&expected), "screen:\n{screen}");

    // A short read is the end of a full one (retried while the prompt is still drawing).
    let (mut tail, mut full) = (String::new(), String::new());
    let consistent = wait_for(|| {
        tail = fx.tmux.capture("shell-1", 12).unwrap();
        full = fx.tmux.capture("shell-1", 20_000).unwrap();
        full.ends_with(&tail)
    });
    assert!(consistent, "{tail:?} is not the end of {full:?}");
    assert_eq!(tail.chars().count(), 12, "{tail:?}");
    fx.finish();
}

/// The canvas view's read: every session and the screens asked for, in one tmux call;
/// a node without a session (the call then fails part way) costs calls, not screens.
#[test]
fn sessions_and_screens_come_in_one_call_and_survive_a_missing_node() {
    let Some(fx) = Fixture::new("screens") else {
        return;
    };
    for (node, text) in [("a-1", "first"), ("b-2", "second")] {
        let command = format!("printf '%s-screen\\n' {text}; exec sleep 60");
        fx.tmux
            .open(node, &fx.dir, &[], Some(&command), 80, 24)
            .unwrap();
        capture_until(&fx.tmux, node, &format!("{text}-screen"));
    }
    let (sessions, screens) = fx.tmux.sessions_and_screens(&["a-1", "b-2"]).unwrap();
    let mut names: Vec<&str> = sessions.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["a-1", "b-2"]);
    assert_eq!(screens["a-1"], fx.tmux.capture_screen("a-1").unwrap());
    assert_eq!(screens["a-1"], "first-screen");
    assert_eq!(screens["b-2"], "second-screen");
    for nodes in [&["a-1", "gone-3", "b-2"][..], &["gone-3"][..], &[][..]] {
        let (sessions, screens) = fx.tmux.sessions_and_screens(nodes).unwrap();
        assert_eq!(sessions.len(), 2, "{nodes:?}");
        let wanted: Vec<&&str> = nodes.iter().filter(|n| **n != "gone-3").collect();
        assert_eq!(screens.len(), wanted.len(), "{nodes:?}: {screens:?}");
    }
    fx.finish();
}

#[test]
fn literal_text_arrives_unchanged_even_long_or_ending_in_a_semicolon() {
    let Some(fx) = Fixture::new("literal") else {
        return;
    };
    let out = fx.dir.join("typed.txt");
    let command = format!("cat > '{}'", out.display());
    fx.tmux
        .open("cat-1", &fx.dir, &[], Some(&command), 80, 24)
        .unwrap();
    assert!(wait_for(|| fx.tmux.has_ready_session("cat-1").unwrap()));
    // Over tmux's 16 KiB command limit (sent in pieces), with key names that must stay text.
    let mut text = String::new();
    for i in 0..800 {
        text.push_str(&format!("line {i:04} Enter C-c {{x}} é;\n"));
    }
    assert!(text.len() > 16 * 1024);
    fx.tmux.send_literal("cat-1", &text).unwrap();
    // Pieces ending in `;` (tmux's command separator) and `\;` (its escape), and a lone `;`.
    for piece in [
        "ends with a semicolon;",
        " and a backslash-semicolon \\;",
        ";",
        "\n",
    ] {
        fx.tmux.send_literal("cat-1", piece).unwrap();
        text.push_str(piece);
    }
    let mut got = String::new();
    let arrived = wait_for(|| {
        got = fs::read_to_string(&out).unwrap_or_default();
        got == text
    });
    assert!(
        arrived,
        "typed {} bytes, file has {}",
        text.len(),
        got.len()
    );
    fx.finish();
}

#[test]
fn capture_returns_the_rendered_screen_of_a_full_screen_program() {
    let Some(fx) = Fixture::new("screen") else {
        return;
    };
    // Alternate screen, clear, home, cursor positioning and a carriage-return overwrite.
    let full_screen = r#"printf 'BEFORE\n'; printf '\033[?1049h\033[2J\033[HTOP\n\033[5;10HXYZ'; printf 'AAAA\rBB'; exec sleep 30"#;
    fx.tmux
        .open("fs-1", &fx.dir, &[], Some(full_screen), 80, 24)
        .unwrap();
    // The three printf calls reach tmux as separate writes: wait for the last one.
    let screen = capture_until(&fx.tmux, "fs-1", "BB       XYZ");
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.first(), Some(&"TOP"), "screen:\n{screen}");
    assert_eq!(lines.get(4), Some(&"BB       XYZAAAA"), "screen:\n{screen}");
    assert!(!screen.contains("BEFORE"), "screen:\n{screen}");

    // On the normal screen: a progress line redrawn in place reads as its final version,
    // and text printed after a clear comes after whatever scrolled off.
    let redraw = r#"printf 'progress 10%%\rprogress 99%%\nOLD\n\033[2J\033[HNEW\n'; exec sleep 30"#;
    fx.tmux
        .open("fs-2", &fx.dir, &[], Some(redraw), 80, 24)
        .unwrap();
    let screen = capture_until(&fx.tmux, "fs-2", "NEW");
    assert!(screen.contains("progress 99%"), "screen:\n{screen}");
    assert!(!screen.contains("progress 10%"), "screen:\n{screen}");
    assert!(screen.trim_end().ends_with("NEW"), "screen:\n{screen}");
    fx.finish();
}

#[test]
fn a_restarted_host_finds_the_session_warm_with_its_output() {
    let Some(mut fx) = Fixture::new("restart") else {
        return;
    };
    let first_host_started = SystemTime::now();
    fx.tmux
        .open(
            "agent-1",
            &fx.dir,
            &[],
            Some("echo started-$((1+1)); exec sleep 30"),
            80,
            24,
        )
        .unwrap();
    capture_until(&fx.tmux, "agent-1", "started-2");
    assert!(!fx.tmux.is_warm("agent-1", first_host_started).unwrap());
    let pid = pane_pid(&fx.tmux, "agent-1");

    fx.restart();
    let second_host_started = SystemTime::now();
    let sessions = fx.tmux.sessions().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].name, "agent-1");
    assert_eq!(sessions[0].pane_pid, pid);
    assert!(process_running(pid));
    assert!(fx.tmux.is_warm("agent-1", second_host_started).unwrap());
    // Not warm relative to a host that started before the session was created.
    assert!(!fx.tmux.is_warm("agent-1", UNIX_EPOCH).unwrap());
    assert!(!fx.tmux.is_warm("other-1", second_host_started).unwrap());
    assert!(fx.tmux.has_live_session("agent-1").unwrap());
    assert!(fx.tmux.has_ready_session("agent-1").unwrap());
    let screen = fx.tmux.capture("agent-1", 1000).unwrap();
    assert!(screen.contains("started-2"), "screen:\n{screen}");
    fx.finish();
}

#[test]
fn adopt_kills_sessions_whose_node_is_gone() {
    let Some(fx) = Fixture::new("adopt") else {
        return;
    };
    for node in ["keep-1", "gone-1", "keep-2"] {
        fx.tmux
            .open(node, &fx.dir, &[], Some("exec sleep 30"), 80, 24)
            .unwrap();
    }
    let gone_pid = pane_pid(&fx.tmux, "gone-1");
    let mut kept: Vec<String> = fx
        .tmux
        .adopt(&|node| node.starts_with("keep"))
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    kept.sort();
    assert_eq!(kept, ["keep-1", "keep-2"]);
    let mut left: Vec<String> = fx
        .tmux
        .sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    left.sort();
    assert_eq!(left, ["keep-1", "keep-2"]);
    assert!(!fx.tmux.has_live_session("gone-1").unwrap());
    assert!(wait_for(|| !process_running(gone_pid)));
    fx.finish();
}

#[test]
fn external_launches_the_configured_terminal_with_the_attach_command() {
    let Some(fx) = Fixture::new("external") else {
        return;
    };
    fx.tmux
        .open("ext-1", &fx.dir, &[], Some("exec sleep 30"), 80, 24)
        .unwrap();
    let attach = fx.tmux.attach_command("ext-1").unwrap();
    assert_eq!(
        attach[1..3],
        ["-S".to_string(), fx.tmux.socket().display().to_string()]
    );
    assert_eq!(attach[3..], ["attach-session", "-t", "=ext-1"]);

    // The preference's argv, with {attach} spliced in.
    let configured = fx.dir.join("my-term");
    fake_terminal(&configured, 0);
    let prefs: Vec<String> = vec![
        configured.display().to_string(),
        "--title".to_string(),
        "canvas".to_string(),
        "{attach}".to_string(),
    ];
    let launched = fx.tmux.external("ext-1", Some(&prefs)).unwrap();
    assert_eq!(launched, configured.display().to_string());
    let mut expected = vec!["--title".to_string(), "canvas".to_string()];
    expected.extend(attach.iter().cloned());
    assert_eq!(recorded_args(&configured), expected);

    // The attach command names a session that exists: run without a terminal, tmux
    // complains about the terminal, not the target.
    let out = Command::new(&attach[0])
        .args(&attach[1..])
        .env_remove("TMUX")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not a terminal"), "{said}");

    // Defaults: the first terminal program on PATH, given a display.
    let bin = fx.dir.join("bin");
    fs::create_dir(&bin).unwrap();
    let xterm = bin.join("xterm");
    fake_terminal(&xterm, 0);
    let env_with = |display: bool, path: PathBuf| {
        move |name: &str| -> Option<OsString> {
            match name {
                "DISPLAY" if display => Some(":99".into()),
                "PATH" => Some(path.clone().into()),
                _ => None,
            }
        }
    };
    let launched = fx
        .tmux
        .external_in("ext-1", None, &env_with(true, bin.clone()))
        .unwrap();
    assert_eq!(launched, "xterm");
    let mut expected = vec!["-e".to_string()];
    expected.extend(attach.iter().cloned());
    assert_eq!(recorded_args(&xterm), expected);

    // What is missing is named.
    let no_display = fx
        .tmux
        .external_in("ext-1", None, &env_with(false, bin.clone()))
        .unwrap_err()
        .to_string();
    assert!(
        no_display.contains("DISPLAY") && no_display.contains("WAYLAND_DISPLAY"),
        "{no_display}"
    );
    let empty = fx.dir.join("empty");
    fs::create_dir(&empty).unwrap();
    let no_program = fx
        .tmux
        .external_in("ext-1", None, &env_with(true, empty))
        .unwrap_err()
        .to_string();
    for name in ["x-terminal-emulator", "gnome-terminal", "konsole", "xterm"] {
        assert!(no_program.contains(name), "{no_program}");
    }
    let missing = vec!["no-such-terminal-xyz".to_string(), "{attach}".to_string()];
    let err = fx
        .tmux
        .external("ext-1", Some(&missing))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no-such-terminal-xyz"), "{err}");
    let failing = fx.dir.join("failing-term");
    fake_terminal(&failing, 3);
    let err = fx
        .tmux
        .external("ext-1", Some(&[failing.display().to_string()]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("exited"), "{err}");
    assert!(matches!(
        fx.tmux.external("nobody", Some(&prefs)),
        Err(TmuxError::NoSession(_))
    ));
    fx.finish();
}

#[test]
fn interrupt_ends_a_sleep() {
    let Some(fx) = Fixture::new("interrupt") else {
        return;
    };
    // In a shell: Ctrl+C ends the foreground sleep and the shell takes the next command.
    fx.tmux
        .open("int-1", &fx.dir, &[], Some("exec /bin/sh"), 80, 24)
        .unwrap();
    assert!(wait_for(|| fx.tmux.has_ready_session("int-1").unwrap()));
    let shell = pane_pid(&fx.tmux, "int-1");
    fx.tmux.submit("int-1", "sleep 30").unwrap();
    let mut sleep = None;
    assert!(wait_for(|| {
        sleep = child_named(shell, "sleep");
        sleep.is_some()
    }));
    fx.tmux.interrupt("int-1").unwrap();
    let sleep = sleep.unwrap();
    assert!(
        wait_for(|| !process_running(sleep)),
        "sleep survived Ctrl+C"
    );
    fx.tmux.submit("int-1", "echo after-$((3+4))").unwrap();
    let screen = capture_until(&fx.tmux, "int-1", "after-7");
    assert!(screen.contains("after-7"), "screen:\n{screen}");

    // A session whose program is the sleep ends with it.
    fx.tmux
        .open("int-2", &fx.dir, &[], Some("exec sleep 30"), 80, 24)
        .unwrap();
    assert!(fx.tmux.has_live_session("int-2").unwrap());
    fx.tmux.interrupt("int-2").unwrap();
    assert!(wait_for(|| !fx.tmux.has_live_session("int-2").unwrap()));
    fx.finish();
}

#[test]
fn bad_ids_missing_sessions_and_a_stopped_server_are_clear_errors() {
    let Some(fx) = Fixture::new("errors") else {
        return;
    };
    assert!(fx.tmux.sessions().unwrap().is_empty(), "no server yet");
    for bad in ["", "=x", "a:b", "a.b", "-t", "*", "a b"] {
        assert!(
            matches!(
                fx.tmux.open(bad, &fx.dir, &[], None, 80, 24),
                Err(TmuxError::InvalidNodeId(_))
            ),
            "{bad:?}"
        );
        assert!(matches!(
            fx.tmux.capture(bad, 10),
            Err(TmuxError::InvalidNodeId(_))
        ));
    }
    assert!(matches!(
        fx.tmux.capture("nobody", 10),
        Err(TmuxError::NoSession(_))
    ));
    assert!(matches!(
        fx.tmux.submit("nobody", "ls"),
        Err(TmuxError::NoSession(_))
    ));
    fx.tmux.kill("nobody").unwrap();
    fx.tmux.kill_server().unwrap();

    // Exact-match targets: "ab" is not a prefix match for "ab-1".
    fx.tmux
        .open("ab-1", &fx.dir, &[], Some("exec sleep 30"), 80, 24)
        .unwrap();
    assert!(matches!(
        fx.tmux.capture("ab", 10),
        Err(TmuxError::NoSession(_))
    ));
    fx.tmux.kill("ab").unwrap();
    assert!(fx.tmux.has_live_session("ab-1").unwrap());
    let duplicate = fx
        .tmux
        .open("ab-1", &fx.dir, &[], None, 80, 24)
        .unwrap_err();
    assert!(
        duplicate.to_string().contains("duplicate session"),
        "{duplicate}"
    );
    let bad_env = [("A=B".to_string(), "x".to_string())];
    assert!(matches!(
        fx.tmux.open("env-1", &fx.dir, &bad_env, None, 80, 24),
        Err(TmuxError::InvalidArgument(_))
    ));
    assert!(matches!(
        fx.tmux
            .open("dir-1", &fx.dir.join("missing"), &[], None, 80, 24),
        Err(TmuxError::InvalidArgument(_))
    ));
    assert!(matches!(
        fx.tmux.send_literal("ab-1", "a\0b"),
        Err(TmuxError::InvalidArgument(_))
    ));
    assert!(matches!(
        fx.tmux.open("nul-1", &fx.dir, &[], Some("echo \0"), 80, 24),
        Err(TmuxError::InvalidArgument(_))
    ));
    fx.tmux.kill("ab-1").unwrap();
    assert!(!fx.tmux.has_live_session("ab-1").unwrap());
    // The last session gone, the server exits by itself (exit-empty).
    assert!(wait_for(|| !tmux_ls(fx.tmux.socket()).status.success()));
    fx.finish();
}

#[test]
fn a_resized_window_keeps_its_size_for_attached_clients() {
    let Some(fx) = Fixture::new("resize") else {
        return;
    };
    fx.tmux
        .open("rs-1", &fx.dir, &[], Some("exec /bin/sh"), 80, 24)
        .unwrap();
    let option = |node: &str| {
        let out = Command::new("tmux")
            .env_remove("TMUX")
            .arg("-S")
            .arg(fx.tmux.socket())
            .args([
                "show-options",
                "-wv",
                "-t",
                &format!("={node}:"),
                "window-size",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // Manual from the start: an attached client never resizes it to its own size.
    assert_eq!(option("rs-1"), "manual");
    fx.tmux
        .submit("rs-1", "echo size-$(stty size | tr ' ' x)")
        .unwrap();
    let screen = capture_until(&fx.tmux, "rs-1", "size-24x80");
    assert!(screen.contains("size-24x80"), "{screen}");
    fx.tmux.resize("rs-1", 50, 10).unwrap();
    fx.tmux
        .submit("rs-1", "echo size-$(stty size | tr ' ' x)")
        .unwrap();
    let screen = capture_until(&fx.tmux, "rs-1", "size-10x50");
    assert!(screen.contains("size-10x50"), "{screen}");
    assert_eq!(option("rs-1"), "manual");
    // A session that is gone is no error; a name that is no node id is.
    fx.tmux.resize("gone-1", 50, 10).unwrap();
    assert!(matches!(
        fx.tmux.resize("bad name", 50, 10),
        Err(TmuxError::InvalidNodeId(_))
    ));
    fx.finish();
}
