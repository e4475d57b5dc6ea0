//! Waiting calls over real loopback HTTP: a 20 s wait in a project does not hold up the
//! project's other calls; the bound refuses one more at once; closing the server answers
//! the waits still open. The host is the fake one (`fakes`), the server the real one.
#![deny(unsafe_code)]

mod fakes;

use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fakes::{call, who, Rig};
use serde_json::json;
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus};
use termsprawl_tools::runtime::{Foreground, ShellIntegration};
use termsprawl_tools::server::WAITS_PER_PROJECT;

#[test]
fn a_long_wait_holds_up_no_other_call_and_the_bound_refuses_one_more() {
    let rig = Rig::new("server-waits", &["a", "b"]);
    rig.canvas
        .add(json!({"id": "sh", "type": "terminal", "data": {"title": "Shell"}}));
    for id in ["a", "b", "sh"] {
        rig.terminals.start(id);
    }
    let terminals = &rig.terminals;
    terminals
        .integration
        .lock()
        .unwrap()
        .insert("sh".into(), ShellIntegration::None);
    terminals
        .foreground
        .lock()
        .unwrap()
        .insert("sh".into(), Foreground::Shell);
    let endpoint = rig.runtime.start(Path::new("/bin/echo")).unwrap();
    let server = Arc::clone(rig.runtime.server());
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    let a = server
        .provision(&who("a"), status.clone(), false)
        .unwrap()
        .token;
    let b = server.provision(&who("b"), status, false).unwrap().token;
    let submit = |token: &str, command: &str, timeout_ms: u64| {
        let (url, token) = (endpoint.url.clone(), token.to_string());
        let args = json!({"nodeId": "sh", "command": command, "wait": "exit", "timeoutMs": timeout_ms, "force": true});
        thread::spawn(move || call(&url, &token, "terminal_submit", args))
    };
    let long = submit(&a, "sleep 30", 20_000);
    let others: Vec<_> = (1..WAITS_PER_PROJECT)
        .map(|i| submit(&a, &format!("sleep {i}"), 600_000))
        .collect();
    while server.waiting_calls() < WAITS_PER_PROJECT {
        thread::sleep(Duration::from_millis(10));
    }
    // One past the bound is refused at once, having typed nothing.
    let (status, refused) = submit(&b, "echo one more", 600_000).join().unwrap();
    assert_eq!(status, 400, "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.starts_with("Too many calls are waiting already"),
        "{message}"
    );
    let typed = terminals
        .written
        .lock()
        .unwrap()
        .iter()
        .any(|(_, t)| t.contains("one more"));
    assert!(!typed, "the refused call typed its command");
    // Meanwhile another agent of the project is answered as ever.
    let mut took = Vec::new();
    for i in 0..200 {
        let operation = if i % 2 == 0 {
            "canvas_list"
        } else {
            "session_info"
        };
        let began = Instant::now();
        let (status, answer) = call(&endpoint.url, &b, operation, json!({}));
        took.push(began.elapsed());
        assert_eq!(status, 200, "{operation}: {answer}");
    }
    assert!(!long.is_finished(), "the 20 s wait answered early");
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "200 canvas_list/session_info calls beside {} waits: median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        WAITS_PER_PROJECT,
        ms(took[100]),
        ms(took[197]),
        ms(took[199])
    );
    let (status, answer) = long.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["value"]["state"], "timed_out", "{answer}");
    assert_eq!(answer["value"]["integration"], "none");
    assert!(
        answer["value"]["durationMs"].as_u64().unwrap() >= 20_000,
        "{answer}"
    );
    // The trail records the waited call when it answered, with how long it took.
    let trail = rig.data().join("activity");
    let waited = (0..500).find_map(|_| {
        thread::sleep(Duration::from_millis(10)); // the trail's writer thread catches up
        let lines = termsprawl_tools::activity::read_tail(&trail, fakes::PROJECT, 1_000);
        lines.into_iter().find(|line| {
            let args = line.args.as_ref();
            line.operation.as_deref() == Some("terminal_submit")
                && args.is_some_and(|a| a["command"] == "sleep 30")
        })
    });
    let waited = waited.expect("the waited call is in the trail");
    assert_eq!(waited.outcome, "ok");
    assert!(waited.duration_ms.unwrap() >= 20_000, "{waited:?}");
    // Closing the server answers the waits still open.
    rig.runtime.close();
    for other in others {
        let (status, answer) = other.join().unwrap();
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"].as_str().unwrap();
        assert!(message.contains("shutting down"), "{message}");
    }
}
