//! Browser nodes through the real `serve` and headless Chromium: the `--browser` gate, a
//! missing browser refused before any node is made, open/inspect/type/click/navigate/
//! screenshot on a page served from this test, ownership between two agents, the tab
//! coming back after a restart, and Chromium ended at shutdown. Tests that need Chromium
//! skip with a notice where it is not installed.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

const PAGE: &str = "<!doctype html><html><head><title>Test page</title></head><body>\
<h1>Hello from the test</h1><input id=\"q\"><button id=\"go\" \
onclick=\"document.title = 'typed ' + document.getElementById('q').value\">Go</button></body></html>";

/// Serves PAGE on 127.0.0.1 (a thread that lives as long as the test process).
fn page_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut request = Vec::new();
            let mut buffer = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(n @ 1..) => request.extend_from_slice(&buffer[..n]),
                    _ => break,
                }
            }
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                PAGE.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    format!("http://127.0.0.1:{port}/")
}

fn saved_nodes(dirs: &Dirs) -> usize {
    let saved: Value =
        serde_json::from_slice(&std::fs::read(dirs.project_file()).unwrap()).unwrap();
    saved["nodes"].as_array().unwrap().len()
}

#[test]
fn browser_control_is_off_by_default_and_a_missing_browser_adds_nothing() {
    let dirs = Dirs::new("brgate");
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me"]);
    let error = serve.err(
        &dirs,
        "me",
        "browser_open",
        json!({"url": "https://example.com"}),
    );
    assert!(error.contains("Enable agent browser control"), "{error}");
    assert!(serve.stop().success());

    std::fs::write(
        dirs.agent_tools().join("preferences.json"),
        json!({"browser": {"executable": dirs.root.join("no-such-chromium")}}).to_string(),
    )
    .unwrap();
    let serve = Serve::start(&dirs, &["--terminals", "pty", "--agent", "me", "--browser"]);
    let error = serve.err(
        &dirs,
        "me",
        "browser_open",
        json!({"url": "https://example.com"}),
    );
    assert!(error.contains("No browser found"), "{error}");
    assert_eq!(saved_nodes(&dirs), 1, "only the agent node");
    // A URL the runtime refuses never reaches the canvas either.
    let error = serve.err(
        &dirs,
        "me",
        "browser_open",
        json!({"url": "file:///etc/passwd"}),
    );
    assert!(!error.is_empty());
    assert_eq!(saved_nodes(&dirs), 1);
    assert!(serve.stop().success());
}

#[test]
fn pages_are_driven_owned_restored_and_ended() {
    if !chromium_on_path() {
        eprintln!("Chromium is not installed: skipping pages_are_driven_owned_restored_and_ended");
        return;
    }
    let url = page_server();
    let dirs = Dirs::new("brpages");
    let args = [
        "--terminals",
        "pty",
        "--agent",
        "me",
        "--agent",
        "other",
        "--browser",
    ];
    let serve = Serve::start(&dirs, &args);
    let opened = serve.ok(&dirs, "me", "browser_open", json!({"url": url}));
    let browser = opened["nodeId"].as_str().unwrap().to_string();
    assert!(
        opened["targetId"].as_str().is_some_and(|t| !t.is_empty()),
        "{opened}"
    );
    let list = serve.ok(&dirs, "me", "browser_list", json!({}));
    assert_eq!(list[0]["owner"], "me");
    assert_eq!(list[0]["data"]["tabs"][0]["id"], opened["tabId"]);

    let page = serve.ok(&dirs, "me", "browser_inspect", json!({"nodeId": browser}));
    assert_eq!(page["title"], "Test page");
    assert!(
        page["text"]
            .as_str()
            .unwrap()
            .contains("Hello from the test"),
        "{page}"
    );
    serve.ok(
        &dirs,
        "me",
        "browser_type",
        json!({"nodeId": browser, "selector": "#q", "text": "abc"}),
    );
    serve.ok(
        &dirs,
        "me",
        "browser_click",
        json!({"nodeId": browser, "selector": "#go"}),
    );
    let page = serve.ok(&dirs, "me", "browser_inspect", json!({"nodeId": browser}));
    assert_eq!(page["title"], "typed abc");
    let shot = serve.ok(
        &dirs,
        "me",
        "browser_screenshot",
        json!({"nodeId": browser}),
    );
    assert!(
        shot["image"].as_str().unwrap().starts_with("iVBOR"),
        "a base64 PNG"
    );
    let moved = serve.ok(
        &dirs,
        "me",
        "browser_navigate",
        json!({"nodeId": browser, "url": format!("{url}?second")}),
    );
    assert!(
        moved["url"].as_str().unwrap().ends_with("?second"),
        "{moved}"
    );

    // Ownership: the other agent must be handed control.
    let error = serve.err(
        &dirs,
        "other",
        "browser_inspect",
        json!({"nodeId": browser}),
    );
    assert!(error.contains("Claim this browser"), "{error}");
    assert!(serve
        .err(&dirs, "other", "browser_claim", json!({"nodeId": browser}))
        .contains("transfer"));
    serve.ok(
        &dirs,
        "me",
        "browser_transfer",
        json!({"nodeId": browser, "agentNodeId": "other"}),
    );
    serve.ok(
        &dirs,
        "other",
        "browser_inspect",
        json!({"nodeId": browser}),
    );
    assert!(serve
        .err(&dirs, "me", "browser_inspect", json!({"nodeId": browser}))
        .contains("Claim"));

    let chromium: Vec<u32> = children(serve.pid())
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.contains("chrom"))
        })
        .collect();
    assert_eq!(chromium.len(), 1, "one Chromium for the host");
    assert!(serve.stop().success());
    poll("Chromium to be gone", Duration::from_secs(5), || {
        chromium
            .iter()
            .all(|&pid| session_members(pid).is_empty())
            .then_some(())
    });
    assert!(
        std::fs::read_dir(dirs.agent_tools().join("browser")).map_or(true, |d| d.count() == 0),
        "the profile is removed"
    );

    // After a restart the tab's page opens again when it is next used; ownership is kept.
    let serve = Serve::start(&dirs, &args);
    let page = serve.ok(
        &dirs,
        "other",
        "browser_inspect",
        json!({"nodeId": browser}),
    );
    assert_eq!(page["title"], "Test page");
    assert!(serve.stop().success());
}
