//! The person's side of the policy and approvals: the app's view and CLI call these
//! methods of [`AgentToolRuntime`]; agents' tools never reach them. The rules and held
//! calls themselves are the [`super::gate`]'s.

use std::io;
use std::path::PathBuf;

use serde_json::Value;

use super::approvals::{Asked, Decision, Shown};
use super::policy::{Policy, Rule};
use super::tool_runtime::AgentToolRuntime;
use crate::base::lock_or_recover as lock;
use crate::protocol::OperationClass;

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

    /// The classes the person allowed for the rest of this run (answers
    /// [`Decision::AllowForSession`]), as (project, agent, class), sorted. Kept in memory
    /// only: they end with the runtime.
    pub fn session_grants(&self) -> Vec<(String, String, OperationClass)> {
        let mut grants: Vec<_> = lock(&self.core.gate.rules).grants.iter().cloned().collect();
        grants.sort();
        grants
    }

    /// A number that changes whenever the rules do (grants included).
    pub fn policy_version(&self) -> u64 {
        self.core.gate.generation()
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
