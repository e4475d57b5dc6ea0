//! The person knows when an agent needs them, through the real `serve` (PTY terminals):
//! a launched `custom` agent whose script asks a question and reads its terminal is shown
//! `waiting` (why `input`) within seconds, in `agent_status`, in the view's "waiting for
//! you" strip and the page title (real Chromium), and `working` once the person answers
//! from the view; a Claude-style hook (`termsprawlctl hook claude`) marks an agent waiting
//! for a permission with its reason, then done; a call held by the person's policy shows
//! as waiting for an approval; `--notify-command` runs the person's program with the agent
//! and reason as arguments and environment, never through a shell; hostile reasons stay
//! text; 1,000 state changes in a second are coalesced and leave the view answering.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;

fn script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `node`'s `attention` in `agent_status`, asked by `me`.
fn attention(serve: &Serve, dirs: &Dirs, node: &str) -> Value {
    let status = serve.ok(dirs, "me", "agent_status", json!({}));
    let agents = status["agents"].as_array().unwrap();
    let agent = agents.iter().find(|a| a["nodeId"] == node);
    agent.map(|a| a["attention"].clone()).unwrap_or(Value::Null)
}

/// Runs `termsprawlctl hook claude` as `me`'s hook with `event` on stdin.
fn claude_hook(dirs: &Dirs, event: Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_termsprawlctl"))
        .arg("--session")
        .arg(dirs.agent_tools().join("sessions/me.json"))
        .args(["hook", "claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(output.stdout.is_empty(), "a hook prints nothing");
}

fn attention_lines(serve: &Serve, dirs: &Dirs) -> Vec<Value> {
    trail(serve, dirs)
        .into_iter()
        .filter(|line| line["operation"] == "attention")
        .collect()
}

#[test]
fn waiting_agents_reach_the_person_at_once() {
    let dirs = Dirs::new("attention");
    let notified = dirs.root.join("notified");
    let notify = dirs.root.join("notify");
    script(
        &notify,
        &format!(
            "#!/bin/sh\nprintf '%s|%s|%s|%s|%s|%s\\n' \"$1\" \"$2\" \"$TERMSPRAWL_AGENT\" \"$TERMSPRAWL_STATE\" \"$TERMSPRAWL_WHY\" \"$TERMSPRAWL_REASON\" >> {}\n",
            notified.display()
        ),
    );
    // The custom agent: asks, reads its terminal, then works (a sleep).
    let asker = dirs.project.join("asker");
    script(
        &asker,
        "#!/bin/sh\ncase \"$1\" in --help) echo 'usage: asker'; exit 0;; --version) echo 'asker 1.0'; exit 0;; esac\n\
         printf 'Deploy to production? [y/N] '\nread answer\necho \"answered $answer\"\nexec sleep 60\n",
    );
    std::fs::create_dir_all(dirs.agent_tools()).unwrap();
    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"custom": {"executable": asker}}).to_string(),
    )
    .unwrap();
    let notify_flag = notify.display().to_string();
    let args = [
        "--terminals",
        "pty",
        "--agent",
        "me",
        "--notify-command",
        &notify_flag,
    ];
    let serve = Serve::start(&dirs, &args);
    let launched = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "custom"}));
    let asker_node = launched["nodeId"].as_str().unwrap().to_string();

    // Its program reads the terminal, quiet: waiting for the person to type.
    let asked = Instant::now();
    let waiting = poll("the asker waits", Duration::from_secs(15), || {
        let state = attention(&serve, &dirs, &asker_node);
        (state["state"] == "waiting").then_some(state)
    });
    eprintln!(
        "shown waiting {} ms after its launch",
        asked.elapsed().as_millis()
    );
    assert_eq!(
        (&waiting["why"], &waiting["source"]),
        (&json!("input"), &json!("terminal")),
        "{waiting}"
    );

    // The view: the strip lists it, its node is outlined, the title counts it.
    let url = view_url(&serve);
    let (port, key) = view_parts(&url);
    let chromium = chromium("attention", &[]);
    let page = chromium
        .as_ref()
        .map(|(engine, _)| (engine, open_live(engine, &url, Duration::from_secs(15))));
    if let Some((engine, page)) = &page {
        let shown = poll("the strip shows it", Duration::from_secs(10), || {
            let seen = eval(engine, page, "() => ({ title: document.title, strip: document.getElementById('waiting').hidden ? '' : document.getElementById('waiting-list').innerText, outlined: document.querySelectorAll('.node.needs-you').length })", json!({}))?;
            (seen["title"] == "(1) termsprawl canvas").then_some(seen)
        });
        assert!(
            shown["strip"].as_str().unwrap().contains("input"),
            "{shown}"
        );
        assert_eq!(shown["outlined"], 1, "{shown}");
    }

    // `serve` looks once a second: the trail says it started waiting.
    poll("the trail's waiting line", Duration::from_secs(5), || {
        let lines = attention_lines(&serve, &dirs);
        let waiting =
            |l: &Value| l["nodeId"] == asker_node.as_str() && l["args"]["state"] == "waiting";
        lines.iter().any(waiting).then_some(())
    });

    // The person answers from the view: it works again.
    let (status, answer) = act(
        port,
        &key,
        "keys",
        json!({"nodeId": asker_node, "text": "y\r"}),
    );
    assert_eq!(status, 200, "{answer}");
    poll("the asker works", Duration::from_secs(10), || {
        (attention(&serve, &dirs, &asker_node)["state"] == "working").then_some(())
    });

    // A Claude-style hook: waiting for a permission, with a hostile reason kept as text.
    let hostile = "Claude needs your permission to use Bash $(touch PWNED) <img src=x onerror=alert(1)>\u{202e}\u{1b}[2J";
    claude_hook(
        &dirs,
        json!({"hook_event_name": "Notification", "message": hostile}),
    );
    let asking = attention(&serve, &dirs, "me");
    assert_eq!(
        (&asking["state"], &asking["why"], &asking["source"]),
        (&json!("waiting"), &json!("permission"), &json!("agent")),
        "{asking}"
    );
    // canvas_list carries it too, on the agent's node (a kept answer at most 0.5 s late).
    poll("canvas_list shows it", Duration::from_secs(5), || {
        let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
        (node(&listed, "me")?["attention"]["why"] == "permission").then_some(())
    });
    let reason = asking["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("Claude needs your permission") && reason.ends_with("\\u202e\\x1b[2J"),
        "{reason}"
    );
    if let Some((engine, page)) = &page {
        let shown = poll(
            "the strip shows the reason",
            Duration::from_secs(10),
            || {
                let seen = eval(engine, page, "() => ({ title: document.title, text: document.getElementById('waiting-list').innerText, images: document.querySelectorAll('#waiting img').length })", json!({}))?;
                seen["text"].as_str()?.contains("onerror").then_some(seen)
            },
        );
        assert_eq!(shown["images"], 0, "{shown}");
        assert!(
            shown["text"]
                .as_str()
                .unwrap()
                .contains("permission: Claude needs"),
            "{shown}"
        );
    }
    // The notify program ran for both, with the reason as an argument: no shell ran it.
    let lines = poll(
        "the notify program ran twice",
        Duration::from_secs(10),
        || {
            let text = std::fs::read_to_string(&notified).unwrap_or_default();
            (text.lines().count() >= 2).then_some(text)
        },
    );
    assert!(lines.contains(&format!("{asker_node} waits for you|input: its program waits for you to type|{asker_node}|waiting|input|")), "{lines}");
    assert!(
        lines.contains(
            "me waits for you|permission: Claude needs your permission to use Bash $(touch PWNED)"
        ),
        "{lines}"
    );
    assert!(!dirs.root.join("PWNED").exists() && !dirs.project.join("PWNED").exists());
    claude_hook(&dirs, json!({"hook_event_name": "Stop"}));
    assert_eq!(attention(&serve, &dirs, "me")["state"], "done");
    claude_hook(
        &dirs,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "next"}),
    );
    assert_eq!(attention(&serve, &dirs, "me")["state"], "working");

    // A call the person's policy holds: waiting for an approval, counted in the title.
    let tools = env!("CARGO_BIN_EXE_termsprawl-tools");
    let data = dirs.data.display().to_string();
    let set = Command::new(tools)
        .args(["policy", "set", "canvas", "ask", "--data", &data])
        .status()
        .unwrap();
    assert!(set.success());
    let held = {
        let (port, token) = (serve.port, token(&dirs, "me"));
        std::thread::spawn(move || {
            post(
                port,
                &token,
                &json!({"operation": "sticky_open", "args": {"text": "hi"}}),
            )
        })
    };
    let approval = poll("the held call shows", Duration::from_secs(10), || {
        let state = attention(&serve, &dirs, "me");
        (state["why"] == "approval").then_some(state)
    });
    assert_eq!(
        approval["reason"], "sticky_open waits for your approval",
        "{approval}"
    );
    if let Some((engine, page)) = &page {
        poll("the title counts it", Duration::from_secs(10), || {
            let title = eval(engine, page, "() => document.title", json!({}))?;
            title.as_str()?.starts_with("(").then_some(())
        });
    }
    // `serve` writes the list the person's commands read a moment later.
    let id = poll(
        "the call in the approvals list",
        Duration::from_secs(10),
        || {
            let listed = Command::new(tools)
                .args(["approvals", "list", "--json", "--data", &data])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&listed.stdout).into_owned();
            let call = text
                .lines()
                .find_map(|l| serde_json::from_str::<Value>(l).ok())?;
            Some(call["id"].as_str()?.to_string())
        },
    );
    let deny = Command::new(tools)
        .args(["approvals", "deny", &id, "--data", &data])
        .status()
        .unwrap();
    assert!(deny.success());
    let (_, answer) = held.join().unwrap();
    assert_eq!(answer["ok"], false, "{answer}");

    // 1,000 changes in about a second: a few lines in the trail, the view still answers.
    let before = attention_lines(&serve, &dirs).len();
    let token = token(&dirs, "me");
    let flood = Instant::now();
    for i in 0..1000 {
        let state = if i % 2 == 0 { "waiting" } else { "working" };
        let (status, _) = post(
            serve.port,
            &token,
            &json!({"operation": "agent_state", "args": {"state": state, "reason": format!("step {i}")}}),
        );
        assert_eq!(status, 200);
    }
    let seconds = flood.elapsed().as_secs() + 2;
    std::thread::sleep(Duration::from_millis(1500));
    let added = attention_lines(&serve, &dirs).len() - before;
    assert!(
        added as u64 <= seconds + 2,
        "{added} lines for 1,000 changes in {seconds} s"
    );
    let (status, answer) = act(
        port,
        &key,
        "keys",
        json!({"nodeId": asker_node, "text": "x"}),
    );
    assert_eq!(status, 200, "the view answers: {answer}");
    if let Some((engine, page)) = &page {
        poll("the page still follows", Duration::from_secs(10), || {
            eval(
                engine,
                page,
                "() => document.getElementById('status').textContent",
                json!({}),
            )?
            .as_str()?
            .eq("live")
            .then_some(())
        });
    }

    // The trail says when each started and stopped waiting.
    let lines = attention_lines(&serve, &dirs);
    assert!(
        lines
            .iter()
            .any(|l| l["nodeId"] == asker_node.as_str() && l["args"]["state"] == "waiting"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["nodeId"] == asker_node.as_str() && l["args"]["state"] == "working"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["nodeId"] == "me" && l["args"]["why"] == "permission"),
        "{lines:?}"
    );
    assert!(serve.stop().success());
}

#[test]
fn a_notify_command_that_is_not_there_is_refused_before_the_ready_line() {
    let dirs = Dirs::new("attention-bad");
    let (status, _, err) = serve_fails(
        &dirs,
        &[
            "--terminals",
            "pty",
            "--notify-command",
            "no-such-notifier-xyz",
        ],
    );
    assert!(!status.success());
    assert!(
        err.contains("--notify-command no-such-notifier-xyz: no such executable"),
        "{err}"
    );
}
