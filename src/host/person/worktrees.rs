//! `termsprawl-tools worktrees list [--json] | diff NODE | merge NODE | discard NODE
//! [--delete-branch] [--force]`, with `--project DIR` (default: the current folder) and
//! `--data DIR` (where the trail is): the person's review of what agents did in their
//! worktrees ([`crate::host::worktrees`]), from a shell, with or without `serve` running.
//! A merge or a discard is recorded in the project's activity trail as the person's, as
//! from the canvas view.
//!
//! `merge` refuses while a process still works in the agent's worktree (its current folder
//! is there: the agent, or a terminal it opened), so work is not taken half done.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::base::terminal_text::escape_for_terminal;
use crate::host::help::unknown_word;
use crate::host::worktrees::Worktrees;

/// What `worktrees` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// `list`, `--json` or not.
    List(bool),
    /// `diff NODE`.
    Diff(String),
    /// `merge NODE`.
    Merge(String),
    /// `discard NODE`, `--delete-branch`, `--force`.
    Discard(String, bool, bool),
}

/// Parses the words after `worktrees`; the project folder defaults to `cwd`.
pub fn parse(args: &[String], cwd: PathBuf) -> Result<(Asked, PathBuf), String> {
    let (asked, project, _) = parse_with_data(args, cwd, |_| None)?;
    Ok((asked, project))
}

/// [`parse`], with `--data DIR` (else the default data folder, from `env`): what was
/// asked, the project folder and the data folder (`None`: no default could be made).
pub fn parse_with_data(
    args: &[String],
    cwd: PathBuf,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Asked, PathBuf, Option<PathBuf>), String> {
    let (mut words, mut project, mut data) = (Vec::new(), None, None);
    let (mut json, mut delete_branch, mut force) = (false, false, false);
    let mut given = args.iter();
    while let Some(word) = given.next() {
        match word.as_str() {
            "--project" if project.is_none() => {
                let dir = given.next().filter(|d| !d.is_empty());
                project = Some(PathBuf::from(
                    dir.ok_or("--project needs a value (the project folder)")?,
                ));
            }
            "--project" => return Err("--project is given twice".into()),
            "--data" if data.is_none() => {
                let dir = given.next().filter(|d| !d.is_empty());
                let dir = dir.ok_or("--data needs a value (the data folder)")?;
                data = Some(crate::host::options::data_folder(PathBuf::from(dir)));
            }
            "--data" => return Err("--data is given twice".into()),
            "--json" => json = true,
            "--delete-branch" => delete_branch = true,
            "--force" => force = true,
            flag if flag.starts_with('-') => return Err(unknown_word("worktrees", flag)),
            word => words.push(word.to_string()),
        }
    }
    let node = |words: &[String]| match words {
        [_, node] => Ok(node.clone()),
        [_] => Err("which agent? name its node id (worktrees list shows them)".to_string()),
        _ => Err(format!("unexpected argument {}", words[2])),
    };
    let asked = match words.first().map(String::as_str) {
        Some("list") if words.len() == 1 => Asked::List(json),
        Some("list") => return Err(format!("unexpected argument {}", words[1])),
        Some("diff") => Asked::Diff(node(&words)?),
        Some("merge") => Asked::Merge(node(&words)?),
        Some("discard") => Asked::Discard(node(&words)?, delete_branch, force),
        Some(other) => {
            return Err(format!(
                "unknown action {other}: expected list, diff, merge or discard"
            ))
        }
        None => return Err("expected list, diff, merge or discard".into()),
    };
    let only_discard = matches!(asked, Asked::Discard(..));
    if (delete_branch || force) && !only_discard {
        return Err("--delete-branch and --force go only with discard".into());
    }
    if json && !matches!(asked, Asked::List(_)) {
        return Err("--json goes only with list".into());
    }
    let data = data.or_else(|| crate::host::options::default_data_dir(&env).ok());
    Ok((asked, project.unwrap_or(cwd), data))
}

/// Records a merge or a discard in `project`'s trail under `data` (said on stderr when it
/// cannot be: the action itself is done).
pub fn record(asked: &Asked, project: &Path, data: Option<&Path>, result: &Result<String, String>) {
    let (operation, args) = match asked {
        Asked::Merge(node) => ("worktree_merge", json!({ "nodeId": node })),
        Asked::Discard(node, delete_branch, force) => (
            "worktree_discard",
            json!({ "nodeId": node, "deleteBranch": delete_branch, "force": force }),
        ),
        _ => return,
    };
    let Some(data) = data else {
        return;
    };
    let canvas = crate::base::files::read_json(&project.join(".termsprawl/project.json"));
    let Some(project_id) = canvas
        .ok()
        .flatten()
        .and_then(|c| c["projectId"].as_str().map(str::to_string))
    else {
        return;
    };
    let result = match result {
        Ok(said) => crate::protocol::ToolResult::Ok(json!({ "message": said })),
        Err(error) => crate::protocol::ToolResult::Err(error.clone()),
    };
    let args = args.as_object().cloned().unwrap_or_default();
    let trail = data.join("agent-tools").join("activity");
    if let Err(error) =
        crate::activity::append_person(&trail, &project_id, operation, &args, &result)
    {
        eprintln!("termsprawl-tools worktrees: not recorded in the activity trail: {error}");
    }
}

/// Runs `asked` on `project`'s worktrees: what to print (every line with what a terminal
/// would act on escaped: file names and diffs are the agent's), or the error.
pub fn run(asked: &Asked, project: &Path) -> Result<String, String> {
    let said = run_raw(asked, project).map_err(|e| escape_lines(&e))?;
    Ok(escape_lines(&said))
}

/// `text` line by line, each escaped ([`escape_for_terminal`]).
fn escape_lines(text: &str) -> String {
    let lines: Vec<_> = text.split('\n').map(escape_for_terminal).collect();
    lines.join("\n")
}

fn run_raw(asked: &Asked, project: &Path) -> Result<String, String> {
    let project = project.canonicalize().map_err(|e| {
        format!(
            "the project folder {} cannot be opened: {e}",
            project.display()
        )
    })?;
    let worktrees = Worktrees::new(&project);
    match asked {
        Asked::List(as_json) => {
            let states = worktrees.states();
            if *as_json {
                let lines: Vec<String> = states
                    .iter()
                    .map(|(node, state)| {
                        let mut state = state.clone();
                        state["nodeId"] = json!(node);
                        state.to_string()
                    })
                    .collect();
                return Ok(lines.join("\n"));
            }
            if states.is_empty() {
                return Ok("no agent works in a worktree of this project".into());
            }
            let lines: Vec<String> = states
                .iter()
                .map(|(node, s)| match s.get("missing") {
                    Some(_) => format!(
                        "{node}  {}  folder removed (discard forgets it)",
                        s["branch"].as_str().unwrap_or("")
                    ),
                    None => format!(
                        "{node}  {} from {}  {} ahead, {} behind, {} changed file(s)  {}",
                        s["branch"].as_str().unwrap_or(""),
                        s["base"].as_str().unwrap_or(""),
                        s["ahead"],
                        s["behind"],
                        s["changedFiles"],
                        s["path"].as_str().unwrap_or("")
                    ),
                })
                .collect();
            Ok(lines.join("\n"))
        }
        Asked::Diff(node) => {
            let (worktree, text, cut) = worktrees.diff(node)?;
            let mut said = format!("# {} against {}\n{text}", worktree.branch, worktree.base);
            if cut {
                said.push_str("\n# … cut: the rest is in the worktree (git diff there)\n");
            }
            Ok(said)
        }
        Asked::Merge(node) => {
            let running = worktrees.get(node).is_some_and(|w| works_in(&w.path));
            worktrees.merge(node, running)
        }
        Asked::Discard(node, delete_branch, force) => {
            worktrees.discard(node, *delete_branch, *force)
        }
    }
}

/// Whether some process has its current folder in `folder` (an agent still at work).
pub fn works_in(folder: &Path) -> bool {
    let Ok(folder) = folder.canonicalize() else {
        return false;
    };
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    processes.flatten().any(|entry| {
        let name = entry.file_name();
        let is_pid = name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid
            && std::fs::read_link(entry.path().join("cwd"))
                .is_ok_and(|cwd| cwd.starts_with(&folder))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_command_line_is_read_and_mistakes_named() {
        let cwd = PathBuf::from("/p");
        assert_eq!(
            parse(&words("list --json"), cwd.clone()).unwrap(),
            (Asked::List(true), cwd.clone())
        );
        assert_eq!(
            parse(
                &words("discard a --delete-branch --project /q"),
                cwd.clone()
            )
            .unwrap(),
            (Asked::Discard("a".into(), true, false), PathBuf::from("/q"))
        );
        assert!(parse(&words("merge"), cwd.clone())
            .unwrap_err()
            .contains("which agent"));
        assert!(parse(&words("merge a --force"), cwd.clone())
            .unwrap_err()
            .contains("only with discard"));
        assert!(parse(&words("mrege a"), cwd.clone())
            .unwrap_err()
            .contains("unknown action mrege"));
        assert!(parse(&words("diff a b"), cwd)
            .unwrap_err()
            .contains("unexpected argument b"));
    }
}
