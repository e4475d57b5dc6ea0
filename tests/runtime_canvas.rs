//! The canvas bridge through the runtime: acknowledgements, deadlines, and replies that
//! must be ignored. A mutation that is not acknowledged is sent exactly once.
#![deny(unsafe_code)]

mod fakes;

use std::time::Duration;

use fakes::{Answer, Rig, PROJECT};
use serde_json::{json, Map};
use termsprawl_tools::protocol::{
    IntegrationState, IntegrationStatus, ToolIdentity, ToolRequest, ToolResult,
};

fn me() -> ToolIdentity {
    ToolIdentity {
        node_id: "a".into(),
        project_id: PROJECT.into(),
    }
}

fn request(operation: &str, args: serde_json::Value) -> ToolRequest {
    ToolRequest {
        operation: operation.into(),
        args: args.as_object().cloned().unwrap_or_default(),
    }
}

const TIMEOUT: &str =
    "Canvas did not acknowledge the operation. Inspect the canvas before retrying.";

#[test]
fn canvas_list_and_mutations_are_acknowledged() {
    let rig = Rig::new("canvas-ok", &["a"]);
    let list = rig
        .runtime
        .execute(&me(), &request("canvas_list", json!({})))
        .unwrap();
    assert_eq!(list[0]["id"], "a");
    let moved = rig
        .runtime
        .execute(
            &me(),
            &request("canvas_move", json!({"nodeId": "a", "x": 1, "y": 2})),
        )
        .unwrap();
    assert_eq!(moved["applied"], "canvas_move");
    let sent = rig.canvas.sent.lock().unwrap();
    let last = sent.last().unwrap();
    assert_eq!(
        (last.project_id.as_str(), last.operation.as_str()),
        (PROJECT, "canvas_move")
    );
    assert_eq!(
        last.args,
        json!({"nodeId": "a", "x": 1, "y": 2})
            .as_object()
            .cloned()
            .unwrap()
    );
    assert!(sent.iter().all(|r| r.request_id.len() == 32));
    assert_ne!(sent[0].request_id, sent[1].request_id);
    let now = termsprawl_tools::runtime::unix_millis();
    assert!(
        last.expires_at > now + 8_000 && last.expires_at <= now + 9_000,
        "expiresAt is now + 9 s"
    );
}

/// A `canvas_list` the owner can answer at once (`CanvasOwner::current_list`) skips the
/// project's queue and the owner's `send`; one that does not show the caller, or none
/// offered, goes the queued way (whose answer then says what is wrong).
#[test]
fn a_current_list_is_answered_without_asking_the_owner() {
    let rig = Rig::new("canvas-current", &["a"]);
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    let server = rig.runtime.server();
    let session = server.provision(&me(), status, false).unwrap();
    let list = json!({"operation": "canvas_list", "args": {}});
    let offered = json!([{"id": "a", "type": "terminal", "data": {"agentId": "claude"}}]);
    *rig.canvas.current.lock().unwrap() = Some(offered.clone());
    let before = rig.canvas.sent_count("canvas_list");
    assert_eq!(server.invoke(&session, &list), ToolResult::Ok(offered));
    assert_eq!(
        rig.canvas.sent_count("canvas_list"),
        before,
        "the owner was not asked"
    );
    // Without the caller on it: queued, and the owner's own list shows the caller.
    *rig.canvas.current.lock().unwrap() = Some(json!([{"id": "z", "type": "terminal"}]));
    let ToolResult::Ok(queued) = server.invoke(&session, &list) else {
        panic!("the queued canvas_list failed")
    };
    assert_eq!(queued[0]["id"], "a");
    assert_eq!(rig.canvas.sent_count("canvas_list"), before + 1);
    // Other operations never take it.
    let moved = json!({"operation": "canvas_move", "args": {"nodeId": "a", "x": 1, "y": 2}});
    assert!(matches!(server.invoke(&session, &moved), ToolResult::Ok(_)));
    assert_eq!(rig.canvas.sent_count("canvas_move"), 1);
}

#[test]
fn owner_errors_become_errors() {
    let rig = Rig::new("canvas-err", &["a"]);
    let error = rig
        .runtime
        .canvas(&me(), "canvas_fail", Map::new())
        .unwrap_err();
    assert_eq!(error, "Canvas refused: nothing applied");
    *rig.canvas.open.lock().unwrap() = false;
    let error = rig
        .runtime
        .execute(&me(), &request("canvas_list", json!({})))
        .unwrap_err();
    assert!(error.contains("canvas is not open"), "{error}");
}

#[test]
fn unacknowledged_mutations_time_out_and_are_sent_once() {
    let rig = Rig::new("canvas-timeout", &["a"]);
    let cases = [
        ("canvas_move", Answer::Never),
        ("canvas_resize", Answer::WrongSender),
        ("canvas_select", Answer::Subframe),
        ("canvas_group", Answer::Late(Duration::from_secs(11))),
        ("sticky_open", Answer::Late(Duration::from_millis(1_500))),
    ];
    for (operation, answer) in cases {
        rig.canvas.answer(operation, answer);
    }
    let handles: Vec<_> = cases
        .iter()
        .map(|(operation, answer)| {
            let runtime = rig.runtime.clone();
            let (operation, answer) = (operation.to_string(), *answer);
            std::thread::spawn(move || {
                (
                    operation.clone(),
                    answer,
                    runtime.canvas(&me(), &operation, Map::new()),
                )
            })
        })
        .collect();
    for handle in handles {
        let (operation, answer, result) = handle.join().unwrap();
        match answer {
            Answer::Late(d) if d < Duration::from_secs(10) => {
                assert_eq!(result.unwrap()["applied"], operation)
            }
            _ => assert_eq!(result, Err(TIMEOUT.to_string()), "{operation} {answer:?}"),
        }
        assert_eq!(
            rig.canvas.sent_count(&operation),
            1,
            "{operation} sent exactly once"
        );
    }
}

#[test]
fn close_fails_pending_requests() {
    let rig = Rig::new("canvas-close", &["a"]);
    rig.canvas.answer("canvas_move", Answer::Never);
    let runtime = rig.runtime.clone();
    let waiter = std::thread::spawn(move || runtime.canvas(&me(), "canvas_move", Map::new()));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while rig.canvas.sent_count("canvas_move") == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    rig.runtime.close();
    let error = waiter.join().unwrap().unwrap_err();
    let id = &rig.canvas.sent.lock().unwrap()[0].request_id;
    assert_eq!(error, format!("App stopped during request {id}"));
    assert!(rig
        .runtime
        .canvas(&me(), "canvas_move", Map::new())
        .unwrap_err()
        .contains("stopping"));
}
