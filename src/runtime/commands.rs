//! Terminal commands an agent waits for: `terminal_submit` with `wait`, `terminal_wait`
//! and `terminal_read` with `command`. What a command does comes from the host's
//! [`Terminals`]: its shell's reports with integration, else the kernel's view of the
//! foreground and the output since the submit. The server's waiter asks [`Awaited::check`].

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::host::{CommandOutput, CommandRecord, CommandState, Foreground, OutputMark};
use super::host::{ShellIntegration, Terminals};
use crate::base::unix_millis;
use crate::protocol::limits::{COMMAND_OUTPUT_DEFAULT_CHARS, IDLE_MS};
use crate::server::{Awaited, Outcome};

/// Without integration, a shell that has the terminal again and wrote nothing for this
/// long (after some output) has finished the command, even one too quick to be seen.
const SETTLED_MS: u64 = 500;

/// A command in one terminal as far as the host can tell, and what a call waits for.
pub(super) struct Watched {
    terminals: Arc<dyn Terminals>,
    node_id: String,
    /// Its id once its shell reported it; else the first command after `before` is it.
    id: Option<u64>,
    before: Option<u64>,
    /// The output position at the submit (or the wait's start), and the typed line.
    mark: Option<OutputMark>,
    line: Option<String>,
    /// Without integration: something but the shell had the terminal since.
    left_shell: bool,
    since_ms: u64,
    max_chars: usize,
    /// `exit`, `idle` or the plain text of `{pattern}`.
    until: (String, Option<String>),
    /// The last look saw the program waiting for typing. It must be seen twice in a row
    /// (a tick apart) to end a wait: an answer just typed may not be read yet.
    seen_waiting: bool,
}

/// One look at the terminal.
pub(super) struct Seen {
    integration: ShellIntegration,
    record: Option<CommandRecord>,
    state: &'static str,
    output: CommandOutput,
    last_output_ms: u64,
}

/// What `args` wait for: `wait` of `terminal_submit`, `until`/`pattern` of `terminal_wait`.
fn until(args: &Map<String, Value>) -> Result<(String, Option<String>), String> {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    let until = match args.get("wait").or(args.get("until")) {
        Some(Value::Object(wait)) => ("pattern".into(), text(wait.get("pattern"))),
        until => (text(until).unwrap_or_default(), text(args.get("pattern"))),
    };
    match until {
        (kind, None) if kind == "pattern" => {
            Err("Missing argument: pattern (until \"pattern\" needs the text to wait for)".into())
        }
        until => Ok(until),
    }
}

impl Watched {
    /// The command of `node_id` a call watches: typed now (`line`), or one already
    /// running (`terminal_wait`: `commandId`, else the last).
    pub(super) fn new(
        terminals: &Arc<dyn Terminals>,
        node_id: &str,
        line: Option<&str>,
        args: &Map<String, Value>,
    ) -> Result<Watched, String> {
        let max_chars = args.get("maxChars").and_then(Value::as_f64);
        let id = args
            .get("commandId")
            .or(args.get("command"))
            .and_then(Value::as_f64);
        let mut watched = Watched {
            terminals: Arc::clone(terminals),
            node_id: node_id.to_string(),
            id: id.map(|id| id as u64),
            before: None,
            mark: terminals.output_mark(node_id),
            line: line.map(str::to_string),
            // Waiting for what runs now: a shell that has the terminal means it ended.
            left_shell: line.is_none(),
            since_ms: unix_millis(),
            max_chars: max_chars.unwrap_or(COMMAND_OUTPUT_DEFAULT_CHARS as f64) as usize,
            until: match args.contains_key("wait") || args.contains_key("until") {
                true => until(args)?,
                false => Default::default(),
            },
            seen_waiting: false,
        };
        let integrated = terminals.integration(node_id) != ShellIntegration::None;
        if line.is_some() {
            watched.before = terminals.command(node_id, None).map(|last| last.id);
        } else if integrated && watched.record().is_none() {
            let id = watched.id.map_or("yet".into(), |id| id.to_string());
            return Err(format!("No command {id} in this terminal: take commandId from terminal_submit's answer, or leave it out for the last one"));
        }
        terminals.watch(node_id, true);
        Ok(watched)
    }

    /// Why a waited submit must not type now: a command still runs there.
    pub(super) fn busy(terminals: &dyn Terminals, node_id: &str) -> Result<(), String> {
        let last = terminals.command(node_id, None);
        let ended = [
            CommandState::Exited,
            CommandState::Ended,
            CommandState::Unknown,
        ];
        let last = last.filter(|c| !ended.contains(&c.state));
        let foreground = terminals.foreground(node_id);
        let which = match (last, foreground) {
            (Some(c), _) => format!("Command {} ({}) is still running", c.id, c.command),
            (None, Some(Foreground::Shell | Foreground::Ended) | None) => return Ok(()),
            (None, Some(_)) => "A program is still running".into(),
        };
        Err(format!("{which} in this terminal: wait for it with terminal_wait, stop it with terminal_interrupt, or pass force: true to type this line into it as input"))
    }

    /// The command's record: the one with its id, else the first after `before`.
    fn record(&mut self) -> Option<CommandRecord> {
        let last = self.terminals.command(&self.node_id, self.id)?;
        if self.before.is_some_and(|before| last.id <= before) {
            return None;
        }
        self.id = Some(last.id);
        Some(last)
    }

    /// Looks at the terminal now.
    pub(super) fn look(&mut self) -> Seen {
        let (terminals, node) = (Arc::clone(&self.terminals), &self.node_id.clone());
        let integration = terminals.integration(node);
        let record = (integration != ShellIntegration::None)
            .then(|| self.record())
            .flatten();
        let foreground = terminals.foreground(node);
        self.left_shell |= !matches!(
            foreground,
            None | Some(Foreground::Shell | Foreground::Ended)
        );
        let written = self
            .mark
            .and_then(|m| terminals.output_since(node, m.position));
        let last_output_ms = match (&record, &written) {
            (Some(record), _) => record.last_output_at,
            (None, Some((_, mark))) => mark.last_output_at,
            (None, None) => 0,
        };
        let last_output_ms = last_output_ms.max(self.since_ms);
        let gone = terminals.ended(node).is_some() || foreground == Some(Foreground::Ended);
        let settled = written.as_ref().is_some_and(|(o, _)| !o.head.is_empty())
            && unix_millis().saturating_sub(last_output_ms) >= SETTLED_MS;
        let state = match (&record, foreground) {
            _ if gone || !terminals.has_live_session(node) => "ended",
            (Some(record), _) if record.state != CommandState::Running => record.state.name(),
            (_, Some(Foreground::AwaitingInput)) => "awaiting_input",
            (_, Some(Foreground::Fullscreen)) => "fullscreen",
            (None, Some(Foreground::Shell))
                if integration == ShellIntegration::None && (self.left_shell || settled) =>
            {
                "exited"
            }
            _ => "running",
        };
        let output = record.as_ref().map(|r| r.output.clone());
        let output = output.or(written.map(|(output, _)| output));
        // A host that keeps no output positions: the screen, the best it can show.
        let screen = || {
            terminals.capture(node).map(|head| CommandOutput {
                head,
                ..Default::default()
            })
        };
        let output = output.or_else(screen).unwrap_or_default();
        Seen {
            integration,
            record,
            state,
            output,
            last_output_ms,
        }
    }

    /// The answer about what `seen` shows; `timed_out` for a running command when the
    /// wait's deadline came.
    pub(super) fn answer(&self, seen: &Seen, deadline_came: bool) -> Value {
        let record = seen.record.as_ref();
        let state = if deadline_came && seen.state == "running" {
            "timed_out"
        } else {
            seen.state
        };
        let (output, truncated) = head_and_tail(&seen.output, self.max_chars);
        let ended_ms = record.and_then(|r| r.ended_at).unwrap_or_else(unix_millis);
        json!({
            "nodeId": self.node_id,
            "commandId": record.map(|r| r.id),
            "command": record.map(|r| r.command.clone()).or_else(|| self.line.clone()),
            "state": state,
            "exitCode": record.filter(|_| state == "exited").and_then(|r| r.exit_code),
            "output": output,
            "truncated": truncated,
            "durationMs": ended_ms.saturating_sub(record.map_or(self.since_ms, |r| r.started_at)),
            "cwd": record.and_then(|r| r.cwd.clone()),
            "integration": seen.integration.name(),
        })
    }

    fn done(&mut self, seen: &Seen) -> bool {
        let (until, pattern) = (self.until.0.as_str(), self.until.1.as_deref());
        let waited_before =
            std::mem::replace(&mut self.seen_waiting, seen.state == "awaiting_input");
        match (seen.state, pattern) {
            ("exited" | "ended", _) => true,
            // A dev server may read keys while it runs: only its text ends a pattern wait.
            ("awaiting_input", None) => waited_before,
            ("fullscreen", pattern) => pattern.is_none(),
            (_, Some(pattern)) => {
                let text = format!("{}\n{}", seen.output.head, seen.output.tail);
                // Without integration the output starts with the echoed command line.
                let line = self.line.as_deref().filter(|_| seen.record.is_none());
                let after_line = line.and_then(|l| text.find(l).map(|at| at + l.len()));
                text[after_line.unwrap_or(0)..].contains(pattern)
            }
            _ => until == "idle" && unix_millis().saturating_sub(seen.last_output_ms) >= IDLE_MS,
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.terminals.watch(&self.node_id, false);
    }
}

impl Awaited for Watched {
    fn check(&mut self) -> Option<Outcome> {
        let seen = self.look();
        self.done(&seen).then(|| Ok(self.answer(&seen, false)))
    }

    fn at_deadline(&mut self) -> Outcome {
        let seen = self.look();
        Ok(self.answer(&seen, true))
    }
}

/// What a waited submit types for `line`, so that the shell runs all of it before it
/// reports an end. A line holding a line break or ending in a backslash (which joins it
/// to the next line) would run as several commands, each reporting its own end, the
/// first of which would answer the wait: it is typed as one brace group, `{ LINE` and
/// `}` on lines of their own with an empty line before (ending a backslash's
/// continuation), which the shell reads whole before it runs any of it and whose status
/// is its last command's. Carriage returns become line feeds, so the group is one Enter.
/// Refused where the shell reports no commands (no integration), since then nothing
/// tells one line's end from the last's.
pub(super) fn typed_as_one(line: &str, integration: ShellIntegration) -> Result<String, String> {
    let line = line.replace("\r\n", "\n").replace('\r', "\n");
    if !line.contains('\n') && !line.ends_with('\\') {
        return Ok(line);
    }
    match integration {
        ShellIntegration::Bash | ShellIntegration::Zsh | ShellIntegration::Sh => {
            Ok(format!("{{ {line}\n\n}}"))
        }
        _ => Err("A multi-line command (or one ending in a backslash) can be waited for only in a shell with integration, which reports its end; here it would be answered at its first line's end: submit its lines one at a time, or without wait".into()),
    }
}

/// `output` in at most `max` characters: all of it, or its head and (three times as
/// much) tail with a marker saying how much was left out; and whether any was.
pub(super) fn head_and_tail(output: &CommandOutput, max: usize) -> (String, bool) {
    let chars: Vec<char> = output.head.chars().chain(output.tail.chars()).collect();
    if output.omitted == 0 && chars.len() <= max {
        return (chars.into_iter().collect(), false);
    }
    // Room for the marker; what is kept splits a quarter head, the rest tail.
    let room = max.saturating_sub(48);
    let head = (room / 4).min(output.head.chars().count());
    let tail = (room - head).min(chars.len() - head);
    let left_out = (chars.len() - head - tail) as u64 + output.omitted;
    let (head, tail) = (&chars[..head], &chars[chars.len() - tail..]);
    let text = format!(
        "{}\n[… {left_out} characters left out …]\n{}",
        String::from_iter(head),
        String::from_iter(tail)
    );
    (text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(head: &str, tail: &str, omitted: u64) -> CommandOutput {
        CommandOutput {
            head: head.into(),
            tail: tail.into(),
            omitted,
        }
    }

    #[test]
    fn multi_line_commands_are_typed_as_one_group() {
        let bash = ShellIntegration::Bash;
        assert_eq!(typed_as_one("ls -l", bash).unwrap(), "ls -l");
        assert_eq!(
            typed_as_one("cd /\nfalse", bash).unwrap(),
            "{ cd /\nfalse\n\n}"
        );
        assert_eq!(
            typed_as_one("a\r\nb\rc", ShellIntegration::Sh).unwrap(),
            "{ a\nb\nc\n\n}"
        );
        assert_eq!(typed_as_one("echo a \\", bash).unwrap(), "{ echo a \\\n\n}");
        assert!(typed_as_one("cd /\nfalse", ShellIntegration::None).is_err());
        assert_eq!(typed_as_one("ls", ShellIntegration::None).unwrap(), "ls");
    }

    #[test]
    fn short_output_is_kept_whole() {
        assert_eq!(
            head_and_tail(&output("abc", "", 0), 200),
            ("abc".into(), false)
        );
    }

    #[test]
    fn long_output_keeps_head_and_tail_within_the_limit() {
        let long: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let (text, truncated) = head_and_tail(&output(&long, "", 0), 200);
        assert!(truncated);
        assert!(text.chars().count() <= 200, "{}", text.chars().count());
        assert!(text.starts_with("abcdefghij"), "{text}");
        assert!(text.ends_with(&long[long.len() - 100..]), "{text}");
        assert!(text.contains("[… 848 characters left out …]"), "{text}");
        // What the host already left out counts too.
        let (text, _) = head_and_tail(&output("start", "end", 5000), 200);
        assert_eq!(text, "start\n[… 5000 characters left out …]\nend");
    }
}
