//! `termsprawl-tools link` / `unlink` as a person runs them: the link file `context_read`
//! then reads, `--messages`, and every refusal with its message (nothing written).
#![cfg(feature = "host")] // drives `serve` and the host binary
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use serve_harness::*;

/// Runs `termsprawl-tools WORDS…`: (exit code, stderr).
fn run(words: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(words)
        .output()
        .unwrap();
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), stderr)
}

fn links_in(project: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(project.join(".termsprawl/links"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `serve` (PTY terminals) with an agent node for each of `agents`.
fn serve_agents(name: &str, agents: &[&str]) -> (Dirs, Serve) {
    let dirs = Dirs::new(name);
    let mut args = vec!["--terminals", "pty"];
    for agent in agents {
        args.extend(["--agent", agent]);
    }
    let serve = Serve::start(&dirs, &args);
    (dirs, serve)
}

#[test]
fn a_person_links_and_unlinks_agents() {
    let (dirs, serve) = serve_agents("links", &["a", "b"]);
    let sticky = serve.ok(&dirs, "a", "sticky_open", json!({"text": "note"}));
    let sticky = sticky["nodeId"].as_str().unwrap().to_string();
    let project = dirs.project.to_str().unwrap().to_string();
    let with_project = |words: &[&str]| {
        let mut all: Vec<&str> = words.to_vec();
        all.extend(["--project", project.as_str()]);
        run(&all)
    };

    // a's transcript, which b may read once they are linked.
    let transcript = dirs.root.join("a-transcript.jsonl");
    let turn =
        json!({"type": "assistant", "message": {"role": "assistant", "content": "a says hello"}});
    std::fs::write(&transcript, format!("{turn}\n")).unwrap();
    let pointers = dirs.project.join(".termsprawl/transcripts");
    std::fs::create_dir_all(&pointers).unwrap();
    let pointer = json!({"version": 1, "path": transcript});
    std::fs::write(pointers.join("a.json"), pointer.to_string()).unwrap();
    let read = serve.ok(&dirs, "b", "context_read", json!({}));
    assert!(
        read["reason"]
            .as_str()
            .unwrap()
            .contains("No agents are linked"),
        "{read}"
    );

    // Reading only: the file context_read reads, private.
    let (code, said) = with_project(&["link", "a", "b"]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("linked") && said.contains("no messages"),
        "{said}"
    );
    let file = dirs.project.join(".termsprawl/links/a--b.json");
    let body: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(body, json!({"version": 1, "a": "a", "b": "b"}));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(file.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    // b now reads a's transcript.
    let read = serve.ok(&dirs, "b", "context_read", json!({}));
    assert!(
        read["text"].as_str().unwrap().contains("a says hello"),
        "{read}"
    );

    // With messages: the same file, now saying so; directed, so b--a is a new one.
    assert_eq!(with_project(&["link", "a", "b", "--messages"]).0, 0);
    let body: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"version": 1, "a": "a", "b": "b", "agentMessages": true})
    );
    assert_eq!(with_project(&["link", "b", "a"]).0, 0);
    assert_eq!(links_in(&dirs.project), ["a--b.json", "b--a.json"]);

    // Refusals, each with what to do, and nothing written.
    let refusals: &[(&[&str], i32, &str)] = &[
        (
            &["link", "a", "ghost"],
            1,
            "ghost is not a node of the canvas",
        ),
        (&["link", "a", sticky.as_str()], 1, "is not an agent node"),
        (&["link", "a", "a"], 2, "to itself"),
        (&["link", "a", "../b"], 2, "is not a node id"),
        (&["link", "a"], 2, "usage: termsprawl-tools link"),
        (&["unlink", "a", "b", "--messages"], 2, "usage:"),
    ];
    for (words, expected, message) in refusals {
        let (code, said) = with_project(words);
        assert_eq!(code, *expected, "{words:?}: {said}");
        assert!(said.contains(message), "{words:?}: {said}");
    }
    let elsewhere = dirs.root.join("not-a-project");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (code, said) = run(&["link", "a", "b", "--project", elsewhere.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        said.contains("has no canvas") && said.contains("start serve there"),
        "{said}"
    );
    assert_eq!(links_in(&dirs.project), ["a--b.json", "b--a.json"]);

    // Unlink removes exactly that direction; a second unlink says there is none.
    assert_eq!(with_project(&["unlink", "a", "b"]).0, 0);
    assert_eq!(links_in(&dirs.project), ["b--a.json"]);
    let (code, said) = with_project(&["unlink", "a", "b"]);
    assert_eq!(code, 1);
    assert!(
        said.contains("no link a → b") && said.contains("unlink b a"),
        "{said}"
    );
    drop(serve);
}

#[test]
fn a_planted_symlink_is_replaced_never_followed() {
    let (dirs, serve) = serve_agents("links-planted", &["a", "b"]);
    let links = dirs.project.join(".termsprawl/links");
    std::fs::create_dir_all(&links).unwrap();
    let target = dirs.root.join("victim");
    std::fs::write(&target, "untouched").unwrap();
    std::os::unix::fs::symlink(&target, links.join("a--b.json")).unwrap();
    let (code, said) = run(&[
        "link",
        "a",
        "b",
        "--project",
        dirs.project.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{said}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    let file = links.join("a--b.json");
    assert!(std::fs::symlink_metadata(&file)
        .unwrap()
        .file_type()
        .is_file());
    drop(serve);
}

/// Ids may hold "--": `x y--z` and `x--y z` name the same file, and neither replaces or
/// removes the other.
#[test]
fn links_whose_file_names_collide_stay_apart() {
    let (dirs, serve) = serve_agents("links-collide", &["x", "y--z", "x--y", "z"]);
    let project = dirs.project.to_str().unwrap();
    assert_eq!(run(&["link", "x", "y--z", "--project", project]).0, 0);
    let (code, said) = run(&["link", "x--y", "z", "--project", project]);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("already holds the link x → y--z"), "{said}");
    let (code, said) = run(&["unlink", "x--y", "z", "--project", project]);
    assert_eq!(code, 1, "{said}");
    let file = dirs.project.join(".termsprawl/links/x--y--z.json");
    let body: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(body, json!({"version": 1, "a": "x", "b": "y--z"}));
    assert_eq!(run(&["unlink", "x", "y--z", "--project", project]).0, 0);
    assert!(!file.exists());
    drop(serve);
}
