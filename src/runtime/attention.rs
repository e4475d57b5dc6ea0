//! What each agent is doing, as the person needs to know it: `working`, `waiting` for
//! them (`why`: a `question`, a `permission`, an `approval` their policy holds, or
//! `input`: its program waits for typing) or `done`.
//!
//! Where it comes from, strongest first:
//! 1. a call of the agent held for the person's answer (`approvals.rs`): waiting, `approval`;
//! 2. what the agent last said itself with `agent_state`, which the hooks `agent_launch`
//!    sets up send for it (Claude Code's `Notification`, `Stop`, `UserPromptSubmit` and
//!    `PostToolUse`; Codex's `notify` at the end of each turn): `termsprawlctl hook`;
//! 3. else its terminal, for an agent running in one of the host's: its program blocked
//!    reading the terminal with no output for [`QUIET_MS`] waits for the person to type;
//!    any other live program is working.
//!
//! An agent with none of these (one outside the host's terminals that never reported)
//! has no state. Reasons come from agents: untrusted, cut to [`REASON_CHARS`] characters,
//! with controls and hidden characters shown as escapes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::base::lock_or_recover as lock;
use crate::base::terminal_text::cut_escaped;
use crate::protocol::ATTENTION_STATES;

/// A program reading its terminal with no output for this long waits for the person.
pub const QUIET_MS: u64 = 3_000;
/// How long an agent's terminal facts are used again: looking costs `/proc` reads (for
/// tmux, a `tmux` call), and `agent_status` is answered on the server's accept thread.
pub const FACTS_FRESH: Duration = Duration::from_millis(500);
/// Output this long after an agent said `done` is its next work, not the end of the last.
pub const DONE_GRACE_MS: u64 = 1_000;
/// An agent's reason is cut to this many characters.
pub const REASON_CHARS: usize = 200;

/// An agent's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentState {
    /// `working`, `waiting` or `done`.
    pub state: &'static str,
    /// Why it waits (only while `waiting`).
    pub why: Option<&'static str>,
    /// What it said, or what holds it (cut, escaped).
    pub reason: Option<String>,
    /// Where the state comes from: `approval`, `agent` or `terminal`.
    pub source: &'static str,
    /// Unix milliseconds since it is in this state (as far as this server knows).
    pub since: u64,
}

impl AgentState {
    /// The state as `agent_status` and the view show it.
    pub fn to_json(&self) -> Value {
        let mut state = json!({ "state": self.state, "source": self.source, "since": self.since });
        if let Some(why) = self.why {
            state["why"] = json!(why);
        }
        if let Some(reason) = &self.reason {
            state["reason"] = json!(reason);
        }
        state
    }

    /// Whether it needs the person.
    pub fn waiting(&self) -> bool {
        self.state == "waiting"
    }
}

/// `text` cut to [`REASON_CHARS`] and escaped.
pub fn clean_reason(text: &str) -> String {
    cut_escaped(text.trim(), REASON_CHARS).into_owned()
}

/// What an agent last said with `agent_state`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Said {
    state: &'static str,
    why: Option<&'static str>,
    reason: Option<String>,
    at: u64,
}

/// The agents' own reports and when each one's state last changed.
#[derive(Default)]
pub struct Attention {
    said: Mutex<HashMap<(String, String), Said>>,
    /// The last state computed for each agent (its `since` is kept while it holds).
    last: Mutex<HashMap<(String, String), AgentState>>,
    /// Each agent's terminal facts, and when they were looked at.
    facts: Mutex<HashMap<String, (Instant, Option<TerminalFacts>)>>,
}

/// What an agent's terminal shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TerminalFacts {
    /// Its program has ended.
    pub ended: bool,
    /// Its program, or what it runs in the foreground, is blocked reading the terminal.
    pub reading: bool,
    /// Unix milliseconds of its last output.
    pub last_output_at: u64,
}

impl Attention {
    /// Keeps what `node_id` of `project_id` says it is doing. `state` is one of
    /// [`ATTENTION_STATES`]; `why` one of `question` or `permission` (waiting only).
    pub fn said(
        &self,
        project_id: &str,
        node_id: &str,
        state: &str,
        why: Option<&str>,
        reason: Option<&str>,
        now: u64,
    ) {
        let Some(state) = ATTENTION_STATES.iter().copied().find(|s| *s == state) else {
            return;
        };
        let why = match state {
            "waiting" => Some(match why {
                Some("permission") => "permission",
                _ => "question",
            }),
            _ => None,
        };
        let said = Said {
            state,
            why,
            reason: reason.filter(|r| !r.trim().is_empty()).map(clean_reason),
            at: now,
        };
        lock(&self.said).insert((project_id.to_string(), node_id.to_string()), said);
    }

    /// Forgets agent `node_id` (its session ended or was revoked), in every project.
    pub fn forget(&self, node_id: &str) {
        lock(&self.said).retain(|(_, node), _| node != node_id);
        lock(&self.last).retain(|(_, node), _| node != node_id);
        lock(&self.facts).remove(node_id);
    }

    /// `node_id`'s terminal facts: `look`'s, or those it gave less than [`FACTS_FRESH`]
    /// ago (the lock is not held while it looks).
    pub fn terminal(
        &self,
        node_id: &str,
        look: impl FnOnce() -> Option<TerminalFacts>,
    ) -> Option<TerminalFacts> {
        if let Some((at, facts)) = lock(&self.facts).get(node_id) {
            if at.elapsed() < FACTS_FRESH {
                return *facts;
            }
        }
        let facts = look();
        lock(&self.facts).insert(node_id.to_string(), (Instant::now(), facts));
        facts
    }

    /// The state of `node_id` of `project_id` now: `held` names the operation of a call of
    /// its held for the person (if any), `terminal` its terminal's facts (if it runs in
    /// one of the host's). Remembers it, so `since` holds while the state does.
    pub fn state(
        &self,
        project_id: &str,
        node_id: &str,
        held: Option<&str>,
        terminal: Option<TerminalFacts>,
        now: u64,
    ) -> Option<AgentState> {
        let key = (project_id.to_string(), node_id.to_string());
        let said = lock(&self.said).get(&key).cloned();
        let found = decide(said.as_ref(), held, terminal, now);
        let mut last = lock(&self.last);
        let Some(mut found) = found else {
            last.remove(&key);
            return None;
        };
        match last.get(&key) {
            Some(before) if same(before, &found) => found.since = before.since,
            _ => {
                if let Some(said) =
                    said.filter(|s| s.state == found.state && found.source == "agent")
                {
                    found.since = said.at;
                }
                last.insert(key, found.clone());
            }
        }
        Some(found)
    }
}

/// Whether two states are the same for the person (the time aside).
fn same(a: &AgentState, b: &AgentState) -> bool {
    (a.state, a.why, &a.reason, a.source) == (b.state, b.why, &b.reason, b.source)
}

/// The state from its sources (see the module docs).
fn decide(
    said: Option<&Said>,
    held: Option<&str>,
    terminal: Option<TerminalFacts>,
    now: u64,
) -> Option<AgentState> {
    let state = |state, why, reason, source| AgentState {
        state,
        why,
        reason,
        source,
        since: now,
    };
    if let Some(operation) = held {
        let reason = format!("{} waits for your approval", clean_reason(operation));
        return Some(state("waiting", Some("approval"), Some(reason), "approval"));
    }
    // An agent whose program ended is doing nothing, whatever it said last.
    if terminal.is_some_and(|t| t.ended) {
        return None;
    }
    // A `done` is over once its terminal shows output again after it (a Codex turn is
    // said done, never working again: the next prompt's work shows on the terminal).
    let done_since = |said: &Said| {
        said.state == "done" && terminal.is_some_and(|t| t.last_output_at > said.at + DONE_GRACE_MS)
    };
    if let Some(said) = said.filter(|said| !done_since(said)) {
        return Some(state(said.state, said.why, said.reason.clone(), "agent"));
    }
    let terminal = terminal?;
    let quiet = now.saturating_sub(terminal.last_output_at) >= QUIET_MS;
    Some(match (terminal.ended, terminal.reading && quiet) {
        (true, _) => return None,
        (false, true) => state(
            "waiting",
            Some("input"),
            Some("its program waits for you to type".to_string()),
            "terminal",
        ),
        (false, false) => state("working", None, None, "terminal"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_then_reports_then_the_terminal() {
        let attention = Attention::default();
        let facts = |ended, reading, last_output_at| {
            Some(TerminalFacts {
                ended,
                reading,
                last_output_at,
            })
        };
        let reading = facts(false, true, 1_000);
        // The terminal: reading and quiet for 3 s is waiting; output since is working.
        let waiting = attention.state("p", "a", None, reading, 4_000).unwrap();
        assert_eq!(
            (waiting.state, waiting.why, waiting.source),
            ("waiting", Some("input"), "terminal")
        );
        assert_eq!(
            attention
                .state("p", "a", None, reading, 3_999)
                .unwrap()
                .state,
            "working"
        );
        assert_eq!(
            attention
                .state("p", "a", None, facts(false, false, 0), 9_000)
                .unwrap()
                .state,
            "working"
        );
        assert_eq!(
            attention.state("p", "a", None, facts(true, false, 0), 9_000),
            None
        );
        assert_eq!(attention.state("p", "b", None, None, 9_000), None);
        // What the agent says wins over its terminal; a held call wins over both.
        attention.said(
            "p",
            "a",
            "waiting",
            Some("permission"),
            Some("May I run rm -rf build?\u{1b}[2J"),
            5_000,
        );
        let said = attention
            .state("p", "a", None, facts(false, false, 0), 6_000)
            .unwrap();
        assert_eq!(
            (said.state, said.why, said.source, said.since),
            ("waiting", Some("permission"), "agent", 5_000)
        );
        assert_eq!(
            said.reason.as_deref(),
            Some("May I run rm -rf build?\\x1b[2J")
        );
        let held = attention
            .state("p", "a", Some("terminal_submit"), None, 7_000)
            .unwrap();
        assert_eq!(
            (held.why, held.reason.as_deref()),
            (
                Some("approval"),
                Some("terminal_submit waits for your approval")
            )
        );
        // `since` holds while the state does.
        assert_eq!(
            attention
                .state("p", "a", Some("terminal_submit"), None, 8_000)
                .unwrap()
                .since,
            7_000
        );
        attention.said("p", "a", "done", None, None, 9_000);
        assert_eq!(
            attention.state("p", "a", None, None, 9_500).unwrap().state,
            "done"
        );
        attention.said("p", "a", "sleeping", None, None, 9_600);
        assert_eq!(
            attention.state("p", "a", None, None, 9_700).unwrap().state,
            "done"
        );
        // Output well after a `done` is new work: the terminal speaks again.
        attention.said("p", "c", "done", None, None, 10_000);
        let after = |at| facts(false, false, at);
        assert_eq!(
            attention
                .state("p", "c", None, after(10_500), 11_000)
                .unwrap()
                .state,
            "done"
        );
        assert_eq!(
            attention
                .state("p", "c", None, after(12_000), 12_100)
                .unwrap()
                .source,
            "terminal"
        );
        // An ended program says nothing, whatever it said.
        attention.said("p", "d", "working", None, None, 10_000);
        assert_eq!(
            attention.state("p", "d", None, facts(true, false, 0), 11_000),
            None
        );
        attention.forget("a");
        assert_eq!(attention.state("p", "a", None, None, 9_800), None);
    }

    #[test]
    fn long_reasons_are_cut() {
        let reason = clean_reason(&"\u{202e}x".repeat(500));
        assert!(
            reason.ends_with('…') && !reason.contains('\u{202e}'),
            "{reason}"
        );
    }
}
