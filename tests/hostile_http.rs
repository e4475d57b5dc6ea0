//! Hostile HTTP against the real `termsprawl-tools serve`: absurd lengths, oversized
//! chunked bodies, header floods, non-HTTP/1 bytes, pipelining, smuggling, slowloris and
//! connection floods. The serve process's threads and descriptors are read from
//! `/proc/<pid>`. Smuggling is also run against the library server with a counting host,
//! to show the smuggled call never reaches `execute`.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod common;
mod serve_harness;
mod sys;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_harness::{token, Dirs, Serve};

const SESSION_INFO: &str = r#"{"operation":"session_info","args":{}}"#;

fn serve(name: &str) -> (Dirs, Serve, String) {
    let dirs = Dirs::new(name);
    let serve = Serve::start(&dirs, &["--agent", "a1", "--terminals", "pty"]);
    let token = token(&dirs, "a1");
    (dirs, serve, token)
}

fn head(port: u16, token: &str) -> String {
    format!("POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n")
}

/// Sends `bytes` on a fresh connection and reads until the server closes it or
/// `within` passes: (what arrived, whether the server closed, how long it took).
fn exchange(port: u16, bytes: &[u8], within: Duration) -> (Vec<u8>, bool, Duration) {
    let began = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    // A server that refuses early may close before we finish writing: that is fine.
    let _ = stream.write_all(bytes);
    let mut got = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let left = within.saturating_sub(began.elapsed());
        if left.is_zero() {
            return (got, false, began.elapsed());
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return (got, true, began.elapsed()),
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (got, false, began.elapsed())
            }
            Err(_) => return (got, true, began.elapsed()),
        }
    }
}

fn status_of(reply: &[u8]) -> Option<u16> {
    std::str::from_utf8(reply.get(..12)?)
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

fn statuses(reply: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(reply);
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

fn good_call(port: u16, token: &str) -> u16 {
    serve_harness::post(port, token, &serde_json::from_str(SESSION_INFO).unwrap()).0
}

/// (threads, descriptors) of process `pid`.
fn counts(pid: u32) -> (usize, usize) {
    let n = |what: &str| {
        std::fs::read_dir(format!("/proc/{pid}/{what}"))
            .unwrap()
            .count()
    };
    (n("task"), n("fd"))
}

#[test]
fn absurd_and_oversized_requests_are_answered_at_once() {
    let (_dirs, serve, token) = serve("absurd");
    let port = serve.port;

    // 10 GB declared: refused from the headers, nothing read.
    let ten_gb = format!(
        "{}Content-Length: 10000000000\r\n\r\n{{",
        head(port, &token)
    );
    let (reply, closed, took) = exchange(port, ten_gb.as_bytes(), Duration::from_secs(5));
    assert_eq!(
        status_of(&reply),
        Some(400),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert!(String::from_utf8_lossy(&reply).contains("Request too large"));
    assert!(closed, "the connection is ended after the refusal");
    eprintln!("figure: 10 GB Content-Length answered 400 in {took:?}");

    // Lengths up to 10^14: each is answered and its connection closed, and its
    // tiny_http thread ends (the patched tiny_http drops a request without reading the
    // rest of its body; release 0.12.0 allocated that whole rest, so the server had to
    // leak such a request and keep its thread parked for good).
    let before = counts(serve.pid());
    for length in [100_000_000u64, 10_000_000_000, 99_999_999_999_999] {
        for _ in 0..20 {
            let absurd = format!("{}Content-Length: {length}\r\n\r\n{{", head(port, &token));
            let (reply, closed, _) = exchange(port, absurd.as_bytes(), Duration::from_secs(5));
            assert_eq!(status_of(&reply), Some(400), "length {length}");
            assert!(closed, "length {length}: the connection is ended");
        }
    }
    let after = serve_harness::poll("the threads to end", Duration::from_secs(20), || {
        let now = counts(serve.pid());
        // tiny_http's pool keeps up to 4 idle threads for good, and handlers linger 5 s;
        // alone this ends at +8 threads; under the whole suite's load it once stayed above +8
        // for 20 s. A thread kept per request would be +60.
        (now.0 <= before.0 + 10 && now.1 <= before.1 + 4).then_some(now)
    });
    eprintln!("figure: 60 absurd lengths: threads/descriptors {before:?} -> {after:?}");

    // A chunked body that grows past 128 KiB: cut at the cap.
    let mut chunked =
        format!("{}Transfer-Encoding: chunked\r\n\r\n", head(port, &token)).into_bytes();
    for _ in 0..20 {
        chunked.extend_from_slice(b"2000\r\n");
        chunked.extend_from_slice(&[b' '; 0x2000]);
        chunked.extend_from_slice(b"\r\n");
    }
    let (reply, _, took) = exchange(port, &chunked, Duration::from_secs(5));
    assert_eq!(status_of(&reply), Some(400));
    assert!(String::from_utf8_lossy(&reply).contains("Request too large"));
    eprintln!("figure: chunked body of 160 KiB refused at the 128 KiB cap in {took:?}");

    // A head's limits (the patched tiny_http, `vendor/tiny_http/PATCHES.md`): 100 header
    // lines and 64 KiB in all are answered; one line more, or a 64 KiB header line,
    // is answered 431 and the connection closed.
    let with_headers = |count: usize, filler: usize| {
        // Five header lines besides these: Host, Authorization, X-Filler, Connection and
        // Content-Length.
        let many: String = (0..count - 5).map(|i| format!("X-H{i}: v\r\n")).collect();
        format!(
            "{}{many}X-Filler: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{SESSION_INFO}",
            head(port, &token),
            "a".repeat(filler),
            SESSION_INFO.len()
        )
    };
    let at_limit = with_headers(100, 0);
    let (reply, _, took) = exchange(port, at_limit.as_bytes(), Duration::from_secs(5));
    assert_eq!(status_of(&reply), Some(200));
    eprintln!("figure: 100 header lines answered 200 in {took:?}");
    let over = with_headers(101, 0);
    let (reply, closed, took) = exchange(port, over.as_bytes(), Duration::from_secs(5));
    assert_eq!(status_of(&reply), Some(431));
    assert!(closed, "the connection is ended after a 431");
    eprintln!("figure: 101 header lines answered 431 in {took:?}");
    // A head of exactly 64 KiB (up to its empty line), then one byte more.
    let short = with_headers(5, 0);
    let head_bytes = short.len() - SESSION_INFO.len();
    let filler = 64 * 1024 - head_bytes;
    let (reply, _, _) = exchange(
        port,
        with_headers(5, filler).as_bytes(),
        Duration::from_secs(5),
    );
    assert_eq!(status_of(&reply), Some(200), "a 64 KiB head is answered");
    let (reply, closed, took) = exchange(
        port,
        with_headers(5, filler + 1).as_bytes(),
        Duration::from_secs(5),
    );
    assert_eq!(status_of(&reply), Some(431), "a head of 64 KiB + 1 byte");
    assert!(closed);
    assert!(String::from_utf8_lossy(&reply).contains("header lines"));
    eprintln!("figure: a head 1 byte over 64 KiB answered 431 in {took:?}");
    assert_eq!(good_call(port, &token), 200);
    serve.stop();
}

#[test]
fn other_protocols_get_no_tool_and_others_are_served() {
    let (_dirs, serve, token) = serve("protocols");
    let port = serve.port;
    // HTTP/0.9: refused at once.
    let (reply, _, _) = exchange(port, b"GET /call\r\n", Duration::from_secs(5));
    assert_eq!(
        status_of(&reply),
        Some(400),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    // An HTTP/2 preface and a TLS ClientHello: never a success; others are served while
    // they sit (the reaper ends them at 15 s: see the ignored slowloris test).
    let h2 = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00";
    let mut hello = vec![
        0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03,
    ];
    hello.extend_from_slice(&[0u8; 32]);
    hello.extend_from_slice(b"\x00\x00\x02\x13\x01\x01\x00");
    let sitting: Vec<_> = [h2.to_vec(), hello]
        .into_iter()
        .map(|bytes| thread::spawn(move || exchange(port, &bytes, Duration::from_secs(2))))
        .collect();
    for _ in 0..10 {
        assert_eq!(good_call(port, &token), 200);
    }
    for handle in sitting {
        let (reply, _, _) = handle.join().unwrap();
        assert!(
            statuses(&reply).iter().all(|s| *s >= 400),
            "{}",
            String::from_utf8_lossy(&reply)
        );
    }
    serve.stop();
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (_dirs, serve, token) = serve("pipeline");
    let port = serve.port;
    let one = |body: &str, token: &str| {
        format!(
            "{}Content-Length: {}\r\n\r\n{body}",
            head(port, token),
            body.len()
        )
    };
    let guide = r#"{"operation":"guide_read","args":{"topic":"canvas"}}"#;
    let bad = r#"{"operation":"nope","args":{}}"#;
    let list = r#"{"operation":"canvas_list","args":{}}"#;
    // Over 1 KiB: tiny_http leaves the body on the socket, so a handler reads it.
    let padded = format!(
        r#"{{"operation":"session_info","args":{{}}{}}}"#,
        " ".repeat(2000)
    );
    // Answered by the accept thread, the project worker (queued) and handlers, in turn.
    let pipelined = [
        one(SESSION_INFO, &token),
        one(list, &token),
        one(bad, &token),
        one(guide, "f".repeat(64).as_str()),
        one(&padded, &token),
        one(guide, &token),
        one(list, &token),
        one(SESSION_INFO, &token),
    ]
    .concat();
    let (reply, _, _) = exchange(port, pipelined.as_bytes(), Duration::from_secs(3));
    assert_eq!(statuses(&reply), [200, 200, 400, 401, 200, 200, 200, 200]);
    let text = String::from_utf8_lossy(&reply);
    let answers: Vec<&str> = text.split("HTTP/1.1 ").skip(1).collect();
    let expected = [
        "\"nodeId\"",
        "\"position\"",
        "Unknown operation",
        "Unknown or revoked",
        "\"nodeId\"",
        "\"guide\"",
        "\"position\"",
        "\"nodeId\"",
    ];
    assert_eq!(answers.len(), expected.len(), "{text}");
    for (answer, needle) in answers.iter().zip(expected) {
        assert!(answer.contains(needle), "{needle} not in {answer}");
    }
    serve.stop();
}

#[test]
fn smuggling_with_both_lengths_is_refused_and_the_inner_call_never_runs() {
    let t = common::start("smuggle");
    let port = t.port;
    let inner = common::post_bytes(
        port,
        Some(&t.session.token),
        &common::op("canvas_list", json!({})),
    );
    let mut smuggled = b"0\r\n\r\n".to_vec();
    smuggled.extend_from_slice(&inner);
    let mut request = format!(
        "{}Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
        head(port, &t.session.token),
        smuggled.len()
    )
    .into_bytes();
    request.extend_from_slice(&smuggled);
    let (reply, closed, _) = exchange(port, &request, Duration::from_secs(5));
    // Ours, then possibly tiny_http's own 400 for the bytes it had already buffered.
    let text = String::from_utf8_lossy(&reply);
    assert_eq!(statuses(&reply)[0], 400, "{text}");
    assert!(statuses(&reply).iter().all(|s| *s == 400), "{text}");
    assert!(text.contains("Unsupported request"), "{text}");
    assert!(closed, "the connection is closed after a smuggling attempt");
    // The reverse order of the two headers too.
    let request = format!(
        "{}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        head(port, &t.session.token)
    );
    let (reply, _, _) = exchange(port, request.as_bytes(), Duration::from_secs(5));
    assert_eq!(statuses(&reply).first(), Some(&400));
    assert!(t.app.executed().is_empty(), "{:?}", t.app.executed());
    t.server.close();
}

/// CVE-2026-66752 (tiny_http 0.12 reads any Transfer-Encoding as chunked): a request
/// whose Transfer-Encoding is not exactly `chunked`, followed by an empty chunk and a
/// second request, gets 400 and its connection closed (RFC 9112 6.3); the second request
/// never runs.
#[test]
fn a_transfer_encoding_other_than_chunked_is_refused_and_ends_the_connection() {
    let t = common::start("te-smuggle");
    let port = t.port;
    let inner = common::post_bytes(
        port,
        Some(&t.session.token),
        &common::op("canvas_list", json!({})),
    );
    let heads = [
        "Transfer-Encoding: chunked, identity\r\n",
        "Transfer-Encoding: identity\r\n",
        "Transfer-Encoding: xchunked\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: \r\n",
    ];
    for (i, encoding) in heads.iter().enumerate() {
        // With and without a token: the framing is refused before anything else. The
        // second request after an empty chunk, or right after the head.
        let token = if i % 2 == 0 {
            t.session.token.as_str()
        } else {
            "x"
        };
        for empty_chunk in ["0\r\n\r\n", ""] {
            let mut request =
                format!("{}{encoding}\r\n{empty_chunk}", head(port, token)).into_bytes();
            request.extend_from_slice(&inner);
            let (reply, closed, _) = exchange(port, &request, Duration::from_secs(5));
            let text = String::from_utf8_lossy(&reply);
            // Ours, then possibly tiny_http's own 400 for the bytes it had buffered.
            let statuses = statuses(&reply);
            assert_eq!(statuses.first(), Some(&400), "{encoding:?}: {text}");
            assert!(statuses.iter().all(|s| *s == 400), "{encoding:?}: {text}");
            assert!(text.contains("Unsupported request"), "{encoding:?}: {text}");
            assert!(closed, "{encoding:?}: the connection stays open");
        }
    }
    // `chunked` alone, in any case, is read as before.
    let body = common::op("session_info", json!({}));
    let request = format!(
        "{}Transfer-Encoding: Chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        head(port, &t.session.token),
        body.len()
    );
    let (reply, _, _) = exchange(port, request.as_bytes(), Duration::from_secs(2));
    assert_eq!(
        statuses(&reply).first(),
        Some(&200),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert!(t.app.executed().is_empty(), "{:?}", t.app.executed());
    t.server.close();
}

/// CVE-2026-66753 (CR or LF inside a header value): nothing a request sends ever appears
/// in an answer's header lines.
#[test]
fn no_request_byte_reaches_an_answers_headers() {
    let t = common::start("crlf");
    let port = t.port;
    let body = common::op("session_info", json!({}));
    for value in [
        "a\rInjected-A: 1",
        "a\nInjected-B: 1",
        "a\r\n Injected-C: 1",
        "Injected-D: 1\r\r\n",
    ] {
        for (name, token) in [("X-Probe", t.session.token.as_str()), ("Authorization", "")] {
            let mut request = head(port, token);
            if name == "Authorization" {
                request = format!("POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
            }
            request.push_str(&format!(
                "{name}: {value}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ));
            let (reply, _, _) = exchange(port, request.as_bytes(), Duration::from_secs(5));
            let text = String::from_utf8_lossy(&reply);
            assert!(!statuses(&reply).is_empty(), "{value:?}: no answer");
            // Every answer's head (a value cut short may leave bytes tiny_http answers too).
            for (at, _) in text.match_indices("HTTP/1.1 ") {
                let head = text[at..].split("\r\n\r\n").next().unwrap_or_default();
                assert!(!head.contains("Injected"), "{value:?}: {text}");
            }
        }
    }
    t.server.close();
}

fn raise_fd_limit() {
    // As before, a failure is not fatal here: the 2000 connects below say what they hit.
    let _ = sys::raise_open_files_limit_to_hard();
}

#[test]
fn two_thousand_idle_connections_are_cut_back_and_others_are_served() {
    raise_fd_limit();
    let (_dirs, serve, token) = serve("idle");
    let (port, pid) = (serve.port, serve.pid());
    let idle_before = counts(pid);
    let mut idle = Vec::new();
    for _ in 0..2000 {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => idle.push(stream),
            Err(e) => panic!("connect {} failed: {e}", idle.len()),
        }
    }
    let mut peak = counts(pid);
    for _ in 0..16 {
        assert_eq!(good_call(port, &token), 200);
        let now = counts(pid);
        peak = (peak.0.max(now.0), peak.1.max(now.1));
    }
    // Within a few reaper periods (tiny_http's idle pool threads linger 5 s), only the
    // newest 256 quiet connections are left.
    let bound = (idle_before.0 + 256 + 16, idle_before.1 + 2 * 256 + 16);
    let settled = serve_harness::poll("counts to settle", Duration::from_secs(15), || {
        let now = counts(pid);
        (now.0 <= bound.0 && now.1 <= bound.1).then_some(now)
    });
    let ended = idle
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            // End-of-file (0) or a reset: ended. Would block: still open.
            match (&**s).read(&mut [0u8; 1]) {
                Ok(n) => n == 0,
                Err(e) => e.kind() != ErrorKind::WouldBlock,
            }
        })
        .count();
    eprintln!(
        "figure: 2,000 idle connections: threads/fds before {idle_before:?}, peak {peak:?}, settled {settled:?}; {ended} ended by the server"
    );
    assert!(ended >= 2000 - 256 - 16, "{ended}");
    assert_eq!(good_call(port, &token), 200);
    drop(idle);
    serve.stop();
}

/// Header-only slowloris: 200 connections sending one header byte a second while 16
/// clients keep calling. Every call succeeds; every slow connection is cut at ~15 s.
#[test]
#[ignore = "heavy: ~20 s; run with --ignored"]
fn header_slowloris_is_cut_at_15_s_while_good_clients_succeed() {
    let (_dirs, serve, token) = serve("slowloris");
    let port = serve.port;
    let began = Instant::now();
    let mut slow: Vec<(TcpStream, Option<Duration>)> = (0..200)
        .map(|_| (TcpStream::connect(("127.0.0.1", port)).unwrap(), None))
        .collect();
    // A TLS ClientHello's start sits like a slow head. (An HTTP/2 preface is answered
    // 505 at once: `http2_request_lines_are_answered_and_their_threads_end`.)
    let mut sitting: Vec<(TcpStream, Option<Duration>)> = Vec::new();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0xa5, 0x01])
        .unwrap();
    sitting.push((stream, None));
    let request = head(port, &token).into_bytes();
    let calls = Arc::new(AtomicUsize::new(0));
    let stop_at = began + Duration::from_secs(18);
    let good: Vec<_> = (0..16)
        .map(|_| {
            let (token, calls) = (token.clone(), calls.clone());
            thread::spawn(move || {
                while Instant::now() < stop_at {
                    assert_eq!(good_call(port, &token), 200);
                    calls.fetch_add(1, Ordering::Relaxed);
                    thread::sleep(Duration::from_millis(50));
                }
            })
        })
        .collect();
    let mut byte = 0;
    while Instant::now() < began + Duration::from_secs(19) {
        for (stream, cut) in slow.iter_mut().chain(sitting.iter_mut()) {
            if cut.is_some() {
                continue;
            }
            stream.set_nonblocking(true).unwrap();
            let mut probe = [0u8; 256];
            let closed = match stream.read(&mut probe) {
                Ok(_) => true, // an answer or end-of-file: either way no longer waiting
                Err(e) => e.kind() != ErrorKind::WouldBlock,
            };
            let sent = byte >= request.len() || stream.write_all(&request[byte..=byte]).is_ok();
            if closed || !sent {
                *cut = Some(began.elapsed());
            }
        }
        byte += 1;
        thread::sleep(Duration::from_secs(1));
    }
    for handle in good {
        handle.join().unwrap();
    }
    let cuts: Vec<Duration> = slow
        .iter()
        .chain(sitting.iter())
        .filter_map(|(_, cut)| *cut)
        .collect();
    let (first, last) = (cuts.iter().min().copied(), cuts.iter().max().copied());
    eprintln!(
        "figure: slowloris 200 + a TLS preface: {} cut, first at {first:?}, last at {last:?}; {} good calls all 200",
        cuts.len(),
        calls.load(Ordering::Relaxed)
    );
    assert_eq!(cuts.len(), 201, "every slow connection is cut");
    assert!(first.unwrap() >= Duration::from_secs(14), "{first:?}");
    assert!(last.unwrap() <= Duration::from_secs(18), "{last:?}");
    assert!(calls.load(Ordering::Relaxed) >= 16);
    serve.stop();
}

/// A client that declares 10^14 bytes and sends its body as fast as it can, with the
/// token (refused for its declared length) and without (refused as unknown): the server
/// answers 400 or 401 and ends the connection instead of reading the body, so the
/// client's writing fails long before [`STREAM_BYTES`]; a `sticky_open` smuggled at the
/// start of the body never runs; threads and descriptors come back.
#[test]
fn a_huge_body_being_sent_is_not_read_and_its_connection_ends() {
    const STREAM_BYTES: usize = 1 << 30;
    let (_dirs, serve, token) = serve("huge-stream");
    let (port, pid) = (serve.port, serve.pid());
    let before = counts(pid);
    let smuggled = json!({"operation": "sticky_open", "args": {"text": "smuggled"}}).to_string();
    let inner = format!(
        "{}Content-Length: {}\r\n\r\n{smuggled}",
        head(port, &token),
        smuggled.len()
    );
    for (auth, expected) in [(true, 400), (false, 401)] {
        let mut outer = if auth {
            head(port, &token)
        } else {
            format!("POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n")
        };
        outer.push_str("Content-Length: 99999999999999\r\n\r\n");
        outer.push_str(&inner);
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(outer.as_bytes()).unwrap();
        let mut reader = stream.try_clone().unwrap();
        let writer = thread::spawn(move || {
            let chunk = vec![b' '; 64 * 1024];
            let mut sent = 0;
            while sent < STREAM_BYTES {
                match stream.write(&chunk) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return (sent, true),
                }
            }
            (sent, false)
        });
        reader
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut reply = Vec::new();
        let _ = reader.read_to_end(&mut reply);
        let (sent, cut) = writer.join().unwrap();
        let with = if auth { "token" } else { "no token" };
        eprintln!(
            "figure: 10^14 declared, body streamed ({with}): answered {:?}, writing failed after {sent} bytes",
            status_of(&reply)
        );
        assert_eq!(
            status_of(&reply),
            Some(expected),
            "{}",
            String::from_utf8_lossy(&reply)
        );
        assert!(
            cut,
            "the server ended the connection before {STREAM_BYTES} bytes"
        );
    }
    let (status, list) = serve.call_token(&token, "canvas_list", json!({}));
    assert_eq!(status, 200);
    assert!(
        !list.to_string().contains("smuggled"),
        "the smuggled call never ran: {list}"
    );
    let after = serve_harness::poll("the threads to end", Duration::from_secs(20), || {
        let now = counts(pid);
        // tiny_http's pool keeps up to 4 idle threads for good, and handlers linger 5 s;
        // alone this ends at +8 threads; under the whole suite's load it once stayed above +8
        // for 20 s. A thread kept per request would be +60.
        (now.0 <= before.0 + 10 && now.1 <= before.1 + 4).then_some(now)
    });
    eprintln!("figure: threads/descriptors {before:?} -> {after:?}");
    serve.stop();
}

/// A request line with `HTTP/2.0` or `HTTP/3.0` is answered 505 and its connection
/// closed at once, so its tiny_http thread ends. (Unpatched tiny_http 0.12 answered it
/// with a writer that waited for the request's own, which the request still held: the
/// thread blocked for the life of the process, one per line, without a token.) Through
/// 4,000 such lines from 20 clients, serve's threads and descriptors come back to where
/// they were, and a good client is answered.
#[test]
fn http2_request_lines_are_answered_and_their_threads_end() {
    let (_dirs, serve, token) = serve("http2-lines");
    let (port, pid) = (serve.port, serve.pid());
    let before = counts(pid);
    const CONNECTIONS: usize = 4000;
    const CLIENTS: usize = 20;
    let (sent, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let (sent, finished) = (sent.clone(), finished.clone());
            thread::spawn(move || {
                let version = if n % 2 == 0 { "HTTP/2.0" } else { "HTTP/3.0" };
                let line = format!("GET /call {version}\r\nHost: 127.0.0.1:{port}\r\n\r\n");
                let mut answers = Vec::new();
                while sent.fetch_add(1, Ordering::Relaxed) < CONNECTIONS {
                    let (reply, closed, _) =
                        exchange(port, line.as_bytes(), Duration::from_secs(10));
                    answers.push((status_of(&reply), closed));
                    if answers.last() != Some(&(Some(505), true)) {
                        break; // the assertion below reports it
                    }
                }
                finished.fetch_add(1, Ordering::Relaxed);
                answers
            })
        })
        .collect();
    let mut good = 0;
    loop {
        assert_eq!(good_call(port, &token), 200);
        good += 1;
        if finished.load(Ordering::Relaxed) == CLIENTS {
            break;
        }
    }
    let answers: Vec<_> = clients
        .into_iter()
        .flat_map(|client| client.join().unwrap())
        .collect();
    let answered = answers
        .iter()
        .filter(|answer| **answer == (Some(505), true))
        .count();
    let after = serve_harness::poll("the threads to end", Duration::from_secs(20), || {
        let now = counts(pid);
        // tiny_http's pool keeps up to 4 idle threads for good, and handlers linger 5 s;
        // alone this ends at +8 threads; under the whole suite's load it once stayed above +8
        // for 20 s. A thread kept per request would be +60.
        (now.0 <= before.0 + 10 && now.1 <= before.1 + 4).then_some(now)
    });
    eprintln!(
        "figure: {CONNECTIONS} HTTP/2.0|3.0 request lines from {CLIENTS} clients: {answered} answered 505 and closed; threads/descriptors {before:?} -> {after:?}; {good} good calls meanwhile"
    );
    assert_eq!(
        answered, CONNECTIONS,
        "every line is answered 505 and closed"
    );
    serve.stop();
}

/// What a head flood sends after its request line and first header name.
#[derive(Clone, Copy, Debug)]
enum Flood {
    /// One endless header line.
    OneLine,
    /// An endless series of short header lines.
    ManyLines,
}

/// Connections flooding at once, in each round, each followed by another when it ends,
/// for the round's time.
const FLOOD_CONNECTIONS: usize = 8;
const FLOOD_ROUND: Duration = Duration::from_secs(1);
/// What one flood connection sends at most, and for how long: far past the head limit
/// (64 KiB), so that a server without one shows it, and the test still ends by itself.
const FLOOD_BYTES: usize = 32 << 20;
const FLOOD_TIME: Duration = Duration::from_secs(10);
/// serve's resident memory may grow this much over idle through every round.
const FLOOD_RSS_BOUND: u64 = 64 << 20;

/// How one flood connection ended: bytes sent, time until the server cut it (or the
/// flood's bounds ended it), whether the server cut it, the answer's status if any.
#[derive(Debug)]
struct FloodEnd {
    sent: usize,
    took: Duration,
    cut: bool,
    status: Option<u16>,
}

/// Sends a head that never ends on `port`, without a token, until the server cuts the
/// connection or the flood's bounds are reached; then reads what the server answered.
fn flood(port: u16, kind: Flood) -> FloodEnd {
    let began = Instant::now();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let chunk = match kind {
        Flood::OneLine => vec![b'a'; 16 * 1024],
        Flood::ManyLines => b"X-Flood: aaaaaaaaaa\r\n".repeat(800),
    };
    let opening = format!("GET /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Flood: ");
    let mut cut = stream.write_all(opening.as_bytes()).is_err();
    let mut sent = 0;
    while !cut && sent < FLOOD_BYTES && began.elapsed() < FLOOD_TIME {
        match stream.write(&chunk) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => cut = true,
        }
    }
    let took = began.elapsed();
    // The answer, if it arrived before the connection was reset.
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut reply = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => {
                cut = true;
                break;
            }
            Ok(n) => reply.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(_) => {
                cut = true;
                break;
            }
        }
    }
    FloodEnd {
        sent,
        took,
        cut,
        status: status_of(&reply),
    }
}

/// serve's resident memory (`VmRSS`), in bytes.
fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Eight connections without a token, each sending one endless header line (then, in a
/// second round, an endless series of header lines), on the agents' port and on the
/// canvas view's: each is cut once its head passes 64 KiB (431, or simply closed, when
/// the reset overtakes the answer), serve's memory stays within 64 MiB of idle through
/// all four rounds (sampled every 100 ms), and a good client is answered meanwhile.
#[test]
fn head_floods_are_cut_at_the_head_limit_and_memory_stays_bounded() {
    let (_dirs, serve, token) = serve("head-flood");
    let pid = serve.pid();
    let view_url = serve.ready["viewUrl"].as_str().unwrap();
    let view_port: u16 = view_url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(port, _)| port.parse().ok())
        .unwrap();
    assert_eq!(good_call(serve.port, &token), 200);
    let idle = resident_bytes(pid);
    // The peak through every round, and through the current one.
    let peak = Arc::new(AtomicU64::new(idle));
    let round_peak = Arc::new(AtomicU64::new(idle));
    let flooding = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, round_peak, flooding) = (peak.clone(), round_peak.clone(), flooding.clone());
        thread::spawn(move || {
            while flooding.load(Ordering::Relaxed) {
                let now = resident_bytes(pid);
                peak.fetch_max(now, Ordering::Relaxed);
                round_peak.fetch_max(now, Ordering::Relaxed);
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let mut failures = Vec::new();
    for (port_name, port) in [("/call", serve.port), ("view", view_port)] {
        for kind in [Flood::OneLine, Flood::ManyLines] {
            let round_over = Arc::new(AtomicBool::new(false));
            let good_client = {
                let (token, round_over, port) = (token.clone(), round_over.clone(), serve.port);
                thread::spawn(move || {
                    let mut statuses = Vec::new();
                    while !round_over.load(Ordering::Relaxed) {
                        statuses.push(good_call(port, &token));
                        thread::sleep(Duration::from_millis(50));
                    }
                    statuses
                })
            };
            let round_start = resident_bytes(pid);
            round_peak.store(round_start, Ordering::Relaxed);
            let round_began = Instant::now();
            let floods: Vec<_> = (0..FLOOD_CONNECTIONS)
                .map(|_| {
                    thread::spawn(move || {
                        let mut ends = vec![flood(port, kind)];
                        while round_began.elapsed() < FLOOD_ROUND {
                            ends.push(flood(port, kind));
                        }
                        ends
                    })
                })
                .collect();
            let ends: Vec<FloodEnd> = floods.into_iter().flat_map(|f| f.join().unwrap()).collect();
            // Freed memory stays resident until trimmed: a growth the sampler missed
            // between two samples shows here.
            let now = resident_bytes(pid);
            peak.fetch_max(now, Ordering::Relaxed);
            round_peak.fetch_max(now, Ordering::Relaxed);
            round_over.store(true, Ordering::Relaxed);
            let good = good_client.join().unwrap();
            let slowest = ends.iter().map(|end| end.took).max().unwrap();
            let most_sent = ends.iter().map(|end| end.sent).max().unwrap();
            let cut = ends.iter().filter(|end| end.cut).count();
            let answered_431 = ends.iter().filter(|end| end.status == Some(431)).count();
            let good_summary = (good.len(), good.iter().filter(|s| **s == 200).count());
            eprintln!(
                "figure: {} connections ({FLOOD_CONNECTIONS} at a time) x {kind:?} on {port_name}: each ended after at most {slowest:?} and {most_sent} bytes sent; {cut} cut by serve, {answered_431} answered 431; RSS peaked {} MiB over the round's start; {} good calls, {} answered 200",
                ends.len(),
                round_peak.load(Ordering::Relaxed).saturating_sub(round_start) >> 20,
                good_summary.0,
                good_summary.1
            );
            for end in &ends {
                if !end.cut || end.status.is_some_and(|s| s != 431) {
                    failures.push(format!("{kind:?} on {port_name}: {end:?}"));
                }
            }
            if good.is_empty() || good.iter().any(|s| *s != 200) {
                failures.push(format!(
                    "{kind:?} on {port_name}: good calls {good_summary:?}"
                ));
            }
            let (status, _, _) = {
                let request = format!(
                    "GET / HTTP/1.1\r\nHost: 127.0.0.1:{view_port}\r\nConnection: close\r\n\r\n"
                );
                exchange(view_port, request.as_bytes(), Duration::from_secs(5))
            };
            if status_of(&status) != Some(200) {
                failures.push(format!(
                    "{kind:?} on {port_name}: the view's page not served"
                ));
            }
        }
    }
    flooding.store(false, Ordering::Relaxed);
    sampler.join().unwrap();
    let grew = peak.load(Ordering::Relaxed) - idle;
    eprintln!(
        "figure: head floods: idle RSS {} MiB, peak {} MiB over idle (bound {} MiB)",
        idle >> 20,
        grew >> 20,
        FLOOD_RSS_BOUND >> 20
    );
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        grew < FLOOD_RSS_BOUND,
        "RSS grew {} MiB over idle",
        grew >> 20
    );
    assert_eq!(good_call(serve.port, &token), 200);
    serve.stop();
}
