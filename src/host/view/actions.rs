//! What the person does from the canvas view: `POST /api/act` with
//! `{"action": NAME, "args": {…}}`, once `check_head` (in `mod.rs`) has admitted it.
//!
//! Every action runs through the code that agents' calls or the CLI's commands use, never
//! a second implementation:
//! - `terminal_open`, `agent_launch`, `terminal_close`, `canvas_move`, `canvas_resize`:
//!   checked by the protocol's validator, then [`AgentToolRuntime::act_for_person`] (the
//!   canvas bridge and owner, `agent_launch`'s presets);
//! - `link` / `unlink` (`a`, `b`, `messages`): `person/links.rs`, as the `link` command;
//! - `browser_control` (`enabled`): `person/browser_control.rs`'s request file, as the
//!   `browser-control` command (it returns once `serve` has applied it);
//! - `keys` (`nodeId`, `text`): `HostTerminals::person_typed`, the input path of
//!   `terminal_input` (see `keys.rs` for what `text` may hold);
//! - `paste` (`nodeId`, `text`): `HostTerminals::person_pasted`, bracketed when the
//!   program asked for it;
//! - `approve` (`id`, `nodeId`, `operation`, `args`, `decision`, `reason`): the answer to
//!   one call waiting for the person, bound to the call the page showed
//!   ([`AgentToolRuntime::decide`], as the `approvals` command); "allow all shown" is one
//!   `approve` per call shown;
//! - `rule` (`nodeId`, `class`, `rule`): one agent's rule for a class
//!   ([`AgentToolRuntime::set_rule`], saved in `policy.json`, as the `policy` command);
//! - `worktree_diff` (`nodeId`, `offset`), `worktree_merge` (`nodeId`),
//!   `worktree_discard` (`nodeId`, `deleteBranch`): an agent's work in its git worktree
//!   ([`crate::host::worktrees`], as the `worktrees` command); a merge is refused while
//!   the agent's terminal is live or a process works in the worktree.
//!
//! Each is recorded in the project's activity trail as done by the person (`by:
//! "person"`), with its arguments; for `keys` and `paste` only the node and how many
//! characters, never the text.
//!
//! [`AgentToolRuntime::act_for_person`]: crate::runtime::AgentToolRuntime::act_for_person
//! [`AgentToolRuntime::decide`]: crate::runtime::AgentToolRuntime::decide
//! [`AgentToolRuntime::set_rule`]: crate::runtime::AgentToolRuntime::set_rule

use std::path::Path;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::keys;
use super::ViewSource;
use crate::host::person::worktrees::works_in;
use crate::host::person::{browser_control, links};
use crate::host::worktrees::Worktrees;
use crate::protocol::{validate_tool_request, OperationClass, ToolResult, OPERATION_CLASSES};
use crate::runtime::approvals::{Decision, Shown};
use crate::runtime::policy::Rule;
use crate::runtime::Terminals;

/// The largest `POST /api/act` body taken, as on `/call` (a paste of
/// [`keys::MAX_TEXT_CHARS`] characters fits, even with every one escaped in JSON).
pub const MAX_ACT_BODY: usize = 128 * 1024;

/// The canvas operations the person may run, by their tool names.
const CANVAS_ACTIONS: [&str; 5] = [
    "terminal_open",
    "agent_launch",
    "terminal_close",
    "canvas_move",
    "canvas_resize",
];

/// What an action did.
pub struct Acted {
    /// Its answer, or the text for the page.
    pub outcome: Result<Value, String>,
    /// Whether it was keys into a terminal (the view then looks for their echo sooner).
    pub typed: bool,
}

/// Runs one action (module docs) and records it.
pub fn act(source: &ViewSource, data: &Path, body: &[u8]) -> Acted {
    let refused = |error: String| Acted {
        outcome: Err(error),
        typed: false,
    };
    match serde_json::from_slice(body) {
        Ok(request) => act_on(source, data, &request),
        Err(_) => refused("Expected a JSON object {\"action\": NAME, \"args\": {…}}".into()),
    }
}

fn act_on(source: &ViewSource, data: &Path, request: &Value) -> Acted {
    let started = Instant::now();
    let refused = |error: &str| Acted {
        outcome: Err(error.to_string()),
        typed: false,
    };
    let Some(action) = request.get("action").and_then(Value::as_str) else {
        return refused("Missing action: send {\"action\": NAME, \"args\": {…}}");
    };
    let empty = Map::new();
    let args = match request.get("args") {
        None => &empty,
        Some(Value::Object(args)) => args,
        Some(_) => return refused("Expected args object"),
    };
    let (outcome, recorded) = run(source, data, action, args);
    // Recorded under a known name only: nothing the page sends names a line's operation.
    if let Some((operation, recorded_args)) = recorded {
        let result = match &outcome {
            Ok(value) => ToolResult::Ok(value.clone()),
            Err(error) => ToolResult::Err(error.clone()),
        };
        let server = source.runtime.server();
        server.record_person(
            &source.project_id,
            operation,
            Some(&recorded_args),
            &result,
            started,
        );
    }
    Acted {
        outcome,
        typed: action == "keys" || action == "paste",
    }
}

/// What the trail records of an action: the operation named, and its arguments.
type Recorded = (&'static str, Map<String, Value>);

/// The action's outcome, and what the trail records of it (`None`: an unknown action).
fn run(
    source: &ViewSource,
    data: &Path,
    action: &str,
    args: &Map<String, Value>,
) -> (Result<Value, String>, Option<Recorded>) {
    if let Some(name) = CANVAS_ACTIONS.iter().find(|name| **name == action) {
        let outcome = validate_tool_request(&json!({ "operation": name, "args": args }))
            .map_err(|e| e.to_string())
            .and_then(|request| source.runtime.act_for_person(&source.project_id, &request));
        return (outcome, Some((name, args.clone())));
    }
    match action {
        "link" | "unlink" => {
            let name = if action == "link" { "link" } else { "unlink" };
            (link(source, action, args), Some((name, args.clone())))
        }
        "browser_control" => {
            let outcome = match args.get("enabled") {
                Some(Value::Bool(enabled)) => browser_control::request(data, *enabled)
                    .map(|said| json!({ "enabled": enabled, "message": said })),
                _ => Err("Invalid enabled: expected true or false".into()),
            };
            (outcome, Some(("browser_control", args.clone())))
        }
        "keys" | "paste" => {
            let node_id = args.get("nodeId").and_then(Value::as_str).unwrap_or("");
            let text = args.get("text").and_then(Value::as_str).unwrap_or("");
            let terminals = &source.terminals;
            let outcome = keys::check(node_id, text).and_then(|()| {
                match action {
                    "paste" => terminals.person_pasted(node_id, text),
                    _ => terminals.person_typed(node_id, text),
                }
                .map(|()| json!({ "nodeId": node_id }))
            });
            // The count, never the text: it may be a password.
            let mut recorded = Map::new();
            recorded.insert("nodeId".into(), json!(node_id));
            recorded.insert(action.into(), json!(text.chars().count()));
            (outcome, Some(("terminal_input", recorded)))
        }
        "approve" => {
            let outcome = approve(source, args);
            let mut recorded = args.clone();
            // The trail names the call; its arguments are in the agent's own line.
            recorded.remove("args");
            (outcome, Some(("approve", recorded)))
        }
        "rule" => (rule(source, args), Some(("policy_rule", args.clone()))),
        "worktree_diff" => (worktree_diff(source, args), None),
        "worktree_merge" | "worktree_discard" => {
            let name = match action {
                "worktree_merge" => "worktree_merge",
                _ => "worktree_discard",
            };
            (worktree_act(source, action, args), Some((name, args.clone())))
        }
        _ => (
            Err(format!(
                "Unknown action {:?}: use one of {}, link, unlink, browser_control, keys, paste, approve, rule, worktree_diff, worktree_merge, worktree_discard",
                action.chars().take(40).collect::<String>(),
                CANVAS_ACTIONS.join(", ")
            )),
            None,
        ),
    }
}

/// `link` / `unlink` of `args.a` → `args.b` (`args.messages` for the messaging consent),
/// through the `link` command's parser and code, in the view's project folder.
fn link(source: &ViewSource, action: &str, args: &Map<String, Value>) -> Result<Value, String> {
    let id = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("Missing argument: {key} (an agent node id)"))
    };
    let mut words = vec![id("a")?, id("b")?];
    let messages = match args.get("messages") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err("Invalid messages: expected true or false".into()),
    };
    if messages && action == "link" {
        words.push("--messages".into());
    }
    let folder = source
        .project_folder()
        .ok_or("This project has no folder: links live in a folder project")?;
    let request = links::parse(&words, action == "link", folder)
        // The parser's usage line names CLI flags the page has no use for.
        .map_err(|e| {
            if e.starts_with("usage:") {
                "Invalid link: name two different agents".into()
            } else {
                e
            }
        })?;
    let said = match action {
        "link" => links::link(&request)?,
        _ => links::unlink(&request)?,
    };
    Ok(
        json!({ "a": request.a, "b": request.b, "agentMessages": request.messages, "message": said }),
    )
}

/// Lines of a diff one `worktree_diff` answers.
pub const DIFF_PAGE_LINES: usize = 400;

/// The project's agents' worktrees.
fn worktrees_of(source: &ViewSource) -> Result<std::sync::Arc<Worktrees>, String> {
    let project = source.project_id.clone();
    source
        .canvas
        .read(move |state| state.worktrees(&project))
        .ok()
        .flatten()
        .ok_or_else(|| "This project has no folder: worktrees live in a folder project".into())
}

/// `worktree_diff`: a page of [`DIFF_PAGE_LINES`] lines of agent `nodeId`'s diff against
/// its base, from line `offset`: `{nodeId, branch, base, text, offset, lines, total, cut}`.
/// The text is the agent's: the page shows it escaped, as all text.
fn worktree_diff(source: &ViewSource, args: &Map<String, Value>) -> Result<Value, String> {
    let node_id = text_arg(args, "nodeId")?;
    let offset = match args.get("offset") {
        None => 0,
        Some(offset) => offset
            .as_u64()
            .ok_or("Invalid offset: expected a line number from 0")?
            as usize,
    };
    let (worktree, text, cut) = worktrees_of(source)?.diff(node_id)?;
    let all: Vec<&str> = text.lines().collect();
    let page: Vec<&str> = all
        .iter()
        .skip(offset)
        .take(DIFF_PAGE_LINES)
        .copied()
        .collect();
    Ok(json!({
        "nodeId": node_id,
        "branch": worktree.branch,
        "base": worktree.base,
        "text": page.join("\n"),
        "offset": offset,
        "lines": page.len(),
        "total": all.len(),
        "cut": cut,
    }))
}

/// `worktree_merge` / `worktree_discard` of agent `nodeId`'s worktree.
fn worktree_act(
    source: &ViewSource,
    action: &str,
    args: &Map<String, Value>,
) -> Result<Value, String> {
    let node_id = text_arg(args, "nodeId")?;
    let worktrees = worktrees_of(source)?;
    let said = match action {
        "worktree_merge" => {
            let live = source.terminals.has_live_session(node_id);
            let working = worktrees.get(node_id).is_some_and(|w| works_in(&w.path));
            worktrees.merge(node_id, live || working)?
        }
        _ => {
            let delete_branch = matches!(args.get("deleteBranch"), Some(Value::Bool(true)));
            worktrees.discard(node_id, delete_branch, false)?
        }
    };
    Ok(json!({ "nodeId": node_id, "message": said }))
}

/// Most characters of the reason the person gives with a denial (it goes to the agent).
pub const MAX_REASON_CHARS: usize = 500;

fn text_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("Missing argument: {key}"))
}

/// `approve`: the person's answer to the waiting call `id` of this view's project,
/// bound to the agent, operation and arguments the page showed.
fn approve(source: &ViewSource, args: &Map<String, Value>) -> Result<Value, String> {
    let (id, shown, decision) = answer_of(args)?;
    // Calls of another project are not shown here, so not answered from here.
    let here = (source.runtime.pending_approvals().iter())
        .any(|asked| asked.id == id && asked.project_id == source.project_id);
    if !here {
        return Err(format!("No call waits for an answer as {id:?} on this canvas: it was answered, withdrawn or expired, or never asked. Nothing was decided; look at the list again."));
    }
    let asked = source.runtime.decide(id, &shown, decision)?;
    Ok(json!({ "id": asked.id, "decision": args["decision"] }))
}

/// An `approve` action's call id, the call as shown, and the decision.
fn answer_of(args: &Map<String, Value>) -> Result<(&str, Shown, Decision), String> {
    let id = text_arg(args, "id")?;
    let shown = Shown {
        node_id: text_arg(args, "nodeId")?.to_string(),
        operation: text_arg(args, "operation")?.to_string(),
        args: match args.get("args") {
            Some(Value::Object(call_args)) => call_args.clone(),
            _ => return Err("Missing argument: args (the call's arguments, as shown)".into()),
        },
    };
    let reason = match args.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) if reason.trim().is_empty() => None,
        Some(Value::String(reason))
            if reason.chars().count() <= MAX_REASON_CHARS
                && !reason.chars().any(char::is_control) =>
        {
            Some(reason.trim().to_string())
        }
        Some(_) => {
            return Err(format!(
                "Invalid reason: one line of text, at most {MAX_REASON_CHARS} characters"
            ))
        }
    };
    let decision = match (text_arg(args, "decision")?, reason) {
        ("allow", None) => Decision::AllowOnce,
        ("allow-for-session", None) => Decision::AllowForSession,
        ("allow-always", None) => Decision::AllowAlways,
        ("deny", reason) => Decision::Deny(reason),
        ("allow" | "allow-for-session" | "allow-always", Some(_)) => {
            return Err("Invalid reason: a reason goes with deny only".into())
        }
        _ => {
            return Err(
                "Invalid decision: use allow, allow-for-session, allow-always or deny".into(),
            )
        }
    };
    Ok((id, shown, decision))
}

/// `rule`: agent `nodeId`'s rule for `class`, saved as the person's.
fn rule(source: &ViewSource, args: &Map<String, Value>) -> Result<Value, String> {
    let node_id = text_arg(args, "nodeId")?;
    let agents = source.runtime.server().statuses(&source.project_id);
    if !agents.iter().any(|(agent, _)| agent == node_id) {
        return Err("Invalid nodeId: name an agent of this canvas".into());
    }
    let class = OperationClass::named(text_arg(args, "class")?).ok_or_else(|| {
        let names: Vec<&str> = OPERATION_CLASSES.map(OperationClass::name).to_vec();
        format!("Invalid class: use one of {}", names.join(", "))
    })?;
    let rule =
        Rule::named(text_arg(args, "rule")?).ok_or("Invalid rule: use allow, ask or deny")?;
    (source.runtime)
        .set_rule(&source.project_id, Some(node_id), class, rule)
        .map_err(|e| format!("The rule could not be saved: {e}"))?;
    Ok(json!({ "nodeId": node_id, "class": class.name(), "rule": rule.name() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(extra: Value) -> Result<Decision, String> {
        let mut args = json!({"id": "ab12", "nodeId": "a", "operation": "terminal_submit",
            "args": {"nodeId": "t", "command": "ls"}});
        for (key, value) in extra.as_object().unwrap() {
            args[key] = value.clone();
        }
        let args = args.as_object().unwrap().clone();
        answer_of(&args).map(|(id, shown, decision)| {
            assert_eq!(id, "ab12");
            assert_eq!(
                shown.args,
                *json!({"nodeId": "t", "command": "ls"}).as_object().unwrap()
            );
            decision
        })
    }

    #[test]
    fn an_answer_names_one_decision() {
        assert_eq!(
            answer(json!({"decision": "allow"})),
            Ok(Decision::AllowOnce)
        );
        assert_eq!(
            answer(json!({"decision": "allow-for-session"})),
            Ok(Decision::AllowForSession)
        );
        assert_eq!(
            answer(json!({"decision": "allow-always"})),
            Ok(Decision::AllowAlways)
        );
        assert_eq!(
            answer(json!({"decision": "deny"})),
            Ok(Decision::Deny(None))
        );
        assert_eq!(
            answer(json!({"decision": "deny", "reason": "  not now "})),
            Ok(Decision::Deny(Some("not now".into())))
        );
        assert_eq!(
            answer(json!({"decision": "deny", "reason": ""})),
            Ok(Decision::Deny(None))
        );
    }

    #[test]
    fn a_bad_answer_is_refused_with_what_to_send() {
        let refused = |extra: Value| answer(extra).unwrap_err();
        assert!(refused(json!({"decision": "yes"})).starts_with("Invalid decision"));
        assert!(refused(json!({})).starts_with("Missing argument: decision"));
        assert!(refused(json!({"decision": "allow", "reason": "x"})).contains("deny only"));
        for reason in [
            json!("two\nlines"),
            json!("bell\u{7}"),
            json!(7),
            json!("x".repeat(501)),
        ] {
            let said = refused(json!({"decision": "deny", "reason": reason}));
            assert!(said.starts_with("Invalid reason"), "{said}");
        }
        assert!(refused(json!({"decision": "allow", "args": "ls"}))
            .starts_with("Missing argument: args"));
    }
}
