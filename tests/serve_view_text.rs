//! What the canvas view of a real `serve` shows as text, in real headless Chromium: a
//! character a person cannot see or that reorders what they read (bidi controls,
//! zero-width and other invisible characters, C0 and C1 controls, DEL) shows as its
//! escape, in the forms the CLI uses, in a call waiting for approval (whose arguments
//! still read back as exactly what will run), a note, a title, a screen and the activity
//! trail, on both backends; and the top bar stays one line at 1024–1280 px and names the
//! project's folder, times are 24-hour, and the second agent to link never offers the
//! first. Skips with a notice where Chromium (or, for its half, tmux) is not installed.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;
use termsprawl_tools::host::browser::{BrowserEngine, PageId};
use termsprawl_tools::terminal_text::{escape_for_terminal, is_escaped_for_terminal};

const WAIT: Duration = Duration::from_secs(20);

/// `agent` types `command` into terminal `shell`: a call the careful policy holds.
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

/// The id of the one call of `agent` the approvals panel shows, once it does.
fn shown_call(engine: &BrowserEngine, page: &PageId, agent: &str) -> String {
    let script = r##"(a) => {
      const calls = [...document.querySelectorAll("#approvals li.call")]
        .filter((li) => li.querySelector(".who").textContent === a.agent);
      return calls.length === 1 ? calls[0].dataset.callId : null;
    }"##;
    poll(&format!("the call of {agent} in the panel"), WAIT, || {
        let id = eval(engine, page, script, json!({"agent": agent}))?;
        id.as_str().map(str::to_string)
    })
}

fn click(engine: &BrowserEngine, page: &PageId, selector: &str) {
    engine
        .click(page, selector, Instant::now() + Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("click {selector}: {e}"));
}

/// The characters of `text` a person could not see or that reorder it: what the CLI
/// escapes, less the line ends and tabs an element shows on purpose.
fn hidden_in(text: &str) -> Vec<String> {
    (text.chars())
        .filter(|&c| is_escaped_for_terminal(c) && c != '\n' && c != '\t')
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect()
}

#[test]
fn hidden_characters_show_as_escapes_on_the_page() {
    let Some((engine, root)) = chromium("escapes", &[]) else {
        return;
    };
    escapes_on(&engine, "pty");
    if tmux_installed() {
        escapes_on(&engine, "tmux");
    } else {
        eprintln!("NOTICE: tmux is not installed; its screens are not tried");
    }
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}

fn escapes_on(engine: &BrowserEngine, backend: &str) {
    let dirs = Dirs::new(&format!("escapes-{backend}"));
    let args = ["--terminals", backend, "--policy", "careful"];
    let serve = Serve::start(
        &dirs,
        &[&args[..], &["--agent", "opener", "--agent", "a"]].concat(),
    );
    let page = open_live(engine, &view_url(&serve), WAIT);

    // A title that would read "notesexe.txt", a note full of invisible characters and
    // controls, a program printing U+202E, and a command held for the person that reads
    // as something else unless its characters show.
    let title = "notes\u{202e}txt.exe";
    let shell = serve.ok(&dirs, "opener", "terminal_open", json!({"title": title}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let note =
        "plan\u{2066}A\u{2069} \u{200b}\u{feff}\u{ad}\u{1b}[31m\u{9b}\u{7f}\u{85}\nline two\there";
    let sticky = serve.ok(&dirs, "opener", "sticky_open", json!({"text": note}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let printed = r"printf 'scr-\342\200\256-een\n'";
    let printing = json!({"nodeId": shell, "command": printed, "wait": "exit", "timeoutMs": 20000});
    serve.ok(&dirs, "opener", "terminal_submit", printing);
    let command =
        "echo harmless # \u{202e}txt.elif-tnatropmi' mr\u{202c}\u{200e}\u{2067}x\u{2069}\u{61c}";
    let held = submit(&serve, &dirs, "a", &shell, command);
    let id = shown_call(engine, &page, "a");

    let read = r##"(a) => {
      const node = (id) => document.querySelector('.node[data-node-id="' + id + '"]');
      const call = document.querySelector('#approvals li.call[data-call-id="' + a.id + '"]');
      return {
        body: document.body.innerText,
        approvals: document.getElementById("approvals-panel").innerText,
        args: call.querySelector(".args").textContent,
        argsEscapes: call.querySelectorAll(".args .esc").length,
        title: node(a.shell).querySelector(".title").textContent,
        titleEscapes: [...node(a.shell).querySelectorAll(".title .esc")].map((e) => e.textContent),
        note: node(a.sticky).querySelector(".text").textContent,
        screen: node(a.shell).querySelector(".screen").textContent,
      };
    }"##;
    let ids = json!({"id": id, "shell": shell, "sticky": sticky});
    let shown = poll("the screen's line", WAIT, || {
        let shown = eval(engine, &page, read, ids.clone())?;
        shown["screen"].as_str()?.contains("scr-").then_some(shown)
    });
    let text = |key: &str| shown[key].as_str().unwrap().to_string();
    for key in ["body", "approvals"] {
        assert_eq!(
            hidden_in(&text(key)),
            Vec::<String>::new(),
            "{backend}: {key}"
        );
    }
    // Each shows its escapes, in the CLI's forms.
    assert_eq!(text("title"), escape_for_terminal(title), "{backend}");
    assert_eq!(shown["titleEscapes"], json!(["\\u202e"]), "{backend}");
    assert!(
        text("screen").contains("scr-\\u202e-een"),
        "{backend}: {shown}"
    );
    assert_eq!(
        text("note"),
        "plan\\u2066A\\u2069 \\u200b\\ufeff\\u00ad\\x1b[31m\\x9b\\x7f\\x85\nline two\there",
        "{backend}: a note keeps its lines and tabs, and escapes the rest"
    );
    let approvals = text("approvals");
    for escape in [
        "\\u202e", "\\u202c", "\\u200e", "\\u2067", "\\u2069", "\\u061c",
    ] {
        assert!(
            approvals.contains(escape),
            "{backend}: {escape} in {approvals}"
        );
    }
    assert_eq!(shown["argsEscapes"], 6, "{backend}: {shown}");
    // What the panel shows reads back as exactly the arguments that will run.
    let drawn: Value = serde_json::from_str(&text("args")).unwrap();
    assert_eq!(
        drawn,
        json!({"nodeId": shell, "command": command}),
        "{backend}"
    );

    // Denied with a reason that holds U+202E: the trail's line shows it escaped.
    let reason = format!("#approvals li.call[data-call-id=\"{id}\"] input.reason");
    engine
        .type_text(&page, &reason, "no\u{202e}pe", Instant::now() + WAIT)
        .unwrap();
    click(
        engine,
        &page,
        &format!("#approvals li.call[data-call-id=\"{id}\"] button[data-decision=\"deny\"]"),
    );
    let (status, answer) = held.join().unwrap();
    assert_eq!(status, 400, "{backend}: {answer}");
    let activity = r#"() => document.getElementById("activity").innerText"#;
    let trail = poll("the denial in the activity panel", WAIT, || {
        let shown = eval(engine, &page, activity, json!({}))?;
        let shown = shown.as_str()?.to_string();
        shown.contains("no\\u202epe").then_some(shown)
    });
    assert_eq!(
        hidden_in(&trail),
        Vec::<String>::new(),
        "{backend}: {trail}"
    );
    assert!(serve.stop().success());
}

/// Where the top bar's parts are drawn, with the page `width` px wide (its root element
/// narrowed: the page has no media queries, so it lays out as in a window that wide).
const BAR: &str = r##"(a) => {
  document.documentElement.style.width = a.width + "px";
  const bar = document.getElementById("bar").getBoundingClientRect();
  const parts = [...document.getElementById("bar").children]
    .map((e) => e.getBoundingClientRect()).filter((r) => r.width > 0);
  const middles = parts.map((r) => (r.top + r.bottom) / 2);
  const controls = ["new-terminal", "agent-kind", "launch-agent", "browser-on", "browser-off"]
    .map((id) => document.getElementById(id).getBoundingClientRect());
  return {
    height: bar.height,
    spread: Math.max(...middles) - Math.min(...middles),
    controlsInside: controls.every((r) => r.right <= bar.right && r.width > 0),
    project: document.getElementById("project").textContent,
    projectTitle: document.getElementById("project").title,
  };
}"##;

#[test]
fn the_top_bar_times_and_link_choices() {
    let Some((engine, root)) = chromium("bar", &[]) else {
        return;
    };
    let dirs = Dirs::new("view-bar");
    let agents = ["--agent", "opener", "--agent", "a", "--agent", "c"];
    let args = [
        &["--terminals", "pty", "--policy", "careful"][..],
        &agents[..],
    ]
    .concat();
    let serve = Serve::start(&dirs, &args);
    let page = open_live(&engine, &view_url(&serve), WAIT);
    let shell = serve.ok(&dirs, "opener", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();

    // With a notice shown (an action's answer), at 1024 to 1280 px: one line, every
    // control in it; the project's folder named, its id in the tooltip.
    click(&engine, &page, "#browser-off");
    let notice = r#"() => document.getElementById("notice").textContent"#;
    poll("the notice", WAIT, || {
        (eval(&engine, &page, notice, json!({}))? == "browser_control: done").then_some(())
    });
    for width in [1024, 1152, 1280] {
        let bar = eval(&engine, &page, BAR, json!({"width": width})).unwrap();
        assert!(bar["height"].as_f64().unwrap() < 48.0, "{width} px: {bar}");
        assert!(bar["spread"].as_f64().unwrap() < 4.0, "{width} px: {bar}");
        assert_eq!(bar["controlsInside"], true, "{width} px: {bar}");
        assert_eq!(bar["project"], "project", "{width} px: {bar}");
        let id = format!("project {}", serve.project_id());
        assert_eq!(bar["projectTitle"], json!(id), "{width} px: {bar}");
    }

    // Times are the local 24-hour clock, in the approvals panel and in the trail.
    let held = submit(&serve, &dirs, "a", &shell, "echo held");
    let id = shown_call(&engine, &page, "a");
    let times = r##"() => ({
      asked: [...document.querySelectorAll("#approvals .call .when")].map((e) => e.textContent),
      trail: [...document.querySelectorAll("#activity .line .when")].map((e) => e.textContent),
    })"##;
    let times = poll("times in both panels", WAIT, || {
        let times = eval(&engine, &page, times, json!({}))?;
        (times["trail"].as_array()?.len() >= 2).then_some(times)
    });
    let clock = |text: &str| {
        let parts: Vec<&str> = text.split(':').collect();
        parts.len() == 3
            && parts
                .iter()
                .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_digit()))
            && parts[0] < "24"
    };
    let asked = times["asked"][0].as_str().unwrap();
    assert!(clock(asked.strip_prefix("asked ").unwrap()), "{times}");
    for when in times["trail"].as_array().unwrap() {
        assert!(clock(when.as_str().unwrap()), "{times}");
    }
    click(
        &engine,
        &page,
        &format!("#approvals li.call[data-call-id=\"{id}\"] button[data-decision=\"deny\"]"),
    );
    assert_eq!(held.join().unwrap().0, 400);

    // Linking: whichever agent is first, the second list offers the others only.
    let choose = r##"(a) => {
      const first = document.getElementById("link-a");
      first.value = a.agent;
      first.dispatchEvent(new Event("change", { bubbles: true }));
      return {
        first: first.value,
        second: [...document.getElementById("link-b").options].map((o) => o.value),
        link: !document.getElementById("link").disabled,
      };
    }"##;
    for agent in ["opener", "a", "c"] {
        let chosen = eval(&engine, &page, choose, json!({"agent": agent})).unwrap();
        assert_eq!(chosen["first"], agent, "{chosen}");
        let mut others: Vec<&str> = vec!["opener", "a", "c"];
        others.retain(|other| *other != agent);
        let mut second: Vec<String> = serde_json::from_value(chosen["second"].clone()).unwrap();
        second.sort();
        others.sort();
        assert_eq!(second, others, "{chosen}");
        assert_eq!(chosen["link"], true, "{chosen}");
    }
    assert!(serve.stop().success());
    engine.shutdown();
    let _ = std::fs::remove_dir_all(root);
}
