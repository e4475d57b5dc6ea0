//! The pane filter: `termsprawl-tools pane`, the program of every tmux terminal, which
//! runs the real program behind a [`QueryFilter`] so that tmux never answers a terminal
//! query into the program's input (see [`crate::host::terminals::pane_filter::queries`]).
//!
//! ```text
//! termsprawl-tools pane                        # $SHELL as a login shell (what tmux runs)
//! termsprawl-tools pane --integrate SOCKET     # the same with shell integration
//! termsprawl-tools pane -c COMMAND             # $SHELL -c COMMAND
//! termsprawl-tools pane -- PROGRAM [ARG...]    # PROGRAM, looked up on PATH
//! termsprawl-tools pane --confine BWRAP|landlock [--hide P | --show P | --show-writable P | --read-only P]... ANY OF THE ABOVE
//! termsprawl-tools pane [--confine …] --log DIR ANY OF THE ABOVE  # keeping the output in DIR
//! termsprawl-tools pane --take-terminal [--landlock PLAN...] -- PROGRAM [ARG...]   # see below
//! ```
//!
//! `--take-terminal` is a confined program's first step: it puts itself in a process group
//! of its own that has the terminal, then `exec`s PROGRAM. So, inside bubblewrap, the
//! shell finds the terminal held by a group it can see (the one bubblewrap's process had
//! is outside its PID namespace: dash, which gives the terminal back to that group when it
//! exits, would fail and end with status 2). With `--landlock` and the plan's flags, it
//! first restricts itself with Landlock ([`crate::host::isolation::landlock`]) while it is
//! one thread, so PROGRAM and all it starts are confined; if it cannot, PROGRAM is not run.
//!
//! With `--confine`, the program runs under that bubblewrap, or Landlock, with that plan
//! ([`crate::host::isolation`]), and the filter (which holds the integration's nonce and
//! socket) stays outside it, and shows the shell's start-up folder writable inside; a
//! login shell is then started with `-l`, as the first step cannot set an `argv[0]` of
//! `-NAME`.
//!
//! It starts the program on an inner PTY (its own session, the PTY as controlling
//! terminal, the pane's line settings and size, the same environment and folder), puts
//! the pane's terminal (its stdin) in raw mode and copies: keys from tmux to the program
//! unchanged, the program's output to tmux through the filter, in blocks of up to 64 KiB
//! (one `poll` and one read/write per block). Job control, Ctrl+C, bracketed paste and
//! `TERM` work as before because the inner PTY's line discipline does what the pane's
//! did. A window size change (SIGWINCH on the pane) is passed on to the inner PTY.
//!
//! It ends when the program ends, after passing on its last output, and ends the same
//! way: with the program's exit status, or by the signal that killed it (without a core
//! file), so tmux's `pane_dead_status` / `pane_dead_signal` are the program's own. When
//! tmux closes the pane, the program's terminal is hung up, as tmux's would have been.
//!
//! With `--log DIR`, what it passes to tmux is also appended to files in DIR, the pane's
//! output history ([`output_log`]; `terminal_read` with `since` or `search`).
//!
//! With `--integrate`, a bash, zsh or `sh` login shell starts with our shell
//! integration (its start-up files in a `shell` folder beside `SOCKET`), the filter
//! takes our marks out of its output before anything else and answers `serve` about
//! its commands on `SOCKET` (`shell_socket`); another shell starts as without it.
//!
//! `SHELL` is the pane's (tmux sets it to its `default-shell`), else `/bin/sh`; the login
//! shell's `argv[0]` is `-NAME`, as tmux makes it. An embedder that uses the default host
//! with its own executable calls [`main`] from it for a `pane` argument and names that
//! executable in `HostConfig::pane_filter`.

pub mod output_log;
pub mod queries;
pub(crate) mod shell_socket;

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::host::isolation::{Confiner, Plan, LANDLOCK_STEP, TAKE_TERMINAL};
use crate::host::terminals::pane_filter::queries::QueryFilter;
use crate::host::terminals::procfs;
use crate::host::terminals::shell::inject::{self, Injection, Start};
use crate::runtime::agents::resolve_executable;
use crate::sys::fd::poll;
use crate::sys::process::wait_child;
use crate::sys::pty::{self, SpawnFailure};
use shell_socket::{PaneShell, PaneSocket};

/// The subcommand of the host binary that runs the pane filter.
pub const PANE_SUBCOMMAND: &str = "pane";

/// How long a confining `bwrap` may take to start the program.
const CONFINED_START_TIMEOUT: Duration = Duration::from_secs(5);
/// The most bytes moved per read.
const BLOCK: usize = 64 * 1024;
/// How long an unfinished escape sequence is held back when no more output comes.
const QUIET: Duration = Duration::from_millis(50);
/// After the program exited: how long its last output is passed on while something (a
/// background job) still holds its terminal. Until the terminal is closed, not until it
/// is quiet: on a busy machine the kernel may pass the program's last writes to the
/// terminal's reader a while after it exited.
const LAST_OUTPUT_LIMIT: Duration = Duration::from_millis(500);

const USAGE: &str =
    "usage: termsprawl-tools pane [--confine BWRAP|landlock [--hide P|--show P|--show-writable P|--read-only P]...] [--log DIR] [--integrate SOCKET | -c COMMAND | -- PROGRAM [ARG...]] (the program of a tmux terminal)";

/// What the pane runs.
#[derive(Debug, PartialEq, Eq)]
enum Program {
    LoginShell,
    /// A login shell with integration, answering on this socket.
    IntegratedShell(PathBuf),
    ShellCommand(String),
    Argv(Vec<String>),
}

/// `pane --take-terminal [--landlock PLAN…] -- PROGRAM [ARG...]` (`args` after
/// `--take-terminal`): restricts itself with Landlock when asked, takes the terminal on
/// stdin for a process group of its own, then `exec`s PROGRAM (looked up on PATH) in this
/// process. Returns only on failure (2 on a usage error, else 127; said on stderr).
fn take_terminal_and_run(mut args: &[String]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let mut landlock = None;
    if let [flag, rest @ ..] = args {
        if flag == LANDLOCK_STEP {
            let mut plan = Plan::default();
            args = rest;
            while let [flag, path, rest @ ..] = args {
                if !plan.take_arg(flag, PathBuf::from(path)) {
                    break;
                }
                args = rest;
            }
            landlock = Some(plan);
        }
    }
    let argv = match args {
        [separator, argv @ ..] if separator == "--" && !argv.is_empty() => argv,
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let landlocked = landlock.is_some();
    if let Some(plan) = landlock {
        let restricted = crate::host::isolation::landlock::abi()
            .map_err(io::Error::other)
            .and_then(|abi| {
                let rules = crate::host::isolation::landlock::rules(&plan, abi);
                crate::host::isolation::landlock::restrict(&rules, abi)
            });
        if let Err(error) = restricted {
            eprintln!("termsprawl-tools pane: cannot confine the program with Landlock, so it is not run: {error}");
            return ExitCode::from(127);
        }
    }
    if let Err(error) = pty::take_foreground(io::stdin().as_fd()) {
        eprintln!("termsprawl-tools pane: cannot take the terminal: {error}");
        return ExitCode::from(127);
    }
    let mut program = std::process::Command::new(&argv[0]);
    program.args(&argv[1..]);
    if landlocked {
        // Words the person's commands' refusal; what stops them is the rules.
        program.env("TERMSPRAWL_CONFINED", "landlock");
    }
    let error = program.exec();
    eprintln!("termsprawl-tools pane: cannot run {}: {error}", argv[0]);
    ExitCode::from(127)
}

/// What confines the program and its plan.
type Confine = (Confiner, Plan);

/// The confinement at the front of `args` (`--confine BWRAP|landlock` and the plan's
/// flags), if any, and the rest.
fn parse_confinement(mut args: &[String]) -> Option<(Option<Confine>, &[String])> {
    let [flag, bwrap, rest @ ..] = args else {
        return Some((None, args));
    };
    if flag != "--confine" {
        return Some((None, args));
    }
    let mut plan = Plan::default();
    args = rest;
    while let [flag, path, rest @ ..] = args {
        if !plan.take_arg(flag, PathBuf::from(path)) {
            break;
        }
        args = rest;
    }
    Confiner::from_arg(bwrap).map(|confiner| (Some((confiner, plan)), args))
}

fn parse(args: &[String]) -> Option<Program> {
    match args {
        [] => Some(Program::LoginShell),
        [flag, socket] if flag == "--integrate" && !socket.is_empty() => {
            Some(Program::IntegratedShell(socket.into()))
        }
        [flag, command] if flag == "-c" => Some(Program::ShellCommand(command.clone())),
        [separator, argv @ ..] if separator == "--" && !argv.is_empty() => {
            Some(Program::Argv(argv.to_vec()))
        }
        _ => None,
    }
}

/// `termsprawl-tools pane ARGS`: runs the program and ends as it ended (a program killed
/// by a signal ends this process by the same signal, so then this does not return).
/// Exit 2 on a usage error, 127 when the program cannot be started, 1 on another failure.
pub fn main(args: &[String]) -> ExitCode {
    if let [flag, rest @ ..] = args {
        if flag == TAKE_TERMINAL {
            return take_terminal_and_run(rest);
        }
    }
    let Some((confine, args)) = parse_confinement(args) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let (log, args) = match args {
        [flag, dir, rest @ ..] if flag == "--log" && !dir.is_empty() => {
            (Some(PathBuf::from(dir)), rest)
        }
        _ => (None, args),
    };
    let Some(program) = parse(args) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let log = log.and_then(|dir| match output_log::OutputLog::create(&dir) {
        Ok(log) => Some(log),
        Err(error) => {
            eprintln!(
                "termsprawl-tools pane: no output history: cannot write {}: {error}",
                dir.display()
            );
            None
        }
    });
    let ran = run(&program, confine.as_ref(), log);
    // A confined program's end, as `bwrap` passes it on.
    let ran = match confine {
        Some((Confiner::Bwrap(_), _)) => {
            ran.map(crate::host::isolation::bwrap::program_wait_status)
        }
        _ => ran,
    };
    match ran {
        Ok(status) if libc::WIFSIGNALED(status) => {
            pty::end_by_signal(libc::WTERMSIG(status));
            ExitCode::from(128 + libc::WTERMSIG(status) as u8)
        }
        Ok(status) => ExitCode::from(libc::WEXITSTATUS(status) as u8),
        Err(Failure::Start(error)) => {
            eprintln!("termsprawl-tools pane: {error}");
            ExitCode::from(127)
        }
        Err(Failure::Other(error)) => {
            eprintln!("termsprawl-tools pane: {error}");
            ExitCode::from(1)
        }
    }
}

enum Failure {
    /// The program could not be started.
    Start(String),
    Other(String),
}

fn other(what: &str) -> impl Fn(io::Error) -> Failure + '_ {
    move |error| Failure::Other(format!("{what}: {error}"))
}

/// The pane's shell: `$SHELL`, else `/bin/sh`.
fn user_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".to_string())
}

/// The program's path and argv.
fn command(program: &Program) -> Result<(CString, Vec<CString>), Failure> {
    let shell = user_shell();
    let shell_name = Path::new(&shell)
        .file_name()
        .map_or(shell.clone(), |n| n.to_string_lossy().into_owned());
    let (path, argv) = match program {
        Program::LoginShell | Program::IntegratedShell(_) => {
            (shell.clone().into(), vec![format!("-{shell_name}")])
        }
        Program::ShellCommand(line) => (
            shell.clone().into(),
            vec![shell_name, "-c".to_string(), line.clone()],
        ),
        Program::Argv(argv) if argv[0].contains('/') => (argv[0].clone().into(), argv.clone()),
        Program::Argv(argv) => {
            let path = resolve_executable(&argv[0], std::env::var_os("PATH").as_deref())
                .ok_or_else(|| Failure::Start(format!("{}: command not found", argv[0])))?;
            (path, argv.clone())
        }
    };
    let nul = |_| Failure::Start("an argument contains a NUL byte".to_string());
    let path = CString::new(path.into_os_string().into_vec()).map_err(nul)?;
    let argv = argv
        .into_iter()
        .map(|arg| CString::new(arg).map_err(nul))
        .collect::<Result<_, _>>()?;
    Ok((path, argv))
}

/// `path` and `argv` confined by `confiner` with `plan`: the path and argv of what runs
/// first (`bwrap`, or this executable's first step). A login shell's `-NAME` becomes
/// `PATH -l`.
fn confined(
    (confiner, plan): &Confine,
    path: &CString,
    argv: &[CString],
) -> Result<(CString, Vec<CString>), Failure> {
    use std::os::unix::ffi::OsStrExt;
    let os = |c: &CString| std::ffi::OsStr::from_bytes(c.as_bytes()).to_os_string();
    // This executable is the first step inside (`pane --take-terminal`).
    let this = std::env::current_exe().map_err(|e| Failure::Start(e.to_string()))?;
    let mut program = Vec::new();
    program.push(os(path));
    let login = argv
        .first()
        .is_some_and(|arg0| arg0.as_bytes().starts_with(b"-"));
    if login {
        program.push("-l".into());
    }
    program.extend(argv.iter().skip(1).map(os));
    let mut words = crate::host::isolation::confined_words(confiner, plan, Some(&this));
    words.extend(program);
    let nul = |_| Failure::Start("an argument contains a NUL byte".to_string());
    let words: Vec<CString> = words
        .into_iter()
        .map(|word| CString::new(word.into_vec()).map_err(nul))
        .collect::<Result<_, _>>()?;
    Ok((words[0].clone(), words))
}

/// Starts the program (under `confine` when given) and relays until it ends; returns its
/// raw wait status.
fn run(
    program: &Program,
    confine: Option<&Confine>,
    log: Option<output_log::OutputLog>,
) -> Result<libc::c_int, Failure> {
    let stdin = io::stdin();
    let pane = stdin.as_fd();
    let settings = pty::terminal_settings(pane).map_err(|e| {
        Failure::Other(format!(
            "its input is not a terminal ({e}); it runs as the program of a tmux pane"
        ))
    })?;
    let size = pty::window_size(pane).unwrap_or_default();
    let (path, mut argv) = command(program)?;
    let injection = match program {
        Program::IntegratedShell(socket) => injection(socket),
        _ => None,
    };
    // Environment and folder are this process's own: tmux made them for the program.
    let mut env: Vec<(Vec<u8>, Vec<u8>)> = std::env::vars_os()
        .map(|(name, value)| (name.into_vec(), value.into_vec()))
        .collect();
    if let Some(injection) = &injection {
        argv = injection
            .argv
            .iter()
            .filter_map(|arg| CString::new(arg.as_bytes()).ok())
            .collect();
        for (name, value) in &injection.env {
            env.retain(|(old, _)| old != name.as_bytes());
            env.push((name.clone().into_bytes(), value.clone().into_bytes()));
        }
    }
    let (path, argv) = match confine {
        Some((confiner, plan)) => {
            let mut plan = plan.clone();
            plan.writable
                .extend(injection.as_ref().map(|i| i.dir().to_path_buf()));
            confined(&(confiner.clone(), plan), &path, &argv)?
        }
        None => (path, argv),
    };
    let envp: Vec<CString> = env
        .into_iter()
        .filter_map(|(mut entry, value)| {
            entry.push(b'=');
            entry.extend_from_slice(&value);
            CString::new(entry).ok()
        })
        .collect();
    // Blocked before the program starts, so its exit cannot be missed.
    // SIGHUP: tmux closed the pane (its server ended); ending as when the pane's input
    // closes removes the integration's socket and files rather than dying by default.
    let signals = pty::signal_reader(&[libc::SIGCHLD, libc::SIGWINCH, libc::SIGHUP])
        .map_err(other("cannot watch signals"))?;
    let pair = pty::open_pty(size).map_err(other("cannot open a pseudo-terminal"))?;
    pty::set_terminal_settings(pair.slave.as_fd(), &settings)
        .map_err(other("cannot set up the pseudo-terminal"))?;
    let pid = pty::spawn(&pair.slave, &path, &argv, &envp, c".").map_err(|failure| {
        let name = argv[0].to_string_lossy().into_owned();
        match failure {
            SpawnFailure::Exec(e) => Failure::Start(format!("cannot run {name}: {e}")),
            SpawnFailure::Fork(e) | SpawnFailure::Terminal(e) | SpawnFailure::Cwd(e) => {
                Failure::Start(format!("cannot start {name}: {e}"))
            }
        }
    })?;
    drop(pair.slave);
    // The shell whose kernel state integration asks about: the program itself (also under
    // Landlock, where the first step `exec`s it), or the one child of a confining `bwrap`.
    let program_pid = match confine {
        None => pid,
        Some((Confiner::Landlock, _)) => {
            procfs::wait_until_exec(pid, CONFINED_START_TIMEOUT);
            pid
        }
        Some((Confiner::Bwrap(_), _)) => {
            let steps: Vec<PathBuf> = std::env::current_exe().into_iter().collect();
            let found = crate::host::isolation::bwrap::confined_program(
                pid,
                &steps,
                CONFINED_START_TIMEOUT,
            );
            // Ended already (a program that exits at once, or bwrap's own error): relayed
            // and ended as any program.
            let ended = || procfs::proc_stat(pid).is_some_and(|stat| !stat.running());
            match found {
                Some(program) => program,
                None if ended() => pid,
                None => {
                    return Err(Failure::Start(
                        "bubblewrap did not start the program".into(),
                    ))
                }
            }
        }
    };
    let copy = |fd: BorrowedFd<'_>, what: &str| {
        fd.try_clone_to_owned().map(File::from).map_err(other(what))
    };
    let master = Arc::new(File::from(pair.master));
    // Removed when this returns: the socket, then the start-up files.
    let (shell, _socket, _injection) = match (program, injection) {
        (Program::IntegratedShell(socket), Some(injection)) => {
            let shell = PaneShell::new(
                injection.kind,
                &injection.nonce,
                program_pid,
                master.clone(),
            );
            let shell = Arc::new(shell);
            match shell_socket::serve_pane(socket, Arc::clone(&shell)) {
                Ok(listening) => (Some(shell), Some(listening), Some(injection)),
                Err(error) => {
                    eprintln!(
                        "termsprawl-tools pane: no shell integration: cannot listen on {}: {error}",
                        socket.display()
                    );
                    (None::<Arc<PaneShell>>, None::<PaneSocket>, Some(injection))
                }
            }
        }
        (_, injection) => (None, None, injection),
    };
    let relay = Relay {
        pane_in: copy(pane, "cannot use stdin")?,
        pane_out: copy(io::stdout().as_fd(), "cannot use stdout")?,
        master,
        shell,
        signals,
        pid,
        log,
    };
    let raw = pty::raw_settings(&settings);
    pty::set_terminal_settings(pane, &raw).map_err(other("cannot put the pane in raw mode"))?;
    let status = relay.run();
    // Left as tmux set it up, for whatever tmux shows after the program (remain-on-exit).
    let _ = pty::set_terminal_settings(pane, &settings);
    status.map_err(other("relaying the terminal failed"))
}

struct Relay {
    /// The pane's terminal, as tmux gave it to us.
    pane_in: File,
    pane_out: File,
    /// The program's terminal (non-blocking).
    master: Arc<File>,
    /// The shell's integration, when it has one: output goes through it first.
    shell: Option<Arc<PaneShell>>,
    signals: File,
    pid: libc::pid_t,
    /// The output history, when asked for (`--log`).
    log: Option<output_log::OutputLog>,
}

impl Relay {
    /// Copies in both directions until the program exits; returns its raw wait status.
    fn run(mut self) -> io::Result<libc::c_int> {
        let mut filter = QueryFilter::new();
        let mut buffer = vec![0u8; BLOCK];
        let mut out = Vec::with_capacity(BLOCK);
        // Keys the program has not taken yet; while there are some, no more are read.
        let mut keys: Vec<u8> = Vec::new();
        let mut program_open = true;
        loop {
            if !program_open {
                keys.clear(); // no one can read them any more
            }
            let mut fds = [
                poll_fd(&self.pane_in, keys.is_empty(), libc::POLLIN),
                poll_fd(&self.master, program_open, libc::POLLIN),
                poll_fd(&self.signals, true, libc::POLLIN),
            ];
            if program_open && !keys.is_empty() {
                fds[1].events |= libc::POLLOUT;
            }
            let timeout = if filter.holds_partial() {
                QUIET.as_millis() as libc::c_int
            } else {
                -1
            };
            let ready = match poll(&mut fds, timeout) {
                Ok(ready) => ready,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if ready == 0 {
                filter.flush(&mut out);
                self.write_pane(&mut out)?;
                continue;
            }
            if fds[2].revents != 0 {
                if drain(&self.signals) {
                    return self.hang_up();
                }
                if let Some(status) = wait_child(self.pid, false)? {
                    self.last_output(&mut filter, &mut buffer, &mut out)?;
                    return Ok(status);
                }
                if let Ok(size) = pty::window_size(self.pane_in.as_fd()) {
                    let _ = pty::set_window_size(self.master.as_fd(), size);
                }
            }
            if fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                match self.read_program(&mut buffer) {
                    Ok(None) => program_open = false,
                    Ok(Some(plain)) => {
                        filter.feed(&plain, &mut out);
                        self.write_pane(&mut out)?;
                    }
                    Err(e) if retry(&e) => {}
                    // EIO: nothing holds the program's terminal any more.
                    Err(_) => program_open = false,
                }
            }
            if fds[1].revents & libc::POLLOUT != 0 && !keys.is_empty() {
                match (&*self.master).write(&keys) {
                    Ok(n) => drop(keys.drain(..n)),
                    Err(e) if retry(&e) => {}
                    Err(_) => keys.clear(),
                }
            }
            if fds[0].revents != 0 {
                match (&self.pane_in).read(&mut buffer) {
                    Ok(n) if n > 0 => keys.extend_from_slice(&buffer[..n]),
                    Err(e) if retry(&e) => {}
                    // tmux closed the pane: hang up on the program, as tmux would have.
                    Ok(_) | Err(_) => return self.hang_up(),
                }
            }
        }
    }

    /// One chunk of the program's output (`None` at end of file), our marks taken out
    /// when the shell has integration.
    fn read_program(&self, buffer: &mut [u8]) -> io::Result<Option<Vec<u8>>> {
        if let Some(shell) = &self.shell {
            return shell.read_chunk(buffer);
        }
        match (&*self.master).read(buffer)? {
            0 => Ok(None),
            n => Ok(Some(buffer[..n].to_vec())),
        }
    }

    /// Writes `out` to the pane (waiting while tmux is behind) and empties it.
    fn write_pane(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let mut rest = &out[..];
        while !rest.is_empty() {
            match (&self.pane_out).write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [poll_fd(&self.pane_out, true, libc::POLLOUT)];
                    match poll(&mut fds, -1) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        // After tmux has it: a cursor read with the screen never counts what the screen
        // does not show yet.
        if let Some(log) = self.log.as_mut() {
            log.append(out);
        }
        out.clear();
        Ok(())
    }

    /// Passes on what the program wrote before it exited, until its terminal is closed
    /// (at most [`LAST_OUTPUT_LIMIT`]), then anything held.
    fn last_output(
        &mut self,
        filter: &mut QueryFilter,
        buffer: &mut [u8],
        out: &mut Vec<u8>,
    ) -> io::Result<()> {
        let deadline = Instant::now() + LAST_OUTPUT_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut fds = [poll_fd(&self.master, true, libc::POLLIN)];
            match poll(&mut fds, left.as_millis().max(1) as libc::c_int) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            match self.read_program(buffer) {
                Ok(None) => break,
                Ok(Some(plain)) => filter.feed(&plain, out),
                Err(e) if retry(&e) => {}
                Err(_) => break,
            }
        }
        filter.flush(out);
        self.write_pane(out)
    }

    /// Closes the program's terminal (the kernel sends it SIGHUP) and waits for it.
    fn hang_up(self) -> io::Result<libc::c_int> {
        let pid = self.pid;
        // The integration's socket thread holds the master too: it lets go first.
        if let Some(shell) = &self.shell {
            shell.release();
        }
        drop(self.master);
        wait_child(pid, true)?.ok_or_else(|| io::ErrorKind::Other.into())
    }
}

/// The user's shell started with integration answering on `socket`, if it is a shell
/// we know and its files can be written (else it starts without, and says why).
fn injection(socket: &Path) -> Option<Injection> {
    let program = user_shell();
    let kind = inject::shell_kind(&program)?;
    let files = shell_socket::shell_files(socket);
    let user_var = |name: &str| std::env::var(name).ok();
    match inject::prepare(&program, kind, Start::Login, &files, &user_var) {
        Ok(injection) => Some(injection),
        Err(error) => {
            eprintln!("termsprawl-tools pane: starting {program} without shell integration: cannot write its start-up files: {error}");
            None
        }
    }
}

fn poll_fd(file: &File, wanted: bool, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        // poll skips negative descriptors.
        fd: if wanted { file.as_raw_fd() } else { -1 },
        events,
        revents: 0,
    }
}

fn retry(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Reads every pending signal record (only their arrival matters).
/// Reads every pending signal record; true if SIGHUP was among them.
fn drain(signals: &File) -> bool {
    // A `signalfd_siginfo` is 128 bytes and starts with the signal number.
    const RECORD: usize = 128;
    let mut records = [0u8; 16 * RECORD];
    let mut hung_up = false;
    while let Ok(n @ 1..) = (&*signals).read(&mut records) {
        hung_up |= records[..n].chunks_exact(RECORD).any(|record| {
            let number = u32::from_ne_bytes([record[0], record[1], record[2], record[3]]);
            number == libc::SIGHUP as u32
        });
    }
    hung_up
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_name_the_program() {
        assert_eq!(parse(&[]), Some(Program::LoginShell));
        assert_eq!(
            parse(&strings(&["--integrate", "/d/panes/t1.sock"])),
            Some(Program::IntegratedShell("/d/panes/t1.sock".into()))
        );
        assert_eq!(
            parse(&strings(&["-c", "echo hi; exit 3"])),
            Some(Program::ShellCommand("echo hi; exit 3".into()))
        );
        assert_eq!(
            parse(&strings(&["--", "sleep", "5"])),
            Some(Program::Argv(strings(&["sleep", "5"])))
        );
        for bad in [
            &["--"][..],
            &["-c"],
            &["-c", "a", "b"],
            &["sleep"],
            &["-x"],
            &["--integrate"],
            &["--integrate", ""],
        ] {
            assert_eq!(parse(&strings(bad)), None, "{bad:?}");
        }
    }

    #[test]
    fn a_missing_program_is_named() {
        let Err(Failure::Start(message)) =
            command(&Program::Argv(strings(&["no-such-program-here"])))
        else {
            panic!("found a program that does not exist");
        };
        assert!(message.contains("no-such-program-here: command not found"));
    }
}
