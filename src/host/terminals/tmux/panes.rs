//! What a tmux terminal's foreground is doing and what it wrote since a moment, without
//! shell integration: the kernel's view of the pane's shell (`/proc`) and tmux's view of
//! the pane (`display-message`, `capture-pane`).
//!
//! - The shell is the pane filter's child that leads its own session (the filter runs it
//!   on an inner terminal), or the pane's program itself without the filter. Its `stat`
//!   field `tpgid` is its terminal's foreground group: another group has the terminal
//!   while a command runs, and one of that group blocked reading the terminal waits for
//!   typing ([`procfs::reading_terminal`]) once two looks at least [`SETTLE_MS`] apart
//!   saw it so: tmux gets a program's output a moment after the program wrote it (and
//!   a look may use tmux's answer of [`PANE_TTL`] ago), so a program that has switched
//!   to the alternate screen and waits for keys (`less`) can look, for that moment,
//!   like a prompt.
//!   When the shell has the terminal it is at its prompt only while it waits to read
//!   it; otherwise it runs something itself (a loop, the gap between two commands of
//!   one line), which is running. A shell builtin that waits for typing (`read`) looks
//!   like the prompt: without integration nothing tells them apart.
//! - Output positions count lines, not bytes: a position is the cursor's line counted
//!   from the oldest line tmux keeps (`history_size` + `cursor_y`), and the text since is
//!   `capture-pane -S` from that line. Two honest limits: once the history is full
//!   (`HISTORY_LIMIT` lines) tmux drops its oldest tenth at once, and a position taken
//!   before that names a line that much later (the text since starts later than the
//!   command did, by up to 1,000 lines; its tail is right); a `clear` that erases the
//!   history moves positions back, and the text since is then the screen. tmux keeps no output times, so the last output is when a look here
//!   first saw the text change.
//!
//! Cost: every look at a pane spawns tmux clients, and a waiting call looks ten times a
//! second. So one `display-message` answers the looks at a pane for [`PANE_TTL`] (the
//! foreground, `has_live_session` and the output position share it), and the text is
//! captured again only when the cursor or the history moved, or [`RECAPTURE_MS`] after
//! the last capture (a line redrawn in place moves neither).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::base::lock_or_recover as lock;
use crate::host::isolation::bwrap;
use crate::host::terminals::procfs;
use crate::host::terminals::shell::text::{HeadTail, HEAD_BYTES, TAIL_BYTES};
use crate::host::terminals::tmux::{PaneInfo, TmuxError, TmuxServer};
use crate::runtime::{unix_millis, CommandOutput, Foreground, OutputMark};

/// How long a confined pane's shell is looked for (it runs already unless just started).
const CONFINED_LOOKUP: Duration = Duration::from_millis(50);
/// How long a group must have been seen waiting for typing before it counts as such:
/// longer than [`PANE_TTL`], so the pane's alternate screen was looked at after it.
const SETTLE_MS: u64 = 300;
const _: () = assert!(SETTLE_MS > PANE_TTL.as_millis() as u64);

/// A text not looked at for this long is forgotten (a wait looks every 100 ms).
const FORGET_AFTER_MS: u64 = 60 * 1000;
/// How long one `display-message` answer serves the looks at a pane: what a waiting
/// call sees lags this much at most (as `canvas_list`'s tmux listing does).
const PANE_TTL: Duration = Duration::from_millis(250);
/// The text since a position is captured again at least this often while looked at.
const RECAPTURE_MS: u64 = 1000;

/// The tmux panes' shells and the text each look saw, for [`crate::host::HostTerminals`].
#[derive(Default)]
pub struct TmuxPanes {
    /// The shell of each node's pane, found once: (pane program, shell).
    shells: Mutex<HashMap<String, (libc::pid_t, libc::pid_t)>>,
    /// The text since a position (by node and position), as last captured.
    seen: Mutex<HashMap<(String, u64), SeenText>>,
    /// Each node's last `display-message` answer (`None`: no such pane) and its time.
    panes: Mutex<HashMap<String, (Instant, Option<PaneInfo>)>>,
    /// Each node's last foreground look.
    looks: Mutex<HashMap<String, Look>>,
}

/// What a look at a pane's foreground saw, and since when it has seen it.
#[derive(Clone, Copy)]
struct Look {
    raw: Foreground,
    group: libc::pid_t,
    since: u64,
    /// It counts only once seen for [`SETTLE_MS`].
    settles: bool,
}

#[derive(Clone)]
struct SeenText {
    /// The pane's cursor and history when it was captured.
    moved: (u64, u64, u64),
    output: CommandOutput,
    digest: u64,
    captured_at: u64,
    changed_at: u64,
    looked_at: u64,
}

impl TmuxPanes {
    /// What `node`'s foreground does; `None` when tmux has no such pane or its shell
    /// cannot be found. Waiting for typing, and the shell back at its prompt after a
    /// program, count once seen for [`SETTLE_MS`] (see the module docs); until then
    /// they read as running.
    pub fn foreground(&self, tmux: &TmuxServer, node: &str) -> Option<Foreground> {
        let pane = self.pane(tmux, node)?;
        let Some((raw, group)) = self.raw_foreground(tmux, node, &pane) else {
            lock(&self.looks).remove(node);
            return None;
        };
        let now = unix_millis();
        let mut looks = lock(&self.looks);
        let look = next_look(looks.get(node), raw, group, now);
        looks.insert(node.to_string(), look);
        Some(look.answer(now))
    }

    /// Whether `node`'s pane program (or what it runs in the foreground) is blocked
    /// reading the terminal; `None` when tmux has no such pane or its program is unknown.
    pub fn reading(&self, tmux: &TmuxServer, node: &str) -> Option<bool> {
        let pane = self.pane(tmux, node)?;
        let shell = self.shell(tmux, node, &pane)?;
        let group = procfs::proc_stat(shell)?.tpgid;
        let tty = std::fs::read_link(format!("/proc/{shell}/fd/0")).ok()?;
        let members = procfs::group_members(shell, group);
        Some(
            (group == shell && procfs::reading_terminal(shell, &tty))
                || members
                    .iter()
                    .any(|&pid| procfs::reading_terminal(pid, &tty)),
        )
    }

    /// What the pane and the kernel show now, and the foreground group (0 when none
    /// is known).
    fn raw_foreground(
        &self,
        tmux: &TmuxServer,
        node: &str,
        pane: &PaneInfo,
    ) -> Option<(Foreground, libc::pid_t)> {
        if pane.dead {
            return Some((Foreground::Ended, 0));
        }
        if pane.alternate {
            return Some((Foreground::Fullscreen, 0));
        }
        let shell = self.shell(tmux, node, pane)?;
        let stat = procfs::proc_stat(shell)?;
        if stat.tpgid <= 0 {
            return Some((Foreground::Shell, 0));
        }
        let tty = std::fs::read_link(format!("/proc/{shell}/fd/0")).ok()?;
        // The shell has the terminal: at its prompt when it waits to read it; else
        // between two commands of one line, or running a loop or a builtin itself.
        let reading = match stat.tpgid == shell {
            true => procfs::reading_terminal(shell, &tty),
            false => procfs::group_members(shell, stat.tpgid)
                .iter()
                .any(|&pid| procfs::reading_terminal(pid, &tty)),
        };
        let foreground = match (stat.tpgid == shell, reading) {
            (true, true) => Foreground::Shell,
            (false, true) => Foreground::AwaitingInput,
            (_, false) => Foreground::Running,
        };
        Some((foreground, stat.tpgid))
    }

    /// Drops tmux's last answer about `node`'s pane: something was typed into it.
    pub fn typed(&self, node: &str) {
        lock(&self.panes).remove(node);
    }

    /// Where `node`'s output stands: the cursor's line (see the module docs). tmux keeps
    /// no output times: `last_output_at` is 0.
    pub fn output_mark(&self, tmux: &TmuxServer, node: &str) -> Option<OutputMark> {
        let pane = self.pane(tmux, node)?;
        Some(OutputMark {
            position: line_position(&pane),
            last_output_at: 0,
        })
    }

    /// Whether `node`'s pane shows a full-screen program (its alternate screen).
    pub fn fullscreen(&self, tmux: &TmuxServer, node: &str) -> bool {
        self.pane(tmux, node).is_some_and(|pane| pane.alternate)
    }

    /// Whether `node`'s pane exists and its program runs.
    pub fn live(&self, tmux: &TmuxServer, node: &str) -> bool {
        self.pane(tmux, node).is_some_and(|pane| !pane.dead)
    }

    /// The text from line `position` to the screen's end (its head and tail when long),
    /// and the mark now, with the time a look here first saw that text as it is.
    pub fn output_since(
        &self,
        tmux: &TmuxServer,
        node: &str,
        position: u64,
    ) -> Option<(CommandOutput, OutputMark)> {
        let pane = self.pane(tmux, node)?;
        let moved = (pane.history_size, pane.cursor_y, pane.cursor_x);
        let now = unix_millis();
        let key = (node.to_string(), position);
        let known = lock(&self.seen).get(&key).cloned();
        let (output, changed_at) = match known {
            Some(seen)
                if seen.moved == moved && now.saturating_sub(seen.captured_at) < RECAPTURE_MS =>
            {
                (seen.output, seen.changed_at)
            }
            known => {
                // The alternate screen has no history: its lines say nothing of positions.
                let text = match pane.alternate {
                    true => String::new(),
                    false => tmux
                        .capture_from(node, capture_start(&pane, position))
                        .ok()?,
                };
                let mut kept = HeadTail::new(HEAD_BYTES, TAIL_BYTES);
                kept.push_str(&text);
                let digest = digest(&text);
                let changed_at = match known {
                    Some(seen) if seen.digest == digest => seen.changed_at,
                    _ => now,
                };
                let seen = SeenText {
                    moved,
                    output: kept.output(),
                    digest,
                    captured_at: now,
                    changed_at,
                    looked_at: now,
                };
                lock(&self.seen).insert(key.clone(), seen);
                (kept.output(), changed_at)
            }
        };
        let mut seen = lock(&self.seen);
        seen.retain(|_, s| now.saturating_sub(s.looked_at) < FORGET_AFTER_MS);
        if let Some(entry) = seen.get_mut(&key) {
            entry.looked_at = now;
        }
        Some((
            output,
            OutputMark {
                position: line_position(&pane),
                last_output_at: changed_at,
            },
        ))
    }

    /// `node`'s pane as tmux described it at most [`PANE_TTL`] ago.
    fn pane(&self, tmux: &TmuxServer, node: &str) -> Option<PaneInfo> {
        if let Some((at, pane)) = lock(&self.panes).get(node) {
            if at.elapsed() < PANE_TTL {
                return *pane;
            }
        }
        let pane = match tmux.pane_info(node) {
            Ok(pane) => Some(pane),
            Err(TmuxError::NoSession(_)) => None,
            // Not an answer about the pane (tmux slow or failing): not kept.
            Err(_) => return None,
        };
        let mut panes = lock(&self.panes);
        panes.retain(|_, (at, _)| at.elapsed() < PANE_TTL);
        panes.insert(node.to_string(), (Instant::now(), pane));
        pane
    }

    /// The shell of `node`'s pane: the one found before while it is still the pane
    /// program's child, else looked up.
    fn shell(&self, tmux: &TmuxServer, node: &str, pane: &PaneInfo) -> Option<libc::pid_t> {
        let program = libc::pid_t::try_from(pane.pid)
            .ok()
            .filter(|&pid| pid > 0)?;
        let known = lock(&self.shells).get(node).copied();
        if let Some((known_program, shell)) = known {
            let still =
                procfs::proc_stat(shell).is_some_and(|stat| stat.ppid == program && stat.running());
            if known_program == program && (still || shell == program) {
                return Some(shell);
            }
        }
        let shell = match tmux.filters_panes() {
            true => *procfs::session_leading_children(program).first()?,
            false => program,
        };
        // A confined pane runs `bwrap`, whose program is the shell (found again each time).
        let confining = procfs::executable(shell)
            .is_some_and(|exe| exe.file_name().is_some_and(|name| name == "bwrap"));
        if confining {
            let steps: Vec<std::path::PathBuf> = std::env::current_exe().into_iter().collect();
            return bwrap::confined_program(shell, &steps, CONFINED_LOOKUP);
        }
        lock(&self.shells).insert(node.to_string(), (program, shell));
        Some(shell)
    }

    /// Forgets what was found for `node` (its terminal was closed).
    pub fn forget(&self, node: &str) {
        lock(&self.shells).remove(node);
        lock(&self.looks).remove(node);
        lock(&self.panes).remove(node);
        lock(&self.seen).retain(|(seen_node, _), _| seen_node != node);
    }
}

/// The look after `before` that saw `raw` with foreground group `group` at `now`.
fn next_look(before: Option<&Look>, raw: Foreground, group: libc::pid_t, now: u64) -> Look {
    match before {
        Some(look) if look.raw == raw && look.group == group => *look,
        before => {
            // The shell is back from a program: its last output may still be on its way
            // to tmux, and the pane's answer may be older than its return.
            let returned = raw == Foreground::Shell && before.is_some_and(|b| b.raw != raw);
            Look {
                raw,
                group,
                since: now,
                settles: returned || raw == Foreground::AwaitingInput,
            }
        }
    }
}

impl Look {
    /// What it says at `now`: running until it has settled.
    fn answer(&self, now: u64) -> Foreground {
        match self.settles && now.saturating_sub(self.since) < SETTLE_MS {
            true => Foreground::Running,
            false => self.raw,
        }
    }
}

fn digest(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// The cursor's line counted from the oldest line tmux keeps.
fn line_position(pane: &PaneInfo) -> u64 {
    pane.history_size + pane.cursor_y
}

/// `capture-pane -S`'s line for `position`: negative in the history, 0 the screen's
/// top. A position past the cursor (the history was erased since) reads the screen.
fn capture_start(pane: &PaneInfo, position: u64) -> i64 {
    let start = position as i64 - pane.history_size as i64;
    match start > pane.cursor_y as i64 {
        true => 0,
        false => start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pane(history_size: u64, cursor_y: u64) -> PaneInfo {
        PaneInfo {
            pid: 1,
            dead: false,
            alternate: false,
            history_size,
            cursor_y,
            cursor_x: 0,
            application_cursor: false,
        }
    }

    #[test]
    fn positions_are_lines_from_the_oldest_kept_line() {
        assert_eq!(line_position(&pane(0, 3)), 3);
        assert_eq!(line_position(&pane(120, 23)), 143);
        // Marked at line 143; 30 lines later the mark is 7 lines into the history.
        assert_eq!(capture_start(&pane(150, 23), 143), -7);
        assert_eq!(capture_start(&pane(0, 5), 2), 2);
        // The history was erased since: the screen.
        assert_eq!(capture_start(&pane(0, 4), 143), 0);
    }

    #[test]
    fn waiting_for_typing_and_a_return_to_the_prompt_count_once_settled() {
        use Foreground::*;
        // The prompt with no program seen before: at once (a submit's busy check).
        let first = next_look(None, Shell, 7, 1000);
        assert_eq!(first.answer(1000), Shell);
        // A program reading the terminal: running until it has been seen so a while.
        let asked = next_look(Some(&first), AwaitingInput, 40, 2000);
        assert_eq!(asked.answer(2000 + SETTLE_MS - 1), Running);
        let still = next_look(Some(&asked), AwaitingInput, 40, 2000 + SETTLE_MS);
        assert_eq!(still.answer(2000 + SETTLE_MS), AwaitingInput);
        // Another group starts counting again.
        let other = next_look(Some(&still), AwaitingInput, 41, 2000 + SETTLE_MS);
        assert_eq!(other.answer(2000 + SETTLE_MS), Running);
        // Back at the prompt after a program: once settled.
        let back = next_look(Some(&other), Shell, 7, 3000);
        assert_eq!(back.answer(3000), Running);
        assert_eq!(back.answer(3000 + SETTLE_MS), Shell);
        // Running and full-screen programs count at once.
        assert_eq!(
            next_look(Some(&back), Running, 40, 4000).answer(4000),
            Running
        );
        assert_eq!(
            next_look(None, Fullscreen, 0, 4000).answer(4000),
            Fullscreen
        );
    }
}
