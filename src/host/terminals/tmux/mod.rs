//! The tmux terminal backend: one private tmux server per data directory, one session per
//! terminal node, named after the node id.
//!
//! Terminals on tmux outlive the host process, which is what makes the spec's "warm"
//! sessions real: after a restart the host finds its sessions again ([`TmuxServer::sessions`],
//! [`TmuxServer::is_warm`]), keeps those whose node is still on the canvas and kills the rest
//! ([`TmuxServer::adopt`]). Reads come from `capture-pane` (the rendered screen, as a person
//! sees it), writes from `send-keys`, and `terminal_external` attaches a second view in a
//! desktop terminal window; closing that window only detaches.
//!
//! Every tmux call runs the binary directly (never a shell) as
//! `tmux -u -S <dir>/socket -f <dir>/tmux.conf …` under a deadline with bounded output.
//! The config file is ours, so no user config is loaded. The environment of each call is the
//! host's minus `TMUX`, `TMUX_PANE` (so this works from inside another tmux) and
//! `TERMSPRAWL_*` (the first call starts the server, whose environment every later session
//! inherits; per-node variables must only reach their own session, through `-e`).

pub(crate) mod panes;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::base::files::{holds_private_file, private_dir, regenerated_write};
use crate::host::isolation::Confinement;
use crate::protocol::is_valid_node_id;
use crate::runtime::agents::resolve_executable;
use crate::runtime::context::last_chars;
use crate::runtime::ProgramEnd;
use crate::sys::process::{send_signal, wait_exited_unreaped};

/// Lines of scrollback tmux keeps per pane (also the most `capture` reads).
pub const HISTORY_LIMIT: usize = 10_000;

/// The config every server of ours starts with (written to `<dir>/tmux.conf`).
pub const TMUX_CONFIG: &str = "\
# termsprawl-tools: private tmux server for canvas terminals (no user config is loaded).
set -g history-limit 10000
set -g status off
# A pane whose program ended stays (with its last screen, without tmux's own note)
# until its node is closed; each end wakes the host's watcher.
set -g remain-on-exit on
set -g remain-on-exit-format ''
set-hook -g pane-died 'wait-for -S termsprawl-pane-died'
set -g mouse off
set -g set-titles off
set -g destroy-unattached off
set -s exit-empty on
set -s exit-unattached off
set -s escape-time 10
";

/// The `wait-for` channel the `pane-died` hook of [`TMUX_CONFIG`] signals.
pub const PANE_DIED_CHANNEL: &str = "termsprawl-pane-died";

/// Terminal programs tried, in order, when preferences name none.
pub const DEFAULT_TERMINALS: [&str; 4] =
    ["x-terminal-emulator", "gnome-terminal", "konsole", "xterm"];

/// The placeholder in `externalTerminal.command` that stands for the attach command.
pub const ATTACH_PLACEHOLDER: &str = "{attach}";

/// How long one tmux command may take before it is killed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);
/// Most bytes of stdout kept from one tmux command (a full capture is far below this).
const MAX_STDOUT: usize = 8 * 1024 * 1024;
/// Most bytes of stderr kept from one tmux command.
const MAX_STDERR: usize = 64 * 1024;
/// tmux packs a command's argv into one 16 KiB message; literal text goes in chunks below that.
const SEND_CHUNK_BYTES: usize = 8 * 1024;
/// A Unix socket path must fit `sun_path` (108 bytes on Linux, 104 on macOS).
const MAX_SOCKET_PATH: usize = 100;
/// A session this instance opened counts as ready after this long even if it drew nothing
/// (the built-in PTY backend uses the same rule).
const READY_AFTER: Duration = Duration::from_millis(300);
/// How long `external` watches the terminal program for an immediate failure.
const EXTERNAL_WATCH: Duration = Duration::from_millis(500);

/// A tmux pane at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaneInfo {
    /// The pane's program: the pane filter, or the program itself without one.
    pub pid: u32,
    /// The program has exited (the pane is kept dead).
    pub dead: bool,
    /// A full-screen program has the alternate screen.
    pub alternate: bool,
    /// Lines in the pane's history, above the screen.
    pub history_size: u64,
    /// The cursor's line on the screen (0: the top).
    pub cursor_y: u64,
    /// The cursor's column.
    pub cursor_x: u64,
    /// The program asked for application cursor keys (`keypad_cursor_flag`).
    pub application_cursor: bool,
}

/// What went wrong talking to tmux or launching an external terminal.
#[derive(Debug)]
pub enum TmuxError {
    /// No `tmux` executable on PATH.
    NotInstalled,
    /// The node id is not `^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$`.
    InvalidNodeId(String),
    /// An argument tmux can't take (the message says which and why).
    InvalidArgument(String),
    /// The node has no tmux session (never opened, closed, or its program exited).
    NoSession(String),
    /// A tmux command ran but failed; `message` is what tmux said.
    Failed {
        /// The tmux subcommand, e.g. `new-session`.
        what: String,
        /// tmux's stderr (or the exit status if it said nothing).
        message: String,
    },
    /// A tmux command did not finish in time and was killed.
    TimedOut(String),
    /// A file or process operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The external terminal could not be launched (the message names what is missing).
    External(String),
}

impl fmt::Display for TmuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TmuxError::NotInstalled => write!(
                f,
                "tmux is not installed (no tmux on PATH); install tmux to get terminals that survive a host restart"
            ),
            TmuxError::InvalidNodeId(id) => {
                // The id may come from an agent: show no more than the start of it.
                let shown: String = id.chars().take(64).collect();
                write!(f, "Invalid agent node ID: {shown:?}")
            }
            TmuxError::InvalidArgument(why) => write!(f, "{why}"),
            TmuxError::NoSession(node) => write!(
                f,
                "Terminal {node} has no tmux session (it was closed or its program exited); open a new terminal"
            ),
            TmuxError::Failed { what, message } => write!(f, "tmux {what} failed: {message}"),
            TmuxError::TimedOut(what) => write!(
                f,
                "tmux {what} did not answer within {} s and was stopped; try again, or run `termsprawl-tools stop-terminals` if the tmux server is stuck",
                COMMAND_TIMEOUT.as_secs()
            ),
            TmuxError::Io { what, source } => write!(f, "{what}: {source}"),
            TmuxError::External(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for TmuxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TmuxError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// One of our tmux sessions, as `list-sessions` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session name, which is the node id.
    pub name: String,
    /// When tmux created the session (Unix seconds).
    pub created_unix: u64,
    /// Process id of the program in the session's active pane (0 if tmux didn't say).
    pub pane_pid: u32,
    /// The pane's program has exited (the pane stays: `remain-on-exit`).
    pub pane_dead: bool,
    /// How it ended, once tmux has collected its status (a moment after `pane_dead`).
    pub end: Option<ProgramEnd>,
    /// When it ended (Unix seconds; 0 while not known).
    pub ended_unix: u64,
    /// The pane has drawn something: its cursor left the top-left corner or lines scrolled
    /// into its history.
    pub shown_output: bool,
    /// How many clients (external terminal windows) are attached.
    pub attached_clients: u32,
    /// The pane's cursor (row, column) when it is shown.
    pub cursor: Option<(usize, usize)>,
    /// The pane shows its alternate screen (a full-screen program).
    pub alternate_on: bool,
}

/// The private tmux server of one data directory. Dropping it leaves the server and its
/// sessions running (that is the point); [`TmuxServer::kill_server`] ends them.
#[derive(Debug)]
pub struct TmuxServer {
    tmux: PathBuf,
    socket: PathBuf,
    config: PathBuf,
    /// Sessions this instance opened, and when: they are not warm, and become ready by time.
    opened: Mutex<HashMap<String, Instant>>,
    /// The executable whose `pane` subcommand runs each session's program (see
    /// [`TmuxServer::with_pane_filter`]).
    pane_filter: Option<PathBuf>,
}

impl TmuxServer {
    /// Whether a `tmux` executable is on PATH.
    pub fn available() -> bool {
        resolve_executable("tmux", std::env::var_os("PATH").as_deref()).is_some()
    }

    /// Prepares the server of `socket_dir` (normally `<data>/agent-tools/tmux`): creates the
    /// directory 0700 and writes our config. The server itself starts with the first
    /// [`open`](Self::open); an already running one (from an earlier host) is reused.
    pub fn new(socket_dir: &Path) -> Result<Self, TmuxError> {
        let server = TmuxServer::existing(socket_dir)?;
        private_dir(socket_dir).map_err(|source| TmuxError::Io {
            what: format!("creating {}", socket_dir.display()),
            source,
        })?;
        let socket_len = server.socket.as_os_str().len();
        if socket_len > MAX_SOCKET_PATH {
            return Err(TmuxError::InvalidArgument(format!(
                "the tmux socket path {} is {socket_len} bytes, more than a Unix socket allows ({MAX_SOCKET_PATH}); use a shorter data directory",
                server.socket.display()
            )));
        }
        let config = &server.config;
        // Unchanged since the last host (the usual restart): skip the rewrite.
        if !holds_private_file(config, TMUX_CONFIG.as_bytes(), 0o600) {
            regenerated_write(config, TMUX_CONFIG.as_bytes(), 0o600).map_err(|source| {
                TmuxError::Io {
                    what: format!("writing {}", config.display()),
                    source,
                }
            })?;
        }
        Ok(server)
    }

    /// The server of `socket_dir` as it is, creating and writing nothing: enough to end
    /// one that runs ([`kill_server`](Self::kill_server), `stop-terminals`), not to open
    /// sessions (use [`new`](Self::new)).
    pub fn existing(socket_dir: &Path) -> Result<Self, TmuxError> {
        let tmux = resolve_executable("tmux", std::env::var_os("PATH").as_deref())
            .ok_or(TmuxError::NotInstalled)?;
        Ok(TmuxServer {
            tmux,
            socket: socket_dir.join("socket"),
            config: socket_dir.join("tmux.conf"),
            opened: Mutex::new(HashMap::new()),
            pane_filter: None,
        })
    }

    /// Runs each session's program under `executable pane …` ([`crate::host::terminals::pane_filter`]), which
    /// keeps tmux from answering terminal queries into the program's input. `None` (the
    /// default) runs programs directly in their tmux pane. Sessions already running keep
    /// what they were started with.
    pub fn with_pane_filter(mut self, executable: Option<PathBuf>) -> Self {
        self.pane_filter = executable;
        self
    }

    /// The process name (`/proc/PID/comm`, its first 15 bytes) of a pane filter started
    /// by this server, if it starts them.
    pub fn pane_filter_name(&self) -> Option<String> {
        let name = self.pane_filter.as_ref()?.file_name()?.to_str()?;
        let mut end = name.len().min(15);
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        Some(name[..end].to_string())
    }

    /// The socket on which node `node`'s pane filter answers about its shell's commands
    /// (`shell_socket`), if this server starts pane filters and the path fits a
    /// socket address.
    pub fn pane_socket(&self, node: &str) -> Option<PathBuf> {
        crate::host::terminals::pane_filter::shell_socket::socket_path(&self.panes()?, node)
    }

    /// Node `node`'s output history folder, written by its pane filter (none without a
    /// filter): see [`crate::host::terminals::pane_filter::output_log`].
    pub fn output_log(&self, node: &str) -> Option<PathBuf> {
        check_node(node).ok()?;
        let panes = self.panes()?;
        Some(crate::host::terminals::pane_filter::output_log::log_dir(
            &panes, node,
        ))
    }

    /// The folder of the pane filters' sockets and output histories (none without a
    /// filter).
    pub fn panes(&self) -> Option<PathBuf> {
        self.pane_filter.as_ref()?;
        let tmux_dir = self.socket.parent()?;
        Some(crate::host::terminals::pane_filter::shell_socket::panes_dir(tmux_dir))
    }

    /// The server's socket, `<dir>/socket`.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Starts a detached session for `node` in `cwd`, `cols`×`rows`, with `env` added to the
    /// server's environment, running `command` through the default shell (`$SHELL -c`), or
    /// the user's shell when `None`. The session ends when its program exits.
    pub fn open(
        &self,
        node: &str,
        cwd: &Path,
        env: &[(String, String)],
        command: Option<&str>,
        cols: u16,
        rows: u16,
    ) -> Result<(), TmuxError> {
        let unconfined = Confinement::none("");
        self.open_confined(node, cwd, env, command, (cols, rows), &unconfined)
    }

    /// [`TmuxServer::open`] with the pane's program confined as `confinement` says
    /// ([`crate::host::isolation`]): under the pane filter, the filter (which holds the
    /// nonce and the integration's socket) stays outside and starts the program confined;
    /// without it, tmux starts the confining words with the program.
    pub fn open_confined(
        &self,
        node: &str,
        cwd: &Path,
        env: &[(String, String)],
        command: Option<&str>,
        (cols, rows): (u16, u16),
        confinement: &Confinement,
    ) -> Result<(), TmuxError> {
        check_node(node)?;
        if cols == 0 || rows == 0 {
            return Err(TmuxError::InvalidArgument(format!(
                "Invalid terminal size {cols}x{rows}: columns and rows must be at least 1"
            )));
        }
        no_nul("command", command.unwrap_or(""))?;
        for (name, value) in env {
            no_nul(name, value)?;
        }
        if !cwd.is_dir() {
            return Err(TmuxError::InvalidArgument(format!(
                "the terminal's folder {} is not a directory",
                cwd.display()
            )));
        }
        let mut args: Vec<OsString> = vec![
            "new-session".into(),
            "-d".into(),
            "-s".into(),
            node.into(),
            "-c".into(),
            cwd.into(),
            "-x".into(),
            cols.to_string().into(),
            "-y".into(),
            rows.to_string().into(),
        ];
        for (name, value) in env {
            let valid_name = !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit();
            if !valid_name {
                return Err(TmuxError::InvalidArgument(format!(
                    "Invalid environment variable name {name:?}"
                )));
            }
            args.push("-e".into());
            args.push(format!("{name}={value}").into());
        }
        let integrate = self.pane_socket(node);
        let log = self.output_log(node);
        args.extend(pane_command(
            self.pane_filter.as_deref(),
            command,
            (integrate.as_deref(), log.as_deref()),
            confinement,
        ));
        // Then the same size again with `resize-window`, which makes the window's size
        // manual: an external window attached later shows the node's size instead of
        // resizing the terminal to its own ([`TmuxServer::resize`]).
        let mut sequence: Vec<OsString> = args.iter().map(|a| escape_separator(a)).collect();
        sequence.push(";".into()); // a separator: not escaped
        sequence.extend(
            resize_args(node, cols, rows)
                .into_iter()
                .map(OsString::from),
        );
        self.run_command("new-session", self.command_unescaped(&sequence))?;
        self.lock_opened().insert(node.to_string(), Instant::now());
        Ok(())
    }

    /// Sets `node`'s window to `cols`×`rows` (its program gets SIGWINCH) and keeps it so:
    /// `resize-window` makes the window's size manual, so a client attached to it
    /// (`terminal_external`) does not change it. A session that is gone is not an error.
    pub fn resize(&self, node: &str, cols: u16, rows: u16) -> Result<(), TmuxError> {
        check_node(node)?;
        match self.run("resize-window", &resize_args(node, cols, rows)) {
            Ok(_) => Ok(()),
            Err(TmuxError::Failed { message, .. })
                if no_server(&message) || message.contains("can't find session") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// No socket file, so no server could answer on it (tmux would only say "error
    /// connecting"): callers skip starting a tmux client, e.g. at the first start in a
    /// data dir.
    pub fn socket_missing(&self) -> bool {
        std::fs::symlink_metadata(&self.socket)
            .is_err_and(|error| error.kind() == io::ErrorKind::NotFound)
    }

    /// Every session on our server (empty when the server is not running).
    pub fn sessions(&self) -> Result<Vec<SessionInfo>, TmuxError> {
        if self.socket_missing() {
            return Ok(Vec::new());
        }
        match self.run("list-sessions", &["list-sessions", "-F", SESSION_FORMAT]) {
            Ok(out) => Ok(parse_sessions(&out)),
            Err(TmuxError::Failed { message, .. }) if no_server(&message) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// [`TmuxServer::sessions`] and the [`TmuxServer::capture_screen`] of each of `nodes`,
    /// in one tmux call (`list-sessions ; display-message MARKER ; capture-pane … ; …`):
    /// what the canvas view reads twice a second, so `nodes` should be sessions that
    /// exist. The outputs are told apart by a random marker line that the panes' programs
    /// cannot guess. When the call fails (a node has no session: tmux stops the sequence
    /// there), the sessions are listed and each listed node's screen read, one call each.
    /// The screens are the view's: one line per row (so the sessions' cursors fall on
    /// them) with SGR escapes (`capture-pane -e`): raw pane text, for a caller that parses
    /// it (the view's runs), never to show as is.
    pub fn sessions_and_screens(
        &self,
        nodes: &[&str],
    ) -> Result<(Vec<SessionInfo>, HashMap<String, String>), TmuxError> {
        if nodes.is_empty() || nodes.iter().any(|node| check_node(node).is_err()) {
            return self.sessions_then_screens(nodes);
        }
        let marker = crate::base::random_hex(16).map_err(|e| TmuxError::Failed {
            what: "capture-pane".to_string(),
            message: e.to_string(),
        })?;
        let mut commands = vec![vec![
            "list-sessions".to_string(),
            "-F".to_string(),
            SESSION_FORMAT.to_string(),
        ]];
        for node in nodes {
            commands.push(vec!["display-message".into(), "-p".into(), marker.clone()]);
            let target = pane_target(node);
            commands.push(view_capture_args(&target));
        }
        let outputs = self
            .run_sequence("capture-pane", &commands)
            .map(|out| split_on_line(&String::from_utf8_lossy(&out), &marker))
            .ok()
            .filter(|outputs| outputs.len() == nodes.len() + 1);
        let Some(outputs) = outputs else {
            return self.sessions_then_screens(nodes);
        };
        let screens = nodes
            .iter()
            .zip(&outputs[1..])
            .map(|(node, text)| (node.to_string(), tidy_capture(text)))
            .collect();
        Ok((parse_sessions(outputs[0].as_bytes()), screens))
    }

    /// [`TmuxServer::sessions_and_screens`] one call at a time (listed nodes only).
    fn sessions_then_screens(
        &self,
        nodes: &[&str],
    ) -> Result<(Vec<SessionInfo>, HashMap<String, String>), TmuxError> {
        let sessions = self.sessions()?;
        let screens = nodes
            .iter()
            .filter(|node| sessions.iter().any(|s| s.name == **node))
            .filter_map(|node| {
                let out = self.run("capture-pane", &view_capture_args(&pane_target(node)));
                Some((
                    node.to_string(),
                    tidy_capture(&String::from_utf8_lossy(&out.ok()?)),
                ))
            })
            .collect();
        Ok((sessions, screens))
    }

    /// The session of `node`, if it exists.
    pub fn session(&self, node: &str) -> Result<Option<SessionInfo>, TmuxError> {
        check_node(node)?;
        Ok(self.sessions()?.into_iter().find(|s| s.name == node))
    }

    /// Whether `node`'s session is warm: it exists and was created before the host process
    /// that started at `host_started_at` (and not by this instance).
    pub fn is_warm(&self, node: &str, host_started_at: SystemTime) -> Result<bool, TmuxError> {
        let Some(session) = self.session(node)? else {
            return Ok(false);
        };
        if self.lock_opened().contains_key(node) {
            return Ok(false);
        }
        // tmux reports whole seconds: a session created in the host's first second (by an
        // earlier host, since this one didn't open it) still counts as older.
        let started = host_started_at
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(session.created_unix <= started)
    }

    /// Whether `node`'s session is running and ready for input: it has drawn something, or
    /// it was opened by an earlier host, or this instance opened it over 300 ms ago.
    pub fn has_ready_session(&self, node: &str) -> Result<bool, TmuxError> {
        let Some(session) = self.session(node)? else {
            return Ok(false);
        };
        let opened_at = self.lock_opened().get(node).copied();
        let old_enough = opened_at.map_or(true, |at| at.elapsed() >= READY_AFTER);
        Ok(!session.pane_dead && (session.shown_output || old_enough))
    }

    /// Whether `node`'s session exists and its program is still running.
    pub fn has_live_session(&self, node: &str) -> Result<bool, TmuxError> {
        Ok(self.session(node)?.is_some_and(|s| !s.pane_dead))
    }

    /// The last `max_chars` characters of what `node`'s terminal shows, as a person sees it:
    /// the rendered screen (cursor movement, clears and overwrites applied), wrapped lines
    /// joined, trailing blanks trimmed, preceded by as much scrollback as `max_chars` can
    /// cover. A full-screen program (alternate screen) reads as its screen alone.
    pub fn capture(&self, node: &str, max_chars: usize) -> Result<String, TmuxError> {
        check_node(node)?;
        let target = pane_target(node);
        // A full-screen program draws on the alternate screen: read that screen alone, not
        // the shell's history above it. (Two tmux calls: a program switching screens in
        // between gives one view or the other, both of which a person could have seen.)
        let alternate = self
            .run(
                "display-message",
                &["display-message", "-p", "-t", &target, "#{alternate_on}"],
            )
            .map_err(|e| self.missing_session(node, e))?;
        // Every line costs at least one character (its newline), so max_chars lines of
        // history always cover max_chars characters; tmux stops at the oldest line it has.
        let lines = if String::from_utf8_lossy(&alternate).trim() == "1" {
            0
        } else {
            max_chars.min(HISTORY_LIMIT)
        };
        let start = if lines == 0 {
            "0".to_string()
        } else {
            format!("-{lines}")
        };
        let out = self
            .run(
                "capture-pane",
                &["capture-pane", "-p", "-J", "-S", &start, "-t", &target],
            )
            .map_err(|e| self.missing_session(node, e))?;
        Ok(last_chars(&tidy_capture(&String::from_utf8_lossy(&out)), max_chars).to_string())
    }

    /// What tmux says of `node`'s pane now, in one tmux call.
    pub fn pane_info(&self, node: &str) -> Result<PaneInfo, TmuxError> {
        check_node(node)?;
        let format =
            "#{pane_pid}\t#{pane_dead}\t#{alternate_on}\t#{history_size}\t#{cursor_y}\t#{cursor_x}\t#{keypad_cursor_flag}";
        let out = self
            .run(
                "display-message",
                &["display-message", "-p", "-t", &pane_target(node), format],
            )
            .map_err(|e| self.missing_session(node, e))?;
        parse_pane_info(&String::from_utf8_lossy(&out)).ok_or_else(|| TmuxError::Failed {
            what: "display-message".to_string(),
            message: "tmux answered pane details in an unknown form".to_string(),
        })
    }

    /// `node`'s lines from `start` (0: the screen's first line, negative: history) to the
    /// screen's end, wrapped lines joined, cleaned as [`TmuxServer::capture`] cleans them.
    pub fn capture_from(&self, node: &str, start: i64) -> Result<String, TmuxError> {
        check_node(node)?;
        let start = start.to_string();
        let target = pane_target(node);
        let out = self
            .run(
                "capture-pane",
                &["capture-pane", "-p", "-J", "-S", &start, "-t", &target],
            )
            .map_err(|e| self.missing_session(node, e))?;
        Ok(tidy_capture(&String::from_utf8_lossy(&out)))
    }

    /// Whether this server starts each pane's program under the pane filter.
    pub fn filters_panes(&self) -> bool {
        self.pane_filter.is_some()
    }

    /// `node`'s visible screen only, cleaned as [`TmuxServer::capture`] cleans it, in one
    /// tmux call (a full-screen program's alternate screen while it is on, as tmux shows
    /// it): for the canvas view, which shows the current screen many times a second.
    pub fn capture_screen(&self, node: &str) -> Result<String, TmuxError> {
        check_node(node)?;
        let target = pane_target(node);
        let out = self
            .run("capture-pane", &["capture-pane", "-p", "-J", "-t", &target])
            .map_err(|e| self.missing_session(node, e))?;
        Ok(tidy_capture(&String::from_utf8_lossy(&out)))
    }

    /// Types `text` into `node`'s terminal literally (no key names are interpreted).
    pub fn send_literal(&self, node: &str, text: &str) -> Result<(), TmuxError> {
        check_node(node)?;
        no_nul("text", text)?;
        let target = pane_target(node);
        for chunk in chunks(text, SEND_CHUNK_BYTES) {
            self.run(
                "send-keys",
                &["send-keys", "-t", &target, "-l", "--", chunk],
            )
            .map_err(|e| self.missing_session(node, e))?;
        }
        Ok(())
    }

    /// Pastes `text` into `node`'s terminal as tmux pastes a buffer: each newline as a
    /// carriage return, and between `ESC [ 200 ~` and `ESC [ 201 ~` when the pane's
    /// program asked for bracketed paste (`paste-buffer -p`: tmux, the pane's terminal,
    /// knows that mode). The buffer is filled in pieces (a tmux command's size is bounded)
    /// under a fresh name and deleted by the paste.
    pub fn paste(&self, node: &str, text: &str) -> Result<(), TmuxError> {
        check_node(node)?;
        no_nul("text", text)?;
        let target = pane_target(node);
        let buffer = crate::base::random_hex(8)
            .map(|hex| format!("termsprawl-paste-{hex}"))
            .map_err(|e| TmuxError::Failed {
                what: "set-buffer".to_string(),
                message: e.to_string(),
            })?;
        for (at, chunk) in chunks(text, SEND_CHUNK_BYTES).into_iter().enumerate() {
            let append = if at == 0 { "-b" } else { "-ab" };
            self.run("set-buffer", &["set-buffer", append, &buffer, "--", chunk])?;
        }
        self.run(
            "paste-buffer",
            &["paste-buffer", "-p", "-d", "-b", &buffer, "-t", &target],
        )
        .map_err(|e| self.missing_session(node, e))?;
        Ok(())
    }

    /// Types `command` literally, then presses Enter.
    pub fn submit(&self, node: &str, command: &str) -> Result<(), TmuxError> {
        self.send_literal(node, command)?;
        self.send_key(node, "Enter")
    }

    /// Presses Ctrl+C in `node`'s terminal (the terminal delivers SIGINT to its foreground job).
    pub fn interrupt(&self, node: &str) -> Result<(), TmuxError> {
        self.send_key(node, "C-c")
    }

    /// Ends `node`'s session and every process in it (tmux hangs up on them). A session that
    /// is already gone is not an error.
    pub fn kill(&self, node: &str) -> Result<(), TmuxError> {
        check_node(node)?;
        self.lock_opened().remove(node);
        match self.run(
            "kill-session",
            &["kill-session", "-t", &session_target(node)],
        ) {
            Ok(_) => Ok(()),
            Err(TmuxError::Failed { message, .. })
                if no_server(&message) || message.contains("can't find session") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// At host start: kills every session for which `keep(name)` is false (its node is no
    /// longer on the canvas) and returns the sessions kept.
    /// The server (started by an earlier host, maybe an older one) is given our current
    /// config first, so its panes keep their last screen and report their end.
    pub fn adopt(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<SessionInfo>, TmuxError> {
        let sessions = self.sessions()?;
        if !sessions.is_empty() {
            let config = self.config.as_os_str();
            self.run("source-file", &[OsStr::new("source-file"), config])?;
        }
        let mut kept = Vec::new();
        for session in sessions {
            if keep(&session.name) {
                kept.push(session);
            } else {
                self.kill(&session.name)?;
            }
        }
        Ok(kept)
    }

    /// The argv that attaches a terminal to `node`'s session:
    /// `tmux -S <socket> attach-session -t =<node>`. Closing that terminal only detaches.
    pub fn attach_command(&self, node: &str) -> Result<Vec<String>, TmuxError> {
        check_node(node)?;
        Ok(vec![
            self.tmux.to_string_lossy().into_owned(),
            "-S".to_string(),
            self.socket.to_string_lossy().into_owned(),
            "attach-session".to_string(),
            "-t".to_string(),
            session_target(node),
        ])
    }

    /// Opens a desktop terminal window attached to `node`'s session (a second view of it).
    /// `command` is `externalTerminal.command` from preferences.json; `None` picks the first
    /// of [`DEFAULT_TERMINALS`] on PATH. Returns the program launched.
    pub fn external(&self, node: &str, command: Option<&[String]>) -> Result<String, TmuxError> {
        self.external_in(node, command, &|name| std::env::var_os(name))
    }

    /// [`external`](Self::external) with `DISPLAY`, `WAYLAND_DISPLAY` and `PATH` read
    /// through `env` instead of the process environment (the terminal itself still gets the
    /// process environment).
    ///
    /// A configured `command` is an argv: an element that is exactly `{attach}` is replaced
    /// by the attach argv, `{attach}` inside a longer element by the shell-quoted attach
    /// command, and without a placeholder the attach argv is appended. A configured command
    /// runs as given; the defaults need a display (`DISPLAY` or `WAYLAND_DISPLAY`).
    pub fn external_in(
        &self,
        node: &str,
        command: Option<&[String]>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<String, TmuxError> {
        if self.session(node)?.is_none() {
            return Err(TmuxError::NoSession(node.to_string()));
        }
        let attach = self.attach_command(node)?;
        let path = env("PATH");
        let argv = match command {
            Some(configured) => {
                let argv = external_argv(configured, &attach);
                let Some(program) = argv.first() else {
                    return Err(TmuxError::External(
                        "externalTerminal.command in preferences.json is empty; set it to an argv such as [\"xterm\", \"-e\", \"{attach}\"]".to_string(),
                    ));
                };
                if resolve_executable(program, path.as_deref()).is_none() {
                    return Err(TmuxError::External(format!(
                        "the external terminal {program:?} from externalTerminal.command in preferences.json was not found; install it or change the preference"
                    )));
                }
                argv
            }
            None => {
                let has_display = ["DISPLAY", "WAYLAND_DISPLAY"]
                    .iter()
                    .any(|name| env(name).is_some_and(|v| !v.is_empty()));
                if !has_display {
                    return Err(TmuxError::External(
                        "no display to open a terminal window on: neither DISPLAY nor WAYLAND_DISPLAY is set; run the host in a desktop session, or attach yourself with the attach command".to_string(),
                    ));
                }
                let Some(program) = DEFAULT_TERMINALS
                    .iter()
                    .find(|name| resolve_executable(name, path.as_deref()).is_some())
                else {
                    return Err(TmuxError::External(format!(
                        "no terminal program found on PATH (looked for {}); install one or set externalTerminal.command in preferences.json",
                        DEFAULT_TERMINALS.join(", ")
                    )));
                };
                default_terminal_argv(program, &attach)
            }
        };
        // Resolve through the same PATH the checks used.
        let program =
            resolve_executable(&argv[0], path.as_deref()).unwrap_or_else(|| argv[0].clone().into());
        let mut child = Command::new(&program)
            .args(&argv[1..])
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: Ctrl+C or SIGTERM aimed at the host leaves the window.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                TmuxError::External(format!(
                    "could not start the external terminal {:?}: {e}",
                    argv[0]
                ))
            })?;
        let deadline = Instant::now() + EXTERNAL_WATCH;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(status)) => {
                    return Err(TmuxError::External(format!(
                        "the external terminal {:?} exited at once ({status}); check externalTerminal.command in preferences.json",
                        argv[0]
                    )))
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) | Err(_) => {
                    // Still running: reap it whenever the window closes. Without a thread
                    // for that it stays a zombie until we exit; the launch itself worked.
                    let _ = thread::Builder::new()
                        .name("external-terminal-reaper".into())
                        .spawn(move || child.wait());
                    break;
                }
            }
        }
        Ok(argv[0].clone())
    }

    /// Ends the tmux server and every session in it (`--kill-terminals`, `stop-terminals`):
    /// true when one ran, false when none did (no socket, or tmux found no server on it),
    /// which is not an error.
    pub fn kill_server(&self) -> Result<bool, TmuxError> {
        self.lock_opened().clear();
        if self.socket_missing() {
            return Ok(false);
        }
        match self.run("kill-server", &["kill-server"]) {
            Ok(_) => Ok(true),
            Err(TmuxError::Failed { message, .. }) if no_server(&message) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn send_key(&self, node: &str, key: &str) -> Result<(), TmuxError> {
        check_node(node)?;
        self.run("send-keys", &["send-keys", "-t", &pane_target(node), key])
            .map(drop)
            .map_err(|e| self.missing_session(node, e))
    }

    /// Turns tmux's "can't find …" / "no server" answers into [`TmuxError::NoSession`].
    fn missing_session(&self, node: &str, error: TmuxError) -> TmuxError {
        match &error {
            TmuxError::Failed { message, .. }
                if no_server(message) || message.contains("can't find") =>
            {
                TmuxError::NoSession(node.to_string())
            }
            _ => error,
        }
    }

    fn lock_opened(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        // The map holds plain data; a panic elsewhere can't leave it inconsistent.
        crate::base::lock_or_recover(&self.opened)
    }

    /// Blocks until a pane's program ends (the `pane-died` hook signals
    /// [`PANE_DIED_CHANNEL`]; an end while nobody waited is remembered by tmux and returns
    /// at once), or until [`TmuxServer::wake_pane_watcher`]. `Err` when no server runs or
    /// it exited meanwhile: then nothing can end until the next [`TmuxServer::open`].
    /// No deadline: this waits as long as the terminals run.
    pub fn wait_for_pane_death(&self) -> Result<(), TmuxError> {
        let status = self
            .command(&["wait-for", PANE_DIED_CHANNEL])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|source| TmuxError::Io {
                what: format!("running {}", self.tmux.display()),
                source,
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(TmuxError::Failed {
                what: "wait-for".to_string(),
                message: status.to_string(),
            })
        }
    }

    /// Wakes a [`TmuxServer::wait_for_pane_death`] (as a pane's end does).
    pub fn wake_pane_watcher(&self) -> Result<(), TmuxError> {
        self.run("wait-for", &["wait-for", "-S", PANE_DIED_CHANNEL])
            .map(drop)
    }

    /// Makes tmux collect the exit status of every pane program that has ended: tmux
    /// 3.3a sometimes misses the SIGCHLD of a pane's program (it stays a zombie and the
    /// pane dead with no status; seen with the pane filter, about one pane in 10 when no
    /// other pane ends after it), and on any later child's exit it reaps them all.
    /// `run-shell true` is such a child.
    pub fn reap_ended_programs(&self) -> Result<(), TmuxError> {
        self.run("run-shell", &["run-shell", "true"]).map(drop)
    }

    /// `tmux -u -S socket -f config ARGS`, its environment as the module docs say, stdin
    /// closed.
    fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let escaped: Vec<OsString> = args.iter().map(|a| escape_separator(a.as_ref())).collect();
        self.command_unescaped(&escaped)
    }

    /// [`TmuxServer::command`] with `args` as they are (a `;` argument separates commands).
    fn command_unescaped(&self, args: &[OsString]) -> Command {
        let mut command = Command::new(&self.tmux);
        command.env_clear();
        for (name, value) in std::env::vars_os() {
            if !server_env_excluded(&name) {
                command.env(name, value);
            }
        }
        command
            .arg("-u")
            .arg("-S")
            .arg(&self.socket)
            .arg("-f")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Runs several tmux commands in one tmux call, `;` between them, and returns the
    /// stdout of all of them.
    fn run_sequence(&self, what: &str, commands: &[Vec<String>]) -> Result<Vec<u8>, TmuxError> {
        let mut args: Vec<OsString> = Vec::new();
        for (i, command) in commands.iter().enumerate() {
            if i > 0 {
                args.push(";".into()); // a separator: not escaped
            }
            args.extend(command.iter().map(|a| escape_separator(a.as_ref())));
        }
        self.run_command(what, self.command_unescaped(&args))
    }

    /// Runs `tmux -u -S socket -f config ARGS` and returns its stdout.
    fn run<S: AsRef<OsStr>>(&self, what: &str, args: &[S]) -> Result<Vec<u8>, TmuxError> {
        self.run_command(what, self.command(args))
    }

    fn run_command(&self, what: &str, mut command: Command) -> Result<Vec<u8>, TmuxError> {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = command.spawn().map_err(|source| TmuxError::Io {
            what: format!("running {}", self.tmux.display()),
            source,
        })?;
        let Finished {
            status,
            stdout,
            stderr,
        } = run_bounded(child, COMMAND_TIMEOUT)
            .map_err(|source| TmuxError::Io {
                what: format!("running tmux {what}"),
                source,
            })?
            .ok_or_else(|| TmuxError::TimedOut(what.to_string()))?;
        if status.success() {
            return Ok(stdout);
        }
        let said = String::from_utf8_lossy(&stderr).trim().to_string();
        Err(TmuxError::Failed {
            what: what.to_string(),
            message: if said.is_empty() {
                status.to_string()
            } else {
                said
            },
        })
    }
}

/// Node ids follow [`is_valid_node_id`], so they are safe as tmux session names.
fn check_node(node: &str) -> Result<(), TmuxError> {
    if is_valid_node_id(node) {
        Ok(())
    } else {
        Err(TmuxError::InvalidNodeId(node.to_string()))
    }
}

/// A NUL can't be passed in an argument (nor typed into a terminal).
fn no_nul(what: &str, value: &str) -> Result<(), TmuxError> {
    if value.contains('\0') {
        return Err(TmuxError::InvalidArgument(format!(
            "Invalid {what}: it contains a NUL character; remove it"
        )));
    }
    Ok(())
}

/// `=node`: the session named exactly `node` (no prefix or pattern match).
fn session_target(node: &str) -> String {
    format!("={node}")
}

/// `resize-window` of `node`'s window to `cols`×`rows` (at least 1 each).
fn resize_args(node: &str, cols: u16, rows: u16) -> Vec<String> {
    let target = pane_target(node);
    let (cols, rows) = (cols.max(1).to_string(), rows.max(1).to_string());
    ["resize-window", "-t", &target, "-x", &cols, "-y", &rows]
        .map(String::from)
        .to_vec()
}

/// `=node:`: the active pane of the current window of the session named exactly `node`
/// (tmux 3.3 rejects `=node` alone as a pane target).
fn pane_target(node: &str) -> String {
    format!("={node}:")
}

/// The program part of `new-session`: `command` for tmux to run through its shell, or with
/// a pane filter `FILTER pane [-c command]` (several arguments: tmux runs them directly).
/// With neither, tmux starts its shell as a login shell, and so does the filter, with
/// shell integration answering on `integrate` when given. The filter keeps the output
/// history in `log` when given.
fn pane_command(
    filter: Option<&Path>,
    command: Option<&str>,
    (integrate, log): (Option<&Path>, Option<&Path>),
    confinement: &Confinement,
) -> Vec<OsString> {
    let Some(filter) = filter else {
        // tmux runs the program itself: `CONFINING WORDS… $SHELL -l` or `… $SHELL -c …`.
        let Some(mut words) = confinement.prefix() else {
            return command.map(OsString::from).into_iter().collect();
        };
        let shell = std::env::var_os("SHELL")
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".into());
        let argv: Vec<OsString> = match command {
            Some(command) => vec![shell, "-c".into(), command.into()],
            None => vec![shell, "-l".into()],
        };
        words.extend(argv);
        return words;
    };
    let mut args: Vec<OsString> = vec![
        filter.into(),
        crate::host::terminals::pane_filter::PANE_SUBCOMMAND.into(),
    ];
    if let Some((confiner, plan)) = &confinement.confine {
        args.push("--confine".into());
        args.push(confiner.to_arg());
        args.extend(plan.to_args());
    }
    if let Some(log) = log {
        args.push("--log".into());
        args.push(log.into());
    }
    if let (None, Some(socket)) = (command, integrate) {
        args.push("--integrate".into());
        args.push(socket.into());
    }
    if let Some(command) = command {
        args.push("-c".into());
        args.push(command.into());
    }
    args
}

/// Whether tmux's message means no server is listening on our socket.
fn no_server(message: &str) -> bool {
    message.contains("no server running")
        || message.contains("error connecting to")
        // The server was exiting (its last session just ended) as we connected.
        || message.contains("server exited unexpectedly")
        || message.contains("lost server")
}

/// Variables kept out of the environment of tmux commands (see the module docs).
fn server_env_excluded(name: &OsStr) -> bool {
    let name = name.as_bytes();
    name == b"TMUX" || name == b"TMUX_PANE" || name.starts_with(b"TERMSPRAWL_")
}

/// tmux treats an argument ending in `;` as a command separator (keeping the rest) and
/// turns a trailing `\;` into `;`. Inserting a `\` before a trailing `;` passes the argument
/// through unchanged.
fn escape_separator(arg: &OsStr) -> OsString {
    let bytes = arg.as_bytes();
    match bytes.split_last() {
        Some((b';', head)) => OsString::from_vec([head, b"\\;"].concat()),
        _ => arg.to_os_string(),
    }
}

/// Splits `text` into pieces of at most `max` bytes on character boundaries.
fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// What `list-sessions -F` reports of each session (see [`parse_session_line`]).
const SESSION_FORMAT: &str = "#{session_name}\t#{session_created}\t#{pane_pid}\t#{pane_dead}\t#{cursor_x}\t#{cursor_y}\t#{history_size}\t#{session_attached}\t#{pane_dead_status}\t#{pane_dead_signal}\t#{pane_dead_time}\t#{cursor_flag}\t#{alternate_on}";

fn parse_sessions(out: &[u8]) -> Vec<SessionInfo> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(parse_session_line)
        .collect()
}

/// `text` cut at every line that is exactly `marker` (the marker lines dropped).
/// `capture-pane` for the view: the visible rows, unjoined, with SGR escapes (`-e`).
fn view_capture_args(target: &str) -> Vec<String> {
    ["capture-pane", "-p", "-e", "-t", target]
        .map(String::from)
        .to_vec()
}

fn split_on_line(text: &str, marker: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches('\n') == marker {
            parts.push(String::new());
        } else if let Some(part) = parts.last_mut() {
            part.push_str(line);
        }
    }
    parts
}

/// One `list-sessions -F` line; `None` for anything that isn't one of our sessions.
fn parse_session_line(line: &str) -> Option<SessionInfo> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [name, created, pid, dead, cursor_x, cursor_y, history, attached, status, signal, died, cursor_shown, alternate] =
        fields[..]
    else {
        return None;
    };
    check_node(name).ok()?;
    let number = |s: &str| s.trim().parse::<u64>().unwrap_or(0);
    let pane_dead = dead == "1";
    // tmux fills one of status and signal once it has reaped the pane's program.
    let end = match (status.trim(), signal.trim()) {
        _ if !pane_dead => None,
        ("", "") => None,
        (code, "") => Some(code.parse().map_or(ProgramEnd::Unknown, ProgramEnd::Status)),
        (_, signal) => Some(
            signal
                .parse()
                .map_or(ProgramEnd::Unknown, ProgramEnd::Signal),
        ),
    };
    Some(SessionInfo {
        name: name.to_string(),
        created_unix: number(created),
        pane_pid: u32::try_from(number(pid)).unwrap_or(0),
        pane_dead,
        end,
        ended_unix: number(died),
        shown_output: number(cursor_x) > 0 || number(cursor_y) > 0 || number(history) > 0,
        attached_clients: u32::try_from(number(attached)).unwrap_or(u32::MAX),
        cursor: (cursor_shown == "1").then(|| {
            let at = |s: &str| usize::try_from(number(s)).unwrap_or(usize::MAX);
            (at(cursor_y), at(cursor_x))
        }),
        alternate_on: alternate == "1",
    })
}

/// One `display-message` line of [`TmuxServer::pane_info`]'s format.
fn parse_pane_info(line: &str) -> Option<PaneInfo> {
    let fields: Vec<&str> = line.trim_end().split('\t').collect();
    let [pid, dead, alternate, history, cursor_y, cursor_x, application_cursor] = fields[..] else {
        return None;
    };
    Some(PaneInfo {
        pid: pid.parse().ok()?,
        dead: dead == "1",
        alternate: alternate == "1",
        history_size: history.parse().ok()?,
        cursor_y: cursor_y.parse().ok()?,
        cursor_x: cursor_x.parse().ok()?,
        application_cursor: application_cursor == "1",
    })
}

/// Trims trailing blanks of each line and the empty lines below the last text.
fn tidy_capture(raw: &str) -> String {
    let lines: Vec<&str> = raw.lines().map(str::trim_end).collect();
    let used = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines[..used].join("\n")
}

/// The argv of a configured external terminal (see [`TmuxServer::external_in`]).
fn external_argv(configured: &[String], attach: &[String]) -> Vec<String> {
    if !configured.iter().any(|a| a.contains(ATTACH_PLACEHOLDER)) {
        return configured.iter().chain(attach).cloned().collect();
    }
    let quoted = attach
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let mut argv = Vec::new();
    for arg in configured {
        if arg == ATTACH_PLACEHOLDER {
            argv.extend(attach.iter().cloned());
        } else {
            argv.push(arg.replace(ATTACH_PLACEHOLDER, &quoted));
        }
    }
    argv
}

/// How each default terminal takes a command to run.
fn default_terminal_argv(program: &str, attach: &[String]) -> Vec<String> {
    // gnome-terminal's -e takes one string; `--` takes an argv. The others take -e argv.
    let separator = if program == "gnome-terminal" {
        "--"
    } else {
        "-e"
    };
    [program.to_string(), separator.to_string()]
        .into_iter()
        .chain(attach.iter().cloned())
        .collect()
}

/// `'…'` with embedded `'` written as `'\''`.
fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// A child that exited, with what it wrote.
struct Finished {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Waits for `child` up to `timeout` while draining its stdout and stderr (each kept up to
/// its cap, the rest discarded so the child never blocks on a full pipe). `None` when it
/// timed out (it is then killed and reaped).
fn run_bounded(mut child: Child, timeout: Duration) -> io::Result<Option<Finished>> {
    let (tx, rx) = mpsc::channel();
    let mut readers = 0;
    let mut spawned = Ok(());
    if let Some(out) = child.stdout.take() {
        readers += 1;
        let tx = tx.clone();
        spawned = spawn_reader(move || tx.send((true, read_capped(out, MAX_STDOUT))));
    }
    if let Some(err) = child.stderr.take() {
        readers += 1;
        let tx = tx.clone();
        spawned = spawned.and(spawn_reader(move || {
            tx.send((false, read_capped(err, MAX_STDERR)))
        }));
    }
    drop(tx);
    if let Err(e) = spawned {
        // Without its readers the child could block on a full pipe: stop it now.
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    let deadline = Instant::now() + timeout;
    let Some(status) = wait_with_deadline(&mut child, timeout)? else {
        return Ok(None);
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    for _ in 0..readers {
        // A descendant still holding the pipe must not hold us: give up at the deadline.
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(Duration::from_millis(100))) {
            Ok((true, bytes)) => stdout = bytes,
            Ok((false, bytes)) => stderr = bytes,
            Err(_) => break,
        }
    }
    Ok(Some(Finished {
        status,
        stdout,
        stderr,
    }))
}

/// Blocks until `child` exits (no polling); a watchdog thread kills it at `timeout`.
/// `None` when it was killed (it is reaped either way). The child is reaped only after
/// the watchdog is done, so the watchdog's kill can only ever reach this child.
fn wait_with_deadline(child: &mut Child, timeout: Duration) -> io::Result<Option<ExitStatus>> {
    let pid = libc::pid_t::try_from(child.id()).map_err(|_| io::ErrorKind::InvalidInput)?;
    let (finished, watch) = mpsc::channel::<()>();
    let watchdog = thread::Builder::new()
        .name("tmux-watchdog".into())
        .spawn(move || {
            // Dropping `finished` (the child exited) ends the wait early.
            let late = watch.recv_timeout(timeout) == Err(mpsc::RecvTimeoutError::Timeout);
            late && send_signal(pid, libc::SIGKILL).is_ok()
        });
    let watchdog = match watchdog {
        Ok(watchdog) => watchdog,
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(error);
        }
    };
    let exited = wait_exited_unreaped(pid);
    drop(finished);
    let killed = watchdog.join().unwrap_or(false);
    if let Err(error) = exited {
        let _ = child.kill();
        let _ = child.wait();
        return Err(error);
    }
    let status = child.wait()?;
    Ok((!killed).then_some(status))
}

/// Starts a pipe reader; `Err` (instead of std's panic) when no thread can be made.
fn spawn_reader<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) -> io::Result<()> {
    thread::Builder::new()
        .name("tmux-pipe".into())
        .spawn(read)
        .map(drop)
}

/// Reads `source` to its end, keeping the first `cap` bytes.
fn read_capped(mut source: impl Read, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match source.read(&mut buf) {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_handle_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<TmuxServer>();
    }

    #[test]
    fn node_ids_are_checked() {
        for ok in ["a", "A-1_b", &"x".repeat(128)] {
            assert!(check_node(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "a.b",
            "a:b",
            "a b",
            "a*",
            "é",
            &"x".repeat(129),
        ] {
            assert!(check_node(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn trailing_semicolon_is_escaped_for_tmux() {
        assert_eq!(escape_separator(OsStr::new("echo hi")), "echo hi");
        assert_eq!(escape_separator(OsStr::new("echo hi;")), "echo hi\\;");
        assert_eq!(escape_separator(OsStr::new(";")), "\\;");
        assert_eq!(escape_separator(OsStr::new("a\\;")), "a\\\\;");
        assert_eq!(escape_separator(OsStr::new("a;b")), "a;b");
    }

    #[test]
    fn chunks_split_on_char_boundaries() {
        let text = "aé日b".repeat(5);
        let pieces = chunks(&text, 4);
        assert!(pieces.iter().all(|p| p.len() <= 4 && !p.is_empty()));
        assert_eq!(pieces.concat(), text);
        assert!(chunks("", 4).is_empty());
    }

    #[test]
    fn pane_info_lines_parse() {
        let info = parse_pane_info("4242\t0\t1\t120\t23\t7\t1\n").unwrap();
        assert_eq!(
            info,
            PaneInfo {
                pid: 4242,
                dead: false,
                alternate: true,
                history_size: 120,
                cursor_y: 23,
                cursor_x: 7,
                application_cursor: true,
            }
        );
        assert!(parse_pane_info("4242\t1\t0\t0\t0\t0\t0").unwrap().dead);
        assert_eq!(parse_pane_info("4242\t0\t0\t0\t0\t0"), None);
        assert_eq!(parse_pane_info("x\t0\t0\t0\t0\t0\t0"), None);
    }

    #[test]
    fn session_lines_parse() {
        let s = parse_session_line("n-1\t1700000000\t4242\t0\t2\t0\t0\t1\t\t\t\t1\t1").unwrap();
        assert_eq!(
            s,
            SessionInfo {
                name: "n-1".into(),
                created_unix: 1_700_000_000,
                pane_pid: 4242,
                pane_dead: false,
                end: None,
                ended_unix: 0,
                shown_output: true,
                attached_clients: 1,
                cursor: Some((0, 2)),
                alternate_on: true,
            }
        );
        let quiet = parse_session_line("n\t1\t2\t1\t0\t0\t0\t0\t\t\t\t0\t0").unwrap();
        assert!(quiet.pane_dead && !quiet.shown_output && quiet.end.is_none());
        let exited = parse_session_line("n\t1\t2\t1\t0\t0\t0\t0\t3\t\t1700000009\t0\t0").unwrap();
        assert_eq!(exited.end, Some(ProgramEnd::Status(3)));
        assert_eq!(exited.ended_unix, 1_700_000_009);
        let killed = parse_session_line("n\t1\t2\t1\t0\t0\t0\t0\t\t9\t1\t0\t0").unwrap();
        assert_eq!(killed.end, Some(ProgramEnd::Signal(9)));
        let running = parse_session_line("n\t1\t2\t0\t0\t0\t0\t0\t\t\t\t0\t0").unwrap();
        assert_eq!(running.end, None);
        assert!(parse_session_line("bad name\t1\t2\t0\t0\t0\t0\t0\t\t\t\t0\t0").is_none());
        assert!(parse_session_line("n\t1").is_none());
    }

    #[test]
    fn capture_is_tidied_and_cut() {
        assert_eq!(tidy_capture("a  \n\nb \n\n  \n"), "a\n\nb");
        assert_eq!(tidy_capture("\n\n"), "");
        assert_eq!(last_chars("héllo", 3), "llo");
        assert_eq!(last_chars("héllo", 4), "éllo");
        assert_eq!(last_chars("hi", 10), "hi");
        assert_eq!(last_chars("hi", 0), "");
    }

    #[test]
    fn external_argv_places_the_attach_command() {
        let attach = vec!["tmux".to_string(), "-S".to_string(), "/s p".to_string()];
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            external_argv(&strings(&["term", "-e", "{attach}"]), &attach),
            strings(&["term", "-e", "tmux", "-S", "/s p"])
        );
        assert_eq!(
            external_argv(&strings(&["term", "--"]), &attach),
            strings(&["term", "--", "tmux", "-S", "/s p"])
        );
        assert_eq!(
            external_argv(&strings(&["sh", "-c", "exec {attach}"]), &attach),
            strings(&["sh", "-c", "exec 'tmux' '-S' '/s p'"])
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            default_terminal_argv("gnome-terminal", &attach)[..2],
            strings(&["gnome-terminal", "--"])
        );
        assert_eq!(default_terminal_argv("xterm", &attach)[1], "-e");
    }

    #[test]
    fn programs_are_found_on_the_given_path_only() {
        assert!(resolve_executable("sh", Some(OsStr::new("/bin:/usr/bin"))).is_some());
        assert!(resolve_executable("sh", Some(OsStr::new(""))).is_none());
        assert!(resolve_executable("sh", None).is_none());
        assert!(resolve_executable("/bin/sh", None).is_some());
        assert!(resolve_executable("", Some(OsStr::new("/bin"))).is_none());
    }

    #[test]
    fn server_env_drops_tmux_and_node_variables() {
        assert!(server_env_excluded(OsStr::new("TMUX")));
        assert!(server_env_excluded(OsStr::new("TMUX_PANE")));
        assert!(server_env_excluded(OsStr::new("TERMSPRAWL_SESSION_FILE")));
        assert!(!server_env_excluded(OsStr::new("PATH")));
        assert!(!server_env_excluded(OsStr::new("TMUX_TMPDIR")));
    }

    #[test]
    fn bounded_run_times_out_and_caps_output() {
        let child = Command::new("sleep")
            .arg("5")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(run_bounded(child, Duration::from_millis(50))
            .unwrap()
            .is_none());
        let child = Command::new("head")
            .args(["-c", "20000000", "/dev/zero"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let done = run_bounded(child, Duration::from_secs(5)).unwrap().unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout.len(), MAX_STDOUT);
    }
}
