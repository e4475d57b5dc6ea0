//! The person's policy at the server's door: each admitted call's class
//! ([`OperationClass`]) and rule ([`super::policy`]), and calls held for their answer
//! ([`super::approvals`]). With no policy set (or one that allows everything) every call
//! runs, as the protocol says, after one atomic load.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::approvals::{Approvals, Asked, Asking, Decision, Shown, HOLD};
use super::policy::{Policy, Rule, Rulebook};
use super::tool_runtime::{lock, AgentToolRuntime, Core};
use crate::protocol::{OperationClass, ToolIdentity, ToolRequest};
use crate::server::{Admission, Wait};

/// The policy's state in the runtime.
#[derive(Default)]
pub(super) struct Gate {
    rules: Mutex<Rulebook>,
    /// Where the person's rules are saved (`None`: not saved).
    saved_at: Mutex<Option<PathBuf>>,
    /// Some rule is not `allow` (else no call needs a look).
    restricts: AtomicBool,
    /// Changes with every rule (for `session_info`'s cached answers).
    generation: AtomicU64,
    pub(super) approvals: Arc<Approvals>,
    /// Who opened each terminal in this run: (project, terminal) → agent.
    opened: Mutex<HashMap<(String, String), String>>,
}

impl Gate {
    fn changed(&self, rules: &Rulebook) {
        self.restricts.store(rules.restricts(), Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The class of `request` by `identity`.
    fn class_of(&self, identity: &ToolIdentity, request: &ToolRequest) -> Option<OperationClass> {
        let operation = request.operation.as_str();
        let own = OperationClass::depends_on_terminal(operation) && {
            let terminal = request.args.get("nodeId").and_then(Value::as_str);
            let key = (
                identity.project_id.clone(),
                terminal.unwrap_or("").to_string(),
            );
            lock(&self.opened).get(&key) == Some(&identity.node_id)
        };
        OperationClass::of(operation, own)
    }

    /// Records that `identity` opened terminal `terminal_id`.
    pub(super) fn opened(&self, identity: &ToolIdentity, terminal_id: &str) {
        let key = (identity.project_id.clone(), terminal_id.to_string());
        lock(&self.opened).insert(key, identity.node_id.clone());
    }
}

impl Core {
    /// [`crate::server::ServerCallbacks::admission`]: the policy's rule for this call.
    pub(super) fn admission_of(&self, identity: &ToolIdentity, request: &ToolRequest) -> Admission {
        let gate = &self.gate;
        if !gate.restricts.load(Ordering::SeqCst) {
            return Admission::Run;
        }
        let Some(class) = gate.class_of(identity, request) else {
            return Admission::Run;
        };
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
        let Some(server) = self.server() else {
            return Admission::Refuse("Tool service is shutting down; try again".into());
        };
        match server.reserve_wait(project) {
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
    pub(super) fn offers_to(&self, identity: &ToolIdentity, operation: &str) -> bool {
        if !self.gate.restricts.load(Ordering::SeqCst) {
            return true;
        }
        let rules = lock(&self.gate.rules);
        let denied = |own| {
            OperationClass::of(operation, own).is_some_and(|class| {
                rules.rule(&identity.project_id, &identity.node_id, class) == Rule::Deny
            })
        };
        !(denied(true) && denied(false))
    }

    /// `session_info`'s `policy`: each class's rule, while some rule is not `allow`.
    pub(super) fn policy_summary_of(&self, identity: &ToolIdentity) -> Option<Value> {
        self.gate
            .restricts
            .load(Ordering::SeqCst)
            .then(|| lock(&self.gate.rules).summary(&identity.project_id, &identity.node_id))
    }

    pub(super) fn policy_generation(&self) -> u64 {
        self.gate.generation.load(Ordering::SeqCst)
    }
}

/// The person's side of the policy: the app's view and CLI call these; agents' tools
/// never reach them.
impl AgentToolRuntime {
    /// Sets the starting policy (a preset or file the person named; never written) and
    /// where the person's own rules are kept (`saved_at`, read now if it exists, and
    /// written by [`decide`](Self::decide) with [`Decision::AllowAlways`] and
    /// [`set_rule`](Self::set_rule)). Without a call to this every call runs.
    pub fn set_policy(&self, starting: Policy, saved_at: Option<PathBuf>) -> io::Result<()> {
        let gate = &self.core.gate;
        let saved = match &saved_at {
            Some(path) => Policy::load(path)?,
            None => Policy::default(),
        };
        let mut rules = lock(&gate.rules);
        rules.starting = starting;
        rules.saved = saved;
        gate.changed(&rules);
        *lock(&gate.saved_at) = saved_at;
        Ok(())
    }

    /// The rules in force now (starting, saved).
    pub fn policy(&self) -> (Policy, Policy) {
        let rules = lock(&self.core.gate.rules);
        (rules.starting.clone(), rules.saved.clone())
    }

    /// Saves `rule` for `class` of one agent (`Some(node)`) or of the whole project.
    pub fn set_rule(
        &self,
        project_id: &str,
        node_id: Option<&str>,
        class: OperationClass,
        rule: Rule,
    ) -> io::Result<()> {
        let gate = &self.core.gate;
        let mut rules = lock(&gate.rules);
        let path = lock(&gate.saved_at).clone();
        match (node_id, path) {
            (Some(node), Some(path)) => {
                rules.save_agent_rule(&path, (project_id, node), class, rule)?
            }
            (None, path) => {
                let mut saved = rules.saved.clone();
                let project = saved.projects.entry(project_id.to_string()).or_default();
                project.classes.insert(class, rule);
                if let Some(path) = path {
                    crate::base::files::private_json(&path, &saved.to_json())?;
                }
                rules.saved = saved;
            }
            (Some(node), None) => {
                let project = rules
                    .saved
                    .projects
                    .entry(project_id.to_string())
                    .or_default();
                let agent = project.agents.entry(node.to_string()).or_default();
                agent.insert(class, rule);
            }
        }
        gate.changed(&rules);
        Ok(())
    }

    /// Each class's rule for agent `node_id` now (saved, starting, this run's grants), as
    /// `session_info` tells it to the agent; for the person's view of the rules.
    pub fn policy_summary(&self, project_id: &str, node_id: &str) -> Value {
        lock(&self.core.gate.rules).summary(project_id, node_id)
    }

    /// A number that changes whenever the rules do.
    pub fn policy_version(&self) -> u64 {
        self.core.policy_generation()
    }

    /// The calls waiting for the person's answer, oldest first.
    pub fn pending_approvals(&self) -> Vec<Asked> {
        self.core.gate.approvals.list()
    }

    /// A number that changes whenever [`pending_approvals`](Self::pending_approvals) does.
    pub fn approvals_version(&self) -> u64 {
        self.core.gate.approvals.version()
    }

    /// The person's answer to request `id`, which showed them `shown`: refused (with
    /// the reason) for an unknown, answered or expired id or another call; else
    /// recorded, and the held call goes on at once.
    pub fn decide(&self, id: &str, shown: &Shown, decision: Decision) -> Result<Asked, String> {
        let gate = &self.core.gate;
        let asked = gate.approvals.decide(id, shown, decision.clone())?;
        let who = (asked.project_id.clone(), asked.node_id.clone());
        match decision {
            Decision::AllowForSession => {
                let mut rules = lock(&gate.rules);
                rules.grants.insert((who.0, who.1, asked.class));
                gate.changed(&rules);
            }
            Decision::AllowAlways => {
                let saved = self.set_rule(&who.0, Some(&who.1), asked.class, Rule::Allow);
                if let Err(e) = saved {
                    return Err(format!(
                        "The call was allowed once, but the rule could not be saved: {e}"
                    ));
                }
            }
            _ => {}
        }
        self.server().waker().wake();
        Ok(asked)
    }
}
