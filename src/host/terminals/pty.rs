//! The built-in terminal backend: a real PTY per terminal node.
//!
//! A [`Terminal`] owns one child (the user's `$SHELL`, else `/bin/sh`, or a given
//! command) that leads its own session with the PTY as controlling terminal. One reader
//! thread per terminal copies output into a bounded raw [`Scrollback`] and a plain-text
//! [`Screen`], and reaps the child when the PTY reports end of file. [`PtyTerminals`] is
//! the thread-safe registry keyed by node id.
//!
//! Linux only (`/dev/ptmx`, `/proc`). Closing ends the whole session: every process whose session id is the child's (found
//! in `/proc`, so background jobs in their own process groups are included) gets
//! SIGHUP and SIGCONT, then SIGKILL once [`CLOSE_GRACE`] has passed; the child is reaped.

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::base::unix_millis;
use crate::host::isolation::bwrap;
use crate::host::terminals::history::History;
use crate::host::terminals::procfs;
use crate::host::terminals::screen::Screen;
use crate::host::terminals::shell::inject::Injection;
use crate::host::terminals::shell::text::{plain_text, HEAD_BYTES, TAIL_BYTES};
use crate::host::terminals::shell::{kernel, ShellSession, ShellStatus};
use crate::runtime::{
    CommandOutput, CommandRecord, CommandState, Foreground, OutputMark, ShellIntegration,
};
use crate::server::Waker;
use crate::sys::fd::{pipe, poll};
use crate::sys::process::{send_signal, wait_child};
pub use crate::sys::pty::WindowSize;
use crate::sys::pty::{self, SpawnFailure};

/// The raw scrollback kept per terminal, in bytes.
pub const SCROLLBACK_BYTES: usize = 1 << 20;
/// A terminal is `ready` once its program printed something or this long after spawn.
pub const READY_AFTER: Duration = Duration::from_millis(300);
/// How long processes get to exit after SIGHUP before they are killed.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// How long a write may wait for a program that is not reading its input.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// While a call waits on a terminal, its output wakes the waiter at most this often (a
/// command's start or end, and the program's end, wake it at once).
pub const OUTPUT_WAKE_GAP_MS: u64 = 100;
/// The shell used when `$SHELL` is unset or empty.
pub const FALLBACK_SHELL: &str = "/bin/sh";

const POLL_STEP: Duration = Duration::from_millis(10);
const REAP_AFTER_EOF: Duration = Duration::from_secs(2);
const KILL_WAIT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 64 * 1024;
/// How long a confining `bwrap` may take to start its program.
const CONFINED_START_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the terminal backend. Each message says what to do next.
#[derive(Debug)]
pub enum TerminalError {
    /// The command was empty or contained a NUL byte.
    InvalidCommand(String),
    /// An environment variable name or value was unusable.
    InvalidEnv(String),
    /// The program was not found on `PATH`.
    CommandNotFound(String),
    /// The working directory could not be entered.
    BadDirectory(PathBuf, io::Error),
    /// The PTY could not be created or the program not started.
    Spawn(String, io::Error),
    /// A terminal with this node id is open and running.
    AlreadyOpen(String),
    /// The terminal was closed.
    Closed,
    /// The terminal's program has exited.
    Exited,
    /// The program did not take its input within [`WRITE_TIMEOUT`].
    InputStalled,
    /// Another I/O failure on the PTY.
    Io(io::Error),
}

impl fmt::Display for TerminalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminalError::InvalidCommand(why) => write!(f, "Invalid terminal command: {why}"),
            TerminalError::InvalidEnv(name) => {
                write!(f, "Invalid terminal environment variable {name:?}: names need no '=' or NUL, values no NUL")
            }
            TerminalError::CommandNotFound(program) => {
                write!(
                    f,
                    "Command not found: {program:?} (install it or give its full path)"
                )
            }
            TerminalError::BadDirectory(dir, error) => {
                write!(f, "Cannot start the terminal in {}: {error}", dir.display())
            }
            TerminalError::Spawn(what, error) => {
                write!(f, "Cannot start the terminal: {what}: {error}")
            }
            TerminalError::AlreadyOpen(id) => {
                write!(f, "Terminal {id} is already open; close it first or use it")
            }
            TerminalError::Closed => write!(f, "The terminal was closed; open a new one"),
            TerminalError::Exited => write!(
                f,
                "The terminal's program has exited; close it and open a new one"
            ),
            TerminalError::InputStalled => write!(
                f,
                "The terminal's program is not reading input; interrupt it or try again later"
            ),
            TerminalError::Io(error) => write!(f, "Terminal I/O failed: {error}"),
        }
    }
}

impl std::error::Error for TerminalError {}

/// What to start in a new terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalOptions {
    /// Program and arguments; `None` starts the user's `$SHELL`, else [`FALLBACK_SHELL`].
    /// A program without `/` is looked up on the terminal's `PATH`.
    pub command: Option<Vec<String>>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Variables added to (and overriding) the host's environment.
    pub env: Vec<(String, String)>,
    /// The window size.
    pub size: WindowSize,
    /// A confining program and its arguments, ending with `--`, to run the program under
    /// ([`crate::host::isolation::Confinement::prefix`]).
    pub confine: Option<Vec<String>>,
    /// The confining words end by `exec`ing the program in the same process (Landlock's
    /// first step), rather than running it as a descendant (bubblewrap).
    pub confined_in_place: bool,
}

impl TerminalOptions {
    /// A shell in `cwd` with the host's environment and the default size.
    pub fn shell(cwd: impl Into<PathBuf>) -> TerminalOptions {
        TerminalOptions {
            command: None,
            cwd: cwd.into(),
            env: Vec::new(),
            size: WindowSize::default(),
            confine: None,
            confined_in_place: false,
        }
    }
}

/// Raw output bytes, at most a fixed number, oldest dropped first; the kept bytes always
/// start at a UTF-8 character boundary (never with a continuation byte).
#[derive(Clone, Debug)]
pub struct Scrollback {
    bytes: std::collections::VecDeque<u8>,
    capacity: usize,
    /// Newlines among the bytes dropped so far (for line numbers of what is kept).
    dropped_lines: u64,
    /// The kept bytes start a line: nothing was dropped yet, or the last byte dropped was
    /// a newline.
    starts_line: bool,
}

impl Scrollback {
    /// An empty scrollback holding at most `capacity` bytes.
    pub fn new(capacity: usize) -> Scrollback {
        Scrollback {
            bytes: std::collections::VecDeque::new(),
            capacity,
            dropped_lines: 0,
            starts_line: true,
        }
    }

    /// Appends output, dropping the oldest bytes beyond the capacity (and the rest of a
    /// character cut there).
    pub fn push(&mut self, chunk: &[u8]) {
        let (skipped, chunk) = chunk.split_at(chunk.len().saturating_sub(self.capacity));
        let excess = (self.bytes.len() + chunk.len()).saturating_sub(self.capacity);
        let mut last = None;
        for byte in self
            .bytes
            .drain(..excess.min(self.bytes.len()))
            .chain(skipped.iter().copied())
        {
            self.dropped_lines += u64::from(byte == b'\n');
            last = Some(byte);
        }
        self.bytes.extend(chunk);
        if last.is_some() {
            while self.bytes.front().is_some_and(|b| b & 0xC0 == 0x80) {
                last = self.bytes.pop_front();
            }
        }
        if let Some(byte) = last {
            self.starts_line = byte == b'\n';
        }
    }

    /// How many bytes are kept.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A copy of the kept bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }

    /// A copy of the kept bytes after the first `skip`, at most `limit` of them.
    fn after(&self, skip: usize, limit: usize) -> Vec<u8> {
        let start = skip.min(self.bytes.len());
        let end = start.saturating_add(limit).min(self.bytes.len());
        self.bytes.range(start..end).copied().collect()
    }
}

struct Output {
    scrollback: Scrollback,
    screen: Screen,
    /// Bytes the program wrote so far (our marks not counted).
    written: u64,
    /// Unix ms of the last output (0: none yet).
    last_output_at: u64,
    /// The shell's integration, for a shell started with it.
    shell: Option<ShellSession>,
}

/// Called once by a terminal's reader thread when its program ended on its own (not
/// when the terminal was closed), after the child was reaped.
pub type OnExit = Box<dyn FnOnce() + Send>;

/// State shared by a terminal and its reader thread.
struct Shared {
    /// The child: the program, or the confining `bwrap` that runs it.
    pid: libc::pid_t,
    /// The program (the shell whose kernel state integration asks about): `pid`, or the
    /// one child of a confining `bwrap`.
    program_pid: libc::pid_t,
    output: Mutex<Output>,
    printed: AtomicBool,
    /// Once `Reaped`, the child's pid is never waited for or signalled again.
    child: Mutex<ChildState>,
    /// Set by `close` before any signal is sent, so an end it causes is never reported.
    closed: AtomicBool,
    /// Set by the reader once every holder of the terminal is gone and all its output is
    /// recorded.
    output_done: AtomicBool,
    /// Calls waiting on this terminal now ([`Terminal::watch`]); none: nothing is woken.
    watchers: AtomicUsize,
    /// The server's waiter, given with the first watch.
    waker: OnceLock<Waker>,
    /// Unix ms of the last wake for output.
    output_woken_at: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChildState {
    Running,
    /// Exited and reaped; the status is unknown (`None`) if something else in this
    /// process reaped it first.
    Reaped(Option<ExitStatus>),
}

use crate::base::lock_or_recover as lock;

impl Shared {
    /// Reaps the child if it has exited (waitpid WNOHANG).
    fn try_reap(&self) -> ChildState {
        let mut child = lock(&self.child);
        if *child == ChildState::Running {
            match wait_child(self.pid, false) {
                Ok(Some(status)) => *child = ChildState::Reaped(Some(ExitStatus::from_raw(status))),
                Ok(None) => {}
                // ECHILD: no longer our child to wait for, so it has exited.
                Err(_) => *child = ChildState::Reaped(None),
            }
        }
        *child
    }

    /// Records a chunk the program wrote into `output` (locked by the caller since
    /// before the chunk was read, so whoever holds the lock knows no chunk is half
    /// recorded); the kernel is asked of the shell on `master` when a command's start or
    /// end mark arrives ([`kernel::KernelProbe`]).
    /// Returns whether a waiting call should be woken for it (see [`Shared::wake`]).
    fn record(
        &self,
        output: &mut Output,
        (chunk, reads_before): (&[u8], Option<u64>),
        master: &File,
    ) -> bool {
        let now = unix_millis();
        let marks_before = output.shell.as_ref().map(ShellSession::marks_applied);
        let plain = match output.shell.as_mut() {
            Some(shell) => {
                let mut probe = kernel::KernelProbe {
                    shell: self.program_pid,
                    master: master.as_fd(),
                    reads_before_chunk: reads_before,
                };
                shell.feed(chunk, now, &mut probe)
            }
            None => chunk.to_vec(),
        };
        if !plain.is_empty() {
            output.scrollback.push(&plain);
            output.screen.feed(&plain);
            output.written += plain.len() as u64;
            output.last_output_at = now;
        }
        self.confirm_end(output, master);
        self.printed.store(true, Ordering::Release);
        if self.watchers.load(Ordering::Acquire) == 0 {
            return false;
        }
        let marked = output.shell.as_ref().map(ShellSession::marks_applied) != marks_before;
        let woken_at = self.output_woken_at.load(Ordering::Relaxed);
        let output_due = !plain.is_empty() && now.saturating_sub(woken_at) >= OUTPUT_WAKE_GAP_MS;
        if marked || output_due {
            self.output_woken_at.store(now, Ordering::Relaxed);
        }
        marked || output_due
    }

    /// Has the server's waiting calls checked now, if any waits on this terminal. Never
    /// called with `output` locked: the waiter's checks lock it.
    fn wake(&self) {
        if self.watchers.load(Ordering::Acquire) > 0 {
            if let Some(waker) = self.waker.get() {
                waker.wake();
            }
        }
    }

    /// Makes an unconfirmed command end final if the shell waits at its prompt now
    /// (see [`crate::host::terminals::shell::records`]): its group has the terminal, it is blocked
    /// reading it, and nothing it wrote is unread. `output` is locked, so nothing read
    /// is unrecorded either.
    fn confirm_end(&self, output: &mut Output, master: &File) {
        let Some(shell) = output.shell.as_mut().filter(|s| s.end_unconfirmed()) else {
            return;
        };
        if kernel::shell_waiting(self.program_pid, master.as_fd()) {
            shell.confirm_end();
        }
    }

    /// The running processes of the child's session. Empty once the child is reaped
    /// and its pid has been reused by an unrelated process: while any process of our
    /// session lives, the kernel does not hand out its session id as a new pid.
    fn session_members(&self) -> Vec<libc::pid_t> {
        let reaped = *lock(&self.child) != ChildState::Running;
        if reaped && procfs::proc_stat(self.pid).is_some() {
            return Vec::new();
        }
        procfs::session_members(self.pid)
    }

    fn signal_session(&self, signal: libc::c_int) {
        for pid in self.session_members() {
            // A member may exit between the scan and the signal; that is fine.
            let _ = send_signal(pid, signal);
        }
    }

    /// No process of the session runs and the child is reaped.
    fn finished(&self) -> bool {
        self.try_reap() != ChildState::Running && self.session_members().is_empty()
    }
}

/// A program running on its own PTY. All methods take `&self`; share it as `Arc<Terminal>`.
pub struct Terminal {
    shared: Arc<Shared>,
    master: Arc<File>,
    /// Writing a byte here stops the reader thread.
    wake: File,
    reader: Mutex<Option<JoinHandle<()>>>,
    writing: Mutex<()>,
    started: Instant,
    /// The program it started (`/proc/<pid>/exe` after `exec`): a shell that `exec`s
    /// another program has no integration any more.
    program: Option<PathBuf>,
    /// The shell's start-up files (removed with it).
    _injection: Option<Injection>,
    /// The shell's completed `read` calls when the host typed the open command's line
    /// (a POSIX `sh`): until it reads again, that line is not read yet, so a shell
    /// blocked reading is not waiting for a person.
    typed_at_reads: Mutex<Option<u64>>,
    /// The last [`Terminal::shell_status`], when taken, and the marks applied then.
    listed: Mutex<Option<(Instant, u64, Option<ShellStatus>)>>,
}

/// How long a listing reuses a terminal's [`ShellStatus`] while no mark arrives: what
/// the kernel says (a command waits for input, the shell `exec`ed another program) shows
/// within this; a command's start and end at once.
pub const SHELL_STATUS_TTL: Duration = Duration::from_millis(250);

impl fmt::Debug for Terminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Terminal")
            .field("pid", &self.shared.pid)
            .finish_non_exhaustive()
    }
}

impl Terminal {
    /// Starts `options.command` (default: the user's shell) on a new PTY.
    pub fn spawn(options: &TerminalOptions) -> Result<Terminal, TerminalError> {
        Terminal::spawn_watched(options, None)
    }

    /// [`Terminal::spawn`], calling `on_exit` once its program ends by itself (see [`OnExit`]).
    pub fn spawn_watched(
        options: &TerminalOptions,
        on_exit: Option<OnExit>,
    ) -> Result<Terminal, TerminalError> {
        Terminal::spawn_with_shell(options, on_exit, None)
    }

    /// [`Terminal::spawn_watched`] of a shell with integration: `injection`'s arguments
    /// and environment replace `options.command` and add to `options.env`.
    pub fn spawn_with_shell(
        options: &TerminalOptions,
        on_exit: Option<OnExit>,
        injection: Option<Injection>,
    ) -> Result<Terminal, TerminalError> {
        let mut options = options.clone();
        if let Some(injection) = &injection {
            options.command = Some(injection.argv.clone());
            options.env.extend(injection.env.iter().cloned());
        }
        let options = &options;
        let mut argv = match &options.command {
            Some(argv) => argv.clone(),
            None => vec![default_shell()],
        };
        if let Some(confine) = &options.confine {
            argv.splice(0..0, confine.iter().cloned());
        }
        let Some(program_name) = argv.first() else {
            return Err(TerminalError::InvalidCommand("it is empty".to_string()));
        };
        let env = child_environment(&options.env, &options.cwd)?;
        let program = resolve_program(program_name, &env)?;
        let c_program = c_string(program.as_os_str().as_bytes(), "the program path")?;
        let c_argv = argv
            .iter()
            .map(|arg| c_string(arg.as_bytes(), "an argument"))
            .collect::<Result<Vec<_>, _>>()?;
        let c_env: Vec<CString> = env
            .iter()
            .map(|(name, value)| {
                let mut entry = name.clone().into_vec();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                CString::new(entry)
                    .map_err(|_| TerminalError::InvalidEnv(name.to_string_lossy().into()))
            })
            .collect::<Result<_, _>>()?;
        let c_cwd = c_string(options.cwd.as_os_str().as_bytes(), "the directory")?;

        let pair = pty::open_pty(options.size)
            .map_err(|e| TerminalError::Spawn("cannot open a pseudo-terminal".to_string(), e))?;
        let (wake_read, wake) = pipe()
            .map(|(read, write)| (File::from(read), File::from(write)))
            .map_err(|e| TerminalError::Spawn("cannot create a pipe".into(), e))?;
        let pid =
            pty::spawn(&pair.slave, &c_program, &c_argv, &c_env, &c_cwd).map_err(|failure| {
                match failure {
                    SpawnFailure::Fork(e) => TerminalError::Spawn("fork failed".to_string(), e),
                    SpawnFailure::Terminal(e) => {
                        TerminalError::Spawn("cannot attach the pseudo-terminal".to_string(), e)
                    }
                    SpawnFailure::Cwd(e) => TerminalError::BadDirectory(options.cwd.clone(), e),
                    SpawnFailure::Exec(e) => {
                        TerminalError::Spawn(format!("cannot run {}", program.display()), e)
                    }
                }
            })?;
        // Only the child holds the slave now, so the master sees EOF when it is done.
        drop(pair.slave);
        let program_pid = match (&options.confine, options.confined_in_place) {
            (None, _) => pid,
            (Some(_), true) => {
                procfs::wait_until_exec(pid, CONFINED_START_TIMEOUT);
                pid
            }
            (Some(_), false) => confined_program(pid, &pair.master)?,
        };

        let shared = Arc::new(Shared {
            pid,
            program_pid,
            output: Mutex::new(Output {
                scrollback: Scrollback::new(SCROLLBACK_BYTES),
                screen: Screen::new(options.size.cols, options.size.rows),
                written: 0,
                last_output_at: 0,
                shell: injection
                    .as_ref()
                    .map(|injection| ShellSession::new(injection.kind, &injection.nonce)),
            }),
            printed: AtomicBool::new(false),
            child: Mutex::new(ChildState::Running),
            closed: AtomicBool::new(false),
            output_done: AtomicBool::new(false),
            watchers: AtomicUsize::new(0),
            waker: OnceLock::new(),
            output_woken_at: AtomicU64::new(0),
        });
        let terminal = Terminal {
            shared: Arc::clone(&shared),
            master: Arc::new(File::from(pair.master)),
            wake,
            reader: Mutex::new(None),
            writing: Mutex::new(()),
            started: Instant::now(),
            // `spawn` returned once the child exec'd (and a confined one was found once
            // it had): this is the program's own.
            program: procfs::executable(program_pid),
            _injection: injection,
            typed_at_reads: Mutex::new(None),
            listed: Mutex::new(None),
        };
        let master = Arc::clone(&terminal.master);
        // If the thread cannot start, dropping `terminal` ends the child.
        let reader = std::thread::Builder::new()
            .name(format!("pty-reader-{pid}"))
            .spawn(move || {
                read_until_eof(&shared, &master, &wake_read);
                if let Some(on_exit) = on_exit {
                    if !shared.closed.load(Ordering::Acquire)
                        && shared.try_reap() != ChildState::Running
                    {
                        on_exit();
                    }
                }
            })
            .map_err(|e| TerminalError::Spawn("cannot start the reader thread".to_string(), e))?;
        *lock(&terminal.reader) = Some(reader);
        Ok(terminal)
    }

    /// The child's process id (also its session and process group id).
    pub fn pid(&self) -> u32 {
        self.shared.pid as u32
    }

    /// True once the program printed something or [`READY_AFTER`] passed since spawn.
    pub fn ready(&self) -> bool {
        self.shared.printed.load(Ordering::Acquire) || self.started.elapsed() >= READY_AFTER
    }

    /// True while the child runs (not closed and not exited).
    pub fn live(&self) -> bool {
        !self.shared.closed.load(Ordering::Acquire) && self.shared.try_reap() == ChildState::Running
    }

    /// True once the reader has recorded all the output (every holder of the terminal is
    /// gone). A program that has exited may still have output on its way to the reader;
    /// a background job that keeps the terminal open keeps this false.
    pub fn output_done(&self) -> bool {
        self.shared.output_done.load(Ordering::Acquire)
    }

    /// The child's exit status, once it has exited and been reaped.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        let status = match self.shared.try_reap() {
            ChildState::Reaped(status) => status,
            ChildState::Running => None,
        }?;
        // A confined program's end, as `bwrap` passes it on.
        let confined = self.shared.program_pid != self.shared.pid;
        Some(match confined {
            true => ExitStatus::from_raw(bwrap::program_wait_status(status.into_raw())),
            false => status,
        })
    }

    /// Writes `bytes` as typed input. Fails if the terminal is closed or its program has
    /// exited, or when the program does not take input within [`WRITE_TIMEOUT`].
    pub fn write(&self, bytes: &[u8]) -> Result<(), TerminalError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(TerminalError::Closed);
        }
        if self.shared.try_reap() != ChildState::Running {
            return Err(TerminalError::Exited);
        }
        let _one_writer = lock(&self.writing);
        write_all_before(&self.master, bytes, Instant::now() + WRITE_TIMEOUT)
    }

    /// Types `command` and presses Enter (a carriage return, as a keyboard sends).
    pub fn submit(&self, command: &str) -> Result<(), TerminalError> {
        let mut line = Vec::with_capacity(command.len() + 1);
        line.extend_from_slice(command.as_bytes());
        line.push(b'\r');
        self.write(&line)
    }

    /// Sends Ctrl+C (0x03); the line discipline turns it into SIGINT for the foreground
    /// job (a program in raw mode receives the byte, as from a keyboard).
    pub fn interrupt(&self) -> Result<(), TerminalError> {
        self.write(&[0x03])
    }

    /// The last `max_chars` characters of history and screen, as plain text.
    pub fn read(&self, max_chars: usize) -> String {
        lock(&self.shared.output).screen.tail(max_chars)
    }

    /// The visible screen's rows and the cursor (see [`Screen::rows_and_cursor`]).
    pub fn rows_and_cursor(&self) -> (String, Option<(usize, usize)>) {
        lock(&self.shared.output).screen.rows_and_cursor()
    }

    /// Whether the program asked for bracketed paste.
    pub fn bracketed_paste(&self) -> bool {
        lock(&self.shared.output).screen.bracketed_paste()
    }

    /// Whether the program asked for application cursor keys.
    pub fn application_cursor(&self) -> bool {
        lock(&self.shared.output).screen.application_cursor()
    }

    /// The visible screen only, as plain text.
    pub fn screen_text(&self) -> String {
        lock(&self.shared.output).screen.text()
    }

    /// The raw output bytes kept (at most [`SCROLLBACK_BYTES`]). They include the
    /// program's escape sequences: replay them into a terminal emulator, never hand them
    /// to an agent (use [`Terminal::read`]).
    pub fn scrollback(&self) -> Vec<u8> {
        lock(&self.shared.output).scrollback.to_vec()
    }

    /// A call starts (`waiting`) or stops waiting on this terminal: while any waits, a
    /// command's start or end and the program's end wake `waker` at once, and output at
    /// most every [`OUTPUT_WAKE_GAP_MS`].
    pub fn watch(&self, waker: &Waker, waiting: bool) {
        self.shared.waker.get_or_init(|| waker.clone());
        match waiting {
            true => self.shared.watchers.fetch_add(1, Ordering::AcqRel),
            false => self
                .shared
                .watchers
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .unwrap_or(0),
        };
    }

    /// The shell's integration now: `None` for a terminal started without it, until its
    /// first verified mark, once the nonce leaked, and once the shell `exec`ed another
    /// program.
    pub fn integration(&self) -> ShellIntegration {
        let integration = lock(&self.shared.output)
            .shell
            .as_ref()
            .map_or(ShellIntegration::None, ShellSession::integration);
        match integration != ShellIntegration::None && self.program_replaced() {
            true => ShellIntegration::None,
            false => integration,
        }
    }

    /// Whether the nonce showed in the terminal's plain output (its integration ended).
    pub fn integrity_lost(&self) -> bool {
        lock(&self.shared.output)
            .shell
            .as_ref()
            .is_some_and(ShellSession::integrity_lost)
    }

    fn program_replaced(&self) -> bool {
        let Some(started) = &self.program else {
            return false;
        };
        self.live()
            && procfs::executable(self.shared.program_pid).is_some_and(|now| &now != started)
    }

    /// The host typed `line` and is pressing Enter: for a POSIX `sh` at its prompt, which
    /// reports no starts itself, a command starts now. True if one did.
    pub fn start_typed_command(&self, line: &str) -> bool {
        let mut output = lock(&self.shared.output);
        self.shared.confirm_end(&mut output, &self.master);
        let started = output
            .shell
            .as_mut()
            .is_some_and(|shell| shell.start_typed(line, unix_millis()));
        *lock(&self.typed_at_reads) = started
            .then(|| procfs::read_calls(self.shared.program_pid))
            .flatten();
        started
    }

    /// A command the shell reported (the one with `id`, or the last), its state as the
    /// kernel and the screen show it while it runs.
    pub fn command(&self, id: Option<u64>) -> Option<CommandRecord> {
        let mut record = {
            let mut output = lock(&self.shared.output);
            self.shared.confirm_end(&mut output, &self.master);
            output.shell.as_ref()?.record(id)?
        };
        record.state = self.refined(record.state);
        Some(record)
    }

    /// What listings show of its shell (see [`ShellStatus`]); `None` for a terminal
    /// started without integration (an agent's). Reused for [`SHELL_STATUS_TTL`] while no
    /// mark arrives, so that listing many terminals often asks the kernel little.
    pub fn shell_status(&self) -> Option<ShellStatus> {
        let marks = {
            let output = lock(&self.shared.output);
            output.shell.as_ref()?.marks_applied()
        };
        let mut listed = lock(&self.listed);
        if let Some((taken, seen, status)) = listed.as_ref() {
            if *seen == marks && taken.elapsed() < SHELL_STATUS_TTL {
                return status.clone();
            }
        }
        let status = match self.integration() {
            ShellIntegration::None => ShellStatus::NONE,
            _ => {
                let mut status = {
                    let mut output = lock(&self.shared.output);
                    self.shared.confirm_end(&mut output, &self.master);
                    output.shell.as_ref()?.status()
                };
                if let Some(record) = status.last.as_mut() {
                    record.state = self.refined(record.state);
                }
                status
            }
        };
        *listed = Some((Instant::now(), marks, Some(status.clone())));
        Some(status)
    }

    /// A record's `Running` state refined from the foreground (see [`Terminal::command`]).
    fn refined(&self, state: CommandState) -> CommandState {
        match state {
            CommandState::Running => match self.foreground() {
                Foreground::Ended => CommandState::Ended,
                Foreground::Fullscreen => CommandState::Fullscreen,
                Foreground::AwaitingInput => CommandState::AwaitingInput,
                Foreground::Running | Foreground::Shell => CommandState::Running,
            },
            state => state,
        }
    }

    /// What the terminal's foreground does now: from the reaped child, the screen, the
    /// PTY's foreground process group and what its processes are blocked in
    /// (`/proc/<pid>/syscall`). Asked only when someone asks: nothing polls.
    pub fn foreground(&self) -> Foreground {
        if !self.live() {
            return Foreground::Ended;
        }
        let (fullscreen, command_running) = {
            let mut output = lock(&self.shared.output);
            self.shared.confirm_end(&mut output, &self.master);
            let running = output
                .shell
                .as_ref()
                .is_some_and(ShellSession::command_running);
            (output.screen.alternate(), running)
        };
        if fullscreen {
            return Foreground::Fullscreen;
        }
        let typed_at_reads = *lock(&self.typed_at_reads);
        kernel::foreground(
            self.shared.program_pid,
            self.master.as_fd(),
            command_running,
            self.program_replaced(),
            typed_at_reads,
        )
    }

    /// Whether its program (or what it runs in the foreground) is blocked reading the
    /// terminal (`kernel::reading`).
    pub fn reading(&self) -> bool {
        self.live() && kernel::reading(self.shared.program_pid, self.master.as_fd())
    }

    /// Where the output stands: bytes the program wrote (our marks not counted) and
    /// when it last wrote.
    pub fn output_mark(&self) -> OutputMark {
        let output = lock(&self.shared.output);
        OutputMark {
            position: output.written,
            last_output_at: output.last_output_at,
        }
    }

    /// The output written since `position` as plain text (its head and tail, each at most
    /// [`HEAD_BYTES`]), and the mark now. Bytes older than the kept scrollback count as
    /// omitted characters, one per byte.
    pub fn output_since(&self, position: u64) -> (CommandOutput, OutputMark) {
        let output = lock(&self.shared.output);
        let kept_from = output.written - output.scrollback.len() as u64;
        let from = position.clamp(kept_from, output.written);
        let mut bytes = output
            .scrollback
            .after((from - kept_from) as usize, usize::MAX);
        let mark = OutputMark {
            position: output.written,
            last_output_at: output.last_output_at,
        };
        drop(output);
        // A position inside a character starts at the next one.
        let inside = bytes.iter().take_while(|&&b| b & 0xC0 == 0x80).count();
        bytes.drain(..inside);
        let mut text = plain_text(&bytes, HEAD_BYTES, TAIL_BYTES);
        text.omitted += kept_from.saturating_sub(position);
        (text, mark)
    }

    /// Whether a full-screen program shows (the alternate screen).
    pub fn fullscreen(&self) -> bool {
        lock(&self.shared.output).screen.alternate()
    }

    /// The output history from position `from` on, or from its first byte kept when that
    /// is later (`lines_before` and `starts_line` describe that first kept byte: a search
    /// reads from 0), at most `limit` bytes of it; see [`History`].
    pub fn history_from(&self, from: u64, limit: usize) -> History {
        let output = lock(&self.shared.output);
        let kept = &output.scrollback;
        let kept_from = output.written - kept.len() as u64;
        let start = from.clamp(kept_from, output.written);
        History {
            start,
            lines_before: kept.dropped_lines,
            starts_line: kept.starts_line,
            bytes: kept.after((start - kept_from) as usize, limit),
            cut: ((start - kept_from) as usize).saturating_add(limit) < kept.len(),
        }
    }

    /// Changes the window size (the program gets SIGWINCH). The screen model is resized
    /// first, under the output lock held until the kernel has the new size, so what the
    /// program draws for it is read at that size.
    pub fn resize(&self, size: WindowSize) -> Result<(), TerminalError> {
        let mut output = lock(&self.shared.output);
        output.screen.resize(size.cols, size.rows);
        pty::set_window_size(self.master.as_fd(), size).map_err(TerminalError::Io)
    }

    /// Ends every process of the terminal's session (SIGHUP, then SIGKILL after
    /// [`CLOSE_GRACE`]), reaps the child and stops the reader. Idempotent.
    pub fn close(&self) {
        if self.hang_up() {
            self.finish_close(Instant::now() + CLOSE_GRACE);
        }
    }

    /// Marks the terminal closed and sends SIGHUP (and SIGCONT, so stopped jobs see it)
    /// to its session. False if it was already closed.
    fn hang_up(&self) -> bool {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.shared.signal_session(libc::SIGHUP);
        self.shared.signal_session(libc::SIGCONT);
        true
    }

    /// Waits until `deadline` for the session to end, then kills what is left, reaps the
    /// child and joins the reader thread.
    fn finish_close(&self, deadline: Instant) {
        if !poll_until(deadline, || self.shared.finished()) {
            let kill_deadline = Instant::now() + KILL_WAIT;
            poll_until(kill_deadline, || {
                self.shared.signal_session(libc::SIGKILL);
                self.shared.finished()
            });
        }
        let _ = (&self.wake).write_all(&[1]);
        if let Some(reader) = lock(&self.reader).take() {
            let _ = reader.join();
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.close();
    }
}

/// The reader thread: copies output until EOF/EIO or a wake-up, then reaps the child.
fn read_until_eof(shared: &Shared, master: &File, wake: &File) {
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        match poll(&mut fds, -1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        if fds[1].revents != 0 {
            return; // closing: the closer reaps
        }
        if fds[0].revents == 0 {
            continue;
        }
        let mut output = lock(&shared.output);
        // Before the read: what an end mark in it keeps (see `shell::records`).
        let reads_before = output
            .shell
            .is_some()
            .then(|| procfs::read_calls(shared.program_pid))
            .flatten();
        let wake = match (&*master).read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => shared.record(&mut output, (&buffer[..n], reads_before), master),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                false
            }
            Err(_) => break, // EIO: every holder of the slave side is gone
        };
        drop(output);
        if wake {
            shared.wake();
        }
    }
    shared.output_done.store(true, Ordering::Release);
    shared.wake();
    // Ordinarily the child has just exited; reap it so it does not linger as a zombie.
    poll_until(Instant::now() + REAP_AFTER_EOF, || {
        shared.try_reap() != ChildState::Running
    });
}

/// Calls `done` every [`POLL_STEP`] until it returns true (then true) or `deadline`
/// passes (then false).
fn poll_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(POLL_STEP.min(deadline - now));
    }
}

/// The program a confining `bwrap` (the child `pid`) runs, once it runs; else `bwrap` is
/// ended and what it printed on the terminal (`master`) is the error.
fn confined_program(pid: libc::pid_t, master: &OwnedFd) -> Result<libc::pid_t, TerminalError> {
    // The host's own executable may be the first step inside (`pane --take-terminal`).
    let steps: Vec<PathBuf> = std::env::current_exe().into_iter().collect();
    if let Some(program) = bwrap::confined_program(pid, &steps, CONFINED_START_TIMEOUT) {
        return Ok(program);
    }
    // Ended already (a program that exits at once, or bwrap's own error): the terminal
    // shows what it printed and how it ended, as any program's.
    if procfs::proc_stat(pid).is_some_and(|stat| !stat.running()) {
        return Ok(pid);
    }
    let _ = send_signal(pid, libc::SIGKILL);
    let _ = wait_child(pid, true);
    let mut said = vec![0; 2048];
    let mut ready = [libc::pollfd {
        fd: master.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    let n = match poll(&mut ready, 100) {
        Ok(1) => master
            .try_clone()
            .map(File::from)
            .and_then(|mut file| file.read(&mut said))
            .unwrap_or(0),
        _ => 0,
    };
    let said = String::from_utf8_lossy(&said[..n]).trim().to_string();
    Err(TerminalError::Spawn(
        format!("bubblewrap did not start the program: {said}"),
        io::Error::other("no confined program"),
    ))
}

/// Writes all of `bytes` to the non-blocking master, waiting for room until `deadline`.
fn write_all_before(
    master: &File,
    mut bytes: &[u8],
    deadline: Instant,
) -> Result<(), TerminalError> {
    while !bytes.is_empty() {
        match (&*master).write(bytes) {
            Ok(0) => return Err(TerminalError::Exited),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(TerminalError::InputStalled);
                }
                let mut fds = [libc::pollfd {
                    fd: master.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                let timeout = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
                match poll(&mut fds, timeout) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(TerminalError::Io(e)),
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EIO) => return Err(TerminalError::Exited),
            Err(e) => return Err(TerminalError::Io(e)),
        }
    }
    Ok(())
}

fn default_shell() -> String {
    match std::env::var("SHELL") {
        Ok(shell) if !shell.trim().is_empty() => shell,
        _ => FALLBACK_SHELL.to_string(),
    }
}

fn c_string(bytes: &[u8], what: &str) -> Result<CString, TerminalError> {
    CString::new(bytes)
        .map_err(|_| TerminalError::InvalidCommand(format!("{what} contains a NUL byte")))
}

/// The host's environment with `extra` added (replacing variables of the same name),
/// `PWD` naming `cwd` (so shells keep the path as given), and `TERM` set to
/// `xterm-256color` if neither gives one.
fn child_environment(
    extra: &[(String, String)],
    cwd: &Path,
) -> Result<Vec<(OsString, OsString)>, TerminalError> {
    for (name, value) in extra {
        if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
            return Err(TerminalError::InvalidEnv(name.clone()));
        }
    }
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            !extra
                .iter()
                .any(|(extra_name, _)| OsStr::new(extra_name) == name)
        })
        .collect();
    if cwd.is_absolute() && !extra.iter().any(|(name, _)| name == "PWD") {
        env.retain(|(name, _)| name != "PWD");
        env.push(("PWD".into(), cwd.as_os_str().to_owned()));
    }
    env.extend(
        extra
            .iter()
            .map(|(name, value)| (OsString::from(name), OsString::from(value))),
    );
    if !env.iter().any(|(name, _)| name == "TERM") {
        env.push(("TERM".into(), "xterm-256color".into()));
    }
    Ok(env)
}

/// `program` itself if it names a path, else the first executable `PATH` entry (from the
/// child's environment) that has it. Resolved before fork: `execvp` is not
/// async-signal-safe.
fn resolve_program(program: &str, env: &[(OsString, OsString)]) -> Result<PathBuf, TerminalError> {
    if program.is_empty() {
        return Err(TerminalError::InvalidCommand(
            "the program name is empty".to_string(),
        ));
    }
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| TerminalError::CommandNotFound(program.to_string()))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The open PTY terminals, keyed by node id. Thread-safe: share it as `Arc<PtyTerminals>`.
#[derive(Debug, Default)]
pub struct PtyTerminals {
    terminals: Mutex<HashMap<String, Arc<Terminal>>>,
}

impl PtyTerminals {
    /// An empty registry.
    pub fn new() -> PtyTerminals {
        PtyTerminals::default()
    }

    /// Starts a terminal for node `id`. A terminal already under `id` whose program
    /// still runs is an error; one whose program has exited is closed and replaced.
    pub fn open(
        &self,
        id: &str,
        options: &TerminalOptions,
    ) -> Result<Arc<Terminal>, TerminalError> {
        self.open_watched(id, options, None)
    }

    /// [`PtyTerminals::open`] with [`Terminal::spawn_watched`]'s `on_exit`.
    pub fn open_watched(
        &self,
        id: &str,
        options: &TerminalOptions,
        on_exit: Option<OnExit>,
    ) -> Result<Arc<Terminal>, TerminalError> {
        self.open_with_shell(id, options, on_exit, None)
    }

    /// [`PtyTerminals::open_watched`] of a shell with integration (see
    /// [`Terminal::spawn_with_shell`]).
    pub fn open_with_shell(
        &self,
        id: &str,
        options: &TerminalOptions,
        on_exit: Option<OnExit>,
        injection: Option<Injection>,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let exited = {
            let mut terminals = lock(&self.terminals);
            match terminals.get(id) {
                Some(existing) if existing.live() => {
                    return Err(TerminalError::AlreadyOpen(id.to_string()))
                }
                Some(_) => terminals.remove(id),
                None => None,
            }
        };
        // Its leftover processes are ended without holding the registry.
        if let Some(exited) = exited {
            exited.close();
        }
        let mut terminals = lock(&self.terminals);
        if terminals.contains_key(id) {
            return Err(TerminalError::AlreadyOpen(id.to_string())); // opened meanwhile
        }
        let terminal = Arc::new(Terminal::spawn_with_shell(options, on_exit, injection)?);
        terminals.insert(id.to_string(), Arc::clone(&terminal));
        Ok(terminal)
    }

    /// The terminal of node `id`, if open.
    pub fn get(&self, id: &str) -> Option<Arc<Terminal>> {
        lock(&self.terminals).get(id).cloned()
    }

    /// The node ids with an open terminal, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.terminals).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Closes and removes node `id`'s terminal (see [`Terminal::close`]). False if none
    /// was open. The registry is not locked while the processes are ended.
    pub fn close(&self, id: &str) -> bool {
        let removed = lock(&self.terminals).remove(id);
        match removed {
            Some(terminal) => {
                terminal.close();
                true
            }
            None => false,
        }
    }

    /// Closes every terminal, sharing one grace period among them.
    pub fn close_all(&self) {
        let all: Vec<Arc<Terminal>> = lock(&self.terminals).drain().map(|(_, t)| t).collect();
        let hung_up: Vec<&Arc<Terminal>> = all.iter().filter(|t| t.hang_up()).collect();
        let deadline = Instant::now() + CLOSE_GRACE;
        for terminal in hung_up {
            terminal.finish_close(deadline);
        }
    }
}

impl Drop for PtyTerminals {
    fn drop(&mut self) {
        self.close_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrollback_drops_oldest_at_a_character_boundary() {
        let mut scrollback = Scrollback::new(10);
        scrollback.push("abc".as_bytes());
        assert_eq!(scrollback.to_vec(), b"abc");
        scrollback.push("éééé".as_bytes()); // 8 bytes: 11 in all, one must go
        assert_eq!(scrollback.to_vec(), "bcéééé".as_bytes());
        scrollback.push("x".as_bytes()); // dropping 'b' and 'c' would do, but 1 byte of 'é' may not stay
        assert!(std::str::from_utf8(&scrollback.to_vec()).is_ok());
        assert!(scrollback.len() <= 10);
        scrollback.push("ü".repeat(20).as_bytes()); // larger than the capacity by itself
        let kept = scrollback.to_vec();
        assert!(kept.len() <= 10);
        assert_eq!(std::str::from_utf8(&kept).unwrap(), "ü".repeat(5));
    }

    #[test]
    fn scrollback_of_arbitrary_bytes_stays_within_capacity() {
        let mut scrollback = Scrollback::new(1000);
        for round in 0..100u8 {
            scrollback.push(&[0x80 | (round & 0x3f); 77]);
        }
        assert!(scrollback.len() <= 1000);
    }

    #[test]
    fn environment_adds_and_overrides() {
        let extra = [
            ("PATH".into(), "/only/here".into()),
            ("TS_X".into(), "1".into()),
        ];
        let env = child_environment(&extra, Path::new("/some/dir")).unwrap();
        let paths: Vec<_> = env.iter().filter(|(n, _)| n == "PATH").collect();
        assert_eq!(paths.len(), 1);
        assert_eq!(paths[0].1, "/only/here");
        assert!(env.iter().any(|(n, v)| n == "TS_X" && v == "1"));
        assert!(env.iter().any(|(n, _)| n == "TERM"));
        assert_eq!(
            env.iter()
                .filter(|(n, v)| n == "PWD" && v == "/some/dir")
                .count(),
            1
        );
        let cwd = Path::new("/");
        assert!(child_environment(&[("A=B".into(), "x".into())], cwd).is_err());
        assert!(child_environment(&[("".into(), "x".into())], cwd).is_err());
        assert!(child_environment(&[("A".into(), "x\0y".into())], cwd).is_err());
    }

    #[test]
    fn programs_are_resolved_on_the_child_path() {
        let env = vec![(
            OsString::from("PATH"),
            OsString::from("/nonexistent:/bin:/usr/bin"),
        )];
        assert!(resolve_program("sh", &env).unwrap().ends_with("sh"));
        assert_eq!(resolve_program("./x", &env).unwrap(), PathBuf::from("./x"));
        assert!(matches!(
            resolve_program("no-such-program-termsprawl", &env),
            Err(TerminalError::CommandNotFound(_))
        ));
        assert!(resolve_program("", &env).is_err());
    }
}
