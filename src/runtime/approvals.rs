//! Calls that wait for the person's answer (a class the policy says to `ask` about).
//!
//! A call is held off its project's queue for at most [`HOLD`], as a waiting call (the
//! server's bounds apply; nothing else waits on it). The person answers one request by
//! its id *and* the call it shows them ([`Shown`]): an answer for an unknown, answered
//! or expired id, or for other arguments, is refused, so an answer cannot be replayed
//! or re-pointed. A request nobody answered in time stays listed for [`KEPT`]: the same
//! call again (same agent, operation and arguments) waits on it again, and an answer
//! given meanwhile applies to that call. At most [`PENDING_PER_AGENT`] per agent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::base::{lock_or_recover, random_hex, unix_millis};
use crate::protocol::{OperationClass, ToolIdentity, ToolRequest};
use crate::server::{Awaited, Outcome};

/// How long a call waits for the person: under `termsprawlctl`'s 45 s per call and the
/// minute most MCP clients give a tool, long enough to read a call and click.
pub const HOLD: Duration = Duration::from_secs(40);
/// How long an unanswered request stays listed after its call stopped waiting.
pub const KEPT: Duration = Duration::from_secs(600);
/// At most this many requests of one agent wait for an answer.
pub const PENDING_PER_AGENT: usize = 4;

/// A call waiting for the person's answer, as they are shown it.
#[derive(Clone, Debug, PartialEq)]
pub struct Asked {
    /// The request's id (random, 16 bytes in hex).
    pub id: String,
    /// The calling agent's project.
    pub project_id: String,
    /// The calling agent.
    pub node_id: String,
    /// The operation it called.
    pub operation: String,
    /// Its arguments, as validated.
    pub args: Map<String, Value>,
    /// The operation's class, as the policy saw it.
    pub class: OperationClass,
    /// When it was first asked (milliseconds since the Unix epoch).
    pub asked_at: u64,
}

impl Asked {
    /// The JSON the view and `approvals list --json` show.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id, "projectId": self.project_id, "nodeId": self.node_id,
            "operation": self.operation, "args": self.args, "class": self.class.name(),
            "askedAt": self.asked_at,
        })
    }
}

/// What the person was shown of a call, which their answer is bound to.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    /// The calling agent.
    pub node_id: String,
    /// The operation.
    pub operation: String,
    /// The arguments.
    pub args: Map<String, Value>,
}

/// The person's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// This call runs; the next one asks again.
    AllowOnce,
    /// This call runs, and this class of this agent no longer asks until `serve` stops.
    AllowForSession,
    /// This call runs, and the agent's rule for this class becomes `allow` (saved).
    AllowAlways,
    /// This call is refused, with the person's reason if they gave one.
    Deny(Option<String>),
}

impl Decision {
    /// Whether the call runs.
    pub fn allows(&self) -> bool {
        !matches!(self, Decision::Deny(_))
    }

    /// What a held call is answered: a refusal for the agent, or who let it run.
    fn outcome(&self) -> Outcome {
        match self {
            Decision::Deny(Some(reason)) => Err(format!(
                "The person denied this call: {reason}. {NOTHING_DONE}"
            )),
            Decision::Deny(None) => Err(format!("The person denied this call. {NOTHING_DONE}")),
            Decision::AllowOnce => Ok(json!("allowed once by the person")),
            Decision::AllowForSession => Ok(json!("allowed for this session by the person")),
            Decision::AllowAlways => Ok(json!("always allowed by the person")),
        }
    }
}

const NOTHING_DONE: &str =
    "Nothing was done; do not retry it as it is: ask the user, or do something else.";

/// What [`Approvals::ask`] made of a call.
pub enum Asking {
    /// The person answered this very call while it was not waiting: apply it now.
    Decided(Decision),
    /// Wait on the request with this id.
    Wait(String),
    /// Refused: the agent has too many requests waiting.
    TooMany(String),
}

struct Entry {
    asked: Asked,
    decision: Option<Decision>,
    /// A call waits on it now.
    held: bool,
    /// When it is dropped, once no call waits on it.
    kept_until: Instant,
}

/// Every request waiting for the person's answer.
#[derive(Default)]
pub struct Approvals {
    entries: Mutex<HashMap<String, Entry>>,
    /// Changes whenever the list does (the view's long poll looks at it).
    version: AtomicU64,
}

impl Approvals {
    /// A request for `request` of `identity` (class `class`): an earlier one for the same
    /// call if it is still kept, else a new one.
    pub fn ask(
        &self,
        identity: &ToolIdentity,
        request: &ToolRequest,
        class: OperationClass,
    ) -> Asking {
        let mut entries = lock_or_recover(&self.entries);
        let now = Instant::now();
        entries.retain(|_, e| e.held || e.kept_until > now);
        let same = |e: &Entry| {
            e.asked.node_id == identity.node_id
                && e.asked.project_id == identity.project_id
                && e.asked.operation == request.operation
                && e.asked.args == request.args
        };
        if let Some((id, entry)) = entries.iter_mut().find(|(_, e)| !e.held && same(e)) {
            let id = id.clone();
            if entry.decision.is_some() {
                let decision = entries.remove(&id).and_then(|e| e.decision);
                self.changed();
                return Asking::Decided(decision.unwrap_or(Decision::AllowOnce));
            }
            entry.held = true;
            return Asking::Wait(id);
        }
        let mine = entries
            .values()
            .filter(|e| e.asked.node_id == identity.node_id)
            .count();
        if mine >= PENDING_PER_AGENT {
            return Asking::TooMany(format!("This agent already has {mine} calls waiting for the person's approval (at most {PENDING_PER_AGENT}); nothing was done. Wait for one to be answered (call it again with the same arguments) before asking for another."));
        }
        let Ok(id) = random_hex(16) else {
            return Asking::TooMany("Could not make an approval request; try again".into());
        };
        let asked = Asked {
            id: id.clone(),
            project_id: identity.project_id.clone(),
            node_id: identity.node_id.clone(),
            operation: request.operation.clone(),
            args: request.args.clone(),
            class,
            asked_at: unix_millis(),
        };
        let entry = Entry {
            asked,
            decision: None,
            held: true,
            kept_until: now + KEPT,
        };
        entries.insert(id.clone(), entry);
        self.changed();
        Asking::Wait(id)
    }

    /// What a held call waits on: request `id`'s answer.
    pub fn awaited(self: &Arc<Self>, id: String) -> Box<dyn Awaited> {
        Box::new(Answer {
            approvals: Arc::clone(self),
            id,
        })
    }

    /// The requests not answered yet, oldest first.
    pub fn list(&self) -> Vec<Asked> {
        let mut entries = lock_or_recover(&self.entries);
        let now = Instant::now();
        entries.retain(|_, e| e.held || e.kept_until > now);
        let mut asked: Vec<Asked> = entries
            .values()
            .filter(|e| e.decision.is_none())
            .map(|e| e.asked.clone())
            .collect();
        asked.sort_by(|a, b| (a.asked_at, &a.id).cmp(&(b.asked_at, &b.id)));
        asked
    }

    /// The operation of a request of `node_id` in `project_id` waiting for the person's
    /// answer, if any (the oldest): held now, or listed still for the same call again.
    pub fn held_for(&self, project_id: &str, node_id: &str) -> Option<String> {
        let entries = lock_or_recover(&self.entries);
        let now = Instant::now();
        let listed = |e: &&Entry| e.decision.is_none() && (e.held || e.kept_until > now);
        let held = entries.values().filter(listed);
        let held = held.filter(|e| e.asked.project_id == project_id && e.asked.node_id == node_id);
        held.min_by_key(|e| e.asked.asked_at)
            .map(|e| e.asked.operation.clone())
    }

    /// Records the person's answer to request `id`, which showed them `shown`; the
    /// request, or why the answer is refused (nothing changes then).
    pub fn decide(&self, id: &str, shown: &Shown, decision: Decision) -> Result<Asked, String> {
        let mut entries = lock_or_recover(&self.entries);
        let entry = entries
            .get_mut(id)
            .filter(|e| e.decision.is_none() && (e.held || e.kept_until > Instant::now()))
            .ok_or_else(|| format!("No call waits for an answer as {id:?}: it was answered, withdrawn or expired, or never asked. Nothing was decided; look at the list again."))?;
        let asked = &entry.asked;
        let same = asked.node_id == shown.node_id
            && asked.operation == shown.operation
            && asked.args == shown.args;
        if !same {
            return Err(format!("The call {id:?} is not the one shown (agent, operation or arguments differ); nothing was decided. Look at the list again."));
        }
        entry.decision = Some(decision);
        let asked = asked.clone();
        drop(entries);
        self.changed();
        Ok(asked)
    }

    /// Withdraws every request of agent `node_id` (revoked, closed): a call waiting on
    /// one is answered so.
    pub fn withdraw(&self, node_id: &str) {
        let mut entries = lock_or_recover(&self.entries);
        let before = entries.len();
        entries.retain(|_, e| e.asked.node_id != node_id);
        if entries.len() != before {
            self.changed();
        }
    }

    /// A number that changes whenever the list does.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    fn changed(&self) {
        self.version.fetch_add(1, Ordering::SeqCst);
    }
}

/// A held call's wait for request `id`'s answer.
struct Answer {
    approvals: Arc<Approvals>,
    id: String,
}

impl Awaited for Answer {
    fn check(&mut self) -> Option<Outcome> {
        let mut entries = lock_or_recover(&self.approvals.entries);
        let Some(entry) = entries.get(&self.id) else {
            return Some(Err("The approval request was withdrawn (its agent was revoked or its node closed); nothing was done.".into()));
        };
        entry.decision.as_ref()?;
        let decision = entries.remove(&self.id).and_then(|e| e.decision);
        drop(entries);
        self.approvals.changed();
        decision.map(|decision| decision.outcome())
    }

    fn at_deadline(&mut self) -> Outcome {
        Err(format!("The person has not answered this call yet (approval {}, waited {} s). Nothing was done. The request stays in the approvals list for {} minutes: call again with the same arguments to wait for the answer (it runs at once if it was allowed meanwhile); do other work meanwhile rather than asking again with other arguments.", self.id, HOLD.as_secs(), KEPT.as_secs() / 60))
    }
}

impl Drop for Answer {
    /// However the wait ended, the request is kept (if still there) for the same call.
    fn drop(&mut self) {
        if let Some(entry) = lock_or_recover(&self.approvals.entries).get_mut(&self.id) {
            entry.held = false;
            entry.kept_until = Instant::now() + KEPT;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(node: &str) -> ToolIdentity {
        ToolIdentity {
            project_id: "p".into(),
            node_id: node.into(),
        }
    }

    fn request(command: &str) -> ToolRequest {
        let args = json!({ "nodeId": "term-1", "command": command });
        ToolRequest {
            operation: "terminal_submit".into(),
            args: args.as_object().cloned().unwrap(),
        }
    }

    fn shown(node: &str, request: &ToolRequest) -> Shown {
        Shown {
            node_id: node.into(),
            operation: request.operation.clone(),
            args: request.args.clone(),
        }
    }

    fn wait_id(asking: Asking) -> String {
        match asking {
            Asking::Wait(id) => id,
            _ => panic!("expected a wait"),
        }
    }

    #[test]
    fn an_answer_is_bound_to_its_call_and_given_once() {
        let approvals = Arc::new(Approvals::default());
        let call = request("ls");
        let id = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
        let mut held = approvals.awaited(id.clone());
        assert!(held.check().is_none(), "no answer yet");
        assert_eq!(approvals.list().len(), 1);
        // Other arguments, another agent, an unknown id: refused, nothing decided.
        let other = shown("a", &request("rm -rf /"));
        assert!(approvals
            .decide(&id, &other, Decision::AllowOnce)
            .unwrap_err()
            .contains("not the one shown"));
        let elsewhere = shown("b", &call);
        assert!(approvals
            .decide(&id, &elsewhere, Decision::AllowOnce)
            .is_err());
        assert!(approvals
            .decide("feed", &shown("a", &call), Decision::AllowOnce)
            .is_err());
        assert!(held.check().is_none());
        // The right one allows it; the call runs; a replay is refused.
        approvals
            .decide(&id, &shown("a", &call), Decision::AllowOnce)
            .unwrap();
        assert_eq!(held.check(), Some(Ok(json!("allowed once by the person"))));
        drop(held);
        let replay = approvals.decide(&id, &shown("a", &call), Decision::AllowOnce);
        assert!(replay
            .unwrap_err()
            .contains("answered, withdrawn or expired"));
        // The next identical call asks again.
        assert!(
            matches!(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers), Asking::Wait(new) if new != id)
        );
    }

    #[test]
    fn a_denial_carries_the_reason_and_an_unanswered_call_is_found_again() {
        let approvals = Arc::new(Approvals::default());
        let call = request("make deploy");
        let id = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
        let mut held = approvals.awaited(id.clone());
        let late = held.at_deadline().unwrap_err();
        assert!(
            late.contains(&id) && late.contains("call again with the same arguments"),
            "{late}"
        );
        drop(held);
        // Still listed; the same call waits on the same request.
        assert_eq!(approvals.list()[0].id, id);
        let again = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
        assert_eq!(again, id);
        let mut held = approvals.awaited(again);
        let no = Decision::Deny(Some("not on Friday".into()));
        approvals.decide(&id, &shown("a", &call), no).unwrap();
        let denied = held.check().unwrap().unwrap_err();
        assert!(
            denied.starts_with("The person denied this call: not on Friday."),
            "{denied}"
        );
        assert!(approvals.list().is_empty());
    }

    #[test]
    fn an_expired_request_cannot_be_answered_and_is_dropped() {
        let approvals = Arc::new(Approvals::default());
        let call = request("ls");
        let id = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
        drop(approvals.awaited(id.clone()));
        // As if its ten minutes had passed.
        let past = Instant::now() - Duration::from_secs(1);
        lock_or_recover(&approvals.entries)
            .get_mut(&id)
            .unwrap()
            .kept_until = past;
        let late = approvals.decide(&id, &shown("a", &call), Decision::AllowOnce);
        assert!(late.unwrap_err().contains("expired"));
        assert!(approvals.list().is_empty());
        // The same call now asks anew.
        let again = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
        assert_ne!(again, id);
    }

    #[test]
    fn an_answer_given_while_no_call_waits_applies_to_the_same_call_later() {
        let approvals = Arc::new(Approvals::default());
        let call = request("ls");
        let id = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
        drop(approvals.awaited(id.clone()));
        approvals
            .decide(&id, &shown("a", &call), Decision::AllowForSession)
            .unwrap();
        assert!(matches!(
            approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers),
            Asking::Decided(Decision::AllowForSession)
        ));
    }

    #[test]
    fn an_agent_has_a_few_requests_at_most_and_withdrawing_answers_its_calls() {
        let approvals = Arc::new(Approvals::default());
        let mut held = Vec::new();
        for n in 0..PENDING_PER_AGENT {
            let call = request(&format!("echo {n}"));
            let id = wait_id(approvals.ask(&identity("a"), &call, OperationClass::TerminalsOthers));
            held.push(approvals.awaited(id));
        }
        let more = approvals.ask(
            &identity("a"),
            &request("echo more"),
            OperationClass::TerminalsOthers,
        );
        assert!(matches!(more, Asking::TooMany(why) if why.contains("at most 4")));
        // Another agent still may ask.
        let other = approvals.ask(
            &identity("b"),
            &request("ls"),
            OperationClass::TerminalsOthers,
        );
        assert!(matches!(other, Asking::Wait(_)));
        let before = approvals.version();
        approvals.withdraw("a");
        assert!(approvals.version() > before);
        for mut wait in held {
            assert!(wait.check().unwrap().unwrap_err().contains("withdrawn"));
        }
        assert_eq!(approvals.list().len(), 1);
    }
}
