//! Shell integration in tmux terminals. The pane filter ([`crate::host::terminals::pane_filter`]) sees every
//! byte of its shell's output, so it runs the shell's [`ShellSession`] itself: it
//! prepares the injection (the nonce is made there and never leaves it), takes our
//! marks out before tmux sees the output, checks `tcgetpgrp` on its own PTY master, and
//! answers `serve` over a Unix socket of its own, `<data>/agent-tools/tmux/panes/<node>.sock`
//! (folder 0700, socket 0600, a peer of another user refused by `SO_PEERCRED`).
//!
//! Why a socket rather than a state file rewritten at each mark: what makes an end final
//! and what says a shell builtin waits for typing (nothing unread on the master,
//! `FIONREAD`; the shell's reads since the host typed) can only be asked by the holder
//! of the master, and only at the moment someone asks; a file would also need rewriting
//! on output to show a running command's output. The filter outlives `serve`, so a
//! restarted `serve` finds the records at the same path. An idle pane costs nothing:
//! the socket's thread sleeps in `accept`.
//!
//! One request a connection: a line of JSON, `{"op": …}`, answered by a line of JSON:
//!
//! | op | arguments | answer |
//! | --- | --- | --- |
//! | `integration` | — | `{"integration": "bash"\|"zsh"\|"sh"\|"none", "integrityLost": bool}` |
//! | `command` | `id` (optional) | `{"command": RECORD or null}` (its state refined from the kernel) |
//! | `status` | — | `{"integration": …, "command": RECORD without its output, or null}` (what listings show) |
//! | `foreground` | — | `{"foreground": "shell"\|"running"\|"awaiting_input"}` (the screen's full-screen is tmux's to say) |
//! | `start_typed` | `line` | `{"started": bool}` (POSIX `sh`: the host typed `line` and Enter) |
//! | `watch` | — | `{"watching": true}`, then the connection stays open and gets a byte whenever a mark arrives or output comes (at most every [`OUTPUT_WAKE_GAP_MS`]); it closes when the filter ends |
//!
//! `serve` watches a pane only while a call waits on it ([`PaneWatcher`]: one thread
//! polling every watched pane), so a waited command is answered right after its end.
//!
//! Output positions stay tmux's (lines read with `capture-pane`, [`crate::host::terminals::tmux::panes`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::base::files::private_dir;
use crate::base::{lock_or_recover as lock, unix_millis};
use crate::host::terminals::procfs;
use crate::host::terminals::shell::{kernel, ShellSession, ShellStatus};
use crate::runtime::{CommandOutput, CommandRecord, CommandState, Foreground, ShellIntegration};
use crate::server::Waker;
use crate::sys::process::effective_uid;
use crate::sys::socket::peer_uid;

/// The longest path a Unix socket address holds (`sun_path` less its NUL).
pub const MAX_SOCKET_PATH: usize = 107;
/// How long either side waits for the other's line.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a listing waits for one pane's [`status`].
const STATUS_TIMEOUT: Duration = Duration::from_millis(250);
/// A request longer than this is refused.
const REQUEST_CAP: u64 = 64 * 1024;
/// An answer longer than this is not read (a record's output is at most 128 KiB of text).
const ANSWER_CAP: u64 = 1024 * 1024;
/// While `serve` watches a pane, output tells it at most this often (marks at once).
pub const OUTPUT_WAKE_GAP_MS: u64 = 100;
/// At most this many watching connections per pane (one `serve` needs one).
const WATCHERS_CAP: usize = 8;

/// The folder of the panes' sockets and shell files, under the tmux folder
/// (`<data>/agent-tools/tmux`).
pub fn panes_dir(tmux_dir: &Path) -> PathBuf {
    tmux_dir.join("panes")
}

/// Node `node`'s socket in `panes`; `None` when the path is too long for a socket.
pub fn socket_path(panes: &Path, node: &str) -> Option<PathBuf> {
    let path = panes.join(format!("{node}.sock"));
    (path.as_os_str().len() <= MAX_SOCKET_PATH).then_some(path)
}

/// Removes the sockets in `panes` that no filter listens on any more (a filter that was
/// killed could not remove its own), so none is mistaken for a pane's.
pub fn remove_stale_sockets(panes: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(panes) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let socket = entry.file_type().is_ok_and(|kind| kind.is_socket());
        let refused = || {
            UnixStream::connect(&path)
                .is_err_and(|error| error.kind() == io::ErrorKind::ConnectionRefused)
        };
        if socket && path.extension().is_some_and(|e| e == "sock") && refused() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The shell files' folder beside a pane's socket.
pub fn shell_files(socket: &Path) -> PathBuf {
    socket.with_file_name("shell")
}

/// A pane's shell as its filter sees it.
pub struct PaneShell {
    session: Mutex<ShellSession>,
    /// The shell's pid (the filter's child) and the master of its PTY (until the filter
    /// closes it to hang up on the shell: [`PaneShell::release`]).
    shell: libc::pid_t,
    master: Mutex<Option<Arc<File>>>,
    /// The program the shell was at its start (`/proc/<pid>/exe`): one that `exec`s
    /// another has no integration any more.
    program: Option<PathBuf>,
    /// The shell's completed reads when the host typed the open command's line (`sh`).
    typed_at_reads: Mutex<Option<u64>>,
    /// Connections told of each change (`watch`), and when output last told them.
    watchers: Mutex<Vec<UnixStream>>,
    output_told_at: std::sync::atomic::AtomicU64,
}

impl PaneShell {
    /// The integration state of `shell`, started with marks carrying `nonce`, on `master`.
    pub fn new(
        kind: ShellIntegration,
        nonce: &str,
        shell: libc::pid_t,
        master: Arc<File>,
    ) -> PaneShell {
        PaneShell {
            session: Mutex::new(ShellSession::new(kind, nonce)),
            shell,
            master: Mutex::new(Some(master)),
            program: procfs::executable(shell),
            typed_at_reads: Mutex::new(None),
            watchers: Mutex::new(Vec::new()),
            output_told_at: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Reads one chunk from the master (non-blocking) and takes our marks out of it:
    /// `Ok(Some(plain))`, `Ok(None)` at end of file, or the read's error. The records
    /// are locked across the read, so whoever asks next knows no chunk is half recorded.
    pub fn read_chunk(&self, buffer: &mut [u8]) -> io::Result<Option<Vec<u8>>> {
        let mut session = lock(&self.session);
        let Some(master) = self.master() else {
            return Ok(None);
        };
        // Before the read: what an end mark in it keeps (see `shell::records`).
        let reads_before = procfs::read_calls(self.shell);
        let n = (&*master).read(buffer)?;
        if n == 0 {
            return Ok(None);
        }
        let now = unix_millis();
        let marks_before = session.marks_applied();
        let mut probe = kernel::KernelProbe {
            shell: self.shell,
            master: master.as_fd(),
            reads_before_chunk: reads_before,
        };
        let plain = session.feed(&buffer[..n], now, &mut probe);
        self.confirm_end(&mut session);
        let marked = session.marks_applied() != marks_before;
        drop(session);
        self.tell_watchers(marked, !plain.is_empty(), now);
        Ok(Some(plain))
    }

    /// Sends each watching connection a byte for a mark, or for output at most every
    /// [`OUTPUT_WAKE_GAP_MS`]; drops those that are gone. A full connection already has
    /// a byte its reader has not taken: it is told already.
    fn tell_watchers(&self, marked: bool, output: bool, now: u64) {
        use std::sync::atomic::Ordering;
        let mut watchers = lock(&self.watchers);
        if watchers.is_empty() {
            return;
        }
        let told_at = self.output_told_at.load(Ordering::Relaxed);
        let output_due = output && now.saturating_sub(told_at) >= OUTPUT_WAKE_GAP_MS;
        if !marked && !output_due {
            return;
        }
        self.output_told_at.store(now, Ordering::Relaxed);
        watchers.retain(|watcher| match (&*watcher).write(&[1]) {
            Ok(_) => true,
            Err(error) => error.kind() == io::ErrorKind::WouldBlock,
        });
    }

    /// Keeps `stream` to tell it of changes (`watch`); the oldest goes past the cap.
    fn add_watcher(&self, stream: UnixStream) -> io::Result<()> {
        stream.set_nonblocking(true)?;
        let mut watchers = lock(&self.watchers);
        if watchers.len() == WATCHERS_CAP {
            watchers.remove(0);
        }
        watchers.push(stream);
        Ok(())
    }

    /// Lets go of the master, so that the filter's close of its own hangs up the shell.
    pub fn release(&self) {
        lock(&self.master).take();
    }

    fn master(&self) -> Option<Arc<File>> {
        lock(&self.master).clone()
    }

    fn confirm_end(&self, session: &mut ShellSession) {
        let Some(master) = self.master() else {
            return;
        };
        if session.end_unconfirmed() && kernel::shell_waiting(self.shell, master.as_fd()) {
            session.confirm_end();
        }
    }

    fn replaced(&self) -> bool {
        let Some(started) = &self.program else {
            return false;
        };
        procfs::executable(self.shell).is_some_and(|now| &now != started)
    }

    fn integration(&self) -> (ShellIntegration, bool) {
        let session = lock(&self.session);
        let integration = match self.replaced() {
            true => ShellIntegration::None,
            false => session.integration(),
        };
        (integration, session.integrity_lost())
    }

    fn foreground(&self) -> Foreground {
        let running = {
            let mut session = lock(&self.session);
            self.confirm_end(&mut session);
            session.command_running()
        };
        let typed_at_reads = *lock(&self.typed_at_reads);
        let Some(master) = self.master() else {
            return Foreground::Running; // the filter is ending
        };
        let replaced = self.replaced();
        kernel::foreground(
            self.shell,
            master.as_fd(),
            running,
            replaced,
            typed_at_reads,
        )
    }

    fn command(&self, id: Option<u64>) -> Option<CommandRecord> {
        let mut record = {
            let mut session = lock(&self.session);
            self.confirm_end(&mut session);
            session.record(id)?
        };
        if record.state == CommandState::Running && self.foreground() == Foreground::AwaitingInput {
            record.state = CommandState::AwaitingInput;
        }
        Some(record)
    }

    /// What listings show (see [`ShellStatus`]), refined from the kernel as
    /// [`PaneShell::command`] is (full screen is tmux's to say).
    fn status(&self) -> ShellStatus {
        if self.integration().0 == ShellIntegration::None {
            return ShellStatus::NONE;
        }
        let mut status = {
            let mut session = lock(&self.session);
            self.confirm_end(&mut session);
            session.status()
        };
        if let Some(record) = status.last.as_mut() {
            if record.state == CommandState::Running
                && self.foreground() == Foreground::AwaitingInput
            {
                record.state = CommandState::AwaitingInput;
            }
        }
        status
    }

    fn start_typed(&self, line: &str) -> bool {
        let started = {
            let mut session = lock(&self.session);
            self.confirm_end(&mut session);
            session.start_typed(line, unix_millis())
        };
        *lock(&self.typed_at_reads) = started.then(|| procfs::read_calls(self.shell)).flatten();
        started
    }

    /// The answer to one request line.
    fn answer(&self, request: &str) -> Value {
        let Ok(request) = serde_json::from_str::<Value>(request) else {
            return json!({"error": "expected one line of JSON"});
        };
        match request["op"].as_str() {
            Some("integration") => {
                let (integration, integrity_lost) = self.integration();
                json!({"integration": integration.name(), "integrityLost": integrity_lost})
            }
            Some("command") => {
                json!({"command": self.command(request["id"].as_u64()).map(|r| record_json(&r))})
            }
            Some("status") => {
                let status = self.status();
                json!({
                    "integration": status.integration.name(),
                    "command": status.last.as_ref().map(record_json),
                })
            }
            Some("foreground") => json!({"foreground": foreground_name(self.foreground())}),
            Some("start_typed") => match request["line"].as_str() {
                Some(line) => json!({"started": self.start_typed(line)}),
                None => json!({"error": "start_typed needs a line"}),
            },
            _ => json!({"error": "unknown op"}),
        }
    }
}

/// A pane's socket, removed when dropped (the filter ends).
pub struct PaneSocket {
    path: PathBuf,
}

impl Drop for PaneSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds `path` (its folder made 0700; a socket left there by a filter that was killed
/// replaced) and answers requests about `shell` on a thread of its own for the rest of
/// the process's life.
pub fn serve_pane(path: &Path, shell: Arc<PaneShell>) -> io::Result<PaneSocket> {
    if let Some(folder) = path.parent() {
        private_dir(folder)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) => {
            std::fs::remove_file(path)?;
        }
        Ok(_) => return Err(io::Error::other("something that is not a socket is there")),
        Err(_) => {}
    }
    let listener = UnixListener::bind(path)?;
    let socket = PaneSocket {
        path: path.to_path_buf(),
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new()
        .name("pane-shell".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = answer_one(&shell, stream);
            }
        })?;
    Ok(socket)
}

fn answer_one(shell: &PaneShell, stream: UnixStream) -> io::Result<()> {
    if peer_uid(stream.as_fd())? != effective_uid() {
        return Ok(()); // another user's process: closed unanswered
    }
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    stream.set_write_timeout(Some(EXCHANGE_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(REQUEST_CAP)).read_line(&mut line)?;
    let request = line.trim_end();
    if serde_json::from_str::<Value>(request).is_ok_and(|r| r["op"] == "watch") {
        // Kept before the answer, so nothing that happens after it goes untold.
        shell.add_watcher(stream.try_clone()?)?;
        return (&stream).write_all(b"{\"watching\":true}\n");
    }
    let mut answer = shell.answer(request).to_string();
    answer.push('\n');
    (&stream).write_all(answer.as_bytes())
}

/// `serve`'s side: asks the filter behind `socket` one request; `None` when no filter
/// answers there (none runs, or one without integration), or it is not our user's.
pub fn ask(socket: &Path, request: &Value) -> Option<Value> {
    ask_within(socket, request, EXCHANGE_TIMEOUT)
}

/// [`ask`], each side's wait bounded by `timeout`.
fn ask_within(socket: &Path, request: &Value, timeout: Duration) -> Option<Value> {
    let stream = UnixStream::connect(socket).ok()?;
    if peer_uid(stream.as_fd()).ok()? != effective_uid() {
        return None;
    }
    stream.set_read_timeout(Some(timeout)).ok()?;
    stream.set_write_timeout(Some(timeout)).ok()?;
    (&stream)
        .write_all(format!("{request}\n").as_bytes())
        .ok()?;
    let mut line = String::new();
    BufReader::new((&stream).take(ANSWER_CAP))
        .read_line(&mut line)
        .ok()?;
    let answer: Value = serde_json::from_str(&line).ok()?;
    answer.get("error").is_none().then_some(answer)
}

/// The shell's integration as the filter at `socket` reports it, and whether its nonce
/// leaked; `None` when no filter answers.
pub fn integration(socket: &Path) -> Option<(ShellIntegration, bool)> {
    let answer = ask(socket, &json!({"op": "integration"}))?;
    let integration = integration_named(answer["integration"].as_str()?);
    Some((integration, answer["integrityLost"] == true))
}

fn integration_named(name: &str) -> ShellIntegration {
    match name {
        "bash" => ShellIntegration::Bash,
        "zsh" => ShellIntegration::Zsh,
        "sh" => ShellIntegration::Sh,
        _ => ShellIntegration::None,
    }
}

/// What listings show of the pane's shell, from the filter at `socket`; `None` when no
/// filter answers within [`STATUS_TIMEOUT`] (a listing asks each pane in turn: a stopped
/// filter must not hold it up for long).
pub fn status(socket: &Path) -> Option<ShellStatus> {
    let answer = ask_within(socket, &json!({"op": "status"}), STATUS_TIMEOUT)?;
    Some(match integration_named(answer["integration"].as_str()?) {
        ShellIntegration::None => ShellStatus::NONE,
        integration => ShellStatus {
            integration,
            last: record_from_json(&answer["command"]),
        },
    })
}

/// A command record from the filter at `socket` (the one with `id`, or the last).
pub fn command(socket: &Path, id: Option<u64>) -> Option<CommandRecord> {
    let answer = ask(socket, &json!({"op": "command", "id": id}))?;
    record_from_json(&answer["command"])
}

/// What the foreground does, as the filter at `socket` sees it from the kernel.
pub fn foreground(socket: &Path) -> Option<Foreground> {
    let answer = ask(socket, &json!({"op": "foreground"}))?;
    match answer["foreground"].as_str()? {
        "shell" => Some(Foreground::Shell),
        "running" => Some(Foreground::Running),
        "awaiting_input" => Some(Foreground::AwaitingInput),
        _ => None,
    }
}

/// Tells the filter at `socket` that the host types `line` and Enter; true if a command
/// started (a POSIX `sh` at its prompt).
pub fn start_typed(socket: &Path, line: &str) -> bool {
    ask(socket, &json!({"op": "start_typed", "line": line}))
        .is_some_and(|answer| answer["started"] == true)
}

/// `serve`'s watches of panes with a waiting call: a `watch` connection to each pane's
/// filter, and one thread (started with the first watch, asleep in `poll` while nothing
/// changes) that wakes the server's waiter whenever one of them says something changed
/// or closes.
pub struct PaneWatcher {
    waker: Waker,
    panes: Mutex<HashMap<String, WatchedPane>>,
    /// Writing a byte here has the thread look at `panes` again; `None` until it runs.
    poke: Mutex<Option<File>>,
}

struct WatchedPane {
    connection: UnixStream,
    /// Calls waiting on the pane now.
    waiting: usize,
}

impl PaneWatcher {
    /// A watcher that wakes `waker`.
    pub fn new(waker: Waker) -> Arc<PaneWatcher> {
        Arc::new(PaneWatcher {
            waker,
            panes: Mutex::new(HashMap::new()),
            poke: Mutex::new(None),
        })
    }

    /// A call starts (`waiting`) or stops waiting on node `node`'s pane, whose filter
    /// answers at `socket`. Without a filter there, nothing is watched (the waiter's
    /// own checks remain).
    pub fn watch(self: &Arc<Self>, node: &str, socket: &Path, waiting: bool) {
        let mut panes = lock(&self.panes);
        if let Some(pane) = panes.get_mut(node) {
            pane.waiting = match waiting {
                true => pane.waiting + 1,
                false => pane.waiting.saturating_sub(1),
            };
            if pane.waiting == 0 {
                panes.remove(node);
                drop(panes);
                self.poke();
            }
            return;
        }
        if !waiting {
            return;
        }
        drop(panes); // not held while the filter answers
        let Some(connection) = open_watch(socket) else {
            return;
        };
        let mut panes = lock(&self.panes);
        match panes.get_mut(node) {
            // Another call watched it meanwhile: its connection serves both.
            Some(pane) => pane.waiting += 1,
            None => {
                let pane = WatchedPane {
                    connection,
                    waiting: 1,
                };
                panes.insert(node.to_string(), pane);
                drop(panes);
                self.start_or_poke();
            }
        }
    }

    fn poke(&self) {
        if let Some(poke) = lock(&self.poke).as_ref() {
            let _ = (&*poke).write(&[1]);
        }
    }

    fn start_or_poke(self: &Arc<Self>) {
        let mut poke = lock(&self.poke);
        if let Some(poke) = poke.as_ref() {
            let _ = (&*poke).write(&[1]);
            return;
        }
        let Ok((poked, poke_end)) = crate::sys::fd::pipe() else {
            return;
        };
        let watcher = Arc::downgrade(self);
        let poked = File::from(poked);
        let started = std::thread::Builder::new()
            .name("pane-watch".into())
            .spawn(move || watch_panes(&watcher, &poked));
        if started.is_ok() {
            *poke = Some(File::from(poke_end));
        }
    }
}

/// Connects to a pane's filter and asks it to tell of changes; `None` when no filter
/// with integration answers there.
fn open_watch(socket: &Path) -> Option<UnixStream> {
    let stream = UnixStream::connect(socket).ok()?;
    if peer_uid(stream.as_fd()).ok()? != effective_uid() {
        return None;
    }
    stream.set_read_timeout(Some(EXCHANGE_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(EXCHANGE_TIMEOUT)).ok()?;
    (&stream).write_all(b"{\"op\":\"watch\"}\n").ok()?;
    // Byte by byte up to the newline: the change bytes that follow stay unread.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while answer.len() < 64 {
        match (&stream).read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => answer.push(byte[0]),
            _ => return None,
        }
    }
    (answer == b"{\"watching\":true}").then_some(())?;
    stream.set_nonblocking(true).ok()?;
    Some(stream)
}

/// The `pane-watch` thread: waits in `poll` on every watched pane's connection and the
/// poke pipe; wakes the waiter when a pane says something changed or its filter ended.
/// Ends when the watcher is gone.
fn watch_panes(watcher: &std::sync::Weak<PaneWatcher>, poked: &File) {
    loop {
        let Some(this) = watcher.upgrade() else {
            return;
        };
        let watched: Vec<(String, UnixStream)> = lock(&this.panes)
            .iter()
            .filter_map(|(node, pane)| Some((node.clone(), pane.connection.try_clone().ok()?)))
            .collect();
        drop(this);
        let mut fds: Vec<libc::pollfd> = watched
            .iter()
            .map(|(_, connection)| connection.as_fd())
            .chain(std::iter::once(poked.as_fd()))
            .map(|fd| libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        match crate::sys::fd::poll(&mut fds, -1) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        let mut drained = [0u8; 256];
        if fds.last().is_some_and(|fd| fd.revents != 0) {
            let _ = (&*poked).read(&mut drained);
        }
        let mut changed = false;
        for ((node, connection), fd) in watched.iter().zip(&fds) {
            if fd.revents == 0 {
                continue;
            }
            changed = true;
            let open = loop {
                match (&*connection).read(&mut drained) {
                    Ok(0) => break false,
                    Ok(_) => {}
                    Err(error) => break error.kind() == io::ErrorKind::WouldBlock,
                }
            };
            if let (false, Some(this)) = (open, watcher.upgrade()) {
                // Its filter ended: the wait's next check says so.
                lock(&this.panes).remove(node);
            }
        }
        if let (true, Some(this)) = (changed, watcher.upgrade()) {
            this.waker.wake();
        }
    }
}

fn foreground_name(foreground: Foreground) -> &'static str {
    match foreground {
        Foreground::Shell => "shell",
        Foreground::AwaitingInput => "awaiting_input",
        // The kernel part never says full-screen or ended; running is the honest rest.
        Foreground::Running | Foreground::Fullscreen | Foreground::Ended => "running",
    }
}

fn record_json(record: &CommandRecord) -> Value {
    json!({
        "id": record.id,
        "command": record.command,
        "state": record.state.name(),
        "exitCode": record.exit_code,
        "startedAt": record.started_at,
        "endedAt": record.ended_at,
        "cwd": record.cwd,
        "head": record.output.head,
        "tail": record.output.tail,
        "omitted": record.output.omitted,
        "lastOutputAt": record.last_output_at,
    })
}

fn record_from_json(value: &Value) -> Option<CommandRecord> {
    let text = |key: &str| value[key].as_str().map(str::to_string);
    let state = match value["state"].as_str()? {
        "exited" => CommandState::Exited,
        "awaiting_input" => CommandState::AwaitingInput,
        "fullscreen" => CommandState::Fullscreen,
        "ended" => CommandState::Ended,
        "unknown" => CommandState::Unknown,
        _ => CommandState::Running,
    };
    Some(CommandRecord {
        id: value["id"].as_u64()?,
        command: text("command")?,
        state,
        exit_code: value["exitCode"]
            .as_i64()
            .and_then(|code| i32::try_from(code).ok()),
        started_at: value["startedAt"].as_u64()?,
        ended_at: value["endedAt"].as_u64(),
        cwd: text("cwd"),
        output: CommandOutput {
            head: text("head").unwrap_or_default(),
            tail: text("tail").unwrap_or_default(),
            omitted: value["omitted"].as_u64().unwrap_or(0),
        },
        last_output_at: value["lastOutputAt"].as_u64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_cross_the_socket_unchanged() {
        let record = CommandRecord {
            id: 7,
            command: "cargo test\n# two lines".into(),
            state: CommandState::Exited,
            exit_code: Some(101),
            started_at: 1_000,
            ended_at: Some(2_500),
            cwd: Some("/tmp/a \"b\"".into()),
            output: CommandOutput {
                head: "Compiling\n".into(),
                tail: "error: failed\n".into(),
                omitted: 12_345,
            },
            last_output_at: 2_400,
        };
        let wire = record_json(&record).to_string();
        let back = record_from_json(&serde_json::from_str(&wire).unwrap());
        assert_eq!(back, Some(record));
        assert_eq!(record_from_json(&json!(null)), None);
        assert_eq!(record_from_json(&json!({"id": "x"})), None);
    }

    #[test]
    fn socket_paths_fit_a_socket_address() {
        let panes = panes_dir(Path::new("/data/agent-tools/tmux"));
        assert_eq!(
            socket_path(&panes, "t1"),
            Some(PathBuf::from("/data/agent-tools/tmux/panes/t1.sock"))
        );
        assert_eq!(
            shell_files(Path::new("/d/panes/t1.sock")),
            PathBuf::from("/d/panes/shell")
        );
        assert_eq!(socket_path(&panes, &"n".repeat(100)), None);
    }

    #[test]
    fn a_socket_answers_our_user_and_is_removed_with_its_filter() {
        let dir = std::env::temp_dir().join(format!(
            "ts-pane-shell-{}",
            crate::base::random_hex(6).unwrap()
        ));
        let path = panes_dir(&dir).join("t1.sock");
        // A PTY whose master we hold, and this process as its "shell".
        let pair = crate::sys::pty::open_pty(Default::default()).unwrap();
        let master = Arc::new(File::from(pair.master));
        let nonce = "0123456789abcdef0123456789abcdef";
        let shell = Arc::new(PaneShell::new(
            ShellIntegration::Bash,
            nonce,
            std::process::id() as libc::pid_t,
            master,
        ));
        let socket = serve_pane(&path, Arc::clone(&shell)).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            integration(&path),
            Some((ShellIntegration::None, false)),
            "no mark yet"
        );
        assert_eq!(command(&path, None), None);
        assert_eq!(status(&path), Some(ShellStatus::NONE));
        assert!(!start_typed(&path, "ls"), "bash is not at an sh prompt");
        assert_eq!(ask(&path, &json!({"op": "nonsense"})), None);
        // A watching connection hears of a mark at once, of output at most so often.
        let watching = open_watch(&path).unwrap();
        watching.set_nonblocking(false).unwrap();
        shell.tell_watchers(true, false, 1_000);
        shell.tell_watchers(false, true, 1_000 + OUTPUT_WAKE_GAP_MS - 1);
        shell.tell_watchers(false, true, 1_000 + OUTPUT_WAKE_GAP_MS);
        let mut told = [0u8; 4];
        let mut count = 0;
        while count < 2 {
            count += (&watching).read(&mut told[count..]).unwrap();
        }
        watching.set_nonblocking(true).unwrap();
        assert!((&watching).read(&mut told).is_err(), "no third byte");
        drop(socket);
        assert!(!path.exists());
        // A socket nobody listens on is stale; a live one stays.
        drop(UnixListener::bind(&path).unwrap());
        let live = panes_dir(&dir).join("live.sock");
        let _listening = UnixListener::bind(&live).unwrap();
        remove_stale_sockets(&panes_dir(&dir));
        assert!(!path.exists() && live.exists());
        assert_eq!(integration(&path), None);
        // A listener that never answers (a stopped filter) is given up on.
        assert_eq!(status(&live), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
