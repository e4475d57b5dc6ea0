//! tmux terminals behind the pane filter (`termsprawl-tools pane`, real tmux and the real
//! binary): queries printed by a program get no answer typed into its input, while exit
//! status, killing signal, window size, environment, job control, Ctrl+C and bracketed
//! paste are what they are without the filter. Each test runs private tmux servers in its
//! own temp directory and ends them, even when it fails.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use termsprawl_tools::host::terminals::tmux::TmuxServer;

const WAIT: Duration = Duration::from_secs(5);

/// Device attributes (DA1, DA2), status and cursor position (DSR), the background colour
/// (OSC 11), a mode (DECRQM) and the version (XTVERSION): tmux answers each of these.
const QUERIES: &str =
    r"printf '\033[c\033[>c\033[5n\033[6n\033]11;?\007\033[?2004$p\033[>q'; echo queries-sent";

/// A private tmux server in a temp directory, with or without the pane filter.
struct Server {
    dir: PathBuf,
    tmux: TmuxServer,
}

impl Server {
    /// `None` (after a notice) when tmux is not installed.
    fn new(name: &str, filtered: bool) -> Option<Server> {
        if !TmuxServer::available() {
            eprintln!("tmux is not installed: skipping {name}");
            return None;
        }
        // Short: the socket path must fit a Unix socket address.
        let dir = PathBuf::from(format!("/tmp/tspf-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let filter = filtered.then(|| PathBuf::from(env!("CARGO_BIN_EXE_termsprawl-tools")));
        let tmux = TmuxServer::new(&dir.join("tmux"))
            .unwrap()
            .with_pane_filter(filter);
        Some(Server { dir, tmux })
    }

    fn open(&self, node: &str, command: Option<&str>) {
        let env = [("TERMSPRAWL_MARK".to_string(), "marked".to_string())];
        self.tmux
            .open(node, &self.dir, &env, command, 100, 30)
            .unwrap();
    }

    /// Runs a raw tmux command on this server; returns its trimmed stdout.
    fn raw(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .env_remove("TMUX")
            .arg("-S")
            .arg(self.tmux.socket())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Waits until the screen contains `wanted`; returns it.
    fn screen_with(&self, node: &str, wanted: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.tmux.capture(node, 20_000).unwrap_or_default();
            if screen.contains(wanted) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{wanted:?} never shown: {screen:?}"
            );
            thread::sleep(Duration::from_millis(25));
        }
    }

    /// A shell whose first prompt is up.
    fn shell(&self, node: &str) {
        self.open(node, None);
        self.tmux.submit(node, "echo shell-up").unwrap();
        self.screen_with(node, "\nshell-up");
    }

    fn pane(&self, node: &str, format: &str) -> String {
        self.raw(&["display-message", "-p", "-t", &format!("={node}:"), format])
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.tmux.kill_server();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `command` was typed on its line right after the prompt (nothing ahead of it).
fn typed_after_prompt(screen: &str, command: &str) -> bool {
    screen.lines().any(|line| {
        line.ends_with(&format!("$ {command}")) || line.ends_with(&format!("# {command}"))
    })
}

/// Prints the queries, then runs `echo ok-marker`; returns the screen.
fn queries_then_a_command(server: &Server) -> String {
    server.shell("q");
    server.tmux.submit("q", QUERIES).unwrap();
    // Its output: a second `queries-sent` after the command line's own (without the
    // filter, tmux's echoed answers can stand on the same line before it).
    let deadline = Instant::now() + WAIT;
    while server
        .tmux
        .capture("q", 20_000)
        .unwrap_or_default()
        .matches("queries-sent")
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "the queries were never sent");
        thread::sleep(Duration::from_millis(25));
    }
    // tmux answers at once; give a late answer time to arrive anyway.
    thread::sleep(Duration::from_millis(200));
    server.tmux.submit("q", "echo ok-marker").unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let screen = server.tmux.capture("q", 20_000).unwrap();
        let done = screen.contains("\nok-marker") || screen.contains("not found");
        if done || Instant::now() >= deadline {
            return screen;
        }
        thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn without_the_filter_tmux_types_its_answers_into_the_shell() {
    // The control: what the filter is for, and proof that the next test can fail.
    let Some(server) = Server::new("raw", false) else {
        return;
    };
    let screen = queries_then_a_command(&server);
    assert!(
        !typed_after_prompt(&screen, "echo ok-marker") || screen.contains("not found"),
        "tmux no longer answers queries: {screen:?}"
    );
}

#[test]
fn with_the_filter_queries_get_no_answer_and_the_next_command_runs() {
    let Some(server) = Server::new("query", true) else {
        return;
    };
    let screen = queries_then_a_command(&server);
    assert!(screen.contains("\nok-marker"), "{screen:?}");
    assert!(typed_after_prompt(&screen, "echo ok-marker"), "{screen:?}");
    assert!(!screen.contains("not found"), "{screen:?}");
}

#[test]
fn exit_status_and_killing_signal_are_the_programs_own() {
    let Some(server) = Server::new("exit", true) else {
        return;
    };
    server.shell("killed");
    server.raw(&["set-option", "-g", "remain-on-exit", "on"]);
    server.open("status", Some("echo leaving; exit 7"));
    server.tmux.submit("killed", "kill -9 $$").unwrap();
    server.open("segv", Some("kill -SEGV $$"));
    // tmux may mark a pane dead (its terminal closed) a moment before it has reaped the
    // program and knows how it ended, or miss the exit (as the watcher does, then make
    // it reap: see `every_ended_program_reports_its_status`): wait for that too.
    let dead = |node: &str| {
        let deadline = Instant::now() + WAIT;
        loop {
            let ended = server.pane(node, "#{pane_dead}:#{pane_dead_status}/#{pane_dead_signal}");
            if let Some(how) = ended.strip_prefix("1:").filter(|how| *how != "/") {
                return how.to_string();
            }
            if ended == "1:/" {
                server.tmux.reap_ended_programs().unwrap();
            }
            assert!(Instant::now() < deadline, "{node} never ended: {ended}");
            thread::sleep(Duration::from_millis(25));
        }
    };
    assert_eq!(dead("status"), "7/");
    assert_eq!(dead("killed"), "/9");
    assert_eq!(dead("segv"), "/11");
    // No core file from the filter passing SIGSEGV on.
    let cores: Vec<_> = std::fs::read_dir(&server.dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("core"))
        .collect();
    assert!(cores.is_empty(), "{cores:?}");
}

/// tmux 3.3a now and then misses the exit of a pane's program under the filter (a
/// zombie, the pane dead with no status; a later child's exit makes tmux collect it, so
/// it shows when no other pane ends after it). `reap_ended_programs`, which the terminal
/// watcher calls for such a pane, makes tmux collect it: one pane at a time, each must
/// report `exit 3`.
#[test]
fn every_ended_program_reports_its_status() {
    use termsprawl_tools::runtime::ProgramEnd;
    let Some(server) = Server::new("many", true) else {
        return;
    };
    // Keeps the server running between rounds (with `exit-empty` it would exit after
    // each kill, and a new-session racing that exit fails); it never ends, so it does
    // not reap anything either.
    server.open("keeper", Some("exec sleep 600"));
    let rounds = 100;
    let mut missed = 0;
    for i in 0..rounds {
        let node = format!("e{i}");
        server.open(&node, Some("exit 3"));
        let session = |server: &Server| {
            let sessions = server.tmux.sessions().unwrap();
            sessions.into_iter().find(|s| s.name == node).unwrap()
        };
        let deadline = Instant::now() + WAIT;
        while !session(&server).pane_dead {
            assert!(Instant::now() < deadline, "{node} never ended");
            thread::sleep(Duration::from_millis(5));
        }
        // Usually the status comes with the pane's death or a moment later.
        let late = Instant::now() + Duration::from_millis(300);
        while session(&server).end.is_none() && Instant::now() < late {
            thread::sleep(Duration::from_millis(10));
        }
        if session(&server).end.is_none() {
            missed += 1;
            server.tmux.reap_ended_programs().unwrap();
            thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(session(&server).end, Some(ProgramEnd::Status(3)), "{node}");
        server.tmux.kill(&node).unwrap();
    }
    eprintln!("figure: {rounds} panes ended one at a time, tmux missed {missed} exits");
}

#[test]
fn window_size_changes_reach_the_program() {
    let Some(server) = Server::new("size", true) else {
        return;
    };
    server.shell("s");
    server.tmux.submit("s", "stty size").unwrap();
    server.screen_with("s", "\n30 100");
    server.raw(&["resize-window", "-t", "=s:", "-x", "90", "-y", "25"]);
    server.tmux.submit("s", "stty size").unwrap();
    server.screen_with("s", "\n25 90");
}

#[test]
fn environment_folder_and_shell_are_as_without_the_filter() {
    let report = "echo \"[$TERM|$PWD|$SHELL|$0|$TERMSPRAWL_MARK|${TMUX_PANE:+pane}]\"";
    let mut seen = Vec::new();
    for filtered in [false, true] {
        let Some(server) = Server::new(if filtered { "envf" } else { "envr" }, filtered) else {
            return;
        };
        server.shell("e");
        server.tmux.submit("e", report).unwrap();
        let screen = server.screen_with("e", "|pane]");
        let line = screen
            .lines()
            .find(|l| l.starts_with('[') && l.ends_with("|pane]"))
            .unwrap()
            .replace(&server.dir.display().to_string(), "DIR");
        seen.push(line);
        // A command runs through the same shell, as `$SHELL -c`.
        server.open("c", Some("echo \"[$0]\"; sleep 30"));
        let screen = server.screen_with("c", "]");
        seen.push(screen.lines().next().unwrap().to_string());
    }
    assert_eq!(seen[0], seen[2], "shell");
    assert_eq!(seen[1], seen[3], "command");
    assert!(
        seen[2].contains("|DIR|") && seen[2].contains("|marked|"),
        "{seen:?}"
    );
}

#[test]
fn job_control_interrupt_and_bracketed_paste_work() {
    let Some(server) = Server::new("jobs", true) else {
        return;
    };
    server.shell("j");
    // Ctrl+C reaches the foreground job through the inner terminal.
    server.tmux.submit("j", "sleep 300").unwrap();
    thread::sleep(Duration::from_millis(300));
    server.tmux.interrupt("j").unwrap();
    server.tmux.submit("j", "echo after-$?").unwrap();
    server.screen_with("j", "\nafter-130");
    // Background, stop and resume.
    server.tmux.submit("j", "sleep 300 &").unwrap();
    server
        .tmux
        .submit("j", "kill -STOP %1; sleep 0.2; jobs")
        .unwrap();
    server.screen_with("j", "Stopped");
    server.tmux.submit("j", "kill -CONT %1; fg").unwrap();
    thread::sleep(Duration::from_millis(300));
    server.tmux.interrupt("j").unwrap();
    server.tmux.submit("j", "echo fg-$?").unwrap();
    server.screen_with("j", "\nfg-130");
    // A program that turns bracketed paste on gets the paste markers.
    server
        .tmux
        .submit("j", r"printf '\033[?2004h'; cat -v")
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    server.raw(&["set-buffer", "-b", "p", "pasted-text"]);
    server.raw(&["paste-buffer", "-p", "-b", "p", "-t", "=j:"]);
    server.tmux.submit("j", "").unwrap();
    server.screen_with("j", "^[[200~pasted-text^[[201~");
}
