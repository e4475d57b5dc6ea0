//! The activity trail: one JSON line per call in `<dir>/<projectId>.jsonl`, written by
//! one writer thread so that recording never makes a call wait.
//!
//! A call hands its finished line to `Trail::record`, which appends it to its project's
//! queued bytes under a lock held only for that copy; past [`QUEUED_LINES`] waiting lines
//! the line is dropped and `Trail::dropped` goes up. The writer takes the queued bytes
//! in batches (woken by the first line, it pauses `BATCH_PAUSE` for more, then swaps
//! each project's buffer for an empty one it wrote before, so a burst costs one wake-up
//! and one `write` per project, and no allocation on either side once the buffers have
//! grown), and writes each batch with one append. (A line per call sent on a channel
//! cost a heap block made on the call's thread and freed on the writer's, which keeps
//! glibc's allocator off its fast path on both: measurably slower calls.) A write that
//! stops short (a full disk) is cut back to its last whole line, the lines that did not
//! fit counted as dropped: lines in the file are whole, and only a crash in the middle of a write can leave a torn last line
//! (readers skip lines that do not parse). While the count grows, stderr hears of it at
//! most once per [`REPORT_EVERY`].
//!
//! Files are private state: the directory 0700, each file 0600, opened for appending
//! with `O_NOFOLLOW|O_NONBLOCK` and used only if `fstat` finds a regular file of this
//! user (a planted symlink is never followed, a planted FIFO never blocks and never
//! receives a line). At [`ROTATE_BYTES`] the file becomes `<projectId>.jsonl.1` (the
//! previous one is replaced) and a new one is created exclusively.
//!
//! What a line holds (see [`ActivityLine`]): the time (RFC 3339, UTC, ms), the caller's
//! `nodeId`, the `operation`, the `outcome` (`ok` or `error` with the `error` text),
//! `durationMs`, and the arguments the agent sent, every string cut to [`TEXT_CHARS`]
//! characters. Nothing else the server holds is written: no token, no header, no answer.
//! A request refused before its call is known (403, 401, too large, a body that does not
//! arrive or is not JSON, the service shutting down) has no `operation`; it carries the
//! HTTP `status`, the reason and the client's `peerPort`, and is written to the trail of
//! every project the server has provisioned a session for.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::base::terminal_text::{cut_escaped, is_escaped_for_terminal, push_escaped};
use crate::base::{civil_from_days, lock_or_recover};
use crate::protocol::{ToolResult, ToolSession};

/// A trail file is rotated once it has reached this size.
pub const ROTATE_BYTES: u64 = 10 * 1024 * 1024;
/// Lines waiting for the writer; one more is dropped (and counted).
pub const QUEUED_LINES: usize = 16 * 1024;
/// Every string argument is cut to this many characters.
pub const TEXT_CHARS: usize = 200;
/// After waking for a line, the writer waits this long for more before writing.
const BATCH_PAUSE: Duration = Duration::from_millis(20);
/// Dropped lines are reported on stderr at most this often.
pub const REPORT_EVERY: Duration = Duration::from_secs(60);
/// Error texts are cut to this many characters (they may quote what an agent sent).
const ERROR_CHARS: usize = 500;
/// The node and operation columns are padded to at most this many characters; a longer
/// value pushes the rest of its line to the right.
pub const COLUMN_CHARS: usize = 40;
/// Node ids are cut to this many characters when shown (a valid one has at most 128).
const NAME_CHARS: usize = 128;
/// An operation name that is not in the catalogue is shown cut to this many characters.
const UNKNOWN_OPERATION_CHARS: usize = 60;
/// A value that is not a string (an array, an object) is shown cut to this many
/// characters of its JSON.
const VALUE_CHARS: usize = 4 * TEXT_CHARS;
/// The outcome and a time that is not RFC 3339 are shown cut to these many characters.
const OUTCOME_CHARS: usize = 16;
const TIME_CHARS: usize = 32;

/// `<dir>/<project_id>.jsonl`, or `None` for a project id that is no safe file name
/// (`^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$`, as node ids): such a project has no trail.
pub fn trail_file(dir: &Path, project_id: &str) -> Option<PathBuf> {
    crate::protocol::is_valid_node_id(project_id).then(|| dir.join(format!("{project_id}.jsonl")))
}

/// Appends what the person did outside `serve` (`termsprawl-tools worktrees merge`, …) to
/// `project_id`'s trail in `dir`, as the canvas view's actions are recorded (`by:
/// "person"`): one whole line, appended (`serve`'s writer appends too), never through a
/// link. Nothing when the trail folder does not exist (no `serve` ever ran there).
pub fn append_person(
    dir: &Path,
    project_id: &str,
    operation: &str,
    args: &Map<String, Value>,
    result: &ToolResult,
) -> io::Result<()> {
    let Some(file) = trail_file(dir, project_id) else {
        return Err(io::Error::other(format!(
            "{project_id:?} is not a project id"
        )));
    };
    if !dir.is_dir() {
        return Ok(());
    }
    let error = match result {
        ToolResult::Ok(_) => None,
        ToolResult::Err(error) => Some(error.as_str()),
    };
    let time = now_rfc3339();
    let mut line = line_of(
        time.as_str(),
        None,
        operation,
        Some(args),
        error,
        Instant::now(),
    );
    line.by = Some(PERSON);
    let mut trail = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)?;
    trail.write_all(&to_line(&line))
}

/// The file a trail was rotated into: `<projectId>.jsonl.1`.
pub fn previous_file(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// One line of a trail, as read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivityLine {
    /// RFC 3339 UTC with milliseconds, e.g. `2026-12-01T12:03:04.512Z`.
    pub time: String,
    /// The calling agent; absent for a request refused before its call was known, and
    /// for what the person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// Who acted when it was not an agent: `person` for the person at `serve` (the canvas
    /// view, with its key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The operation; absent for a refused request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// `ok` or `error`.
    pub outcome: String,
    /// Why it failed (cut to 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the parsed request to its answer (queue wait included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The HTTP status of a refused request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The client's TCP port, for a refused request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_port: Option<u16>,
    /// The arguments as sent, strings cut to [`TEXT_CHARS`] characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Map<String, Value>>,
    /// Who let a call the policy asks about run, e.g. `allowed once by the person`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<String>,
    /// What the terminal command a call waited for did (see [`CommandEnd`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandEnd>,
    /// A terminal the call started runs unconfined: why (its answer's `isolation.why`,
    /// cut to 500 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfined: Option<String>,
}

/// Why the terminal a call of `operation` started runs unconfined (from its answer's
/// `isolation`, which only an unconfined one carries); `None` otherwise.
fn unconfined_of<'a>(operation: &str, result: &'a ToolResult) -> Option<&'a str> {
    let ToolResult::Ok(answer) = result else {
        return None;
    };
    if !matches!(operation, "terminal_open" | "agent_launch") {
        return None;
    }
    let isolation = answer.get("isolation")?;
    (isolation["mode"] == "none").then(|| isolation["why"].as_str().unwrap_or("not confined"))
}

/// A waited terminal command in a call's line (`terminal_submit` with `wait`,
/// `terminal_wait`): taken from the call's answer, which the line otherwise never holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandEnd {
    /// `exited`, `running`, `timed_out`, `awaiting_input`, `fullscreen` or `ended`.
    pub state: String,
    /// Its exit status, once it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// How long it ran (so far, when it had not ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl CommandEnd {
    /// From a command answer of `operation`; `None` for any other call or answer.
    fn of_answer(operation: &str, result: &ToolResult) -> Option<CommandEnd> {
        let ToolResult::Ok(answer) = result else {
            return None;
        };
        if !matches!(operation, "terminal_submit" | "terminal_wait") {
            return None;
        }
        Some(CommandEnd {
            state: cut_chars(answer["state"].as_str()?, OUTCOME_CHARS).into_owned(),
            exit_code: answer["exitCode"].as_i64(),
            duration_ms: answer["durationMs"].as_u64(),
        })
    }

    /// `exited 1 after 3004 ms`, for [`ActivityLine::display`].
    fn describe(&self) -> String {
        let mut text = cut_escaped(&self.state, OUTCOME_CHARS).into_owned();
        if let Some(code) = self.exit_code {
            text.push_str(&format!(" {code}"));
        }
        if let Some(ms) = self.duration_ms {
            text.push_str(&format!(" after {ms} ms"));
        }
        text
    }
}

impl ActivityLine {
    /// The line for people: `12:03:04.512  me  terminal_submit  ok  3 ms  term-1 "cargo test"`
    /// (time of day in UTC; `widths` pads the node and operation columns, each to at most
    /// [`COLUMN_CHARS`]).
    ///
    /// Nothing in it is written raw that a terminal would act on or hide (see
    /// `base::terminal_text`), every field is cut to a bounded length, and an operation
    /// name that is not in the catalogue is shown as `(unknown) "…"`: an agent cannot
    /// forge, move or erase what a person reads, on any line a file may hold.
    pub fn display(&self, widths: (usize, usize)) -> String {
        let mut line = self.clock().into_owned();
        line.push_str("  ");
        pad(&mut line, &self.node_column(), widths.0);
        line.push_str("  ");
        pad(&mut line, &self.operation_column(), widths.1);
        line.push_str("  ");
        pad(&mut line, &cut_escaped(&self.outcome, OUTCOME_CHARS), 5);
        if let Some(ms) = self.duration_ms {
            line.push_str(&format!("  {ms} ms"));
        }
        if let Some(args) = &self.args {
            // The node acted on first, then the rest in the map's order.
            let node_first = args.get("nodeId").into_iter().chain(
                args.iter()
                    .filter(|(key, _)| *key != "nodeId")
                    .map(|(_, value)| value),
            );
            let shown: Vec<String> = node_first.map(shown_value).collect();
            if !shown.is_empty() {
                line.push_str("  ");
                line.push_str(&shown.join(" "));
            }
        }
        if let Some(port) = self.peer_port {
            line.push_str(&format!("  port {port}"));
        }
        if let Some(decided) = &self.decided {
            line.push_str(&format!("  ({})", cut_escaped(decided, ERROR_CHARS)));
        }
        if let Some(command) = &self.command {
            line.push_str("  command ");
            line.push_str(&command.describe());
        }
        if let Some(why) = &self.unconfined {
            line.push_str(&format!("  unconfined ({})", cut_escaped(why, ERROR_CHARS)));
        }
        if let Some(error) = &self.error {
            line.push_str("  ");
            line.push_str(&cut_escaped(error, ERROR_CHARS));
        }
        line
    }

    /// The node column's text, as [`display`](Self::display) shows it (for widths).
    pub fn node_column(&self) -> String {
        // In parentheses: no node id has them, so no agent passes for the person.
        match (&self.node_id, &self.by) {
            (Some(node), _) => cut_escaped(node, NAME_CHARS).into_owned(),
            (None, Some(by)) => format!("({})", cut_escaped(by, NAME_CHARS)),
            (None, None) => "-".to_string(),
        }
    }

    /// The operation column's text, as [`display`](Self::display) shows it (for widths).
    pub fn operation_column(&self) -> String {
        match (&self.operation, self.status) {
            (Some(operation), _) if crate::protocol::find_tool(operation).is_some() => {
                operation.clone()
            }
            // What only the person does (the canvas view's actions, `worktrees`).
            (Some(operation), _)
                if self.by.as_deref() == Some(PERSON)
                    && PERSON_OPERATIONS.contains(&operation.as_str()) =>
            {
                operation.clone()
            }
            (Some(operation), _) => format!(
                "(unknown) {}",
                quoted(&cut_chars(operation, UNKNOWN_OPERATION_CHARS))
            ),
            (None, Some(status)) => format!("refused {status}"),
            (None, None) => "refused".to_string(),
        }
    }

    /// `HH:MM:SS.mmm` from a well-formed time, else the time as it is, escaped and cut.
    fn clock(&self) -> Cow<'_, str> {
        match self.time.get(11..23) {
            Some(clock)
                if clock
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b':' || b == b'.') =>
            {
                Cow::Borrowed(clock)
            }
            _ => Cow::Owned(cut_escaped(&self.time, TIME_CHARS).into_owned()),
        }
    }
}

/// Appends `text`, then spaces up to `width` characters (at most [`COLUMN_CHARS`]).
fn pad(line: &mut String, text: &str, width: usize) {
    line.push_str(text);
    let missing = width.min(COLUMN_CHARS).saturating_sub(text.chars().count());
    line.extend(std::iter::repeat(' ').take(missing));
}

/// An argument's value for people: a plain word as it is; other text quoted and cut to
/// [`TEXT_CHARS`]; any other value as its JSON, cut to [`VALUE_CHARS`] and escaped.
fn shown_value(value: &Value) -> String {
    match value {
        Value::String(text) if is_plain_word(text) && text.chars().count() <= TEXT_CHARS => {
            text.clone()
        }
        Value::String(text) => quoted(&cut_chars(text, TEXT_CHARS)),
        // serde_json escapes `"`, `\` and C0; the escaping catches the rest.
        other => cut_escaped(&other.to_string(), VALUE_CHARS).into_owned(),
    }
}

/// Whether `text` can be shown without quotes: not empty, and nothing that could pass
/// for a separator, a quote or an escape.
fn is_plain_word(text: &str) -> bool {
    !text.is_empty()
        && !text
            .chars()
            .any(|c| matches!(c, ' ' | '"' | '\\') || is_escaped_for_terminal(c))
}

/// `text` in double quotes, `"` and `\` escaped as in JSON and the rest as for a
/// terminal, so that quoted text can never end its quotes or pass for the line's words.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => push_escaped(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// `text` cut to its first `max` characters, with `…` when cut.
fn cut_chars(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// A line of a trail as the file holds it, and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct TrailLine {
    /// The line's bytes exactly as in the file, without its newline.
    pub bytes: Vec<u8>,
    /// The line, parsed.
    pub line: ActivityLine,
}

impl TrailLine {
    /// `bytes` (one line, without its newline) as a trail line; `None` when they do not
    /// parse as one (a torn line, junk): readers skip those.
    pub fn parse(bytes: &[u8]) -> Option<TrailLine> {
        let line = serde_json::from_slice(bytes).ok()?;
        Some(TrailLine {
            bytes: bytes.to_vec(),
            line,
        })
    }
}

/// The last `n` whole lines of `project_id`'s trail in `dir` (oldest first), reaching
/// into the previous, rotated file when the current one has fewer. Lines that do not
/// parse (a torn last line) are skipped; a missing or untrusted file reads as empty.
/// For a view that shows the latest calls; see `AgentToolServer::activity_file`.
pub fn read_tail(dir: &Path, project_id: &str, n: usize) -> Vec<ActivityLine> {
    read_tail_lines(dir, project_id, n)
        .into_iter()
        .map(|read| read.line)
        .collect()
}

/// [`read_tail`] with each line's bytes as the file holds them.
pub fn read_tail_lines(dir: &Path, project_id: &str, n: usize) -> Vec<TrailLine> {
    let Some(file) = trail_file(dir, project_id) else {
        return Vec::new();
    };
    let mut lines = tail_of(&file, n);
    if lines.len() < n {
        let mut older = tail_of(&previous_file(&file), n - lines.len());
        older.append(&mut lines);
        lines = older;
    }
    lines
}

/// The last `n` parsable lines of one file.
fn tail_of(file: &Path, n: usize) -> Vec<TrailLine> {
    let Ok(mut opened) = open_private_for_reading(file) else {
        return Vec::new();
    };
    let Ok(len) = opened.seek(SeekFrom::End(0)) else {
        return Vec::new();
    };
    // Read backwards in growing windows until `n` lines are in it (or the whole file).
    let mut window = (n as u64).saturating_add(1).saturating_mul(512);
    loop {
        let start = len.saturating_sub(window);
        let mut bytes = Vec::new();
        if opened.seek(SeekFrom::Start(start)).is_err()
            || Read::by_ref(&mut opened)
                .take(len - start)
                .read_to_end(&mut bytes)
                .is_err()
        {
            return Vec::new();
        }
        // The first line of a window that does not start the file may be partial.
        let skip_first = start > 0;
        let mut parsed: Vec<TrailLine> = bytes
            .split(|b| *b == b'\n')
            .skip(usize::from(skip_first))
            .filter_map(TrailLine::parse)
            .collect();
        if parsed.len() >= n || start == 0 {
            let from = parsed.len().saturating_sub(n);
            return parsed.split_off(from);
        }
        window = window.saturating_mul(4);
    }
}

/// Opens a trail file for reading only if it is a regular file of this user (never
/// through a symlink; a FIFO never blocks).
pub fn open_private_for_reading(file: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(file)?;
    check_private(&opened, file)?;
    Ok(opened)
}

/// Every parsable line of `file` from byte `from`, and the offset after the last whole
/// line read (for following a growing file).
pub fn read_from(file: &mut File, from: u64) -> io::Result<(Vec<TrailLine>, u64)> {
    file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::new(file);
    let (mut lines, mut offset, mut buf) = (Vec::new(), from, Vec::new());
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        // A line still being written (no newline yet) is read next time.
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok((lines, offset));
        }
        offset += n as u64;
        lines.extend(TrailLine::parse(&buf[..n - 1]));
    }
}

fn check_private(file: &File, path: &Path) -> io::Result<()> {
    let meta = file.metadata()?;
    let me = crate::sys::process::effective_uid();
    if !meta.is_file() || meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a regular file of this user", path.display()),
        ));
    }
    Ok(())
}

/// Whole lines of one project waiting for the writer.
#[derive(Default)]
struct Lines {
    bytes: Vec<u8>,
    count: u64,
}

impl Lines {
    fn push(&mut self, line: &(impl PutLine + ?Sized)) {
        line.put(&mut self.bytes);
        self.count += 1;
    }
}

/// A line as the calls hand it to the trail: made into its bytes (with the newline)
/// straight in the buffer it is queued in, so a call's line costs no allocation of its
/// own and no copy.
trait PutLine {
    fn put(&self, bytes: &mut Vec<u8>);
}

impl PutLine for [u8] {
    fn put(&self, bytes: &mut Vec<u8>) {
        bytes.extend_from_slice(self);
    }
}

impl PutLine for Vec<u8> {
    fn put(&self, bytes: &mut Vec<u8>) {
        bytes.extend_from_slice(self);
    }
}

impl PutLine for Line<'_> {
    fn put(&self, bytes: &mut Vec<u8>) {
        let start = bytes.len();
        if serde_json::to_writer(&mut *bytes, self).is_err() {
            bytes.truncate(start); // never a partial line (these values always serialize)
        }
        bytes.push(b'\n');
    }
}

/// What the calls queue for the writer.
#[derive(Default)]
struct Queued {
    /// Every project with sessions (refused requests go to each), with its lines.
    projects: HashMap<String, Lines>,
    /// Lines waiting, over all projects.
    lines: usize,
    /// Write what is queued and stop.
    stop: bool,
}

/// Shared by the calls and the writer.
#[derive(Default)]
struct Pending {
    queued: Mutex<Queued>,
    /// Wakes the writer for the first line of a batch, and to stop.
    wake: Condvar,
    dropped: AtomicU64,
}

impl Pending {
    /// Queues `line` for `project_id`, or for every project with sessions when `None`;
    /// never waits but for the lock.
    fn queue(&self, project_id: Option<&str>, line: &(impl PutLine + ?Sized)) {
        let mut queued = lock_or_recover(&self.queued);
        let first = queued.lines == 0;
        if queued.stop {
            return; // the server is closing: nobody is left to care
        }
        if queued.lines >= QUEUED_LINES {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match project_id {
            Some(project_id) => {
                match queued.projects.get_mut(project_id) {
                    Some(lines) => lines.push(line),
                    None => {
                        let mut lines = Lines::default();
                        lines.push(line);
                        queued.projects.insert(project_id.to_string(), lines);
                    }
                }
                queued.lines += 1;
            }
            None if queued.projects.is_empty() => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            None => {
                for lines in queued.projects.values_mut() {
                    lines.push(line);
                }
                queued.lines += queued.projects.len();
            }
        }
        drop(queued);
        if first {
            self.wake.notify_one();
        }
    }

    /// Waits for a line (or the stop), pauses [`BATCH_PAUSE`] for more, and swaps every
    /// project's queued lines with its buffer in `batch` (empty, as the writer left it).
    /// Returns whether the trail is stopping, or `None` when [`REPORT_EVERY`] passed
    /// with nothing queued.
    fn take(&self, batch: &mut HashMap<String, Lines>) -> Option<bool> {
        let mut queued = lock_or_recover(&self.queued);
        while queued.lines == 0 && !queued.stop {
            let (again, waited) = self
                .wake
                .wait_timeout(queued, REPORT_EVERY)
                .unwrap_or_else(PoisonError::into_inner);
            queued = again;
            if waited.timed_out() && queued.lines == 0 && !queued.stop {
                return None;
            }
        }
        if !queued.stop {
            drop(queued);
            thread::sleep(BATCH_PAUSE);
            queued = lock_or_recover(&self.queued);
        }
        for (project_id, lines) in queued.projects.iter_mut().filter(|(_, l)| l.count > 0) {
            match batch.get_mut(project_id) {
                Some(buffer) => std::mem::swap(buffer, lines),
                None => {
                    batch.insert(project_id.clone(), std::mem::take(lines));
                }
            }
        }
        queued.lines = 0;
        Some(queued.stop)
    }
}

/// A running trail: the calls' side of the writer.
pub(crate) struct Trail {
    pending: Arc<Pending>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl Trail {
    /// Starts the writer for files in `dir` (made 0700 if missing).
    pub(crate) fn start(dir: PathBuf) -> io::Result<Trail> {
        crate::base::files::private_dir(&dir)?;
        let pending = Arc::new(Pending::default());
        let writer = {
            let pending = pending.clone();
            thread::Builder::new()
                .name("agent-tools-activity".into())
                .spawn(move || Writer::new(dir, ROTATE_BYTES).run(&pending))?
        };
        Ok(Trail {
            pending,
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Lines dropped so far (too many waiting, disk full, file unusable).
    pub(crate) fn dropped(&self) -> u64 {
        self.pending.dropped.load(Ordering::Relaxed)
    }

    /// Queues a call's line; never waits (but for a lock held while the line is made).
    fn record(&self, project_id: &str, line: &(impl PutLine + ?Sized)) {
        self.pending.queue(Some(project_id), line);
    }

    /// Queues a refused request's line for every project with sessions; never waits.
    pub(crate) fn record_refused(&self, line: &[u8]) {
        self.pending.queue(None, line);
    }

    /// Adds a project with sessions (see the module docs).
    pub(crate) fn add_project(&self, project_id: &str) {
        let mut queued = lock_or_recover(&self.pending.queued);
        if !queued.projects.contains_key(project_id) {
            queued
                .projects
                .insert(project_id.to_string(), Lines::default());
        }
    }

    /// Writes what is queued and stops the writer. Idempotent.
    pub(crate) fn stop(&self) {
        let Some(writer) = lock_or_recover(&self.writer).take() else {
            return;
        };
        lock_or_recover(&self.pending.queued).stop = true;
        self.pending.wake.notify_one();
        let _ = writer.join();
    }
}

/// The server's side of the trail: where it goes and, once the server has started, its
/// writer. The server records each call through it.
pub(crate) struct Recorder {
    /// Where the trail goes (`None`: no trail); read by `start`.
    directory: Mutex<Option<PathBuf>>,
    /// The running trail, from `start` on.
    trail: OnceLock<Trail>,
}

impl Recorder {
    /// A trail in `directory`, not yet started.
    pub(crate) fn new(directory: PathBuf) -> Recorder {
        Recorder {
            directory: Mutex::new(Some(directory)),
            trail: OnceLock::new(),
        }
    }

    /// Sets where the trail goes (`None`: no trail); effective at `start`.
    pub(crate) fn set_directory(&self, directory: Option<PathBuf>) {
        *lock_or_recover(&self.directory) = directory;
    }

    /// The trail file of `project_id`, unless there is no trail or the id is no safe name.
    pub(crate) fn file(&self, project_id: &str) -> Option<PathBuf> {
        trail_file(lock_or_recover(&self.directory).as_ref()?, project_id)
    }

    /// Lines dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.trail.get().map_or(0, Trail::dropped)
    }

    /// Starts the writer (once), telling it the `projects` that already have sessions.
    pub(crate) fn start(&self, projects: Vec<String>) -> io::Result<()> {
        let Some(directory) = lock_or_recover(&self.directory).clone() else {
            return Ok(());
        };
        if self.trail.get().is_none() {
            let _ = self.trail.set(Trail::start(directory)?);
        }
        for project_id in projects {
            self.add_project(&project_id);
        }
        Ok(())
    }

    /// Adds a project with sessions, once the trail runs.
    pub(crate) fn add_project(&self, project_id: &str) {
        if let Some(trail) = self.trail.get() {
            trail.add_project(project_id);
        }
    }

    /// Records a call's outcome (never waits).
    pub(crate) fn call(
        &self,
        session: &ToolSession,
        operation: &str,
        args: Option<&Map<String, Value>>,
        result: &ToolResult,
        started: Instant,
    ) {
        self.call_decided(session, operation, args, result, started, None);
    }

    /// [`call`](Self::call), with who let a call held for the person run (if it was).
    pub(crate) fn call_decided(
        &self,
        session: &ToolSession,
        operation: &str,
        args: Option<&Map<String, Value>>,
        result: &ToolResult,
        started: Instant,
        decided: Option<&str>,
    ) {
        let Some(trail) = self.trail.get() else {
            return;
        };
        let error = match result {
            ToolResult::Ok(_) => None,
            ToolResult::Err(error) => Some(error.as_str()),
        };
        let command = CommandEnd::of_answer(operation, result);
        let unconfined = unconfined_of(operation, result);
        let time = now_rfc3339();
        let line = call_line_of(
            time.as_str(),
            &session.node_id,
            operation,
            args,
            error,
            started,
            (decided, command.as_ref(), unconfined),
        );
        trail.record(&session.project_id, &line);
    }

    /// Records what the person did (an action from the canvas view) in `project_id`'s
    /// trail, as `operation` with `args` (never the text typed); never waits.
    pub(crate) fn person(
        &self,
        project_id: &str,
        operation: &str,
        args: Option<&Map<String, Value>>,
        result: &ToolResult,
        started: Instant,
    ) {
        let Some(trail) = self.trail.get() else {
            return;
        };
        let error = match result {
            ToolResult::Ok(_) => None,
            ToolResult::Err(error) => Some(error.as_str()),
        };
        let time = now_rfc3339();
        let mut line = line_of(time.as_str(), None, operation, args, error, started);
        line.by = Some(PERSON);
        line.unconfined = unconfined_of(operation, result).map(|why| Cut(why, ERROR_CHARS));
        trail.record(project_id, &line);
    }

    /// Records that agent `node_id`'s state changed (see `AgentToolServer::record_attention`);
    /// never waits.
    pub(crate) fn attention(&self, project_id: &str, node_id: &str, state: &Map<String, Value>) {
        let Some(trail) = self.trail.get() else {
            return;
        };
        let time = now_rfc3339();
        let line = line_of(
            time.as_str(),
            Some(node_id),
            "attention",
            Some(state),
            None,
            Instant::now(),
        );
        let line = Line {
            duration_ms: None,
            ..line
        };
        trail.record(project_id, &line);
    }

    /// Records a request refused by the HTTP front before its call was known: its
    /// status, reason and client port; with the `session` it authenticated as, if any
    /// (then in that project's trail only).
    pub(crate) fn refused(
        &self,
        session: Option<&ToolSession>,
        status: u16,
        reason: &str,
        peer_port: Option<u16>,
    ) {
        let Some(trail) = self.trail.get() else {
            return;
        };
        let line = refused_line(
            session.map(|s| s.node_id.as_str()),
            status,
            reason,
            peer_port,
        );
        match session {
            Some(session) => trail.record(&session.project_id, &line),
            None => trail.record_refused(&line),
        }
    }

    /// Writes what is queued and stops the writer. Idempotent.
    pub(crate) fn stop(&self) {
        if let Some(trail) = self.trail.get() {
            trail.stop();
        }
    }
}

/// One project's open trail file and its size.
struct Sink {
    file: File,
    size: u64,
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    /// [`ROTATE_BYTES`] (smaller in unit tests).
    rotate_bytes: u64,
    /// Lines it could not write (counted in [`Pending::dropped`] by `run`).
    dropped: u64,
    /// Open files by project id; a project whose file cannot be used maps to `None`
    /// until the next batch tries again.
    sinks: HashMap<String, Option<Sink>>,
    /// Projects whose unusable file was reported on stderr already.
    reported_unusable: Vec<String>,
    reported_dropped: (u64, Option<Instant>),
    /// Whether a failed rotation was reported on stderr already.
    reported_rotation: bool,
}

impl Writer {
    fn new(dir: PathBuf, rotate_bytes: u64) -> Writer {
        Writer {
            dir,
            rotate_bytes,
            dropped: 0,
            sinks: HashMap::new(),
            reported_unusable: Vec::new(),
            reported_dropped: (0, None),
            reported_rotation: false,
        }
    }

    fn run(mut self, pending: &Pending) {
        let mut batch: HashMap<String, Lines> = HashMap::new();
        loop {
            let taken = pending.take(&mut batch);
            self.write_batch(&mut batch);
            pending.dropped.fetch_add(self.dropped, Ordering::Relaxed);
            self.dropped = 0;
            self.report_dropped(pending.dropped.load(Ordering::Relaxed));
            if taken == Some(true) {
                return;
            }
        }
    }

    /// Writes one batch, one append per project, and empties its buffers (keeping
    /// their room for the next).
    fn write_batch(&mut self, batch: &mut HashMap<String, Lines>) {
        for (project_id, lines) in batch.iter_mut().filter(|(_, l)| l.count > 0) {
            self.dropped += lines
                .count
                .saturating_sub(self.append(project_id, &lines.bytes));
            lines.bytes.clear();
            lines.count = 0;
        }
    }

    /// Appends whole lines to the project's trail (rotating it first when due); how many
    /// of them reached the file.
    fn append(&mut self, project_id: &str, bytes: &[u8]) -> u64 {
        let Some(path) = trail_file(&self.dir, project_id) else {
            self.report_unusable(project_id, "its project id is not a safe file name");
            return 0;
        };
        let sink = self.sinks.entry(project_id.to_string()).or_insert(None);
        if sink
            .as_ref()
            .is_some_and(|s| s.size > 0 && s.size + bytes.len() as u64 > self.rotate_bytes)
        {
            *sink = None;
            // The previous file is replaced; a planted symlink there is replaced, not
            // followed (rename acts on names).
            // When it cannot be rotated, the file grows on (said once, not per batch).
            if let Err(e) = fs::rename(&path, previous_file(&path)) {
                if !self.reported_rotation {
                    eprintln!("agent-tools: could not rotate {}: {e}", path.display());
                    self.reported_rotation = true;
                }
            }
        }
        if sink.is_none() {
            match open_for_appending(&path) {
                Ok(opened) => *sink = Some(opened),
                Err(e) => {
                    let why = e.to_string();
                    self.report_unusable(project_id, &why);
                    return 0;
                }
            }
        }
        let Some(open) = sink.as_mut() else {
            return 0;
        };
        let mut written = 0;
        while written < bytes.len() {
            match open.file.write(&bytes[written..]) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        // A write that stopped short (a full disk) is cut back to its last whole line.
        let whole = bytes[..written]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let kept = bytes[..whole].iter().filter(|&&b| b == b'\n').count() as u64;
        if whole < written && open.file.set_len(open.size + whole as u64).is_err() {
            // The torn line stays: reopened for the next batch, which ends it first (readers
            // skip it), and the file's size is read again.
            *sink = None;
            return kept;
        }
        open.size += whole as u64;
        kept
    }

    fn report_unusable(&mut self, project_id: &str, why: &str) {
        if !self.reported_unusable.iter().any(|p| p == project_id) {
            eprintln!(
                "agent-tools: the activity trail of project {project_id} is not written: {why}"
            );
            self.reported_unusable.push(project_id.to_string());
        }
    }

    /// Says on stderr how many lines were dropped (`now` so far), when the count grew
    /// since the last report and that was at least [`REPORT_EVERY`] ago.
    fn report_dropped(&mut self, now: u64) {
        let (last, at) = self.reported_dropped;
        if now > last && at.map_or(true, |at| at.elapsed() >= REPORT_EVERY) {
            eprintln!("agent-tools: activity trail: {now} line(s) dropped so far (disk full or writer behind)");
            self.reported_dropped = (now, Some(Instant::now()));
        }
    }
}

/// Opens (or creates, 0600) a trail file for appending, only if it is a regular file of
/// this user: `O_NOFOLLOW` refuses a symlink, `O_NONBLOCK` keeps a FIFO from blocking
/// the open, and `fstat` refuses anything but a regular file.
fn open_for_appending(path: &Path) -> io::Result<Sink> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    check_private(&file, path)?;
    let meta = file.metadata()?;
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    let mut sink = Sink {
        file,
        size: meta.len(),
    };
    // A torn last line from a crash: end it, so the next line starts on its own.
    if sink.size > 0 && !ends_with_newline(&sink.file, sink.size) {
        sink.file.write_all(b"\n")?;
        sink.size += 1;
    }
    Ok(sink)
}

fn ends_with_newline(file: &File, size: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut last = [0u8; 1];
    file.read_exact_at(&mut last, size - 1).is_ok() && last[0] == b'\n'
}

/// [`call_line_of`] as the bytes written, for the tests.
#[cfg(test)]
fn call_line(
    node_id: &str,
    operation: &str,
    args: Option<&Map<String, Value>>,
    error: Option<&str>,
    started: Instant,
    extra: (Option<&str>, Option<&CommandEnd>, Option<&str>),
) -> Vec<u8> {
    let time = now_rfc3339();
    to_line(&call_line_of(
        time.as_str(),
        node_id,
        operation,
        args,
        error,
        started,
        extra,
    ))
}

/// A call's line (see the module docs), with who let it run if it was held.
fn call_line_of<'a>(
    time: &'a str,
    node_id: &'a str,
    operation: &'a str,
    args: Option<&'a Map<String, Value>>,
    error: Option<&'a str>,
    started: Instant,
    (decided, command, unconfined): (Option<&'a str>, Option<&'a CommandEnd>, Option<&'a str>),
) -> Line<'a> {
    let mut line = line_of(time, Some(node_id), operation, args, error, started);
    line.decided = decided.map(|d| Cut(d, TEXT_CHARS));
    line.command = command;
    line.unconfined = unconfined.map(|why| Cut(why, ERROR_CHARS));
    line
}

/// The `by` of what the person did.
pub const PERSON: &str = "person";

/// The operations only the person does, named as such in their lines (beside the
/// catalogue's, which the person's actions from the view also use).
const PERSON_OPERATIONS: [&str; 7] = [
    "link",
    "unlink",
    "browser_control",
    "approve",
    "policy_rule",
    "worktree_merge",
    "worktree_discard",
];

/// A call's line, by `node_id` (an agent) or nobody yet (the caller sets `by`).
fn line_of<'a>(
    time: &'a str,
    node_id: Option<&'a str>,
    operation: &'a str,
    args: Option<&'a Map<String, Value>>,
    error: Option<&'a str>,
    started: Instant,
) -> Line<'a> {
    Line {
        time,
        node_id,
        by: None,
        operation: Some(Cut(operation, TEXT_CHARS)),
        outcome: if error.is_some() { "error" } else { "ok" },
        error: error.map(|e| Cut(e, ERROR_CHARS)),
        duration_ms: Some(started.elapsed().as_millis() as u64),
        status: None,
        peer_port: None,
        args: args.filter(|args| !args.is_empty()).map(CutArgs),
        decided: None,
        command: None,
        unconfined: None,
    }
}

/// A refused request's line (see the module docs).
fn refused_line(
    node_id: Option<&str>,
    status: u16,
    reason: &str,
    peer_port: Option<u16>,
) -> Vec<u8> {
    let time = now_rfc3339();
    let line = Line {
        time: time.as_str(),
        node_id,
        by: None,
        operation: None,
        outcome: "error",
        error: Some(Cut(reason, ERROR_CHARS)),
        duration_ms: None,
        status: Some(status),
        peer_port,
        args: None,
        decided: None,
        command: None,
        unconfined: None,
    };
    to_line(&line)
}

fn to_line(line: &Line<'_>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256); // most lines fit: one allocation
    line.put(&mut bytes);
    bytes
}

/// [`ActivityLine`] as written, from borrowed parts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation: Option<Cut<'a>>,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Cut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<CutArgs<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided: Option<Cut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a CommandEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unconfined: Option<Cut<'a>>,
}

/// A string serialized cut to its first `.1` characters (with `…` when cut).
struct Cut<'a>(&'a str, usize);

impl Serialize for Cut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&cut_chars(self.0, self.1))
    }
}

/// Arguments serialized with every string cut to [`TEXT_CHARS`].
struct CutArgs<'a>(&'a Map<String, Value>);

impl Serialize for CutArgs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            map.serialize_entry(&Cut(key, TEXT_CHARS), &CutValue(value))?;
        }
        map.end()
    }
}

struct CutValue<'a>(&'a Value);

impl Serialize for CutValue<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::String(text) => Cut(text, TEXT_CHARS).serialize(serializer),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&CutValue(item))?;
                }
                seq.end()
            }
            Value::Object(map) => CutArgs(map).serialize(serializer),
            other => other.serialize(serializer),
        }
    }
}

/// Now as RFC 3339 in UTC with milliseconds.
pub(crate) fn now_rfc3339() -> Rfc3339 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, made without `format!` or an allocation: every line
/// has one, and on the call path `format!` was most of a line's cost.
pub(crate) struct Rfc3339([u8; 24]);

impl Rfc3339 {
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits and separators are ever written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// `ms` milliseconds after the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn rfc3339_millis(ms: u64) -> Rfc3339 {
    rfc3339(ms / 1000, (ms % 1000) as u32)
}

/// `secs` after the Unix epoch (and `millis`) as `YYYY-MM-DDTHH:MM:SS.mmmZ` (years
/// past 9999 keep their last four digits).
fn rfc3339(secs: u64, millis: u32) -> Rfc3339 {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: u64| {
        for digit in out[at..at + width].iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, year.max(0) as u64);
    put(5, 2, u64::from(month));
    put(8, 2, u64::from(day));
    put(11, 2, rest / 3600);
    put(14, 2, rest / 60 % 60);
    put(17, 2, rest % 60);
    put(20, 3, u64::from(millis));
    Rfc3339(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(rfc3339(0, 0).as_str(), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 7).as_str(), "2000-02-29T00:00:00.007Z");
        assert_eq!(
            rfc3339(1_764_590_584, 512).as_str(),
            "2025-12-01T12:03:04.512Z"
        );
        assert_eq!(
            rfc3339(4_102_444_799, 999).as_str(),
            "2099-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn strings_are_cut_to_200_characters_and_marked() {
        let long = "é".repeat(300);
        let args = json!({ "text": long, "nodeIds": ["a", "b"], "x": 1.5 });
        let line = call_line(
            "me",
            "sticky_open",
            args.as_object(),
            None,
            Instant::now(),
            (None, None, None),
        );
        let read: ActivityLine = serde_json::from_slice(&line).unwrap();
        let text = read.args.as_ref().unwrap()["text"].as_str().unwrap();
        assert_eq!(text.chars().count(), TEXT_CHARS + 1);
        assert!(text.ends_with('…'));
        assert_eq!(read.args.unwrap()["nodeIds"], json!(["a", "b"]));
        assert_eq!(read.outcome, "ok");
        assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'));
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-activity-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn line(i: u64) -> Vec<u8> {
        let args = json!({ "maxChars": i });
        call_line(
            "me",
            "terminal_read",
            args.as_object(),
            None,
            Instant::now(),
            (None, None, None),
        )
    }

    fn batch(project: &str, from: u64, n: u64) -> HashMap<String, Lines> {
        let mut lines = Lines::default();
        for i in from..from + n {
            lines.push(&line(i));
        }
        HashMap::from([(project.to_string(), lines)])
    }

    #[test]
    fn rotation_keeps_the_current_and_one_previous_file() {
        let dir = scratch("rotate");
        let mut writer = Writer::new(dir.clone(), 4096);
        for round in 0..40 {
            writer.write_batch(&mut batch("p1", round * 10, 10));
        }
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["p1.jsonl", "p1.jsonl.1"]);
        for name in &names {
            let meta = fs::metadata(dir.join(name)).unwrap();
            assert!(meta.len() <= 4096, "{name}: {} bytes", meta.len());
            assert_eq!(meta.mode() & 0o777, 0o600, "{name}");
        }
        // The newest lines, in order, across both files; the last is call 399.
        let tail = read_tail(&dir, "p1", 20);
        let numbers: Vec<u64> = tail
            .iter()
            .map(|l| l.args.as_ref().unwrap()["maxChars"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (380..400).collect::<Vec<_>>());
        assert_eq!(writer.dropped, 0);
    }

    #[test]
    fn a_planted_symlink_or_fifo_is_not_followed_and_its_lines_are_counted() {
        let dir = scratch("planted");
        let outside = dir.join("outside.txt");
        fs::write(&outside, b"untouched").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("p1.jsonl")).unwrap();
        crate::sys::fd::mkfifo(&dir.join("p2.jsonl"), 0o600).unwrap();
        let mut writer = Writer::new(dir.clone(), ROTATE_BYTES);
        writer.write_batch(&mut batch("p1", 0, 3));
        writer.write_batch(&mut batch("p2", 0, 4));
        assert_eq!(fs::read(&outside).unwrap(), b"untouched");
        assert_eq!(writer.dropped, 7);
        assert!(read_tail(&dir, "p1", 10).is_empty() && read_tail(&dir, "p2", 10).is_empty());
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_the_next_starts_on_its_own() {
        let dir = scratch("torn");
        let whole = call_line(
            "me",
            "canvas_list",
            None,
            None,
            Instant::now(),
            (None, None, None),
        );
        let mut text = whole.clone();
        text.extend_from_slice(b"{\"time\":\"2026-");
        fs::write(dir.join("p1.jsonl"), &text).unwrap();
        fs::set_permissions(dir.join("p1.jsonl"), fs::Permissions::from_mode(0o600)).unwrap();
        let mut writer = Writer::new(dir.clone(), ROTATE_BYTES);
        writer.write_batch(&mut batch("p1", 7, 1));
        let lines = read_tail(&dir, "p1", 10);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[1].args.as_ref().unwrap()["maxChars"], 7);
    }

    /// The maxChars of each line queued for `project` in `batch`.
    fn numbers_in(batch: &HashMap<String, Lines>, project: &str) -> Vec<u64> {
        batch[project]
            .bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice::<ActivityLine>(l).unwrap())
            .map(|l| l.args.unwrap()["maxChars"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn queued_lines_are_bounded_go_to_their_project_and_refusals_to_every_one() {
        let pending = Pending::default();
        // A refusal before any project has sessions has nowhere to go.
        pending.queue(None, &line(0));
        assert_eq!(pending.dropped.load(Ordering::Relaxed), 1);
        lock_or_recover(&pending.queued)
            .projects
            .insert("p2".into(), Lines::default());
        pending.queue(Some("p1"), &line(1));
        pending.queue(None, &line(2));
        pending.queue(Some("p1"), &line(3));
        let mut batch = HashMap::new();
        assert_eq!(pending.take(&mut batch), Some(false));
        assert_eq!(numbers_in(&batch, "p1"), [1, 2, 3]);
        assert_eq!(numbers_in(&batch, "p2"), [2]);
        assert_eq!(lock_or_recover(&pending.queued).lines, 0);
        // The writer's emptied buffers go back to the queue: no new allocation.
        let room = batch["p1"].bytes.capacity();
        Writer::new(scratch("swap"), ROTATE_BYTES).write_batch(&mut batch);
        pending.queue(Some("p1"), &line(4));
        assert_eq!(pending.take(&mut batch), Some(false));
        assert_eq!(numbers_in(&batch, "p1"), [4]);
        assert_eq!(
            lock_or_recover(&pending.queued).projects["p1"]
                .bytes
                .capacity(),
            room
        );
        // Past QUEUED_LINES waiting, each further line is dropped and counted.
        for i in 0..QUEUED_LINES as u64 + 5 {
            pending.queue(Some("p1"), &line(i));
        }
        assert_eq!(pending.dropped.load(Ordering::Relaxed), 1 + 5);
        let mut batch = HashMap::new();
        pending.take(&mut batch);
        assert_eq!(batch["p1"].count, QUEUED_LINES as u64);
    }

    #[test]
    fn stopping_writes_what_is_queued_and_ends_the_writer() {
        let dir = scratch("stop");
        let trail = Trail::start(dir.clone()).unwrap();
        trail.add_project("p1");
        for i in 0..100 {
            trail.record("p1", &line(i));
        }
        trail.record_refused(&refused_line(None, 401, "Unauthorized", Some(4242)));
        trail.stop();
        trail.stop(); // idempotent
        let lines = read_tail(&dir, "p1", 200);
        assert_eq!(lines.len(), 101);
        assert_eq!(lines[100].peer_port, Some(4242));
        // Lines recorded after the stop are not written and do not block.
        trail.record("p1", &line(7));
        assert_eq!(read_tail(&dir, "p1", 200).len(), 101);
        assert_eq!(trail.dropped(), 0);
    }

    fn call_display(operation: &str, args: Value, error: Option<&str>) -> ActivityLine {
        ActivityLine {
            time: "2026-12-01T12:03:04.512Z".into(),
            node_id: Some("me".into()),
            by: None,
            operation: Some(operation.into()),
            outcome: "error".into(),
            error: error.map(str::to_string),
            duration_ms: Some(1),
            status: None,
            peer_port: None,
            args: args.as_object().cloned(),
            decided: None,
            command: None,
            unconfined: None,
        }
    }

    #[test]
    fn the_display_line_escapes_what_a_terminal_would_act_on_and_marks_unknown_operations() {
        let forged = "\r\x1b[2K\x1b[1A12:03:04.000  me  canvas_list  ok";
        let args = json!({
            "nodeId": "t\u{9b}2J",
            "command": "echo \u{202e}txt.exe",
            "title": "\x1b]0;x\x07",
            "path": "a\\b",
            "nodeIds": ["\u{200b}"],
        });
        let line = call_display(forged, args, Some("Unknown node id: \x1b[8m\u{feff}"));
        let shown = line.display((2, 20));
        assert_eq!(
            shown,
            "12:03:04.512  me  (unknown) \"\\r\\x1b[2K\\x1b[1A12:03:04.000  me  canvas_list  ok\"  \
             error  1 ms  \"t\\x9b2J\" \"echo \\u202etxt.exe\" [\"\\u200b\"] \"a\\\\b\" \
             \"\\x1b]0;x\\x07\"  Unknown node id: \\x1b[8m\\ufeff"
        );
        assert!(!shown.chars().any(is_escaped_for_terminal), "{shown:?}");
        // A catalogue operation is shown as it is.
        let known = call_display("canvas_list", json!({}), None);
        assert!(known.display((2, 11)).contains("  me  canvas_list  error"));
    }

    #[test]
    fn every_field_is_cut_and_no_width_can_panic() {
        let huge = "x".repeat(9_000_000);
        let mut line = call_display(&huge, json!({ "text": huge }), Some(&huge));
        line.node_id = Some(huge.clone());
        line.outcome = huge.clone();
        line.time = huge.clone();
        let shown = line.display((usize::MAX, usize::MAX));
        assert!(shown.len() < 2_000, "{} bytes", shown.len());
        assert!(line.operation_column().starts_with("(unknown) \"xxx"));
        assert!(line.operation_column().ends_with("…\""));
    }

    #[test]
    fn the_display_line_is_aligned_and_quotes_text_with_spaces() {
        let line = ActivityLine {
            time: "2026-12-01T12:03:04.512Z".into(),
            node_id: Some("me".into()),
            by: None,
            operation: Some("terminal_submit".into()),
            outcome: "ok".into(),
            error: None,
            duration_ms: Some(3),
            status: None,
            peer_port: None,
            args: json!({ "nodeId": "term-81591085", "command": "cargo test" })
                .as_object()
                .cloned(),
            decided: None,
            command: None,
            unconfined: Some("serve --isolation off".into()),
        };
        assert_eq!(
            line.display((2, 15)),
            "12:03:04.512  me  terminal_submit  ok     3 ms  term-81591085 \"cargo test\"  unconfined (serve --isolation off)"
        );
    }

    #[test]
    fn a_waited_commands_end_is_in_its_line_and_nothing_else_of_the_answer() {
        let answer = ToolResult::Ok(json!({
            "nodeId": "t1", "commandId": 3, "command": "cargo test", "state": "exited",
            "exitCode": 101, "durationMs": 3004, "output": "secret output", "cwd": "/tmp",
        }));
        let command = CommandEnd::of_answer("terminal_wait", &answer).unwrap();
        let args = json!({ "nodeId": "t1" });
        let line = call_line(
            "me",
            "terminal_wait",
            args.as_object(),
            None,
            Instant::now(),
            (None, Some(&command), None),
        );
        assert!(!String::from_utf8_lossy(&line).contains("secret"));
        let read: ActivityLine = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            read.command,
            Some(CommandEnd {
                state: "exited".into(),
                exit_code: Some(101),
                duration_ms: Some(3004),
            })
        );
        assert!(read
            .display((2, 13))
            .ends_with("t1  command exited 101 after 3004 ms"));
        // Only the command calls' answers, and only those with a state.
        assert_eq!(CommandEnd::of_answer("canvas_list", &answer), None);
        let submitted = ToolResult::Ok(json!({ "nodeId": "t1" }));
        assert_eq!(CommandEnd::of_answer("terminal_submit", &submitted), None);
        // A state no answer has is shown inert and cut.
        let mut forged = read;
        forged.command.as_mut().unwrap().state = "\x1b[2Kexited".repeat(10);
        let shown = forged.display((2, 13));
        assert!(!shown.contains('\x1b'), "{shown:?}");
    }

    #[test]
    fn the_person_is_shown_in_parentheses_which_no_node_id_has() {
        let mut line = call_display("canvas_move", json!({ "nodeId": "t1" }), None);
        line.node_id = None;
        line.by = Some(PERSON.into());
        assert!(line
            .display((8, 11))
            .contains("  (person)  canvas_move  error"));
        assert!(!crate::protocol::is_valid_node_id("(person)"));
    }
}
