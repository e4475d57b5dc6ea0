//! Shell integration for the terminals the host starts: the injected start-up code
//! ([`inject`]), the marks it prints and their parser ([`marks`]), the commands they
//! report ([`records`]) and the plain text of their output ([`text`]).
//!
//! A terminal's [`ShellSession`] sits in its output path: every chunk the program wrote
//! goes through [`ShellSession::feed`], which takes our verified marks out (the rest goes
//! to the screen and scrollback) and updates the records. Nothing runs in between: an
//! idle terminal costs nothing, and what the kernel says (foreground group, blocked
//! reads) is asked only when someone asks.
//!
//! Integrity: if the nonce ever shows in plain output, some program learnt it and could
//! forge marks from then on, so the terminal's integration ends for the rest of its life
//! ([`ShellSession::integrity_lost`]; its records stay as they were). Rotating the nonce
//! would need the shell to read a new file before its next prompt, and a program that
//! learnt one nonce the way it did (`set -x`, `declare -p`) would learn the next.

pub mod inject;
pub mod kernel;
pub mod marks;
pub mod records;
pub mod text;

use marks::{Mark, MarkParser};
use records::Commands;
pub use records::ShellProbe;

use serde_json::{json, Value};

use crate::base::unix_millis;
use crate::runtime::{CommandRecord, CommandState, ShellIntegration};

/// A shell terminal's commands as listings show them (`canvas_list`'s `session.shell`,
/// the canvas view): its integration and its last command, without that command's
/// output. Without integration nothing is known of commands, and nothing is claimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellStatus {
    /// What reports the commands (`None`: nothing does).
    pub integration: ShellIntegration,
    /// The last command the shell reported (output left empty), its state refined as
    /// `Terminals::command` refines it (awaiting input, full screen).
    pub last: Option<CommandRecord>,
}

impl ShellStatus {
    /// No integration: nothing known of commands.
    pub const NONE: ShellStatus = ShellStatus {
        integration: ShellIntegration::None,
        last: None,
    };

    /// `{"integration", "command": null | {commandId, command, state, exitCode, cwd,
    /// durationMs, endedAt}}`: `durationMs` so far while it runs; `endedAt` (RFC 3339)
    /// and `exitCode` once it exited. Without integration, only `integration`.
    pub fn to_json(&self) -> Value {
        if self.integration == ShellIntegration::None {
            return json!({ "integration": "none" });
        }
        let command = self.last.as_ref().map(|record| {
            let ended_at = record
                .ended_at
                .filter(|_| record.state == CommandState::Exited);
            let until = ended_at.unwrap_or_else(unix_millis);
            json!({
                "commandId": record.id,
                "command": record.command,
                "state": record.state.name(),
                "exitCode": record.exit_code,
                "cwd": record.cwd,
                "durationMs": until.saturating_sub(record.started_at),
                "endedAt": ended_at.map(crate::host::terminals::rfc3339_utc),
            })
        });
        json!({ "integration": self.integration.name(), "command": command })
    }
}

/// One terminal's shell integration state.
#[derive(Debug)]
pub struct ShellSession {
    kind: ShellIntegration,
    parser: MarkParser,
    commands: Commands,
    /// A verified mark arrived: the injection reached the shell.
    reached: bool,
    integrity_lost: bool,
    /// Verified marks applied so far (a change a waiting call may want to see).
    marks_applied: u64,
}

impl ShellSession {
    /// A session for a `kind` shell whose marks carry `nonce`.
    pub fn new(kind: ShellIntegration, nonce: &str) -> ShellSession {
        ShellSession {
            kind,
            parser: MarkParser::new(nonce),
            commands: Commands::default(),
            reached: false,
            integrity_lost: false,
            marks_applied: 0,
        }
    }

    /// Takes our marks out of `chunk` (written at unix ms `now`) and returns the rest.
    /// `probe` is asked when a command's start or end arrives (see [`records`]).
    pub fn feed(&mut self, chunk: &[u8], now: u64, probe: &mut dyn ShellProbe) -> Vec<u8> {
        let parsed = self.parser.feed(chunk);
        if parsed.nonce_seen && !self.integrity_lost {
            self.integrity_lost = true;
            self.commands.lose();
        }
        if self.integrity_lost {
            return parsed.plain;
        }
        let mut from = 0;
        for (at, mark) in parsed.marks {
            self.commands.output(&parsed.plain[from..at], now);
            from = at;
            self.reached = true;
            self.marks_applied += 1;
            // POSIX `sh` prints no start (the host records it): one is forged.
            if self.kind == ShellIntegration::Sh && matches!(mark, Mark::CommandStart(_)) {
                continue;
            }
            self.commands.apply(mark, now, probe);
        }
        self.commands.output(&parsed.plain[from..], now);
        parsed.plain
    }

    /// The shell's integration: its kind once a verified mark came and while the nonce
    /// is secret, else `None`.
    pub fn integration(&self) -> ShellIntegration {
        match self.reached && !self.integrity_lost {
            true => self.kind,
            false => ShellIntegration::None,
        }
    }

    /// How many verified marks were applied so far.
    pub fn marks_applied(&self) -> u64 {
        self.marks_applied
    }

    /// Whether the nonce showed in plain output (see the module docs).
    pub fn integrity_lost(&self) -> bool {
        self.integrity_lost
    }

    /// The host typed `line` and Enter: POSIX `sh` gets its start recorded (see
    /// [`Commands::start_typed`]); bash and zsh report their own, which is labelled
    /// `line`, what was submitted, rather than what the shell says (bash's history may
    /// have left it out). True if a command started.
    pub fn start_typed(&mut self, line: &str, now: u64) -> bool {
        if self.integration() == ShellIntegration::None {
            return false;
        }
        match self.kind {
            ShellIntegration::Sh => self.commands.start_typed(line, now),
            _ => {
                self.commands.label_next(line);
                false
            }
        }
    }

    /// Whether a reported command runs now.
    pub fn command_running(&self) -> bool {
        self.integration() != ShellIntegration::None && self.commands.running()
    }

    /// Whether the last command's end waits for the shell to be seen at its prompt.
    pub fn end_unconfirmed(&self) -> bool {
        self.commands.unconfirmed()
    }

    /// The shell was seen waiting at its prompt (see [`Commands::confirm`]).
    pub fn confirm_end(&mut self) {
        self.commands.confirm();
    }

    /// A record (see [`Commands::record`]).
    pub fn record(&self, id: Option<u64>) -> Option<CommandRecord> {
        self.commands.record(id)
    }

    /// What listings show (see [`ShellStatus`]); the last command's state unrefined.
    pub fn status(&self) -> ShellStatus {
        match self.integration() {
            ShellIntegration::None => ShellStatus::NONE,
            integration => ShellStatus {
                integration,
                last: self.commands.last_without_output(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_make_records_and_a_leaked_nonce_ends_integration() {
        let nonce = "feedfacefeedfacefeedfacefeedface";
        let mark = |payload: &str| format!("\x1b]5379;{nonce};{payload}\x07");
        let mut session = ShellSession::new(ShellIntegration::Bash, nonce);
        let mut yes = records::tests::Probe::shell();
        assert_eq!(session.integration(), ShellIntegration::None);
        let first = format!("{}{}$ ", mark("D;0"), mark("A"));
        assert_eq!(session.feed(first.as_bytes(), 1, &mut yes), b"$ ");
        assert_eq!(session.integration(), ShellIntegration::Bash);
        let run = format!(
            "ls\r\n{}{}a b\r\n{}{}",
            mark("B;ls"),
            mark("C"),
            mark("D;0"),
            mark("A")
        );
        assert_eq!(session.feed(run.as_bytes(), 2, &mut yes), b"ls\r\na b\r\n");
        let record = session.record(None).unwrap();
        assert_eq!(
            (record.command.as_str(), record.output.head.as_str()),
            ("ls", "a b\n")
        );
        assert!(!session.start_typed("ls", 3), "bash reports its own starts");
        let leak = format!("{}{}nonce is {nonce}\n", mark("B;set -x"), mark("C"));
        session.confirm_end();
        session.feed(leak.as_bytes(), 4, &mut yes);
        assert!(session.integrity_lost());
        assert_eq!(session.integration(), ShellIntegration::None);
        session.feed(mark("D;0").as_bytes(), 5, &mut yes);
        assert!(!session.command_running());
    }
}
