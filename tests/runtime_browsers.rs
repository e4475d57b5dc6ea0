//! Browser operations: URL policy, guest readiness, ownership (persisted), the 15 s page
//! limit, and the ownership scenario end to end over the real server and real HTTP.
#![deny(unsafe_code)]

mod fakes;

use std::time::Duration;

use fakes::{call, run, who, Rig};
use serde_json::{json, Value};
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus};

fn web_node(rig: &Rig) {
    rig.canvas.add(json!({"id": "web", "type": "browser", "data": {"title": "Docs", "tabs": [{"id": "t1"}, {"id": "t2"}], "activeTabId": "t2"}}));
}

fn connect(rig: &Rig, node: &str) -> String {
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    rig.runtime
        .server()
        .provision(&who(node), status, false)
        .unwrap()
        .token
}

#[test]
fn ownership_scenario_over_http() {
    let rig = Rig::new("browser-owners", &["a", "b"]);
    web_node(&rig);
    let endpoint = rig
        .runtime
        .start(std::path::Path::new("/bin/echo"))
        .unwrap();
    let (a, b) = (connect(&rig, "a"), connect(&rig, "b"));
    let ok = |token: &str, op: &str, args: Value| {
        let (status, body) = call(&endpoint.url, token, op, args);
        assert_eq!((status, &body["ok"]), (200, &json!(true)), "{op}: {body}");
        body["value"].clone()
    };
    let refused = |token: &str, op: &str, args: Value| {
        let (status, body) = call(&endpoint.url, token, op, args);
        assert_eq!(status, 400, "{op}: {body}");
        body["error"].as_str().unwrap_or_default().to_string()
    };
    let owner_of = |list: &Value| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == "web")
            .unwrap()["owner"]
            .clone()
    };

    assert_eq!(owner_of(&ok(&a, "browser_list", json!({}))), Value::Null);
    assert_eq!(
        ok(&a, "browser_claim", json!({"nodeId": "web"}))["owner"],
        "a"
    );
    assert_eq!(
        refused(&b, "browser_claim", json!({"nodeId": "web"})),
        "Ask the current owner to transfer browser control"
    );
    assert_eq!(
        refused(
            &b,
            "browser_navigate",
            json!({"nodeId": "web", "url": "example.com"})
        ),
        "Claim this browser or ask its owner to transfer control first"
    );
    assert_eq!(
        refused(
            &a,
            "browser_transfer",
            json!({"nodeId": "web", "agentNodeId": "ghost"})
        ),
        "Recipient agent is not connected to this project"
    );
    assert_eq!(
        ok(
            &a,
            "browser_transfer",
            json!({"nodeId": "web", "agentNodeId": "b"})
        )["owner"],
        "b"
    );
    assert_eq!(
        refused(&a, "browser_inspect", json!({"nodeId": "web"})),
        "Claim this browser or ask its owner to transfer control first"
    );
    let page = ok(
        &b,
        "browser_navigate",
        json!({"nodeId": "web", "url": " example.com/docs "}),
    );
    assert_eq!(page["target"], "target-web-t2", "the active tab's guest");
    let runs = rig.browsers.runs.lock().unwrap().clone();
    assert_eq!(
        runs.last().unwrap().2["url"],
        "https://example.com/docs",
        "the normalized URL"
    );
    let persisted: Value =
        serde_json::from_slice(&std::fs::read(rig.data().join("browser-owners.json")).unwrap())
            .unwrap();
    assert_eq!(persisted, json!({"web": "b"}));

    rig.runtime.revoke("b");
    let (status, body) = call(&endpoint.url, &b, "browser_list", json!({}));
    assert_eq!(status, 401, "{body}");
    assert_eq!(owner_of(&ok(&a, "browser_list", json!({}))), Value::Null);
    assert_eq!(
        ok(&a, "browser_claim", json!({"nodeId": "web"}))["owner"],
        "a"
    );
    let persisted: Value =
        serde_json::from_slice(&std::fs::read(rig.data().join("browser-owners.json")).unwrap())
            .unwrap();
    assert_eq!(persisted, json!({"web": "a"}));
    let revoked = rig
        .workspace
        .status_log
        .lock()
        .unwrap()
        .iter()
        .rfind(|(n, _)| n == "b")
        .cloned()
        .unwrap();
    assert_eq!(revoked.1.state, IntegrationState::NeedsSetup);

    // Browser control off: the server refuses before the runtime is reached.
    *rig.workspace.browser_enabled.lock().unwrap() = false;
    assert!(refused(&a, "browser_list", json!({})).contains("browser control"));
}

#[test]
fn browser_open_owns_the_new_node_and_waits_for_its_guest() {
    let rig = Rig::new("browser-open", &["a"]);
    *rig.browsers.ready_after.lock().unwrap() = Some(Duration::from_secs(1));
    let opened = run(&rig, "a", "browser_open", json!({"url": "localhost:3000"})).unwrap();
    let node_id = opened["nodeId"].as_str().unwrap().to_string();
    assert_eq!(
        opened,
        json!({"nodeId": node_id, "tabId": "tab1", "targetId": format!("target-{node_id}-tab1")})
    );
    let sent = rig
        .canvas
        .sent
        .lock()
        .unwrap()
        .iter()
        .rfind(|r| r.operation == "browser_open")
        .cloned()
        .unwrap();
    assert_eq!(sent.args["url"], "http://localhost:3000");
    assert_eq!(
        run(&rig, "a", "browser_list", json!({})).unwrap()[0]["owner"],
        "a"
    );

    assert_eq!(
        run(
            &rig,
            "a",
            "browser_open",
            json!({"url": "javascript:alert(1)"})
        ),
        Err("Browser URL is not allowed".into())
    );
    assert_eq!(
        run(
            &rig,
            "a",
            "browser_navigate",
            json!({"nodeId": node_id, "url": "file:///etc/passwd"})
        ),
        Err("Browser URL is not allowed".into())
    );
    assert!(
        rig.browsers.runs.lock().unwrap().is_empty(),
        "refused URLs never reach the page"
    );
    assert_eq!(
        run(
            &rig,
            "a",
            "browser_click",
            json!({"nodeId": "a", "selector": "b"})
        ),
        Err("Browser node not found in this project".into())
    );

    *rig.browsers.ready_after.lock().unwrap() = None;
    assert_eq!(
        run(&rig, "a", "browser_inspect", json!({"nodeId": node_id})),
        Err("Browser target is not ready or was closed".into())
    );
    rig.canvas
        .add(json!({"id": "empty", "type": "browser", "data": {"tabs": []}}));
    run(&rig, "a", "browser_claim", json!({"nodeId": "empty"})).unwrap();
    assert_eq!(
        run(&rig, "a", "browser_screenshot", json!({"nodeId": "empty"})),
        Err("Browser target is not ready or was closed".into())
    );
}

#[test]
fn page_operations_give_up_after_15_seconds() {
    let rig = Rig::new("browser-hang", &["a"]);
    web_node(&rig);
    run(&rig, "a", "browser_claim", json!({"nodeId": "web"})).unwrap();
    *rig.browsers.hang.lock().unwrap() = true;
    let error = run(
        &rig,
        "a",
        "browser_click",
        json!({"nodeId": "web", "selector": "#go"}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "Browser operation timed out; inspect the page before retrying"
    );
    *rig.browsers.hang.lock().unwrap() = false;
    // Control turned off after the call was queued: re-checked before the page is touched.
    *rig.workspace.browser_enabled.lock().unwrap() = false;
    assert!(run(&rig, "a", "browser_inspect", json!({"nodeId": "web"}))
        .unwrap_err()
        .contains("browser control"));
    assert_eq!(rig.browsers.runs.lock().unwrap().len(), 1);
}

#[test]
fn browser_waits_need_the_owner_one_condition_and_browser_control_throughout() {
    let rig = Rig::new("browser-wait", &["a", "b"]);
    web_node(&rig);
    let wait = |node: &str, args: Value| run(&rig, node, "browser_wait", args);
    let error = wait("a", json!({"nodeId": "web", "idle": "dom"})).unwrap_err();
    assert_eq!(
        error,
        "Claim this browser or ask its owner to transfer control first"
    );
    run(&rig, "a", "browser_claim", json!({"nodeId": "web"})).unwrap();
    for args in [
        json!({"nodeId": "web"}),
        json!({"nodeId": "web", "text": "x", "textGone": "y"}),
    ] {
        let error = wait("a", args).unwrap_err();
        assert!(
            error.starts_with("browser_wait needs exactly one of text, textGone or idle"),
            "{error}"
        );
    }
    let error = wait("b", json!({"nodeId": "web", "idle": "network"})).unwrap_err();
    assert!(error.starts_with("Claim this browser"), "{error}");
    // The host's check answers; on the active tab's guest.
    let met = wait("a", json!({"nodeId": "web", "text": "Ready"})).unwrap();
    assert_eq!(met, json!({"state": "met", "target": "target-web-t2"}));
    let late = wait(
        "a",
        json!({"nodeId": "web", "text": "never", "timeoutMs": 300}),
    )
    .unwrap();
    assert_eq!(late["state"], "timed_out");
    // Turning browser control off ends a wait in progress.
    let workspace = std::sync::Arc::clone(&rig.workspace);
    let off = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        *workspace.browser_enabled.lock().unwrap() = false;
    });
    let error = wait(
        "a",
        json!({"nodeId": "web", "text": "never", "timeoutMs": 60_000}),
    )
    .unwrap_err();
    off.join().unwrap();
    assert!(
        error.contains("browser control was turned off while waiting"),
        "{error}"
    );
    assert!(
        rig.browsers.runs.lock().unwrap().is_empty(),
        "waits run no page operation"
    );
}

#[test]
fn owners_survive_a_restart_and_guests_fall_back_to_the_first_tab() {
    let rig = Rig::with_data("browser-restart", &["a"], |tools| {
        std::fs::write(
            tools.join("browser-owners.json"),
            r#"{"web": "a", "junk": 7}"#,
        )
        .unwrap();
    });
    web_node(&rig);
    assert_eq!(
        run(&rig, "a", "browser_list", json!({})).unwrap()[0]["owner"],
        "a"
    );
    assert_eq!(
        run(&rig, "a", "browser_inspect", json!({"nodeId": "web"})).unwrap()["target"],
        "target-web-t2"
    );
    let node = json!({"id": "web", "type": "browser", "data": {"tabs": ["first", "second"], "activeTabId": "gone"}});
    assert_eq!(rig.runtime.guest(&node), Ok("target-web-first".to_string()));
}
