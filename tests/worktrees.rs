//! Agents side by side in git worktrees, through a real `serve`, real git and a `custom`
//! agent (a script) that edits and commits where it starts: two agents editing the same
//! file do not see each other's work; `canvas_list` shows each one's branch, base and
//! counts; the person's `worktrees` command lists, diffs, merges (refused while the agent
//! runs, and on a conflict, changing nothing) and discards (the branch kept unless merged
//! or forced); a project that is not a repository refuses with why; a restart finds the
//! worktrees again; a confined agent cannot write the project's own checkout.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;

use std::time::Instant;
mod sys;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;

const TOOLS: &str = env!("CARGO_BIN_EXE_termsprawl-tools");

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `termsprawl-tools worktrees ARGS --project PROJECT --data DATA`: (success, stdout +
/// stderr).
fn worktrees(dirs: &Dirs, args: &[&str]) -> (bool, String) {
    let out = Command::new(TOOLS)
        .arg("worktrees")
        .args(args)
        .arg("--project")
        .arg(&dirs.project)
        .arg("--data")
        .arg(&dirs.data)
        .env_remove("TERMSPRAWL_CONFINED")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// A project repository on `main` with `a.txt`, and a `custom` agent that writes its node
/// id into `a.txt` where it starts, commits, tries the project's own checkout, and waits.
fn setup(dirs: &Dirs) {
    setup_agent(dirs, "exec sleep 600");
}

/// [`setup`], the agent doing `then` once it committed.
fn setup_agent(dirs: &Dirs, then: &str) {
    git(&dirs.project, &["init", "-q", "-b", "main"]);
    std::fs::write(dirs.project.join("a.txt"), "first\n").unwrap();
    git(&dirs.project, &["add", "a.txt"]);
    git(
        &dirs.project,
        &[
            "-c",
            "user.email=p@p",
            "-c",
            "user.name=person",
            "commit",
            "-qm",
            "first",
        ],
    );
    let agent = dirs.root.join("fake-agent");
    script(
        &agent,
        "#!/bin/sh\ncase \"$1\" in --help) echo 'usage: fake-agent'; exit 0;; --version) echo 'fake-agent 1.0'; exit 0;; esac\n\
         node=$(basename \"$PWD\")\n\
         echo \"from $node\" > a.txt\n\
         git -c user.email=a@b -c user.name=agent commit -qam \"work of $node\" && echo committed-$node\n\
         if (echo hack >> ../../../a.txt) 2>/dev/null; then echo checkout-writable; else echo checkout-protected; fi\n\
         if git config core.fsmonitor /tmp/run-as-the-person 2>/dev/null; then echo config-writable; else echo config-protected; fi\n\
         echo \"seen: $(cat a.txt)\"\n",
    );
    let body = std::fs::read_to_string(&agent).unwrap() + then + "\n";
    script(&agent, &body);
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"custom": {"executable": agent}}).to_string(),
    )
    .unwrap();
}

/// Launches a custom agent in a worktree; waits until it committed: (node id, its screen).
fn launch(serve: &Serve, dirs: &Dirs, args: Value) -> (String, String) {
    let launched = serve.ok(dirs, "me", "agent_launch", args);
    let node = launched["nodeId"].as_str().unwrap().to_string();
    let screen = poll("the agent's commit", Duration::from_secs(15), || {
        let read = serve.ok(dirs, "me", "terminal_read", json!({"nodeId": node}));
        let output = read["output"].as_str().unwrap_or_default().to_string();
        output.contains("seen:").then_some(output)
    });
    (node, screen)
}

#[test]
fn agents_work_side_by_side_and_the_person_takes_their_work() {
    let dirs = Dirs::new("worktrees");
    setup(&dirs);
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let (one, screen_one) = launch(&serve, &dirs, json!({"agent": "custom", "worktree": true}));
    let (two, screen_two) = launch(
        &serve,
        &dirs,
        json!({"agent": "custom", "worktree": true, "branch": "feature/two"}),
    );
    // Each saw only its own edit; the project's checkout is untouched.
    assert!(
        screen_one.contains(&format!("seen: from {one}")),
        "{screen_one}"
    );
    assert!(
        screen_two.contains(&format!("seen: from {two}")),
        "{screen_two}"
    );
    assert_eq!(
        std::fs::read_to_string(dirs.project.join("a.txt")).unwrap(),
        "first\n"
    );
    assert_eq!(git(&dirs.project, &["status", "--porcelain"]), "");
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let confined = node(&listed, &one).unwrap()["session"]["isolation"]["boundary"] == json!(true);
    if confined {
        assert!(screen_one.contains("checkout-protected"), "{screen_one}");
        // The repository's config (what git runs as the person) is out of reach too.
        assert!(screen_one.contains("config-protected"), "{screen_one}");
    }
    let worktree = &node(&listed, &one).unwrap()["worktree"];
    assert_eq!(worktree["branch"], format!("agent/{one}"), "{listed}");
    assert_eq!(
        (
            &worktree["base"],
            &worktree["ahead"],
            &worktree["behind"],
            &worktree["dirty"]
        ),
        (&json!("main"), &json!(1), &json!(0), &json!(false)),
        "{listed}"
    );
    assert_eq!(
        node(&listed, &two).unwrap()["worktree"]["branch"],
        "feature/two"
    );
    // The agent is told its own; its peers see its branch.
    let info = serve.ok(&dirs, &one, "session_info", json!({}));
    assert_eq!(
        (&info["worktree"]["branch"], &info["worktree"]["base"]),
        (&json!(format!("agent/{one}")), &json!("main")),
        "{info}"
    );
    let status = serve.ok(&dirs, "me", "agent_status", json!({}));
    let peer = status["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["nodeId"] == json!(two));
    assert_eq!(
        peer.unwrap()["worktree"]["branch"],
        "feature/two",
        "{status}"
    );

    // The person's view of it: list, diff.
    let (ok, list) = worktrees(&dirs, &["list", "--json"]);
    assert!(ok && list.lines().count() == 2, "{list}");
    let (ok, diff) = worktrees(&dirs, &["diff", &one]);
    assert!(ok && diff.contains(&format!("+from {one}")), "{diff}");

    // Not while the agent runs; then a fast-forward; then the second conflicts.
    let (ok, said) = worktrees(&dirs, &["merge", &one]);
    assert!(!ok && said.contains("still running"), "{said}");
    serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": one}));
    serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": two}));
    let (ok, said) = poll(
        "the merge once the agent ended",
        Duration::from_secs(10),
        || {
            let (ok, said) = worktrees(&dirs, &["merge", &one]);
            (ok || !said.contains("still running")).then_some((ok, said))
        },
    );
    assert!(ok && said.contains("fast-forwarded"), "{said}");
    poll(
        "the person's merge in the trail",
        Duration::from_secs(10),
        || {
            let lines = trail(&serve, &dirs);
            let merged = |l: &Value| l["operation"] == "worktree_merge" && l["by"] == "person";
            lines.iter().any(merged).then_some(())
        },
    );
    let content = std::fs::read_to_string(dirs.project.join("a.txt")).unwrap();
    assert_eq!(content, format!("from {one}\n"));
    let head = git(&dirs.project, &["rev-parse", "HEAD"]);
    let (ok, said) = worktrees(&dirs, &["merge", &two]);
    assert!(!ok && said.contains("conflicts in a.txt"), "{said}");
    assert_eq!(git(&dirs.project, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&dirs.project, &["status", "--porcelain"]), "");

    // Discard: the unmerged branch is kept unless forced; the merged one may go.
    let (ok, said) = worktrees(&dirs, &["discard", &two, "--delete-branch"]);
    assert!(!ok && said.contains("not merged"), "{said}");
    let (ok, said) = worktrees(&dirs, &["discard", &two]);
    assert!(ok && said.contains("stays"), "{said}");
    git(&dirs.project, &["rev-parse", "--verify", "feature/two"]);

    // A closed agent's worktree stays; a restart finds it, and a running agent's, again.
    let (three, _) = launch(&serve, &dirs, json!({"agent": "custom", "worktree": true}));
    assert!(serve.stop().success());
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(
        node(&listed, &three).unwrap()["worktree"]["branch"],
        format!("agent/{three}"),
        "{listed}"
    );
    let (_, list) = worktrees(&dirs, &["list"]);
    assert!(list.contains(&format!("agent/{one}")), "{list}");
    serve.ok(&dirs, "me", "terminal_close", json!({"nodeId": three}));
    poll("three's worktree left", Duration::from_secs(10), || {
        worktrees(&dirs, &["discard", &three, "--force", "--delete-branch"])
            .0
            .then_some(())
    });
    let (ok, said) = worktrees(&dirs, &["discard", &one, "--delete-branch"]);
    assert!(ok && said.contains("deleted its branch"), "{said}");
    let (_, list) = worktrees(&dirs, &["list"]);
    assert!(list.contains("no agent works in a worktree"), "{list}");
    assert!(serve.stop().success());
}

#[test]
fn a_folder_that_is_not_a_repository_refuses_a_worktree_and_adds_no_node() {
    let dirs = Dirs::new("worktrees-plain");
    let agent = dirs.root.join("fake-agent");
    script(&agent, "#!/bin/sh\nexec sleep 600\n");
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    let preferences = json!({"custom": {"executable": agent}}).to_string();
    std::fs::write(dirs.agent_tools().join("preferences.json"), preferences).unwrap();
    let serve = Serve::start(
        &dirs,
        &["--terminals", "pty", "--agent", "me", "--worktrees"],
    );
    let refused = serve.err(&dirs, "me", "agent_launch", json!({"agent": "custom"}));
    assert!(
        refused.contains("not a git repository") && refused.contains("no node was added"),
        "{refused}"
    );
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert!(serve.stop().success());
}

/// The person reviews and merges from the canvas view (real Chromium): an agent that
/// committed and ended shows its branch and counts; its diff shows as text (a hostile
/// line inert); "merge" puts its commit on the base branch.
#[test]
fn the_person_reads_the_diff_and_merges_from_the_view() {
    let Some((engine, _profile)) = chromium("worktrees", &[]) else {
        return;
    };
    let dirs = Dirs::new("worktrees-view");
    setup_agent(
        &dirs,
        "printf '<img src=x onerror=document.body.dataset.pwned=1>\\033[31m\\n' >> a.txt; \
         touch \"$(printf '<b>evil\\033[2J')\"; git add -A; \
         git -c user.email=a@b -c user.name=agent commit -qam hostile; exit 0",
    );
    let serve = Serve::start(
        &dirs,
        &["--terminals", "pty", "--agent", "me", "--worktrees"],
    );
    let (node_id, _) = launch(&serve, &dirs, json!({"agent": "custom"}));
    let page = open_live(&engine, &view_url(&serve), Duration::from_secs(30));
    let item = format!(r#"#worktrees li[data-node-id="{node_id}"]"#);
    let read = |script: &str| eval(&engine, &page, script, json!({"s": item.clone()}));
    poll(
        "the worktree with its commits",
        Duration::from_secs(20),
        || {
            let text = read("(a) => { const e = document.querySelector(a.s); return e ? e.textContent : null; }")?;
            text.as_str()?.contains("2 ahead").then_some(())
        },
    );
    // Ended: merge is allowed once the program has gone.
    poll("the agent's end", Duration::from_secs(10), || {
        let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
        (node(&listed, &node_id)?["session"]["live"] == json!(false)).then_some(())
    });
    engine
        .click(
            &page,
            &format!("{item} button.diff"),
            Instant::now() + Duration::from_secs(10),
        )
        .unwrap();
    let diff = poll("the diff", Duration::from_secs(10), || {
        let text = read("() => { const d = document.getElementById('diff'); return d.closest('[hidden]') ? null : d.textContent; }")?;
        let text = text.as_str()?.to_string();
        text.contains(&format!("+from {node_id}")).then_some(text)
    });
    assert!(
        diff.contains("<img src=x") && diff.contains("\\x1b[31m") && diff.contains("<b>evil"),
        "{diff}"
    );
    let inert = read("() => [document.body.dataset.pwned || null, document.querySelectorAll('#diff img, #diff script, #diff b').length]").unwrap();
    assert_eq!(inert, json!([null, 0]));
    engine
        .click(
            &page,
            &format!("{item} button.merge"),
            Instant::now() + Duration::from_secs(10),
        )
        .unwrap();
    poll("the merge", Duration::from_secs(10), || {
        let content = std::fs::read_to_string(dirs.project.join("a.txt")).ok()?;
        content
            .starts_with(&format!("from {node_id}"))
            .then_some(())
    });
    let log = git(&dirs.project, &["log", "--format=%s", "-3"]);
    assert!(
        log.contains("hostile") && log.contains(&format!("work of {node_id}")),
        "{log}"
    );
    // The trail says the person did it.
    poll(
        "the person's merge in the trail",
        Duration::from_secs(10),
        || {
            let lines = trail(&serve, &dirs);
            let merged = |l: &Value| l["operation"] == "worktree_merge" && l["by"] == "person";
            lines.iter().any(merged).then_some(())
        },
    );
    assert!(serve.stop().success());
}
