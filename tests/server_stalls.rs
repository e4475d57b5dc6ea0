//! Clients that stall must not stall anyone else: a body that trickles, a body that
//! never comes, a client that never reads its responses.
#![deny(unsafe_code)]

mod common;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SESSION_INFO: &str = r#"{"operation":"session_info","args":{}}"#;

/// Headers declaring a 100 kB body, and its first byte.
fn slow_head(port: u16, token: &str) -> Vec<u8> {
    format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Length: 100000\r\n\r\n{{"
    )
    .into_bytes()
}

/// True when nothing has arrived on `stream` yet (and it is still open).
fn nothing_received(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let quiet = matches!(stream.peek(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    quiet
}

fn serve_others(t: &Running) {
    let mut keep_alive = Client::connect(t.port);
    for _ in 0..20 {
        assert_eq!(
            keep_alive.call(Some(&t.session.token), SESSION_INFO).status,
            200
        );
        assert_eq!(
            call(t.port, Some(&t.session.token), SESSION_INFO).status,
            200
        );
    }
    let reply = call(
        t.port,
        Some(&t.session.token),
        &op("canvas_list", json!({})),
    );
    assert_eq!(reply.status, 200);
}

#[test]
fn trickling_and_stalled_bodies_do_not_stall_others_and_end_by_15_s() {
    let t = start("trickle");
    let began = Instant::now();
    let mut stalled = Client::connect(t.port);
    stalled.send(&slow_head(t.port, &t.session.token));
    let mut trickler = Client::connect(t.port);
    trickler.send(&slow_head(t.port, &t.session.token));
    let stop = Arc::new(AtomicBool::new(false));
    let dripping = {
        let mut stream = trickler.stream().try_clone().unwrap();
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) && stream.write_all(b" ").is_ok() {
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    serve_others(&t);
    assert!(
        nothing_received(stalled.stream()),
        "the stalled client waits"
    );
    assert!(nothing_received(trickler.stream()), "the trickler waits");
    assert!(
        began.elapsed() < Duration::from_secs(14),
        "the check above ran in time"
    );

    for client in [&mut stalled, &mut trickler] {
        if let Some(reply) = client.read_reply() {
            assert_eq!(reply.status, 408);
            assert!(reply.error().contains("15 s"));
        }
        let waited = began.elapsed();
        assert!(
            waited >= Duration::from_millis(14_900) && waited < Duration::from_secs(17),
            "answered after {waited:?}"
        );
        assert!(
            client.read_reply().is_none(),
            "and the connection is closed"
        );
    }
    stop.store(true, Ordering::SeqCst);
    dripping.join().unwrap();
    serve_others(&t);
    t.server.close();
}

#[test]
fn an_unauthenticated_slow_body_is_refused_at_once() {
    let t = start("slow-401");
    let mut client = Client::connect(t.port);
    client.send(&slow_head(t.port, "forged"));
    let reply = client.read_reply().unwrap();
    assert_eq!(reply.status, 401);
    assert!(
        client.read_reply().is_none(),
        "closed: its body is never read"
    );
    t.server.close();
}

#[test]
fn a_client_that_never_reads_does_not_stall_others() {
    let t = start("non-reading");
    // Each answer is 1 MB; the kernel buffers some tens of MB, then the server's write
    // to this client blocks and it stops taking this client's next requests.
    let body = op("terminal_read", json!({ "nodeId": "t1" }));
    let total = 1000;
    let requests = post_bytes(t.port, Some(&t.session.token), &body).repeat(total);
    let mut stream = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    stream.write_all(&requests).unwrap();
    let answered = || {
        t.app
            .executed()
            .iter()
            .filter(|name| name.ends_with("terminal_read"))
            .count()
    };
    let mut last = usize::MAX;
    loop {
        thread::sleep(Duration::from_millis(300));
        let now = answered();
        if now == last {
            break;
        }
        last = now;
    }
    assert!(
        last < total,
        "the server is stuck writing to it ({last} answered)"
    );
    serve_others(&t);
    assert_eq!(
        answered(),
        last,
        "and stayed stuck while the others were served"
    );
    // The server may have ended it already (more than 8 calls waiting behind the stuck
    // one): then there is nothing left to shut.
    let _ = stream.shutdown(std::net::Shutdown::Both);
    serve_others(&t);
    t.server.close();
}

#[test]
fn a_client_that_never_reads_small_answers_does_not_stall_the_accept_thread() {
    let t = start("non-reading-small");
    // Small answers to a body in memory are written by the accept thread itself, but only
    // while the connection's send queue is empty; once this client's unread answers back
    // up, its answers go to a handler. Were the accept thread to write one, it would
    // block until `SO_SNDTIMEO` (15 s), and so would every other client's call.
    let requests = post_bytes(t.port, Some(&t.session.token), SESSION_INFO).repeat(40_000);
    let stream = TcpStream::connect(("127.0.0.1", t.port)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = thread::spawn(move || writer.write_all(&requests).is_ok());
    // Its answers back up within a moment (megabytes of them, none read).
    thread::sleep(Duration::from_secs(2));
    for _ in 0..20 {
        for keep_alive in [true, false] {
            let begun = Instant::now();
            let reply = if keep_alive {
                Client::connect(t.port).call(Some(&t.session.token), SESSION_INFO)
            } else {
                call(
                    t.port,
                    Some(&t.session.token),
                    &op("canvas_list", json!({})),
                )
            };
            assert_eq!(reply.status, 200);
            let took = begun.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "a call took {took:?} behind the client that does not read"
            );
        }
    }
    // The server may have dropped it already (its answers timed out): then ENOTCONN.
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = sender.join();
    serve_others(&t);
    t.server.close();
}
