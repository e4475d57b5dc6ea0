//! The built-in PTY terminal backend against real PTYs, shells and processes.
//!
//! Processes are judged from `/proc/<pid>/stat`: a process counts as ended when it is
//! gone or a zombie. `kill(pid, 0)` alone is not enough for grandchildren, because they
//! are re-parented to pid 1, and not every pid 1 (some sandboxes' init) reaps orphans.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use termsprawl_tools::host::terminals::pty::{
    PtyTerminals, Terminal, TerminalError, TerminalOptions, WindowSize, SCROLLBACK_BYTES,
};
use termsprawl_tools::host::terminals::screen::HISTORY_MAX_BYTES;

const WAIT: Duration = Duration::from_secs(5);

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("termsprawl-pty-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `/bin/sh` with a plain prompt, so tests do not depend on the user's shell setup.
fn sh_options(cwd: &Path) -> TerminalOptions {
    TerminalOptions {
        command: Some(vec!["/bin/sh".to_string()]),
        cwd: cwd.to_path_buf(),
        env: vec![("PS1".to_string(), "$ ".to_string())],
        size: WindowSize::default(),
        confine: None,
        confined_in_place: false,
    }
}

fn spawn_sh(name: &str) -> Terminal {
    Terminal::spawn(&sh_options(&temp_dir(name))).expect("spawn /bin/sh")
}

/// Polls `read` until it contains `needle`; returns the text.
fn wait_for(terminal: &Terminal, needle: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = terminal.read(64_000);
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{needle:?} did not appear within {timeout:?}; terminal shows:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (state, ppid, session) from /proc/<pid>/stat.
fn proc_stat(pid: u32) -> Option<(char, u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, tail) = text.rsplit_once(')')?;
    let fields: Vec<&str> = tail.split_whitespace().collect();
    Some((
        fields[0].chars().next()?,
        fields[1].parse().ok()?,
        fields[3].parse().ok()?,
    ))
}

fn running(pid: u32) -> bool {
    matches!(proc_stat(pid), Some((state, _, _)) if state != 'Z' && state != 'X')
}

/// Running processes in `session` whose command name is `comm`.
fn session_processes(session: u32, comm: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            name.trim() == comm
                && running(pid)
                && proc_stat(pid).is_some_and(|(_, _, s)| s == session)
        })
        .collect()
}

/// The number printed after `label` in the output (the echoed command line shows `$!`,
/// not digits, so only the command's own output matches).
fn number_after(text: &str, label: &str) -> Option<u32> {
    text.match_indices(label).find_map(|(at, _)| {
        let digits: String = text[at + label.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// Our child is neither running nor left as a zombie: its /proc entry is gone (or the
/// pid now belongs to a process that is not our child).
fn assert_reaped(pid: u32) {
    match proc_stat(pid) {
        None => {}
        Some((state, ppid, _)) => {
            assert!(
                ppid != std::process::id(),
                "child {pid} still ours, state {state}"
            );
        }
    }
}

#[test]
fn echo_marker_appears_in_read() {
    let terminal = spawn_sh("echo");
    wait_until("ready", WAIT, || terminal.ready());
    assert!(terminal.live());
    terminal.submit("echo mark\"\"er-$((40+2))").unwrap();
    let text = wait_for(&terminal, "marker-42", WAIT);
    assert!(text.contains("$ "), "prompt missing: {text}");
    assert!(terminal.screen_text().contains("marker-42"));
    // read(max_chars) is the tail: the last line is the prompt after the output.
    wait_until("prompt after marker", WAIT, || {
        terminal.read(64_000).trim_end().ends_with('$')
    });
    assert_eq!(terminal.read(1), "$");
    assert_eq!(terminal.read(0), "");
}

#[test]
fn default_shell_runs() {
    let options = TerminalOptions::shell(temp_dir("default-shell"));
    let terminal = Terminal::spawn(&options).unwrap();
    terminal.submit("echo default-$((6*7))").unwrap();
    wait_for(&terminal, "default-42", WAIT);
}

#[test]
fn interrupt_ends_the_foreground_sleep() {
    for shell in ["/bin/sh", "/bin/bash"] {
        if !Path::new(shell).exists() {
            continue;
        }
        let mut options = sh_options(&temp_dir("interrupt"));
        options.command = Some(vec![shell.to_string()]);
        let terminal = Terminal::spawn(&options).unwrap();
        terminal.submit("sleep 30 && echo SLE\"\"PT").unwrap();
        let mut sleeps = Vec::new();
        wait_until("sleep started", WAIT, || {
            sleeps = session_processes(terminal.pid(), "sleep");
            !sleeps.is_empty()
        });
        terminal.interrupt().unwrap();
        wait_until("sleep ended by Ctrl+C", WAIT, || !running(sleeps[0]));
        terminal.submit("echo after-$((1+1))").unwrap();
        let text = wait_for(&terminal, "after-2", WAIT);
        assert!(!text.contains("SLEPT"), "{shell}: {text}");
        assert!(terminal.live(), "{shell} exited on Ctrl+C");
    }
}

#[test]
fn close_ends_the_session_including_background_jobs() {
    let terminal = spawn_sh("close");
    let shell_pid = terminal.pid();
    terminal.submit("sleep 300 & echo bg-pid=$!").unwrap();
    // A stopped job: SIGCONT after SIGHUP lets the hang-up take effect.
    terminal
        .submit("sleep 302 & kill -STOP $!; echo stopped-pid=$!")
        .unwrap();
    // This one ignores SIGHUP, so only the SIGKILL after the grace period ends it.
    terminal
        .submit("(trap '' HUP; exec sleep 301) & echo deaf-pid=$!")
        .unwrap();
    wait_until("both pids printed", WAIT, || {
        number_after(&terminal.read(64_000), "deaf-pid=").is_some()
    });
    let text = terminal.read(64_000);
    let background = number_after(&text, "bg-pid=").expect("bg pid printed");
    let deaf = number_after(&text, "deaf-pid=").unwrap();
    let stopped = number_after(&text, "stopped-pid=").unwrap();
    wait_until("job stopped", WAIT, || {
        matches!(proc_stat(stopped), Some(('T', _, _)))
    });
    assert!(running(background) && running(deaf));
    assert_eq!(
        proc_stat(background).unwrap().2,
        shell_pid,
        "background job in the terminal's session"
    );

    terminal.close();
    assert!(!running(background), "background sleep survived close");
    assert!(!running(deaf), "SIGHUP-ignoring sleep survived close");
    assert!(!running(stopped), "stopped job survived close");
    assert!(!running(shell_pid));
    assert_reaped(shell_pid);
    assert!(!terminal.live());
    assert!(matches!(
        terminal.submit("echo x"),
        Err(TerminalError::Closed)
    ));
    terminal.close(); // idempotent
}

#[test]
fn exited_shell_is_reaped_by_the_reader() {
    let terminal = spawn_sh("exit");
    let pid = terminal.pid();
    terminal.submit("exit 3").unwrap();
    // Not calling live() here: the reader thread must reap on EOF by itself.
    let ours = || matches!(proc_stat(pid), Some((_, ppid, _)) if ppid == std::process::id());
    wait_until("shell reaped", WAIT, || !ours());
    assert!(!terminal.live());
    assert_eq!(terminal.exit_status().and_then(|s| s.code()), Some(3));
    assert!(matches!(terminal.write(b"x"), Err(TerminalError::Exited)));
}

#[test]
fn env_and_cwd_are_applied() {
    let dir = temp_dir("env-cwd");
    let mut options = sh_options(&dir);
    options
        .env
        .push(("TS_PTY_TEST".to_string(), "hello world".to_string()));
    let terminal = Terminal::spawn(&options).unwrap();
    terminal
        .submit("echo \"v=$TS_PTY_TEST\" \"d=$(pwd -P)\" \"t=$TERM\"")
        .unwrap();
    let expected = format!("v=hello world d={}", dir.canonicalize().unwrap().display());
    let text = wait_for(&terminal, &expected, WAIT);
    let term = std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".to_string());
    assert!(text.contains(&format!("t={term}")), "{text}");
}

#[test]
fn scrollback_stays_bounded() {
    let terminal = spawn_sh("scrollback");
    terminal
        .submit("yes | head -c 3000000; echo end-$((2+3))")
        .unwrap();
    wait_for(&terminal, "end-5", Duration::from_secs(60));
    let scrollback = terminal.scrollback();
    assert!(scrollback.len() <= SCROLLBACK_BYTES, "{}", scrollback.len());
    assert!(
        scrollback.len() > SCROLLBACK_BYTES - 4,
        "scrollback not filled: {}",
        scrollback.len()
    );
    assert!(std::str::from_utf8(&scrollback).is_ok());
    let everything = terminal.read(usize::MAX);
    assert!(
        everything.len() <= HISTORY_MAX_BYTES + 120 * 32 + 32,
        "{}",
        everything.len()
    );
    assert!(
        everything.ends_with("end-5\n$"),
        "{}",
        &everything[everything.len() - 40..]
    );
    assert_eq!(terminal.read(7), "end-5\n$");
}

#[test]
fn hostile_output_is_returned_as_inert_text() {
    let dir = temp_dir("hostile");
    let hostile: &[u8] = b"start\r\n\
        \x1b]52;c;SGVsbG8gY2xpcGJvYXJk\x07\
        \x1b]0;EVIL-TITLE\x07\x1b]2;EVIL-TWO\x1b\\\
        \x1bP$qEVIL-DCS\x1b\\\x1b_EVIL-APC\x1b\\\
        \x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\\r\n\
        visible\x1b[2K\rOVERWRITTEN\r\n\
        \x1b[6n\x1b[c\x1b[?1049h\x1b[999;999Halt\x1b[?1049l\
        \x1b[31mred\x1b[0m \xff\xfe\xc3 \xc2\x9b6n \x9d0;x\x07\x00\x05\x7f\r\n";
    std::fs::write(dir.join("hostile.bin"), hostile).unwrap();
    let terminal = Terminal::spawn(&sh_options(&dir)).unwrap();
    terminal
        .submit("cat hostile.bin; echo done-$((3+4))")
        .unwrap();
    let text = wait_for(&terminal, "done-7", WAIT);
    for c in text.chars() {
        let code = c as u32;
        assert!(
            c == '\n' || (code >= 0x20 && !(0x7f..0xa0).contains(&code)),
            "control {c:?} in:\n{text}"
        );
    }
    for secret in ["SGVsbG8", "EVIL-", "evil.example", "alt"] {
        assert!(!text.contains(secret), "{secret:?} leaked into:\n{text}");
    }
    assert!(text.contains("start\nlink\nOVERWRITTEN\n"), "{text}");
    assert!(!text.contains("visible"), "{text}");
    assert!(text.contains("red \u{fffd}\u{fffd}\u{fffd} "), "{text}");
    // The raw scrollback keeps the bytes as written (for terminal emulators, not agents).
    assert!(terminal.scrollback().windows(7).any(|w| w == b"\x1b]52;c;"));
    // The queries (cursor position, device attributes) were never answered: an answer
    // would be typed input and show after the prompt.
    wait_until("prompt", WAIT, || {
        terminal.read(64_000).ends_with("done-7\n$")
    });
    assert!(terminal.live());
}

#[test]
fn resize_reaches_the_program() {
    let terminal = spawn_sh("resize");
    terminal.resize(WindowSize { cols: 50, rows: 10 }).unwrap();
    terminal
        .submit("echo size-$(stty size | tr ' ' x)")
        .unwrap();
    wait_for(&terminal, "size-10x50", WAIT);
}

#[test]
fn spawn_errors_say_what_is_wrong() {
    let dir = temp_dir("errors");
    let mut options = sh_options(&dir);
    options.command = Some(vec!["no-such-program-termsprawl".to_string()]);
    let error = Terminal::spawn(&options).unwrap_err();
    assert!(
        matches!(error, TerminalError::CommandNotFound(_)),
        "{error}"
    );
    assert!(error.to_string().contains("no-such-program-termsprawl"));

    let mut options = sh_options(&dir.join("missing"));
    options.command = Some(vec!["/bin/sh".to_string()]);
    let error = Terminal::spawn(&options).unwrap_err();
    assert!(matches!(error, TerminalError::BadDirectory(..)), "{error}");

    let not_executable = dir.join("plain.txt");
    std::fs::write(&not_executable, "x").unwrap();
    options = sh_options(&dir);
    options.command = Some(vec![not_executable.display().to_string()]);
    let error = Terminal::spawn(&options).unwrap_err();
    assert!(matches!(error, TerminalError::Spawn(..)), "{error}");
    assert!(error.to_string().contains("plain.txt"), "{error}");

    options.command = Some(Vec::new());
    assert!(matches!(
        Terminal::spawn(&options),
        Err(TerminalError::InvalidCommand(_))
    ));
}

#[test]
fn write_to_a_program_that_does_not_read_times_out() {
    let mut options = sh_options(&temp_dir("stall"));
    // In canonical mode the line discipline discards what does not fit a line, so use
    // raw mode, where unread input really backs up.
    let script = "stty raw -echo; echo raw-ready; sleep 30";
    options.command = Some(vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        script.to_string(),
    ]);
    let terminal = Terminal::spawn(&options).unwrap();
    wait_for(&terminal, "raw-ready", WAIT);
    let flood = vec![b'x'; 4 << 20];
    let error = terminal.write(&flood).unwrap_err();
    assert!(matches!(error, TerminalError::InputStalled), "{error}");
    terminal.close();
    assert_reaped(terminal.pid());
}

#[test]
fn registry_opens_gets_and_closes_by_node_id() {
    let terminals = Arc::new(PtyTerminals::new());
    let dir = temp_dir("registry");
    let a = terminals.open("node-a", &sh_options(&dir)).unwrap();
    assert!(matches!(
        terminals.open("node-a", &sh_options(&dir)),
        Err(TerminalError::AlreadyOpen(_))
    ));
    // Other threads use the registry too (the runtime calls from its workers).
    let worker = {
        let terminals = Arc::clone(&terminals);
        let dir = dir.clone();
        std::thread::spawn(move || terminals.open("node-b", &sh_options(&dir)).map(|t| t.pid()))
    };
    let b_pid = worker.join().unwrap().unwrap();
    assert_eq!(
        terminals.ids(),
        vec!["node-a".to_string(), "node-b".to_string()]
    );
    assert_eq!(terminals.get("node-a").unwrap().pid(), a.pid());
    assert!(terminals.get("node-c").is_none());

    terminals
        .get("node-b")
        .unwrap()
        .submit("echo from-b-$((1+2))")
        .unwrap();
    wait_for(&terminals.get("node-b").unwrap(), "from-b-3", WAIT);

    assert!(terminals.close("node-a"));
    assert!(!terminals.close("node-a"));
    assert!(!a.live());
    assert_reaped(a.pid());

    // A terminal whose program exited may be replaced under the same id.
    let b = terminals.get("node-b").unwrap();
    b.submit("exit").unwrap();
    wait_until("b exited", WAIT, || !b.live());
    let b2 = terminals.open("node-b", &sh_options(&dir)).unwrap();
    assert_ne!(b2.pid(), b_pid);

    terminals.open("node-c", &sh_options(&dir)).unwrap();
    let pids: Vec<u32> = ["node-b", "node-c"]
        .iter()
        .map(|id| terminals.get(id).unwrap().pid())
        .collect();
    terminals.close_all();
    assert!(terminals.ids().is_empty());
    for pid in pids {
        assert!(!running(pid));
        assert_reaped(pid);
    }
}
