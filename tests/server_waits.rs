//! Waiting calls over real loopback HTTP: a 20 s wait in a project does not hold up the
//! project's other calls; the bounds refuse one more at once; closing the server answers
//! the waits still open; a caller that hangs up frees its places. The host is the fake
//! one (`fakes`), the server the real one.
#![deny(unsafe_code)]

mod fakes;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use fakes::{call, who, Rig};
use serde_json::json;
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus};
use termsprawl_tools::runtime::{Foreground, ShellIntegration};
use termsprawl_tools::server::{WAITS_PER_AGENT, WAITS_PER_PROJECT};

#[test]
fn a_long_wait_holds_up_no_other_call_and_the_bound_refuses_one_more() {
    let rig = Rig::new("server-waits", &["a", "a1", "a2", "a3", "b"]);
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
    // Four agents fill the project's places, each its share (`a` .. `a3`); `b` is a fifth.
    let fillers: Vec<String> = ["a", "a1", "a2", "a3"]
        .iter()
        .map(|node| {
            let session = server.provision(&who(node), status.clone(), false);
            session.unwrap().token
        })
        .collect();
    let a = fillers[0].clone();
    let b = server.provision(&who("b"), status, false).unwrap().token;
    let submit = |token: &str, command: &str, timeout_ms: u64| {
        let (url, token) = (endpoint.url.clone(), token.to_string());
        let args = json!({"nodeId": "sh", "command": command, "wait": "exit", "timeoutMs": timeout_ms, "force": true});
        thread::spawn(move || call(&url, &token, "terminal_submit", args))
    };
    let long = submit(&a, "sleep 30", 20_000);
    let others: Vec<_> = (1..WAITS_PER_PROJECT)
        .map(|i| {
            submit(
                &fillers[i / WAITS_PER_AGENT],
                &format!("sleep {i}"),
                600_000,
            )
        })
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

/// An agent that sends waiting calls and hangs up each at once holds no place: its
/// waits end as soon as the server sees the connection closed (at the next check, at
/// most a tick later), and the trail says the caller hung up.
#[test]
fn a_caller_that_hangs_up_frees_its_place() {
    let rig = Rig::new("server-hangup", &["a", "b"]);
    rig.canvas
        .add(json!({"id": "sh", "type": "terminal", "data": {"title": "Shell"}}));
    for id in ["a", "b", "sh"] {
        rig.terminals.start(id);
    }
    rig.terminals
        .integration
        .lock()
        .unwrap()
        .insert("sh".into(), ShellIntegration::None);
    rig.terminals
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
    let a = server.provision(&who("a"), status, false).unwrap().token;
    let authority = endpoint
        .url
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    // More than one agent's share, each sent and hung up at once.
    for i in 0..WAITS_PER_AGENT * 2 {
        let args = json!({"nodeId": "sh", "command": format!("sleep {i}"), "wait": "exit", "timeoutMs": 600_000, "force": true});
        let body = json!({"operation": "terminal_submit", "args": args}).to_string();
        let mut stream = TcpStream::connect(authority).unwrap();
        let request = format!(
            "POST /call HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {a}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        // Hung up once the call waits (else it would not have been one of the waits).
        let deadline = Instant::now() + Duration::from_secs(20);
        while server.waiting_calls() == 0 {
            assert!(Instant::now() < deadline, "call {i} never waited");
            thread::sleep(Duration::from_millis(5));
        }
        drop(stream);
        let deadline = Instant::now() + Duration::from_secs(20);
        while server.waiting_calls() > 0 {
            assert!(
                Instant::now() < deadline,
                "call {i} kept its place after hanging up"
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
    // The agent can still wait, and the trail says why its earlier calls ended.
    let (status, answer) = call(
        &endpoint.url,
        &a,
        "terminal_submit",
        json!({"nodeId": "sh", "command": "true", "wait": "exit", "timeoutMs": 300, "force": true}),
    );
    assert_eq!(status, 200, "{answer}");
    let trail = rig.data().join("activity");
    let hung_up = (0..500).find_map(|_| {
        thread::sleep(Duration::from_millis(10));
        let lines = termsprawl_tools::activity::read_tail(&trail, fakes::PROJECT, 1_000);
        let count = lines
            .iter()
            .filter(|l| {
                l.error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("The caller hung up"))
            })
            .count();
        (count == WAITS_PER_AGENT * 2).then_some(count)
    });
    assert!(
        hung_up.is_some(),
        "each hung-up call is in the trail as such"
    );
}
