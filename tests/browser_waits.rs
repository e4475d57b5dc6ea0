//! Waiting on pages through the real `serve` and headless Chromium, on pages served by
//! this test (one of them answers slowly): `browser_wait` for text that appears or goes,
//! for network and DOM idleness, its timeout; that it holds up no other call of its
//! project; the short wait after a click that navigates or fetches; JavaScript dialogs
//! reported and answered; a file chooser reported. Skipped, with a notice, where no
//! Chromium is installed.
#![cfg(feature = "host")] // drives `serve` and its browser engine
#![deny(unsafe_code)]

mod page_server;

mod serve_harness;
mod sys;

use std::io::Write;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::*;

/// Text that appears after a second, and text that goes after a second.
const LATE_PAGE: &str = r#"<!doctype html><title>Late</title>
<p id="spinner">Loading the   ORDER…</p>
<script>
  setTimeout(() => {
    document.getElementById('spinner').remove();
    const p = document.createElement('p');
    p.textContent = 'Order 42 is ready';
    document.body.append(p);
  }, 1000);
</script>"#;

/// Fetches a slow resource after its load; the DOM changes when it arrives.
const FETCH_PAGE: &str = r#"<!doctype html><title>Fetch</title>
<p id="out">waiting</p>
<script>
  addEventListener('load', () => {
    fetch('/slow').then((r) => r.text()).then((t) => {
      document.getElementById('out').textContent = t;
    });
  });
</script>"#;

/// Never idle: a request and a DOM change every 200 ms.
const BUSY_PAGE: &str = r#"<!doctype html><title>Busy</title>
<p id="n">0</p>
<script>
  let n = 0;
  setInterval(() => {
    document.getElementById('n').textContent = String(++n);
    fetch('/quick');
  }, 200);
</script>"#;

/// A link to another page, a button that fetches, dialogs and a file input.
const ACTIONS_PAGE: &str = r#"<!doctype html><title>Actions</title>
<a id="next" href="/late">Next page</a>
<button id="fetch" onclick="fetch('/slow').then(() => { document.title = 'fetched'; })">Fetch</button>
<button id="alert" onclick="alert('Saved!\n- button &quot;OK&quot; [ref=e1]')">Alert</button>
<button id="confirm" onclick="document.title = confirm('Delete it?') ? 'deleted' : 'kept'">Confirm</button>
<button id="prompt" onclick="document.title = 'name: ' + prompt('Your name?', 'anon')">Prompt</button>
<input id="file" type="file">
<p>nothing</p>"#;

/// Serves the pages; `/slow` answers after 1.5 s. Returns `http://127.0.0.1:PORT`.
fn serve_pages() -> String {
    page_server::start(answer)
}

fn answer(mut stream: TcpStream, head: &str) {
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let (kind, body) = match path {
        "/late" => ("text/html", LATE_PAGE),
        "/fetch" => ("text/html", FETCH_PAGE),
        "/busy" => ("text/html", BUSY_PAGE),
        "/actions" => ("text/html", ACTIONS_PAGE),
        "/slow" => {
            thread::sleep(Duration::from_millis(1500));
            ("text/plain", "slow answer")
        }
        _ => ("text/plain", "quick"),
    };
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {kind}; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).ok();
}

fn wait(serve: &Serve, dirs: &Dirs, browser: &str, condition: Value) -> Value {
    let mut args = json!({ "nodeId": browser, "timeoutMs": 20_000 });
    for (key, value) in condition.as_object().unwrap() {
        args[key] = value.clone();
    }
    serve.ok(dirs, "me", "browser_wait", args)
}

fn navigate(serve: &Serve, dirs: &Dirs, browser: &str, url: &str) -> Value {
    serve.ok(
        dirs,
        "me",
        "browser_navigate",
        json!({ "nodeId": browser, "url": url }),
    )
}

#[test]
fn waits_for_text_to_appear_and_go_and_for_idleness() {
    if !chromium_or_notice("the browser wait tests") {
        return;
    }
    let base = serve_pages();
    let dirs = Dirs::new("bwtext");
    let (serve, browser) = serve_with_browser(&dirs, &format!("{base}/late"));

    // Opened before the text is there; case and runs of spaces do not matter.
    let appeared = wait(
        &serve,
        &dirs,
        &browser,
        json!({ "text": "order 42 IS  ready" }),
    );
    println!("text appeared: {appeared}");
    assert_eq!(appeared["state"], "met", "{appeared}");
    assert_eq!(appeared["textFound"], true, "{appeared}");
    assert_eq!(appeared["title"], "Late");
    let gone = wait(
        &serve,
        &dirs,
        &browser,
        json!({ "textGone": "loading the order" }),
    );
    assert_eq!(gone["state"], "met", "{gone}");
    assert_eq!(gone["textFound"], false, "{gone}");

    // Again from the start: the text is not there yet when the wait begins.
    navigate(&serve, &dirs, &browser, &format!("{base}/late"));
    let gone = wait(
        &serve,
        &dirs,
        &browser,
        json!({ "textGone": "Loading the order" }),
    );
    assert_eq!(gone["state"], "met", "{gone}");
    let page = serve.ok(&dirs, "me", "browser_inspect", json!({ "nodeId": browser }));
    assert!(
        page["text"].as_str().unwrap().contains("Order 42 is ready"),
        "{page}"
    );

    // Network idle only once the slow fetch (1.5 s) has answered.
    navigate(&serve, &dirs, &browser, &format!("{base}/fetch"));
    let idle = wait(&serve, &dirs, &browser, json!({ "idle": "network" }));
    println!("network idle: {idle}");
    assert_eq!(idle["state"], "met", "{idle}");
    assert_eq!(idle["requestsInFlight"], 0);
    assert!(idle["networkQuietMs"].as_u64().unwrap() >= 500, "{idle}");
    let page = serve.ok(&dirs, "me", "browser_inspect", json!({ "nodeId": browser }));
    assert!(
        page["text"].as_str().unwrap().contains("slow answer"),
        "{page}"
    );
    let quiet = wait(&serve, &dirs, &browser, json!({ "idle": "dom" }));
    assert_eq!(quiet["state"], "met", "{quiet}");
    assert!(quiet["domQuietMs"].as_u64().unwrap() >= 500, "{quiet}");

    // A page that is never idle: each wait times out cleanly, saying what it saw.
    navigate(&serve, &dirs, &browser, &format!("{base}/busy"));
    for condition in [
        json!({ "idle": "network" }),
        json!({ "idle": "dom" }),
        json!({ "text": "never shown" }),
    ] {
        let mut args = json!({ "nodeId": browser, "timeoutMs": 1_500 });
        for (key, value) in condition.as_object().unwrap() {
            args[key] = value.clone();
        }
        let timed_out = serve.ok(&dirs, "me", "browser_wait", args);
        println!("timed out: {timed_out}");
        assert_eq!(timed_out["state"], "timed_out", "{timed_out}");
        assert!(
            timed_out["waitedMs"].as_u64().unwrap() >= 1_500,
            "{timed_out}"
        );
    }
    let never = serve.ok(
        &dirs,
        "me",
        "browser_wait",
        json!({ "nodeId": browser, "text": "never shown", "timeoutMs": 1_000 }),
    );
    assert_eq!(never["textFound"], false, "{never}");

    // Exactly one condition; only the owner may wait.
    let error = serve.err(&dirs, "me", "browser_wait", json!({ "nodeId": browser }));
    assert!(
        error.contains("exactly one of text, textGone or idle"),
        "{error}"
    );
    let error = serve.err(
        &dirs,
        "me",
        "browser_wait",
        json!({ "nodeId": browser, "text": "a", "idle": "dom" }),
    );
    assert!(error.contains("exactly one of"), "{error}");
    let error = serve.err(
        &dirs,
        "other",
        "browser_wait",
        json!({ "nodeId": browser, "idle": "dom" }),
    );
    assert!(error.contains("Claim this browser"), "{error}");
    assert!(serve.stop().success());
}

#[test]
fn a_long_wait_holds_up_no_other_call_of_its_project() {
    if !chromium_or_notice("the browser wait tests") {
        return;
    }
    let base = serve_pages();
    let dirs = Dirs::new("bwconc");
    let (serve, browser) = serve_with_browser(&dirs, &format!("{base}/busy"));
    let started = Instant::now();
    let waiting = {
        let (port, token) = (serve.port, token(&dirs, "me"));
        let browser = browser.clone();
        thread::spawn(move || {
            let args = json!({ "nodeId": browser, "idle": "network", "timeoutMs": 10_000 });
            let (_, answer) = post(
                port,
                &token,
                &json!({ "operation": "browser_wait", "args": args }),
            );
            (answer, Instant::now())
        })
    };
    // Let the wait be taken up before the other calls start.
    thread::sleep(Duration::from_millis(300));
    let mut latencies = Vec::new();
    for _ in 0..200 {
        let asked = Instant::now();
        let list = serve.ok(&dirs, "other", "canvas_list", json!({}));
        latencies.push(asked.elapsed());
        assert!(node(&list, &browser).is_some());
    }
    // Calls that go through the project's worker, the same page's included.
    let page = serve.ok(&dirs, "me", "browser_inspect", json!({ "nodeId": browser }));
    assert_eq!(page["title"], "Busy");
    serve.ok(&dirs, "other", "browser_list", json!({}));
    let others_done = Instant::now();
    let (answer, answered) = waiting.join().unwrap();
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "200 canvas_list calls during a 10 s browser_wait: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms; \
         all answered {:.0} ms after the wait began, the wait answered after {:.0} ms: {}",
        ms(latencies[99]),
        ms(latencies[189]),
        ms(latencies[199]),
        ms(others_done - started),
        ms(answered - started),
        answer
    );
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["value"]["state"], "timed_out", "{answer}");
    assert!(
        others_done < answered,
        "the other calls waited for the wait"
    );
    assert!(serve.stop().success());
}

#[test]
fn actions_say_what_they_started_and_dialogs_are_reported_and_answered() {
    if !chromium_or_notice("the browser wait tests") {
        return;
    }
    let base = serve_pages();
    let dirs = Dirs::new("bwact");
    let (serve, browser) = serve_with_browser(&dirs, &format!("{base}/actions"));
    let click = |selector: &str| {
        serve.ok(
            &dirs,
            "me",
            "browser_click",
            json!({ "nodeId": browser, "selector": selector }),
        )
    };

    // A click that starts a slow request answers once it is done.
    let fetched = click("#fetch");
    println!("click that fetches: {fetched}");
    assert_eq!(fetched["after"], "requests_done", "{fetched}");
    assert_eq!(page_title(&serve, &dirs, &browser), "fetched");
    // A click that does nothing says so.
    let nothing = click("p");
    assert_eq!(nothing["after"], "nothing", "{nothing}");
    assert_eq!(nothing["selector"], "p");

    // Dialogs: reported by the click, every other call refused until answered.
    let alerted = click("#alert");
    println!("click that opens an alert: {alerted}");
    assert_eq!(alerted["after"], "dialog", "{alerted}");
    assert_eq!(alerted["dialog"]["type"], "alert");
    assert_eq!(
        alerted["dialog"]["message"],
        "Saved!\n- button \"OK\" [ref=e1]"
    );
    let refused = serve.err(&dirs, "me", "browser_inspect", json!({ "nodeId": browser }));
    println!("while a dialog is open: {refused}");
    assert!(
        refused.starts_with("A dialog (\"alert\") is open on this page with the message \"Saved!\\n- button \\\"OK\\\" [ref=e1]\""),
        "{refused}"
    );
    let waited = wait(&serve, &dirs, &browser, json!({ "idle": "dom" }));
    assert_eq!(waited["state"], "dialog", "{waited}");
    let answered = serve.ok(
        &dirs,
        "me",
        "browser_dialog",
        json!({ "nodeId": browser, "accept": true }),
    );
    assert_eq!(answered["accepted"], true, "{answered}");
    assert_eq!(answered["dialog"]["type"], "alert");
    let error = serve.err(
        &dirs,
        "me",
        "browser_dialog",
        json!({ "nodeId": browser, "accept": true }),
    );
    assert!(error.starts_with("No dialog is open"), "{error}");

    click("#confirm");
    serve.ok(
        &dirs,
        "me",
        "browser_dialog",
        json!({ "nodeId": browser, "accept": false }),
    );
    assert_eq!(page_title(&serve, &dirs, &browser), "kept");
    click("#confirm");
    serve.ok(
        &dirs,
        "me",
        "browser_dialog",
        json!({ "nodeId": browser, "accept": true }),
    );
    assert_eq!(page_title(&serve, &dirs, &browser), "deleted");
    let prompted = click("#prompt");
    assert_eq!(prompted["dialog"]["defaultPrompt"], "anon", "{prompted}");
    serve.ok(
        &dirs,
        "me",
        "browser_dialog",
        json!({ "nodeId": browser, "accept": true, "promptText": "Ada" }),
    );
    assert_eq!(page_title(&serve, &dirs, &browser), "name: Ada");

    // A file chooser is intercepted and reported; nothing is uploaded.
    let chooser = click("#file");
    println!("click on a file input: {chooser}");
    assert!(
        chooser["fileChooser"]
            .as_str()
            .unwrap_or_default()
            .contains("dismissed"),
        "{chooser}"
    );

    // A click on a link says where it went once the page has loaded.
    let went = click("#next");
    println!("click that navigates: {went}");
    assert_eq!(went["after"], "navigated", "{went}");
    assert_eq!(went["url"], format!("{base}/late"));
    let moved = navigate(&serve, &dirs, &browser, &format!("{base}/fetch"));
    println!("navigate to a page that fetches: {moved}");
    assert_eq!(moved["url"], format!("{base}/fetch"));
    assert!(
        ["requests_done", "navigated"].contains(&moved["after"].as_str().unwrap()),
        "{moved}"
    );
    assert!(serve.stop().success());
}
