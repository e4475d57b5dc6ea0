//! `termsprawl-tools link A B [--messages] [--project DIR]` and `unlink A B [--project DIR]`:
//! a person links two agents of a folder project (agents cannot: no tool makes or removes
//! a link).
//!
//! A link is `<project>/.termsprawl/links/<A>--<B>.json`, `{"version":1,"a":"A","b":"B"}`,
//! what `context_read` reads (either side then reads the other's transcript). With
//! `--messages` it also holds `"agentMessages":true`: A may send work to B (directed, as
//! messaging reads it; absent or false means reading only). The file is
//! private state, written like every other (0600, atomically, never through a planted
//! symlink, `links/` made 0700), and only into a `.termsprawl/` that is a private folder
//! of this user (so is `links/`, when it exists): else both commands refuse, saying how to
//! fix the folder. Both ids must be agent nodes (terminal nodes with an
//! `agentId`) on the project's canvas, read from its `project.json` only if it is a
//! regular file of this user; `serve` need not run. `unlink` removes exactly that file.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::base::files::{private_dir, private_json, read_private_json};
use crate::host::help::unknown_word;
use crate::protocol::is_valid_node_id;
use crate::runtime::context::{check_state_folders, STATE_DIR};

/// What `link` or `unlink` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub struct LinkRequest {
    /// The agent the link goes from.
    pub a: String,
    /// The agent it goes to.
    pub b: String,
    /// `--messages` (only for `link`).
    pub messages: bool,
    /// The project folder (`--project`, else the current directory).
    pub project: PathBuf,
}

/// Parses the words after `link` (`messages_allowed`) or `unlink`.
pub fn parse(args: &[String], messages_allowed: bool, cwd: PathBuf) -> Result<LinkRequest, String> {
    let command = if messages_allowed { "link" } else { "unlink" };
    let (mut ids, mut messages, mut project) = (Vec::new(), false, None);
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--messages" if messages_allowed && !messages => messages = true,
            "--messages" if messages_allowed => return Err("--messages is given twice".into()),
            "--messages" => {
                return Err("--messages goes only with link (unlink removes the whole link)".into())
            }
            "--project" if project.is_none() => {
                let dir = words.next().filter(|d| !d.is_empty());
                let dir = dir.ok_or("--project needs a value (the project folder)")?;
                project = Some(PathBuf::from(dir));
            }
            "--project" => return Err("--project is given twice".into()),
            flag if flag.starts_with("--") => return Err(unknown_word(command, flag)),
            id => ids.push(id.to_string()),
        }
    }
    let [a, b] = <[String; 2]>::try_from(ids).map_err(|ids| match ids.as_slice() {
        [] => "missing the two agent ids A B".to_string(),
        _ => format!("expected two agent ids A B, not {}", ids.join(" ")),
    })?;
    for id in [&a, &b] {
        if !is_valid_node_id(id) {
            return Err(format!(
                "{id:?} is not a node id: use 1 to 128 letters, digits, '_' or '-', starting with a letter or digit"
            ));
        }
    }
    if a == b {
        return Err(format!("cannot link {a} to itself; name two agents"));
    }
    let project = project.unwrap_or(cwd);
    Ok(LinkRequest {
        a,
        b,
        messages,
        project,
    })
}

/// The link file of `a` → `b` in `project`.
fn link_file(project: &Path, a: &str, b: &str) -> PathBuf {
    project
        .join(".termsprawl/links")
        .join(format!("{a}--{b}.json"))
}

/// The pair a link file names; `None` when there is none, or it is not a private regular
/// file (a planted symlink is no link of ours: `link` replaces it, `unlink` removes it).
fn linked_pair(file: &Path) -> Option<(String, String)> {
    let body = read_private_json(file).ok().flatten()?;
    let text = |key: &str| body.get(key)?.as_str().map(str::to_string);
    text("a").zip(text("b"))
}

/// Refuses a project without a `.termsprawl/` folder of its own: missing, or not private
/// to this user, or with a `links/` or `transcripts/` that is not ([`check_state_folders`]:
/// another user's files there would be consent the person never gave). Makes nothing, so
/// a refusal leaves no trace.
fn require_state_dir(project: &Path) -> Result<(), String> {
    match check_state_folders(project) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(format!(
            "{} has no canvas ({} is missing); start serve there first",
            project.display(),
            project.join(STATE_DIR).display()
        )),
        Err(e) => Err(format!("{e}; nothing was changed")),
    }
}

/// Writes the link; the sentence saying what was done.
pub fn link(request: &LinkRequest) -> Result<String, String> {
    require_state_dir(&request.project)?;
    let canvas = read_canvas(&request.project)?;
    for id in [&request.a, &request.b] {
        require_agent(&canvas, id, &request.project)?;
    }
    let file = link_file(&request.project, &request.a, &request.b);
    // Ids may hold "--": `x y--z` and `x--y z` share a file name; never replace another pair.
    if let Some((a, b)) =
        linked_pair(&file).filter(|p| *p != (request.a.clone(), request.b.clone()))
    {
        return Err(format!(
            "{} already holds the link {a} → {b}; unlink it first",
            file.display()
        ));
    }
    let dir = file.parent().unwrap_or(&request.project);
    private_dir(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let mut body = json!({ "version": 1, "a": request.a, "b": request.b });
    if request.messages {
        body["agentMessages"] = json!(true);
    }
    private_json(&file, &body).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let what = match request.messages {
        true => "reads the other's transcript, and may send work to",
        false => "reads the other's transcript (no messages) with",
    };
    Ok(format!(
        "linked {}: {} {what} {}",
        file.display(),
        request.a,
        request.b
    ))
}

/// Removes the link; the sentence saying what was done.
pub fn unlink(request: &LinkRequest) -> Result<String, String> {
    require_state_dir(&request.project)?;
    let file = link_file(&request.project, &request.a, &request.b);
    let pair = (request.a.clone(), request.b.clone());
    // The file of another pair with the same name (see `link`) is not this link.
    let removed = match linked_pair(&file) {
        Some(named) if named != pair => Err(io::ErrorKind::NotFound.into()),
        _ => std::fs::remove_file(&file),
    };
    match removed {
        Ok(()) => Ok(format!(
            "unlinked {} → {} ({} removed)",
            request.a,
            request.b,
            file.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(format!(
            "there is no link {} → {} in {} (a link has a direction: try unlink {} {})",
            request.a,
            request.b,
            request.project.display(),
            request.b,
            request.a
        )),
        Err(e) => Err(format!("cannot remove {}: {e}", file.display())),
    }
}

/// The project's canvas file, trusted only as private state.
fn read_canvas(project: &Path) -> Result<Value, String> {
    let file = project.join(".termsprawl/project.json");
    match read_private_json(&file) {
        Ok(Some(canvas)) => Ok(canvas),
        Ok(None) => Err(format!(
            "{} has no canvas ({} is missing); start serve there first",
            project.display(),
            file.display()
        )),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

/// `id` is an agent node on `canvas`: a terminal node whose data names an `agentId`.
fn require_agent(canvas: &Value, id: &str, project: &Path) -> Result<(), String> {
    let nodes = canvas["nodes"].as_array().map_or(&[][..], Vec::as_slice);
    let Some(node) = nodes.iter().find(|n| n["id"] == id) else {
        return Err(format!(
            "{id} is not a node of the canvas in {}; list the agents with canvas_list",
            project.display()
        ));
    };
    let is_agent = node["type"] == "terminal" && node["data"]["agentId"].is_string();
    match is_agent {
        true => Ok(()),
        false => Err(format!(
            "{id} is not an agent node (only agents are linked)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_ids_flags_and_refuses_the_rest() {
        let cwd = PathBuf::from("/here");
        let parsed = parse(&words("a b --messages --project /p"), true, cwd.clone()).unwrap();
        let expected = LinkRequest {
            a: "a".into(),
            b: "b".into(),
            messages: true,
            project: "/p".into(),
        };
        assert_eq!(parsed, expected);
        assert_eq!(
            parse(&words("x y"), false, cwd.clone()).unwrap().project,
            cwd
        );
        for (bad, said) in [
            ("", "missing the two agent ids A B"),
            ("a", "expected two agent ids A B, not a"),
            ("a b c", "expected two agent ids A B, not a b c"),
            ("a b --messages --messages", "--messages is given twice"),
            (
                "a b --project",
                "--project needs a value (the project folder)",
            ),
            (
                "a b --mesages",
                "unknown option --mesages (did you mean --messages?)",
            ),
        ] {
            assert_eq!(
                parse(&words(bad), true, cwd.clone()),
                Err(said.into()),
                "{bad}"
            );
        }
        // unlink takes no --messages.
        assert!(parse(&words("a b --messages"), false, cwd.clone()).is_err());
        assert!(parse(&words("a a"), true, cwd.clone())
            .unwrap_err()
            .contains("itself"));
        assert!(parse(&words("a ../b"), true, cwd)
            .unwrap_err()
            .contains("not a node id"));
    }
}
