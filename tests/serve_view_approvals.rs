//! The approvals panel of the canvas view, in real headless Chromium, over a real
//! `serve --policy careful` with PTY terminals: a command typed into a terminal another
//! agent opened waits and is listed with its arguments as text (a hostile argument
//! creates no element); allow once, for this session, always (saved in `policy.json`),
//! deny with a reason, "allow all shown" (exactly the calls drawn), a rule changed in the
//! page; answers bound to the call shown; `--view-only` shows the panel without its
//! buttons. Skips with a notice where Chromium is not installed.
//!
//! With `APPROVALS_PANEL_BASE64=FILE` set, a screenshot of the page with a waiting call
//! is saved there as base64 PNG (`base64 -d FILE > docs/approvals-panel.png`).
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::os::unix::fs::PermissionsExt;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;
use termsprawl_tools::host::browser::{BrowserEngine, PageId};

const WAIT: Duration = Duration::from_secs(20);

/// The page, live.
fn open_view(engine: &BrowserEngine, url: &str) -> PageId {
    let page = engine
        .open_page(url, Instant::now() + Duration::from_secs(30))
        .unwrap();
    poll("the live page", WAIT, || {
        let status = r#"() => document.getElementById("status").textContent"#;
        (eval(engine, &page, status, json!({}))? == "live").then_some(())
    });
    page
}

fn click(engine: &BrowserEngine, page: &PageId, selector: &str) {
    engine
        .click(page, selector, Instant::now() + Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("click {selector}: {e}"));
}

/// The calls the panel shows: (id, agent, operation, class, arguments as drawn).
fn shown_calls(engine: &BrowserEngine, page: &PageId) -> Vec<Value> {
    let script = r##"() => [...document.querySelectorAll("#approvals li.call")].map((li) => ({
      id: li.dataset.callId,
      nodeId: li.querySelector(".who").textContent,
      operation: li.querySelector(".operation").textContent,
      class: li.querySelector(".class").textContent,
      args: li.querySelector(".args").textContent,
      elements: li.querySelector(".args").children.length,
    }))"##;
    let shown = eval(engine, page, script, json!({})).unwrap_or(json!([]));
    shown.as_array().cloned().unwrap_or_default()
}

/// Waits until the panel shows the calls of `agent` and there are `n` of them.
fn wait_shown(engine: &BrowserEngine, page: &PageId, agent: &str, n: usize) -> Vec<Value> {
    poll(&format!("{n} calls of {agent} in the panel"), WAIT, || {
        let calls: Vec<Value> = (shown_calls(engine, page).into_iter())
            .filter(|c| c["nodeId"] == agent)
            .collect();
        (calls.len() == n).then_some(calls)
    })
}

/// `agent` types `command` into terminal `shell` (a call that may wait for the person).
fn submit(
    serve: &Serve,
    dirs: &Dirs,
    agent: &str,
    shell: &str,
    command: &str,
) -> JoinHandle<(u16, Value)> {
    let (port, token) = (serve.port, token(dirs, agent));
    let args = json!({"nodeId": shell, "command": command});
    let body = json!({"operation": "terminal_submit", "args": args});
    thread::spawn(move || post(port, &token, &body))
}

fn answer_button(id: &str, decision: &str) -> String {
    format!("#approvals li.call[data-call-id=\"{id}\"] button[data-decision=\"{decision}\"]")
}

fn panel_message(engine: &BrowserEngine, page: &PageId) -> String {
    let script = r#"() => document.getElementById("approvals-message").textContent"#;
    let said = eval(engine, page, script, json!({}));
    said.and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn the_person_answers_waiting_calls_from_the_panel() {
    let Some((engine, root)) = chromium("approvals", &[]) else {
        return;
    };
    let dirs = Dirs::new("view-approvals");
    let agents = [
        "--agent", "opener", "--agent", "a", "--agent", "c", "--agent", "e",
    ];
    let mut args = vec!["--terminals", "pty", "--policy", "careful"];
    args.extend(agents);
    let serve = Serve::start(&dirs, &args);
    let url = view_url(&serve);
    let (port, key) = view_parts(&url);
    let shell = serve.ok(&dirs, "opener", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let page = open_view(&engine, &url);

    // A hostile argument: markup, an escape sequence, a newline. Shown as text.
    let hostile = "echo '<img src=x onerror=document.title=1>' \u{1b}[31m\u{7}\necho two";
    // How long from a call sent to its drawing in the panel (a figure, printed).
    let mut drawn_after = Vec::new();
    let sent = Instant::now();
    let waiting = submit(&serve, &dirs, "a", &shell, hostile);
    let call = wait_shown(&engine, &page, "a", 1).remove(0);
    drawn_after.push(sent.elapsed());
    assert_eq!(call["operation"], "terminal_submit");
    assert_eq!(call["class"], "terminals-others");
    assert_eq!(call["elements"], 0, "the arguments made elements: {call}");
    let drawn: Value = serde_json::from_str(call["args"].as_str().unwrap()).unwrap();
    assert_eq!(drawn, json!({"nodeId": shell, "command": hostile}));
    let images = r#"() => document.querySelectorAll("img").length + "/" + document.title"#;
    let seen = eval(&engine, &page, images, json!({})).unwrap();
    assert_eq!(
        seen,
        // The held call counts in the title (a waits for the person); no image was made.
        json!("0/(1) termsprawl canvas"),
        "markup in an argument became HTML"
    );
    if let Some(file) = std::env::var_os("APPROVALS_PANEL_BASE64") {
        let shot = engine
            .screenshot(&page, Instant::now() + Duration::from_secs(10))
            .unwrap();
        std::fs::write(file, shot).unwrap();
    }
    let id = call["id"].as_str().unwrap().to_string();

    // An answer bound to other arguments is refused, and nothing is decided.
    let other = json!({"id": id, "nodeId": "a", "operation": "terminal_submit",
        "args": {"nodeId": shell, "command": "rm -rf /"}, "decision": "allow"});
    let (status, answer) = act(port, &key, "approve", other.clone());
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("not the one shown"),
        "{answer}"
    );

    // Allow once: it runs once; the same call again asks again.
    click(&engine, &page, &answer_button(&id, "allow"));
    let (status, answer) = waiting.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    let replay = json!({"id": id, "nodeId": "a", "operation": "terminal_submit",
        "args": {"nodeId": shell, "command": hostile}, "decision": "allow"});
    let (status, answer) = act(port, &key, "approve", replay);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("No call waits"),
        "{answer}"
    );
    wait_shown(&engine, &page, "a", 0);
    let sent = Instant::now();
    let again = submit(&serve, &dirs, "a", &shell, hostile);
    let call = wait_shown(&engine, &page, "a", 1).remove(0);
    drawn_after.push(sent.elapsed());
    assert_ne!(
        call["id"],
        json!(id),
        "allowing once allowed the next call too"
    );

    // For this session: this one runs, and the next is not asked about.
    let id = call["id"].as_str().unwrap().to_string();
    click(&engine, &page, &answer_button(&id, "allow-for-session"));
    assert_eq!(again.join().unwrap().0, 200);
    serve.ok(
        &dirs,
        "a",
        "terminal_submit",
        json!({"nodeId": shell, "command": "echo next"}),
    );

    // Always: saved as the agent's rule in the private policy file.
    let sent = Instant::now();
    let always = submit(&serve, &dirs, "c", &shell, "echo always");
    let id = wait_shown(&engine, &page, "c", 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    drawn_after.push(sent.elapsed());
    eprintln!(
        "figure: a waiting call drawn in the panel after {drawn_after:?} (polled every 25 ms)"
    );
    click(&engine, &page, &answer_button(&id, "allow-always"));
    assert_eq!(always.join().unwrap().0, 200);
    let policy_file = dirs.agent_tools().join("policy.json");
    let project = serve.project_id();
    // The call may run a moment before the rule is written (`decide` answers first).
    poll("the rule saved", WAIT, || {
        let saved: Value = serde_json::from_slice(&std::fs::read(&policy_file).ok()?).ok()?;
        let rule = &saved["projects"][&project]["agents"]["c"]["terminals-others"];
        (rule == "allow").then_some(())
    });
    let mode = std::fs::metadata(&policy_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "policy.json is not private");

    // "Allow all shown": the two calls drawn run; one that arrives after stays pending.
    let first = submit(&serve, &dirs, "e", &shell, "echo one");
    let second = submit(&serve, &dirs, "e", &shell, "echo two");
    let drawn: Vec<Value> = wait_shown(&engine, &page, "e", 2)
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    let third = submit(&serve, &dirs, "e", &shell, "echo three");
    click(&engine, &page, "#approve-shown");
    assert_eq!(first.join().unwrap().0, 200);
    assert_eq!(second.join().unwrap().0, 200);
    let pending = wait_shown(&engine, &page, "e", 1).remove(0);
    assert!(
        !drawn.contains(&pending["id"]),
        "a call drawn stayed pending"
    );
    assert!(
        pending["args"].as_str().unwrap().contains("echo three"),
        "{pending}"
    );
    // The trail holds the person's two answers, each naming a call drawn.
    let answered = poll("the answers in the trail", WAIT, || {
        let answered: Vec<Value> = (trail(&serve, &dirs).into_iter())
            .filter(|l| l["by"] == "person" && l["operation"] == "approve")
            .filter(|l| l["args"]["nodeId"] == "e")
            .map(|l| l["args"]["id"].clone())
            .collect();
        (answered.len() >= 2).then_some(answered)
    });
    assert_eq!(answered.len(), 2, "{answered:?}");
    assert!(
        answered.iter().all(|id| drawn.contains(id)),
        "{answered:?} {drawn:?}"
    );

    // Deny with a reason: the agent gets the reason.
    let id = pending["id"].as_str().unwrap().to_string();
    let reason = format!("#approvals li.call[data-call-id=\"{id}\"] input.reason");
    // A refused answer (a reason with a control character) is shown in the panel, and
    // nothing is decided.
    engine
        .type_text(&page, &reason, "not\tnow", Instant::now() + WAIT)
        .unwrap();
    click(&engine, &page, &answer_button(&id, "deny"));
    let shown = poll("the refusal in the panel", WAIT, || {
        let message = panel_message(&engine, &page);
        (!message.is_empty()).then_some(message)
    });
    assert!(shown.contains("Invalid reason"), "{shown}");
    assert!(!third.is_finished(), "a refused answer decided the call");
    engine
        .type_text(&page, &reason, "not now", Instant::now() + WAIT)
        .unwrap();
    click(&engine, &page, &answer_button(&id, "deny"));
    let (status, answer) = third.join().unwrap();
    assert_eq!(status, 400, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with("The person denied this call: not now."),
        "{error}"
    );
    poll("the refusal cleared by the answer", WAIT, || {
        panel_message(&engine, &page).is_empty().then_some(())
    });

    // A rule set in the page: terminals-others denied to e, and its call is refused.
    let select = "#rules .agent-rules[data-node-id=\"e\"] select[data-class=\"terminals-others\"]";
    let choose = r#"(a) => {
      const el = document.querySelector(a.s);
      if (!el) return false;
      el.value = "deny";
      el.dispatchEvent(new Event("change", { bubbles: true }));
      return true;
    }"#;
    let chosen = eval(&engine, &page, choose, json!({"s": select}));
    assert_eq!(chosen, Some(json!(true)));
    // Once saved (the page's answer came), e's next call is refused without asking.
    poll("the rule saved", WAIT, || {
        let saved: Value = serde_json::from_slice(&std::fs::read(&policy_file).ok()?).ok()?;
        let rule = &saved["projects"][&project]["agents"]["e"]["terminals-others"];
        (rule == "deny").then_some(())
    });
    let refused = serve.err(
        &dirs,
        "e",
        "terminal_submit",
        json!({"nodeId": shell, "command": "echo x"}),
    );
    assert!(refused.contains("denies terminals-others"), "{refused}");
    assert!(
        refused.contains("Only the person can change the policy"),
        "{refused}"
    );
    // The person's rule is in the trail, as theirs.
    let rule_line = poll("the rule in the trail", WAIT, || {
        (trail(&serve, &dirs).into_iter())
            .find(|l| l["by"] == "person" && l["operation"] == "policy_rule")
    });
    assert_eq!(
        rule_line["args"],
        json!({"nodeId": "e", "class": "terminals-others", "rule": "deny"})
    );

    drop(serve);
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_watch_only_view_shows_waiting_calls_without_answers() {
    let Some((engine, root)) = chromium("approvals-watch", &[]) else {
        return;
    };
    let dirs = Dirs::new("view-approvals-watch");
    let serve = Serve::start(
        &dirs,
        &[
            "--terminals",
            "pty",
            "--policy",
            "careful",
            "--view-only",
            "--agent",
            "o",
            "--agent",
            "a",
        ],
    );
    let shell = serve.ok(&dirs, "o", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let url = view_url(&serve);
    let (port, key) = view_parts(&url);
    let page = open_view(&engine, &url);
    let waiting = submit(&serve, &dirs, "a", &shell, "echo watched");
    let call = wait_shown(&engine, &page, "a", 1).remove(0);
    let hidden = r##"() => [...document.querySelectorAll("#approvals button, #approve-shown, #rules select")]
      .filter((b) => b.offsetParent !== null).map((b) => b.outerHTML)"##;
    assert_eq!(eval(&engine, &page, hidden, json!({})), Some(json!([])));
    let answer = json!({"id": call["id"], "nodeId": "a", "operation": "terminal_submit",
        "args": {"nodeId": shell, "command": "echo watched"}, "decision": "allow"});
    let (status, _) = act(port, &key, "approve", answer);
    assert_eq!(status, 403);
    // Still waiting: answered from the command line so the call ends.
    let id = call["id"].as_str().unwrap();
    let allowed = std::process::Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["approvals", "deny", id, "--data"])
        .arg(&dirs.data)
        .status()
        .unwrap();
    assert!(allowed.success());
    assert_eq!(waiting.join().unwrap().0, 400);
    drop(serve);
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}
