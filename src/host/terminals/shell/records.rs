//! The commands a shell reported in one terminal, from its verified marks.
//!
//! A prompt cycle runs: command start (`B`, or the host's own start for POSIX `sh`),
//! output start (`C`), end (`D`), folder (`P`), prompt (`A`). An end counts only while a
//! command runs or just ended and no prompt has followed yet, and only when the caller
//! says the shell has the terminal again: a later valid end of the same cycle replaces
//! an earlier one (the last valid end is the real one), and an end outside a cycle (the
//! first prompt, an empty line, Ctrl+C at the prompt) is no command's.
//!
//! The foreground check is made when the reader parses the mark, which can be a moment
//! after it was written: a program that prints a forged end (with a leaked nonce) just
//! before it exits may be parsed while its shell, between two jobs of one line, holds
//! the terminal. So an end with its prompt is only *unconfirmed*: a later end replaces
//! it, and it becomes final once the caller sees the shell waiting at its prompt
//! ([`Commands::confirm`]: the shell's group has the terminal, the shell is blocked
//! reading it, and no output is left unread).
//!
//! A start counts only after an end, and then only if the shell made `read` calls since
//! just before the output holding that end was read ([`ShellProbe::reads_before_chunk`]): a shell reads a line before it runs one,
//! while a program that learnt the nonce prints its marks as the shell waits for it (the
//! shell then reads nothing; zsh reads one pipe as it starts each job, before it waits). A start refused after an end leaves that end in doubt: if the
//! shell read before the next end arrives, that end may be another line's (one typed
//! ahead, whose start was parsed late), so the command's status is unknown; if it did
//! not, the refused start was forged and the next end is the command's own. What stays
//! possible is written in SECURITY.md (its "Command ends" defence).

use std::collections::VecDeque;

use super::marks::Mark;
use super::text::TextCleaner;
use crate::runtime::{CommandRecord, CommandState};

/// What the kernel says of the shell when a mark arrives: the marks themselves can be
/// printed by any program that learnt the nonce (see the module docs).
pub trait ShellProbe {
    /// The shell's own process group has the terminal.
    fn has_terminal(&mut self) -> bool;
    /// The shell waits at its prompt (see [`super::kernel::shell_waiting`]).
    fn waiting(&mut self) -> bool;
    /// How many `read` calls the shell has made (`None`: not known).
    fn reads(&mut self) -> Option<u64>;
    /// How many it had made just before the chunk with this mark was read from the
    /// terminal: the reference an end keeps (see the module docs). The default: now.
    fn reads_before_chunk(&mut self) -> Option<u64> {
        self.reads()
    }
}

/// How many commands each terminal keeps (the oldest go first).
pub const KEPT_COMMANDS: usize = 50;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No prompt seen yet.
    Starting,
    /// At a prompt: nothing runs.
    Prompt,
    /// A command runs.
    Running,
    /// A command ended; its prompt has not come yet.
    Ended,
    /// A command ended and its prompt came; the end is final once confirmed.
    Unconfirmed,
}

#[derive(Clone, Debug)]
struct Command {
    id: u64,
    line: String,
    started_at: u64,
    ended_at: Option<u64>,
    exit_code: Option<i32>,
    /// Its end is final: the prompt after it came, or another command started.
    finished: bool,
    /// Its end will never be known: it ran when the shell's integration was lost, or
    /// another start came without its end, or its end may be another line's.
    lost: bool,
    cwd: Option<String>,
    output: TextCleaner,
    output_started: bool,
    /// The host typed the line (POSIX `sh`): its echo, up to the first newline, is not
    /// output.
    skip_echo: bool,
    last_output_at: u64,
}

/// The records of one terminal.
#[derive(Clone, Debug)]
pub struct Commands {
    kept: VecDeque<Command>,
    next_id: u64,
    phase: Phase,
    cwd: Option<String>,
    /// What the host typed at the prompt: the label of the command that starts next.
    typed_label: Option<String>,
    /// The shell's `read` calls just before the output with the last end that counted
    /// was read ([`ShellProbe::reads_before_chunk`]).
    reads_then: Option<u64>,
    /// A start was refused after the last end (see the module docs).
    end_in_doubt: bool,
}

impl Default for Commands {
    fn default() -> Self {
        Commands {
            kept: VecDeque::new(),
            next_id: 1,
            phase: Phase::Starting,
            cwd: None,
            typed_label: None,
            reads_then: None,
            end_in_doubt: false,
        }
    }
}

impl Commands {
    /// Applies a verified mark at unix ms `now`; `probe` is asked for a start or an end.
    pub fn apply(&mut self, mark: Mark, now: u64, probe: &mut dyn ShellProbe) {
        match mark {
            // While a command runs, only its end moves on: a prompt or folder mark then
            // is not the shell's (the shell prints them after the end).
            Mark::PromptStart if self.phase == Phase::Running => {}
            Mark::Cwd(_) if self.phase == Phase::Running => {}
            Mark::PromptStart => {
                // The typed line started nothing (an empty line): the label is no one's.
                self.typed_label = None;
                self.phase = match self.phase {
                    Phase::Ended | Phase::Unconfirmed => Phase::Unconfirmed,
                    _ => Phase::Prompt,
                };
            }
            Mark::CommandStart(line) => self.reported_start(line, now, probe),
            Mark::OutputStart => {
                if let (Phase::Running, Some(command)) = (self.phase, self.kept.back_mut()) {
                    command.output_started = true;
                }
            }
            Mark::CommandEnd(status) => {
                let open = matches!(
                    self.phase,
                    Phase::Running | Phase::Ended | Phase::Unconfirmed
                );
                if !open || !probe.has_terminal() {
                    return;
                }
                let Some(command) = self.kept.back_mut() else {
                    return;
                };
                if std::mem::take(&mut self.end_in_doubt)
                    && read_since(probe.reads(), self.reads_then)
                {
                    command.lost = true;
                }
                command.exit_code = Some(status);
                command.ended_at = Some(now);
                self.phase = Phase::Ended;
                // From before this output was read: a line the shell read right after its
                // end, even before we woke, then counts as read since the end.
                self.reads_then = probe.reads_before_chunk();
            }
            Mark::Cwd(path) => {
                let ended = matches!(self.phase, Phase::Ended | Phase::Unconfirmed);
                if let (true, Some(command)) = (ended, self.kept.back_mut()) {
                    command.cwd = Some(path.clone());
                }
                self.cwd = Some(path);
            }
        }
    }

    /// A start mark (bash, zsh). While a command runs it counts for nothing: the shell
    /// prints its end first. After an end not yet final, it counts only if the shell read
    /// since that end (see the module docs).
    fn reported_start(&mut self, line: String, now: u64, probe: &mut dyn ShellProbe) {
        if self.phase == Phase::Unconfirmed && probe.waiting() {
            self.confirm();
        }
        let reads = probe.reads();
        match self.phase {
            Phase::Running => return,
            Phase::Ended | Phase::Unconfirmed if !read_since(reads, self.reads_then) => {
                self.end_in_doubt = true;
                return;
            }
            _ => {}
        }
        let line = self.typed_label.take().unwrap_or(line);
        self.start(line, now, false);
    }

    /// The host typed `line` and Enter at a prompt (POSIX `sh` reports no start): a new
    /// command starts now. False, with nothing recorded, when no prompt is showing.
    pub fn start_typed(&mut self, line: &str, now: u64) -> bool {
        if self.phase != Phase::Prompt {
            return false;
        }
        self.start(line.to_string(), now, true);
        true
    }

    /// The host typed `line` and Enter at a prompt of a shell that reports its starts:
    /// the next command is labelled `line`. Nothing when no prompt is showing (the line
    /// is then input to a program).
    pub fn label_next(&mut self, line: &str) {
        if self.phase == Phase::Prompt {
            self.typed_label = Some(line.to_string());
        }
    }

    fn start(&mut self, line: String, now: u64, typed: bool) {
        if let Some(command) = self.kept.back_mut() {
            command.finished = true;
        }
        self.end_in_doubt = false;
        if self.kept.len() == KEPT_COMMANDS {
            self.kept.pop_front();
        }
        self.kept.push_back(Command {
            id: self.next_id,
            line,
            started_at: now,
            ended_at: None,
            exit_code: None,
            finished: false,
            lost: false,
            cwd: self.cwd.clone(),
            output: TextCleaner::default(),
            output_started: typed,
            skip_echo: typed,
            last_output_at: now,
        });
        self.next_id += 1;
        self.phase = Phase::Running;
    }

    /// Output (without marks) written at unix ms `now`.
    pub fn output(&mut self, mut bytes: &[u8], now: u64) {
        let Some(command) = self.kept.back_mut() else {
            return;
        };
        if self.phase != Phase::Running || !command.output_started || bytes.is_empty() {
            return;
        }
        if command.skip_echo {
            match bytes.iter().position(|&b| b == b'\n') {
                Some(newline) => {
                    command.skip_echo = false;
                    bytes = &bytes[newline + 1..];
                }
                None => return,
            }
        }
        command.output.feed(bytes);
        command.last_output_at = now;
    }

    /// Whether a command runs (started, its end not yet final).
    pub fn running(&self) -> bool {
        matches!(
            self.phase,
            Phase::Running | Phase::Ended | Phase::Unconfirmed
        )
    }

    /// Whether the last command's end waits for [`confirm`](Self::confirm).
    pub fn unconfirmed(&self) -> bool {
        self.phase == Phase::Unconfirmed
    }

    /// Integration was lost: no mark counts any more, so a command not yet finished
    /// never will be; it is `Unknown` rather than `Running` for ever.
    pub fn lose(&mut self) {
        if let Some(command) = self.kept.back_mut().filter(|c| !c.finished) {
            command.lost = true;
        }
        self.phase = Phase::Starting;
    }

    /// The caller saw the shell waiting at its prompt: the last end is final.
    pub fn confirm(&mut self) {
        if self.phase == Phase::Unconfirmed {
            if let Some(command) = self.kept.back_mut() {
                command.finished = true;
            }
            self.phase = Phase::Prompt;
        }
    }

    /// The command with `id`, or the last one; its state is `Running` until its end
    /// (the caller refines it from the foreground).
    pub fn record(&self, id: Option<u64>) -> Option<CommandRecord> {
        let command = match id {
            Some(id) => self.kept.iter().find(|c| c.id == id)?,
            None => self.kept.back()?,
        };
        Some(command.record(true))
    }

    /// The last command's record without its output (empty): what listings show, which
    /// must not copy up to 128 KiB of text per terminal.
    pub fn last_without_output(&self) -> Option<CommandRecord> {
        Some(self.kept.back()?.record(false))
    }
}

/// The shell made `read` calls since it had made `then` (both known).
fn read_since(now: Option<u64>, then: Option<u64>) -> bool {
    match (now, then) {
        (Some(now), Some(then)) => now > then,
        // The first start of a session, or a shell whose reads cannot be counted.
        (_, None) => true,
        (None, Some(_)) => false,
    }
}

impl Command {
    fn record(&self, with_output: bool) -> CommandRecord {
        let state = match (self.lost, self.finished) {
            (true, _) => CommandState::Unknown,
            (false, true) => CommandState::Exited,
            (false, false) => CommandState::Running,
        };
        let known = self.finished && !self.lost;
        CommandRecord {
            id: self.id,
            command: self.line.clone(),
            state,
            // An end not yet final, or in doubt, is not shown.
            exit_code: self.exit_code.filter(|_| known),
            started_at: self.started_at,
            ended_at: self.ended_at.filter(|_| known),
            cwd: self.cwd.clone().filter(|cwd| !cwd.is_empty()),
            output: match with_output {
                true => self.output.output(),
                false => Default::default(),
            },
            last_output_at: self.last_output_at,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::runtime::CommandOutput;

    /// The kernel as a test says it is: `reads` grows at each question while `reading`.
    pub(crate) struct Probe {
        pub terminal: bool,
        pub waiting: bool,
        pub reads: u64,
        pub reading: bool,
    }

    impl Probe {
        /// A shell that has the terminal and reads between any two marks.
        pub(crate) fn shell() -> Probe {
            Probe {
                terminal: true,
                waiting: false,
                reads: 0,
                reading: true,
            }
        }

        /// Another process group has the terminal.
        fn other_group() -> Probe {
            Probe {
                terminal: false,
                ..Probe::shell()
            }
        }
    }

    impl ShellProbe for Probe {
        fn has_terminal(&mut self) -> bool {
            self.terminal
        }
        fn waiting(&mut self) -> bool {
            self.waiting
        }
        fn reads(&mut self) -> Option<u64> {
            self.reads += u64::from(self.reading);
            Some(self.reads)
        }
    }

    fn run(commands: &mut Commands, line: &str, output: &[u8], status: i32, cwd: &str) {
        let mut yes = Probe::shell();
        commands.apply(Mark::CommandStart(line.into()), 10, &mut yes);
        commands.apply(Mark::OutputStart, 10, &mut yes);
        commands.output(output, 11);
        commands.apply(Mark::CommandEnd(status), 12, &mut yes);
        commands.apply(Mark::Cwd(cwd.into()), 12, &mut yes);
        commands.apply(Mark::PromptStart, 12, &mut yes);
        commands.confirm();
    }

    #[test]
    fn a_cycle_makes_a_record_with_status_output_and_folder() {
        let mut commands = Commands::default();
        let mut yes = Probe::shell();
        commands.apply(Mark::CommandEnd(0), 1, &mut yes); // first prompt: no command
        commands.apply(Mark::Cwd("/home".into()), 1, &mut yes);
        commands.apply(Mark::PromptStart, 1, &mut yes);
        assert_eq!(commands.record(None), None);
        run(
            &mut commands,
            "cd /tmp; false",
            b"\x1b[31mhi\x1b[0m\n",
            1,
            "/tmp",
        );
        let record = commands.record(None).unwrap();
        assert_eq!((record.id, record.command.as_str()), (1, "cd /tmp; false"));
        assert_eq!(
            (record.state, record.exit_code),
            (CommandState::Exited, Some(1))
        );
        assert_eq!(record.cwd.as_deref(), Some("/tmp"));
        assert_eq!(record.output.head, "hi\n");
        assert_eq!(
            (record.started_at, record.ended_at, record.last_output_at),
            (10, Some(12), 11)
        );
        // Listings get the same record without its output.
        let listed = commands.last_without_output().unwrap();
        assert_eq!(listed.output, CommandOutput::default());
        assert_eq!(
            CommandRecord {
                output: record.output.clone(),
                ..listed
            },
            record
        );
        // An empty line or Ctrl+C at the prompt reports an end: no command's.
        commands.apply(Mark::CommandEnd(130), 20, &mut yes);
        assert_eq!(commands.record(Some(1)).unwrap().exit_code, Some(1));
        run(&mut commands, "pwd", b"/tmp\n", 0, "/tmp");
        assert_eq!(commands.record(None).unwrap().id, 2);
        assert_eq!(commands.record(Some(1)).unwrap().command, "cd /tmp; false");
        assert_eq!(commands.record(Some(3)), None);
    }

    #[test]
    fn an_end_counts_only_when_the_shell_has_the_terminal_and_the_last_valid_one_wins() {
        let mut commands = Commands::default();
        let (mut yes, mut no) = (Probe::shell(), Probe::other_group());
        commands.apply(Mark::PromptStart, 1, &mut yes);
        commands.apply(Mark::CommandStart("job".into()), 2, &mut yes);
        commands.apply(Mark::CommandEnd(0), 3, &mut no);
        commands.apply(Mark::Cwd("/forged".into()), 3, &mut no);
        commands.apply(Mark::PromptStart, 3, &mut no);
        assert_eq!(commands.record(None).unwrap().state, CommandState::Running);
        assert!(commands.running());
        commands.apply(Mark::CommandEnd(0), 4, &mut yes);
        assert_eq!(commands.record(None).unwrap().state, CommandState::Running);
        commands.apply(Mark::CommandEnd(2), 5, &mut yes);
        commands.apply(Mark::PromptStart, 6, &mut yes);
        // A forged end and prompt parsed between two jobs: unconfirmed, then replaced.
        assert!(commands.unconfirmed() && commands.running());
        assert_eq!(commands.record(None).unwrap().exit_code, None);
        commands.apply(Mark::CommandEnd(2), 5, &mut yes);
        commands.apply(Mark::PromptStart, 6, &mut yes);
        commands.confirm();
        let record = commands.record(None).unwrap();
        assert_eq!((record.exit_code, record.ended_at), (Some(2), Some(5)));
        assert_eq!(record.cwd, None);
        assert_eq!(record.state, CommandState::Exited);
        commands.apply(Mark::CommandEnd(9), 7, &mut yes);
        assert_eq!(commands.record(None).unwrap().exit_code, Some(2));
    }

    /// A forger (nonce learnt, terminal handed to the shell's group) prints an end, a
    /// prompt and a start while the shell waits for it and reads nothing.
    fn forge(commands: &mut Commands, kernel: &mut Probe) {
        kernel.reading = false;
        commands.apply(Mark::CommandEnd(0), 3, kernel);
        commands.apply(Mark::Cwd("/forged".into()), 3, kernel);
        commands.apply(Mark::PromptStart, 3, kernel);
        commands.apply(Mark::CommandStart("forged".into()), 3, kernel);
    }

    #[test]
    fn a_start_while_the_shell_reads_nothing_is_refused_and_the_real_end_counts() {
        let mut commands = Commands::default();
        let mut kernel = Probe::shell();
        commands.apply(Mark::PromptStart, 1, &mut kernel);
        commands.apply(Mark::CommandStart("job".into()), 2, &mut kernel);
        forge(&mut commands, &mut kernel);
        let during = commands.record(None).unwrap();
        assert_eq!((during.id, during.state), (1, CommandState::Running));
        assert_eq!(during.exit_code, None);
        // The real end: the shell read nothing since it started the job.
        commands.apply(Mark::CommandEnd(1), 4, &mut kernel);
        commands.apply(Mark::PromptStart, 4, &mut kernel);
        commands.confirm();
        let ended = commands.record(None).unwrap();
        assert_eq!(
            (ended.state, ended.exit_code),
            (CommandState::Exited, Some(1))
        );
        // A start alone, while a command runs, ends nothing, even after reads.
        kernel.reading = true;
        commands.apply(Mark::CommandStart("next".into()), 5, &mut kernel);
        commands.apply(Mark::CommandStart("forged".into()), 6, &mut kernel);
        let next = commands.record(None).unwrap();
        assert_eq!((next.id, next.state), (2, CommandState::Running));
    }

    #[test]
    fn a_line_typed_ahead_starts_after_an_end_not_yet_seen_final() {
        let mut commands = Commands::default();
        let mut kernel = Probe::shell();
        commands.apply(Mark::PromptStart, 1, &mut kernel);
        commands.apply(Mark::CommandStart("first".into()), 2, &mut kernel);
        commands.apply(Mark::CommandEnd(3), 3, &mut kernel);
        commands.apply(Mark::PromptStart, 3, &mut kernel);
        // The shell read the next line at once, never blocking at its prompt.
        commands.apply(Mark::CommandStart("second".into()), 4, &mut kernel);
        let first = commands.record(Some(1)).unwrap();
        assert_eq!(
            (first.state, first.exit_code),
            (CommandState::Exited, Some(3))
        );
        assert_eq!(commands.record(None).unwrap().command, "second");
    }

    #[test]
    fn an_end_after_a_refused_start_and_a_read_is_in_doubt() {
        let mut commands = Commands::default();
        let mut kernel = Probe::shell();
        commands.apply(Mark::PromptStart, 1, &mut kernel);
        commands.apply(Mark::CommandStart("first".into()), 2, &mut kernel);
        // The start of a line typed ahead parsed together with the end: refused.
        kernel.reading = false;
        commands.apply(Mark::CommandEnd(0), 3, &mut kernel);
        commands.apply(Mark::PromptStart, 3, &mut kernel);
        commands.apply(Mark::CommandStart("second".into()), 3, &mut kernel);
        // The next end may be the second line's: the first's status is unknown.
        kernel.reading = true;
        commands.apply(Mark::CommandEnd(4), 5, &mut kernel);
        commands.apply(Mark::PromptStart, 5, &mut kernel);
        commands.confirm();
        let first = commands.record(None).unwrap();
        assert_eq!((first.id, first.state), (1, CommandState::Unknown));
        assert_eq!((first.exit_code, first.ended_at), (None, None));
        // The next cycle is clear again.
        run(&mut commands, "third", b"", 0, "/");
        assert_eq!(commands.record(None).unwrap().state, CommandState::Exited);
    }

    #[test]
    fn a_typed_start_needs_a_prompt_and_skips_the_echo() {
        let mut commands = Commands::default();
        let mut yes = Probe::shell();
        assert!(!commands.start_typed("echo hi", 1));
        commands.apply(Mark::PromptStart, 1, &mut yes);
        assert!(commands.start_typed("echo hi", 2));
        assert!(!commands.start_typed("again", 2));
        commands.output(b"echo h", 3);
        commands.output(b"i\r\nhi\n", 3);
        commands.apply(Mark::CommandEnd(0), 4, &mut yes);
        commands.apply(Mark::PromptStart, 4, &mut yes);
        assert!(!commands.start_typed("too early", 4), "not confirmed yet");
        commands.confirm();
        let record = commands.record(None).unwrap();
        assert_eq!(record.output.head, "hi\n");
        assert_eq!(record.exit_code, Some(0));
    }

    #[test]
    fn a_typed_label_names_the_next_start_only() {
        let mut commands = Commands::default();
        let mut yes = Probe::shell();
        commands.label_next("too early");
        commands.apply(Mark::PromptStart, 1, &mut yes);
        commands.apply(Mark::CommandStart("history's".into()), 2, &mut yes);
        assert_eq!(commands.record(None).unwrap().command, "history's");
        run(&mut commands, "x", b"", 0, "/");
        commands.label_next(" typed");
        commands.apply(Mark::CommandStart("older".into()), 3, &mut yes);
        assert_eq!(commands.record(None).unwrap().command, " typed");
        run(&mut commands, "x", b"", 0, "/");
        // An empty line starts nothing: its label goes with the next prompt.
        commands.label_next("");
        commands.apply(Mark::PromptStart, 4, &mut yes);
        commands.apply(Mark::CommandStart("next".into()), 5, &mut yes);
        assert_eq!(commands.record(None).unwrap().command, "next");
    }

    #[test]
    fn only_the_last_commands_are_kept() {
        let mut commands = Commands::default();
        for i in 0..KEPT_COMMANDS + 5 {
            run(&mut commands, &format!("echo {i}"), b"x\n", 0, "/");
        }
        assert_eq!(commands.record(Some(5)), None);
        assert_eq!(commands.record(Some(6)).unwrap().command, "echo 5");
        assert_eq!(commands.record(None).unwrap().id, KEPT_COMMANDS as u64 + 5);
    }
}
