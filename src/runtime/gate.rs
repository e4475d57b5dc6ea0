//! The person's policy at the server's door: each admitted call's class
//! ([`OperationClass`]) and rule ([`super::policy`]), and calls held for their answer
//! ([`super::approvals`]). With no policy set (or one that allows everything) every call
//! runs, as the protocol says, after one atomic load.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::approvals::{Approvals, Asking, HOLD};
use super::policy::{Rule, Rulebook};
use crate::base::lock_or_recover as lock;
use crate::protocol::{OperationClass, ToolIdentity, ToolRequest, OPERATION_CLASSES};
use crate::server::{Admission, AgentToolServer, Wait};

/// The policy's state in the runtime.
#[derive(Default)]
pub(super) struct Gate {
    pub(super) rules: Mutex<Rulebook>,
    /// Where the person's rules are saved (`None`: not saved).
    pub(super) saved_at: Mutex<Option<PathBuf>>,
    /// The classes (bit `1 << index` in [`OPERATION_CLASSES`]) some rule does not
    /// `allow`: a call of any other class needs no look (0: no call does).
    restricted: AtomicU32,
    /// Changes with every rule (for `session_info`'s cached answers).
    generation: AtomicU64,
    pub(super) approvals: Arc<Approvals>,
    /// Who opened each terminal in this run: (project, terminal) → agent.
    opened: Mutex<HashMap<(String, String), String>>,
}

impl Gate {
    pub(super) fn changed(&self, rules: &Rulebook) {
        let restricted = OPERATION_CLASSES
            .iter()
            .enumerate()
            .filter(|(_, class)| rules.restricts_class(**class))
            .fold(0, |mask, (index, _)| mask | 1 << index);
        self.restricted.store(restricted, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The class of `request` by `identity`; `unconfined` says whether a terminal (by node
    /// id) runs unconfined, asked only for typing into another's terminal.
    fn class_of(
        &self,
        identity: &ToolIdentity,
        request: &ToolRequest,
        unconfined: &dyn Fn(&str) -> bool,
    ) -> Option<OperationClass> {
        let operation = request.operation.as_str();
        if !OperationClass::depends_on_terminal(operation) {
            return OperationClass::of(operation, false);
        }
        let terminal = request.args.get("nodeId").and_then(Value::as_str);
        let terminal = terminal.unwrap_or("");
        let key = (identity.project_id.clone(), terminal.to_string());
        let own = lock(&self.opened).get(&key) == Some(&identity.node_id);
        if !own && OperationClass::types(operation) && unconfined(terminal) {
            return Some(OperationClass::TerminalsUnconfined);
        }
        OperationClass::of(operation, own)
    }

    /// Records that `identity` opened terminal `terminal_id`.
    pub(super) fn opened(&self, identity: &ToolIdentity, terminal_id: &str) {
        let key = (identity.project_id.clone(), terminal_id.to_string());
        lock(&self.opened).insert(key, identity.node_id.clone());
    }

    /// [`crate::server::ServerCallbacks::admission`]: the policy's rule for this call. A
    /// held call takes one of `server`'s waiting places (`None`: the server is stopping).
    pub(super) fn admission(
        &self,
        identity: &ToolIdentity,
        request: &ToolRequest,
        server: Option<Arc<AgentToolServer>>,
        unconfined: &dyn Fn(&str) -> bool,
    ) -> Admission {
        let gate = self;
        if !gate.restricts() {
            return Admission::Run;
        }
        let Some(class) = gate.class_of(identity, request, unconfined) else {
            return Admission::Run;
        };
        if !gate.restricts_class(class) {
            return Admission::Run;
        }
        let (project, node) = (&identity.project_id, &identity.node_id);
        match lock(&gate.rules).rule(project, node, class) {
            Rule::Allow => return Admission::Run,
            Rule::Deny => return Admission::Refuse(format!("The person's policy denies {} operations to this agent ({} is one); nothing was done. Only the person can change the policy: ask them if you need it.", class.name(), request.operation)),
            Rule::Ask => {}
        }
        let id = match gate.approvals.ask(identity, request, class) {
            Asking::Wait(id) => id,
            Asking::Decided(decision) if decision.allows() => return Admission::Run,
            Asking::Decided(_) => {
                return Admission::Refuse("The person denied this call. Nothing was done; do not retry it as it is: ask the user, or do something else.".into())
            }
            Asking::TooMany(why) => return Admission::Refuse(why),
        };
        let awaited = gate.approvals.awaited(id);
        let Some(server) = server else {
            return Admission::Refuse("Tool service is shutting down; try again".into());
        };
        match server.reserve_wait(identity) {
            Ok(slot) => Admission::Hold(Wait {
                slot,
                deadline: Instant::now() + HOLD,
                awaited,
            }),
            Err(refused) => Admission::Refuse(refused),
        }
    }

    /// [`crate::server::ServerCallbacks::offers`]: every operation but those the policy
    /// denies to this agent whichever terminal they name.
    pub(super) fn offers(&self, identity: &ToolIdentity, operation: &str) -> bool {
        if !self.restricts() {
            return true;
        }
        let rules = lock(&self.rules);
        let denied = |own| {
            OperationClass::of(operation, own).is_some_and(|class| {
                rules.rule(&identity.project_id, &identity.node_id, class) == Rule::Deny
            })
        };
        !(denied(true) && denied(false))
    }

    /// `session_info`'s `policy`: each class's rule, while some rule is not `allow`.
    pub(super) fn summary_for(&self, identity: &ToolIdentity) -> Option<Value> {
        self.restricts()
            .then(|| lock(&self.rules).summary(&identity.project_id, &identity.node_id))
    }

    /// Some rule is not `allow`.
    fn restricts(&self) -> bool {
        self.restricted.load(Ordering::SeqCst) != 0
    }

    /// Some rule for `class` is not `allow`.
    fn restricts_class(&self, class: OperationClass) -> bool {
        let index = OPERATION_CLASSES.iter().position(|c| *c == class);
        index.is_some_and(|index| self.restricted.load(Ordering::SeqCst) & 1 << index != 0)
    }

    /// A number that changes whenever the rules do.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}
