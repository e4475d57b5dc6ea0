//! The canvas view of the real `serve`, looked at with a real headless Chromium: it shows
//! the agent and a terminal opened through the API, follows terminal output, moves and
//! browser navigations within seconds, keeps hostile text inert; and over raw HTTP it
//! refuses every request without its key, from a foreign Host or a cross-site page, an
//! agent token, a view key on `/call`, and a ninth viewer. Chromium tests skip with a
//! notice where it is not installed.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::view::*;
use serve_harness::*;
use termsprawl_tools::host::browser::{BrowserEngine, PageId};

/// Two pages: `/one` (title "View test one", a link to `/two`) and `/two`.
fn page_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(n @ 1..) => request.extend_from_slice(&buffer[..n]),
                    _ => break,
                }
            }
            let page = if request.starts_with(b"GET /two") {
                "<!doctype html><title>View test two</title><h1>Two</h1>"
            } else {
                "<!doctype html><title>View test one</title><h1>One</h1><a id=\"next\" href=\"/two\">next</a>"
            };
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    port
}

/// What the view page shows, read from its DOM (an isolated world: the page's own
/// scripts cannot change what this sees).
const READ_VIEW: &str = r##"() => {
  const nodes = {};
  for (const el of document.querySelectorAll(".node")) {
    const part = (cls) => { const p = el.querySelector(cls); return p ? p.textContent : null; };
    nodes[el.dataset.nodeId] = {
      left: el.style.left, top: el.style.top,
      title: part(".title"), meta: part(".meta"), screen: part(".screen"),
      command: (el.querySelector(".command:not([hidden])") || {}).textContent || null,
      commandKind: (el.querySelector(".command") || {}).className || null,
      page: part(".page"), url: part(".url"), text: part(".text"), task: part(".task"),
      shot: (el.querySelector(".shot") || {}).src || "",
      isolation: (el.querySelector(".isolation:not([hidden])") || {}).textContent || null,
      isolationKind: (el.querySelector(".isolation") || {}).className || null,
      isolationTip: (el.querySelector(".isolation") || {}).title || null,
      selected: el.classList.contains("selected"),
      elements: el.querySelectorAll("*").length,
      foreign: el.querySelectorAll("img:not(.shot), script, b, iframe").length,
    };
  }
  return {
    status: document.getElementById("status").textContent,
    agents: document.getElementById("agents").textContent,
    activity: document.getElementById("activity").textContent,
    links: Array.from(document.querySelectorAll("#links line")).map((l) => l.dataset.link),
    messageLinks: Array.from(document.querySelectorAll("#links line.messages")).map((l) => l.dataset.link),
    pwned: document.body.dataset.pwned || null,
    scripts: document.scripts.length,
    nodes,
  };
}"##;

fn read_view(engine: &BrowserEngine, page: &PageId) -> Option<Value> {
    engine
        .evaluate(
            page,
            READ_VIEW,
            &json!({}),
            Instant::now() + Duration::from_secs(5),
        )
        .ok()
}

/// Polls the view until `check` finds what it waits for in it.
fn see<T>(
    engine: &BrowserEngine,
    page: &PageId,
    what: &str,
    within: Duration,
    check: impl Fn(&Value) -> Option<T>,
) -> T {
    let started = Instant::now();
    let found = poll(what, within, || {
        read_view(engine, page).and_then(|v| check(&v))
    });
    eprintln!(
        "figure: the view showed {what} after {:?}",
        started.elapsed()
    );
    found
}

#[test]
fn the_view_shows_the_canvas_live_and_keeps_hostile_text_inert() {
    let Some((engine, profile)) = chromium("live", &[]) else {
        return;
    };
    let dirs = Dirs::new("view-live");
    let serve = Serve::start(&dirs, &["--agent", "me", "--browser", "--terminals", "pty"]);
    let url = view_url(&serve);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({"title": "build"}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let page = engine
        .open_page(&url, Instant::now() + Duration::from_secs(30))
        .unwrap();
    see(
        &engine,
        &page,
        "the agent and the terminal",
        Duration::from_secs(10),
        |v| {
            let ok = v["status"] == "live"
                && v["nodes"]["me"]["title"] == "me"
                && v["nodes"][&term]["title"] == "build"
                && v["agents"].as_str()?.contains("cli-fallback");
            ok.then_some(())
        },
    );

    // Terminal output: within 2 s of the call's answer.
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo view-$((6*7))-marker"}),
    );
    see(
        &engine,
        &page,
        "terminal output",
        Duration::from_secs(2),
        |v| {
            v["nodes"][&term]["screen"]
                .as_str()?
                .contains("view-42-marker")
                .then_some(())
        },
    );

    // A move moves the node's element.
    serve.ok(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": term, "x": 1234, "y": 567}),
    );
    see(
        &engine,
        &page,
        "the moved node",
        Duration::from_secs(2),
        |v| {
            let node = &v["nodes"][&term];
            (node["left"] == "1234px" && node["top"] == "567px").then_some(())
        },
    );
    serve.ok(&dirs, "me", "canvas_select", json!({"nodeIds": [term]}));
    see(
        &engine,
        &page,
        "the selection",
        Duration::from_secs(2),
        |v| (v["nodes"][&term]["selected"] == true).then_some(()),
    );
    // The side panel has the activity trail's latest calls.
    see(
        &engine,
        &page,
        "the latest calls",
        Duration::from_secs(3),
        |v| {
            let activity = v["activity"].as_str()?;
            let both = activity.contains("canvas_select") && activity.contains("terminal_submit");
            both.then_some(())
        },
    );

    // Hostile text: HTML in output, a title and a note; escape sequences.
    let payload = r#"printf '%s\n' '<img src=x onerror="document.body.dataset.pwned=1">' '</script><script>document.body.dataset.pwned=2</script>'; printf '\033]0;<b>t</b>\007\033[31mred-done\033[0m\n'"#;
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": payload}),
    );
    let hostile_title = "</script><img src=x onerror=\"document.body.dataset.pwned=3\">";
    let titled = serve.ok(
        &dirs,
        "me",
        "terminal_open",
        json!({"title": hostile_title}),
    )["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let sticky = serve.ok(
        &dirs,
        "me",
        "sticky_open",
        json!({"text": "<b>bold?</b><img src=x onerror=\"document.body.dataset.pwned=4\">"}),
    )["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let shown = see(
        &engine,
        &page,
        "the hostile text",
        Duration::from_secs(5),
        |v| {
            let screen = v["nodes"][&term]["screen"].as_str()?;
            let done = screen.contains("red-done")
                && v["nodes"][&titled]["title"] == hostile_title
                && v["nodes"][&sticky]["text"]
                    .as_str()?
                    .starts_with("<b>bold?</b>");
            done.then(|| v.clone())
        },
    );
    let screen = shown["nodes"][&term]["screen"].as_str().unwrap();
    assert!(
        screen.contains(r#"<img src=x onerror="document.body.dataset.pwned=1">"#),
        "{screen}"
    );
    assert!(!screen.contains('\u{1b}'), "no escape reaches the page");
    for id in [&term, &titled, &sticky] {
        assert_eq!(
            shown["nodes"][id]["foreign"], 0,
            "no element was made from text"
        );
    }
    assert_eq!(shown["pwned"], Value::Null, "no injected handler ran");
    assert_eq!(shown["scripts"], 1, "only the view's own script");

    // A shell's last command: its exit status in the screen's corner (the command line
    // as text), then a command waiting for typing.
    let failed = serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "(exit 5) # <b>x</b>", "wait": "exit"}),
    );
    assert_eq!(failed["exitCode"], 5, "{failed}");
    let shown = see(
        &engine,
        &page,
        "the failed command's status",
        Duration::from_secs(5),
        |v| {
            let node = &v["nodes"][&term];
            let text = node["command"].as_str()?;
            text.starts_with("\u{2717} exit 5 \u{b7} (exit 5) # <b>x</b> \u{b7} ")
                .then(|| node.clone())
        },
    );
    assert_eq!(shown["commandKind"], "command state-failed", "{shown}");
    assert_eq!(
        shown["foreign"], 0,
        "no element was made from the command line"
    );
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "read answer"}),
    );
    see(
        &engine,
        &page,
        "the command waiting for input",
        Duration::from_secs(10),
        |v| {
            let text = v["nodes"][&term]["command"].as_str()?;
            text.starts_with("waiting for input \u{b7} read answer")
                .then_some(())
        },
    );
    serve.ok(&dirs, "me", "terminal_interrupt", json!({"nodeId": term}));

    // A shell that ends: the view says how, and keeps its last screen.
    let ending = serve.ok(&dirs, "me", "terminal_open", json!({"title": "ending"}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": ending, "command": "echo last-words; exit 3"}),
    );
    see(
        &engine,
        &page,
        "the ended terminal",
        Duration::from_secs(5),
        |v| {
            let node = &v["nodes"][&ending];
            let ok = node["meta"]
                .as_str()?
                .contains("ended: exited with status 3")
                && node["screen"].as_str()?.contains("last-words");
            ok.then_some(())
        },
    );

    // A browser node: its title and a screenshot; then navigations, by the agent and by
    // the page itself, show in the view and in canvas_list.
    let port = page_server();
    let browser = serve.ok(
        &dirs,
        "me",
        "browser_open",
        json!({"url": format!("http://127.0.0.1:{port}/one")}),
    )["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    serve.ok(
        &dirs,
        "me",
        "canvas_move",
        json!({"nodeId": browser, "x": 0, "y": 900}),
    );
    see(
        &engine,
        &page,
        "the page title and screenshot",
        Duration::from_secs(10),
        |v| {
            let node = &v["nodes"][&browser];
            let ok = node["page"] == "View test one"
                && node["shot"].as_str()?.starts_with("data:image/png;base64,");
            ok.then_some(())
        },
    );
    serve.ok(
        &dirs,
        "me",
        "browser_navigate",
        json!({"nodeId": browser, "url": format!("http://127.0.0.1:{port}/two")}),
    );
    see(
        &engine,
        &page,
        "the navigated URL",
        Duration::from_secs(2),
        |v| {
            let node = &v["nodes"][&browser];
            let ok = node["url"].as_str()?.ends_with("/two") && node["page"] == "View test two";
            ok.then_some(())
        },
    );
    let tab_of = |list: &Value| node(list, &browser).unwrap()["data"]["tabs"][0].clone();
    let tab = tab_of(&serve.ok(&dirs, "me", "canvas_list", json!({})));
    assert_eq!(tab["url"], format!("http://127.0.0.1:{port}/two"), "{tab}");
    assert_eq!(tab["title"], "View test two", "{tab}");
    // A navigation the page makes itself (a followed link).
    serve.ok(
        &dirs,
        "me",
        "browser_navigate",
        json!({"nodeId": browser, "url": format!("http://127.0.0.1:{port}/one")}),
    );
    serve.ok(
        &dirs,
        "me",
        "browser_click",
        json!({"nodeId": browser, "selector": "#next"}),
    );
    poll(
        "canvas_list to follow the link",
        Duration::from_secs(5),
        || {
            let tab = tab_of(&serve.ok(&dirs, "me", "canvas_list", json!({})));
            tab["url"].as_str()?.ends_with("/two").then_some(())
        },
    );
    let saved: Value =
        serde_json::from_slice(&std::fs::read(dirs.project_file()).unwrap()).unwrap();
    assert!(
        saved.to_string().contains(&format!("{port}/two")),
        "kept in project.json"
    );

    assert!(serve.extra_stdout().is_empty());
    engine.shutdown();
    assert!(serve.stop().success());
    let _ = std::fs::remove_dir_all(profile);
}

#[test]
fn the_view_shows_an_agent_message_on_both_nodes_and_its_state() {
    let Some((engine, _profile)) = chromium("messages", &[]) else {
        return;
    };
    let dirs = Dirs::new("view-task");
    let serve = Serve::start(
        &dirs,
        &["--agent", "me", "--agent", "other", "--terminals", "pty"],
    );
    let link = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(["link", "other", "me", "--messages", "--project"])
        .arg(&dirs.project)
        .output()
        .unwrap();
    assert!(link.status.success());
    let page = engine
        .open_page(&view_url(&serve), Instant::now() + Duration::from_secs(30))
        .unwrap();
    let sent = serve.ok(
        &dirs,
        "other",
        "agent_send",
        json!({"nodeId": "me", "text": "review the diff please"}),
    );
    let both = |state: &'static str| {
        move |v: &Value| {
            let to = v["nodes"]["me"]["task"].as_str()?;
            let from = v["nodes"]["other"]["task"].as_str()?;
            let ok = to == format!("message from other · {state} · review the diff please")
                && from == format!("message to me · {state} · review the diff please")
                && v["messageLinks"] == json!(["other->me"]);
            ok.then_some(())
        }
    };
    see(
        &engine,
        &page,
        "the pending message on both nodes",
        Duration::from_secs(5),
        both("submitted"),
    );
    serve.ok(
        &dirs,
        "me",
        "agent_reply",
        json!({"taskId": sent["taskId"], "text": "looks good"}),
    );
    see(
        &engine,
        &page,
        "the answered message on both nodes",
        Duration::from_secs(5),
        both("completed"),
    );
    assert!(serve.stop().success());
}

#[test]
fn the_view_refuses_what_is_not_its_own_page_with_its_key() {
    let dirs = Dirs::new("view-refuse");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    serve.ok(
        &dirs,
        "me",
        "sticky_open",
        json!({"text": "secret-canvas-text"}),
    );
    let (port, key) = view_parts(&view_url(&serve));
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let auth = format!("Authorization: Bearer {key}\r\n");
    let token = token(&dirs, "me");
    let viewer = |n: usize| format!("/api/state?viewer={n:032x}");

    // The page itself needs no key, and carries the security headers.
    let (status, head, body) = request(port, "GET", "/", &host);
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("/view.js"));
    let lower = head.to_ascii_lowercase();
    for expected in [
        "content-security-policy: default-src 'none'; script-src 'self'; style-src 'self'",
        "frame-ancestors 'none'",
        "x-frame-options: deny",
        "x-content-type-options: nosniff",
        "referrer-policy: no-referrer",
        "cache-control: no-store",
    ] {
        assert!(lower.contains(expected), "{expected} in {head}");
    }
    // With its key, the data.
    let (status, head, body) = request(port, "GET", &viewer(1), &format!("{host}{auth}"));
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("secret-canvas-text"));
    assert!(head
        .to_ascii_lowercase()
        .contains("cache-control: no-store"));

    let refusals = [
        ("no key", host.clone(), 401),
        (
            "a wrong key",
            format!("{host}Authorization: Bearer {}\r\n", "ab".repeat(32)),
            401,
        ),
        (
            "an agent token",
            format!("{host}Authorization: Bearer {token}\r\n"),
            401,
        ),
        (
            "a foreign Host",
            format!("Host: attacker.example:{port}\r\n{auth}"),
            403,
        ),
        ("no Host", auth.clone(), 403),
        (
            "a cross-site Origin",
            format!("{host}{auth}Origin: http://attacker.example\r\n"),
            403,
        ),
        (
            "another port's Origin",
            format!("{host}{auth}Origin: http://127.0.0.1:1\r\n"),
            403,
        ),
        (
            "Sec-Fetch-Site: cross-site",
            format!("{host}{auth}Sec-Fetch-Site: cross-site\r\n"),
            403,
        ),
        (
            "Sec-Fetch-Site: same-site",
            format!("{host}{auth}Sec-Fetch-Site: same-site\r\n"),
            403,
        ),
    ];
    for (what, head_lines, expected) in refusals {
        let (status, head, body) = request(port, "GET", &viewer(2), &head_lines);
        assert_eq!(status, expected, "{what}: {head}");
        assert!(
            !body.contains("secret-canvas-text"),
            "{what} got canvas data"
        );
        assert!(!body.contains(&key) && !body.contains(&token), "{what}");
        assert!(
            !head.to_ascii_lowercase().contains("access-control"),
            "{what}: {head}"
        );
    }
    // Nothing but GET, and POST on /api/act only; a same-origin page request is fine.
    let (status, ..) = request(port, "POST", &viewer(2), &format!("{host}{auth}"));
    assert_eq!(status, 405);
    let same_origin =
        format!("{host}{auth}Origin: http://127.0.0.1:{port}\r\nSec-Fetch-Site: same-origin\r\n");
    assert_eq!(request(port, "GET", &viewer(2), &same_origin).0, 200);

    // The view key is no session on /call.
    let (status, body) = serve.call_token(&key, "canvas_list", json!({}));
    assert_eq!(status, 401, "{body}");

    // Eight viewers at once; the ninth is refused, a known one still served.
    for n in 3..=8 {
        assert_eq!(
            request(port, "GET", &viewer(n), &format!("{host}{auth}")).0,
            200
        );
    }
    let (status, _, body) = request(port, "GET", &viewer(9), &format!("{host}{auth}"));
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("At most 8 viewers"), "{body}");
    assert_eq!(
        request(port, "GET", &viewer(1), &format!("{host}{auth}")).0,
        200
    );
    assert!(serve.stop().success());
}

#[test]
fn no_view_means_no_view_url() {
    let dirs = Dirs::new("view-none");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty", "--no-view"]);
    assert!(serve.ready.get("viewUrl").is_none(), "{}", serve.ready);
    assert!(!serve.stderr().contains("canvas view"));
    assert!(serve.stop().success());
}

/// True once the server has ended `stream` (end-of-file or reset), waiting at most `wait`.
fn ended_by_server(mut stream: &TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    match stream.read(&mut [0u8; 1]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// The view keeps listening however long nobody connects (an earlier read timeout on its
/// listener also timed out `accept`, which ended tiny_http's accept thread after 15 s
/// without a connection), and bounds its connections: past 64 the quietest are ended,
/// and one that never finishes its head, or is idle, is ended after 15 s quiet.
#[test]
fn the_view_outlives_idle_time_and_ends_quiet_connections() {
    let dirs = Dirs::new("view-idle");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let (port, key) = view_parts(&view_url(&serve));
    let auth = format!("Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n");
    assert_eq!(
        request(port, "GET", "/", &format!("Host: 127.0.0.1:{port}\r\n")).0,
        200
    );

    // 70 connections that send nothing, and one whose head never ends: past the cap of
    // 64, the quietest are ended within a couple of the reaper's looks.
    let idle: Vec<TcpStream> = (0..70)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
        .unwrap();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let ended = idle
        .iter()
        .filter(|s| ended_by_server(s, Duration::from_millis(50)))
        .count();
    // 71 open (the slow one too), so 7 are ended: all idle ones, or 6 and the slow one.
    assert!(
        (6..=7).contains(&ended),
        "{ended} idle connections ended past the cap of 64"
    );

    // Nobody connects for longer than the quiet cut: every quiet connection is ended,
    // and the view still answers a new one.
    std::thread::sleep(Duration::from_secs(17).saturating_sub(started.elapsed()));
    assert!(
        ended_by_server(&slow, Duration::from_secs(3)),
        "the slow head is not cut"
    );
    let still_open = idle
        .iter()
        .filter(|s| !ended_by_server(s, Duration::from_millis(200)))
        .count();
    assert_eq!(still_open, 0, "idle connections kept past the quiet cut");
    let (status, _, body) = request(
        port,
        "GET",
        "/api/state?viewer=00112233445566778899aabbccddeeff",
        &auth,
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"nodes\""), "{body}");
    assert_eq!(
        request(
            port,
            "GET",
            "/view.js",
            &format!("Host: 127.0.0.1:{port}\r\n")
        )
        .0,
        200
    );
    assert!(
        !serve.stderr().contains("accepting connections failed"),
        "{}",
        serve.stderr()
    );
    assert!(serve.stop().success());
}

/// The view reuses its last look at tmux while no pane filter in view has written
/// anything: output printed after the looks have settled still shows at once, not at the
/// next look that is never reused (5 s).
#[test]
fn output_after_a_quiet_spell_shows_at_once() {
    if !tmux_installed() {
        eprintln!("tmux is not installed: output_after_a_quiet_spell_shows_at_once skipped");
        return;
    }
    let dirs = Dirs::new("view-quiet");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "tmux"]);
    let (port, key) = view_parts(&view_url(&serve));
    let auth = format!("Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n");
    let terminal = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let state = || {
        let path =
            format!("/api/state?viewer=00112233445566778899aabbccddeeff&visible=me,{terminal}");
        let (status, _, body) = request(port, "GET", &path, &auth);
        assert_eq!(status, 200, "{body}");
        body
    };
    for round in 0..3 {
        // A quiet spell: several looks with nothing printed.
        let quiet_until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < quiet_until {
            state();
        }
        let marker = format!("quiet-spell-marker-{round}");
        let command = format!("echo {marker}");
        serve.ok(
            &dirs,
            "me",
            "terminal_submit",
            json!({ "nodeId": terminal, "command": command }),
        );
        let submitted = Instant::now();
        // The echoed command line holds the marker too: wait for it on a line of its own.
        let shown = std::iter::repeat_with(state)
            .take_while(|_| submitted.elapsed() < Duration::from_secs(3))
            .any(|body| body.contains(&format!("\\n{marker}\\n")));
        // Well before the 5 s after which a look is never reused.
        assert!(shown, "round {round}: {marker} not in the view within 3 s");
    }
    assert!(serve.stop().success());
}

/// Each live terminal carries a badge saying how it is confined, first on its meta line,
/// with the mechanism and why in its tooltip: an agent's terminal (confined where a
/// mechanism works here) and the person's own (not confined).
#[test]
fn the_view_badges_each_terminal_with_how_it_is_confined() {
    let Some((engine, _profile)) = chromium("isolation", &[]) else {
        return;
    };
    let dirs = Dirs::new("view-isolation");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let agents = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let (port, key) = view_parts(&view_url(&serve));
    let (status, answer) = act(port, &key, "terminal_open", json!({"title": "mine"}));
    assert_eq!(status, 200, "{answer}");
    let persons = answer["value"]["nodeId"].as_str().unwrap().to_string();
    let listed = serve.ok(&dirs, "me", "canvas_list", json!({}));
    let agents_isolation = node(&listed, &agents).unwrap()["session"]["isolation"].clone();
    let confined = agents_isolation["boundary"] == json!(true);
    let page = open_live(&engine, &view_url(&serve), Duration::from_secs(30));
    let badges = see(
        &engine,
        &page,
        "both terminals' badges",
        Duration::from_secs(10),
        |v| {
            let of = |id: &str| v["nodes"][id]["isolation"].as_str().map(str::to_string);
            Some((of(&agents)?, of(&persons)?, v["nodes"][&agents].clone()))
        },
    );
    let (agent_badge, person_badge, agent_node) = badges;
    assert_eq!(person_badge, "not confined");
    match confined {
        true => assert_eq!(agent_badge, "confined"),
        false => assert!(agent_badge != "confined", "{agent_badge}"),
    }
    let kind = agent_node["isolationKind"].as_str().unwrap();
    assert!(kind.starts_with("isolation state-"), "{kind}");
    let tip = agent_node["isolationTip"].as_str().unwrap();
    let mode = agents_isolation["mode"].as_str().unwrap();
    assert!(tip.starts_with(&format!("{mode}: ")), "{tip}");
    // The badge is not in the meta text, so a long status cannot push it out.
    let meta = agent_node["meta"].as_str().unwrap();
    assert!(!meta.contains("confined"), "{meta}");
    assert!(serve.stop().success());
}
