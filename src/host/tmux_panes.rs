//! What a tmux terminal's foreground is doing and what it wrote since a moment, without
//! shell integration: the kernel's view of the pane's shell (`/proc`) and tmux's view of
//! the pane (`display-message`, `capture-pane`).
//!
//! - The shell is the pane filter's child that leads its own session (the filter runs it
//!   on an inner terminal), or the pane's program itself without the filter. Its `stat`
//!   field `tpgid` is its terminal's foreground group: another group has the terminal
//!   while a command runs, and one of that group blocked reading the terminal waits for
//!   typing ([`procfs::reading_terminal`]) once two looks at least [`SETTLE_MS`] apart
//!   saw it so: the pane filter hands tmux a program's output a moment after the
//!   program wrote it, so a program that has switched to the alternate screen and
//!   waits for keys (`less`) can look, for that moment, like a prompt.
//!   When the shell has the terminal it is at its prompt only while it waits to read
//!   it; otherwise it runs something itself (a loop, the gap between two commands of
//!   one line), which is running. A shell builtin that waits for typing (`read`) looks
//!   like the prompt: without integration nothing tells them apart.
//! - Output positions count lines, not bytes: a position is the cursor's line counted
//!   from the oldest line tmux keeps (`history_size` + `cursor_y`), and the text since is
//!   `capture-pane -S` from that line. Two honest limits: once the history is full
//!   (`HISTORY_LIMIT` lines) old lines fall off its top and a position names a later
//!   line than it did (the head of a very long output starts later; its tail is right);
//!   a `clear` that erases the history moves positions back, and the text since is then
//!   the screen. tmux keeps no output times, so the last output is when a look here
//!   first saw the text change.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use super::procfs;
use super::shell::text::{HeadTail, HEAD_BYTES, TAIL_BYTES};
use super::tmux::{PaneInfo, TmuxServer};
use crate::base::lock_or_recover as lock;
use crate::runtime::{unix_millis, CommandOutput, Foreground, OutputMark};

/// How long a group must have been seen waiting for typing before it counts as such.
const SETTLE_MS: u64 = 50;

/// A text last seen this long ago is forgotten (longer than any wait lasts).
const FORGET_AFTER_MS: u64 = 15 * 60 * 1000;

/// The tmux panes' shells and the text each look saw, for [`super::HostTerminals`].
#[derive(Default)]
pub struct TmuxPanes {
    /// The shell of each node's pane, found once: (pane program, shell).
    shells: Mutex<HashMap<String, (libc::pid_t, libc::pid_t)>>,
    /// The text since a position (by node and position): its digest, when it last
    /// changed and when it was last looked at.
    seen: Mutex<HashMap<(String, u64), SeenText>>,
    /// The foreground group of each node seen waiting for typing, and since when.
    awaiting: Mutex<HashMap<String, (libc::pid_t, u64)>>,
}

#[derive(Clone, Copy)]
struct SeenText {
    digest: u64,
    changed_at: u64,
    looked_at: u64,
}

impl TmuxPanes {
    /// What `node`'s foreground does; `None` when tmux has no such pane or its shell
    /// cannot be found.
    pub fn foreground(&self, tmux: &TmuxServer, node: &str) -> Option<Foreground> {
        let pane = tmux.pane_info(node).ok()?;
        let foreground = self.foreground_of(tmux, node, &pane);
        if !matches!(
            foreground,
            Some(Foreground::AwaitingInput | Foreground::Running)
        ) {
            lock(&self.awaiting).remove(node);
        }
        foreground
    }

    /// [`TmuxPanes::foreground`] of a pane tmux described.
    fn foreground_of(&self, tmux: &TmuxServer, node: &str, pane: &PaneInfo) -> Option<Foreground> {
        if pane.dead {
            return Some(Foreground::Ended);
        }
        if pane.alternate {
            return Some(Foreground::Fullscreen);
        }
        let shell = self.shell(tmux, node, pane)?;
        let stat = procfs::proc_stat(shell)?;
        if stat.tpgid <= 0 {
            return Some(Foreground::Shell);
        }
        let tty = std::fs::read_link(format!("/proc/{shell}/fd/0")).ok()?;
        // The shell has the terminal: at its prompt when it waits to read it; else
        // between two commands of one line, or running a loop or a builtin itself.
        if stat.tpgid == shell {
            return match procfs::reading_terminal(shell, &tty) {
                true => Some(Foreground::Shell),
                false => Some(Foreground::Running),
            };
        }
        let members = procfs::group_members(stat.tpgid);
        let reading = members
            .iter()
            .any(|&pid| procfs::reading_terminal(pid, &tty));
        if !reading {
            lock(&self.awaiting).remove(node);
            return Some(Foreground::Running);
        }
        match self.awaiting_settled(node, stat.tpgid) {
            true => Some(Foreground::AwaitingInput),
            false => Some(Foreground::Running),
        }
    }

    /// Whether `node`'s foreground `group`, seen reading the terminal now, was seen so
    /// [`SETTLE_MS`] ago or longer; else the look starts counting.
    fn awaiting_settled(&self, node: &str, group: libc::pid_t) -> bool {
        let now = unix_millis();
        let mut awaiting = lock(&self.awaiting);
        match awaiting.get(node) {
            Some(&(seen, since)) if seen == group => now.saturating_sub(since) >= SETTLE_MS,
            _ => {
                awaiting.insert(node.to_string(), (group, now));
                false
            }
        }
    }

    /// Where `node`'s output stands: the cursor's line (see the module docs). tmux keeps
    /// no output times: `last_output_at` is 0.
    pub fn output_mark(&self, tmux: &TmuxServer, node: &str) -> Option<OutputMark> {
        let pane = tmux.pane_info(node).ok()?;
        Some(OutputMark {
            position: line_position(&pane),
            last_output_at: 0,
        })
    }

    /// The text from line `position` to the screen's end (its head and tail when long),
    /// and the mark now, with the time a look here first saw that text as it is.
    pub fn output_since(
        &self,
        tmux: &TmuxServer,
        node: &str,
        position: u64,
    ) -> Option<(CommandOutput, OutputMark)> {
        let pane = tmux.pane_info(node).ok()?;
        let now = line_position(&pane);
        // The alternate screen has no history: its lines say nothing of positions.
        let text = match pane.alternate {
            true => String::new(),
            false => tmux
                .capture_from(node, capture_start(&pane, position))
                .ok()?,
        };
        let mut kept = HeadTail::new(HEAD_BYTES, TAIL_BYTES);
        kept.push_str(&text);
        let last_output_at = self.changed_at(node, position, &text);
        Some((
            kept.output(),
            OutputMark {
                position: now,
                last_output_at,
            },
        ))
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
        lock(&self.shells).insert(node.to_string(), (program, shell));
        Some(shell)
    }

    /// When a look here first saw the text since `position` of `node` as it is now.
    fn changed_at(&self, node: &str, position: u64, text: &str) -> u64 {
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let digest = hasher.finish();
        let now = unix_millis();
        let mut seen = lock(&self.seen);
        seen.retain(|_, s| now.saturating_sub(s.looked_at) < FORGET_AFTER_MS);
        let entry = seen
            .entry((node.to_string(), position))
            .or_insert(SeenText {
                digest,
                changed_at: now,
                looked_at: now,
            });
        if entry.digest != digest {
            entry.digest = digest;
            entry.changed_at = now;
        }
        entry.looked_at = now;
        entry.changed_at
    }

    /// Forgets what was found for `node` (its terminal was closed).
    pub fn forget(&self, node: &str) {
        lock(&self.shells).remove(node);
        lock(&self.awaiting).remove(node);
        lock(&self.seen).retain(|(seen_node, _), _| seen_node != node);
    }
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
    fn the_last_change_is_when_a_look_first_saw_the_text() {
        let panes = TmuxPanes::default();
        let first = panes.changed_at("t", 3, "$ make");
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(panes.changed_at("t", 3, "$ make"), first);
        let changed = panes.changed_at("t", 3, "$ make\nerror");
        assert!(changed > first, "{changed} {first}");
        // Another position of the same node is looked at on its own.
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(panes.changed_at("t", 9, "$ make\nerror") > changed);
        panes.forget("t");
        assert!(lock(&panes.seen).is_empty());
    }

    #[test]
    fn waiting_for_typing_counts_once_seen_twice_apart() {
        let panes = TmuxPanes::default();
        assert!(!panes.awaiting_settled("t", 40));
        std::thread::sleep(std::time::Duration::from_millis(SETTLE_MS + 5));
        assert!(panes.awaiting_settled("t", 40));
        // Another group starts counting again.
        assert!(!panes.awaiting_settled("t", 41));
    }
}
