//! Project queues over real HTTP: order, revocation while queued, expiry, independence
//! of projects, and bounded worker threads.
#![deny(unsafe_code)]

mod common;

use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use common::*;
use serde_json::json;

fn canvas_list(port: u16, token: String) -> thread::JoinHandle<Reply> {
    thread::spawn(move || call(port, Some(&token), &op("canvas_list", json!({}))))
}

#[test]
fn queued_operations_run_in_turn_and_revocation_fails_the_rest() {
    let t = start("revoke-queued");
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let first = canvas_list(t.port, t.session.token.clone());
    assert_eq!(
        starts.recv_timeout(Duration::from_secs(10)).unwrap(),
        "project-a/canvas_list"
    );
    let second = thread::spawn({
        let (port, token) = (t.port, t.session.token.clone());
        move || {
            call(
                port,
                Some(&token),
                &op("canvas_select", json!({"nodeIds": ["n2"]})),
            )
        }
    });
    // The second waits behind the first: it has not started.
    thread::sleep(Duration::from_millis(50));
    assert!(
        starts.try_recv().is_err(),
        "second ran while first was running"
    );
    t.server.revoke("agent-1");
    assert!(!t.server.session_file("agent-1").unwrap().exists());
    release.send(()).unwrap();
    let first = first.join().unwrap();
    assert_eq!(first.status, 200, "the running operation completes");
    let second = second.join().unwrap();
    assert_eq!(
        (second.status, second.error()),
        (400, "Session revoked".into())
    );
    assert_eq!(t.app.executed(), vec!["project-a/canvas_list"]);
    t.server.close();
}

#[test]
fn two_operations_of_one_project_never_overlap() {
    let t = start("order");
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let calls: Vec<_> = (0..2)
        .map(|_| canvas_list(t.port, t.session.token.clone()))
        .collect();
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    thread::sleep(Duration::from_millis(50));
    assert!(starts.try_recv().is_err(), "only one runs at a time");
    release.send(()).unwrap();
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    release.send(()).unwrap();
    for call in calls {
        assert_eq!(call.join().unwrap().status, 200);
    }
    assert_eq!(t.app.executed().len(), 2);
    t.server.close();
}

#[test]
fn an_operation_queued_over_15_s_expires_without_running() {
    let clock = FakeClock::new();
    let t = start_in(&scratch("expiry"), Some(clock.clone()));
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let first = canvas_list(t.port, t.session.token.clone());
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    let second = thread::spawn({
        let (port, token) = (t.port, t.session.token.clone());
        move || {
            call(
                port,
                Some(&token),
                &op("canvas_select", json!({"nodeIds": ["n2"]})),
            )
        }
    });
    let third = thread::spawn({
        let (port, token) = (t.port, t.session.token.clone());
        move || {
            call(
                port,
                Some(&token),
                &op("canvas_select", json!({"nodeIds": ["n3"]})),
            )
        }
    });
    // Both are queued once the worker holds them (nothing else observes it): give the
    // accept path time to hand them over, then move the clock past the expiry.
    thread::sleep(Duration::from_millis(100));
    clock.advance(Duration::from_secs(16));
    release.send(()).unwrap();
    assert_eq!(first.join().unwrap().status, 200);
    for call in [second, third] {
        let reply = call.join().unwrap();
        assert_eq!(
            (reply.status, reply.error()),
            (
                400,
                "Queued operation expired before execution; no change applied".into()
            )
        );
    }
    assert_eq!(t.app.executed(), vec!["project-a/canvas_list"]);
    // A fresh operation is not expired.
    release.send(()).unwrap();
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("canvas_list", json!({})),
    );
    assert!(reply.status == 200 || reply.status == 400);
    assert_eq!(reply.status, 200, "{}", reply.error());
    t.server.close();
}

#[test]
fn browser_control_disabled_while_waiting_fails_the_browser_operation() {
    let t = start("browser-wait");
    t.app.browser.store(true, Ordering::SeqCst);
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let first = canvas_list(t.port, t.session.token.clone());
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    let browser = thread::spawn({
        let (port, token) = (t.port, t.session.token.clone());
        move || call(port, Some(&token), &op("browser_list", json!({})))
    });
    thread::sleep(Duration::from_millis(100));
    t.app.browser.store(false, Ordering::SeqCst);
    release.send(()).unwrap();
    assert_eq!(first.join().unwrap().status, 200);
    let reply = browser.join().unwrap();
    assert_eq!(reply.error(), "Browser control was disabled while waiting");
    t.server.close();
}

#[test]
fn an_identity_invalid_by_its_turn_is_revoked() {
    let t = start("invalid-wait");
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let first = canvas_list(t.port, t.session.token.clone());
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    let second = canvas_list(t.port, t.session.token.clone());
    thread::sleep(Duration::from_millis(100));
    t.app.invalid.lock().unwrap().insert("agent-1".into());
    release.send(()).unwrap();
    assert_eq!(first.join().unwrap().status, 200);
    assert_eq!(second.join().unwrap().error(), "Session revoked");
    t.server.close();
}

#[test]
fn project_b_and_discovery_are_served_while_project_a_blocks() {
    let t = start("independent");
    let b = t
        .server
        .provision(&identity("agent-b", "project-b"), status("external"), false)
        .unwrap();
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let blocked = canvas_list(t.port, t.session.token.clone());
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    let reply = call(t.port, Some(&b.token), &op("canvas_list", json!({})));
    assert_eq!(reply.status, 200);
    for body in [
        op("session_info", json!({})),
        op("guide_read", json!({"topic": "canvas"})),
        op("agent_status", json!({})),
    ] {
        assert_eq!(call(t.port, Some(&t.session.token), &body).status, 200);
    }
    assert_eq!(t.app.executed(), vec!["project-b/canvas_list"]);
    release.send(()).unwrap();
    assert_eq!(blocked.join().unwrap().status, 200);
    t.server.close();
}

#[test]
fn many_projects_touched_in_turn_leave_no_threads() {
    // Real sessions, so every call passes the revocation check and runs on its project's
    // worker. (The 10,000-project case is the queue's unit test
    // `many_projects_in_turn_leave_only_a_few_lingering_workers`: provisioning 10,000
    // sessions here would fsync 10,000 files.)
    const PROJECTS: usize = 300;
    let t = start("many-projects");
    let sessions: Vec<_> = (0..PROJECTS)
        .map(|i| {
            t.server
                .provision(
                    &identity(&format!("a{i}"), &format!("p{i}")),
                    status("external"),
                    false,
                )
                .unwrap()
        })
        .collect();
    let before = thread_count();
    let mut most_workers = 0;
    for session in &sessions {
        let result = t
            .server
            .invoke(session, &json!({"operation": "canvas_list", "args": {}}));
        assert!(
            matches!(result, termsprawl_tools::protocol::ToolResult::Ok(_)),
            "{result:?}"
        );
        most_workers = most_workers.max(t.server.project_workers());
    }
    assert_eq!(
        t.app.executed().len(),
        PROJECTS,
        "every call ran on a worker"
    );
    // Only a few idle workers linger; the rest exit right after answering.
    assert!(most_workers <= 16, "{most_workers} workers alive at once");
    wait_until("workers to exit", || t.server.project_workers() == 0);
    wait_until("threads to be released", || thread_count() <= before + 2);
    t.server.close();
}

/// The real time, with a short wait for queued answers.
struct ShortWait;

impl termsprawl_tools::server::Clock for ShortWait {
    fn now(&self) -> std::time::Instant {
        std::time::Instant::now()
    }
    fn answer_wait(&self) -> Duration {
        Duration::from_millis(300)
    }
}

#[test]
fn a_caller_stops_waiting_for_an_operation_that_never_finishes() {
    let data = scratch("answer-wait");
    let app = std::sync::Arc::new(FakeApp::default());
    let server = termsprawl_tools::server::AgentToolServer::with_clock(
        &data,
        app.clone(),
        std::sync::Arc::new(ShortWait),
    )
    .unwrap();
    let port = server.start().unwrap().port;
    let session = server
        .provision(&identity("agent-1", "project-a"), status("external"), true)
        .unwrap();
    let release = app.hold("project-a");
    let reply = call(port, Some(&session.token), &op("canvas_list", json!({})));
    assert_eq!(
        (reply.status, reply.error()),
        (
            400,
            "Operation did not finish in time; its outcome is unknown. Inspect before retrying."
                .into()
        )
    );
    release.send(()).unwrap();
    server.close();
}

#[test]
fn work_queued_before_close_fails_without_running() {
    let t = start("close-queued");
    let release = t.app.hold("project-a");
    let starts = t.app.watch_starts();
    let (server, session) = (t.server.clone(), t.session.clone());
    let raw = json!({"operation": "canvas_list", "args": {}});
    let first = thread::spawn({
        let (server, session, raw) = (server.clone(), session.clone(), raw.clone());
        move || server.invoke(&session, &raw)
    });
    starts.recv_timeout(Duration::from_secs(10)).unwrap();
    let second = thread::spawn(move || server.invoke(&session, &raw));
    // Let the second queue behind the first (were it late, it would reach its turn after
    // close all the same, and must fail the same way).
    thread::sleep(Duration::from_millis(50));
    t.server.close();
    release.send(()).unwrap();
    first.join().unwrap();
    let second = second.join().unwrap();
    assert!(
        matches!(&second, termsprawl_tools::protocol::ToolResult::Err(e)
            if e == "Tool service is shutting down; no change applied"),
        "{second:?}"
    );
    assert_eq!(t.app.executed(), vec!["project-a/canvas_list"]);
}
