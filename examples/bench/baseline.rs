//! The baseline: a bare tiny_http server. One thread calls `recv` and does everything on
//! it: the same header checks as ours (Origin, method, path, Host, bearer token, declared
//! length), reading the body, and a fixed JSON answer: by default of the size of our
//! `session_info`; with `--answer OP=BYTES` (the bench passes one per operation it runs,
//! measured on ours) a request naming OP gets exactly BYTES, so each workload's baseline
//! writes as many bytes as ours. It is what tiny_http gives without any of our threads,
//! queues or JSON handling.
//!
//! `--handoffs` adds thread handoffs and nothing else, to show what they cost: `direct`
//! answers on another thread (our queued path: accept thread → project worker, which
//! answers), `queued` also passes each request from that thread to one worker thread,
//! which asks one owner thread and waits for its reply, and back (our path before the
//! accept thread routed calls itself: handler → project worker → canvas-owner thread →
//! worker → handler). Same std channels, no work.
//!
//! `--fsyncs N --fsync-dir DIR` writes N small new files in DIR and fsyncs each before its
//! ready line: as many fsyncs as ours waits for before its own ready line (the bench gives
//! the number), on the same file system, to show what that durability costs by itself.

use std::collections::HashSet;
use std::io::{BufRead, Read};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::json;
use termsprawl_tools::protocol::limits::MAX_BODY_BYTES;
use termsprawl_tools::protocol::AGENT_TOOLS;
use tiny_http::{Header, Method, Request, Response};

/// `baseline-server [--sessions N] [--handoffs none|direct|queued] [--answer OP=BYTES]...
/// [--fsyncs N --fsync-dir DIR]`: prints a ready line with its tokens and serves until its
/// stdin closes.
pub fn main(args: &[String]) -> Result<(), String> {
    let mut answers = Answers {
        default: fixed_answer(),
        by_operation: Vec::new(),
    };
    for pair in args
        .windows(2)
        .filter(|w| w[0] == "--answer")
        .map(|w| &w[1])
    {
        let (operation, bytes) = pair
            .split_once('=')
            .and_then(|(op, n)| Some((op, n.parse::<usize>().ok()?)))
            .ok_or_else(|| format!("--answer takes OP=BYTES, not {pair}"))?;
        let needle = format!("\"operation\":\"{operation}\"").into_bytes();
        answers.by_operation.push((needle, answer_of_size(bytes)));
    }
    let sessions: usize = crate::flag(args, "--sessions", 1)?;
    let handoffs: String = crate::flag(args, "--handoffs", "none".to_string())?;
    if !["none", "direct", "queued"].contains(&handoffs.as_str()) {
        return Err(format!(
            "--handoffs is none, direct or queued, not {handoffs}"
        ));
    }
    let fsyncs: usize = crate::flag(args, "--fsyncs", 0)?;
    if fsyncs > 0 {
        let dir: std::path::PathBuf = crate::flag(args, "--fsync-dir", std::path::PathBuf::new())?;
        write_durably(&dir, fsyncs).map_err(|e| format!("baseline: --fsyncs: {e}"))?;
    }
    let server =
        tiny_http::Server::http("127.0.0.1:0").map_err(|e| format!("baseline: bind: {e}"))?;
    let port = server
        .server_addr()
        .to_ip()
        .map(|a| a.port())
        .ok_or("baseline: not an IP listener")?;
    let tokens: Vec<String> = (0..sessions)
        .map(|_| random_token())
        .collect::<Result<_, _>>()?;
    let ready = json!({
        "ready": true,
        "url": format!("http://127.0.0.1:{port}/call"),
        "sessions": tokens.iter().map(|t| json!({"token": t})).collect::<Vec<_>>(),
    });
    println!("{ready}");
    let known: HashSet<String> = tokens.into_iter().collect();
    let answer = answers;
    let hosts = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    // Stop when the bench closes our stdin.
    thread::spawn(|| {
        let mut sink = String::new();
        while std::io::stdin().lock().read_line(&mut sink).unwrap_or(0) > 0 {}
        std::process::exit(0);
    });
    if handoffs == "none" {
        loop {
            let Ok(request) = server.recv() else { continue };
            answer_one(request, &known, &hosts, &answer);
        }
    }
    let shared = Arc::new((known, hosts, answer));
    let worker = (handoffs == "queued").then(start_worker);
    let handlers = Handlers::default();
    loop {
        let Ok(request) = server.recv() else { continue };
        let (shared, worker) = (shared.clone(), worker.clone());
        handlers.run(Box::new(move || {
            if let Some(worker) = worker {
                // handler -> worker -> owner -> worker -> handler, as a queued call.
                let (reply, answer) = channel::<()>();
                let _ = worker.send(reply);
                let _ = answer.recv();
            }
            let (known, hosts, answer) = &*shared;
            answer_one(request, known, hosts, answer);
        }));
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Handler threads like ours: an idle one is reused (each has its own channel), else a
/// new one starts.
#[derive(Clone, Default)]
struct Handlers {
    idle: Arc<Mutex<Vec<Sender<Job>>>>,
}

impl Handlers {
    fn run(&self, job: Job) {
        let idle = self.idle.lock().unwrap().pop();
        let job = match idle {
            Some(handler) => match handler.send(job) {
                Ok(()) => return,
                Err(returned) => returned.0,
            },
            None => job,
        };
        let idle = self.idle.clone();
        thread::spawn(move || {
            let mut job = job;
            loop {
                job();
                let (sender, jobs) = channel();
                idle.lock().unwrap().push(sender);
                match jobs.recv() {
                    Ok(next) => job = next,
                    Err(_) => return,
                }
            }
        });
    }
}

/// One worker thread that, for each request, asks one owner thread and waits for its
/// reply before answering the handler.
fn start_worker() -> Sender<Sender<()>> {
    let (to_owner, owner_jobs) = channel::<Sender<()>>();
    thread::spawn(move || {
        for reply in owner_jobs {
            let _ = reply.send(());
        }
    });
    let (to_worker, worker_jobs) = channel::<Sender<()>>();
    thread::spawn(move || {
        for reply in worker_jobs {
            let (acknowledge, acknowledged) = channel();
            let _ = to_owner.send(acknowledge);
            let _ = acknowledged.recv();
            let _ = reply.send(());
        }
    });
    to_worker
}

fn header<'r>(request: &'r Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// The answers: one per operation named by `--answer`, else `default`.
struct Answers {
    default: Vec<u8>,
    /// (`"operation":"OP"` as bytes, its answer).
    by_operation: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Answers {
    fn for_body(&self, body: &[u8]) -> &[u8] {
        self.by_operation
            .iter()
            .find(|(needle, _)| body.windows(needle.len()).any(|w| w == needle.as_slice()))
            .map_or(&self.default, |(_, answer)| answer)
    }
}

/// `{"ok":true,"value":{"pad":"xx…"}}` of exactly `bytes` bytes (or the shortest such
/// answer, when `bytes` is smaller).
fn answer_of_size(bytes: usize) -> Vec<u8> {
    let empty = br#"{"ok":true,"value":{"pad":""}}"#.len();
    let pad = "x".repeat(bytes.saturating_sub(empty));
    json!({"ok": true, "value": {"pad": pad}})
        .to_string()
        .into_bytes()
}

fn answer_one(
    mut request: Request,
    known: &HashSet<String>,
    hosts: &[String; 2],
    answers: &Answers,
) {
    let refused = if header(&request, "Origin").is_some()
        || *request.method() != Method::Post
        || request.url() != "/call"
        || !header(&request, "Host").is_some_and(|h| hosts.iter().any(|ok| ok == h))
    {
        Some((403, "Unsupported request"))
    } else if !header(&request, "Authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| known.contains(t.trim()))
    {
        Some((401, "Unknown or revoked session"))
    } else if request.body_length().is_some_and(|n| n > MAX_BODY_BYTES) {
        Some((400, "Request too large"))
    } else {
        None
    };
    let (status, body) = match refused {
        Some((status, message)) => (
            status,
            json!({"ok": false, "error": message})
                .to_string()
                .into_bytes(),
        ),
        None => {
            let mut body = Vec::new();
            let limit = (MAX_BODY_BYTES + 1) as u64;
            match request.as_reader().take(limit).read_to_end(&mut body) {
                Ok(_) if body.len() <= MAX_BODY_BYTES => (200, answers.for_body(&body).to_vec()),
                _ => (400, br#"{"ok":false,"error":"Request too large"}"#.to_vec()),
            }
        }
    };
    let content_type = Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
        .expect("a constant, valid header");
    let response = Response::from_data(body)
        .with_status_code(status)
        .with_header(content_type);
    let _ = request.respond(response);
}

/// A fixed answer shaped and sized like our `session_info` reply.
fn fixed_answer() -> Vec<u8> {
    let operations: Vec<&str> = AGENT_TOOLS
        .iter()
        .map(|t| t.name)
        .filter(|n| !n.starts_with("browser_"))
        .collect();
    json!({"ok": true, "value": {
        "nodeId": "bench-agent-0000", "projectId": "bench-project-0000",
        "instanceId": "0123456789abcdef0123456789abcdef", "host": "local",
        "status": {"state": "cli-fallback", "adapter": "external"},
        "appVersion": "development",
        "preferencesFile": "/dev/shm/termsprawl-bench/data/agent-tools/preferences.json",
        "guidesDirectory": "/dev/shm/termsprawl-bench/data/agent-tools/launch/bench-agent-0000/skills",
        "browserEnabled": false, "operations": operations,
    }})
    .to_string()
    .into_bytes()
}

/// Creates `count` new files of 64 bytes in `dir` (created if missing), each fsynced.
fn write_durably(dir: &std::path::Path, count: usize) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    for i in 0..count {
        let mut file = std::fs::File::create_new(dir.join(format!("durable-{i}.json")))?;
        file.write_all(&[b' '; 64])?;
        file.sync_all()?;
    }
    Ok(())
}

fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("random token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
