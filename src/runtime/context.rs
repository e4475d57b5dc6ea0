//! `context_read`: the recent transcripts of the agents the user linked to the caller.
//!
//! Files read, all under `<project>/.termsprawl/`:
//! - `links/<a>--<b>.json`: `{version:1, a, b}`, two different safe node ids;
//! - `transcripts/<nodeId>.json`: `{version:1, path}`, where the agent's transcript is;
//! - `project.json`: the canvas, for the peers' titles.
//!
//! The transcript is read as Claude-style JSONL. Every file is untrusted: anything that is
//! not what we expect is skipped, never an error. Nothing is read from a folder that is
//! not private to this user ([`private_state_dir`], the one gate for every reader of
//! links: `context_read`, messaging's consent, the canvas view, `link` and `unlink`).

use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::{fs::File, path::Path};

use serde_json::{json, Value};

use crate::base::files::check_private_dir;
use crate::{messaging::grants_messages, protocol::is_valid_node_id};

/// A folder project's state folder.
pub const STATE_DIR: &str = ".termsprawl";
/// The folder of link files in [`STATE_DIR`].
pub const LINKS_DIR: &str = "links";
/// The folder of transcript pointers in [`STATE_DIR`].
pub const TRANSCRIPTS_DIR: &str = "transcripts";
/// The only transcript reader there is.
pub const READER: &str = "claude-jsonl";
/// `context_read` returns at most the last this many characters.
pub const MAX_CONTEXT_CHARS: usize = 100_000;
/// Turns kept per peer (the most recent ones).
pub const MAX_TURNS: usize = 40;
/// Characters kept per turn.
pub const MAX_TURN_CHARS: usize = 2_000;
/// Bytes read from the end of a transcript; older lines are not needed for 40 turns.
const MAX_TRANSCRIPT_TAIL: u64 = 8 * 1024 * 1024;
/// Link and pointer files are tiny; anything larger is not one.
const MAX_SMALL_FILE: u64 = 64 * 1024;
/// Link files looked at.
const MAX_LINK_FILES: usize = 1_000;

/// `<project>/.termsprawl` (`sub` empty) or its folder `sub`, once it and the state folder
/// pass `check_private_dir`: a folder another user owns or could write to may hold
/// their files, and a link there would be consent the person never gave. `NotFound` when
/// either is missing; else an error that says how to fix the folder.
pub fn private_state_dir(project_dir: &Path, sub: &str) -> io::Result<PathBuf> {
    let state = project_dir.join(STATE_DIR);
    check_private_dir(&state)?;
    if sub.is_empty() {
        return Ok(state);
    }
    let dir = state.join(sub);
    check_private_dir(&dir)?;
    Ok(dir)
}

/// Checks the state folder and those of its `links/` and `transcripts/` that exist, as
/// `serve`, `link` and `unlink` do before using them: `NotFound` only when the state
/// folder is missing.
pub fn check_state_folders(project_dir: &Path) -> io::Result<()> {
    private_state_dir(project_dir, "")?;
    for sub in [LINKS_DIR, TRANSCRIPTS_DIR] {
        match private_state_dir(project_dir, sub) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Reads the context for `node_id` in the folder project at `project_dir`:
/// `{text, reader: "claude-jsonl", reason}`, `reason` set (and `text` empty) only when
/// nothing was readable.
pub fn read_context(project_dir: &Path, node_id: &str) -> Value {
    let no_links = "No agents are linked to you; ask the user to link one";
    let links = match links_in(project_dir) {
        Ok(links) => links,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return answer("", Some(no_links)),
        Err(e) => return refused_folder(&e),
    };
    let peers = linked_peers(links, node_id);
    if peers.is_empty() {
        return answer("", Some(no_links));
    }
    let no_transcript = "Linked agents have no readable transcript yet";
    let pointers = match private_state_dir(project_dir, TRANSCRIPTS_DIR) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return answer("", Some(no_transcript)),
        Err(e) => return refused_folder(&e),
    };
    let project = read_small_json(&project_dir.join(STATE_DIR).join("project.json"));
    let project = project.unwrap_or_default();
    let mut blocks = Vec::new();
    for peer in &peers {
        let Some(path) = transcript_path(&pointers.join(format!("{peer}.json"))) else {
            continue;
        };
        let turns = read_claude_jsonl(Path::new(&path));
        if turns.is_empty() {
            continue;
        }
        let title = node_title(&project, peer).unwrap_or(peer);
        blocks.push(format!("# {title} ({peer})\n\n{}", turns.join("\n\n")));
    }
    if blocks.is_empty() {
        return answer("", Some(no_transcript));
    }
    answer(last_chars(&blocks.join("\n---\n"), MAX_CONTEXT_CHARS), None)
}

/// The answer when the project's state folder is not private: nothing was read.
fn refused_folder(problem: &io::Error) -> Value {
    let reason = format!("Nothing was read: {problem}; ask the user to fix it");
    answer("", Some(&reason))
}

fn answer(text: &str, reason: Option<&str>) -> Value {
    json!({ "text": text, "reader": READER, "reason": reason })
}

/// Peers linked to `node_id`, sorted, each once.
fn linked_peers(links: Vec<(String, String, bool)>, node_id: &str) -> Vec<String> {
    let mut peers: Vec<String> = Vec::new();
    for (a, b, _) in links {
        if a != node_id && b != node_id {
            continue;
        }
        let peer = if a == node_id { b } else { a };
        if !peers.contains(&peer) {
            peers.push(peer);
        }
    }
    peers
}

/// Every well-formed link of the folder project at `project_dir` as
/// `(a, b, agentMessages)`, in file-name order; none when its `links/` is missing or not
/// private ([`private_state_dir`]). Malformed, oversized or non-regular files, and files
/// of another user, are skipped.
pub fn read_links(project_dir: &Path) -> Vec<(String, String, bool)> {
    links_in(project_dir).unwrap_or_default()
}

/// [`read_links`], with why there are none when `links/` cannot be read.
fn links_in(project_dir: &Path) -> io::Result<Vec<(String, String, bool)>> {
    let links_dir = private_state_dir(project_dir, LINKS_DIR)?;
    let mut names: Vec<_> = std::fs::read_dir(links_dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .take(MAX_LINK_FILES)
        .collect();
    names.sort();
    let me = crate::sys::process::effective_uid();
    let mut links = Vec::new();
    for path in names {
        // Only `link` (this user) makes links; a file of anyone else is no consent.
        let mine = open_regular(&path).filter(|f| f.metadata().is_ok_and(|m| m.uid() == me));
        let link = mine.and_then(read_small);
        let Some(link) = link.filter(|l| l.get("version") == Some(&json!(1))) else {
            continue;
        };
        let text = |key| link.get(key).and_then(Value::as_str);
        let (Some(a), Some(b)) = (text("a"), text("b")) else {
            continue;
        };
        if a == b || !is_valid_node_id(a) || !is_valid_node_id(b) {
            continue;
        }
        let messages = grants_messages(&path, a, b, &link);
        links.push((a.to_string(), b.to_string(), messages));
    }
    Ok(links)
}

fn transcript_path(pointer: &Path) -> Option<String> {
    let value = read_small_json(pointer)?;
    let path = value.get("path")?.as_str()?;
    let valid = value.get("version") == Some(&json!(1)) && !path.is_empty() && !path.contains('\0');
    valid.then(|| path.to_string())
}

fn read_small_json(path: &Path) -> Option<Value> {
    read_small(open_regular(path)?)
}

fn read_small(file: File) -> Option<Value> {
    let mut bytes = Vec::new();
    file.take(MAX_SMALL_FILE + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_SMALL_FILE {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

fn node_title<'a>(project: &'a Value, node_id: &str) -> Option<&'a str> {
    project
        .get("nodes")?
        .as_array()?
        .iter()
        .find(|n| n.get("id").and_then(Value::as_str) == Some(node_id))?
        .get("data")?
        .get("title")?
        .as_str()
        .filter(|t| !t.trim().is_empty())
}

/// The last [`MAX_TURNS`] user/assistant turns of a Claude-style JSONL transcript (none when
/// unreadable), each `user: …` or `assistant: …` cut to [`MAX_TURN_CHARS`]; others skipped.
pub fn read_claude_jsonl(path: &Path) -> Vec<String> {
    let text = read_tail(path).unwrap_or_default();
    let mut turns: Vec<String> = text.lines().filter_map(turn_of_line).collect();
    let keep_from = turns.len().saturating_sub(MAX_TURNS);
    turns.drain(..keep_from);
    turns
}

/// Opens `path` only if it is a regular file. `O_NONBLOCK`: opening a FIFO planted at
/// an untrusted path must not wait for a writer (that would hold the project's queue).
fn open_regular(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

fn read_tail(path: &Path) -> Option<String> {
    let mut file = open_regular(path)?;
    let meta = file.metadata().ok()?;
    let start = meta.len().saturating_sub(MAX_TRANSCRIPT_TAIL);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_TRANSCRIPT_TAIL)
        .read_to_end(&mut bytes)
        .ok()?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if start > 0 {
        // The first line was cut in the middle.
        let first_break = text.find('\n').map_or(text.len(), |i| i + 1);
        text.drain(..first_break);
    }
    Some(text)
}

fn turn_of_line(line: &str) -> Option<String> {
    let record: Value = serde_json::from_str(line.trim()).ok()?;
    let role = record.get("type")?.as_str()?;
    if role != "user" && role != "assistant" {
        return None;
    }
    let text = match record.get("message")?.get("content")? {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let text = text.trim();
    (!text.is_empty()).then(|| format!("{role}: {}", first_chars(text, MAX_TURN_CHARS)))
}

fn first_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// The last `max` characters of `text`.
pub fn last_chars(text: &str, max: usize) -> &str {
    if max == 0 {
        return "";
    }
    match text.char_indices().rev().nth(max - 1) {
        Some((start, _)) => &text[start..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    use std::path::PathBuf;

    fn project(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-context-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for sub in ["links", "transcripts"] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir.join(".termsprawl").join(sub))
                .unwrap();
        }
        dir
    }

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn link(dir: &Path, a: &str, b: &str) {
        let body = json!({"version": 1, "a": a, "b": b}).to_string();
        fs::write(dir.join(format!(".termsprawl/links/{a}--{b}.json")), body).unwrap();
    }

    fn transcript(dir: &Path, peer: &str, lines: &[String]) {
        let path = dir.join(format!("{peer}.jsonl"));
        fs::write(&path, lines.join("\n")).unwrap();
        let pointer = json!({"version": 1, "path": path}).to_string();
        fs::write(
            dir.join(format!(".termsprawl/transcripts/{peer}.json")),
            pointer,
        )
        .unwrap();
    }

    fn line(role: &str, content: Value) -> String {
        json!({"type": role, "message": {"role": role, "content": content}}).to_string()
    }

    #[test]
    fn reads_linked_transcripts_titled_from_the_canvas() {
        let dir = project("read");
        link(&dir, "me", "peer1");
        link(&dir, "peer2", "me");
        link(&dir, "other", "peer3");
        let canvas = json!({"nodes": [{"id": "peer1", "data": {"title": "Reviewer"}}]});
        fs::write(dir.join(".termsprawl/project.json"), canvas.to_string()).unwrap();
        transcript(
            &dir,
            "peer1",
            &[
                line("user", json!("fix the bug")),
                line(
                    "assistant",
                    json!([{"type": "text", "text": "done"}, {"type": "tool_use", "name": "x"}]),
                ),
                line(
                    "user",
                    json!([{"type": "tool_result", "content": "ignored"}]),
                ),
                json!({"type": "summary", "summary": "skip"}).to_string(),
                "not json at all".into(),
            ],
        );
        transcript(&dir, "peer2", &[line("assistant", json!("hello from two"))]);
        transcript(
            &dir,
            "peer3",
            &[line("assistant", json!("not linked to me"))],
        );
        let value = read_context(&dir, "me");
        assert_eq!(value["reader"], "claude-jsonl");
        assert_eq!(value["reason"], Value::Null);
        assert_eq!(
            value["text"],
            "# Reviewer (peer1)\n\nuser: fix the bug\n\nassistant: done\n---\n# peer2 (peer2)\n\nassistant: hello from two"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn keeps_the_last_turns_cut_and_the_last_characters() {
        let dir = project("limits");
        link(&dir, "me", "peer");
        let long = "x".repeat(5_000);
        let mut lines: Vec<String> = (0..50)
            .map(|i| line("user", json!(format!("turn {i}"))))
            .collect();
        lines.push(line("assistant", json!(long)));
        transcript(&dir, "peer", &lines);
        let text = read_context(&dir, "me")["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            !text.contains("turn 10\n") && text.contains("turn 11\n") && text.contains("turn 49")
        );
        assert!(text.ends_with(&format!("assistant: {}", "x".repeat(2_000))));
        assert_eq!(last_chars("abcdé", 2), "dé");
        // Many peers with long turns are capped at 100,000 characters, newest kept.
        for i in 0..30 {
            let peer = format!("p{i:02}");
            link(&dir, "me", &peer);
            let lines: Vec<String> = (0..40)
                .map(|_| line("user", json!("y".repeat(2_000))))
                .collect();
            transcript(&dir, &peer, &lines);
        }
        let text = read_context(&dir, "me")["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(text.chars().count(), MAX_CONTEXT_CHARS);
        assert!(
            text.ends_with("xxxx") && text.contains("yyyy"),
            "sorted by link file, peer last"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn never_fails_on_junk() {
        let dir = project("junk");
        let links = dir.join(".termsprawl/links");
        fs::write(links.join("a.json"), "{").unwrap();
        fs::write(links.join("b.json"), "[1,2]").unwrap();
        fs::write(
            links.join("c.json"),
            json!({"version": 2, "a": "me", "b": "x"}).to_string(),
        )
        .unwrap();
        fs::write(
            links.join("d.json"),
            json!({"version": 1, "a": "me", "b": "me"}).to_string(),
        )
        .unwrap();
        fs::write(
            links.join("e.json"),
            json!({"version": 1, "a": "me", "b": "../etc"}).to_string(),
        )
        .unwrap();
        fs::write(links.join("f.json"), vec![0xff; 70_000]).unwrap();
        fs::create_dir_all(links.join("g.json")).unwrap();
        let value = read_context(&dir, "me");
        assert_eq!(value["text"], "");
        assert!(value["reason"]
            .as_str()
            .unwrap()
            .contains("No agents are linked"));
        link(&dir, "me", "peer");
        let pointers = dir.join(".termsprawl/transcripts");
        fs::write(
            pointers.join("peer.json"),
            json!({"version": 1, "path": 7}).to_string(),
        )
        .unwrap();
        assert!(read_context(&dir, "me")["reason"]
            .as_str()
            .unwrap()
            .contains("no readable transcript"));
        fs::write(
            pointers.join("peer.json"),
            json!({"version": 1, "path": "/nonexistent/x"}).to_string(),
        )
        .unwrap();
        assert!(read_context(&dir, "me")["reason"].is_string());
        fs::write(dir.join("bin.jsonl"), [0u8, 159, 146, 150, b'\n', b'{']).unwrap();
        let pointer = json!({"version": 1, "path": dir.join("bin.jsonl")}).to_string();
        fs::write(pointers.join("peer.json"), pointer).unwrap();
        assert!(read_context(&dir, "me")["reason"].is_string());
        let missing = std::env::temp_dir().join("tst-context-no-such-project");
        assert!(read_context(&missing, "me")["reason"].is_string());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn nothing_is_read_from_a_state_folder_that_is_not_private() {
        let dir = project("loose");
        link(&dir, "me", "peer");
        transcript(&dir, "peer", &[line("assistant", json!("from peer"))]);
        assert_eq!(read_links(&dir), vec![("me".into(), "peer".into(), false)]);
        assert_eq!(read_context(&dir, "me")["reason"], Value::Null);
        let state = dir.join(STATE_DIR);
        for folder in [
            state.clone(),
            state.join(LINKS_DIR),
            state.join(TRANSCRIPTS_DIR),
        ] {
            for mode in [0o755, 0o777] {
                set_mode(&folder, mode);
                let value = read_context(&dir, "me");
                let reason = value["reason"].as_str().unwrap();
                assert_eq!(value["text"], "");
                assert!(reason.contains("chmod 700"), "{reason}");
                assert!(reason.contains(&folder.display().to_string()), "{reason}");
                assert!(check_state_folders(&dir).is_err());
                if folder != state.join(TRANSCRIPTS_DIR) {
                    assert!(
                        read_links(&dir).is_empty(),
                        "{} at {mode:o}",
                        folder.display()
                    );
                }
            }
            set_mode(&folder, 0o700);
        }
        check_state_folders(&dir).unwrap();
        if crate::sys::process::effective_uid() == 0 {
            // Root hands things to `nobody`: a folder of theirs, then a link file of theirs.
            let links = state.join(LINKS_DIR);
            std::os::unix::fs::chown(&links, Some(65534), None).unwrap();
            assert!(read_links(&dir).is_empty());
            assert!(read_context(&dir, "me")["reason"]
                .as_str()
                .unwrap()
                .contains("belongs to uid 65534"));
            std::os::unix::fs::chown(&links, Some(0), None).unwrap();
            let file = links.join("me--peer.json");
            std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
            assert!(read_links(&dir).is_empty());
            std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        }
        assert_eq!(read_links(&dir).len(), 1);
        fs::remove_dir_all(dir).unwrap();
    }
}
