//! Steering a page through the real `serve` and headless Chromium, on pages this test
//! serves: `browser_press` (Enter submits a form, Escape closes a dialog element,
//! Control+A then typing replaces a field's text, keys to the element a ref names, unknown
//! names refused with the known ones), `browser_select` (by an option's text; a value no
//! option has, or an element that is no select, refused), `browser_hover` (a menu item
//! shown on hover becomes clickable), `browser_history` (back, forward, reload; nothing
//! to go back to is refused) and `browser_resize` (the page sees a phone's width). Each is
//! refused for an agent that does not own the browser and with browser control off.
//! Skipped, with a notice, where no Chromium is installed.
#![cfg(feature = "host")] // drives `serve` and its browser engine
#![deny(unsafe_code)]

mod page_server;

mod serve_harness;
mod sys;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

/// A form whose submit sets the title, a field, and a `<dialog>` open from the start.
const FORM_PAGE: &str = r#"<!doctype html><title>Form</title>
<form onsubmit="event.preventDefault(); document.title = 'sent: ' + document.getElementById('name').value;">
  <label>Name <input id="name" value="old text"></label>
  <button>Send</button>
</form>
<dialog id="d" open><p>Hello</p><form method="dialog"><button>Close</button></form></dialog>
<script>
  document.getElementById('d').addEventListener('close', () => { document.body.dataset.closed = 'yes'; });
  addEventListener('keydown', (e) => { if (e.key === 'Escape') document.getElementById('d').close(); });
</script>"#;

/// A menu item shown only while the mouse is over its menu, and a select.
const MENU_PAGE: &str = r#"<!doctype html><title>Menu</title>
<style>.wrap .item { display: none; } .wrap:hover .item { display: inline-block; }</style>
<div class="wrap"><button id="menu">Settings</button>
<button class="item" onclick="document.title = 'deleted'">Delete all</button></div>
<select id="color"><option value="red">Red</option><option value="blue">Blue</option></select>
<script>
  document.getElementById('color').addEventListener('change', (e) => { document.title = 'color ' + e.target.value; });
</script>"#;

fn serve_pages() -> String {
    page_server::start(answer)
}

fn answer(mut stream: TcpStream, head: &str) {
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let body = match path {
        "/form" => FORM_PAGE.to_string(),
        "/menu" => MENU_PAGE.to_string(),
        other => format!("<!doctype html><title>Page {other}</title><p>{other}</p>"),
    };
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).ok();
}

/// The page's visible text.
fn text(serve: &Serve, dirs: &Dirs, browser: &str) -> String {
    let page = serve.ok(dirs, "me", "browser_inspect", json!({ "nodeId": browser }));
    page["text"].as_str().unwrap().to_string()
}

/// The ref of the first snapshot line that starts with `role`.
fn ref_of(serve: &Serve, dirs: &Dirs, browser: &str, role: &str) -> String {
    let args = json!({ "nodeId": browser, "mode": "snapshot" });
    let snap = serve.ok(dirs, "me", "browser_inspect", args);
    let line = snap["text"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("- {role}")) && l.contains("[ref="))
        .unwrap_or_else(|| panic!("no {role} in {snap}"))
        .to_string();
    line.rsplit("[ref=")
        .next()
        .unwrap()
        .trim_end_matches(']')
        .to_string()
}

fn press(serve: &Serve, dirs: &Dirs, browser: &str, args: Value) -> Value {
    let mut call = json!({ "nodeId": browser });
    for (key, value) in args.as_object().unwrap() {
        call[key] = value.clone();
    }
    serve.ok(dirs, "me", "browser_press", call)
}

#[test]
fn keys_history_and_the_viewport_steer_the_page() {
    if !chromium_or_notice("the browser steering tests") {
        return;
    }
    let base = serve_pages();
    let dirs = Dirs::new("bsteer");
    let (serve, browser) = serve_with_browser(&dirs, &format!("{base}/form"));

    // Escape closes the dialog element (the page's own key handler).
    press(&serve, &dirs, &browser, json!({ "key": "Escape" }));
    poll("the dialog closed", Duration::from_secs(5), || {
        (!text(&serve, &dirs, &browser).contains("Hello")).then_some(())
    });

    // Control+A in the field, then typing replaces its text; Enter submits.
    let field = ref_of(&serve, &dirs, &browser, "textbox");
    press(
        &serve,
        &dirs,
        &browser,
        json!({ "key": "Control+A", "ref": field }),
    );
    for key in ["A", "d", "a"] {
        press(&serve, &dirs, &browser, json!({ "key": key }));
    }
    let sent = press(&serve, &dirs, &browser, json!({ "key": "Enter" }));
    assert_eq!(sent["key"], "Enter", "{sent}");
    let submitted = poll("the form submitted", Duration::from_secs(5), || {
        let now = page_title(&serve, &dirs, &browser);
        now.starts_with("sent:").then_some(now)
    });
    assert_eq!(submitted, "sent: Ada");

    // Unknown names are refused with the known ones.
    let refused = serve.err(
        &dirs,
        "me",
        "browser_press",
        json!({ "nodeId": browser, "key": "Hyper+Q" }),
    );
    assert!(
        refused.contains("Unknown key") && refused.contains("Escape"),
        "{refused}"
    );

    // History: back to the form, forward again, reload; nothing further back.
    serve.ok(
        &dirs,
        "me",
        "browser_navigate",
        json!({ "nodeId": browser, "url": format!("{base}/second") }),
    );
    let back = serve.ok(
        &dirs,
        "me",
        "browser_history",
        json!({ "nodeId": browser, "action": "back" }),
    );
    assert!(
        back["url"].as_str().unwrap_or_default().ends_with("/form"),
        "{back}"
    );
    let forward = serve.ok(
        &dirs,
        "me",
        "browser_history",
        json!({ "nodeId": browser, "action": "forward" }),
    );
    assert!(
        forward["url"]
            .as_str()
            .unwrap_or_default()
            .ends_with("/second"),
        "{forward}"
    );
    serve.ok(
        &dirs,
        "me",
        "browser_history",
        json!({ "nodeId": browser, "action": "reload" }),
    );
    assert_eq!(page_title(&serve, &dirs, &browser), "Page /second");
    // Back to the form, then to the tab's first page (about:blank), then nothing.
    for _ in 0..2 {
        serve.ok(
            &dirs,
            "me",
            "browser_history",
            json!({ "nodeId": browser, "action": "back" }),
        );
    }
    let refused = serve.err(
        &dirs,
        "me",
        "browser_history",
        json!({ "nodeId": browser, "action": "back" }),
    );
    assert!(refused.contains("no page to go back"), "{refused}");

    // A select by ref, by its option's text; a menu item shown on hover, then clicked.
    serve.ok(
        &dirs,
        "me",
        "browser_navigate",
        json!({ "nodeId": browser, "url": format!("{base}/menu") }),
    );
    let select = ref_of(&serve, &dirs, &browser, "combobox");
    let chosen = serve.ok(
        &dirs,
        "me",
        "browser_select",
        json!({ "nodeId": browser, "ref": select, "values": ["Blue"] }),
    );
    assert_eq!(chosen["selected"], json!(["blue"]), "{chosen}");
    assert_eq!(page_title(&serve, &dirs, &browser), "color blue");
    let refused = serve.err(
        &dirs,
        "me",
        "browser_select",
        json!({ "nodeId": browser, "ref": select, "values": ["green"] }),
    );
    assert!(
        refused.contains("no option") && refused.contains("\"red\""),
        "{refused}"
    );
    let menu = ref_of(&serve, &dirs, &browser, "button \"Settings\"");
    let not_select = serve.err(
        &dirs,
        "me",
        "browser_select",
        json!({ "nodeId": browser, "ref": menu, "values": ["x"] }),
    );
    assert!(not_select.contains("not a select"), "{not_select}");
    serve.ok(
        &dirs,
        "me",
        "browser_hover",
        json!({ "nodeId": browser, "ref": menu }),
    );
    let item = ref_of(&serve, &dirs, &browser, "button \"Delete all\"");
    serve.ok(
        &dirs,
        "me",
        "browser_click",
        json!({ "nodeId": browser, "ref": item }),
    );
    assert_eq!(page_title(&serve, &dirs, &browser), "deleted");

    // A phone's viewport.
    let sized = serve.ok(
        &dirs,
        "me",
        "browser_resize",
        json!({ "nodeId": browser, "width": 390, "height": 844 }),
    );
    assert_eq!(
        (&sized["innerWidth"], &sized["innerHeight"]),
        (&json!(390), &json!(844)),
        "{sized}"
    );

    // Only the owner, and only with browser control on.
    for (operation, args) in [
        (
            "browser_press",
            json!({ "nodeId": browser, "key": "Enter" }),
        ),
        (
            "browser_history",
            json!({ "nodeId": browser, "action": "reload" }),
        ),
        (
            "browser_resize",
            json!({ "nodeId": browser, "width": 800, "height": 600 }),
        ),
    ] {
        let refused = serve.err(&dirs, "other", operation, args);
        assert!(
            refused.contains("Claim this browser"),
            "{operation}: {refused}"
        );
    }
    let off = std::process::Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["browser-control", "off", "--data"])
        .arg(&dirs.data)
        .status()
        .unwrap();
    assert!(off.success());
    let refused = serve.err(
        &dirs,
        "me",
        "browser_press",
        json!({ "nodeId": browser, "key": "Enter" }),
    );
    assert!(refused.contains("browser control"), "{refused}");
    assert!(serve.stop().success());
}
