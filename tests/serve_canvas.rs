//! Every canvas operation against the real `serve` and its headless canvas owner, with
//! their edge cases; artifact_open's path rules; context_read; browser nodes without an
//! engine. Each test checks the persisted `project.json` where a change must (not) land.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

fn start(name: &str, extra: &[&str]) -> (Dirs, Serve) {
    let dirs = Dirs::new(name);
    let mut args = vec!["--terminals", "pty", "--agent", "me"];
    args.extend_from_slice(extra);
    let serve = Serve::start(&dirs, &args);
    (dirs, serve)
}

fn saved(dirs: &Dirs) -> Value {
    serde_json::from_slice(&std::fs::read(dirs.project_file()).unwrap()).unwrap()
}

fn saved_node(dirs: &Dirs, id: &str) -> Value {
    saved(dirs)["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .cloned()
        .unwrap_or(Value::Null)
}

fn id(value: &Value) -> String {
    value["nodeId"].as_str().unwrap().to_string()
}

#[test]
fn select_move_resize_and_group() {
    let (dirs, serve) = start("layout", &[]);
    let a = id(&serve.ok(&dirs, "me", "sticky_open", json!({"text": "a"})));
    let b = id(&serve.ok(&dirs, "me", "sticky_open", json!({"text": "b"})));

    // canvas_select: unknown ids fail and select nothing.
    let error = serve.err(
        &dirs,
        "me",
        "canvas_select",
        json!({"nodeIds": [a, "ghost"]}),
    );
    assert!(error.contains("ghost"), "{error}");
    assert_eq!(saved(&dirs)["selection"], json!([]));
    serve.ok(&dirs, "me", "canvas_select", json!({"nodeIds": [a, b]}));
    assert_eq!(saved(&dirs)["selection"], json!([a, b]));

    // canvas_move: absolute at the top level; unknown node refused.
    let moved = serve.ok(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": a, "x": 100, "y": 2000}),
    );
    assert_eq!(moved["relativeTo"], Value::Null);
    assert_eq!(
        saved_node(&dirs, &a)["position"],
        json!({"x": 100.0, "y": 2000.0})
    );
    serve.err(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": "ghost", "x": 1, "y": 1}),
    );
    serve.ok(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": b, "x": 500, "y": 2100}),
    );

    // canvas_resize clamps to the kind's minimum and says so.
    let resized = serve.ok(
        &dirs,
        "me",
        "canvas_resize",
        json!({"nodeId": a, "width": 10, "height": 500}),
    );
    assert_eq!(resized["clamped"], true);
    assert!(
        resized["message"].as_str().unwrap().contains("minimum"),
        "{resized}"
    );
    assert_eq!(
        saved_node(&dirs, &a)["size"],
        json!({"width": 120.0, "height": 500.0})
    );
    let exact = serve.ok(
        &dirs,
        "me",
        "canvas_resize",
        json!({"nodeId": b, "width": 300, "height": 300}),
    );
    assert_eq!(exact["clamped"], false);

    // canvas_group frames top-level nodes, reparents them, makes positions relative.
    let group = serve.ok(
        &dirs,
        "me",
        "canvas_group",
        json!({"nodeIds": [a, b], "title": "Pair"}),
    );
    let g = id(&group);
    let frame = saved_node(&dirs, &g);
    assert_eq!(frame["type"], "group");
    assert_eq!(frame["data"]["title"], "Pair");
    assert_eq!(frame["position"], json!({"x": 68.0, "y": 1968.0}));
    assert_eq!(saved_node(&dirs, &a)["parentId"], g);
    assert_eq!(
        saved_node(&dirs, &a)["position"],
        json!({"x": 32.0, "y": 32.0})
    );
    assert_eq!(
        saved_node(&dirs, &b)["position"],
        json!({"x": 432.0, "y": 132.0})
    );
    // A member moves relative to its group.
    let moved = serve.ok(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": b, "x": 40, "y": 50}),
    );
    assert_eq!(moved["relativeTo"], g);
    // Only top-level nodes can be grouped; nothing changes when refused.
    let before = saved(&dirs);
    let error = serve.err(&dirs, "me", "canvas_group", json!({"nodeIds": [a]}));
    assert!(error.contains("top-level"), "{error}");
    serve.err(&dirs, "me", "canvas_group", json!({"nodeIds": ["ghost"]}));
    assert_eq!(saved(&dirs), before);
    // Validation happens before the canvas: a bad number never reaches it.
    let error = serve.err(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": a, "x": 1e9, "y": 0}),
    );
    assert!(error.starts_with("Invalid x"), "{error}");
    assert!(serve.stop().success());
}

/// `canvas_list` may be answered from the canvas owner's last list (on the accept thread,
/// skipping the project's queue): a change answered before the list was asked for always
/// shows, while other clients list all the time.
#[test]
fn a_reused_canvas_list_never_hides_a_change() {
    let (dirs, serve) = start("list-reuse", &[]);
    let sticky = id(&serve.ok(&dirs, "me", "sticky_open", json!({"text": "s"})));
    let position = |list: &Value| {
        let node = list["value"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == sticky);
        node.map(|n| n["position"]["x"].as_f64().unwrap())
    };
    let move_and_list = |x: u32| {
        let args = json!({"nodeId": sticky, "x": x, "y": 0});
        serve.ok(&dirs, "me", "canvas_move", args);
        let list = serve.call(&dirs, "me", "canvas_list", json!({}));
        assert_eq!(
            position(&list),
            Some(f64::from(x)),
            "after moving to {x}: {list}"
        );
    };
    // Alone: each list after the first is the reused one unless the move dropped it.
    for x in 1..=50 {
        move_and_list(x);
    }
    let added = id(&serve.ok(&dirs, "me", "sticky_open", json!({"text": "new"})));
    let list = serve.call(&dirs, "me", "canvas_list", json!({}));
    let listed = list["value"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["id"] == added);
    assert!(listed, "a new node is listed at once: {list}");
    // And while four other clients list all the time.
    let token = serve_harness::token(&dirs, "me");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let listers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, token, port) = (stop.clone(), token.clone(), serve.port);
            std::thread::spawn(move || {
                let mut lists = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let body = json!({"operation": "canvas_list", "args": {}});
                    assert_eq!(post(port, &token, &body).0, 200);
                    lists += 1;
                }
                lists
            })
        })
        .collect();
    for x in 51..=100 {
        move_and_list(x);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let lists: u64 = listers.into_iter().map(|l| l.join().unwrap()).sum();
    eprintln!("figure: 100 moves and a new node, each listed at once, while 4 clients listed {lists} times");
}

#[test]
fn new_nodes_do_not_cover_each_other() {
    let (dirs, serve) = start("placement", &[]);
    for text in ["1", "2", "3"] {
        serve.ok(&dirs, "me", "sticky_open", json!({"text": text}));
    }
    serve.ok(&dirs, "me", "terminal_open", json!({}));
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let rects: Vec<(f64, f64, f64, f64)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let p = &n["position"];
            let s = &n["size"];
            (
                p["x"].as_f64().unwrap(),
                p["y"].as_f64().unwrap(),
                s["width"].as_f64().unwrap(),
                s["height"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rects.len(), 5);
    for (i, a) in rects.iter().enumerate() {
        for b in &rects[i + 1..] {
            let overlap = a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 < b.1 + b.3 && b.1 < a.1 + a.3;
            assert!(!overlap, "{a:?} overlaps {b:?}");
        }
    }
    assert!(serve.stop().success());
}

#[test]
fn sticky_and_terminal_nodes_have_their_shapes() {
    let (dirs, serve) = start("shapes", &[]);
    let sticky = id(&serve.ok(&dirs, "me", "sticky_open", json!({"text": "hello"})));
    let term = id(&serve.ok(&dirs, "me", "terminal_open", json!({"title": "logs"})));
    let list = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let sticky = node(&list, &sticky).unwrap();
    assert_eq!(sticky["type"], "sticky");
    assert_eq!(sticky["data"]["text"], "hello");
    assert!(sticky["data"]["title"].is_string());
    let term = node(&list, &term).unwrap();
    assert_eq!(term["type"], "terminal");
    assert_eq!(term["data"]["title"], "logs");
    assert_eq!(
        session_without_shell(term),
        json!({"backend": "pty", "live": true, "warm": false})
    );
    for n in list.as_array().unwrap() {
        let id = n["id"].as_str().unwrap();
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{id}"
        );
        assert!(n["position"]["x"].is_number() && n["size"]["width"].is_number());
    }
    assert!(serve.stop().success());
}

#[test]
fn artifact_open_inside_outside_symlink_and_binary() {
    let (dirs, serve) = start("artifact", &[]);
    let inside = dirs.project.join("notes.md");
    std::fs::write(&inside, "# notes").unwrap();
    let opened = serve.ok(&dirs, "me", "artifact_open", json!({"path": inside}));
    let editor = saved_node(&dirs, &id(&opened));
    assert_eq!(editor["type"], "editor");
    assert_eq!(editor["data"]["path"], json!(inside));
    assert_eq!(editor["data"]["title"], "notes.md");
    let diff = serve.ok(
        &dirs,
        "me",
        "artifact_open",
        json!({"path": inside, "view": "diff"}),
    );
    assert_eq!(saved_node(&dirs, &id(&diff))["type"], "diff");

    // A symlink inside that points inside opens the real file.
    let link = dirs.project.join("link.md");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    let via_link = serve.ok(&dirs, "me", "artifact_open", json!({"path": link}));
    assert_eq!(
        saved_node(&dirs, &id(&via_link))["data"]["path"],
        json!(inside)
    );

    let before = saved(&dirs);
    // Outside the project, directly or through a symlink.
    let outside = dirs.root.join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    let error = serve.err(&dirs, "me", "artifact_open", json!({"path": outside}));
    assert!(error.contains("inside the project"), "{error}");
    let escape = dirs.project.join("escape.txt");
    std::os::unix::fs::symlink(&outside, &escape).unwrap();
    let error = serve.err(&dirs, "me", "artifact_open", json!({"path": escape}));
    assert!(error.contains("inside the project"), "{error}");
    let dotdot = format!("{}/../secret.txt", dirs.project.display());
    serve.err(&dirs, "me", "artifact_open", json!({"path": dotdot}));
    // Binary files and image diffs are refused; relative and missing paths too.
    let image = dirs.project.join("logo.png");
    std::fs::write(&image, [0x89, b'P', b'N', b'G']).unwrap();
    let error = serve.err(
        &dirs,
        "me",
        "artifact_open",
        json!({"path": image, "view": "diff"}),
    );
    assert!(
        error.contains("diff") || error.contains("Binary"),
        "{error}"
    );
    let archive = dirs.project.join("a.zip");
    std::fs::write(&archive, b"PK").unwrap();
    assert!(serve
        .err(&dirs, "me", "artifact_open", json!({"path": archive}))
        .contains("Binary"));
    assert!(serve
        .err(&dirs, "me", "artifact_open", json!({"path": "notes.md"}))
        .contains("absolute"));
    assert!(serve
        .err(
            &dirs,
            "me",
            "artifact_open",
            json!({"path": dirs.project.join("missing.md")})
        )
        .contains("not found"));
    assert_eq!(
        saved(&dirs),
        before,
        "refused artifact_open changed the canvas"
    );
    assert!(serve.stop().success());
}

#[test]
fn context_read_follows_links_to_transcripts() {
    let (dirs, serve) = start("context", &["--agent", "peer", "--agent", "loner"]);
    let state = dirs.project.join(".termsprawl");
    let none = serve.ok(&dirs, "me", "context_read", json!({}));
    assert_eq!(none["text"], "");
    assert!(
        none["reason"].as_str().unwrap().contains("linked"),
        "{none}"
    );

    private_dirs(&state.join("links"));
    private_dirs(&state.join("transcripts"));
    std::fs::write(
        state.join("links/me--peer.json"),
        json!({"version": 1, "a": "me", "b": "peer"}).to_string(),
    )
    .unwrap();
    let no_transcript = serve.ok(&dirs, "me", "context_read", json!({}));
    assert!(
        no_transcript["reason"]
            .as_str()
            .unwrap()
            .contains("transcript"),
        "{no_transcript}"
    );

    let transcript = dirs.root.join("peer.jsonl");
    let lines = [
        json!({"type": "user", "message": {"content": "please fix the build"}}),
        json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "fixed: missing semicolon"}]}}),
        json!({"type": "summary", "summary": "ignored"}),
    ];
    let body: Vec<String> = lines
        .iter()
        .map(Value::to_string)
        .chain(["not json".to_string()])
        .collect();
    std::fs::write(&transcript, body.join("\n")).unwrap();
    std::fs::write(
        state.join("transcripts/peer.json"),
        json!({"version": 1, "path": transcript}).to_string(),
    )
    .unwrap();
    let context = serve.ok(&dirs, "me", "context_read", json!({}));
    let text = context["text"].as_str().unwrap();
    assert_eq!(context["reader"], "claude-jsonl");
    assert!(text.contains("user: please fix the build"), "{text}");
    assert!(
        text.contains("assistant: fixed: missing semicolon"),
        "{text}"
    );
    assert!(
        text.contains("(peer)") && !text.contains("ignored"),
        "{text}"
    );
    // The link works from both ends; an unlinked agent sees nothing.
    let back = serve.ok(&dirs, "peer", "context_read", json!({}));
    assert!(
        back["reason"].as_str().unwrap().contains("transcript"),
        "{back}"
    );
    assert!(
        serve.ok(&dirs, "loner", "context_read", json!({}))["reason"]
            .as_str()
            .unwrap()
            .contains("linked")
    );
    assert!(serve.stop().success());
}

#[test]
fn agent_launch_goes_through_prepare() {
    let dirs = Dirs::new("launch");
    let agent = dirs.root.join("fake-agent");
    script(
        &agent,
        "#!/bin/sh\ncase \"$1\" in --help) echo 'usage: fake-agent'; exit 0;; --version) echo 'fake-agent 1.2.3'; exit 0;; esac\necho \"agent $TERMSPRAWL_NODE_ID in project $TERMSPRAWL_PROJECT_ID\"\nexec sleep 60\n",
    );
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"custom": {"executable": agent}}).to_string(),
    )
    .unwrap();
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let error = serve.err(&dirs, "me", "agent_launch", json!({"agent": "grok"}));
    assert!(error.contains("Install or configure"), "{error}");
    let launched = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "custom"}));
    let helper = id(&launched);
    let saved_helper = saved_node(&dirs, &helper);
    assert_eq!(saved_helper["data"]["agentId"], "custom");
    assert_eq!(saved_helper["data"]["title"], "custom");
    let project = serve.project_id();
    poll("the agent's greeting", Duration::from_secs(5), || {
        let read = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": helper}));
        let wanted = format!("agent {helper} in project {project}");
        read["output"]
            .as_str()
            .unwrap()
            .contains(&wanted)
            .then_some(())
    });
    // prepare provisioned it: it can call the tools itself.
    let info = serve.ok(&dirs, &helper, "session_info", json!({}));
    assert_eq!(info["nodeId"], json!(helper));
    assert!(dirs.agent_tools().join("launch").join(&helper).is_dir());
    // Submitting into an agent's terminal is refused.
    let error = serve.err(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": helper, "command": "ls"}),
    );
    assert!(error.contains("plain shell"), "{error}");
    assert!(serve.stop().success());
}
