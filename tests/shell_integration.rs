//! Shell integration in the PTY backend, against real bash, zsh and dash in real PTYs:
//! the injected start-up files, the marks, the command records and what the kernel says
//! about the foreground. Each shell runs with a scratch `HOME`, so the user's own start-up
//! files are the ones each test writes. zsh tests are skipped (with a note) where zsh is
//! not installed; CI installs it.
//!
//! No test asserts a duration: each waits for a condition under a generous deadline.
#![cfg(feature = "host")] // drives the default host's terminals
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use termsprawl_tools::host::terminals::pty::{Terminal, TerminalOptions, WindowSize};
use termsprawl_tools::host::terminals::shell::inject::{prepare, shell_kind, Start};
use termsprawl_tools::runtime::{CommandRecord, CommandState, Foreground, ShellIntegration};

const WAIT: Duration = Duration::from_secs(15);

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ts-shell-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn installed(program: &str) -> bool {
    Path::new(program).exists()
}

/// A shell with integration in a PTY, its `HOME` a scratch folder holding `files`.
struct Shell {
    terminal: Terminal,
    kind: ShellIntegration,
    nonce: String,
    home: PathBuf,
}

impl Shell {
    fn start(program: &str, name: &str, files: &[(&str, &str)]) -> Shell {
        let home = scratch(name);
        for (file, text) in files {
            std::fs::write(home.join(file), text).unwrap();
        }
        let kind = shell_kind(program).expect("a shell we inject into");
        let injection = prepare(
            program,
            kind,
            Start::Interactive,
            &home.join("data/shell"),
            &|_| None,
        )
        .unwrap();
        let nonce = injection.nonce.clone();
        let options = TerminalOptions {
            command: None,
            cwd: home.clone(),
            env: vec![
                ("HOME".into(), home.to_string_lossy().into_owned()),
                (
                    "HISTFILE".into(),
                    home.join("history").to_string_lossy().into_owned(),
                ),
                ("PROMPT_COMMAND".into(), String::new()),
            ],
            size: WindowSize::default(),
            confine: None,
            confined_in_place: false,
        };
        let terminal = Terminal::spawn_with_shell(&options, None, Some(injection)).unwrap();
        let shell = Shell {
            terminal,
            kind,
            nonce,
            home,
        };
        shell.wait_until("the first verified mark", || {
            shell.terminal.integration() == kind
        });
        shell
    }

    fn wait_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + WAIT;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting until {what}; the screen:\n{}",
                self.terminal.read(4000)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn last_id(&self) -> u64 {
        self.terminal.command(None).map_or(0, |record| record.id)
    }

    /// Types `line` and Enter, as `terminal_submit` does (marking the start for `sh`).
    fn submit(&self, line: &str) -> u64 {
        let before = self.last_id();
        self.wait_until("the prompt before a command", || {
            self.terminal.foreground() == Foreground::Shell
                && !self
                    .terminal
                    .command(None)
                    .is_some_and(|r| r.state == CommandState::Running)
        });
        self.terminal.start_typed_command(line);
        self.terminal.write(format!("{line}\r").as_bytes()).unwrap();
        self.wait_until("the command's start", || self.last_id() > before);
        self.last_id()
    }

    /// The record of command `id` once it has exited.
    fn exited(&self, id: u64) -> CommandRecord {
        let mut record = None;
        self.wait_until("the command's end", || {
            record = self.terminal.command(Some(id));
            record
                .as_ref()
                .is_some_and(|r| r.state == CommandState::Exited)
        });
        record.unwrap()
    }

    fn run(&self, line: &str) -> CommandRecord {
        let id = self.submit(line);
        self.exited(id)
    }

    fn state_becomes(&self, id: u64, state: CommandState, foreground: Foreground) {
        self.wait_until(&format!("{state:?} and {foreground:?}"), || {
            self.terminal.foreground() == foreground
                && self
                    .terminal
                    .command(Some(id))
                    .is_some_and(|r| r.state == state)
        });
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        self.terminal.close();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

const SHELLS: [&str; 3] = ["/bin/bash", "/usr/bin/zsh", "/usr/bin/dash"];

fn each_shell(test: &str, body: impl Fn(&str)) {
    for program in SHELLS {
        if !installed(program) {
            eprintln!("{test}: {program} is not installed; skipped (CI installs it)");
            continue;
        }
        body(program);
    }
}

fn output_text(record: &CommandRecord) -> String {
    format!("{}{}", record.output.head, record.output.tail)
}

#[test]
fn statuses_output_and_folders_are_recorded() {
    each_shell("statuses", |program| {
        let shell = Shell::start(program, "statuses", &[(".zshrc", "")]);
        let ok = shell.run("true");
        assert_eq!(ok.exit_code, Some(0), "{program}");
        assert_eq!(ok.command, "true");
        assert!(ok.ended_at.is_some_and(|end| end >= ok.started_at));
        assert_eq!(shell.run("false").exit_code, Some(1), "{program}");
        assert_eq!(shell.run("(exit 7)").exit_code, Some(7), "{program}");
        let echo = shell.run("echo hello; echo 'two words'");
        assert_eq!(output_text(&echo), "hello\ntwo words\n", "{program}");
        assert_eq!(echo.exit_code, Some(0));
        let cd = shell.run("cd /tmp");
        assert_eq!(cd.cwd.as_deref(), Some("/tmp"), "{program}");
        let pwd = shell.run("pwd");
        assert_eq!(pwd.cwd.as_deref(), Some("/tmp"), "{program}");
        assert_eq!(output_text(&pwd), "/tmp\n");
        assert_eq!(pwd.id, cd.id + 1);
        if program != "/usr/bin/dash" {
            // (dash reads lines through the line discipline, which keeps 4095 characters.)
            // A line longer than a mark may be is reported cut, and integration stays.
            let long_line = format!("echo {}", "x".repeat(10_000));
            let long = shell.run(&long_line);
            assert_eq!(long.exit_code, Some(0), "{program}");
            assert!(long_line.starts_with(&long.command), "{program}");
            assert!(long.command.len() >= 4096, "{program}");
            assert_eq!(shell.terminal.integration(), shell.kind);
        }
        // None of our marks reached the screen.
        let screen = shell.terminal.read(64_000);
        assert!(screen.contains("two words"), "{screen}");
        let raw = shell.terminal.scrollback();
        assert!(!String::from_utf8_lossy(&raw).contains("5379"), "{program}");
        assert!(!shell.terminal.integrity_lost());
    });
}

#[test]
fn long_output_keeps_head_and_tail_and_progress_lines_their_last_state() {
    each_shell("long", |program| {
        let shell = Shell::start(program, "long", &[(".zshrc", "")]);
        let long = shell.run("seq 1 40000");
        assert!(long.output.head.starts_with("1\n2\n3\n"), "{program}");
        assert!(long.output.tail.ends_with("39999\n40000\n"), "{program}");
        assert!(long.output.omitted > 0);
        let total = long.output.head.chars().count() as u64
            + long.output.omitted
            + long.output.tail.chars().count() as u64;
        let expected: usize = (1..=40000).map(|n: u32| n.to_string().len() + 1).sum();
        assert_eq!(total, expected as u64, "{program}");
        let progress =
            shell.run(r"printf 'load 10%%\rload 50%%\rload 100%%\n\033[32mdone\033[0m\n'");
        assert_eq!(output_text(&progress), "load 100%\ndone\n", "{program}");
        // Output since a mark, with or without integration.
        let mark = shell.terminal.output_mark();
        shell.run("echo since-the-mark");
        let (since, now) = shell.terminal.output_since(mark.position);
        assert!(since.head.contains("since-the-mark"), "{}", since.head);
        assert!(now.position > mark.position && now.last_output_at >= mark.last_output_at);
    });
}

#[test]
fn commands_waiting_for_input_and_full_screen_programs_are_told_apart() {
    each_shell("input", |program| {
        let shell = Shell::start(program, "input", &[(".zshrc", "")]);
        let read = match program {
            "/bin/bash" => "read -p 'name? ' answer",
            "/usr/bin/zsh" => "read 'answer?name? '",
            _ => "read answer",
        };
        let id = shell.submit(read);
        shell.state_becomes(id, CommandState::AwaitingInput, Foreground::AwaitingInput);
        shell.terminal.write(b"me\r").unwrap();
        assert_eq!(shell.exited(id).exit_code, Some(0), "{program}");

        let id = shell.submit("python3 -c 'input()'");
        shell.state_becomes(id, CommandState::AwaitingInput, Foreground::AwaitingInput);
        shell.terminal.write(b"\r").unwrap();
        assert_eq!(shell.exited(id).exit_code, Some(0), "{program}");

        let id = shell.submit("sleep 2");
        shell.state_becomes(id, CommandState::Running, Foreground::Running);
        assert_eq!(shell.exited(id).exit_code, Some(0), "{program}");

        std::fs::write(shell.home.join("page.txt"), "a page\n".repeat(200)).unwrap();
        let id = shell.submit("less page.txt");
        shell.state_becomes(id, CommandState::Fullscreen, Foreground::Fullscreen);
        shell.terminal.write(b"q").unwrap();
        assert_eq!(shell.exited(id).exit_code, Some(0), "{program}");
        assert_eq!(shell.terminal.foreground(), Foreground::Shell);
    });
}

#[test]
fn forged_marks_never_end_a_command() {
    each_shell("forged", |program| {
        let shell = Shell::start(program, "forged", &[(".zshrc", "")]);
        let no_nonce = shell.run(r"printf '\033]5379;D;0\007\033]5379;;D;0\033\\'; (exit 4)");
        assert_eq!(no_nonce.exit_code, Some(4), "{program}");
        let wrong = format!(
            r"printf '\033]5379;%s;D;0\007\033]5379;%s;A\007' {0} {0}; (exit 5)",
            "0".repeat(32)
        );
        assert_eq!(shell.run(&wrong).exit_code, Some(5), "{program}");
        // A log of another terminal's session, marks and all.
        let log = format!(
            "\x1b]5379;{0};B;make\x07\x1b]5379;{0};C\x07ok\n\x1b]5379;{0};D;0\x07\x1b]5379;{0};A\x07$ ",
            "ab".repeat(16)
        );
        std::fs::write(shell.home.join("session.log"), log).unwrap();
        assert_eq!(
            shell.run("cat session.log; (exit 2)").exit_code,
            Some(2),
            "{program}"
        );
        // The right nonce (as if it had leaked without showing): an end printed while
        // another process group has the terminal is refused, and the real end counts.
        let script = format!(
            "printf '\\033]5379;{0};D;0\\007\\033]5379;{0};p;/forged\\007\\033]5379;{0};A\\007'\n",
            shell.nonce
        );
        std::fs::write(shell.home.join("forge.sh"), script).unwrap();
        let id = shell.submit("sh forge.sh; sleep 2; false");
        shell.state_becomes(id, CommandState::Running, Foreground::Running);
        let during = shell.terminal.command(Some(id)).unwrap();
        assert_eq!(
            (during.exit_code, during.ended_at),
            (None, None),
            "{program}"
        );
        let forged = shell.exited(id);
        assert_eq!(forged.exit_code, Some(1), "{program}");
        assert_ne!(forged.cwd.as_deref(), Some("/forged"));
        assert!(!shell.terminal.integrity_lost(), "{program}");
        assert_eq!(shell.terminal.integration(), shell.kind);
    });
}

/// The SHA-256 (hex) of `text`, by `sha256sum`.
fn sha256(text: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// `tests/attacks/forge_end.py` reads the nonce from the shell's memory, hands the
/// terminal to the shell's group and prints an end, a prompt and a start: none of them
/// counts, and the command's end is its real one.
#[test]
fn a_program_that_reads_the_nonce_and_takes_the_terminal_cannot_end_its_command() {
    let forger = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/attacks/forge_end.py");
    each_shell("forger", |program| {
        let shell = Shell::start(program, "forger", &[(".zshrc", "")]);
        std::fs::write(shell.home.join("nonce"), &shell.nonce).unwrap();
        let line = format!("python3 {forger} {} nonce 2", sha256(&shell.nonce));
        let id = shell.submit(&line);
        shell.wait_until("the forged marks are out", || {
            shell.terminal.read(4000).contains("marks sent")
        });
        let during = shell.terminal.command(Some(id)).unwrap();
        assert_eq!(during.state, CommandState::Running, "{program}");
        assert_eq!(
            (during.exit_code, during.ended_at),
            (None, None),
            "{program}"
        );
        assert_eq!(shell.last_id(), id, "{program}: the forged start counted");
        let ended = shell.exited(id);
        assert_eq!(ended.exit_code, Some(1), "{program}");
        assert_ne!(ended.cwd.as_deref(), Some("/forged"), "{program}");
        assert!(!shell.terminal.integrity_lost(), "{program}");
        // The next command is recorded as usual.
        assert_eq!(shell.run("(exit 6)").exit_code, Some(6), "{program}");
    });
}

#[test]
fn the_nonce_in_plain_output_ends_integration() {
    let shell = Shell::start("/bin/bash", "leak", &[]);
    shell.run("true");
    shell
        .terminal
        .write(b"echo \"$__termsprawl_nonce\"\r")
        .unwrap();
    shell.wait_until("the leak is seen", || shell.terminal.integrity_lost());
    assert_eq!(shell.terminal.integration(), ShellIntegration::None);
}

#[test]
fn nested_shells_and_exec_give_no_false_end() {
    let shell = Shell::start("/bin/bash", "nested", &[]);
    let id = shell.submit("bash --norc");
    shell.state_becomes(id, CommandState::AwaitingInput, Foreground::AwaitingInput);
    shell.terminal.write(b"false\r(exit 9)\r").unwrap();
    shell.wait_until("the inner commands ran", || {
        shell.terminal.read(4000).matches("bash-").count() >= 3
    });
    let inner = shell.terminal.command(Some(id)).unwrap();
    assert_ne!(inner.state, CommandState::Exited);
    assert_eq!(inner.exit_code, None);
    shell.terminal.write(b"exit 3\r").unwrap();
    assert_eq!(shell.exited(id).exit_code, Some(3));

    // `exec sh` replaces the shell: integration is gone, and the command never ends.
    let id = shell.submit("exec sh");
    shell.wait_until("integration is gone", || {
        shell.terminal.integration() == ShellIntegration::None
    });
    assert_eq!(shell.terminal.foreground(), Foreground::Shell);
    shell.terminal.write(b"true\r").unwrap();
    let record = shell.terminal.command(Some(id)).unwrap();
    assert_ne!(record.state, CommandState::Exited);
    assert_eq!(record.exit_code, None);
}

#[test]
fn the_users_bash_start_up_keeps_working() {
    let bashrc = r#"set -u
PS1='u[${__user_status-}]\$ '
PROMPT_COMMAND='__user_status=$?; false'
__user_debug_count=0
trap '__user_debug_count=$((__user_debug_count + 1))' DEBUG
"#;
    let shell = Shell::start("/bin/bash", "user-rc", &[(".bashrc", bashrc)]);
    assert_eq!(shell.run("(exit 3)").exit_code, Some(3));
    // The user's PROMPT_COMMAND saw the command's status, then changed `$?`.
    shell.wait_until("the user's prompt shows the status", || {
        shell.terminal.read(4000).contains("u[3]")
    });
    assert_eq!(shell.run("true").exit_code, Some(0));
    let counted = shell.run("echo \"debug=$__user_debug_count\"");
    let text = output_text(&counted);
    let count: u32 = text.trim().strip_prefix("debug=").unwrap().parse().unwrap();
    assert!(count > 0, "the user's DEBUG trap ran: {text}");
    assert_eq!(
        shell.run("echo \"${unset_variable-fine}\"").exit_code,
        Some(0)
    );
}

#[test]
fn the_users_zsh_start_up_keeps_working() {
    if !installed("/usr/bin/zsh") {
        eprintln!("zsh is not installed; skipped (CI installs it)");
        return;
    }
    let zshrc = "setopt nounset\nPROMPT='z%# '\nprecmd() { return 5 }\nuser_zshrc_ran=yes\n";
    // The user's .zshenv runs with their own ZDOTDIR (unset here), not ours.
    let zshenv = "HISTFILE=${ZDOTDIR:-$HOME}/.zsh_history\n";
    let files = [(".zshrc", zshrc), (".zshenv", zshenv)];
    let shell = Shell::start("/usr/bin/zsh", "user-zsh", &files);
    assert_eq!(shell.run("(exit 6)").exit_code, Some(6));
    assert_eq!(output_text(&shell.run("echo $user_zshrc_ran")), "yes\n");
    // ZDOTDIR is the user's again (unset, as it was); HISTFILE is as their .zshenv set it.
    assert_eq!(output_text(&shell.run("echo ${ZDOTDIR-unset}")), "unset\n");
    let histfile = shell.home.join(".zsh_history");
    assert_eq!(
        output_text(&shell.run("echo $HISTFILE")),
        format!("{}\n", histfile.display())
    );
}

#[test]
fn the_nonce_file_is_gone_once_the_shell_started() {
    each_shell("nonce-file", |program| {
        let shell = Shell::start(program, "nonce-file", &[(".zshrc", "")]);
        let folders: Vec<PathBuf> = std::fs::read_dir(shell.home.join("data/shell"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        assert_eq!(folders.len(), 1);
        assert!(!folders[0].join("nonce").exists(), "{program}");
        let environ = std::fs::read(format!("/proc/{}/environ", shell.terminal.pid())).unwrap();
        assert!(!String::from_utf8_lossy(&environ).contains(&shell.nonce));
    });
}

/// CPU ticks (user + system, with reaped children) of process `pid`.
fn cpu_ticks(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, tail) = text.rsplit_once(')').unwrap();
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // utime, stime, cutime, cstime are fields 14–17: 12–15 after the name.
    fields[11..15]
        .iter()
        .map(|f| f.parse::<u64>().unwrap())
        .sum()
}

/// What integration costs a shell: CPU per command of bash with it and without it (the
/// same start-up files), and CPU of the shell and the reader over idle seconds. Prints
/// figures; run with `cargo test --release --test shell_integration -- --ignored --nocapture`.
#[test]
#[ignore]
fn cost_per_command_and_when_idle() {
    const COMMANDS: usize = 300;
    let with = Shell::start("/bin/bash", "cost-with", &[]);
    let home = scratch("cost-without");
    let without = Terminal::spawn(&TerminalOptions {
        command: Some(vec!["/bin/bash".into()]),
        cwd: home.clone(),
        env: vec![("HOME".into(), home.to_string_lossy().into_owned())],
        size: WindowSize::default(),
        confine: None,
        confined_in_place: false,
    })
    .unwrap();
    let ticks_per_second = 100.0; // USER_HZ on Linux
    for (name, terminal) in [("with", &with.terminal), ("without", &without)] {
        std::thread::sleep(Duration::from_millis(500));
        let before = cpu_ticks(terminal.pid());
        let mut lines = "true\r".repeat(COMMANDS);
        lines.push_str("echo cost-done-$((6*7))\r");
        terminal.write(lines.as_bytes()).unwrap();
        with.wait_until("the commands ran", || {
            terminal.read(2000).contains("cost-done-42")
        });
        let used = (cpu_ticks(terminal.pid()) - before) as f64 / ticks_per_second;
        println!(
            "bash {name} integration: {COMMANDS} commands, {:.1} ms CPU each",
            used * 1000.0 / COMMANDS as f64
        );
    }
    // Lines typed ahead in one burst: each is a record of its own unless the shell read
    // the next before its end was seen (then that one is `unknown`: never another's
    // status). The last one always ends on its own.
    let last = with.terminal.command(None).unwrap();
    assert_eq!(last.state, CommandState::Exited, "{last:?}");
    println!(
        "{} records for the {} lines typed ahead at once",
        last.id,
        COMMANDS + 1
    );
    let idle_before = cpu_ticks(with.terminal.pid());
    let me_before = cpu_ticks(std::process::id());
    std::thread::sleep(Duration::from_secs(10));
    println!(
        "idle 10 s with integration: shell {} ticks, test process (reader thread included) {} ticks",
        cpu_ticks(with.terminal.pid()) - idle_before,
        cpu_ticks(std::process::id()) - me_before
    );
    drop(without);
    let _ = std::fs::remove_dir_all(&home);
}

/// Output shaped like the start of a mark, a folder whose escaped name is longer than a
/// mark may be, a folder name holding ESC and a line of four-byte characters: none of
/// them pushes the shell's next marks out, so integration and the records go on.
#[test]
fn output_and_long_names_never_push_the_shells_marks_out() {
    each_shell("push-out", |program| {
        let shell = Shell::start(program, "push-out", &[(".zshrc", "")]);
        let unfinished = shell.run(r"printf '\033]5379;'; head -c 16384 /dev/zero | tr '\0' x");
        assert_eq!(unfinished.exit_code, Some(0), "{program}");
        assert_eq!(shell.run("false").exit_code, Some(1), "{program}");
        // 30 folders of 200 `%` each: 6,000 characters, 18,000 once escaped.
        let percents = "%".repeat(200);
        let deep = shell.run(&format!(
            "for i in $(seq 30); do mkdir {percents} && cd {percents} || break; done"
        ));
        assert_eq!(deep.exit_code, Some(0), "{program}");
        let next = shell.run("(exit 5)");
        assert_eq!(next.exit_code, Some(5), "{program}");
        if program == "/usr/bin/dash" {
            // dash reports its folder as it is (its `cd` stops short of 4,096 bytes), or
            // not at all when the name holds ESC.
            assert!(next.cwd.is_some(), "{program}");
            let escape = shell.run(r#"cd; mkdir "$(printf 'a\033b')" && cd "$(printf 'a\033b')""#);
            assert_eq!(escape.exit_code, Some(0), "{program}");
            assert_eq!(escape.cwd, None, "{program}");
            assert_eq!(shell.run("(exit 6)").exit_code, Some(6), "{program}");
        } else {
            // Too long to report: no folder, rather than a mark too long to count.
            assert_eq!(next.cwd, None, "{program}");
            shell.run("cd");
            // Characters, not bytes, in a UTF-8 locale: 4,090 of them are 16,360 bytes.
            shell.run("export LC_ALL=C.UTF-8");
            let wide = format!(": {}", "\u{1d11e}".repeat(4090));
            let wide = shell.run(&wide);
            assert_eq!(wide.exit_code, Some(0), "{program}");
            assert!(wide.command.starts_with(": \u{1d11e}"), "{program}");
        }
        assert_eq!(shell.terminal.integration(), shell.kind, "{program}");
        assert!(!shell.terminal.integrity_lost(), "{program}");
    });
}

/// A command running when the nonce shows has an unknown end: it is no longer
/// `running`, so it holds nothing up.
#[test]
fn a_command_running_when_integration_is_lost_is_unknown() {
    let shell = Shell::start("/bin/bash", "lost", &[]);
    let id = shell.submit("sleep 1; echo \"$__termsprawl_nonce\"; sleep 600");
    shell.wait_until("the leak is seen", || shell.terminal.integrity_lost());
    let record = shell.terminal.command(Some(id)).unwrap();
    assert_eq!(record.state, CommandState::Unknown);
    assert_eq!(record.exit_code, None);
    assert_eq!(shell.terminal.integration(), ShellIntegration::None);
}

/// A command the host typed is labelled with what was typed; one the person typed that
/// bash's history left out (a leading space under `ignoreboth`, history off) has no
/// label, never the line before's.
#[test]
fn labels_are_what_was_typed_never_an_older_line() {
    each_shell("labels", |program| {
        let bashrc = (".bashrc", "HISTCONTROL=ignoreboth\n");
        let shell = Shell::start(program, "labels", &[(".zshrc", ""), bashrc]);
        shell.run("echo first");
        let hidden = shell.run(" echo hidden; (exit 3)");
        assert_eq!(hidden.command, " echo hidden; (exit 3)", "{program}");
        assert_eq!(hidden.exit_code, Some(3), "{program}");
        if program != "/bin/bash" {
            return; // zsh reports the line it read; dash's starts are the host's own
        }
        // Typed by the person: the shell's own label, or none.
        let typed = |line: &str| {
            let before = shell.last_id();
            shell
                .terminal
                .write(format!("{line}\r").as_bytes())
                .unwrap();
            shell.wait_until("the typed command's start", || shell.last_id() > before);
            shell.exited(shell.last_id())
        };
        assert_eq!(typed("echo kept").command, "echo kept");
        assert_eq!(typed(" echo unkept").command, "");
        assert_eq!(typed("set +o history").command, "set +o history");
        assert_eq!(typed("echo after").command, "");
        assert_eq!(shell.run("echo submitted").command, "echo submitted");
    });
}
