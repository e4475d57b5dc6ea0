//! The host traits: everything the runtime needs from the app that embeds it (the
//! canvas owner's, [`CanvasOwner`], beside the bridge it answers, in `canvas.rs`). The runtime
//! never learns what stands behind them (a desktop app, a headless canvas, tmux, a PTY, a
//! browser engine); each trait is small so a test fake or an embedder can implement it in
//! a few lines.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::Sender;

use serde_json::{Map, Value};

use super::canvas::CanvasOwner;
use crate::protocol::IntegrationStatus;
use crate::server::Awaited;

/// One project as the workspace sees it right now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectSnapshot {
    /// The project id agents' identities carry.
    pub id: String,
    /// The project folder; `None` for a project that is not a folder.
    pub cwd: Option<PathBuf>,
    /// A project whose files and terminals live on another machine; the runtime refuses it.
    pub remote: bool,
    /// Ids of the nodes currently on the project's canvas.
    pub node_ids: Vec<String>,
}

/// The app's state: its projects, its settings and where status changes are shown. Its
/// methods run on the server's threads (the accept thread that every call passes, handlers,
/// project workers): answer from state at hand, never wait on a lock your UI holds
/// for long, as every agent's call waits with you and [`close`] joins the accept thread.
///
/// [`close`]: crate::runtime::AgentToolRuntime::close
pub trait Workspace: Send + Sync + 'static {
    /// The project with this id, if the app has it open. Asked up to three times per
    /// queued call (admission, its turn, the operation), through the default `has_node`.
    fn project(&self, project_id: &str) -> Option<ProjectSnapshot>;
    /// Whether `node_id` is on the canvas of open local project `project_id` (`None`: no
    /// such project). Asked on every call; the default copies [`project`](Self::project).
    fn has_node(&self, project_id: &str, node_id: &str) -> Option<bool> {
        let project = self.project(project_id).filter(|p| !p.remote)?;
        Some(project.node_ids.iter().any(|id| id == node_id))
    }
    /// Whether the user enabled agent browser control; the default: off.
    fn browser_control_enabled(&self) -> bool {
        false
    }
    /// An agent's integration status changed (show it in the UI; optional). On the thread
    /// that changed it (yours in `provision_agent` or `prepare`, or a server thread).
    fn status_changed(&self, _node_id: &str, _status: &IntegrationStatus) {}
    /// Whether the project's folder on disk is still the one opened, so its links and
    /// transcript pointers (`.termsprawl/`) may be read: a folder renamed away, with
    /// another made at its path, is not (its `.termsprawl/` could be anyone's). The
    /// default: yes.
    fn state_intact(&self, _project_id: &str) -> bool {
        true
    }
    /// The git worktree agent `node_id` of project `project_id` works in, as
    /// `session_info` and `agent_status` say it (`{path, branch, base}`); the default:
    /// none. Asked on the accept thread: answer from memory.
    fn worktree(&self, _project_id: &str, _node_id: &str) -> Option<std::sync::Arc<Value>> {
        None
    }
}

/// Live browser guests of browser nodes.
pub trait Browsers: Send + Sync + 'static {
    /// Asks to be told when the guest showing `tab_id` of browser node `node_id` is ready:
    /// send its target id on `ready` once (at once if it already is). Dropping `ready`
    /// without sending means the tab is gone. On the project's worker: return at once.
    fn watch_guest(&self, node_id: &str, tab_id: &str, ready: Sender<String>);
    /// Runs a page operation (`browser_navigate`, `browser_inspect`, `browser_click`,
    /// `browser_type`, `browser_screenshot`, `browser_dialog`) on a ready guest. On a thread of its own: it
    /// may block; the runtime gives up waiting after 15 s.
    fn run(
        &self,
        target_id: &str,
        operation: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, String>;
    /// Starts `browser_wait` (`args`: `nodeId` and one of `text`, `textGone`, `idle`) on a
    /// ready guest: what the server's waiter checks every tick until it is met or its
    /// deadline comes. On the project's worker: return at once. Each check must be cheap
    /// and never block on the page (read state the host keeps; see `Awaited`). The
    /// default refuses: a host that cannot watch its pages.
    fn wait(
        &self,
        _target_id: &str,
        _args: &Map<String, Value>,
    ) -> Result<Box<dyn Awaited>, String> {
        Err("This host cannot wait on its pages; inspect the page again instead".into())
    }
}

/// Terminal sessions of terminal nodes (node ids are unique across projects). Called on
/// the project's worker (`ended` also on the accept thread, `is_warm` and
/// `has_ready_session` also in `prepare`): answer promptly, that project's calls wait.
pub trait Terminals: Send + Sync + 'static {
    /// A session exists for the node, possibly started before this runtime (warm).
    fn is_warm(&self, node_id: &str) -> bool;
    /// The session has started and can take input.
    fn has_ready_session(&self, node_id: &str) -> bool;
    /// The session's process is running and this host is attached to it.
    fn has_live_session(&self, node_id: &str) -> bool;
    /// Writes text to the session as typed input.
    fn write(&self, node_id: &str, text: &str) -> Result<(), String>;
    /// Types `typed` and Enter into a shell (`terminal_submit`): `command` as the shell
    /// runs it (a multi-line one as one group), which is labelled `command`, what was
    /// submitted. The default writes `typed` + `\r`; a host whose shell reports command
    /// starts labels the next one `command`, and one whose shell reports none (a POSIX
    /// `sh`) marks one here.
    fn submit(&self, node_id: &str, command: &str, typed: &str) -> Result<(), String> {
        let _ = command;
        self.write(node_id, &format!("{typed}\r"))
    }
    /// The person at the host typed into this terminal in the last
    /// [`PERSON_TYPING_WINDOW`](crate::runtime::PERSON_TYPING_WINDOW): an agent's
    /// `terminal_input` and `terminal_submit` into it are then refused, so their keys never
    /// interleave with the person's. A host without a person's keyboard keeps the default.
    fn person_typing(&self, _node_id: &str) -> bool {
        false
    }
    /// Whether the terminal's program asked for application cursor keys (`CSI ? 1 h`):
    /// `terminal_input`'s arrows, `Home` and `End` are then sent as `ESC O x`
    /// ([`crate::protocol::keys`]). The default: it did not.
    fn application_cursor(&self, _node_id: &str) -> bool {
        false
    }
    /// The session's current screen as plain text, if the host can capture it.
    fn capture(&self, node_id: &str) -> Option<String>;
    /// The session's recent output as plain text, if the host keeps any.
    fn scrollback(&self, node_id: &str) -> Option<String>;
    /// Opens a second, external view of a warm session for the user.
    fn attach_external(&self, node_id: &str) -> Result<Value, String>;
    /// How the session's program ended, once it has (its node then keeps its last screen
    /// until closed). A host that cannot tell answers `None`: writes into such a session
    /// are refused as not attached.
    fn ended(&self, _node_id: &str) -> Option<ProgramEnd> {
        None
    }
    /// Whether the terminal's shell reports its commands (shell integration). The
    /// default, [`ShellIntegration::None`], keeps the calls that wait for a command to
    /// what [`foreground`](Self::foreground) and the output can tell.
    fn integration(&self, _node_id: &str) -> ShellIntegration {
        ShellIntegration::None
    }
    /// A command the shell reported: the one with this id, or the last one (`None`).
    /// Only a host with integration keeps records; the default has none.
    fn command(&self, _node_id: &str, _id: Option<u64>) -> Option<CommandRecord> {
        None
    }
    /// How the terminal of agent node `node_id` (the one it runs in, or none) is confined,
    /// as `session_info`'s `isolation` says it: `{"mode", "boundary", "why"}`. The
    /// default: nothing said.
    fn isolation(&self, _node_id: &str) -> Option<std::sync::Arc<Value>> {
        None
    }
    /// What the terminal's foreground is doing now, as the host sees it from the
    /// kernel and the screen, with or without integration; `None`: it cannot tell.
    fn foreground(&self, _node_id: &str) -> Option<Foreground> {
        None
    }
    /// Whether the terminal's program, or what it runs in the foreground, is blocked
    /// reading the terminal (for an agent's terminal: it waits for typing); `None` (the
    /// default): the host cannot tell.
    fn reading(&self, _node_id: &str) -> Option<bool> {
        None
    }
    /// Where the terminal's output stands: everything its program wrote counts, so a
    /// caller can ask later for the text written since. `None` (the default): the host
    /// keeps no output positions.
    fn output_mark(&self, _node_id: &str) -> Option<OutputMark> {
        None
    }
    /// The output written since `position` (from an [`OutputMark`]) as plain text, at
    /// most what the host keeps (its head and tail when longer), and the mark now.
    fn output_since(&self, _node_id: &str, _position: u64) -> Option<(CommandOutput, OutputMark)> {
        None
    }
    /// Where the terminal's output history stands: the cursor `terminal_read` answers,
    /// counted in bytes the program wrote. `None` (the default): the host keeps no
    /// history, and `terminal_read` with `since` or `search` is refused.
    fn output_cursor(&self, _node_id: &str) -> Option<u64> {
        None
    }
    /// The output written after cursor `since`, at most `max_chars` characters of it
    /// (see [`OutputAfter`]). A `since` past the end answers nothing, with the cursor now.
    fn output_after(&self, _node_id: &str, _since: u64, _max_chars: usize) -> Option<OutputAfter> {
        None
    }
    /// The lines of the output history containing `needle` (ignoring case), the newest
    /// `max_matches` of them.
    fn search_output(
        &self,
        _node_id: &str,
        _needle: &str,
        _max_matches: usize,
    ) -> Option<LinesFound> {
        None
    }
    /// A call starts (`true`) or stops (`false`) waiting on the terminal's command or
    /// output: a host that can tell when those change wakes the server's waiter
    /// ([`crate::server::Waker`]) then, for terminals with a wait only. The default
    /// does nothing: the waiter checks every [`crate::server::TICK`] anyway.
    fn watch(&self, _node_id: &str, _waiting: bool) {}
}

/// Whether a terminal's shell tells the host where each command starts and ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellIntegration {
    /// Nothing reports commands: no exit status; states come from [`Foreground`].
    None,
    /// This shell reports each command's line, start, end, exit status and folder.
    Bash,
    /// As `Bash`.
    Zsh,
    /// A POSIX `sh` (e.g. dash): the host marks a command's start when it sends Enter.
    Sh,
    /// As `Bash`.
    Fish,
}

impl ShellIntegration {
    /// The wire name: `none`, `bash`, `zsh`, `sh` or `fish`.
    pub fn name(self) -> &'static str {
        match self {
            ShellIntegration::None => "none",
            ShellIntegration::Bash => "bash",
            ShellIntegration::Zsh => "zsh",
            ShellIntegration::Sh => "sh",
            ShellIntegration::Fish => "fish",
        }
    }
}

/// What a terminal's foreground is doing, as the kernel and the screen show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreground {
    /// The shell itself has the terminal (at its prompt, or between commands).
    Shell,
    /// Another process group has the terminal and is not waiting to read it.
    Running,
    /// The foreground process is blocked reading the terminal: it waits for typing.
    AwaitingInput,
    /// A full-screen program (the alternate screen: vim, less, htop).
    Fullscreen,
    /// The terminal's program (the shell) has exited.
    Ended,
}

/// What a reported command is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandState {
    /// It has not ended yet.
    Running,
    /// It ended; [`CommandRecord::exit_code`] says how.
    Exited,
    /// It waits for someone to type (see [`Foreground::AwaitingInput`]).
    AwaitingInput,
    /// It shows a full-screen program.
    Fullscreen,
    /// The shell itself exited before reporting the command's end.
    Ended,
    /// The shell's integration was lost while it ran (its secret showed): its end will
    /// never be reported.
    Unknown,
}

impl CommandState {
    /// The wire name: `running`, `exited`, `awaiting_input`, `fullscreen`, `ended`,
    /// `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            CommandState::Running => "running",
            CommandState::Exited => "exited",
            CommandState::AwaitingInput => "awaiting_input",
            CommandState::Fullscreen => "fullscreen",
            CommandState::Ended => "ended",
            CommandState::Unknown => "unknown",
        }
    }
}

/// Plain text a command or a terminal wrote (controls removed, a `\r` progress line
/// kept as its last state): all of it, or its head and tail when the host keeps less.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOutput {
    /// The text from the start (all of it when `omitted` is 0 and `tail` is empty).
    pub head: String,
    /// The text up to the end, after the omitted middle.
    pub tail: String,
    /// How many characters were left out between `head` and `tail`.
    pub omitted: u64,
}

/// A position in a terminal's output, and when output last came.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputMark {
    /// Where the output stands, in the host's own unit (bytes the program wrote so far
    /// for the PTY backend, the cursor's line for tmux): only handed back to the host.
    pub position: u64,
    /// Unix milliseconds of the last output (0: none yet).
    pub last_output_at: u64,
}

/// What `terminal_read` with `since` answers: the output written after a cursor, as
/// plain text, from the terminal's output history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputAfter {
    /// The text, whole lines but perhaps the last (at most the `max_chars` asked).
    pub text: String,
    /// Where the text ends: the `since` of the next read.
    pub cursor: u64,
    /// Bytes written after `since` that the history had already dropped (the text then
    /// starts at the next whole line kept).
    pub lost: u64,
    /// Characters of one line longer than `max_chars` left out (the line is cut).
    pub omitted: u64,
    /// A full-screen program shows now: the text is what it drew, not its screen.
    pub fullscreen: bool,
}

/// A line of a terminal's output history that `terminal_read` with `search` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineMatch {
    /// Its number: 1 for the first line the program wrote.
    pub line: u64,
    /// Its text (cut when long).
    pub text: String,
    /// The line before it, if kept.
    pub before: Vec<String>,
    /// The line after it, if any yet.
    pub after: Vec<String>,
}

/// What `terminal_read` with `search` answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinesFound {
    /// The newest matches, oldest first.
    pub matches: Vec<LineMatch>,
    /// How many lines matched in all.
    pub count: u64,
    /// Where the output stands (as [`OutputAfter::cursor`]).
    pub cursor: u64,
}

/// One command a shell ran in a terminal, as its (verified) marks reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRecord {
    /// Its id in its terminal: 1, 2, 3… in the order the shell started them.
    pub id: u64,
    /// The command line as the shell read it.
    pub command: String,
    /// What it is doing now.
    pub state: CommandState,
    /// Its exit status, once [`CommandState::Exited`].
    pub exit_code: Option<i32>,
    /// Unix milliseconds when it started.
    pub started_at: u64,
    /// Unix milliseconds when it ended.
    pub ended_at: Option<u64>,
    /// The shell's folder: when the command ended, or when it started while it runs.
    pub cwd: Option<String>,
    /// Its output so far.
    pub output: CommandOutput,
    /// Unix milliseconds of its last output (its start when none yet).
    pub last_output_at: u64,
}

/// How a terminal's program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramEnd {
    /// It exited with this status.
    Status(i32),
    /// This signal killed it.
    Signal(i32),
    /// It ended, but how was not reported (e.g. reaped by someone else).
    Unknown,
}

impl ProgramEnd {
    /// `exit status 3`, `killed by signal 9`, `exited`: for sentences.
    pub fn describe(self) -> String {
        match self {
            ProgramEnd::Status(code) => format!("exit status {code}"),
            ProgramEnd::Signal(signal) => format!("killed by signal {signal}"),
            ProgramEnd::Unknown => "exited".to_string(),
        }
    }
}

/// The four host traits, handed to [`crate::runtime::AgentToolRuntime::new`].
#[derive(Clone)]
pub struct Host {
    /// Projects, settings, status display.
    pub workspace: std::sync::Arc<dyn Workspace>,
    /// The canvas state owner.
    pub canvas: std::sync::Arc<dyn CanvasOwner>,
    /// Browser guests.
    pub browsers: std::sync::Arc<dyn Browsers>,
    /// Terminal sessions.
    pub terminals: std::sync::Arc<dyn Terminals>,
}

/// A request to start a terminal process, as the host is about to run it. The runtime's
/// `prepare` may rewrite `command` and add to `env` before the host starts it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtyRequest {
    /// The terminal node.
    pub node_id: String,
    /// Its project, if any.
    pub project_id: Option<String>,
    /// The shell command line to run; `None` for a plain shell.
    pub command: Option<String>,
    /// Extra environment for the process.
    pub env: BTreeMap<String, String>,
}
