//! What each agent may do: a rule (`allow`, `ask`, `deny`) per class of operations
//! ([`OperationClass`]), per project and per agent, changed only by the person (the app's
//! own API, its view and CLI), never through an agent's tools.
//!
//! Where a rule comes from, most specific first: the agent's own rule, its project's, the
//! file's `classes`, the starting policy (a preset or a file the app names, never
//! written), and last `allow` (so with no policy every call runs, as the protocol
//! says). Then, in the order deny → ask → allow: a `deny` refuses; an `ask` holds the
//! call for the person unless they allowed that class for that agent for the rest of
//! this run (a grant, kept in memory only); an `allow` runs.
//!
//! The saved rules are `<data>/agent-tools/policy.json` (0600, written whole and
//! renamed into place; the project folder is never used: agents write there):
//!
//! ```json
//! { "version": 1,
//!   "classes": { "launch": "ask" },
//!   "projects": { "<projectId>": { "classes": { "browser": "deny" },
//!                                  "agents": { "<nodeId>": { "launch": "allow" } } } } }
//! ```

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::base::files::{private_json, read_private_json};
use crate::protocol::{OperationClass, OPERATION_CLASSES};

/// What happens to a call of one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// It runs.
    Allow,
    /// It waits for the person's answer.
    Ask,
    /// It is refused.
    Deny,
}

impl Rule {
    /// Its name in files and answers.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Allow => "allow",
            Rule::Ask => "ask",
            Rule::Deny => "deny",
        }
    }

    /// The rule named `name`.
    pub fn named(name: &str) -> Option<Rule> {
        [Rule::Allow, Rule::Ask, Rule::Deny]
            .into_iter()
            .find(|rule| rule.name() == name)
    }
}

/// A rule for some classes (the others: no rule at this level).
pub type Rules = BTreeMap<OperationClass, Rule>;

/// The named starting policies: `open` (every call runs: the default; `serve` adds asking
/// before typing into an unconfined terminal whenever it confines agents), `careful` (asks
/// before another's terminal, a launch, the browser and messages), `strict` (asks before
/// anything but reading and the canvas).
pub const PRESETS: &[&str] = &["open", "careful", "strict"];

/// The rules of preset `name`.
pub fn preset(name: &str) -> Option<Rules> {
    use OperationClass::*;
    let asked: &[OperationClass] = match name {
        "open" => &[],
        "careful" => &[
            TerminalsOthers,
            TerminalsUnconfined,
            Launch,
            Browser,
            Messaging,
        ],
        "strict" => &[
            TerminalsOwn,
            TerminalsOthers,
            TerminalsUnconfined,
            Launch,
            Browser,
            Messaging,
        ],
        _ => return None,
    };
    Some(asked.iter().map(|class| (*class, Rule::Ask)).collect())
}

/// The rules of one project.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProjectRules {
    /// For every agent of the project.
    pub classes: Rules,
    /// Each agent's own, by node id.
    pub agents: BTreeMap<String, Rules>,
}

/// A whole policy: what a file holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policy {
    /// For every project.
    pub classes: Rules,
    /// By project id.
    pub projects: BTreeMap<String, ProjectRules>,
}

impl Policy {
    /// The most specific rule for `class` of agent `node_id` in `project_id`, if any.
    pub fn rule(&self, project_id: &str, node_id: &str, class: OperationClass) -> Option<Rule> {
        let project = self.projects.get(project_id);
        let agent = project.and_then(|p| p.agents.get(node_id));
        agent
            .and_then(|rules| rules.get(&class))
            .or_else(|| project.and_then(|p| p.classes.get(&class)))
            .or_else(|| self.classes.get(&class))
            .copied()
    }

    /// Reads a policy file's JSON; the error names what is wrong.
    pub fn from_json(value: &Value) -> Result<Policy, String> {
        let object = value.as_object().ok_or("a policy must be a JSON object")?;
        for key in object.keys() {
            if !["version", "classes", "projects"].contains(&key.as_str()) {
                return Err(format!(
                    "unknown key {key:?} (expected version, classes, projects)"
                ));
            }
        }
        let mut policy = Policy {
            classes: rules_from(object.get("classes"), "classes")?,
            ..Policy::default()
        };
        let none = Map::new();
        let projects = object.get("projects").map_or(Ok(&none), |p| {
            p.as_object().ok_or("projects must be an object")
        });
        for (project_id, project) in projects? {
            let at = format!("projects.{project_id}");
            let agents = project.get("agents").map_or(Ok(&none), |a| {
                a.as_object()
                    .ok_or(format!("{at}.agents must be an object"))
            })?;
            let mut rules = ProjectRules {
                classes: rules_from(project.get("classes"), &format!("{at}.classes"))?,
                agents: BTreeMap::new(),
            };
            for (node_id, agent) in agents {
                let at = format!("{at}.agents.{node_id}");
                rules
                    .agents
                    .insert(node_id.clone(), rules_from(Some(agent), &at)?);
            }
            policy.projects.insert(project_id.clone(), rules);
        }
        Ok(policy)
    }

    /// The JSON a policy file holds.
    pub fn to_json(&self) -> Value {
        let projects: Map<String, Value> = self
            .projects
            .iter()
            .map(|(id, project)| {
                let agents: Map<String, Value> = project
                    .agents
                    .iter()
                    .map(|(node, rules)| (node.clone(), rules_json(rules)))
                    .collect();
                let project = json!({ "classes": rules_json(&project.classes), "agents": agents });
                (id.clone(), project)
            })
            .collect();
        json!({ "version": 1, "classes": rules_json(&self.classes), "projects": projects })
    }

    /// Reads the policy at `path`: `open` (no rule) when there is no file.
    pub fn load(path: &Path) -> io::Result<Policy> {
        match read_private_json(path)? {
            None => Ok(Policy::default()),
            Some(value) => Policy::from_json(&value).map_err(|why| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {why}", path.display()),
                )
            }),
        }
    }

    /// A starting policy named on a command line: a preset's name or a policy file.
    pub fn named(name: &str) -> Result<Policy, String> {
        if let Some(classes) = preset(name) {
            return Ok(Policy {
                classes,
                ..Policy::default()
            });
        }
        let path = PathBuf::from(name);
        if !path.is_file() {
            return Err(format!(
                "no policy {name:?}: name one of {} or a policy file",
                PRESETS.join(", ")
            ));
        }
        let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let value = serde_json::from_slice(&text)
            .map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
        Policy::from_json(&value).map_err(|why| format!("{}: {why}", path.display()))
    }
}

fn rules_from(value: Option<&Value>, at: &str) -> Result<Rules, String> {
    let Some(value) = value else {
        return Ok(Rules::new());
    };
    let object = value.as_object().ok_or(format!("{at} must be an object"))?;
    let mut rules = Rules::new();
    for (class, rule) in object {
        let known = OPERATION_CLASSES.map(OperationClass::name).join(", ");
        let class = OperationClass::named(class)
            .ok_or(format!("{at}: unknown class {class:?} (one of {known})"))?;
        let rule = rule.as_str().and_then(Rule::named).ok_or(format!(
            "{at}.{}: expected \"allow\", \"ask\" or \"deny\"",
            class.name()
        ))?;
        rules.insert(class, rule);
    }
    Ok(rules)
}

fn rules_json(rules: &Rules) -> Value {
    let pairs = rules
        .iter()
        .map(|(class, rule)| (class.name().to_string(), json!(rule.name())));
    Value::Object(pairs.collect())
}

/// The rules in force: the starting policy under the saved one, and this run's grants.
#[derive(Debug, Default)]
pub struct Rulebook {
    /// The starting policy (`--policy`), never written.
    pub starting: Policy,
    /// The person's saved rules (`policy.json`), over the starting ones.
    pub saved: Policy,
    /// Classes the person allowed for an agent for the rest of this run: (project, node,
    /// class).
    pub grants: HashSet<(String, String, OperationClass)>,
}

impl Rulebook {
    /// The rule for a call of `class` by `node_id` (deny → ask → allow, module docs).
    pub fn rule(&self, project_id: &str, node_id: &str, class: OperationClass) -> Rule {
        let rule = self
            .saved
            .rule(project_id, node_id, class)
            .or_else(|| self.starting.rule(project_id, node_id, class))
            .unwrap_or(Rule::Allow);
        let granted = || {
            let key = (project_id.to_string(), node_id.to_string(), class);
            self.grants.contains(&key)
        };
        match rule {
            Rule::Ask if granted() => Rule::Allow,
            rule => rule,
        }
    }

    /// Each class's rule for one agent, as `session_info` tells it.
    pub fn summary(&self, project_id: &str, node_id: &str) -> Value {
        let pairs = OPERATION_CLASSES.map(|class| {
            let rule = self.rule(project_id, node_id, class);
            (class.name().to_string(), json!(rule.name()))
        });
        Value::Object(pairs.into_iter().collect())
    }

    /// Whether any rule is not `allow` (else no call needs a look).
    pub fn restricts(&self) -> bool {
        OPERATION_CLASSES
            .into_iter()
            .any(|class| self.restricts_class(class))
    }

    /// Whether any rule for `class` is not `allow` (else no call of it needs a look).
    pub fn restricts_class(&self, class: OperationClass) -> bool {
        let any = |policy: &Policy| {
            let not_allow = |rules: &Rules| rules.get(&class).is_some_and(|r| *r != Rule::Allow);
            not_allow(&policy.classes)
                || policy.projects.values().any(|project| {
                    not_allow(&project.classes) || project.agents.values().any(not_allow)
                })
        };
        any(&self.starting) || any(&self.saved)
    }

    /// Saves `rule` for `class` of agent `node_id` into the person's rules at `path`.
    pub fn save_agent_rule(
        &mut self,
        path: &Path,
        (project_id, node_id): (&str, &str),
        class: OperationClass,
        rule: Rule,
    ) -> io::Result<()> {
        let mut saved = self.saved.clone();
        let project = saved.projects.entry(project_id.to_string()).or_default();
        let agent = project.agents.entry(node_id.to_string()).or_default();
        agent.insert(class, rule);
        private_json(path, &saved.to_json())?;
        self.saved = saved;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use OperationClass::*;

    #[test]
    fn the_most_specific_rule_wins_and_no_rule_allows() {
        let policy = Policy::from_json(&json!({
            "version": 1,
            "classes": { "launch": "ask", "browser": "deny" },
            "projects": { "p": {
                "classes": { "browser": "ask" },
                "agents": { "a": { "launch": "allow" } } } }
        }))
        .unwrap();
        let book = Rulebook {
            saved: policy.clone(),
            ..Rulebook::default()
        };
        assert_eq!(book.rule("p", "a", Launch), Rule::Allow);
        assert_eq!(book.rule("p", "b", Launch), Rule::Ask);
        assert_eq!(book.rule("p", "b", Browser), Rule::Ask);
        assert_eq!(book.rule("q", "b", Browser), Rule::Deny);
        assert_eq!(book.rule("q", "b", Read), Rule::Allow);
        assert_eq!(Policy::from_json(&policy.to_json()).unwrap(), policy);
    }

    #[test]
    fn a_grant_turns_ask_into_allow_but_never_deny() {
        let mut book = Rulebook {
            starting: Policy::named("careful").unwrap(),
            ..Rulebook::default()
        };
        book.saved.classes.insert(Browser, Rule::Deny);
        for class in [Launch, Browser] {
            book.grants.insert(("p".into(), "a".into(), class));
        }
        assert_eq!(book.rule("p", "a", Launch), Rule::Allow);
        assert_eq!(book.rule("p", "b", Launch), Rule::Ask);
        assert_eq!(book.rule("p", "a", Browser), Rule::Deny);
        assert!(book.restricts());
        assert!(!Rulebook::default().restricts());
        assert_eq!(book.summary("p", "b")["terminals-others"], "ask");
        assert_eq!(book.summary("p", "b")["read"], "allow");
    }

    #[test]
    fn a_bad_policy_says_what_is_wrong() {
        let cases = [
            (json!([]), "a policy must be a JSON object"),
            (json!({"clases": {}}), "unknown key \"clases\""),
            (
                json!({"classes": {"shell": "ask"}}),
                "unknown class \"shell\"",
            ),
            (
                json!({"classes": {"launch": "maybe"}}),
                "classes.launch: expected",
            ),
            (
                json!({"projects": {"p": {"agents": {"a": {"read": 1}}}}}),
                "projects.p.agents.a.read: expected",
            ),
        ];
        for (value, said) in cases {
            let error = Policy::from_json(&value).unwrap_err();
            assert!(error.contains(said), "{error}");
        }
        let error = Policy::named("carefull").unwrap_err();
        assert!(error.contains("open, careful, strict"), "{error}");
    }

    #[test]
    fn a_saved_rule_is_written_privately_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("policy-{}", crate::base::random_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.json");
        let mut book = Rulebook::default();
        book.save_agent_rule(&path, ("p", "a"), Launch, Rule::Allow)
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = Policy::load(&path).unwrap();
        assert_eq!(read.rule("p", "a", Launch), Some(Rule::Allow));
        assert_eq!(read, book.saved);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
