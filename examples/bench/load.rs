//! The load generator: N keep-alive HTTP/1.1 connections in a closed loop (each sends
//! its pre-built request, waits for the whole answer, sends again), a warm-up, a fixed
//! measured window with exact per-request latencies, and optionally one client that
//! trickles a large body at 1 byte a second.
//!
//! The connections are opened one at a time, each with one answered call before the
//! next is opened: opened all at once, tiny_http 0.12's connection pool can leave some
//! without a thread for the whole run (the bare baseline has no remedy for it; `serve`'s
//! reaper has, `src/server/unserved.rs`), which would only lower a figure. A connection
//! that still never gets an answer is counted ([`LoadResult::never_answered`]), and the
//! bench fails on it.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::procfs;

const WARMING: u8 = 0;
const MEASURING: u8 = 1;
const STOPPING: u8 = 2;

/// How long a blocked client read waits before it looks at the phase again.
const POLL: Duration = Duration::from_millis(200);
/// How long a new connection's first call may take before the next connection is opened.
const FIRST_ANSWER_WAIT: Duration = Duration::from_secs(5);

/// One run's shape.
pub struct LoadSpec {
    /// The server's address.
    pub addr: SocketAddr,
    /// The exact bytes each connection sends, one entry per connection.
    pub requests: Vec<Vec<u8>>,
    /// Unmeasured time before the window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// The server process, for CPU and thread samples.
    pub server_pid: u32,
    /// The status every answer should have (200, or 401 for the auth-only runs).
    pub expect: u16,
    /// One extra client trickling a body, started with the measured window.
    pub trickle: Option<TrickleSpec>,
}

/// The trickling client.
pub struct TrickleSpec {
    /// Request head (ends with the blank line) declaring `body_bytes`.
    pub head: Vec<u8>,
    /// Body bytes declared.
    pub body_bytes: usize,
    /// Give up watching after this long.
    pub limit: Duration,
}

/// What happened to the trickler.
#[derive(Clone, Debug)]
pub struct TrickleOutcome {
    /// How the server ended it: `408`, `closed`, … or `not cut` within the limit.
    pub how: String,
    /// Seconds from the head being sent to the cut (or the limit).
    pub after: Duration,
    /// Whether the server cut it at all.
    pub cut: bool,
}

/// One run's results.
pub struct LoadResult {
    /// Answers with the expected status inside the window.
    pub ok: u64,
    /// Other answers, broken connections and stalls inside the window.
    pub errors: u64,
    /// One example of an error, for the log.
    pub first_error: Option<String>,
    /// Latencies of the window's expected answers, sorted, in nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// The window's real length.
    pub window: Duration,
    /// Server CPU (user + system) spent inside the window, µs.
    pub server_cpu_us: u64,
    /// Most server threads seen during the window.
    pub peak_threads: u64,
    /// Connections (the first ones and any reconnection) that never got an answer.
    pub never_answered: u64,
    /// The trickler's fate, when there was one.
    pub trickle: Option<TrickleOutcome>,
}

impl LoadResult {
    /// Requests per second inside the window.
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// The `q` quantile of latency in milliseconds (0 when nothing was answered).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latencies_ns.is_empty() {
            return 0.0;
        }
        let index = ((self.latencies_ns.len() - 1) as f64 * q).round() as usize;
        self.latencies_ns[index] as f64 / 1e6
    }

    /// Server CPU per answered request, µs.
    pub fn cpu_per_request_us(&self) -> f64 {
        if self.ok == 0 {
            return 0.0;
        }
        self.server_cpu_us as f64 / self.ok as f64
    }
}

#[derive(Default)]
struct ClientTally {
    ok: u64,
    errors: u64,
    never_answered: u64,
    first_error: Option<String>,
    latencies_ns: Vec<u64>,
}

/// Runs one closed-loop load and returns what it measured.
pub fn run(spec: LoadSpec) -> io::Result<LoadResult> {
    let phase = Arc::new(AtomicU8::new(WARMING));
    // Connect everyone first, one at a time with one answered call each (module docs),
    // so connection set-up is not part of any window.
    let mut streams = Vec::new();
    for request in &spec.requests {
        let mut stream = reconnect_to(spec.addr)?;
        let answered = first_answer(&mut stream, request)?;
        streams.push((stream, answered));
    }
    let clients: Vec<_> = streams
        .into_iter()
        .zip(spec.requests.iter().cloned())
        .map(|((stream, answered), request)| {
            let (phase, addr, expect) = (phase.clone(), spec.addr, spec.expect);
            thread::spawn(move || client_loop(stream, answered, &request, addr, expect, &phase))
        })
        .collect();
    thread::sleep(spec.warmup);
    let start_sample = procfs::sample(spec.server_pid).unwrap_or_default();
    let started = Instant::now();
    phase.store(MEASURING, Ordering::SeqCst);
    let trickler = spec.trickle.map(|trickle| {
        let addr = spec.addr;
        thread::spawn(move || run_trickler(addr, &trickle))
    });
    let mut peak_threads = start_sample.threads;
    while started.elapsed() < spec.duration {
        thread::sleep(
            Duration::from_millis(100).min(spec.duration - started.elapsed().min(spec.duration)),
        );
        if let Some(now) = procfs::sample(spec.server_pid) {
            peak_threads = peak_threads.max(now.threads);
        }
    }
    phase.store(STOPPING, Ordering::SeqCst);
    let window = started.elapsed();
    let end = procfs::sample(spec.server_pid).unwrap_or_default();
    let mut result = LoadResult {
        ok: 0,
        errors: 0,
        first_error: None,
        latencies_ns: Vec::new(),
        window,
        server_cpu_us: end.cpu_us.saturating_sub(start_sample.cpu_us),
        peak_threads: peak_threads.max(end.threads),
        never_answered: 0,
        trickle: None,
    };
    for client in clients {
        let tally = client.join().unwrap_or_default();
        result.ok += tally.ok;
        result.errors += tally.errors;
        result.never_answered += tally.never_answered;
        result.first_error = result.first_error.or(tally.first_error);
        result.latencies_ns.extend(tally.latencies_ns);
    }
    result.latencies_ns.sort_unstable();
    result.trickle = trickler.and_then(|t| t.join().ok());
    Ok(result)
}

enum Failure {
    Stopped,
    Broken(String),
}

/// Sends `request` on the new `stream` and reads its answer, waiting at most
/// [`FIRST_ANSWER_WAIT`] for each read; whether it was answered.
fn first_answer(stream: &mut TcpStream, request: &[u8]) -> io::Result<bool> {
    stream.write_all(request)?;
    stream.set_read_timeout(Some(FIRST_ANSWER_WAIT))?;
    // With the phase already "stopping", `read_response` gives up at the first read
    // that times out.
    let give_up = AtomicU8::new(STOPPING);
    let answered = read_response(stream, &mut Vec::new(), &give_up).is_ok();
    stream.set_read_timeout(Some(POLL))?;
    Ok(answered)
}

/// `answered`: the connection `stream` already got an answer (its first call).
fn client_loop(
    mut stream: TcpStream,
    mut answered: bool,
    request: &[u8],
    addr: SocketAddr,
    expect: u16,
    phase: &AtomicU8,
) -> ClientTally {
    let mut tally = ClientTally::default();
    let mut buffer = Vec::with_capacity(8192);
    while phase.load(Ordering::Relaxed) != STOPPING {
        let sent = Instant::now();
        let outcome = stream
            .write_all(request)
            .map_err(|e| Failure::Broken(format!("write: {e}")))
            .and_then(|()| read_response(&mut stream, &mut buffer, phase));
        let latency = sent.elapsed();
        let measuring = phase.load(Ordering::Relaxed) == MEASURING;
        let reconnect = match outcome {
            Ok(answer) => {
                answered = true;
                if measuring && answer.status == expect {
                    tally.ok += 1;
                    tally.latencies_ns.push(latency.as_nanos() as u64);
                } else if measuring {
                    tally.errors += 1;
                    tally
                        .first_error
                        .get_or_insert_with(|| format!("status {}", answer.status));
                }
                answer.close
            }
            Err(Failure::Stopped) => break,
            Err(Failure::Broken(why)) => {
                if measuring {
                    tally.errors += 1;
                    tally.first_error.get_or_insert(why);
                }
                true
            }
        };
        if reconnect {
            buffer.clear();
            match reconnect_to(addr) {
                Ok(fresh) => {
                    tally.never_answered += u64::from(!answered);
                    (stream, answered) = (fresh, false);
                }
                Err(_) => {
                    thread::sleep(POLL);
                    continue;
                }
            }
        }
    }
    tally.never_answered += u64::from(!answered);
    tally
}

fn reconnect_to(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(POLL))?;
    Ok(stream)
}

struct Answer {
    status: u16,
    close: bool,
}

/// Reads one whole response (head + Content-Length body) from `stream`; bytes after it
/// stay in `buffer` for the next one.
fn read_response(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    phase: &AtomicU8,
) -> Result<Answer, Failure> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some(head_end) = find(buffer, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
            let status = head
                .get(9..12)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| Failure::Broken("no status line".into()))?;
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            let close = head
                .lines()
                .any(|l| l.starts_with("connection:") && l.contains("close"));
            let total = head_end + 4 + length;
            if buffer.len() >= total {
                buffer.drain(..total);
                return Ok(Answer { status, close });
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Failure::Broken("closed by server".into())),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if phase.load(Ordering::Relaxed) == STOPPING {
                    return Err(Failure::Stopped);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::Broken(format!("read: {e}"))),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Sends the head, then one body byte a second, watching for an answer or a close.
fn run_trickler(addr: SocketAddr, spec: &TrickleSpec) -> TrickleOutcome {
    let began = Instant::now();
    let outcome = |how: &str, cut: bool| TrickleOutcome {
        how: how.to_string(),
        after: began.elapsed(),
        cut,
    };
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return outcome("could not connect", false);
    };
    if stream.write_all(&spec.head).is_err() {
        return outcome("closed before the body", true);
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sent = 0;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while began.elapsed() < spec.limit {
        if sent < spec.body_bytes {
            if stream.write_all(b" ").is_err() {
                return outcome("closed (write failed)", true);
            }
            sent += 1;
        }
        // The read's timeout is the trickler's 1 s pace.
        let pace = Instant::now();
        match stream.read(&mut chunk) {
            Ok(0) if answer.is_empty() => return outcome("closed without an answer", true),
            Ok(0) => return outcome(&status_of(&answer), true),
            Ok(n) => {
                answer.extend_from_slice(&chunk[..n]);
                if find(&answer, b"\r\n\r\n").is_some() {
                    return outcome(&status_of(&answer), true);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return outcome("reset", true),
        }
        if let Some(rest) = Duration::from_secs(1).checked_sub(pace.elapsed()) {
            thread::sleep(rest);
        }
    }
    outcome("not cut", false)
}

fn status_of(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    match text.get(9..12) {
        Some(code) => code.to_string(),
        None => "answered (unparsed)".to_string(),
    }
}
