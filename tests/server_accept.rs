//! The accept path survives running out of file descriptors: tiny_http's own accept
//! thread ends on its first accept error, and the server must rebuild it.
//!
//! The server runs in a child process (this test binary re-executed with
//! `SERVER_ACCEPT_CHILD` set) whose `RLIMIT_NOFILE` is lowered, so it can exhaust its
//! descriptors without touching the other tests; the client is this process.
#![deny(unsafe_code)]

mod common;
mod sys;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const CHILD: &str = "SERVER_ACCEPT_CHILD";
const SESSION_INFO: &str = r#"{"operation":"session_info","args":{}}"#;

/// Lowers this process's soft `RLIMIT_NOFILE` to `limit`.
fn set_fd_limit(limit: u64) {
    sys::set_open_files_soft_limit(limit).expect("setrlimit RLIMIT_NOFILE");
}

/// The child: serve, exhaust descriptors on "exhaust", free them on "free", stop on EOF.
fn child() {
    set_fd_limit(256);
    let t = start("accept-child");
    println!("PORT {} {}", t.port, t.session.token);
    let mut held = Vec::new();
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().as_str() {
            "exhaust" => {
                while let Ok(file) = std::fs::File::open("/dev/null") {
                    held.push(file);
                }
                println!("EXHAUSTED {}", held.len());
            }
            "free" => {
                held.clear();
                println!("FREED");
            }
            _ => {}
        }
    }
    t.server.close();
}

/// A `session_info` answer on a fresh connection, if one comes within `wait`.
fn answered(port: u16, token: &str, wait: Duration) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(wait));
    if stream
        .write_all(&post_bytes(port, Some(token), SESSION_INFO))
        .is_err()
    {
        return false;
    }
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = stream.read(&mut chunk) {
        got.extend_from_slice(&chunk[..n]);
        if got.windows(9).any(|w| w == br#""ok":true"#) {
            return true;
        }
    }
    false
}

#[test]
fn the_server_answers_again_after_running_out_of_descriptors() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let mut server = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_server_answers_again_after_running_out_of_descriptors",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = server.stdin.take().unwrap();
    let mut from_child = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut expect = |prefix: &str| loop {
        let line = from_child.next().expect("the child is running").unwrap();
        // The harness may print its "test … " on the same line first.
        if let Some((_, rest)) = line.split_once(prefix) {
            return rest.to_string();
        }
    };
    let started = expect("PORT ");
    let (port, token) = started.split_once(' ').unwrap();
    let (port, token) = (port.parse::<u16>().unwrap(), token.to_string());
    // Kept open to the end: closing it would free descriptors in the child.
    let mut first = Client::connect(port);
    assert_eq!(first.call(Some(&token), SESSION_INFO).status, 200);

    writeln!(to_child, "exhaust").unwrap();
    expect("EXHAUSTED ");
    // This connection waits in the backlog; accepting it fails with EMFILE, which ends
    // tiny_http's accept thread.
    assert!(!answered(port, &token, Duration::from_millis(500)));

    writeln!(to_child, "free").unwrap();
    expect("FREED");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answered(port, &token, Duration::from_secs(2)) {
        assert!(Instant::now() < deadline, "the server never answered again");
    }
    drop((first, to_child));
    assert!(server.wait().unwrap().success());
}
