//! `bench viewer [--duration S] [--repeat N]`: what one open canvas view costs the agents'
//! calls. One `serve` (pinned like the main bench: server on CPU 0, clients on CPU 1) with
//! two tmux terminals, a sticky note and the bench agent on its canvas; `session_info` ×16
//! and `canvas_list` ×64 are run with no viewer and with one viewer, alternately, `--repeat`
//! times, and the medians compared.
//!
//! The viewer does what the page does (`src/host/view/view.js`): a long poll of
//! `/api/state` naming every node as in view (so both terminal screens are captured on
//! every tick), and a new poll as soon as one is answered. Its polls are stopped between
//! runs by a canvas change, so no waiting poll outlives its run.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use super::load::{self, LoadResult, LoadSpec};
use super::{flag, target};

const WORKLOADS: &[(&str, usize)] = &[("session_info", 16), ("canvas_list", 64)];

pub fn main(args: &[String]) -> Result<(), String> {
    let duration = Duration::from_secs_f64(flag(args, "--duration", 3.0)?);
    let repeat: usize = flag(args, "--repeat", 3)?.max(1);
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let serve = super::build_serve(&me)?;
    let (pins, affinity) = super::choose_pins();
    let dir = std::env::temp_dir().join(format!("termsprawl-bench-viewer-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("project")).map_err(|e| e.to_string())?;
    let mut command = Command::new(&serve);
    command.arg("serve").arg("--data").arg(dir.join("data"));
    command.arg("--project").arg(dir.join("project"));
    command.args([
        "--project-id",
        "bench",
        "--agent",
        "bench-agent",
        "--kill-terminals",
    ]);
    let server = target::spawn(command, &dir.join("stderr.log"), pins, false)?;
    let token = server.session(0)?.token;
    let view = server.view_url.clone().ok_or("serve printed no viewUrl")?;
    let (view_addr, key) = view_parts(&view)?;
    for title in ["build", "tests"] {
        let term = call(
            server.addr,
            &token,
            "terminal_open",
            json!({ "title": title }),
        )?;
        let id = term["nodeId"].as_str().unwrap_or_default().to_string();
        call(
            server.addr,
            &token,
            "terminal_submit",
            json!({ "nodeId": id, "command": "ls -la /" }),
        )?;
    }
    let sticky = call(
        server.addr,
        &token,
        "sticky_open",
        json!({ "text": "viewer bench" }),
    )?;
    let sticky = sticky["nodeId"].as_str().unwrap_or_default().to_string();
    thread::sleep(Duration::from_millis(500));

    eprintln!(
        "bench viewer: {affinity}; load average {}",
        super::load_average()
    );
    let mut rows = Vec::new();
    for &(operation, connections) in WORKLOADS {
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for round in 0..repeat {
            // Alternate which comes first, so drift in the machine's load hits both.
            for viewing in [round % 2 == 1, round % 2 == 0] {
                let viewer = viewing.then(|| Viewer::open(view_addr, &key));
                let result = run(&server, &token, operation, connections, duration)?;
                if let Some(viewer) = viewer {
                    let polls = viewer.close(|| {
                        let moved = json!({ "nodeId": sticky, "x": round as f64, "y": 0 });
                        call(server.addr, &token, "canvas_move", moved).map(drop)
                    })?;
                    eprintln!("bench viewer: {operation} x{connections} with a viewer ({polls} polls answered): {:.0} req/s", result.rate());
                    with.push(result);
                } else {
                    eprintln!(
                        "bench viewer: {operation} x{connections} without: {:.0} req/s",
                        result.rate()
                    );
                    without.push(result);
                }
            }
        }
        rows.push((operation, connections, median(without), median(with)));
    }
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);

    println!("| workload | no viewer req/s | one viewer req/s | ratio | p99 no viewer / viewer | CPU µs/req no viewer / viewer |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (operation, connections, without, with) in rows {
        println!(
            "| {operation} ×{connections} | {:.0} | {:.0} | {:.3}× | {:.3} / {:.3} ms | {:.1} / {:.1} |",
            without.rate(),
            with.rate(),
            with.rate() / without.rate(),
            without.quantile_ms(0.99),
            with.quantile_ms(0.99),
            without.cpu_per_request_us(),
            with.cpu_per_request_us()
        );
    }
    println!(
        "\n(median of {repeat} runs of {:.0} s each; {affinity})",
        duration.as_secs_f64()
    );
    Ok(())
}

fn run(
    server: &target::Server,
    token: &str,
    operation: &str,
    connections: usize,
    duration: Duration,
) -> Result<LoadResult, String> {
    let request = target::request(server.addr, token, &target::body(operation, 0));
    load::run(LoadSpec {
        addr: server.addr,
        requests: vec![request; connections],
        warmup: Duration::from_millis(500),
        duration,
        server_pid: server.pid,
        expect: 200,
        trickle: None,
    })
    .map_err(|e| format!("load: {e}"))
}

fn median(mut results: Vec<LoadResult>) -> LoadResult {
    results.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    results.swap_remove(results.len() / 2)
}

/// (address, key) of `http://127.0.0.1:PORT/#key=KEY`.
fn view_parts(url: &str) -> Result<(SocketAddr, String), String> {
    let rest = url.strip_prefix("http://").ok_or("viewUrl is not http")?;
    let (host, key) = rest.split_once("/#key=").ok_or("viewUrl has no key")?;
    let addr = host
        .parse()
        .map_err(|e| format!("viewUrl host {host}: {e}"))?;
    Ok((addr, key.to_string()))
}

/// One POST /call; the value of an `ok` answer.
fn call(addr: SocketAddr, token: &str, operation: &str, args: Value) -> Result<Value, String> {
    let body = json!({ "operation": operation, "args": args }).to_string();
    let head = format!(
        "POST /call HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let answer = exchange(addr, &(head + &body))?;
    let value: Value = serde_json::from_str(&answer).map_err(|e| format!("{operation}: {e}"))?;
    match value["ok"].as_bool() {
        Some(true) => Ok(value["value"].clone()),
        _ => Err(format!("{operation}: {value}")),
    }
}

/// Sends `request` on a new connection and returns the answer's body.
fn exchange(addr: SocketAddr, request: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    Ok(answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// A viewer polling like the page, on its own thread.
struct Viewer {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<Result<usize, String>>,
}

impl Viewer {
    fn open(addr: SocketAddr, key: &str) -> Viewer {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, key) = (stop.clone(), key.to_string());
        let thread = thread::spawn(move || {
            let (mut version, mut visible, mut polls) = (String::new(), String::new(), 0);
            while !flag.load(Ordering::SeqCst) {
                let request = format!(
                    "GET /api/state?viewer=00112233445566778899aabbccddeeff&since={version}&visible={visible} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
                );
                let answer: Value = serde_json::from_str(&exchange(addr, &request)?)
                    .map_err(|e| format!("view answer: {e}"))?;
                version = answer["version"].as_str().unwrap_or_default().to_string();
                let ids: Vec<&str> = answer["canvas"]["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|n| n["id"].as_str())
                    .collect();
                visible = ids.join(",");
                polls += 1;
            }
            Ok(polls)
        });
        Viewer { stop, thread }
    }

    /// Stops polling: `change` makes the canvas change so that the poll in flight is
    /// answered now. Returns how many polls were answered.
    fn close(self, change: impl FnOnce() -> Result<(), String>) -> Result<usize, String> {
        self.stop.store(true, Ordering::SeqCst);
        change()?;
        self.thread
            .join()
            .map_err(|_| "the viewer thread panicked".to_string())?
    }
}
