//! A page server for the browser tests, on 127.0.0.1:0: each connection on a thread of its
//! own, its request's head read (at most 16 KiB, within 5 s) and handed with the
//! connection to the test's `answer`, which writes the response (and reads a body it
//! expects).

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Starts the server; its base URL (`http://127.0.0.1:PORT`).
pub fn start(answer: impl Fn(TcpStream, &str) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let answer = Arc::new(answer);
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let answer = Arc::clone(&answer);
            thread::spawn(move || {
                if let Some(head) = read_head(&mut stream) {
                    answer(stream, &head);
                }
            });
        }
    });
    base
}

/// The request's head, up to its blank line; `None` when the client stops first.
fn read_head(stream: &mut TcpStream) -> Option<String> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}
