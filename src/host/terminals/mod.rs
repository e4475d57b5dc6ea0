//! # The terminals room
//!
//! Owns every terminal of the default host, on either backend, and what is known of the
//! programs in them. Offers the rest of the host [`HostTerminals`] (the runtime's
//! `Terminals`, and what the canvas owner and the view ask of terminals),
//! [`TerminalsMode`], [`EndedTerminal`] (kept with the canvas), [`stop_terminals`] (with
//! [`TerminalsStop`]) and, for the view, [`ViewScreen`] and `screen::sgr`.
//!
//! - this file: the front, [`HostTerminals`], choosing and driving a backend;
//! - [`pty`]: the built-in backend, a PTY per terminal (`procfs.rs`: `/proc` reading);
//! - [`tmux`]: the tmux backend, with `tmux::panes` (a pane's foreground and output);
//! - [`pane_filter`]: `termsprawl-tools pane`, the program of every tmux pane: its
//!   query filter (`pane_filter::queries`) and shell-integration socket;
//! - [`screen`]: the screen model the PTY backend feeds, with SGR colours;
//! - [`shell`]: shell integration both backends share (start-up files, marks, records).
//!
//! The default host's [`Terminals`]: tmux when it is installed (sessions outlive the host,
//! screen-accurate reads, external attach), else the built-in PTY backend.
//!
//! Both backends hand agents inert text only: PTY reads come from the plain-text screen
//! model, tmux reads from `capture-pane` (no `-e`) with every control character other
//! than newline and tab removed.
//!
//! Neither backend answers terminal queries (device attributes, cursor position, colour
//! reads, …), so nothing is ever typed into a program's input but what an agent or a
//! person types: the PTY screen model drops them unanswered ([`crate::host::terminals::screen`]), and tmux,
//! which always answers, never sees them when [`HostTerminals::with_pane_filter`] names
//! the pane filter ([`crate::host::terminals::pane_filter`], on in `serve`).
//!
//! `is_warm` (the trait) means "a session exists for this node": the runtime asks it
//! before `terminal_external` and before preparing an agent launch, and a launch is always
//! prepared before its session starts, so an existing session there is one that predates
//! this host. Strict warmth (tmux: created before this host process) is reported per node
//! by [`HostTerminals::states`], which `canvas_list` shows.
//!
//! A terminal whose program ends by itself keeps its node and its last screen until the
//! node is closed: tmux keeps the dead pane (`remain-on-exit`), the PTY backend keeps the
//! terminal and its screen model. [`HostTerminals::watch`] reports each such end once,
//! with an [`EndedTerminal`] (how, when, the last [`KEPT_SCREEN_LINES`] lines), which the
//! canvas owner saves with the canvas and hands back after a restart
//! ([`HostTerminals::remember`]), so the end outlives the tmux server and the PTYs.
//! Reads of an ended terminal end with a line such as `[process exited with status 3]`.
//! An end this host causes (closing a node, shutdown) is not one: nothing is reported.

pub mod history;
pub mod pane_filter;
pub(crate) mod procfs;
pub mod pty;
pub mod screen;
pub mod shell;
pub mod tmux;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::host::isolation::{self, Confinement, Isolation, Plan, Status};
use crate::host::terminals::pty::{PtyTerminals, TerminalOptions, WindowSize, FALLBACK_SHELL};
use crate::host::terminals::tmux::panes::TmuxPanes;
use crate::host::terminals::tmux::{SessionInfo, TmuxError, TmuxServer};
use crate::host::HostError;
use crate::runtime::{
    unix_millis, CommandOutput, CommandRecord, CommandState, Foreground, LinesFound, OutputAfter,
    OutputMark, ProgramEnd, ShellIntegration, Terminals, PERSON_TYPING_WINDOW,
};
use crate::server::Waker;
use pane_filter::{output_log, shell_socket};
use shell::ShellStatus;

/// `terminal_read` never asks for more than this (the runtime's cap).
const MAX_CAPTURE_CHARS: usize = 100_000;

/// How long `canvas_list` reuses one `tmux list-sessions` answer (tmux backend). Opening
/// or closing a terminal through this host (and adopting at start) drops it at once, so the
/// only change it can lag behind is one nobody here made: a program exiting on its own, or
/// a session killed from outside, shows in `canvas_list` at most this much later. That
/// lag is below what an agent can act on (its next call takes longer), and it turns one
/// tmux process per listing into a few per second.
const LISTING_TTL: Duration = Duration::from_millis(250);

/// How many lines of an ended terminal's last screen are kept with the canvas (and read
/// once its session is gone).
pub const KEPT_SCREEN_LINES: usize = 200;

/// How long a dead tmux pane may go without tmux reporting its exit status before its end
/// is recorded as unknown (tmux collects the status a moment after the pane dies).
const STATUS_WAIT: Duration = Duration::from_secs(2);
/// How long after a pane died without a status the watcher makes tmux reap its program
/// (see [`TmuxServer::reap_ended_programs`]); usually tmux has the status at once.
const REAP_AFTER: Duration = Duration::from_millis(200);
/// How often the watcher looks again while a dead pane's status is not reported yet.
const STATUS_POLL: Duration = Duration::from_millis(50);
/// How long a tmux pane is seen dead before its last screen is taken.
const OUTPUT_SETTLE: Duration = Duration::from_millis(150);

/// The canvas view's look at the tmux sessions and screens is reused at most this long
/// while nothing can have changed (see [`HostTerminals::states_and_screens`]).
const VIEW_LOOK_REUSE: Duration = Duration::from_secs(5);

/// The message for `terminal_external` on the PTY backend.
pub const EXTERNAL_NEEDS_TMUX: &str = "terminal_external needs the tmux backend: install tmux and restart `termsprawl-tools serve` (or start it with --terminals tmux); built-in PTY terminals cannot be opened in a second window";

/// Which backend `serve --terminals` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TerminalsMode {
    /// tmux if it is on PATH, else the PTY backend.
    #[default]
    Auto,
    /// tmux, or fail to start.
    Tmux,
    /// The built-in PTY backend.
    Pty,
}

impl FromStr for TerminalsMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(TerminalsMode::Auto),
            "tmux" => Ok(TerminalsMode::Tmux),
            "pty" => Ok(TerminalsMode::Pty),
            other => Err(format!("--terminals {other}: expected auto, tmux or pty")),
        }
    }
}

/// A session's state as `canvas_list` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionState {
    /// Its program is running.
    pub live: bool,
    /// It was started before this host process (only tmux sessions can be).
    pub warm: bool,
    /// How and when (Unix ms) its program ended, once it has.
    pub ended: Option<(ProgramEnd, u64)>,
    /// Its shell's commands while it runs; `None` for a terminal whose program is not a
    /// shell the host started (an agent's), or when nothing answers for it (a tmux pane
    /// without the pane filter).
    pub shell: Option<ShellStatus>,
    /// How it is confined, while it runs.
    pub isolation: Option<Status>,
}

/// A terminal whose program ended by itself: what its node keeps until it is closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndedTerminal {
    /// How it ended.
    pub end: ProgramEnd,
    /// When (Unix milliseconds).
    pub ended_at: u64,
    /// The last [`KEPT_SCREEN_LINES`] lines it showed, as inert text.
    pub last_screen: String,
}

impl EndedTerminal {
    /// `{"ended": {"status": 3}, "endedAt": <unix ms>, "lastScreen": "…"}`, as the canvas
    /// file keeps it.
    pub fn to_json(&self) -> Value {
        json!({
            "ended": self.end.to_json(),
            "endedAt": self.ended_at,
            "lastScreen": self.last_screen,
        })
    }

    /// The inverse of [`EndedTerminal::to_json`]; `None` for any other shape. The screen
    /// is made inert and cut to [`KEPT_SCREEN_LINES`] again (the file may have been edited).
    pub fn from_json(value: &Value) -> Option<EndedTerminal> {
        Some(EndedTerminal {
            end: ProgramEnd::from_json(value.get("ended")?)?,
            ended_at: value.get("endedAt")?.as_u64()?,
            last_screen: last_lines(
                &inert(value.get("lastScreen")?.as_str()?),
                KEPT_SCREEN_LINES,
            )
            .to_string(),
        })
    }
}

/// The host's forms of a [`ProgramEnd`]: a read's last line, the canvas file's record.
impl ProgramEnd {
    /// The line a read of the ended terminal ends with: `[process exited with status 3]`,
    /// `[process killed by signal 9]`, `[process exited]`.
    pub fn screen_line(self) -> String {
        match self {
            ProgramEnd::Status(code) => format!("[process exited with status {code}]"),
            ProgramEnd::Signal(signal) => format!("[process killed by signal {signal}]"),
            ProgramEnd::Unknown => "[process exited]".to_string(),
        }
    }

    /// `{"status": 3}`, `{"signal": 9}`, or `{}` when unknown.
    pub fn to_json(self) -> Value {
        match self {
            ProgramEnd::Status(code) => json!({ "status": code }),
            ProgramEnd::Signal(signal) => json!({ "signal": signal }),
            ProgramEnd::Unknown => json!({}),
        }
    }

    /// The inverse of [`ProgramEnd::to_json`]; `None` for anything else.
    pub fn from_json(value: &Value) -> Option<ProgramEnd> {
        let object = value.as_object()?;
        let number = |key: &str| {
            object
                .get(key)
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
        };
        match (object.len(), number("status"), number("signal")) {
            (0, _, _) => Some(ProgramEnd::Unknown),
            (1, Some(code), None) => Some(ProgramEnd::Status(code)),
            (1, None, Some(signal)) => Some(ProgramEnd::Signal(signal)),
            _ => None,
        }
    }
}

/// `ms` (Unix milliseconds) as an RFC 3339 UTC time, e.g. `2026-12-01T20:31:05.123Z`.
pub fn rfc3339_utc(ms: u64) -> String {
    let (days, rest) = (ms / 86_400_000, ms % 86_400_000);
    let (hour, minute) = (rest / 3_600_000, rest / 60_000 % 60);
    let (second, milli) = (rest / 1000 % 60, rest % 1000);
    let (year, month, day) = crate::base::civil_from_days(days as i64);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

enum Backend {
    Tmux(Arc<TmuxServer>),
    Pty(PtyTerminals),
}

/// How a terminal is confined, with its JSON made once (`session_info` shares it).
type KnownIsolation = (Status, Arc<Value>);

/// The terminals of every terminal node, on one backend.
pub struct HostTerminals {
    backend: Backend,
    started_at: SystemTime,
    /// Sessions this host started (so not warm), for the tmux backend.
    opened: Mutex<HashSet<String>>,
    /// `<data>/agent-tools/preferences.json` (for `externalTerminal.command`).
    preferences: PathBuf,
    /// The last tmux listing for [`HostTerminals::states`] and when it was taken (see
    /// [`LISTING_TTL`]); `None` once a start, close or adopt may have changed it.
    listing: Mutex<Option<(Instant, HashMap<String, SessionState>)>>,
    /// Counts the changes this host makes or records ([`HostTerminals::changes`]).
    changes: AtomicU64,
    /// The last command record read of each terminal: its id and state
    /// ([`HostTerminals::command_seen`]).
    commands_seen: Mutex<HashMap<String, (u64, CommandState)>>,
    /// The canvas view's last tmux look, for [`HostTerminals::states_and_screens`].
    view_look: Mutex<Option<ViewLook>>,
    /// The ends recorded (reported by the watcher, or remembered from the canvas).
    ended: Mutex<HashMap<String, EndedTerminal>>,
    /// Dead tmux panes whose status tmux has not reported yet, and PTY programs that exited
    /// while their last output may still be on its way; since when.
    unreported: Mutex<HashMap<String, Instant>>,
    /// "A program may have ended": PTY readers and the tmux pane watcher send here; the
    /// watcher thread ([`HostTerminals::watch`]) takes the receiver. `None` once shut down.
    may_have_ended: Mutex<Option<Sender<()>>>,
    may_have_ended_rx: Mutex<Option<Receiver<()>>>,
    /// Tells the tmux pane watcher that a server runs now (a session was opened).
    server_started: Mutex<Option<Sender<()>>>,
    /// Set at shutdown: the tmux pane watcher stops at its next wake-up.
    stopping: Arc<AtomicBool>,
    /// `<data>/agent-tools/shell`: the start-up files of PTY shells with integration.
    shell_files: PathBuf,
    /// tmux panes' shells and output as seen without integration.
    tmux_panes: TmuxPanes,
    /// When the person last typed into each terminal (the canvas view's keys):
    /// [`Terminals::person_typing`].
    person_keys: Mutex<HashMap<String, Instant>>,
    /// The server's waiter, woken when a watched terminal changes ([`HostTerminals::set_waker`]).
    waker: OnceLock<Waker>,
    /// tmux panes with a waiting call, watched through their filters.
    pane_watcher: OnceLock<Arc<shell_socket::PaneWatcher>>,
    /// How each terminal this host started is confined, and what was found of others
    /// (`None`: no live session when asked), so that `session_info`, asked for every agent
    /// and often, asks tmux once per node (see [`HostTerminals::isolation_status`]).
    isolation: Mutex<HashMap<String, Option<KnownIsolation>>>,
    /// What agents' terminals are confined with: nothing until
    /// [`HostTerminals::set_isolation`].
    confiner: Mutex<Arc<Isolation>>,
    /// The data directory, which confined terminals do not see.
    data: PathBuf,
    /// The executable whose `pane --take-terminal` starts a confined program
    /// ([`crate::host::isolation::first_step`]); `None`: confined programs start directly.
    helper: Mutex<Option<PathBuf>>,
}

/// A terminal's screen as the canvas view shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewScreen {
    /// The visible rows, one line a row, with SGR escapes (tmux's `capture-pane -e`, the
    /// PTY model's cell styles): raw text, to be parsed (the view's runs), never shown as
    /// is.
    pub text: String,
    /// The cursor's row and column on `text`, when it is shown.
    pub cursor: Option<(usize, usize)>,
}

/// The canvas view's last tmux look (see [`HostTerminals::states_and_screens`]).
struct ViewLook {
    taken: Instant,
    /// [`HostTerminals::changes`] when it was taken.
    changes: u64,
    visible: Vec<String>,
    /// Each visible node's pane when the look was taken.
    panes: Vec<Pane>,
    /// Whether every filter had written the same at the look before this one.
    settled: bool,
    states: HashMap<String, SessionState>,
    screens: HashMap<String, ViewScreen>,
}

impl ViewLook {
    fn new(
        earlier: Option<ViewLook>,
        taken: Instant,
        changes: u64,
        visible: &[&str],
        panes: Vec<Pane>,
        states: &HashMap<String, SessionState>,
        screens: &HashMap<String, ViewScreen>,
    ) -> ViewLook {
        let settled = earlier.is_some_and(|e| {
            e.changes == changes && e.visible.iter().eq(visible.iter()) && e.panes == panes
        });
        ViewLook {
            taken,
            changes,
            visible: visible.iter().map(|id| id.to_string()).collect(),
            panes,
            settled,
            states: states.clone(),
            screens: screens.clone(),
        }
    }

    /// Whether this look still shows what tmux would show now (see
    /// [`HostTerminals::states_and_screens`]).
    fn still_current(&self, visible: &[&str], changes: u64) -> bool {
        self.settled
            && self.changes == changes
            && self.taken.elapsed() < VIEW_LOOK_REUSE
            && self.visible.iter().eq(visible.iter())
            && self.panes.iter().all(|pane| match pane {
                // No session or a dead pane changes only by what `changes` counts (this
                // host opening, closing or recording an end), or from outside (within
                // VIEW_LOOK_REUSE).
                Pane::None | Pane::Dead => true,
                Pane::Filter(pid, bytes) => bytes_written(*pid) == Some(*bytes),
                Pane::Unknown => false,
            })
    }
}

/// A visible node's tmux pane, as the view's look saw it.
#[derive(Debug, PartialEq)]
enum Pane {
    /// The node has no session.
    None,
    /// Its program has ended.
    Dead,
    /// Its program runs under the pane filter (pid), which had written this many bytes.
    Filter(u32, u64),
    /// Its program runs without the filter: it must be looked at every time.
    Unknown,
}

/// The bytes process `pid` has written so far (`wchar` in `/proc/PID/io`).
fn bytes_written(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let line = io.lines().find_map(|l| l.strip_prefix("wchar:"))?;
    line.trim().parse().ok()
}

/// The name of process `pid` (`/proc/PID/comm`: at most 15 bytes of it).
fn process_name(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

/// The private tmux server's directory of a data directory.
pub fn tmux_dir(data: &Path) -> PathBuf {
    data.join("agent-tools").join("tmux")
}

/// What [`stop_terminals`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminalsStop {
    /// The data directory's tmux server ran, and was ended with every terminal in it.
    Stopped,
    /// No tmux server runs for the data directory: nothing was done.
    NoneRunning,
    /// tmux is not installed, so none can run.
    NoTmux,
}

/// `termsprawl-tools stop-terminals`: ends the private tmux server of `data` and every
/// terminal in it, and says whether there was one. It creates nothing, so a mistyped
/// `--data` leaves no folder behind.
pub fn stop_terminals(data: &Path) -> Result<TerminalsStop, HostError> {
    let server = match TmuxServer::existing(&tmux_dir(data)) {
        Ok(server) => server,
        Err(TmuxError::NotInstalled) => return Ok(TerminalsStop::NoTmux),
        Err(e) => return Err(HostError::Terminal(e.to_string())),
    };
    match server.kill_server() {
        Ok(true) => Ok(TerminalsStop::Stopped),
        Ok(false) => Ok(TerminalsStop::NoneRunning),
        Err(e) => Err(HostError::Terminal(e.to_string())),
    }
}

impl HostTerminals {
    /// The backend `mode` asks for, for the data directory `data`; tmux terminals run
    /// their programs directly (see [`HostTerminals::with_pane_filter`]).
    pub fn new(mode: TerminalsMode, data: &Path) -> Result<HostTerminals, HostError> {
        HostTerminals::with_pane_filter(mode, data, None)
    }

    /// [`HostTerminals::new`], with tmux terminals running their programs under the pane
    /// filter of the executable `pane_filter` when it is given (see
    /// [`TmuxServer::with_pane_filter`]).
    pub fn with_pane_filter(
        mode: TerminalsMode,
        data: &Path,
        pane_filter: Option<PathBuf>,
    ) -> Result<HostTerminals, HostError> {
        let helper = pane_filter.clone();
        let tmux = match mode {
            TerminalsMode::Pty => None,
            // `new` looks tmux up on PATH: its "not installed" is auto's PTY fallback.
            TerminalsMode::Auto => match TmuxServer::new(&tmux_dir(data)) {
                Err(TmuxError::NotInstalled) => None,
                server => Some(server),
            },
            TerminalsMode::Tmux => Some(TmuxServer::new(&tmux_dir(data))),
        };
        let backend = match tmux {
            Some(server) => {
                let server = server.map_err(|e| HostError::Terminal(e.to_string()))?;
                Backend::Tmux(Arc::new(server.with_pane_filter(pane_filter)))
            }
            None => Backend::Pty(PtyTerminals::new()),
        };
        let shell_files = data.join("agent-tools").join("shell");
        if matches!(backend, Backend::Tmux(_)) {
            shell_socket::remove_stale_sockets(&shell_socket::panes_dir(&tmux_dir(data)));
        }
        if matches!(backend, Backend::Pty(_)) {
            // Left by a host that did not close its terminals; their shells are gone
            // (PTY terminals end with their host).
            let _ = std::fs::remove_dir_all(&shell_files);
        }
        let (may_have_ended, may_have_ended_rx) = mpsc::channel();
        Ok(HostTerminals {
            backend,
            started_at: SystemTime::now(),
            opened: Mutex::default(),
            preferences: data.join("agent-tools").join("preferences.json"),
            listing: Mutex::default(),
            changes: AtomicU64::new(0),
            commands_seen: Mutex::new(HashMap::new()),
            view_look: Mutex::default(),
            ended: Mutex::default(),
            unreported: Mutex::default(),
            may_have_ended: Mutex::new(Some(may_have_ended)),
            may_have_ended_rx: Mutex::new(Some(may_have_ended_rx)),
            server_started: Mutex::default(),
            stopping: Arc::new(AtomicBool::new(false)),
            shell_files,
            tmux_panes: TmuxPanes::default(),
            person_keys: Mutex::default(),
            waker: OnceLock::new(),
            pane_watcher: OnceLock::new(),
            isolation: Mutex::new(HashMap::new()),
            confiner: Mutex::new(Arc::new(Isolation::off())),
            data: data.to_path_buf(),
            helper: Mutex::new(helper),
        })
    }

    /// Starts reporting ends: `on_end(node_id, ended)` is called, on a thread of its own,
    /// once for every terminal whose program ends by itself from now on, and at once for
    /// those found ended now (e.g. a tmux pane that died while no host ran). The ends
    /// are recorded before `on_end` is called. Only the first call does anything.
    pub fn watch(
        self: &Arc<Self>,
        on_end: impl Fn(&str, &EndedTerminal) + Send + 'static,
    ) -> Result<(), HostError> {
        let Some(wakes) = lock(&self.may_have_ended_rx).take() else {
            return Ok(());
        };
        let cannot =
            |e: std::io::Error| HostError::Terminal(format!("cannot watch terminals: {e}"));
        if let Backend::Tmux(tmux) = &self.backend {
            let (started, starts) = mpsc::channel();
            *lock(&self.server_started) = Some(started.clone());
            let ended = self.wake_sender().ok_or(HostError::Stopped)?;
            // A server from an earlier host may be running already; with no socket none
            // is, and the watcher waits for the first open instead of starting a tmux
            // client that can only fail (at every first start in a data dir).
            if !tmux.socket_missing() {
                let _ = started.send(());
            }
            let (tmux, stopping) = (tmux.clone(), self.stopping.clone());
            std::thread::Builder::new()
                .name("tmux-pane-watch".into())
                .spawn(move || watch_tmux_panes(&tmux, &stopping, &starts, &ended))
                .map_err(cannot)?;
        }
        let terminals = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("terminal-ends".into())
            .spawn(move || report_ends(&terminals, &wakes, &on_end))
            .map_err(cannot)?;
        self.wake_watcher();
        Ok(())
    }

    /// Wakes `waker` (the server's, once it runs) when a terminal with a waiting call
    /// changes: a PTY shell's command starts or ends, output comes, the program ends.
    /// Only the first call counts. Without it, waits are checked every
    /// [`crate::server::TICK`].
    pub fn set_waker(&self, waker: Waker) {
        if let Backend::Tmux(_) = &self.backend {
            let _ = self
                .pane_watcher
                .set(shell_socket::PaneWatcher::new(waker.clone()));
        }
        let _ = self.waker.set(waker);
    }

    /// Records `ended` for node `node_id` (at host start, from the canvas), unless an end
    /// is recorded already.
    pub fn remember(&self, node_id: &str, ended: EndedTerminal) {
        lock(&self.ended)
            .entry(node_id.to_string())
            .or_insert(ended);
        self.forget_listing();
    }

    /// The recorded end of node `node_id`, if its program ended.
    pub fn recorded_end(&self, node_id: &str) -> Option<EndedTerminal> {
        lock(&self.ended).get(node_id).cloned()
    }

    /// Ends whose program ended and were not recorded yet: records and returns them.
    /// Also says whether a tmux pane is dead but its status not reported yet (look again).
    fn collect_ended(&self) -> (Vec<(String, EndedTerminal)>, bool) {
        let mut found = Vec::new();
        let mut look_again = false;
        match &self.backend {
            Backend::Tmux(tmux) => {
                let Ok(sessions) = tmux.sessions() else {
                    return (found, false);
                };
                let mut reap = false;
                let mut unreported = lock(&self.unreported);
                unreported.retain(|name, _| sessions.iter().any(|s| &s.name == name));
                for session in sessions.iter().filter(|s| s.pane_dead) {
                    if lock(&self.ended).contains_key(&session.name) {
                        continue;
                    }
                    let since = *unreported
                        .entry(session.name.clone())
                        .or_insert_with(Instant::now);
                    // tmux can report the pane dead before it has read the program's last
                    // output from the pane: give it a moment, so the last screen has it.
                    if since.elapsed() < OUTPUT_SETTLE {
                        look_again = true;
                        continue;
                    }
                    let end = match session.end {
                        Some(end) => end,
                        None if since.elapsed() >= STATUS_WAIT => ProgramEnd::Unknown,
                        None => {
                            look_again = true;
                            reap = reap || since.elapsed() >= REAP_AFTER;
                            continue;
                        }
                    };
                    unreported.remove(&session.name);
                    let screen = tmux
                        .capture(&session.name, MAX_CAPTURE_CHARS)
                        .map(|text| inert(&text))
                        .unwrap_or_default();
                    let ended_at = match session.ended_unix {
                        0 => unix_millis(),
                        seconds => seconds.saturating_mul(1000),
                    };
                    found.push((session.name.clone(), ended(end, ended_at, &screen)));
                }
                if reap {
                    let _ = tmux.reap_ended_programs(); // the next look sees the status
                }
            }
            Backend::Pty(pty) => {
                let ids = pty.ids();
                let mut unfinished = lock(&self.unreported);
                unfinished.retain(|id, _| ids.contains(id));
                for id in ids {
                    let Some(terminal) = pty.get(&id) else {
                        continue;
                    };
                    if terminal.live() || lock(&self.ended).contains_key(&id) {
                        continue;
                    }
                    // Its last output may still be on its way to the reader: wait for it,
                    // unless a background job keeps the terminal open.
                    let since = *unfinished.entry(id.clone()).or_insert_with(Instant::now);
                    if !terminal.output_done() && since.elapsed() < STATUS_WAIT {
                        look_again = true;
                        continue;
                    }
                    unfinished.remove(&id);
                    let end = terminal
                        .exit_status()
                        .map_or(ProgramEnd::Unknown, program_end);
                    let screen = terminal.read(MAX_CAPTURE_CHARS);
                    found.push((id, ended(end, unix_millis(), &screen)));
                }
            }
        }
        let mut recorded = lock(&self.ended);
        for (id, ended) in &found {
            recorded.insert(id.clone(), ended.clone());
        }
        drop(recorded);
        if !found.is_empty() {
            self.forget_listing();
        }
        (found, look_again)
    }

    /// A sender for "a program may have ended", while not shut down.
    fn wake_sender(&self) -> Option<Sender<()>> {
        lock(&self.may_have_ended).clone()
    }

    /// Makes the watcher look for ends now.
    fn wake_watcher(&self) {
        if let Some(sender) = self.wake_sender() {
            let _ = sender.send(());
        }
    }

    /// `"tmux"` or `"pty"`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Tmux(_) => "tmux",
            Backend::Pty(_) => "pty",
        }
    }

    /// Starts node `node_id`'s session in `cwd` with `env` added, `size` large: `command`
    /// through the user's shell (`$SHELL -c`), or the shell itself when `None`; confined
    /// as `confinement` says (its status is what listings show of it).
    pub fn start(
        &self,
        node_id: &str,
        cwd: &Path,
        env: &BTreeMap<String, String>,
        command: Option<&str>,
        size: WindowSize,
        confinement: &Confinement,
    ) -> Result<(), String> {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let started = self.start_confined(node_id, cwd, &env, command, size, confinement);
        if started.is_ok() {
            let status = confinement.status.clone();
            let shown = Arc::new(status.to_json());
            lock(&self.isolation).insert(node_id.to_string(), Some((status, shown)));
        }
        started
    }

    fn start_confined(
        &self,
        node_id: &str,
        cwd: &Path,
        env: &[(String, String)],
        command: Option<&str>,
        size: WindowSize,
        confinement: &Confinement,
    ) -> Result<(), String> {
        let env = env.to_vec();
        match &self.backend {
            Backend::Tmux(tmux) => {
                let opened = tmux.open_confined(
                    node_id,
                    cwd,
                    &env,
                    command,
                    (size.cols, size.rows),
                    confinement,
                );
                self.tmux_panes.forget(node_id);
                if opened.is_ok() {
                    self.lock_opened().insert(node_id.to_string());
                    if let Some(started) = lock(&self.server_started).as_ref() {
                        let _ = started.send(());
                    }
                }
                // After `opened` is updated, so no listing taken before it can be kept.
                self.forget_listing();
                opened.map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                // A plain shell gets integration; a command (an agent's) never does.
                let injection = match command {
                    None => self.shell_injection(&env),
                    Some(_) => None,
                };
                let mut confinement = confinement.clone();
                if let (Some((_, plan)), Some(injection)) = (&mut confinement.confine, &injection) {
                    plan.writable.push(injection.dir().to_path_buf());
                }
                let confine = match confinement.prefix() {
                    Some(words) => Some(
                        words
                            .into_iter()
                            .map(|word| word.into_string())
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|word| {
                                format!("cannot confine it: the path {word:?} is not UTF-8")
                            })?,
                    ),
                    None => None,
                };
                let options = TerminalOptions {
                    command: command.map(|c| vec![user_shell(), "-c".to_string(), c.to_string()]),
                    cwd: cwd.to_path_buf(),
                    env,
                    size,
                    confine,
                    confined_in_place: confinement.in_place(),
                };
                let on_exit = self.wake_sender().map(|sender| {
                    Box::new(move || {
                        let _ = sender.send(());
                    }) as crate::host::terminals::pty::OnExit
                });
                pty.open_with_shell(node_id, &options, on_exit, injection)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// The start-up files for the user's shell with integration, if it is one we know
    /// ([`shell::inject`]); `None` (a plain start) for another shell or when the files
    /// cannot be written.
    fn shell_injection(&self, env: &[(String, String)]) -> Option<shell::inject::Injection> {
        let program = user_shell();
        let kind = shell::inject::shell_kind(&program)?;
        let user_var = |name: &str| {
            let given = env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            given.or_else(|| std::env::var(name).ok())
        };
        match shell::inject::prepare(
            &program,
            kind,
            shell::inject::Start::Interactive,
            &self.shell_files,
            &user_var,
        ) {
            Ok(injection) => Some(injection),
            Err(error) => {
                eprintln!("termsprawl-tools: starting {program} without shell integration: cannot write its start-up files: {error}");
                None
            }
        }
    }

    /// The host is about to type `line` and Enter into node `node_id`'s terminal
    /// (`terminal_submit`): a POSIX `sh` at its prompt, which reports no command starts,
    /// gets one recorded now with that line. True if a command started. The other shells
    /// report their own starts, labelled `line` (see [`shell::ShellSession::start_typed`]).
    pub fn start_typed_command(&self, node_id: &str, line: &str) -> bool {
        match &self.backend {
            Backend::Pty(pty) => pty
                .get(node_id)
                .is_some_and(|terminal| terminal.start_typed_command(line)),
            Backend::Tmux(tmux) => tmux
                .pane_socket(node_id)
                .is_some_and(|socket| shell_socket::start_typed(&socket, line)),
        }
    }

    /// Whether node `node_id`'s shell nonce showed in its output (so its integration
    /// ended for good): `Some` for a terminal started with integration, `None` without.
    pub fn shell_integrity_lost(&self, node_id: &str) -> Option<bool> {
        match &self.backend {
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.integrity_lost()),
            Backend::Tmux(_) => self.pane_integration(node_id).map(|(_, lost)| lost),
        }
    }

    /// What node `node_id`'s pane filter says of its shell's integration, if one answers.
    fn pane_integration(&self, node_id: &str) -> Option<(ShellIntegration, bool)> {
        let Backend::Tmux(tmux) = &self.backend else {
            return None;
        };
        shell_socket::integration(&tmux.pane_socket(node_id)?)
    }

    /// Node `node_id`'s output history from position `from`, at most `limit` bytes (see
    /// [`history::History`]).
    fn history_from(&self, node_id: &str, from: u64, limit: usize) -> Option<history::History> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                output_log::history_from(&tmux.output_log(node_id)?, from, limit)
            }
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.history_from(from, limit)),
        }
    }

    /// Ends node `node_id`'s session and everything running in it (none is fine), and
    /// forgets its recorded end (and a tmux pane's output history).
    pub fn close(&self, node_id: &str) -> Result<(), String> {
        lock(&self.ended).remove(node_id);
        lock(&self.isolation).remove(node_id);
        lock(&self.commands_seen).remove(node_id);
        match &self.backend {
            Backend::Tmux(tmux) => {
                self.lock_opened().remove(node_id);
                self.tmux_panes.forget(node_id);
                let killed = tmux.kill(node_id);
                if let Some(log) = tmux.output_log(node_id) {
                    let _ = std::fs::remove_dir_all(log);
                }
                self.forget_listing();
                killed.map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                pty.close(node_id);
                Ok(())
            }
        }
    }

    /// Sets node `node_id`'s terminal to `size` (its program gets SIGWINCH). A terminal
    /// whose program ended keeps the size of its last screen; no session is no error.
    pub fn resize(&self, node_id: &str, size: WindowSize) -> Result<(), String> {
        if lock(&self.ended).contains_key(node_id) {
            return Ok(());
        }
        let resized = match &self.backend {
            Backend::Tmux(tmux) => tmux
                .resize(node_id, size.cols, size.rows)
                .map_err(|e| e.to_string()),
            Backend::Pty(pty) => match pty.get(node_id) {
                Some(terminal) => terminal.resize(size).map_err(|e| e.to_string()),
                None => Ok(()),
            },
        };
        // The screen changed with no output through a pane filter: the view looks again.
        self.forget_listing();
        resized
    }

    /// Confines agents' terminals started from now on with `isolation`.
    pub fn set_isolation(&self, isolation: Isolation) {
        *lock(&self.confiner) = Arc::new(isolation);
    }

    /// What agents' terminals are confined with.
    pub fn isolation_setup(&self) -> Arc<Isolation> {
        lock(&self.confiner).clone()
    }

    /// How node `node_id`'s terminal, started in `project`, is to be confined: an agent's
    /// (`agent`: launched, or opened by an agent's call) by the host's isolation, with
    /// `session_file` (its own, if it has one) and its launch folder shown; one the
    /// person opens is not confined. `Err` under `--isolation required` without a
    /// mechanism.
    pub fn confinement(
        &self,
        node_id: &str,
        project: &Path,
        agent: bool,
        session_file: Option<&Path>,
        worktree: Option<&Path>,
    ) -> Result<Confinement, String> {
        if !agent {
            return Ok(Confinement::none(
                "opened by the person: not confined (the person's own terminal)",
            ));
        }
        let launch = self.data.join("agent-tools").join("launch").join(node_id);
        let mut plan = Plan::for_agent(&self.data, project, session_file, Some(&launch));
        if let Some(worktree) = worktree {
            plan = plan.in_worktree(project, worktree);
        }
        let tmux = matches!(self.backend, Backend::Tmux(_));
        let helper = lock(&self.helper).clone();
        self.isolation_setup().for_agent(plan, tmux, helper)
    }

    /// Starts confined programs with `executable`'s `pane --take-terminal` (see
    /// [`pane_filter`]); the pane filter's executable, when given, is the default.
    pub fn set_helper(&self, executable: Option<PathBuf>) {
        *lock(&self.helper) = executable;
    }

    /// How node `node_id`'s terminal is confined: as it was started by this host, else (a
    /// tmux session from before) as the kernel shows its processes, found once; `None`
    /// when it has no live session (an agent that runs elsewhere), found once too: a
    /// terminal started later replaces it, one closed is forgotten.
    pub fn isolation_status(&self, node_id: &str) -> Option<Status> {
        self.isolation_known(node_id).map(|(status, _)| status)
    }

    /// [`Self::isolation_status`] with its JSON, made once.
    fn isolation_known(&self, node_id: &str) -> Option<KnownIsolation> {
        if let Some(known) = lock(&self.isolation).get(node_id) {
            return known.clone();
        }
        let found = match &self.backend {
            // A dead pane runs nothing: no status (and nothing to type into).
            Backend::Tmux(tmux) => tmux
                .session(node_id)
                .ok()
                .flatten()
                .filter(|s| !s.pane_dead)
                .map(|session| isolation::of_process_tree(session.pane_pid as libc::pid_t))
                .map(|status| {
                    let shown = Arc::new(status.to_json());
                    (status, shown)
                }),
            Backend::Pty(_) => return None,
        };
        lock(&self.isolation).insert(node_id.to_string(), found.clone());
        found
    }

    /// Whether node `node_id` has a session (running or not yet reaped).
    pub fn has_session(&self, node_id: &str) -> bool {
        match &self.backend {
            Backend::Tmux(tmux) => tmux.session(node_id).ok().flatten().is_some(),
            Backend::Pty(pty) => pty.get(node_id).is_some(),
        }
    }

    /// The states of tmux `sessions` (with the recorded ends of terminals without one).
    fn tmux_states(&self, sessions: Vec<SessionInfo>) -> HashMap<String, SessionState> {
        let started = self
            .started_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        // Asked before any lock is taken: one round trip to each live pane's filter.
        let mut shells: HashMap<String, ShellStatus> = sessions
            .iter()
            .filter(|s| !s.pane_dead)
            .filter_map(|s| {
                let Backend::Tmux(tmux) = &self.backend else {
                    return None;
                };
                let mut status = shell_socket::status(&tmux.pane_socket(&s.name)?)?;
                if let Some(record) = status.last.as_mut() {
                    let reading = matches!(
                        record.state,
                        CommandState::Running | CommandState::AwaitingInput
                    );
                    if reading && s.alternate_on {
                        record.state = CommandState::Fullscreen;
                    }
                }
                Some((s.name.clone(), status))
            })
            .collect();
        let opened = self.lock_opened();
        let recorded = lock(&self.ended);
        let mut states: HashMap<String, SessionState> = sessions
            .into_iter()
            .map(|s| {
                let warm = !opened.contains(&s.name) && s.created_unix <= started;
                // Only a recorded end, so that `ended` (the trait) agrees: a pane that
                // died a moment ago is `live: false` until recorded.
                let ended = recorded.get(&s.name).map(|e| (e.end, e.ended_at));
                let live = !s.pane_dead && ended.is_none();
                let isolation = live.then(|| {
                    lock(&self.isolation)
                        .get(&s.name)
                        .cloned()
                        .flatten()
                        .map(|(status, _)| status)
                        .unwrap_or_else(|| isolation::of_process_tree(s.pane_pid as libc::pid_t))
                });
                let state = SessionState {
                    live,
                    warm,
                    ended,
                    shell: shells.remove(&s.name).filter(|_| live),
                    isolation,
                };
                (s.name, state)
            })
            .collect();
        add_recorded(&mut states, &recorded);
        states
    }

    /// [`HostTerminals::states`] (taken now) and the [`HostTerminals::screen`] of each of
    /// `visible`: what the canvas view reads, in one tmux call for all of them.
    ///
    /// Under the pane filter, every byte a pane's program prints passes through the
    /// filter process, the pane's own program (`pane_pid`), so the bytes it has written
    /// (`wchar` in `/proc/PID/io`) say whether the screen can have changed. The last look
    /// is reused, with no tmux call, while the same nodes are in view, this host has
    /// changed and recorded nothing, no filter in view has written since that look or the
    /// look before it (tmux may still have been drawing the last output when the earlier
    /// one was taken), and it is less than `VIEW_LOOK_REUSE` (5 s) old. A pane not under the
    /// filter (one started before it was turned on) is looked at every time.
    pub fn states_and_screens(
        &self,
        visible: &[&str],
    ) -> (HashMap<String, SessionState>, HashMap<String, ViewScreen>) {
        let Backend::Tmux(tmux) = &self.backend else {
            let screens = visible
                .iter()
                .filter_map(|id| Some((id.to_string(), self.pty_view_screen(id)?)))
                .collect();
            return (self.states(), screens);
        };
        let filter_name = tmux.pane_filter_name();
        let mut last_look = crate::base::lock_or_recover(&self.view_look);
        let changes = self.changes.load(Ordering::SeqCst);
        if let Some(look) = last_look.as_ref() {
            if look.still_current(visible, changes) {
                return (look.states.clone(), look.screens.clone());
            }
        }
        let earlier = last_look.take();
        let mut listing = crate::base::lock_or_recover(&self.listing);
        // Ask only for sessions the last listing had (a missing one costs a call each).
        let listed: Vec<&str> = match listing.as_ref() {
            Some((_, states)) => visible
                .iter()
                .copied()
                .filter(|id| states.contains_key(*id))
                .collect(),
            None => visible.to_vec(),
        };
        let taken = Instant::now();
        let Ok((sessions, captured)) = tmux.sessions_and_screens(&listed) else {
            *listing = None;
            return (HashMap::new(), HashMap::new());
        };
        let panes: Vec<Pane> = visible
            .iter()
            .map(|id| match sessions.iter().find(|s| s.name == *id) {
                None => Pane::None,
                Some(s) if s.pane_dead => Pane::Dead,
                Some(s) => match filter_name.as_deref() {
                    Some(name) if process_name(s.pane_pid).as_deref() == Some(name) => {
                        bytes_written(s.pane_pid)
                            .map_or(Pane::Unknown, |n| Pane::Filter(s.pane_pid, n))
                    }
                    _ => Pane::Unknown,
                },
            })
            .collect();
        let cursors: HashMap<String, Option<(usize, usize)>> = (sessions.iter())
            .map(|s| (s.name.clone(), s.cursor))
            .collect();
        let states = self.tmux_states(sessions);
        *listing = Some((taken, states.clone()));
        drop(listing);
        let screens: HashMap<String, ViewScreen> = visible
            .iter()
            .filter_map(|id| {
                // SGR escapes stay for the view, which parses them and drops the rest.
                let text = captured.get(*id).cloned();
                let cursor = cursors.get(*id).copied().flatten();
                Some((id.to_string(), self.view_screen(id, text, cursor)?))
            })
            .collect();
        *last_look = Some(ViewLook::new(
            earlier, taken, changes, visible, panes, &states, &screens,
        ));
        (states, screens)
    }

    /// Every session, by node id. The tmux backend answers from one `tmux list-sessions`
    /// at most `LISTING_TTL` (250 ms) old, taken after this host's last start, close or adopt.
    pub fn states(&self) -> HashMap<String, SessionState> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let mut listing = crate::base::lock_or_recover(&self.listing);
                if let Some((taken, states)) = listing.as_ref() {
                    if taken.elapsed() < LISTING_TTL {
                        return states.clone();
                    }
                }
                let taken = Instant::now();
                let Ok(sessions) = tmux.sessions() else {
                    // A failed listing is not kept: the next call asks again.
                    *listing = None;
                    return HashMap::new();
                };
                let states = self.tmux_states(sessions);
                *listing = Some((taken, states.clone()));
                states
            }
            Backend::Pty(pty) => {
                let recorded = lock(&self.ended);
                let mut states: HashMap<String, SessionState> = pty
                    .ids()
                    .into_iter()
                    .filter_map(|id| {
                        let terminal = pty.get(&id)?;
                        let live = terminal.live();
                        // Only a recorded end, as on tmux: the watcher records it once
                        // the last output is in, so `terminal_read` agrees.
                        let ended = recorded.get(&id).map(|e| (e.end, e.ended_at));
                        if !live && ended.is_none() {
                            self.wake_watcher();
                        }
                        let isolation = live.then(|| self.isolation_status(&id)).flatten();
                        let state = SessionState {
                            live,
                            warm: false,
                            ended: ended.filter(|_| !live),
                            shell: terminal.shell_status().filter(|_| live),
                            isolation,
                        };
                        Some((id, state))
                    })
                    .collect();
                add_recorded(&mut states, &recorded);
                states
            }
        }
    }

    /// At host start: ends every session for which `keep(node_id)` is false and returns
    /// the node ids kept. The PTY backend has no sessions from before.
    pub fn adopt(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<String>, String> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let adopted = tmux.adopt(keep);
                self.forget_listing();
                let kept: Vec<String> = adopted
                    .map(|kept| kept.into_iter().map(|s| s.name).collect())
                    .map_err(|e| e.to_string())?;
                if let Some(panes) = tmux.panes() {
                    output_log::remove_stale(&panes, &|node| kept.iter().any(|k| k == node));
                }
                Ok(kept)
            }
            Backend::Pty(_) => Ok(Vec::new()),
        }
    }

    /// At host shutdown: PTY terminals are always ended; tmux sessions keep running
    /// unless `kill_tmux` (`--kill-terminals`).
    pub fn shutdown(&self, kill_tmux: bool) {
        // No more reports: ends from here on are ours (closing PTYs, killing tmux).
        self.stopping.store(true, Ordering::SeqCst);
        lock(&self.may_have_ended).take();
        lock(&self.server_started).take();
        if let Backend::Tmux(tmux) = &self.backend {
            // Ends the pane watcher's `wait-for` (no server running: nobody waits, and
            // with no socket the watcher is waiting for `server_started`, gone now).
            if !tmux.socket_missing() {
                let _ = tmux.wake_pane_watcher();
            }
        }
        match &self.backend {
            Backend::Tmux(tmux) if kill_tmux => {
                let killed = tmux.kill_server();
                self.forget_listing();
                if let Err(error) = killed {
                    eprintln!("termsprawl-tools: could not stop the tmux server: {error}");
                }
            }
            Backend::Tmux(_) => {}
            Backend::Pty(pty) => pty.close_all(),
        }
    }

    /// `externalTerminal.command` from preferences.json; a malformed value names the file.
    fn external_command(&self) -> Result<Option<Vec<String>>, String> {
        let malformed = |why: &str| {
            format!(
                "Malformed preferences file {}: {why}",
                self.preferences.display()
            )
        };
        let value = match crate::base::files::read_json(&self.preferences) {
            Ok(Some(value)) => value,
            Ok(None) => return Ok(None),
            Err(error) => return Err(malformed(&error.to_string())),
        };
        let Some(command) = value.get("externalTerminal").and_then(|e| e.get("command")) else {
            return Ok(None);
        };
        let argv: Option<Vec<String>> = command.as_array().and_then(|items| {
            items
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect()
        });
        match argv {
            Some(argv) if !argv.is_empty() => Ok(Some(argv)),
            _ => Err(malformed(
                "externalTerminal.command must be a non-empty array of strings, e.g. [\"xterm\", \"-e\", \"{attach}\"]",
            )),
        }
    }

    /// The terminal's current screen only (tmux: the visible pane, one tmux call instead of
    /// `capture`'s two and its history), followed by an ended program's end line: what the
    /// canvas view shows.
    pub fn screen(&self, node_id: &str) -> Option<String> {
        self.read_screen(node_id, true)
    }

    /// `capture` (`visible_only` false: with the history a read may need) or `screen`.
    fn read_screen(&self, node_id: &str, visible_only: bool) -> Option<String> {
        let screen = match &self.backend {
            Backend::Tmux(tmux) => match visible_only {
                true => tmux.capture_screen(node_id),
                false => tmux.capture(node_id, MAX_CAPTURE_CHARS),
            }
            .ok()
            .map(|text| inert(&text)),
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.read(MAX_CAPTURE_CHARS)),
        };
        self.with_end_line(node_id, screen)
    }

    /// A PTY terminal's [`ViewScreen`], from its screen model.
    fn pty_view_screen(&self, node_id: &str) -> Option<ViewScreen> {
        let Backend::Pty(pty) = &self.backend else {
            return None;
        };
        let (text, cursor) = pty.get(node_id).map(|t| t.rows_and_cursor()).unzip();
        self.view_screen(node_id, text, cursor.flatten())
    }

    /// A [`ViewScreen`]; an ended terminal's has its end line and no cursor.
    fn view_screen(
        &self,
        node_id: &str,
        text: Option<String>,
        cursor: Option<(usize, usize)>,
    ) -> Option<ViewScreen> {
        let ended = self.recorded_end(node_id).is_some();
        let text = self.with_end_line(node_id, text)?;
        let cursor = if ended { None } else { cursor };
        Some(ViewScreen { text, cursor })
    }

    /// `screen`, for an ended terminal its last screen when it has none, followed by the
    /// line saying how it ended.
    fn with_end_line(&self, node_id: &str, screen: Option<String>) -> Option<String> {
        let Some(ended) = self.recorded_end(node_id) else {
            return screen;
        };
        let screen = screen.unwrap_or(ended.last_screen);
        let line = ended.end.screen_line();
        Some(if screen.is_empty() {
            line
        } else {
            format!("{screen}\n{line}")
        })
    }

    /// Drops the cached tmux listing (after this host changed the sessions).
    fn forget_listing(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        *crate::base::lock_or_recover(&self.listing) = None;
    }

    /// A command record just read that is newer than the last one read for `node_id`
    /// (a later command, or the same one in another state) counts as a change: the next
    /// listing asks again (tmux) and no `canvas_list` answer made before is reused, so an
    /// agent that was just answered `exited` never lists the command as running.
    fn command_seen(&self, node_id: &str, record: &CommandRecord) {
        let newer = {
            let mut seen = lock(&self.commands_seen);
            let now = (record.id, record.state);
            match seen.get(node_id) {
                Some(&(id, state))
                    if record.id < id || (record.id, record.state) == (id, state) =>
                {
                    false
                }
                _ => {
                    seen.insert(node_id.to_string(), now);
                    true
                }
            }
        };
        if newer {
            self.forget_listing();
        }
    }

    /// Counts what this host changed or saw change in its terminals: sessions started,
    /// closed or adopted, text written, command records that moved on. A `canvas_list`
    /// answer is reused only while it stays the same.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    fn lock_opened(&self) -> MutexGuard<'_, HashSet<String>> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        crate::base::lock_or_recover(&self.opened)
    }
}

impl HostTerminals {
    /// Types the person's keys into terminal `node_id` (the canvas view), through the
    /// same input path as an agent's `terminal_input`, and marks the terminal as being
    /// typed in for [`PERSON_TYPING_WINDOW`].
    pub fn person_typed(&self, node_id: &str, text: &str) -> Result<(), String> {
        self.person_typed_with(node_id, |terminals| terminals.write(node_id, text))
    }

    /// Marks the person as typing in `node_id`, then does `write` if it has a live session.
    fn person_typed_with(
        &self,
        node_id: &str,
        write: impl FnOnce(&HostTerminals) -> Result<(), String>,
    ) -> Result<(), String> {
        {
            let mut keys = lock(&self.person_keys);
            keys.retain(|_, at| at.elapsed() < PERSON_TYPING_WINDOW);
            keys.insert(node_id.to_string(), Instant::now());
        }
        if !self.has_live_session(node_id) {
            return Err(match self.ended(node_id) {
                Some(end) => format!("This terminal's program has ended ({})", end.describe()),
                None => "This terminal has no running session".to_string(),
            });
        }
        write(self)
    }
}

impl HostTerminals {
    /// The person's paste from the canvas view (see `view/keys.rs` for what `text` may
    /// hold: no control character but newline and tab, so it cannot end a bracket early).
    /// It arrives as a terminal delivers a paste: each newline a carriage return, and
    /// bracketed (`ESC [ 200 ~` … `ESC [ 201 ~`) when the program asked for it.
    pub fn person_pasted(&self, node_id: &str, text: &str) -> Result<(), String> {
        let text = pasteable(text);
        self.person_typed_with(node_id, |terminals| match &terminals.backend {
            Backend::Tmux(tmux) => {
                terminals.tmux_panes.typed(node_id);
                tmux.paste(node_id, &text).map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                let terminal = pty.get(node_id).ok_or("Terminal is not attached")?;
                let lines = text.replace('\n', "\r");
                let pasted = match terminal.bracketed_paste() {
                    true => format!("\u{1b}[200~{lines}\u{1b}[201~"),
                    false => lines,
                };
                terminal.write(pasted.as_bytes()).map_err(|e| e.to_string())
            }
        })
    }
}

impl Terminals for HostTerminals {
    fn isolation(&self, node_id: &str) -> Option<Arc<Value>> {
        self.isolation_known(node_id).map(|(_, shown)| shown)
    }

    fn person_typing(&self, node_id: &str) -> bool {
        lock(&self.person_keys)
            .get(node_id)
            .is_some_and(|at| at.elapsed() < PERSON_TYPING_WINDOW)
    }

    fn is_warm(&self, node_id: &str) -> bool {
        self.has_session(node_id)
    }

    fn has_ready_session(&self, node_id: &str) -> bool {
        match &self.backend {
            Backend::Tmux(tmux) => tmux.has_ready_session(node_id).unwrap_or(false),
            Backend::Pty(pty) => pty.get(node_id).is_some_and(|t| t.ready() && t.live()),
        }
    }

    fn has_live_session(&self, node_id: &str) -> bool {
        match &self.backend {
            // One tmux answer serves a waiting call's whole look (see `TmuxPanes`); an end
            // recorded since counts at once.
            Backend::Tmux(tmux) => {
                self.recorded_end(node_id).is_none() && self.tmux_panes.live(tmux, node_id)
            }
            Backend::Pty(pty) => pty.get(node_id).is_some_and(|t| t.live()),
        }
    }

    /// Labels the next command `command` first, or marks its start where the shell
    /// reports none (POSIX `sh`).
    fn submit(&self, node_id: &str, command: &str, typed: &str) -> Result<(), String> {
        self.start_typed_command(node_id, command);
        self.write(node_id, &format!("{typed}\r"))
    }

    fn write(&self, node_id: &str, text: &str) -> Result<(), String> {
        self.changes.fetch_add(1, Ordering::SeqCst);
        match &self.backend {
            Backend::Tmux(tmux) => {
                self.tmux_panes.typed(node_id);
                let result = if text == "\u{3}" {
                    tmux.interrupt(node_id)
                } else {
                    // Each carriage return is an Enter key press; the rest is typed literally.
                    let mut parts = text.split('\r').peekable();
                    let mut outcome = Ok(());
                    while let Some(part) = parts.next() {
                        outcome = if parts.peek().is_some() {
                            tmux.submit(node_id, part)
                        } else {
                            tmux.send_literal(node_id, part)
                        };
                        if outcome.is_err() {
                            break;
                        }
                    }
                    outcome
                };
                result.map_err(|e| e.to_string())
            }
            Backend::Pty(pty) => {
                let terminal = pty.get(node_id).ok_or("Terminal is not attached")?;
                let result = if text == "\u{3}" {
                    terminal.interrupt()
                } else {
                    terminal.write(text.as_bytes())
                };
                result.map_err(|e| e.to_string())
            }
        }
    }

    /// The screen (see the module docs); for an ended terminal its last screen (from its
    /// session while it has one, else the kept lines) and a line saying how it ended.
    fn capture(&self, node_id: &str) -> Option<String> {
        self.read_screen(node_id, false)
    }

    /// The recorded end. Never starts a process: the server asks this on its accept
    /// thread (`may_connect`). An end counts once the watcher has recorded it (with the
    /// program's last output), which `canvas_list` and `terminal_read` also wait for.
    fn ended(&self, node_id: &str) -> Option<ProgramEnd> {
        self.recorded_end(node_id).map(|ended| ended.end)
    }

    /// tmux: what the pane filter says (`shell_socket`); none without a filter.
    fn integration(&self, node_id: &str) -> ShellIntegration {
        match &self.backend {
            Backend::Tmux(_) => self
                .pane_integration(node_id)
                .map_or(ShellIntegration::None, |(integration, _)| integration),
            Backend::Pty(pty) => pty
                .get(node_id)
                .map_or(ShellIntegration::None, |t| t.integration()),
        }
    }

    /// tmux: the pane filter's record, its state refined with what tmux shows (a
    /// full-screen program, a dead pane).
    fn command(&self, node_id: &str, id: Option<u64>) -> Option<CommandRecord> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let mut record = shell_socket::command(&tmux.pane_socket(node_id)?, id)?;
                // A full-screen program reads the terminal too: the screen says which.
                if matches!(
                    record.state,
                    CommandState::Running | CommandState::AwaitingInput
                ) {
                    match self.tmux_panes.foreground(tmux, node_id) {
                        Some(Foreground::Fullscreen) => record.state = CommandState::Fullscreen,
                        Some(Foreground::Ended) => record.state = CommandState::Ended,
                        // Reading the terminal, but not yet for long enough that tmux's
                        // alternate-screen flag was asked since: it may be `less` starting.
                        Some(Foreground::Running)
                            if record.state == CommandState::AwaitingInput =>
                        {
                            record.state = CommandState::Running
                        }
                        _ => {}
                    }
                }
                self.command_seen(node_id, &record);
                Some(record)
            }
            Backend::Pty(pty) => {
                let record = pty.get(node_id)?.command(id)?;
                self.command_seen(node_id, &record);
                Some(record)
            }
        }
    }

    /// tmux: full-screen and ended from tmux; the rest from the pane filter's view of
    /// the kernel when it answers, else from `/proc` and tmux (`tmux_panes`).
    fn foreground(&self, node_id: &str) -> Option<Foreground> {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let seen = self.tmux_panes.foreground(tmux, node_id);
                if matches!(
                    seen,
                    Some(Foreground::Fullscreen | Foreground::Ended) | None
                ) {
                    return seen;
                }
                let filter = tmux
                    .pane_socket(node_id)
                    .and_then(|socket| shell_socket::foreground(&socket));
                match (filter, seen) {
                    // Reading the terminal, but not yet for long enough that tmux's
                    // alternate-screen flag was asked since: it may be `less` starting.
                    (Some(Foreground::AwaitingInput), Some(Foreground::Running)) => seen,
                    (filter, seen) => filter.or(seen),
                }
            }
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.foreground()),
        }
    }

    fn output_cursor(&self, node_id: &str) -> Option<u64> {
        match &self.backend {
            Backend::Tmux(tmux) => output_log::end(&tmux.output_log(node_id)?),
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.output_mark().position),
        }
    }

    fn output_after(&self, node_id: &str, since: u64, max_chars: usize) -> Option<OutputAfter> {
        let limit = history::bytes_to_read(max_chars);
        let mut after = self
            .history_from(node_id, since, limit)?
            .after(since, max_chars);
        after.fullscreen = match &self.backend {
            Backend::Tmux(tmux) => self.tmux_panes.fullscreen(tmux, node_id),
            Backend::Pty(pty) => pty.get(node_id).is_some_and(|t| t.fullscreen()),
        };
        Some(after)
    }

    fn search_output(&self, node_id: &str, needle: &str, max_matches: usize) -> Option<LinesFound> {
        Some(
            self.history_from(node_id, 0, usize::MAX)?
                .search(needle, max_matches),
        )
    }

    /// tmux: asked now (a program that just started may have just set it).
    fn application_cursor(&self, node_id: &str) -> bool {
        match &self.backend {
            Backend::Tmux(tmux) => tmux
                .pane_info(node_id)
                .is_ok_and(|pane| pane.application_cursor),
            Backend::Pty(pty) => pty.get(node_id).is_some_and(|t| t.application_cursor()),
        }
    }

    fn reading(&self, node_id: &str) -> Option<bool> {
        match &self.backend {
            Backend::Tmux(tmux) => self.tmux_panes.reading(tmux, node_id),
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.reading()),
        }
    }

    /// tmux: positions are lines (`tmux_panes`).
    fn output_mark(&self, node_id: &str) -> Option<OutputMark> {
        match &self.backend {
            Backend::Tmux(tmux) => self.tmux_panes.output_mark(tmux, node_id),
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.output_mark()),
        }
    }

    fn output_since(&self, node_id: &str, position: u64) -> Option<(CommandOutput, OutputMark)> {
        match &self.backend {
            Backend::Tmux(tmux) => self.tmux_panes.output_since(tmux, node_id, position),
            Backend::Pty(pty) => pty.get(node_id).map(|t| t.output_since(position)),
        }
    }

    /// PTY terminals wake the waiter themselves (see [`crate::host::terminals::pty::Terminal::watch`]);
    /// tmux panes through their filters (`shell_socket::PaneWatcher`), those with one.
    fn watch(&self, node_id: &str, waiting: bool) {
        match &self.backend {
            Backend::Tmux(tmux) => {
                let socket = tmux.pane_socket(node_id);
                if let (Some(watcher), Some(socket)) = (self.pane_watcher.get(), socket) {
                    watcher.watch(node_id, &socket, waiting);
                }
            }
            Backend::Pty(pty) => {
                if let (Some(waker), Some(terminal)) = (self.waker.get(), pty.get(node_id)) {
                    terminal.watch(waker, waiting);
                }
            }
        }
    }

    fn scrollback(&self, _node_id: &str) -> Option<String> {
        // Raw scrollback holds the program's escape sequences; agents only get `capture`.
        None
    }

    fn attach_external(&self, node_id: &str) -> Result<Value, String> {
        let Backend::Tmux(tmux) = &self.backend else {
            return Err(EXTERNAL_NEEDS_TMUX.to_string());
        };
        let configured = self.external_command()?;
        let program = tmux
            .external(node_id, configured.as_deref())
            .map_err(|e| e.to_string())?;
        Ok(json!({
            "nodeId": node_id,
            "program": program,
            "message": "Opened a second view of this terminal in a window; closing that window only detaches",
        }))
    }
}

use crate::base::lock_or_recover as lock;

/// States for recorded ends whose session is gone (tmux server ended, PTYs of an
/// earlier host).
fn add_recorded(
    states: &mut HashMap<String, SessionState>,
    recorded: &HashMap<String, EndedTerminal>,
) {
    for (id, ended) in recorded {
        states.entry(id.clone()).or_insert(SessionState {
            live: false,
            warm: false,
            ended: Some((ended.end, ended.ended_at)),
            shell: None,
            isolation: None,
        });
    }
}

/// An [`EndedTerminal`] keeping the last [`KEPT_SCREEN_LINES`] lines of `screen`.
fn ended(end: ProgramEnd, ended_at: u64, screen: &str) -> EndedTerminal {
    EndedTerminal {
        end,
        ended_at,
        last_screen: last_lines(screen, KEPT_SCREEN_LINES).to_string(),
    }
}

/// A reaped child's status as a [`ProgramEnd`].
fn program_end(status: std::process::ExitStatus) -> ProgramEnd {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ProgramEnd::Status(code),
        (None, Some(signal)) => ProgramEnd::Signal(signal),
        (None, None) => ProgramEnd::Unknown,
    }
}

/// The last `count` lines of `text`.
fn last_lines(text: &str, count: usize) -> &str {
    if count == 0 {
        return "";
    }
    match text.rmatch_indices('\n').nth(count - 1) {
        Some((newline, _)) => &text[newline + 1..],
        None => text,
    }
}

/// How often the watcher looks for ends it was not woken for (see `report_ends`).
const MISSED_WAKE_POLL: Duration = Duration::from_secs(1);

/// The watcher thread: on every wake-up, records the new ends and reports them; while a
/// dead pane's status is not reported yet, looks again every [`STATUS_POLL`], and
/// otherwise every [`MISSED_WAKE_POLL`]. Ends when
/// every sender is gone (shutdown) or the terminals are dropped.
fn report_ends(
    terminals: &Weak<HostTerminals>,
    wakes: &Receiver<()>,
    on_end: &dyn Fn(&str, &EndedTerminal),
) {
    let mut look_again = false;
    loop {
        // Without a wake-up it still looks now and then: a pane that died before the
        // pane watcher was waiting on tmux again must not go unrecorded for good.
        let wait = if look_again {
            STATUS_POLL
        } else {
            MISSED_WAKE_POLL
        };
        let woken = !matches!(
            wakes.recv_timeout(wait),
            Err(mpsc::RecvTimeoutError::Disconnected)
        );
        let Some(terminals) = terminals.upgrade().filter(|_| woken) else {
            return;
        };
        while wakes.try_recv().is_ok() {} // one look covers every wake-up so far
        let (found, again) = terminals.collect_ended();
        look_again = again;
        drop(terminals);
        for (node_id, ended) in &found {
            on_end(node_id, ended);
        }
    }
}

/// The tmux pane watcher: waits for a server to run (one `watch` found running, or the
/// one an open started), then for the `pane-died` hook while it runs; each pane death
/// wakes `ended`. Ends when `server_started`'s senders are gone (shutdown).
fn watch_tmux_panes(
    tmux: &TmuxServer,
    stopping: &AtomicBool,
    server_started: &Receiver<()>,
    ended: &Sender<()>,
) {
    while server_started.recv().is_ok() && !stopping.load(Ordering::SeqCst) {
        while server_started.try_recv().is_ok() {}
        // Until no server answers: then nothing can end before the next open.
        while tmux.wait_for_pane_death().is_ok() {
            if stopping.load(Ordering::SeqCst) || ended.send(()).is_err() {
                return;
            }
        }
    }
}

/// The user's `$SHELL`, else `/bin/sh`.
fn user_shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| FALLBACK_SHELL.to_string())
}

/// `text` without control characters other than newline and tab.
/// A paste's text without control characters but newline and tab: no escape sequence,
/// so no `ESC [ 201 ~` that would end a bracketed paste early.
fn pasteable(text: &str) -> String {
    text.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

fn inert(text: &str) -> String {
    text.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::CommandState;

    #[test]
    fn modes_parse() {
        assert_eq!("auto".parse(), Ok(TerminalsMode::Auto));
        assert_eq!("tmux".parse(), Ok(TerminalsMode::Tmux));
        assert_eq!("pty".parse(), Ok(TerminalsMode::Pty));
        assert!("screen"
            .parse::<TerminalsMode>()
            .unwrap_err()
            .contains("auto, tmux or pty"));
    }

    #[test]
    fn pastes_cannot_end_a_bracket_early() {
        assert_eq!(
            pasteable("a\u{1b}[201~rm -rf x\r\n\tb\u{9b}201~\u{7}"),
            "a[201~rm -rf x\n\tb201~"
        );
    }

    #[test]
    fn captures_are_made_inert() {
        assert_eq!(inert("a\u{1b}[31mb\r\n\tc\u{7}\u{9b}d"), "a[31mb\n\tcd");
    }

    #[test]
    fn pty_backend_has_no_external_view_and_no_warm_sessions() {
        let data = std::env::temp_dir().join(format!("host-terminals-{}", std::process::id()));
        let terminals = HostTerminals::new(TerminalsMode::Pty, &data).unwrap();
        assert_eq!(terminals.backend_name(), "pty");
        assert_eq!(
            terminals.attach_external("n1").unwrap_err(),
            EXTERNAL_NEEDS_TMUX
        );
        let cwd = std::env::temp_dir();
        terminals
            .start(
                "n1",
                &cwd,
                &BTreeMap::new(),
                Some("sleep 5"),
                WindowSize::default(),
                &Confinement::none("test"),
            )
            .unwrap();
        assert!(terminals.is_warm("n1") && terminals.has_live_session("n1"));
        assert_eq!(
            terminals.states().get("n1"),
            Some(&SessionState {
                live: true,
                warm: false,
                ended: None,
                shell: None,
                isolation: Some(Status::none("test")),
            })
        );
        assert_eq!(terminals.adopt(&|_| false).unwrap(), Vec::<String>::new());
        terminals.close("n1").unwrap();
        assert!(!terminals.has_session("n1"));
        terminals.shutdown(false);
    }

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_utc(1_796_156_691_000), "2026-12-01T20:24:51.000Z");
        assert_eq!(rfc3339_utc(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn only_the_last_lines_are_kept() {
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(last_lines("a\nb\nc", 3), "a\nb\nc");
        assert_eq!(last_lines("a\nb\nc", 9), "a\nb\nc");
        assert_eq!(last_lines("a\nb", 0), "");
        let long: String = (0..500).map(|i| format!("line {i}\n")).collect();
        let kept = ended(ProgramEnd::Status(0), 1, long.trim_end()).last_screen;
        assert_eq!(kept.lines().count(), KEPT_SCREEN_LINES);
        assert!(kept.starts_with("line 300\n") && kept.ends_with("line 499"));
    }

    #[test]
    fn ended_terminals_round_trip_through_json_and_bad_shapes_are_refused() {
        for end in [
            ProgramEnd::Status(3),
            ProgramEnd::Signal(9),
            ProgramEnd::Unknown,
        ] {
            let record = ended(end, 1_700_000_000_000, "last\nscreen");
            assert_eq!(EndedTerminal::from_json(&record.to_json()), Some(record));
        }
        assert_eq!(ProgramEnd::Status(3).to_json(), json!({"status": 3}));
        assert_eq!(ProgramEnd::Signal(9).to_json(), json!({"signal": 9}));
        let edited = json!({"ended": {"status": 1}, "endedAt": 5, "lastScreen": "a\u{1b}[31mb"});
        assert_eq!(
            EndedTerminal::from_json(&edited).unwrap().last_screen,
            "a[31mb"
        );
        for bad in [
            json!({"ended": {"status": 1, "signal": 2}, "endedAt": 5, "lastScreen": ""}),
            json!({"ended": {"status": "1"}, "endedAt": 5, "lastScreen": ""}),
            json!({"ended": {"status": 1}, "endedAt": -5, "lastScreen": ""}),
            json!({"ended": {"status": 1}, "endedAt": 5}),
            json!("ended"),
        ] {
            assert_eq!(EndedTerminal::from_json(&bad), None, "{bad}");
        }
    }

    #[test]
    fn a_pty_program_that_ends_is_reported_once_and_read_with_its_end() {
        let data = std::env::temp_dir().join(format!("host-terminals-end-{}", std::process::id()));
        let terminals = Arc::new(HostTerminals::new(TerminalsMode::Pty, &data).unwrap());
        let (reported, reports) = mpsc::channel();
        terminals
            .watch(move |id, ended| reported.send((id.to_string(), ended.clone())).unwrap())
            .unwrap();
        let cwd = std::env::temp_dir();
        let env = BTreeMap::new();
        terminals
            .start(
                "ends",
                &cwd,
                &env,
                Some("echo bye; exit 7"),
                WindowSize::default(),
                &Confinement::none("test"),
            )
            .unwrap();
        terminals
            .start(
                "closed",
                &cwd,
                &env,
                Some("sleep 30"),
                WindowSize::default(),
                &Confinement::none("test"),
            )
            .unwrap();
        let (id, report) = reports.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!((id.as_str(), report.end), ("ends", ProgramEnd::Status(7)));
        assert_eq!(report.last_screen, "bye");
        assert_eq!(
            terminals.capture("ends").unwrap(),
            "bye\n[process exited with status 7]"
        );
        assert_eq!(terminals.ended("ends"), Some(ProgramEnd::Status(7)));
        let state = terminals.states()["ends"].clone();
        assert_eq!(state.ended, Some((ProgramEnd::Status(7), report.ended_at)));
        assert!(!state.live);
        // Closing is not an end of its own: nothing is reported for "closed".
        terminals.close("closed").unwrap();
        terminals.close("ends").unwrap();
        assert_eq!(terminals.ended("ends"), None);
        assert!(reports.recv_timeout(Duration::from_millis(300)).is_err());
        // Remembered from a canvas after a restart: read from the kept screen.
        terminals.remember("earlier", ended(ProgramEnd::Signal(9), 5, "kept"));
        assert_eq!(
            terminals.capture("earlier").unwrap(),
            "kept\n[process killed by signal 9]"
        );
        assert_eq!(
            terminals.states()["earlier"].ended,
            Some((ProgramEnd::Signal(9), 5))
        );
        terminals.shutdown(false);
    }

    #[test]
    fn a_plain_pty_shell_gets_integration_and_a_command_never_does() {
        let data =
            std::env::temp_dir().join(format!("host-terminals-shell-{}", std::process::id()));
        let home = data.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".zshrc"), "").unwrap();
        let terminals = HostTerminals::new(TerminalsMode::Pty, &data).unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.display().to_string())]);
        terminals
            .start(
                "agent",
                &home,
                &env,
                Some("sleep 30"),
                WindowSize::default(),
                &Confinement::none("test"),
            )
            .unwrap();
        terminals
            .start(
                "shell",
                &home,
                &env,
                None,
                WindowSize::default(),
                &Confinement::none("test"),
            )
            .unwrap();
        assert_eq!(terminals.integration("agent"), ShellIntegration::None);
        assert_eq!(terminals.foreground("agent"), Some(Foreground::Shell));
        let until = |what: &str, done: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(15);
            while !done() {
                assert!(Instant::now() < deadline, "timed out waiting until {what}");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        // The shell is the user's `$SHELL`: one we inject into reports its commands.
        let Some(kind) = shell::inject::shell_kind(&user_shell()) else {
            terminals.shutdown(false);
            return;
        };
        until("the shell's first mark", &|| {
            terminals.integration("shell") == kind
        });
        let folders = std::fs::read_dir(data.join("agent-tools/shell"))
            .unwrap()
            .count();
        assert_eq!(
            folders, 1,
            "one folder of start-up files, for the shell only"
        );
        let mark = terminals.output_mark("shell").unwrap();
        until("the prompt", &|| {
            terminals.foreground("shell") == Some(Foreground::Shell)
        });
        terminals.start_typed_command("shell", "(exit 3)");
        terminals.write("shell", "(exit 3)\r").unwrap();
        until("the end", &|| {
            terminals
                .command("shell", None)
                .is_some_and(|c| c.state == CommandState::Exited)
        });
        let record = terminals.command("shell", Some(1)).unwrap();
        assert_eq!(
            (record.command.as_str(), record.exit_code),
            ("(exit 3)", Some(3))
        );
        let (since, now) = terminals.output_since("shell", mark.position).unwrap();
        assert!(since.head.contains("(exit 3)"), "{since:?}");
        assert!(now.position > mark.position);
        assert_eq!(terminals.shell_integrity_lost("shell"), Some(false));
        terminals.close("shell").unwrap();
        assert_eq!(
            std::fs::read_dir(data.join("agent-tools/shell"))
                .unwrap()
                .count(),
            0
        );
        terminals.shutdown(false);
        let _ = std::fs::remove_dir_all(&data);
    }

    #[test]
    fn tmux_listing_is_reused_but_dropped_on_start_and_close() {
        if !TmuxServer::available() {
            eprintln!("skipped: no tmux");
            return;
        }
        let data = std::env::temp_dir().join(format!("ht-list-{}", std::process::id()));
        let terminals = HostTerminals::new(TerminalsMode::Tmux, &data).unwrap();
        assert!(terminals.states().is_empty());
        let cwd = std::env::temp_dir();
        terminals
            .start(
                "n1",
                &cwd,
                &BTreeMap::new(),
                Some("sleep 30"),
                WindowSize::default(),
                &Confinement::none("test"),
            )
            .unwrap();
        // Seen at once although the empty listing above is younger than LISTING_TTL.
        let state = terminals.states().get("n1").cloned().unwrap();
        assert_eq!((state.live, state.warm, state.ended), (true, false, None));
        // Its program is no shell of ours: nothing is claimed about commands.
        assert!(state.shell.map_or(true, |shell| shell == ShellStatus::NONE));
        terminals.close("n1").unwrap();
        assert!(!terminals.states().contains_key("n1"));
        terminals.shutdown(true);
        let _ = std::fs::remove_dir_all(&data);
    }
}
