//! `session_info` latency from 16 keep-alive clients, without and with one more client
//! trickling a 100 kB body at 1 byte a second, measured in one run. The two conditions
//! alternate for several rounds, so a change in background load hits both alike.
//!
//! Usage: `cargo run --release --example server_load [-- SECONDS_PER_PHASE [ROUNDS]]`
//! (defaults 2 and 3).
#![deny(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus, ToolIdentity, ToolRequest};
use termsprawl_tools::server::{AgentToolServer, ServerCallbacks};

const CLIENTS: usize = 16;
const BODY: &str = r#"{"operation":"session_info","args":{}}"#;

struct App;

impl ServerCallbacks for App {
    fn execute(&self, _: &ToolIdentity, request: &ToolRequest) -> Result<Value, String> {
        Ok(Value::String(request.operation.clone()))
    }
    fn valid(&self, _: &ToolIdentity) -> bool {
        true
    }
    fn browser_enabled(&self) -> bool {
        false
    }
}

/// Sends one request and reads its answer; returns the status.
fn call(reader: &mut BufReader<TcpStream>, request: &[u8]) -> u16 {
    reader.get_mut().write_all(request).expect("send");
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header");
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("body");
    status
}

/// Runs the clients for `run` after `warm_up`; returns every latency measured in `run`.
fn measure(port: u16, token: &str, warm_up: Duration, run: Duration) -> (Vec<Duration>, usize) {
    let request = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    )
    .into_bytes();
    let start = Instant::now() + warm_up;
    let end = start + run;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let request = request.clone();
            thread::spawn(move || {
                let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                let mut reader = BufReader::new(stream);
                let (mut latencies, mut errors) = (Vec::new(), 0);
                loop {
                    let began = Instant::now();
                    if began >= end {
                        break;
                    }
                    let status = call(&mut reader, &request);
                    if began >= start {
                        latencies.push(began.elapsed());
                        errors += usize::from(status != 200);
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for client in clients {
        let (latencies, e) = client.join().expect("client");
        all.extend(latencies);
        errors += e;
    }
    all.sort();
    (all, errors)
}

fn report(label: &str, latencies: &[Duration], errors: usize, run: Duration) {
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "{label:<32} {:>9.0} req/s   p50 {:>7.1} µs   p99 {:>7.1} µs   errors {errors}",
        latencies.len() as f64 / run.as_secs_f64(),
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
    );
}

/// Starts a client that declares a 100 kB body and sends it a byte a second.
fn trickle(port: u16, token: &str, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    let head = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Length: 100000\r\n\r\n"
    );
    thread::spawn(move || {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.write_all(head.as_bytes()).expect("send");
        while !stop.load(Ordering::SeqCst) && stream.write_all(b" ").is_ok() {
            thread::sleep(Duration::from_millis(1000));
        }
    })
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let seconds = args.next().flatten().unwrap_or(2);
    let rounds = args.next().flatten().unwrap_or(3);
    let (warm_up, run) = (Duration::from_secs(1), Duration::from_secs(seconds));
    let data = std::env::temp_dir().join(format!("server-load-{}", std::process::id()));
    let server = AgentToolServer::new(&data, Arc::new(App)).expect("server");
    let port = server.start().expect("start").port;
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    let identity = ToolIdentity {
        node_id: "agent".into(),
        project_id: "project".into(),
    };
    let token = server
        .provision(&identity, status, false)
        .expect("provision")
        .token;

    println!(
        "{CLIENTS} keep-alive clients, session_info, {rounds} rounds of {seconds} s per condition (after 1 s warm-up each)"
    );
    let (mut plain, mut trickled) = ((Vec::new(), 0), (Vec::new(), 0));
    for _ in 0..rounds {
        let (latencies, errors) = measure(port, &token, warm_up, run);
        plain.0.extend(latencies);
        plain.1 += errors;
        let stop = Arc::new(AtomicBool::new(false));
        let trickler = trickle(port, &token, stop.clone());
        let (latencies, errors) = measure(port, &token, warm_up, run);
        trickled.0.extend(latencies);
        trickled.1 += errors;
        stop.store(true, Ordering::SeqCst);
        let _ = trickler.join();
    }
    let total = run * rounds as u32;
    plain.0.sort();
    trickled.0.sort();
    report("without a trickling client", &plain.0, plain.1, total);
    report(
        "with one client trickling 1 B/s",
        &trickled.0,
        trickled.1,
        total,
    );
    server.close();
    let _ = std::fs::remove_dir_all(&data);
}
