//! Terminal commands an agent waits for: `terminal_submit` with `wait`, `terminal_wait`
//! and `terminal_read` with `command`. What a command is doing comes from the host's
//! [`Terminals`]: its shell's reports when it has integration, else the kernel's view of
//! the foreground and the output written since the submit. The server's waiter asks again
//! ([`Awaited::check`]) until the call is done.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::host::{CommandOutput, CommandRecord, CommandState, Foreground, OutputMark};
use super::host::{ShellIntegration, Terminals};
use crate::base::unix_millis;
use crate::protocol::limits::{COMMAND_OUTPUT_DEFAULT_CHARS, IDLE_MS};
use crate::server::{Awaited, Outcome};

/// Without integration, a shell that has the terminal again and has written nothing for
/// this long (with some output since the submit) has finished the command, even if the
/// command was too quick to be seen running.
const SETTLED_MS: u64 = 500;

/// What a waiting call waits for.
pub(super) enum Until {
    Exit,
    Idle,
    /// Plain text the output must contain (no regex).
    Pattern(String),
}

impl Until {
    /// From `terminal_submit`'s `wait` or `terminal_wait`'s `until` and `pattern`.
    pub(super) fn of(operation: &str, args: &Map<String, Value>) -> Result<Until, String> {
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
        let (until, pattern) = match (operation, args.get("wait")) {
            ("terminal_wait", _) => (text(args.get("until")), text(args.get("pattern"))),
            (_, Some(Value::Object(wait))) => (Some("pattern".into()), text(wait.get("pattern"))),
            (_, wait) => (text(wait), None),
        };
        match (until.as_deref(), pattern) {
            (Some("exit"), _) => Ok(Until::Exit),
            (Some("idle"), _) => Ok(Until::Idle),
            (Some("pattern"), Some(pattern)) => Ok(Until::Pattern(pattern)),
            _ => Err(
                "Missing argument: pattern (until \"pattern\" needs the text to wait for)".into(),
            ),
        }
    }
}

/// One terminal's command as far as the host can tell, and how to answer about it.
pub(super) struct Watched {
    pub(super) terminals: Arc<dyn Terminals>,
    pub(super) node_id: String,
    /// The command's id once its shell reported it.
    pub(super) id: Option<u64>,
    /// The terminal's last command before the submit: a later one is ours.
    pub(super) before: Option<u64>,
    /// Where the output stood at the submit (or the wait's start).
    pub(super) mark: Option<OutputMark>,
    /// The command line, when this call typed it.
    pub(super) line: Option<String>,
    /// Without integration: something other than the shell had the terminal since.
    pub(super) left_shell: bool,
    pub(super) since: Instant,
    pub(super) since_ms: u64,
    pub(super) max_chars: usize,
}

/// What was seen in one look at the terminal.
pub(super) struct Seen {
    integration: ShellIntegration,
    record: Option<CommandRecord>,
    state: &'static str,
    output: CommandOutput,
    last_output_ms: u64,
}

impl Watched {
    pub(super) fn new(
        terminals: Arc<dyn Terminals>,
        node_id: &str,
        max_chars: Option<f64>,
    ) -> Self {
        let default = COMMAND_OUTPUT_DEFAULT_CHARS as f64;
        Watched {
            terminals,
            node_id: node_id.to_string(),
            id: None,
            before: None,
            mark: None,
            line: None,
            left_shell: false,
            since: Instant::now(),
            since_ms: unix_millis(),
            max_chars: max_chars.unwrap_or(default).max(1.0) as usize,
        }
    }

    /// The command's record: the one with its id, else the first after `before`.
    fn record(&mut self) -> Option<CommandRecord> {
        let terminals = &self.terminals;
        if let Some(id) = self.id {
            return terminals.command(&self.node_id, Some(id));
        }
        let last = terminals.command(&self.node_id, None)?;
        if self.before.is_some_and(|before| last.id <= before) {
            return None;
        }
        self.id = Some(last.id);
        Some(last)
    }

    /// Looks at the terminal now.
    pub(super) fn look(&mut self) -> Seen {
        let node = self.node_id.clone();
        let terminals = Arc::clone(&self.terminals);
        let integration = terminals.integration(&node);
        let record = (integration != ShellIntegration::None)
            .then(|| self.record())
            .flatten();
        let foreground = terminals.foreground(&node);
        if matches!(foreground, Some(f) if f != Foreground::Shell && f != Foreground::Ended) {
            self.left_shell = true;
        }
        let written = self
            .mark
            .and_then(|m| terminals.output_since(&node, m.position));
        let last_output_ms = match (&record, &written) {
            (Some(record), _) => record.last_output_at,
            (None, Some((_, mark))) => mark.last_output_at,
            (None, None) => 0,
        }
        .max(self.since_ms);
        let quiet_ms = unix_millis().saturating_sub(last_output_ms);
        let gone = terminals.ended(&node).is_some()
            || foreground == Some(Foreground::Ended)
            || !terminals.has_live_session(&node);
        let by_foreground = match foreground {
            Some(Foreground::AwaitingInput) => "awaiting_input",
            Some(Foreground::Fullscreen) => "fullscreen",
            _ => "running",
        };
        let state = match (&record, integration) {
            _ if gone => "ended",
            (Some(record), _) if record.state != CommandState::Running => record.state.name(),
            (_, ShellIntegration::None) if foreground == Some(Foreground::Shell) => {
                let wrote = written.as_ref().is_some_and(|(o, _)| !o.head.is_empty());
                let settled = wrote && quiet_ms >= SETTLED_MS;
                if self.left_shell || settled {
                    "exited"
                } else {
                    "running"
                }
            }
            _ => by_foreground,
        };
        let output = match (&record, written) {
            (Some(record), _) => record.output.clone(),
            (None, Some((output, _))) => output,
            (None, None) => CommandOutput::default(),
        };
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
        let state = match seen.state {
            "running" if deadline_came => "timed_out",
            state => state,
        };
        let (output, truncated) = head_and_tail(&seen.output, self.max_chars);
        let ended_ms = record.and_then(|r| r.ended_at).unwrap_or_else(unix_millis);
        let started_ms = record.map_or(self.since_ms, |r| r.started_at);
        json!({
            "nodeId": self.node_id,
            "commandId": record.map(|r| r.id),
            "command": record.map(|r| r.command.clone()).or_else(|| self.line.clone()),
            "state": state,
            "exitCode": record.filter(|_| state == "exited").and_then(|r| r.exit_code),
            "output": output,
            "truncated": truncated,
            "durationMs": ended_ms.saturating_sub(started_ms),
            "cwd": record.and_then(|r| r.cwd.clone()),
            "integration": seen.integration.name(),
        })
    }
}

/// A call waiting for a command: until it exits, goes idle or prints a pattern.
pub(super) struct CommandWait {
    pub(super) watched: Watched,
    pub(super) until: Until,
}

impl CommandWait {
    fn done(&self, seen: &Seen) -> bool {
        match (seen.state, &self.until) {
            ("exited" | "ended", _) => true,
            // A dev server may read keys while it runs: only its text ends a pattern wait.
            ("awaiting_input" | "fullscreen", until) => !matches!(until, Until::Pattern(_)),
            (_, Until::Exit) => false,
            (_, Until::Idle) => {
                let now = unix_millis();
                now.saturating_sub(seen.last_output_ms) >= IDLE_MS
                    && self.watched.since.elapsed().as_millis() >= u128::from(IDLE_MS)
            }
            (_, Until::Pattern(pattern)) => {
                let text = format!("{}\n{}", seen.output.head, seen.output.tail);
                // Without integration the output starts with the echoed command line.
                let line = self
                    .watched
                    .line
                    .as_deref()
                    .filter(|_| seen.record.is_none());
                let after_line = line.and_then(|l| text.find(l).map(|at| at + l.len()));
                text[after_line.unwrap_or(0)..].contains(pattern.as_str())
            }
        }
    }
}

impl Awaited for CommandWait {
    fn check(&mut self) -> Option<Outcome> {
        let seen = self.watched.look();
        self.done(&seen)
            .then(|| Ok(self.watched.answer(&seen, false)))
    }

    fn at_deadline(&mut self) -> Outcome {
        let seen = self.watched.look();
        Ok(self.watched.answer(&seen, true))
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
    let text = format!(
        "{}\n[… {left_out} characters left out …]\n{}",
        chars[..head].iter().collect::<String>(),
        chars[chars.len() - tail..].iter().collect::<String>()
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
