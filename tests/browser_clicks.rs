//! A click or typing by ref acts on that element or is refused, against hostile pages: a
//! page that reacts to the pointer's move by putting another element under it (in its own
//! document, over a same-site frame, inside an open or closed shadow root, in a frame of
//! another site, in a new frame, or in a document it writes anew), or that renames the
//! element after the snapshot or as it is pressed. An overlay that passes is waited out;
//! a click by selector moved into a frame is held. Real headless Chromium, pages served by
//! this test on 127.0.0.1 (and `localhost`, another site), through the engine's protocol
//! entry point as the runtime calls it. Each page's first script records every trusted
//! press and click the page sees in its `#log`, so a test sees whether a decoy, or any
//! listener of the page, got the press. Skipped, with a notice, where no Chromium is
//! installed.
#![cfg(feature = "host")] // drives the default host's browser engine
#![deny(unsafe_code)]

mod page_server;

use std::fs;
use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use termsprawl_tools::host::browser::{BrowserEngine, EngineConfig, PageId};

/// The head of every test page: registered before anything else of the page, it notes
/// each trusted press and click the page gets, and `note` (a global, so that a frame can
/// call it) writes to `#log`.
const SPY: &str = r#"<script>
  function note(what) { document.getElementById('log').textContent += ' ' + what + ';'; }
  for (const type of ['pointerdown', 'mousedown', 'mouseup', 'click'])
    addEventListener(type, (e) => { if (e.isTrusted) note('seen ' + type); }, true);
</script>"#;

/// The pointer's first move puts a "Delete account" button over the whole page.
const MOVE_OVERLAY: &str = r#"<button onclick="note('Cancel clicked')">Cancel</button>
<script>
  addEventListener('mousemove', () => {
    const decoy = document.createElement('button');
    decoy.id = 'decoy';
    decoy.textContent = 'Delete account';
    decoy.style = 'position:fixed;inset:0;width:100vw;height:100vh';
    decoy.onclick = () => note('Delete account clicked');
    document.body.append(decoy);
  }, { once: true });
</script>"#;

/// A same-site frame whose first pointer move makes its parent cover it ("Buy now").
const FRAME_OVERLAY: &str = r#"<iframe title="Dialog" src="/close-frame" style="width:400px;height:200px"></iframe>
<script>
  function cover() {
    const decoy = document.createElement('button');
    decoy.textContent = 'Buy now';
    decoy.style = 'position:fixed;inset:0;width:100vw;height:100vh';
    decoy.onclick = () => note('Buy now clicked');
    document.body.append(decoy);
  }
</script>"#;

/// The frame of [`FRAME_OVERLAY`].
const CLOSE_FRAME: &str = r#"<!doctype html><title>Dialog</title>
<button onclick="parent.note('Close dialog clicked')">Close dialog</button>
<script>addEventListener('mousemove', () => parent.cover(), { once: true });</script>"#;

/// A shadow root (its mode is the query string) whose first pointer move adds a
/// "Cancel subscription" button over everything, inside the same root.
const SHADOW_OVERLAY: &str = r#"<div id="host"></div>
<script>
  const root = document.getElementById('host').attachShadow({ mode: location.search.slice(1) });
  const keep = document.createElement('button');
  keep.textContent = 'Keep subscription';
  keep.onclick = () => note('Keep subscription clicked');
  root.append(keep);
  root.addEventListener('mousemove', () => {
    const decoy = document.createElement('button');
    decoy.textContent = 'Cancel subscription';
    decoy.style = 'position:fixed;inset:0;width:100vw;height:100vh';
    decoy.onclick = () => note('Cancel subscription clicked');
    root.append(decoy);
  }, { once: true });
</script>"#;

/// A frame of another site (`{other_site}`) showing [`MOVE_OVERLAY`].
const SITE_FRAME: &str = r#"<iframe title="Other site" src="{other_site}/move-overlay" style="width:600px;height:300px"></iframe>"#;

/// The pointer's first move puts an empty frame of the page's own over the whole page,
/// with a "Delete account" button written into it.
const FRAME_DECOY: &str = r#"<button onclick="note('Cancel clicked')">Cancel</button>
<script>
  addEventListener('mousemove', () => {
    const frame = document.createElement('iframe');
    frame.style = 'position:fixed;inset:0;width:100vw;height:100vh;border:0';
    document.body.append(frame);
    const decoy = frame.contentDocument.createElement('button');
    decoy.textContent = 'Delete account';
    decoy.style = 'width:100%;height:100%';
    decoy.onclick = () => note('Delete account clicked');
    frame.contentDocument.body.append(decoy);
  }, { once: true });
</script>"#;

/// The pointer's first move replaces the whole document (`document.open`, which drops
/// every listener of the window) with a "Delete account" button over the page.
const REOPENED: &str = r#"<button onclick="note('Cancel clicked')">Cancel</button>
<script>
  addEventListener('mousemove', () => {
    document.open();
    document.write('<p id="log">log:</p><button id="decoy" onclick="note(\'Delete account clicked\')" ' +
      'style="position:fixed;inset:0;width:100vw;height:100vh">Delete account</button>');
    document.close();
  }, { once: true });
</script>"#;

/// The pointer's first move puts a "Delete account" button over the page for 30 ms.
const PASSING_OVERLAY: &str = r#"<button onclick="note('Cancel clicked')">Cancel</button>
<script>
  addEventListener('mousemove', () => {
    const decoy = document.createElement('button');
    decoy.textContent = 'Delete account';
    decoy.style = 'position:fixed;inset:0;width:100vw;height:100vh';
    decoy.onclick = () => note('Delete account clicked');
    document.body.append(decoy);
    setTimeout(() => decoy.remove(), 30);
  }, { once: true });
</script>"#;

/// Elements a test renames, or gives another role, after the snapshot.
const RENAMED: &str = r#"<button id="order" onclick="note('clicked ' + this.textContent)">Cancel order</button>
<span id="undo" role="button" tabindex="0" onclick="note('clicked undo')">Undo</span>
<input id="amount" aria-label="Amount" oninput="note('typed ' + this.value)">
<button id="help" onclick="note('clicked help')">Help</button>"#;

/// A button renamed by its own first pointer move.
const MOVE_RENAME: &str = r#"<button id="order" onclick="note('clicked ' + this.textContent)">Cancel order</button>
<script>
  document.getElementById('order').addEventListener('mousemove', (e) => {
    e.currentTarget.textContent = 'Confirm payment';
  }, { once: true });
</script>"#;

/// A still button whose clicks note the page's clock, for the measurement.
const STILL: &str = r#"<button onclick="note('at ' + Date.now())">Count</button>"#;

/// A test page: its title, the spy, `body` and a `#log` after it (so that what is noted
/// during a click moves nothing under the pointer).
fn page(title: &str, body: &str) -> String {
    format!("<!doctype html><html><head><title>{title}</title>{SPY}</head><body>{body}<p id=\"log\">log:</p></body></html>")
}

/// Serves the test pages; `{other_site}` in the pages becomes `other_site`. Returns the
/// base URL (`http://127.0.0.1:PORT`).
fn serve_pages(other_site: &str) -> String {
    let other_site = other_site.to_string();
    page_server::start(move |stream, head| answer(stream, head, &other_site))
}

fn answer(mut stream: TcpStream, head: &str, other_site: &str) {
    let target = head.split_whitespace().nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or_default();
    let body = match path {
        "/move-overlay" => page("Account", MOVE_OVERLAY),
        "/frame-overlay" => page("Shop", FRAME_OVERLAY),
        "/close-frame" => CLOSE_FRAME.to_string(),
        "/shadow-overlay" => page("Subscription", SHADOW_OVERLAY),
        "/site-frame" => page("Outer", &SITE_FRAME.replace("{other_site}", other_site)),
        "/frame-decoy" => page("Account", FRAME_DECOY),
        "/reopened" => page("Account", REOPENED),
        "/passing-overlay" => page("Account", PASSING_OVERLAY),
        "/renamed" => page("Order", RENAMED),
        "/move-rename" => page("Order", MOVE_RENAME),
        "/still" => page("Still", STILL),
        _ => {
            let missing =
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            stream.write_all(missing.as_bytes()).ok();
            return;
        }
    };
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).ok();
}

/// The engine's profile directory, removed when the test ends (passing or not).
struct ProfileDir(PathBuf);

impl Drop for ProfileDir {
    fn drop(&mut self) {
        drop(fs::remove_dir_all(&self.0));
    }
}

/// An engine, or `None` (with a notice) where no Chromium is installed.
fn engine(name: &str) -> Option<(ProfileDir, BrowserEngine)> {
    let dir = std::env::temp_dir().join(format!("tst-clicks-{name}-{}", std::process::id()));
    let engine = BrowserEngine::new(EngineConfig {
        executable: None,
        profile_dir: dir.clone(),
    });
    match engine.find_executable() {
        Ok(_) => Some((ProfileDir(dir), engine)),
        Err(error) => {
            eprintln!("NOTICE: skipping the browser click tests: {error}");
            None
        }
    }
}

fn secs(n: u64) -> Instant {
    Instant::now() + Duration::from_secs(n)
}

fn run(
    engine: &BrowserEngine,
    page: &PageId,
    operation: &str,
    args: Value,
) -> Result<Value, String> {
    let args: Map<String, Value> = args.as_object().unwrap().clone();
    engine
        .run_operation(page, operation, &args, secs(15))
        .map_err(|e| e.to_string())
}

/// A new snapshot's text (`find` narrows it when given).
fn snapshot(engine: &BrowserEngine, page: &PageId, find: Option<&str>) -> String {
    let mut args = json!({ "nodeId": "b1", "mode": "snapshot" });
    if let Some(find) = find {
        args["find"] = json!(find);
    }
    let answer = run(engine, page, "browser_inspect", args).unwrap();
    answer["text"].as_str().unwrap().to_string()
}

/// `browser_click` by `reference`.
fn click(engine: &BrowserEngine, page: &PageId, reference: &str) -> Result<Value, String> {
    run(
        engine,
        page,
        "browser_click",
        json!({ "nodeId": "b1", "ref": reference }),
    )
}

/// The ref on the snapshot line that contains `needle`.
fn ref_of(text: &str, needle: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"));
    let start = line.rfind("[ref=").unwrap() + 5;
    line[start..line.len() - 1].to_string()
}

/// The main frame's `#log`: what its spy saw and what its buttons noted.
fn main_log(engine: &BrowserEngine, page: &PageId) -> String {
    let read = "() => document.getElementById('log').textContent";
    let log = engine.evaluate(page, read, &json!({}), secs(15)).unwrap();
    log.as_str().unwrap().to_string()
}

/// Opens `path` of `base` and returns the page and its first snapshot.
fn open(engine: &BrowserEngine, base: &str, path: &str) -> (PageId, String) {
    let page = engine
        .open_page(&format!("{base}{path}"), secs(30))
        .unwrap();
    let text = snapshot(engine, &page, None);
    (page, text)
}

/// The refusal of a click that something else received.
fn assert_covered_when_clicked(answer: &Result<Value, String>, reference: &str) {
    let Err(error) = answer else {
        panic!("the click by {reference} was not refused: {answer:?}");
    };
    let start = format!("The element under ref \"{reference}\" was covered when clicked");
    assert!(error.starts_with(&start), "{error}");
    assert!(error.contains("nothing was clicked"), "{error}");
    assert!(error.contains("take a new snapshot"), "{error}");
}

#[test]
fn an_overlay_added_on_the_pointers_move_is_not_clicked() {
    let Some((_dir, engine)) = engine("move") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/move-overlay");
    let cancel = ref_of(&text, "button \"Cancel\"");
    let answer = click(&engine, &page, &cancel);
    let log = main_log(&engine, &page);
    println!("click on an element covered on the move: {answer:?}; the page's log: {log}");
    assert_covered_when_clicked(&answer, &cancel);
    // The decoy, and every listener of the page, never saw the press.
    assert_eq!(log, "log:");

    // Once the decoy is gone the same ref clicks, and the page's listeners see it.
    let remove = "() => { document.getElementById('decoy').remove(); return {}; }";
    engine
        .evaluate(&page, remove, &json!({}), secs(15))
        .unwrap();
    click(&engine, &page, &cancel).unwrap();
    let log = main_log(&engine, &page);
    assert!(
        log.contains("seen mousedown; seen mouseup; seen click; Cancel clicked;"),
        "{log}"
    );
}

#[test]
fn a_parent_covering_a_same_site_frame_on_the_move_is_not_clicked() {
    let Some((_dir, engine)) = engine("frame") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/frame-overlay");
    let close = ref_of(&text, "button \"Close dialog\"");
    let answer = click(&engine, &page, &close);
    let log = main_log(&engine, &page);
    println!("click in a same-site frame its parent covered on the move: {answer:?}; log: {log}");
    assert_covered_when_clicked(&answer, &close);
    assert_eq!(log, "log:");
}

#[test]
fn an_overlay_inside_an_open_or_closed_shadow_root_is_not_clicked() {
    let Some((_dir, engine)) = engine("shadow") else {
        return;
    };
    let base = serve_pages("");
    for mode in ["open", "closed"] {
        let (page, text) = open(&engine, &base, &format!("/shadow-overlay?{mode}"));
        let keep = ref_of(&text, "button \"Keep subscription\"");
        let answer = click(&engine, &page, &keep);
        let log = main_log(&engine, &page);
        println!("click in a {mode} shadow root covered on the move: {answer:?}; log: {log}");
        assert_covered_when_clicked(&answer, &keep);
        assert_eq!(log, "log:", "{mode}");
    }
}

#[test]
fn an_overlay_inside_a_frame_of_another_site_is_not_clicked() {
    let Some((_dir, engine)) = engine("site") else {
        return;
    };
    let other = serve_pages("");
    let base = serve_pages(&other.replace("127.0.0.1", "localhost"));
    let (page, text) = open(&engine, &base, "/site-frame");
    assert!(!text.contains("[contents not included]"), "{text}");
    let cancel = ref_of(&text, "button \"Cancel\"");
    let answer = click(&engine, &page, &cancel);
    let logs = snapshot(&engine, &page, Some("log:"));
    println!("click in an other-site frame covered on the move: {answer:?}; logs:\n{logs}");
    assert_covered_when_clicked(&answer, &cancel);
    // The frame's log line still says only "log:".
    let frame_log: Vec<&str> = logs.lines().filter(|l| l.contains("log:")).collect();
    assert_eq!(frame_log.len(), 2, "{logs}");
    assert!(
        frame_log.iter().all(|l| l.trim() == "- text \"log:\""),
        "{logs}"
    );
}

#[test]
fn a_frame_added_over_the_element_on_the_move_is_not_clicked() {
    let Some((_dir, engine)) = engine("decoy-frame") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/frame-decoy");
    let cancel = ref_of(&text, "button \"Cancel\"");
    let answer = click(&engine, &page, &cancel);
    let log = main_log(&engine, &page);
    println!("click on an element a new frame covered on the move: {answer:?}; log: {log}");
    assert_covered_when_clicked(&answer, &cancel);
    assert_eq!(log, "log:");
}

#[test]
fn a_document_replaced_on_the_move_gets_no_click() {
    let Some((_dir, engine)) = engine("reopened") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/reopened");
    let cancel = ref_of(&text, "button \"Cancel\"");
    let answer = click(&engine, &page, &cancel);
    let log = main_log(&engine, &page);
    println!("click on an element whose document was replaced on the move: {answer:?}; log: {log}");
    // Held by the guard, which listened again; then its element is found gone.
    let gone = format!("Ref \"{cancel}\" names an element that is no longer in the page");
    assert!(
        answer.as_ref().is_err_and(|e| e.starts_with(&gone)),
        "{answer:?}"
    );
    assert_eq!(log, "log:");
}

#[test]
fn a_passing_overlay_is_waited_out() {
    let Some((_dir, engine)) = engine("passing") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/passing-overlay");
    let cancel = ref_of(&text, "button \"Cancel\"");
    // The first press goes to the overlay and is held; a try after it went clicks (its
    // 30 ms are well within the 600 ms the tries wait in all).
    click(&engine, &page, &cancel).unwrap();
    let log = main_log(&engine, &page);
    assert!(log.ends_with("seen click; Cancel clicked;"), "{log}");
    assert!(!log.contains("Delete account"), "{log}");
}

#[test]
fn a_click_by_selector_moved_into_a_frame_is_held_and_refused() {
    let Some((_dir, engine)) = engine("selector") else {
        return;
    };
    let base = serve_pages("");
    let page = engine
        .open_page(&format!("{base}/frame-decoy"), secs(30))
        .unwrap();
    let args = json!({ "nodeId": "b1", "selector": "button" });
    let answer = run(&engine, &page, "browser_click", args);
    let log = main_log(&engine, &page);
    println!(
        "click by selector on an element a new frame covered on the move: {answer:?}; log: {log}"
    );
    let refused = "The click landed in a frame over the element, where it was held; nothing was \
                   clicked";
    assert!(
        answer.as_ref().is_err_and(|e| e.starts_with(refused)),
        "{answer:?}"
    );
    assert_eq!(log, "log:");
}

#[test]
fn an_element_renamed_or_given_another_role_since_the_snapshot_is_refused() {
    let Some((_dir, engine)) = engine("renamed") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/renamed");
    let order = ref_of(&text, "button \"Cancel order\"");
    let undo = ref_of(&text, "button \"Undo\"");
    let amount = ref_of(&text, "textbox \"Amount\"");
    let help = ref_of(&text, "button \"Help\"");
    let change = "() => {
        document.getElementById('order').textContent = 'Confirm payment';
        document.getElementById('undo').setAttribute('role', 'link');
        document.getElementById('amount').setAttribute('aria-label', 'Tip');
        document.getElementById('help').setAttribute('aria-hidden', 'true');
        return {};
    }";
    engine
        .evaluate(&page, change, &json!({}), secs(15))
        .unwrap();
    let answer = click(&engine, &page, &order);
    println!(
        "click on a renamed button: {answer:?}; log: {}",
        main_log(&engine, &page)
    );
    let expected = format!(
        "The element under ref \"{order}\" changed since the snapshot (was button \"Cancel order\", \
         now button \"Confirm payment\"): take a new snapshot with browser_inspect mode snapshot \
         and use the ref it gives"
    );
    assert!(
        answer.as_ref().is_err_and(|e| e.starts_with(&expected)),
        "{answer:?}"
    );
    let answer = click(&engine, &page, &undo);
    assert!(
        answer
            .as_ref()
            .is_err_and(|e| e.contains("(was button \"Undo\", now link \"Undo\")")),
        "{answer:?}"
    );
    let answer = click(&engine, &page, &help);
    assert!(
        answer.as_ref().is_err_and(
            |e| e.contains("(was button \"Help\", now hidden from the accessibility tree)")
        ),
        "{answer:?}"
    );
    let typed = run(
        &engine,
        &page,
        "browser_type",
        json!({ "nodeId": "b1", "ref": amount, "text": "100" }),
    );
    println!("typing into a renamed textbox: {typed:?}");
    assert!(
        typed
            .as_ref()
            .is_err_and(|e| e.contains("(was textbox \"Amount\", now textbox \"Tip\")")),
        "{typed:?}"
    );
    assert_eq!(main_log(&engine, &page), "log:");

    // A new snapshot shows the new name with a new ref, which clicks; the old ref still
    // names the button as it was, and stays refused.
    let again = snapshot(&engine, &page, None);
    let confirm = ref_of(&again, "button \"Confirm payment\"");
    assert_ne!(confirm, order);
    click(&engine, &page, &confirm).unwrap();
    let log = main_log(&engine, &page);
    assert!(
        log.ends_with("seen click; clicked Confirm payment;"),
        "{log}"
    );
    assert!(click(&engine, &page, &order).is_err_and(|e| e.contains("changed since")));
}

#[test]
fn a_button_renamed_by_the_pointers_move_is_not_clicked() {
    let Some((_dir, engine)) = engine("move-rename") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/move-rename");
    let order = ref_of(&text, "button \"Cancel order\"");
    let answer = click(&engine, &page, &order);
    let log = main_log(&engine, &page);
    println!("click on a button renamed on the move: {answer:?}; log: {log}");
    let expected = format!(
        "The element under ref \"{order}\" changed since the snapshot (was button \"Cancel order\", \
         now button \"Confirm payment\")"
    );
    assert!(
        answer.as_ref().is_err_and(|e| e.starts_with(&expected)),
        "{answer:?}"
    );
    assert_eq!(log, "log:");
}

/// Times 50 `browser_click`s by ref on a still button: the whole call (its answer waits
/// 500 ms for what the click started) and the time until the page's click handler ran
/// (the page's `Date.now()` against this process's clock). Prints medians; asserts only
/// that each click landed. Run: cargo test --release --test browser_clicks -- --ignored
/// --nocapture
#[test]
#[ignore]
fn measure_clicks_by_ref() {
    let Some((_dir, engine)) = engine("measure") else {
        return;
    };
    let base = serve_pages("");
    let (page, text) = open(&engine, &base, "/still");
    let count = ref_of(&text, "button \"Count\"");
    let (mut calls, mut landed) = (Vec::new(), Vec::new());
    for n in 1..=50 {
        let sent = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let started = Instant::now();
        click(&engine, &page, &count).unwrap();
        calls.push(started.elapsed());
        let log = main_log(&engine, &page);
        let stamps: Vec<&str> = log.split("at ").skip(1).collect();
        assert_eq!(stamps.len(), n, "{log}");
        let at: u64 = stamps[n - 1].split(';').next().unwrap().parse().unwrap();
        landed.push(Duration::from_millis(at).saturating_sub(sent));
    }
    calls.sort();
    landed.sort();
    println!(
        "50 clicks by ref: call median {:?} (p90 {:?}); click handler ran after median {:?} \
         (p90 {:?})",
        calls[25], calls[45], landed[25], landed[45]
    );
}
