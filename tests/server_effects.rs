//! What the library does to the process that embeds it, and that an embedder can turn
//! it off (`ProcessEffects`): with the descriptor search off, the server still
//! authenticates, checks, caps, validates and answers in order; it just no longer ends
//! connections it cannot see. And whatever the effects, it never touches signals or
//! limits (only `serve` does).
#![deny(unsafe_code)]

mod common;
mod sys;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use termsprawl_tools::server::ProcessEffects;

const SIGNALS: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGPIPE,
    libc::SIGCHLD,
    libc::SIGHUP,
    libc::SIGWINCH,
];

/// True when the server ends `stream` (end-of-file) within `within`.
fn ended_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0))
}

#[test]
fn the_library_changes_no_signal_handling_or_limit() {
    let dispositions = || -> Vec<_> {
        SIGNALS
            .iter()
            .map(|s| sys::signal_disposition(*s).unwrap())
            .collect()
    };
    let (before, blocked, limit) = (
        dispositions(),
        sys::blocked_signals().unwrap(),
        sys::open_files_limit().unwrap(),
    );
    let t = start("effects-default");
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("canvas_list", json!({})),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(dispositions(), before, "a signal disposition changed");
    assert_eq!(sys::blocked_signals().unwrap(), blocked);
    assert_eq!(sys::open_files_limit().unwrap(), limit);
    t.server.close();
    assert_eq!(dispositions(), before);
    assert_eq!(sys::open_files_limit().unwrap(), limit);
}

#[test]
fn with_the_descriptor_search_off_every_check_still_holds() {
    let t = start_with(
        &scratch("effects-off"),
        None,
        ProcessEffects {
            search_descriptors: false,
            trim_heap: false,
        },
    );
    let token = t.session.token.as_str();
    // Answered, in order, on one keep-alive connection; queued and direct operations.
    let mut client = Client::connect(t.port);
    let info = client.call(Some(token), &op("session_info", json!({})));
    assert_eq!(info.status, 200);
    assert_eq!(info.json()["value"]["nodeId"], "agent-1");
    let listed = client.call(Some(token), &op("canvas_list", json!({})));
    assert_eq!(listed.json()["value"]["ran"], "canvas_list");
    // Three pipelined calls come back in order.
    let mut pipelined = Vec::new();
    for operation in ["canvas_list", "session_info", "canvas_list"] {
        pipelined.extend(post_bytes(t.port, Some(token), &op(operation, json!({}))));
    }
    client.send(&pipelined);
    let shapes: Vec<bool> = (0..3)
        .map(|_| client.read_reply().unwrap().json()["value"]["ran"].is_string())
        .collect();
    assert_eq!(shapes, [true, false, true]);
    // A body over 1 KiB (read on a handler, with no timeout now) and a chunked one.
    let padded = json!({"operation": "session_info", "args": {}, "pad": "x".repeat(3000)});
    let reply = call(t.port, Some(token), &padded.to_string());
    assert!(
        reply.status == 200 || reply.status == 400,
        "{}",
        reply.status
    );
    assert!(reply.json()["ok"].is_boolean());
    let body = op("session_info", json!({}));
    let chunked = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        t.port,
        body.len()
    );
    assert_eq!(raw(t.port, chunked.as_bytes()).unwrap().status, 200);
    // Refusals: token, size, framing; the request smuggled after a refused framing
    // never runs.
    assert_eq!(call(t.port, Some("nope"), &body).status, 401);
    let huge = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: 200000\r\n\r\n",
        t.port
    );
    let refused = raw(t.port, huge.as_bytes()).unwrap();
    assert_eq!(
        (refused.status, refused.error()),
        (400, "Request too large".into())
    );
    // A declared 10^14 bytes is answered and its connection ends, nothing of the body
    // read, with no descriptor search to shut it: the patched tiny_http's drop does both.
    let mut absurd = Client::connect(t.port);
    absurd.send(
        format!(
            "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\n\
             Content-Length: 99999999999999\r\n\r\n{{",
            t.port
        )
        .as_bytes(),
    );
    assert_eq!(absurd.read_reply().unwrap().status, 400);
    assert!(absurd.read_reply().is_none(), "the connection is ended");
    let executed = t.app.executed().len();
    let mut smuggling = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {token}\r\n\
         Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        t.port
    )
    .into_bytes();
    smuggling.extend(post_bytes(
        t.port,
        Some(token),
        &op("canvas_list", json!({})),
    ));
    let mut smuggler = Client::connect(t.port);
    smuggler.send(&smuggling);
    assert_eq!(smuggler.read_reply().unwrap().status, 400);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(t.app.executed().len(), executed, "the smuggled request ran");

    // What is given up: the server cannot see connections, so `close` leaves an idle
    // one open (with the search on, it is ended at once: the next test).
    let mut idle = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    let mut idle_client = Client::from_stream(idle.try_clone().unwrap());
    assert_eq!(idle_client.call(Some(token), &body).status, 200);
    t.server.close();
    assert!(!ended_within(&mut idle, Duration::from_secs(2)));
}

#[test]
fn with_the_descriptor_search_on_close_ends_open_connections() {
    let t = start("effects-on");
    let body = op("session_info", json!({}));
    let mut idle = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    let mut idle_client = Client::from_stream(idle.try_clone().unwrap());
    assert_eq!(idle_client.call(Some(&t.session.token), &body).status, 200);
    let closing = Instant::now();
    t.server.close();
    assert!(ended_within(&mut idle, Duration::from_secs(10)));
    eprintln!(
        "figure: close ended an idle connection in {:?}",
        closing.elapsed()
    );
}
