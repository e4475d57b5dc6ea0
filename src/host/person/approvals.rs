//! `termsprawl-tools approvals list [--json] | allow ID [--for-session|--always] | deny ID
//! [--reason TEXT]` (each with `[--data DIR]`): the person answers calls the policy holds
//! for them, without the canvas view.
//!
//! The running `serve` writes the calls waiting for an answer to
//! `<data>/agent-tools/approvals.json` whenever they change (0600, written whole and
//! renamed). `allow`/`deny` take the call's agent, operation and arguments from that
//! list (what `list` showed), write them with the answer as a request file in
//! `<data>/agent-tools/approvals/` (0700 folder, 0600 file), and wait for `serve` to
//! answer it in `<request>.answer`: the runtime checks the answer against the call it
//! holds (`AgentToolRuntime::decide`), so a replayed, expired or re-pointed answer is
//! refused there. `serve` looks every [`WATCH_EVERY`]: one load of a counter and one
//! `stat` of the folder, and rewrites the list before it writes the answers, so a command
//! that got its answer reads a list showing what it changed.
//!
//! `policy show` reads the rules from that list too: the starting policy, the saved rules,
//! and the classes allowed "for this session" (answers with `--for-session`), which live in
//! `serve`'s memory only and end with it. `policy set --agent NODE` is refused for an
//! agent without a session in the data directory ([`require_known_agent`]).

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Map, Value};

use crate::base::files::{private_dir, private_json, read_private_json};
use crate::base::terminal_text::escape_for_terminal;
use crate::host::help::unknown_word;
use crate::host::options::parse_data;
use crate::protocol::{is_valid_node_id, nearest_name, OperationClass, OPERATION_CLASSES};
use crate::runtime::approvals::{Decision, Shown};
use crate::runtime::policy::Rule;
use crate::runtime::AgentToolRuntime;

/// How often `serve` looks for answers and a changed list.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);
/// How long `allow`/`deny` wait for `serve` to take the answer.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// Parses the words after `policy`.
pub fn parse_policy(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<(ApprovalsCommand, PathBuf), String> {
    let (mut json, mut node_id, mut data, mut words) = (false, None, Vec::new(), Vec::new());
    let mut given = args.iter();
    while let Some(word) = given.next() {
        match word.as_str() {
            "--json" => json = true,
            "--agent" => {
                let node = given
                    .next()
                    .ok_or("--agent needs a value (an agent's node id)")?;
                node_id = Some(node.clone());
            }
            // `parse_data` reads these (and says when the folder is missing).
            "--data" => {
                data.push(word.clone());
                data.extend(given.next().cloned());
            }
            flag if flag.starts_with("--data=") => data.push(word.clone()),
            flag if flag.starts_with('-') => return Err(unknown_word("policy", flag)),
            _ => words.push(word.as_str()),
        }
    }
    let data = parse_data("policy", &data, env)?;
    let command = match words.as_slice() {
        ["show"] if node_id.is_some() => {
            return Err(
                "--agent goes only with policy set (show prints every agent's rules)".into(),
            )
        }
        ["show"] => ApprovalsCommand::ShowPolicy { json },
        ["set", ..] if json => return Err("--json goes only with policy show".into()),
        ["set", class, rule] => ApprovalsCommand::SetRule {
            class: OperationClass::named(class).ok_or_else(|| unknown_class(class))?,
            rule: Rule::named(rule)
                .ok_or_else(|| format!("unknown rule {rule}; expected allow, ask or deny"))?,
            node_id,
        },
        ["set", ..] => return Err("set needs CLASS and RULE, e.g. policy set launch ask".into()),
        [] => return Err("missing show or set CLASS RULE".into()),
        ["show", extra, ..] => return Err(format!("unexpected argument {extra}")),
        [other, ..] => {
            return Err(format!(
                "unknown subcommand {other}{}; expected show or set",
                did_you_mean(other, &["show", "set"])
            ))
        }
    };
    Ok((command, data))
}

/// The refusal of a class name, with the classes.
fn unknown_class(class: &str) -> String {
    let names: Vec<&str> = OPERATION_CLASSES.iter().map(|c| c.name()).collect();
    format!(
        "unknown class {class}{}; expected one of {}",
        did_you_mean(class, &names),
        names.join(", ")
    )
}

/// ` (did you mean NAME?)` for the name among `names` near `word`, else nothing.
fn did_you_mean(word: &str, names: &[&str]) -> String {
    match nearest_name(word, names.iter().copied()) {
        Some(near) => format!(" (did you mean {near}?)"),
        None => String::new(),
    }
}

/// What the person asked for.
#[derive(Debug, PartialEq)]
pub enum ApprovalsCommand {
    /// Print the waiting calls.
    List {
        /// One JSON object a line (`--json`).
        json: bool,
    },
    /// `policy show`: the rules in force.
    ShowPolicy {
        /// As JSON.
        json: bool,
    },
    /// `policy set CLASS RULE [--agent NODE]`: saves a rule for the project or one agent.
    SetRule {
        /// The class.
        class: OperationClass,
        /// The rule.
        rule: Rule,
        /// The agent (`None`: every agent of the project).
        node_id: Option<String>,
    },
    /// Answer a call.
    Answer {
        /// The call's id, as listed.
        id: String,
        /// The answer.
        decision: Decision,
    },
}

fn list_file(agent_tools: &Path) -> PathBuf {
    agent_tools.join("approvals.json")
}

fn requests_dir(agent_tools: &Path) -> PathBuf {
    agent_tools.join("approvals")
}

/// Parses the words after `approvals`.
pub fn parse(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<(ApprovalsCommand, PathBuf), String> {
    let (verb, rest) = args
        .split_first()
        .ok_or("missing list, allow ID or deny ID")?;
    let verbs = ["list", "allow", "deny"];
    if !verbs.contains(&verb.as_str()) {
        return Err(format!(
            "unknown subcommand {verb}{}; expected list, allow ID or deny ID",
            did_you_mean(verb, &verbs)
        ));
    }
    let (mut json, mut scope, mut reason, mut data, mut id) = (false, None, None, Vec::new(), None);
    let mut words = rest.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--json" if verb == "list" => json = true,
            "--for-session" | "--always" if verb == "allow" && scope.is_none() => {
                scope = Some(word.clone())
            }
            "--reason" if verb == "deny" => {
                let text = words
                    .next()
                    .ok_or("--reason needs a value (what the agent is told)")?;
                reason = Some(text.clone())
            }
            // `parse_data` reads these (and says when the folder is missing).
            "--data" => {
                data.push(word.clone());
                data.extend(words.next().cloned());
            }
            flag if flag.starts_with("--data=") => data.push(word.clone()),
            "--json" => return Err("--json goes only with approvals list".into()),
            "--for-session" | "--always" if verb == "allow" => {
                return Err("give --for-session or --always, not both".into())
            }
            "--for-session" | "--always" => {
                return Err(format!("{word} goes only with approvals allow"))
            }
            "--reason" => return Err("--reason goes only with approvals deny".into()),
            given if verb != "list" && id.is_none() && !given.starts_with('-') => {
                id = Some(given.to_string())
            }
            _ => return Err(unknown_word("approvals", word)),
        }
    }
    let data = parse_data("approvals", &data, env)?;
    let command = match (verb.as_str(), id) {
        ("list", _) => ApprovalsCommand::List { json },
        ("allow", Some(id)) => ApprovalsCommand::Answer {
            id,
            decision: match scope.as_deref() {
                Some("--for-session") => Decision::AllowForSession,
                Some(_) => Decision::AllowAlways,
                None => Decision::AllowOnce,
            },
        },
        // `deny`: the verb is one of the three (checked above).
        (_, Some(id)) => ApprovalsCommand::Answer {
            id,
            decision: Decision::Deny(reason.filter(|r| !r.trim().is_empty())),
        },
        (verb, None) => {
            return Err(format!(
                "{verb} needs the call's ID (approvals list shows the waiting calls)"
            ))
        }
    };
    Ok((command, data))
}

/// Refuses `policy set … --agent NODE` for an agent without a session in `data`
/// (`agent-tools/sessions/NODE.json`): a mistyped id would save a rule no agent is held
/// to. The refusal names the agents that have one. Other commands pass.
pub fn require_known_agent(command: &ApprovalsCommand, data: &Path) -> Result<(), String> {
    let ApprovalsCommand::SetRule {
        node_id: Some(node),
        ..
    } = command
    else {
        return Ok(());
    };
    let sessions = data.join("agent-tools").join("sessions");
    // A valid node id first: it is joined into a path.
    if is_valid_node_id(node) && sessions.join(format!("{node}.json")).is_file() {
        return Ok(());
    }
    let mut known: Vec<String> = std::fs::read_dir(&sessions)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let node = name.strip_suffix(".json")?;
            is_valid_node_id(node).then(|| node.to_string())
        })
        .collect();
    known.sort();
    let names: Vec<&str> = known.iter().map(String::as_str).collect();
    let choices = match names.as_slice() {
        [] => {
            "no agent has one yet (serve --agent ID, or an agent launched on the canvas, makes one)"
                .to_string()
        }
        _ => format!("agents with one: {}", names.join(", ")),
    };
    Err(format!(
        "--agent {node}{}: no such agent has a session in {}; {choices}",
        did_you_mean(node, &names),
        sessions.display()
    ))
}

/// Runs `command` against the `serve` of `data`; what to print, or why it failed.
pub fn run(command: &ApprovalsCommand, data: &Path, out: &mut impl Write) -> Result<(), String> {
    let agent_tools = data.join("agent-tools");
    if !agent_tools.join("endpoint.json").exists() {
        return Err(format!("no serve is running on {}", data.display()));
    }
    let written = read_private_json(&list_file(&agent_tools))
        .map_err(|e| format!("cannot read the list: {e}"))?
        .unwrap_or_default();
    let listed = written["pending"].as_array().cloned().unwrap_or_default();
    let print = |out: &mut dyn Write, line: String| {
        writeln!(out, "{line}").map_err(|e| format!("cannot write: {e}"))
    };
    match command {
        ApprovalsCommand::List { json: true } => listed
            .iter()
            .try_for_each(|call| print(out, call.to_string())),
        ApprovalsCommand::List { json: false } if listed.is_empty() => {
            print(out, "no call waits for an answer".into())
        }
        ApprovalsCommand::List { json: false } => listed
            .iter()
            .try_for_each(|call| print(out, describe(call))),
        ApprovalsCommand::ShowPolicy { json: true } => print(out, written["policy"].to_string()),
        ApprovalsCommand::ShowPolicy { json: false } => {
            let policy = &written["policy"];
            let starting = escape_for_terminal(policy["starting"].as_str().unwrap_or("open"));
            print(out, format!("starting policy: {starting}"))?;
            let saved = serde_json::to_string_pretty(&policy["saved"]).unwrap_or_default();
            print(
                out,
                format!("saved rules ({}):", policy["file"].as_str().unwrap_or("?")),
            )?;
            saved
                .lines()
                .try_for_each(|line| print(out, escape_for_terminal(line).into_owned()))?;
            let grants = policy["grants"].as_array().map_or(&[][..], Vec::as_slice);
            if grants.is_empty() {
                return print(out, "allowed for this session: none".into());
            }
            print(out, "allowed for this session (until serve stops):".into())?;
            grants.iter().try_for_each(|grant| {
                let field = |key: &str| escape_for_terminal(grant[key].as_str().unwrap_or("?"));
                print(
                    out,
                    format!("  {} for agent {}", field("class"), field("nodeId")),
                )
            })
        }
        ApprovalsCommand::SetRule {
            class,
            rule,
            node_id,
        } => {
            let request = json!({
                "kind": "rule", "class": class.name(), "rule": rule.name(), "nodeId": node_id,
            });
            send(&agent_tools, &request)?;
            let who = node_id.as_deref().map_or("every agent".into(), |n| {
                format!("agent {}", escape_for_terminal(n))
            });
            print(
                out,
                format!("{} is now {} for {who}", class.name(), rule.name()),
            )
        }
        ApprovalsCommand::Answer { id, decision } => {
            let call = listed
                .iter()
                .find(|call| call["id"] == id.as_str())
                .ok_or_else(|| {
                    format!(
                        "no call waits for an answer as {}; see `approvals list`",
                        escape_for_terminal(id)
                    )
                })?;
            let answer = send_answer(&agent_tools, call, decision)?;
            print(out, answer)
        }
    }
}

/// One waiting call for a person's terminal: every field escaped.
fn describe(call: &Value) -> String {
    let field = |key: &str| escape_for_terminal(call[key].as_str().unwrap_or("?"));
    let args = call["args"].to_string();
    let args = escape_for_terminal(&args);
    format!(
        "{}  {} asks to {} ({}): {}",
        field("id"),
        field("nodeId"),
        field("operation"),
        field("class"),
        args
    )
}

/// Writes the answer for `call` and waits for `serve` to take it.
fn send_answer(agent_tools: &Path, call: &Value, decision: &Decision) -> Result<String, String> {
    let (verdict, reason) = match decision {
        Decision::AllowOnce => ("allow", None),
        Decision::AllowForSession => ("allow-for-session", None),
        Decision::AllowAlways => ("allow-always", None),
        Decision::Deny(reason) => ("deny", reason.clone()),
    };
    let request = json!({
        "kind": "answer", "id": call["id"], "nodeId": call["nodeId"],
        "operation": call["operation"], "args": call["args"], "decision": verdict,
        "reason": reason,
    });
    send(agent_tools, &request)?;
    Ok(format!("{verdict}: {}", describe(call)))
}

/// Writes `request` for `serve` and waits for its outcome.
fn send(agent_tools: &Path, request: &Value) -> Result<(), String> {
    let dir = requests_dir(agent_tools);
    private_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let name = crate::base::random_hex(16).map_err(|e| e.to_string())?;
    let file = dir.join(format!("{name}.json"));
    private_json(&file, request).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let answer_file = dir.join(format!("{name}.answer"));
    let deadline = Instant::now() + ANSWER_WAIT;
    while Instant::now() < deadline {
        if let Ok(Some(answer)) = read_private_json(&answer_file) {
            let _ = std::fs::remove_file(&answer_file);
            return match answer["error"].as_str() {
                Some(error) => Err(error.to_string()),
                None => Ok(()),
            };
        }
        thread::sleep(WATCH_EVERY / 2);
    }
    let _ = std::fs::remove_file(&file);
    Err(format!(
        "serve did not take the answer within {} s; is it running?",
        ANSWER_WAIT.as_secs()
    ))
}

/// What `serve` watches for: its project, and the name of its starting policy.
pub struct Watched {
    /// The project rules without `--agent` apply to.
    pub project_id: String,
    /// `--policy`'s value (`open` without it).
    pub starting: String,
}

/// `serve`'s side: keeps `approvals.json` current (the waiting calls and the rules in
/// force) and applies answers and rules, on a thread, until `stop` is set.
pub fn watch(
    agent_tools: PathBuf,
    runtime: Arc<AgentToolRuntime>,
    watched: Watched,
    stop: Arc<AtomicBool>,
) {
    let dir = requests_dir(&agent_tools);
    let stamp = |dir: &Path| {
        std::fs::symlink_metadata(dir).ok().map(|m| {
            let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            (m.ino(), modified, m.nlink())
        })
    };
    let spawned = thread::Builder::new()
        .name("approvals".into())
        .spawn(move || {
            let (mut listed, mut seen) = (None, None);
            while !stop.load(Ordering::SeqCst) {
                let now = stamp(&dir);
                let mut answers = Vec::new();
                if now != seen {
                    seen = now;
                    answers = take_requests(&dir, &runtime, &watched.project_id);
                }
                // The list before the answers: a command that has its answer reads a list
                // that shows what it changed (`policy show` just after `approvals allow`).
                let version = (runtime.approvals_version(), runtime.policy_version());
                if listed != Some(version) && write_list(&agent_tools, &runtime, &watched) {
                    listed = Some(version);
                }
                for (file, outcome) in answers {
                    let _ = private_json(&file, &outcome);
                }
                thread::sleep(WATCH_EVERY);
            }
        });
    if let Err(e) = spawned {
        eprintln!("termsprawl-tools: approvals cannot be answered from the command line: {e}");
    }
}

/// Writes `approvals.json` as the runtime has it now; false (said on stderr) when it
/// cannot. `serve` writes it once before its ready line, so the commands never read a list
/// an earlier `serve` left, then [`watch`] keeps it current.
pub fn write_list(agent_tools: &Path, runtime: &AgentToolRuntime, watched: &Watched) -> bool {
    match private_json(&list_file(agent_tools), &listing(runtime, watched)) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("termsprawl-tools: cannot write approvals.json: {e}");
            false
        }
    }
}

/// What `approvals.json` holds.
fn listing(runtime: &AgentToolRuntime, watched: &Watched) -> Value {
    let pending: Vec<Value> = runtime
        .pending_approvals()
        .iter()
        .map(|asked| asked.to_json())
        .collect();
    let (_, saved) = runtime.policy();
    let file = runtime.server().directory().join("policy.json");
    // Grants live in serve's memory only: this list is where the commands see them.
    let grants: Vec<Value> = runtime
        .session_grants()
        .into_iter()
        .map(|(project_id, node_id, class)| {
            json!({ "projectId": project_id, "nodeId": node_id, "class": class.name() })
        })
        .collect();
    let policy = json!({ "starting": watched.starting, "file": file, "saved": saved.to_json(),
        "grants": grants });
    json!({ "pending": pending, "policy": policy })
}

/// Applies each request file in `dir`; the answer file of each, and its outcome.
fn take_requests(
    dir: &Path,
    runtime: &AgentToolRuntime,
    project_id: &str,
) -> Vec<(PathBuf, Value)> {
    let mut answers = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return answers;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let request = read_private_json(&path).ok().flatten();
        let _ = std::fs::remove_file(&path);
        let outcome = match request.map(|r| apply(runtime, project_id, &r)) {
            Some(Ok(())) => json!({ "ok": true }),
            Some(Err(error)) => json!({ "error": error }),
            None => json!({ "error": "the request could not be read; nothing was changed" }),
        };
        answers.push((path.with_extension("answer"), outcome));
    }
    answers
}

/// One request of the commands: an answer to a call, or a rule.
fn apply(runtime: &AgentToolRuntime, project_id: &str, request: &Value) -> Result<(), String> {
    let text = |key: &str| request[key].as_str().unwrap_or("").to_string();
    if text("kind") == "rule" {
        let class = OperationClass::named(&text("class")).ok_or("unknown class")?;
        let rule = Rule::named(&text("rule")).ok_or("unknown rule")?;
        let node = request["nodeId"].as_str();
        return runtime
            .set_rule(project_id, node, class, rule)
            .map_err(|e| format!("the rule could not be saved: {e}"));
    }
    let shown = Shown {
        node_id: text("nodeId"),
        operation: text("operation"),
        args: request["args"]
            .as_object()
            .cloned()
            .unwrap_or_else(Map::new),
    };
    let decision = match text("decision").as_str() {
        "allow" => Decision::AllowOnce,
        "allow-for-session" => Decision::AllowForSession,
        "allow-always" => Decision::AllowAlways,
        "deny" => Decision::Deny(request["reason"].as_str().map(str::to_string)),
        _ => return Err("unknown answer; nothing was decided".into()),
    };
    runtime.decide(&text("id"), &shown, decision).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_command_line_is_read_strictly() {
        let env = |_: &str| Some("/home/u".to_string());
        let (command, data) = parse(&words("list --json --data /d"), env).unwrap();
        assert_eq!(command, ApprovalsCommand::List { json: true });
        assert_eq!(data, PathBuf::from("/d"));
        let (command, _) = parse(&words("allow abc --always"), env).unwrap();
        assert_eq!(
            command,
            ApprovalsCommand::Answer {
                id: "abc".into(),
                decision: Decision::AllowAlways
            }
        );
        let (command, _) = parse(&words("deny abc --reason no"), env).unwrap();
        assert_eq!(
            command,
            ApprovalsCommand::Answer {
                id: "abc".into(),
                decision: Decision::Deny(Some("no".into()))
            }
        );
        let (command, _) = parse_policy(&words("set launch deny --agent a"), env).unwrap();
        let set = ApprovalsCommand::SetRule {
            class: OperationClass::Launch,
            rule: Rule::Deny,
            node_id: Some("a".into()),
        };
        assert_eq!(command, set);
        for (bad, said) in [
            ("", "missing show or set CLASS RULE"),
            (
                "show --agent a",
                "--agent goes only with policy set (show prints every agent's rules)",
            ),
            (
                "set launch",
                "set needs CLASS and RULE, e.g. policy set launch ask",
            ),
            (
                "set shell deny",
                "unknown class shell; expected one of read, canvas, terminals-own, terminals-others, terminals-unconfined, browser, launch, messaging",
            ),
            (
                "set lunch deny",
                "unknown class lunch (did you mean launch?); expected one of read, canvas, terminals-own, terminals-others, terminals-unconfined, browser, launch, messaging",
            ),
            (
                "set launch maybe",
                "unknown rule maybe; expected allow, ask or deny",
            ),
            ("set launch deny --json", "--json goes only with policy show"),
            ("shw", "unknown subcommand shw (did you mean show?); expected show or set"),
            ("show extra", "unexpected argument extra"),
            ("show --jsn", "unknown option --jsn (did you mean --json?)"),
            ("show --data", "--data needs a value"),
        ] {
            assert_eq!(parse_policy(&words(bad), env), Err(said.into()), "{bad}");
        }
        for (bad, said) in [
            ("", "missing list, allow ID or deny ID"),
            (
                "allow",
                "allow needs the call's ID (approvals list shows the waiting calls)",
            ),
            ("list abc", "unexpected argument abc"),
            ("allow a b", "unexpected argument b"),
            ("deny a --always", "--always goes only with approvals allow"),
            (
                "allow a --for-session --always",
                "give --for-session or --always, not both",
            ),
            ("list --reason x", "--reason goes only with approvals deny"),
            ("allow a --json", "--json goes only with approvals list"),
            (
                "deny a --reason",
                "--reason needs a value (what the agent is told)",
            ),
            (
                "lst",
                "unknown subcommand lst (did you mean list?); expected list, allow ID or deny ID",
            ),
            (
                "list --dat /d",
                "unknown option --dat (did you mean --data?)",
            ),
        ] {
            assert_eq!(parse(&words(bad), env), Err(said.into()), "{bad}");
        }
    }

    #[test]
    fn a_listed_call_is_shown_as_text() {
        let call = json!({"id": "1", "nodeId": "a\u{1b}[31m", "operation": "terminal_submit",
            "class": "terminals-others", "args": {"command": "<b>rm</b>\n"}});
        let line = describe(&call);
        assert!(!line.contains('\u{1b}') && !line.contains('\n'), "{line}");
        assert!(line.contains("<b>rm</b>"), "{line}");
    }
}
