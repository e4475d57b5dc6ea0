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
    private_dirs(&pointers);
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
        (&["link", "a"], 2, "expected two agent ids A B, not a"),
        (
            &["unlink", "a", "b", "--messages"],
            2,
            "--messages goes only with link",
        ),
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
    private_dirs(&links);
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

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The links the canvas view's state shows (`/api/state`, with the view's key).
fn view_links(serve: &Serve) -> Value {
    use std::io::{Read, Write};
    let url = serve.ready["viewUrl"].as_str().expect("a viewUrl");
    let rest = url.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, key) = rest.split_once("/#key=").unwrap();
    let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "GET /api/state?viewer=00112233445566778899aabbccddeeff HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let state: Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("not the state: {answer}"));
    state["canvas"]["links"].clone()
}

/// `link a b`, then a's transcript for b to read: b's `context_read` and the view both see
/// the link while the project's state folders are private.
fn link_with_transcript(dirs: &Dirs, serve: &Serve) {
    let project = dirs.project.to_str().unwrap();
    assert_eq!(run(&["link", "a", "b", "--project", project]).0, 0);
    let transcript = dirs.root.join("a-transcript.jsonl");
    let turn =
        json!({"type": "assistant", "message": {"role": "assistant", "content": "a says hello"}});
    std::fs::write(&transcript, format!("{turn}\n")).unwrap();
    let pointers = dirs.project.join(".termsprawl/transcripts");
    private_dirs(&pointers);
    let pointer = json!({"version": 1, "path": transcript});
    std::fs::write(pointers.join("a.json"), pointer.to_string()).unwrap();
    let read = serve.ok(dirs, "b", "context_read", json!({}));
    assert!(
        read["text"].as_str().unwrap().contains("a says hello"),
        "{read}"
    );
    assert_eq!(
        view_links(serve),
        json!([{"a": "a", "b": "b", "agentMessages": false}])
    );
}

/// `link`, `unlink`, `context_read`, the view and a new `serve` all refuse the project's
/// state as it now is, each refusal saying `fix` (how to make the folder private again).
fn everything_refuses(dirs: &Dirs, serve: &Serve, fix: &str) {
    let project = dirs.project.to_str().unwrap();
    for command in ["link", "unlink"] {
        let (code, said) = run(&[command, "a", "b", "--project", project]);
        assert_eq!(code, 1, "{command}: {said}");
        assert!(said.contains(fix), "{command}: {said}");
        assert!(said.contains("nothing was changed"), "{command}: {said}");
    }
    let read = serve.ok(dirs, "b", "context_read", json!({}));
    assert_eq!(read["text"], json!(""), "{read}");
    assert!(read["reason"].as_str().unwrap().contains(fix), "{read}");
    assert_eq!(view_links(serve), json!([]), "the view draws no link");
    // A second serve on another data directory opens the same project: refused.
    let other_data = dirs.root.join("other-data");
    let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["serve", "--terminals", "pty", "--no-view", "--data"])
        .arg(&other_data)
        .arg("--project")
        .arg(&dirs.project)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve started: {stderr}");
    assert!(out.stdout.is_empty(), "no ready line");
    assert!(stderr.contains(fix), "{stderr}");
}

#[test]
fn a_state_folder_that_is_not_private_is_refused_with_how_to_fix_it() {
    let (dirs, serve) = serve_agents("links-loose", &["a", "b"]);
    link_with_transcript(&dirs, &serve);
    let state = dirs.project.join(".termsprawl");
    let file = state.join("links/a--b.json");
    for folder in [state.clone(), state.join("links")] {
        for loose in [0o755, 0o777] {
            set_mode(&folder, loose);
            let fix = format!("chmod 700 {}", folder.display());
            everything_refuses(&dirs, &serve, &fix);
            assert_eq!(mode_of(&folder), loose, "refused, never tightened");
            assert!(file.is_file(), "unlink removed nothing");
        }
        set_mode(&folder, 0o700);
    }
    // Private again: everything as before.
    let read = serve.ok(&dirs, "b", "context_read", json!({}));
    assert!(
        read["text"].as_str().unwrap().contains("a says hello"),
        "{read}"
    );
    assert_eq!(view_links(&serve).as_array().unwrap().len(), 1);
    let project = dirs.project.to_str().unwrap();
    assert_eq!(run(&["unlink", "a", "b", "--project", project]).0, 0);
    assert!(serve.stop().success());
    // A folder serve made earlier keeps working.
    let again = Serve::start(&dirs, &["--terminals", "pty", "--agent", "a"]);
    assert_eq!(mode_of(&state), 0o700);
    assert!(again.stop().success());
}

#[test]
fn another_users_state_folder_is_refused_and_its_links_never_read() {
    let (dirs, serve) = serve_agents("links-foreign", &["a", "b"]);
    // Our uid is the owner of a folder we just made; only root can hand folders away.
    if std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&dirs.root).unwrap()) != 0 {
        eprintln!("NOTICE: not root: the test that hands folders to nobody is skipped");
        return;
    }
    link_with_transcript(&dirs, &serve);
    let state = dirs.project.join(".termsprawl");
    let nobody = 65534;
    // A links/ (then a whole .termsprawl/) of another user, private to them: its link
    // files, even one of theirs that anyone may read, are no consent of this user.
    let links = state.join("links");
    for file in std::fs::read_dir(&links).unwrap() {
        let file = file.unwrap().path();
        std::os::unix::fs::chown(&file, Some(nobody), None).unwrap();
        set_mode(&file, 0o666);
    }
    for folder in [links.clone(), state.clone()] {
        std::os::unix::fs::chown(&folder, Some(nobody), None).unwrap();
        let fix = format!("{} belongs to uid {nobody}, not to you", folder.display());
        everything_refuses(&dirs, &serve, &fix);
        std::os::unix::fs::chown(&folder, Some(0), None).unwrap();
    }
    // Both folders ours again, the link file still theirs: it is not read either.
    let read = serve.ok(&dirs, "b", "context_read", json!({}));
    assert!(
        read["reason"]
            .as_str()
            .unwrap()
            .contains("No agents are linked"),
        "{read}"
    );
    assert_eq!(view_links(&serve), json!([]));
    assert!(serve.stop().success());
}
