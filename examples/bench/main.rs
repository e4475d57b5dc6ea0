//! The side-by-side benchmark: `termsprawl-tools serve` against a bare tiny_http
//! server, one after the other on the same machine, the server pinned to CPU 0 and this
//! closed-loop load generator to CPU 1.
//!
//! ```text
//! cargo run --release --example bench -- [--duration S] [--warmup S] [--trickle S]
//!     [--starts N] [--repeat N] [--server-env K=V]... [--serve PATH] [--ours serve|lib] [--out DIR] [--skip-growth] [--quick]
//! ```
//!
//! Subcommands used by the bench itself (each a separate process so its CPU and memory
//! are read from /proc the same way as ours): `baseline-server [--sessions N]` and
//! `lib-server --data DIR [--sessions N] [--projects P]`. For profiling one workload
//! against a server you started (e.g. under `perf record`):
//! `load --port P --token T --pid PID [--operation OP] [--args JSON] [--connections N] [--duration S]`.
//! What an open canvas view costs the calls: `viewer [--duration S] [--repeat N]`
//! (`viewer.rs`). An embedder's canvas owner with a UI thread of its own, with and
//! without `current_list`: `owner-server --data DIR [--sessions N] [--current-list on|off]`
//! (`owner.rs`; `owner-ab.sh` runs `canvas_move` x16 on both side by side).
#![deny(unsafe_code)]

mod baseline;
mod libserver;
mod load;
mod owner;
mod procfs;
mod report;
// The bench's one unsafe module: thin libc wrappers, each with a `// SAFETY:` comment.
#[allow(unsafe_code)]
mod sys;
mod target;
mod validator;
mod viewer;

use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::str::FromStr;
use std::thread;
use std::time::{Duration, Instant};

use load::{LoadResult, LoadSpec, TrickleSpec};
use procfs::ProcSample;
use report::{line_plot, Series, Table};
use target::Server;

const USAGE: &str = "usage: cargo run --release --example bench -- [--duration S] [--warmup S] \
[--trickle S] [--starts N] [--repeat N] [--server-env K=V]... [--serve PATH] [--ours serve|lib] [--out DIR] [--skip-growth] [--quick]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("baseline-server") => baseline::main(&args[1..]),
        Some("lib-server") => libserver::main(&args[1..]),
        Some("owner-server") => owner::main(&args[1..]),
        Some("load") => load_only(&args[1..]),
        Some("viewer") => viewer::main(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Options::parse(&args).and_then(run_bench),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `load`: one closed-loop run against a running server, printed as one line.
fn load_only(args: &[String]) -> Result<(), String> {
    let port: u16 = flag(args, "--port", 0)?;
    let token: String = flag(args, "--token", String::new())?;
    let pid: u32 = flag(args, "--pid", 0)?;
    let operation: String = flag(args, "--operation", "canvas_list".to_string())?;
    let call_args: String = flag(args, "--args", "{}".to_string())?;
    let connections: usize = flag(args, "--connections", 64)?;
    let seconds: f64 = flag(args, "--duration", 5.0)?;
    if port == 0 || token.is_empty() || pid == 0 {
        return Err("load needs --port, --token and --pid".into());
    }
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let call_args: serde_json::Value =
        serde_json::from_str(&call_args).map_err(|e| format!("--args is not JSON: {e}"))?;
    let body = serde_json::json!({"operation": operation, "args": call_args}).to_string();
    let request = target::request(addr, &token, body.as_bytes());
    let result = load::run(LoadSpec {
        addr,
        requests: vec![request; connections],
        warmup: Duration::from_secs(1),
        duration: Duration::from_secs_f64(seconds),
        server_pid: pid,
        expect: 200,
        trickle: None,
    })
    .map_err(|e| format!("load: {e}"))?;
    println!(
        "{operation} x{connections}: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms, server CPU {:.1} µs/req, errors {}, connections never answered {}",
        result.rate(),
        result.quantile_ms(0.5),
        result.quantile_ms(0.99),
        result.cpu_per_request_us(),
        result.errors,
        result.never_answered
    );
    never_answered_failure(&[(format!("{operation} x{connections}"), result.never_answered)])
}

/// The bench's failure when any run had connections that never got an answer: their
/// figures are distorted (fewer clients than the row says), so they must not pass as a
/// result. `runs`: each run's label with its count of such connections.
fn never_answered_failure(runs: &[(String, u64)]) -> Result<(), String> {
    let failed: Vec<String> = runs
        .iter()
        .filter(|(_, count)| *count > 0)
        .map(|(label, count)| format!("{label}: {count}"))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "FAILED: connections that never got an answer (the runs' figures are not valid): {}",
        failed.join("; ")
    ))
}

/// The value after `name` in `args`, parsed; `default` when absent.
pub fn flag<T: FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} needs a valid value\n{USAGE}")),
    }
}

struct Options {
    warmup: Duration,
    duration: Duration,
    trickle: Duration,
    starts: usize,
    repeat: usize,
    server_env: Vec<(String, String)>,
    serve: Option<PathBuf>,
    /// Ours in the main rows: `serve` (the binary) or the library harness.
    ours_lib: bool,
    out: PathBuf,
    growth: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        const KNOWN: &[&str] = &[
            "--duration",
            "--warmup",
            "--trickle",
            "--starts",
            "--repeat",
            "--server-env",
            "--serve",
            "--ours",
            "--out",
            "--skip-growth",
            "--quick",
        ];
        for (i, arg) in args.iter().enumerate() {
            let is_value = i > 0 && !matches!(args[i - 1].as_str(), "--skip-growth" | "--quick");
            if arg.starts_with("--") && !KNOWN.contains(&arg.as_str())
                || !arg.starts_with("--") && !is_value
            {
                return Err(format!("unknown argument {arg}\n{USAGE}"));
            }
        }
        let quick = args.iter().any(|a| a == "--quick");
        let seconds = |name: &str, default: f64| -> Result<Duration, String> {
            let value: f64 = flag(args, name, default)?;
            Duration::try_from_secs_f64(value).map_err(|_| format!("{name} must be >= 0"))
        };
        let default_out = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench/results");
        Ok(Options {
            warmup: seconds("--warmup", if quick { 0.5 } else { 2.0 })?,
            duration: seconds("--duration", if quick { 1.0 } else { 3.0 })?,
            trickle: seconds("--trickle", 18.0)?,
            starts: flag(args, "--starts", 5)?.max(1),
            repeat: flag(args, "--repeat", 1)?.max(1),
            server_env: args
                .iter()
                .zip(args.iter().skip(1))
                .filter(|(flag, _)| *flag == "--server-env")
                .map(|(_, pair)| match pair.split_once('=') {
                    Some((k, v)) => Ok((k.to_string(), v.to_string())),
                    None => Err(format!("--server-env takes NAME=VALUE, not {pair}")),
                })
                .collect::<Result<_, _>>()?,
            serve: args
                .iter()
                .position(|a| a == "--serve")
                .and_then(|i| args.get(i + 1))
                .map(PathBuf::from),
            ours_lib: match flag::<String>(args, "--ours", "serve".into())?.as_str() {
                "serve" => false,
                "lib" => true,
                other => return Err(format!("--ours is serve or lib, not {other}")),
            },
            out: flag::<String>(args, "--out", String::new()).map(|o| {
                if o.is_empty() {
                    default_out
                } else {
                    PathBuf::from(o)
                }
            })?,
            growth: !args.iter().any(|a| a == "--skip-growth"),
        })
    }
}

/// Which server a run starts.
#[derive(Clone, Copy)]
enum Kind {
    Serve,
    /// `handoffs`: `none` (the bare baseline), `direct` or `queued`; `fsyncs` before its
    /// ready line (see `baseline`).
    Baseline {
        sessions: usize,
        handoffs: &'static str,
        fsyncs: usize,
    },
    Lib {
        sessions: usize,
        projects: usize,
    },
}

struct Bench {
    options: Options,
    /// (server CPU, client CPU) when pinning works.
    pins: Option<(usize, usize)>,
    affinity: String,
    me: PathBuf,
    serve: PathBuf,
    scratch: PathBuf,
    runs: usize,
    /// CPUs available before this thread was pinned to one.
    cpus: usize,
    load_before: String,
    /// Each run with connections that never got an answer: its label and how many.
    never_answered: RefCell<Vec<(String, u64)>>,
    /// The size of ours' answer to each operation the workloads call, measured first:
    /// the baselines answer each with as many bytes (`baseline-server --answer`).
    answer_sizes: Vec<(String, usize)>,
    /// Starts with the data on a disk (see [`Bench::starts_on_disk`]).
    disk_starts: Option<DiskStarts>,
    /// The median over alternating starts of ours' start time over the baseline's.
    start_ratio: f64,
}

/// Median starts with the data in `dir`: ours, the bare baseline, and the baseline making
/// ours' `fsyncs` first.
struct DiskStarts {
    dir: PathBuf,
    fsyncs: usize,
    ready: [Duration; 3],
    /// The median over the rounds of ours' time over each one's.
    ours_over: [f64; 3],
}

fn run_bench(options: Options) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    let serve = match &options.serve {
        Some(path) => path.clone(),
        None if options.ours_lib => PathBuf::new(),
        None => build_serve(&me)?,
    };
    let cpus = procfs::online_cpus();
    let (pins, affinity) = choose_pins();
    eprintln!("bench: {affinity}");
    let scratch_root = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let scratch = scratch_root.join(format!("termsprawl-bench-{}", std::process::id()));
    fs::create_dir_all(&scratch).map_err(|e| format!("create {}: {e}", scratch.display()))?;
    let mut bench = Bench {
        options,
        pins,
        affinity,
        me,
        serve,
        scratch,
        runs: 0,
        cpus,
        load_before: load_average(),
        never_answered: RefCell::default(),
        answer_sizes: Vec::new(),
        disk_starts: None,
        start_ratio: 0.0,
    };
    let outcome = bench.everything();
    let _ = fs::remove_dir_all(&bench.scratch);
    outcome
}

/// Builds the package's binaries (`termsprawl-tools`, `termsprawlctl`) into `target/release/`.
fn build_serve(me: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "--bins"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .map_err(|e| format!("run cargo build: {e}"))?;
    if !status.success() {
        return Err("cargo build --release --bins failed".into());
    }
    let release = me
        .parent()
        .and_then(Path::parent)
        .ok_or("the bench binary is not in target/release/examples")?;
    Ok(release.join("termsprawl-tools"))
}

fn choose_pins() -> (Option<(usize, usize)>, String) {
    if procfs::online_cpus() < 2 {
        return (
            None,
            "fewer than 2 CPUs available: server and client NOT pinned".into(),
        );
    }
    match sys::pin_current_thread(1) {
        Ok(()) => (
            Some((0, 1)),
            "server pinned to CPU 0, load generator to CPU 1 (sched_setaffinity)".into(),
        ),
        Err(e) => (
            None,
            format!("sched_setaffinity failed ({e}): server and client NOT pinned"),
        ),
    }
}

/// The main rows' workloads.
/// The bare baseline.
const BARE: Kind = Kind::Baseline {
    sessions: 1,
    handoffs: "none",
    fsyncs: 0,
};

/// The fsyncs `kind` waits for before its ready line on a fresh data directory: `serve
/// --agent` fsyncs `server.lock`, then `project.json` and the session file, each and its
/// folder after the rename (the private-file write rule, docs/protocol.md); `lib-server` has no canvas. Checked
/// with `strace -f -c -e trace=fsync` on the start (docs/performance.md).
fn start_fsyncs(kind: Kind) -> usize {
    match kind {
        Kind::Serve => 5,
        Kind::Lib { sessions, .. } => 1 + 2 * sessions,
        Kind::Baseline { fsyncs, .. } => fsyncs,
    }
}
/// The baseline with only thread handoffs added: our queued path (`direct`: one handoff,
/// the other thread answers), and the path before the HTTP front answered where calls
/// arrive (`queued`). `session_info` has no handoff: the bare baseline is its ceiling.
const HANDOFFS: &[(&str, usize, &str)] =
    &[("canvas_list", 64, "direct"), ("canvas_list", 64, "queued")];
const WORKLOADS: &[(&str, usize)] = &[
    ("session_info", 1),
    ("session_info", 16),
    ("session_info", 64),
    ("canvas_list", 1),
    ("canvas_list", 16),
    ("canvas_list", 64),
];
const BODY_SIZES: &[(usize, &str)] =
    &[(100, "100 B"), (8 * 1024, "8 KiB"), (120 * 1024, "120 KiB")];
const SESSION_COUNTS: &[usize] = &[1, 100, 10_000];
const PROJECT_COUNTS: &[usize] = &[1, 8, 64];
const TRICKLE_BODY: usize = 100_000;

/// How the figures are taken, printed with every report.
const METHOD: &str = "Method: every server is its own process; CPU is utime+stime of all its \
threads plus cutime+cstime of children it waited for (`tmux` clients) from `/proc/<pid>/stat` over the measured window divided by the requests answered in \
it; RSS is `VmRSS`/`VmHWM` and threads `Threads` from `/proc/<pid>/status`; start → ready is \
spawn → first stdout line (the ready line), the median of `--starts` starts with ours and the \
baseline taking turns; every run's folders are in `/dev/shm` (tmpfs, where fsync returns at \
once) when there is one, so the starts are measured again with them in the temporary directory, \
on a disk, beside the baseline making as many fsyncs as ours before its ready line. Each client thread owns one keep-alive connection \
and sends pre-built bytes, timing each request with `Instant`. Ours and the baseline stay up \
side by side and each workload runs on ours, then on the baseline (median of `--repeat` runs). \
The trickler declares 100,000 body bytes and sends one a second from the start of the window. \
Sessions: the server loads no session files at start and `serve --agent` ×10,000 would put \
10,000 nodes on the canvas, so the session curve uses `lib-server`, which calls \
`AgentToolServer::provision` N times (real session files) before `start`. Projects: `serve` \
has one project, so the project curve uses `lib-server` with 64 sessions spread over P \
projects. Body sizes pad a `session_info` request with JSON whitespace.\n\n";

/// Everything measured on one server process of the main comparison.
struct ProcessReport {
    ready: Duration,
    /// The body size of its answer to each of [`WORKLOADS`].
    answer_bytes: Vec<usize>,
    idle: ProcSample,
    peak_hwm_kib: u64,
    peak_threads: u64,
    settled: ProcSample,
    settle_time: Duration,
    loads: Vec<LoadResult>,
    bodies: Vec<LoadResult>,
    /// For each of [`WORKLOADS`], each of the `--repeat` pairs' ratios (ours / the
    /// baseline) of [`PAIR_MEASURES`] (empty on the baseline's report).
    pairs: Vec<Vec<[f64; 4]>>,
}

impl ProcessReport {
    /// Workload `i`'s pair ratios of [`PAIR_MEASURES`]`[measure]`, lowest first.
    fn sorted_pairs(&self, i: usize, measure: usize) -> Vec<f64> {
        let pairs = self.pairs.get(i).into_iter().flatten();
        let mut ratios: Vec<f64> = pairs.map(|pair| pair[measure]).collect();
        ratios.sort_by(f64::total_cmp);
        ratios
    }
}

/// What each back-to-back pair of runs compares: throughput, CPU per request, p50, p99.
const PAIR_MEASURES: [&str; 4] = ["reqPerS", "cpuUsPerReq", "p50Ms", "p99Ms"];

/// `ours` against `base` on each of [`PAIR_MEASURES`].
fn pair_ratios(ours: &LoadResult, base: &LoadResult) -> [f64; 4] {
    let q = |load: &LoadResult, q| load.quantile_ms(q);
    [
        ours.rate() / base.rate(),
        ours.cpu_per_request_us() / base.cpu_per_request_us(),
        q(ours, 0.5) / q(base, 0.5),
        q(ours, 0.99) / q(base, 0.99),
    ]
}

/// The trickle comparison on one process.
struct TrickleRun {
    without: LoadResult,
    with: LoadResult,
}

struct GrowthRow {
    label: String,
    ok: LoadResult,
    extra: Option<LoadResult>,
    idle: ProcSample,
    settled: ProcSample,
}

impl Bench {
    fn everything(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let us = if self.options.ours_lib {
            Kind::Lib {
                sessions: 1,
                projects: 1,
            }
        } else {
            Kind::Serve
        };
        self.answer_sizes = self.measure_answer_sizes(us)?;
        let durable = Kind::Baseline {
            sessions: 1,
            handoffs: "none",
            fsyncs: start_fsyncs(us),
        };
        let ([ours_ready, base_ready], [_, start_ratio]) = self.startups([us, BARE])?;
        self.start_ratio = start_ratio;
        self.disk_starts = self.starts_on_disk([us, BARE, durable])?;
        let [ours, base] = self.main_processes([us, BARE], [ours_ready, base_ready])?;
        let handoffs = self.handoff_runs()?;
        let ours_trickle = self.trickle_run(us)?;
        let base_trickle = self.trickle_run(BARE)?;
        let (sessions, projects) = if self.options.growth {
            (self.session_growth()?, self.project_growth()?)
        } else {
            (Vec::new(), Vec::new())
        };
        let validator = validator::measure(Duration::from_millis(20))?;
        eprintln!("bench: done in {:.0} s", started.elapsed().as_secs_f64());
        self.write_report(
            &ours,
            &base,
            &handoffs,
            &ours_trickle,
            &base_trickle,
            &sessions,
            &projects,
            &validator,
        )?;
        never_answered_failure(&self.never_answered.borrow())
    }

    fn command(&mut self, kind: Kind) -> Result<(Command, bool, PathBuf), String> {
        self.runs += 1;
        let dir = self.scratch.join(format!("run-{}", self.runs));
        let data = dir.join("data");
        let project = dir.join("project");
        fs::create_dir_all(&project).map_err(|e| format!("create {}: {e}", project.display()))?;
        let log = dir.join("stderr.log");
        Ok(match kind {
            Kind::Serve => {
                let mut command = Command::new(&self.serve);
                command
                    .arg("serve")
                    .arg("--data")
                    .arg(&data)
                    .arg("--project")
                    .arg(&project);
                command.args(["--project-id", "bench", "--agent", "bench-agent"]);
                (command, false, log)
            }
            Kind::Baseline {
                sessions,
                handoffs,
                fsyncs,
            } => {
                let mut command = Command::new(&self.me);
                command.args(["baseline-server", "--sessions", &sessions.to_string()]);
                command.args(["--handoffs", handoffs]);
                if fsyncs > 0 {
                    command.args(["--fsyncs", &fsyncs.to_string(), "--fsync-dir"]);
                    command.arg(&data);
                }
                for (operation, bytes) in &self.answer_sizes {
                    command.args(["--answer", &format!("{operation}={bytes}")]);
                }
                (command, true, log)
            }
            Kind::Lib { sessions, projects } => {
                let mut command = Command::new(&self.me);
                command.arg("lib-server").arg("--data").arg(&data);
                command.args([
                    "--sessions",
                    &sessions.to_string(),
                    "--projects",
                    &projects.to_string(),
                ]);
                (command, true, log)
            }
        })
    }

    fn spawn(&mut self, kind: Kind) -> Result<Server, String> {
        let (mut command, stops_on_eof, log) = self.command(kind)?;
        command.envs(self.options.server_env.iter().map(|(k, v)| (k, v)));
        target::spawn(command, &log, self.pins, stops_on_eof)
    }

    /// The size of ours' answer to each operation of [`WORKLOADS`].
    fn measure_answer_sizes(&mut self, us: Kind) -> Result<Vec<(String, usize)>, String> {
        let server = self.spawn(us)?;
        let token = server.session(0)?.token;
        let mut sizes: Vec<(String, usize)> = Vec::new();
        for (operation, _) in WORKLOADS {
            if !sizes.iter().any(|(op, _)| op == operation) {
                let bytes = target::answer_bytes(server.addr, &token, operation)?;
                sizes.push((operation.to_string(), bytes));
            }
        }
        server.stop();
        Ok(sizes)
    }

    /// [`startups`](Self::startups) with the runs' folders in the temporary directory
    /// when the scratch folder is in `/dev/shm`, where fsync costs nothing: what a start
    /// costs with its data on a disk (`None` when the scratch is there already).
    fn starts_on_disk(&mut self, kinds: [Kind; 3]) -> Result<Option<DiskStarts>, String> {
        if !self.scratch.starts_with("/dev/shm") {
            return Ok(None);
        }
        let dir = std::env::temp_dir().join(format!("termsprawl-bench-{}", std::process::id()));
        fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let shm = std::mem::replace(&mut self.scratch, dir.clone());
        let times = self.startups(kinds);
        self.scratch = shm;
        let _ = fs::remove_dir_all(&dir);
        let (ready, ours_over) = times?;
        Ok(Some(DiskStarts {
            dir: std::env::temp_dir(),
            fsyncs: start_fsyncs(kinds[0]),
            ready,
            ours_over,
        }))
    }

    /// Each kind's median spawn -> ready line time over `--starts` fresh starts, the
    /// kinds taking turns start by start (so noise from the machine falls on all), and
    /// the median over those rounds of the first kind's time over each kind's.
    fn startups<const N: usize>(
        &mut self,
        kinds: [Kind; N],
    ) -> Result<([Duration; N], [f64; N]), String> {
        let mut times: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::new());
        for _ in 0..self.options.starts {
            for (kind, times) in kinds.iter().zip(&mut times) {
                let server = self.spawn(*kind)?;
                times.push(server.ready_after);
                server.stop();
            }
        }
        let over_first = std::array::from_fn(|k| {
            let mut ratios: Vec<f64> = times[0]
                .iter()
                .zip(&times[k])
                .map(|(first, other)| first.as_secs_f64() / other.as_secs_f64())
                .collect();
            ratios.sort_by(f64::total_cmp);
            ratios[ratios.len() / 2]
        });
        let medians = times.map(|mut times| {
            times.sort();
            times[times.len() / 2]
        });
        Ok((medians, over_first))
    }

    fn load(
        &self,
        server: &Server,
        operation: &str,
        connections: usize,
        body_size: usize,
        trickle: bool,
    ) -> Result<LoadResult, String> {
        let body = target::body(operation, body_size);
        let mut requests = Vec::new();
        for i in 0..connections {
            let session = server.session(i % server.session_count().max(1))?;
            requests.push(target::request(server.addr, &session.token, &body));
        }
        let trickle = trickle
            .then(|| server.session(0))
            .transpose()?
            .map(|session| TrickleSpec {
                head: target::head(server.addr, &session.token, TRICKLE_BODY),
                body_bytes: TRICKLE_BODY,
                limit: self.options.trickle,
            });
        let duration = if trickle.is_some() {
            self.options.trickle
        } else {
            self.options.duration
        };
        let result = load::run(LoadSpec {
            addr: server.addr,
            requests,
            warmup: self.options.warmup,
            duration,
            server_pid: server.pid,
            expect: 200,
            trickle,
        })
        .map_err(|e| format!("load on {}: {e}", server.addr))?;
        self.log_run(
            &format!("{operation} x{connections} ({body_size} B)"),
            &result,
        );
        Ok(result)
    }

    /// Logs a run, and remembers it when connections never got an answer (the bench
    /// then fails once its report is written).
    fn log_run(&self, label: &str, result: &LoadResult) {
        eprintln!(
            "bench: {label}: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms, {:.1} µs CPU/req, {} errors{}, {} connections never answered",
            result.rate(),
            result.quantile_ms(0.5),
            result.quantile_ms(0.99),
            result.cpu_per_request_us(),
            result.errors,
            result.first_error.as_ref().map(|e| format!(" (first: {e})")).unwrap_or_default(),
            result.never_answered
        );
        if result.never_answered > 0 {
            let run = (label.to_string(), result.never_answered);
            self.never_answered.borrow_mut().push(run);
        }
    }

    /// Ours and the baseline side by side: both processes stay up, every workload runs
    /// on ours then on the baseline, and again, `--repeat` times (interleaving spreads
    /// any noise from the machine over both), and each side's run with the median
    /// throughput is kept; the pairs' ratios give the spread and the targets' verdicts.
    fn main_processes(
        &mut self,
        kinds: [Kind; 2],
        ready: [Duration; 2],
    ) -> Result<[ProcessReport; 2], String> {
        let mut servers = [self.spawn(kinds[0])?, self.spawn(kinds[1])?];
        let mut loads: [Vec<LoadResult>; 2] = Default::default();
        let mut bodies: [Vec<LoadResult>; 2] = Default::default();
        let mut pairs = Vec::new();
        let shapes = WORKLOADS
            .iter()
            .map(|(operation, connections)| (*operation, *connections, 0, false))
            .chain(
                BODY_SIZES
                    .iter()
                    .map(|(size, _)| ("session_info", 16, *size, true)),
            );
        for (operation, connections, size, is_body) in shapes {
            let mut runs: [Vec<LoadResult>; 2] = Default::default();
            for _ in 0..self.options.repeat {
                for side in 0..2 {
                    runs[side].push(self.load(
                        &servers[side],
                        operation,
                        connections,
                        size,
                        false,
                    )?);
                }
            }
            if !is_body {
                let pair = runs[0].iter().zip(&runs[1]);
                pairs.push(pair.map(|(o, b)| pair_ratios(o, b)).collect());
            }
            for (side, mut runs) in runs.into_iter().enumerate() {
                runs.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
                let median = runs.swap_remove(runs.len() / 2);
                if is_body {
                    bodies[side].push(median);
                } else {
                    loads[side].push(median);
                }
            }
        }
        for server in &mut servers {
            if !server.alive() {
                return Err(format!(
                    "a server died; stderr: {}",
                    target::tail(&server.log)
                ));
            }
        }
        let mut reports = Vec::new();
        let [loads_0, loads_1] = loads;
        let [bodies_0, bodies_1] = bodies;
        for ((server, loads), (bodies, ready)) in servers
            .into_iter()
            .zip([loads_0, loads_1])
            .zip([bodies_0, bodies_1].into_iter().zip(ready))
        {
            let (settled, settle_time) = settle(&server);
            let peak_threads = loads
                .iter()
                .chain(&bodies)
                .map(|l| l.peak_threads)
                .max()
                .unwrap_or(0);
            let token = server.session(0)?.token;
            let answer_bytes = WORKLOADS
                .iter()
                .map(|(operation, _)| target::answer_bytes(server.addr, &token, operation))
                .collect::<Result<_, _>>()?;
            reports.push(ProcessReport {
                ready,
                answer_bytes,
                idle: server.idle,
                peak_hwm_kib: settled.hwm_kib,
                peak_threads,
                settled,
                settle_time,
                loads,
                bodies,
                pairs: std::mem::take(&mut pairs),
            });
            server.stop();
        }
        let base = reports.pop().ok_or("no baseline report")?;
        let ours = reports.pop().ok_or("no report of ours")?;
        Ok([ours, base])
    }

    /// On one fresh process: 16 connections for the trickle window without, then with
    /// the trickler (the baseline's stuck `recv` thread makes "with" the last run).
    fn trickle_run(&mut self, kind: Kind) -> Result<TrickleRun, String> {
        let server = self.spawn(kind)?;
        let without = self.load_for(&server, "session_info", 16, self.options.trickle)?;
        let with = self.load(&server, "session_info", 16, 0, true)?;
        server.stop();
        Ok(TrickleRun { without, with })
    }

    /// `session_info`-style load for `duration` instead of `--duration`.
    fn load_for(
        &self,
        server: &Server,
        operation: &str,
        connections: usize,
        duration: Duration,
    ) -> Result<LoadResult, String> {
        let token = server.session(0)?.token;
        let body = target::body(operation, 0);
        let result = load::run(LoadSpec {
            addr: server.addr,
            requests: vec![target::request(server.addr, &token, &body); connections],
            warmup: self.options.warmup,
            duration,
            server_pid: server.pid,
            expect: 200,
            trickle: None,
        })
        .map_err(|e| format!("load on {}: {e}", server.addr))?;
        self.log_run(
            &format!("{operation} x{connections} without trickler"),
            &result,
        );
        Ok(result)
    }

    fn session_growth(&mut self) -> Result<Vec<GrowthRow>, String> {
        let mut rows = Vec::new();
        for &sessions in SESSION_COUNTS {
            let server = self.spawn(Kind::Lib {
                sessions,
                projects: 1,
            })?;
            let ok = self.load(&server, "session_info", 16, 0, false)?;
            // A well-formed token nobody holds: header checks + token lookup + a 401.
            let unknown = "0".repeat(64);
            let body = target::body("session_info", 0);
            let denied = load::run(LoadSpec {
                addr: server.addr,
                requests: vec![target::request(server.addr, &unknown, &body); 16],
                warmup: self.options.warmup,
                duration: self.options.duration,
                server_pid: server.pid,
                expect: 401,
                trickle: None,
            })
            .map_err(|e| format!("load: {e}"))?;
            self.log_run(&format!("401 with {sessions} sessions"), &denied);
            let idle = server.idle;
            let (settled, _) = settle(&server);
            server.stop();
            rows.push(GrowthRow {
                label: format!("{sessions}"),
                ok,
                extra: Some(denied),
                idle,
                settled,
            });
        }
        Ok(rows)
    }

    /// [`HANDOFFS`] on the baseline with those thread handoffs added (one process each).
    fn handoff_runs(&mut self) -> Result<Vec<LoadResult>, String> {
        let mut results = Vec::new();
        for &(operation, connections, handoffs) in HANDOFFS {
            let server = self.spawn(Kind::Baseline {
                sessions: 1,
                handoffs,
                fsyncs: 0,
            })?;
            results.push(self.load(&server, operation, connections, 0, false)?);
            server.stop();
        }
        Ok(results)
    }

    fn project_growth(&mut self) -> Result<Vec<GrowthRow>, String> {
        let mut rows = Vec::new();
        for &projects in PROJECT_COUNTS {
            let server = self.spawn(Kind::Lib {
                sessions: 64,
                projects,
            })?;
            let ok = self.load(&server, "canvas_list", 64, 0, false)?;
            let idle = server.idle;
            let (settled, _) = settle(&server);
            server.stop();
            rows.push(GrowthRow {
                label: format!("{projects}"),
                ok,
                extra: None,
                idle,
                settled,
            });
        }
        Ok(rows)
    }

    #[allow(clippy::too_many_arguments)]
    fn write_report(
        &self,
        ours: &ProcessReport,
        base: &ProcessReport,
        handoffs: &[LoadResult],
        ours_trickle: &TrickleRun,
        base_trickle: &TrickleRun,
        sessions: &[GrowthRow],
        projects: &[GrowthRow],
        validator: &[validator::ValidatorTime],
    ) -> Result<(), String> {
        let mut md = String::new();
        md.push_str("# termsprawl-tools bench\n\n");
        md.push_str(&format!(
            "Load average before → after: {} → {}. Command: `cargo run --release --example bench -- {}`{}.\n\n",
            self.load_before,
            load_average(),
            std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            if self.options.server_env.is_empty() {
                String::new()
            } else {
                format!(" (server environment: {:?})", self.options.server_env)
            }
        ));
        md.push_str(&format!(
            "{}. {}; warm-up {:.1} s, window {:.1} s per run (trickle runs {:.0} s); \
closed-loop keep-alive HTTP/1.1 clients. Ours = {}; baseline = a bare tiny_http server \
(one `recv` loop, same header checks, fixed answer). Growth curves use `lib-server` \
(our `AgentToolServer` with a trivial execute callback).\n\n",
            machine(self.cpus),
            self.affinity,
            self.options.warmup.as_secs_f64(),
            self.options.duration.as_secs_f64(),
            self.options.trickle.as_secs_f64(),
            if self.options.ours_lib {
                "`lib-server` (our `AgentToolServer` with a trivial execute callback, one project, one session)"
            } else {
                "`termsprawl-tools serve` (one project, one agent session, the headless canvas owner)"
            }
        ));

        md.push_str(METHOD);

        let mut main = Table::new(&[
            "workload",
            "conns",
            "ours req/s",
            "base req/s",
            "ratio",
            "ratio range",
            "answer bytes ours/base",
            "ours p50 ms",
            "base p50 ms",
            "ours p99 ms",
            "base p99 ms",
            "p99 ratio",
            "ours CPU µs/req",
            "base CPU µs/req",
            "CPU ratio",
            "errors ours/base",
            "never answered ours/base",
        ]);
        for (i, (operation, connections)) in WORKLOADS.iter().enumerate() {
            let (o, b) = (&ours.loads[i], &base.loads[i]);
            main.row(vec![
                operation.to_string(),
                connections.to_string(),
                format!("{:.0}", o.rate()),
                format!("{:.0}", b.rate()),
                ratio(o.rate(), b.rate()),
                {
                    let rates = ours.sorted_pairs(i, 0);
                    match (rates.first(), rates.last()) {
                        (Some(lowest), Some(highest)) => format!("{lowest:.2}–{highest:.2}×"),
                        _ => "–".into(),
                    }
                },
                format!("{} / {}", ours.answer_bytes[i], base.answer_bytes[i]),
                format!("{:.3}", o.quantile_ms(0.5)),
                format!("{:.3}", b.quantile_ms(0.5)),
                format!("{:.3}", o.quantile_ms(0.99)),
                format!("{:.3}", b.quantile_ms(0.99)),
                ratio(o.quantile_ms(0.99), b.quantile_ms(0.99)),
                format!("{:.1}", o.cpu_per_request_us()),
                format!("{:.1}", b.cpu_per_request_us()),
                ratio(o.cpu_per_request_us(), b.cpu_per_request_us()),
                format!("{}/{}", o.errors, b.errors),
                format!("{}/{}", o.never_answered, b.never_answered),
            ]);
        }
        md.push_str("## Throughput, latency, CPU\n\n");
        md.push_str(
            "Ratio range: the lowest and highest ours/base throughput ratio over the \
`--repeat` pairs of runs (each pair back to back).\n\n",
        );
        md.push_str(&main.markdown());
        self.write_json(ours, base)?;

        let mut process = Table::new(&["process", "ours", "baseline", "ratio"]);
        let mib = |kib: u64| kib as f64 / 1024.0;
        process.row(vec![
            "start → ready line (median)".into(),
            format!("{:.1} ms", ms(ours.ready)),
            format!("{:.1} ms", ms(base.ready)),
            ratio(ms(ours.ready), ms(base.ready)),
        ]);
        if let Some(DiskStarts {
            dir, fsyncs, ready, ..
        }) = &self.disk_starts
        {
            let [o, b, durable] = ready.map(ms);
            let dir = dir.display();
            process.row(vec![
                format!("start → ready line, data in {dir}"),
                format!("{o:.1} ms"),
                format!("{b:.1} ms"),
                ratio(o, b),
            ]);
            process.row(vec![
                format!("… the baseline also making ours' {fsyncs} fsyncs in {dir} first"),
                format!("{o:.1} ms"),
                format!("{durable:.1} ms"),
                ratio(o, durable),
            ]);
        }
        for (label, o, b) in [
            (
                "RSS idle (VmRSS)",
                mib(ours.idle.rss_kib),
                mib(base.idle.rss_kib),
            ),
            (
                "RSS peak after all loads (VmHWM)",
                mib(ours.peak_hwm_kib),
                mib(base.peak_hwm_kib),
            ),
            (
                "RSS after settling",
                mib(ours.settled.rss_kib),
                mib(base.settled.rss_kib),
            ),
            (
                "RssAnon idle (no code pages)",
                mib(ours.idle.anon_kib),
                mib(base.idle.anon_kib),
            ),
            (
                "RssAnon after settling",
                mib(ours.settled.anon_kib),
                mib(base.settled.anon_kib),
            ),
        ] {
            process.row(vec![
                label.into(),
                format!("{o:.1} MiB"),
                format!("{b:.1} MiB"),
                ratio(o, b),
            ]);
        }
        for (label, o, b) in [
            ("threads idle", ours.idle.threads, base.idle.threads),
            (
                "threads peak under load",
                ours.peak_threads,
                base.peak_threads,
            ),
            (
                "threads after settling",
                ours.settled.threads,
                base.settled.threads,
            ),
        ] {
            process.row(vec![
                label.into(),
                o.to_string(),
                b.to_string(),
                ratio(o as f64, b as f64),
            ]);
        }
        process.row(vec![
            "settling time (threads and RSS within 10 % of idle, at most 15 s)".into(),
            format!("{:.1} s", ours.settle_time.as_secs_f64()),
            format!("{:.1} s", base.settle_time.as_secs_f64()),
            "".into(),
        ]);
        md.push_str("\n## Process\n\n");
        md.push_str(&process.markdown());

        let without = (&ours_trickle.without, &base_trickle.without);
        let (ours_trickle, base_trickle) = (&ours_trickle.with, &base_trickle.with);
        let mut trickle = Table::new(&[
            "16 conns + 1 trickler (100 kB at 1 B/s)",
            "ours",
            "baseline",
        ]);
        let cut = |r: &LoadResult| {
            r.trickle
                .as_ref()
                .map(|t| format!("{} after {:.1} s", t.how, t.after.as_secs_f64()))
                .unwrap_or_else(|| "no trickler".into())
        };
        trickle.row(vec![
            "others served (req/s)".into(),
            format!("{:.0}", ours_trickle.rate()),
            format!("{:.0}", base_trickle.rate()),
        ]);
        trickle.row(vec![
            "others' p99 with / without".into(),
            format!(
                "{:.3} / {:.3} ms ({})",
                ours_trickle.quantile_ms(0.99),
                without.0.quantile_ms(0.99),
                ratio(ours_trickle.quantile_ms(0.99), without.0.quantile_ms(0.99))
            ),
            format!(
                "{:.3} / {:.3} ms",
                base_trickle.quantile_ms(0.99),
                without.1.quantile_ms(0.99)
            ),
        ]);
        trickle.row(vec![
            "errors".into(),
            ours_trickle.errors.to_string(),
            base_trickle.errors.to_string(),
        ]);
        trickle.row(vec![
            "connections never answered".into(),
            ours_trickle.never_answered.to_string(),
            base_trickle.never_answered.to_string(),
        ]);
        trickle.row(vec![
            "trickler cut".into(),
            cut(ours_trickle),
            cut(base_trickle),
        ]);
        let mut hops = Table::new(&[
            "workload",
            "conns",
            "handoffs added",
            "bare base req/s",
            "base + handoffs req/s",
            "handoffs alone cost",
            "ours req/s",
            "ours / (base + handoffs)",
            "base + handoffs CPU µs/req",
            "ours CPU µs/req",
        ]);
        for (&(operation, connections, added), with) in HANDOFFS.iter().zip(handoffs) {
            let at = WORKLOADS
                .iter()
                .position(|w| *w == (operation, connections))
                .expect("a main workload");
            let (o, b) = (&ours.loads[at], &base.loads[at]);
            hops.row(vec![
                operation.to_string(),
                connections.to_string(),
                added.to_string(),
                format!("{:.0}", b.rate()),
                format!("{:.0}", with.rate()),
                ratio(with.rate(), b.rate()),
                format!("{:.0}", o.rate()),
                ratio(o.rate(), with.rate()),
                format!("{:.1}", with.cpu_per_request_us()),
                format!("{:.1}", o.cpu_per_request_us()),
            ]);
        }
        md.push_str(
            "\n## Thread handoffs\n\nThe baseline again with only thread handoffs added \
(`baseline-server --handoffs`), same std channels, no work: what threads cost by \
themselves. `direct` hands each request to one other thread, which answers it: our path \
for a queued operation (accept thread → project worker, which answers; the canvas owner \
runs on the worker). `queued` is the path before that (accept → handler → project worker \
→ canvas-owner thread → worker → handler), kept to show what the change removed. \
`session_info` crosses no thread (the accept thread answers it): the bare baseline is \
its ceiling.\n\n",
        );
        md.push_str(&hops.markdown());

        md.push_str("\n## Trickling client\n\n");
        md.push_str(&trickle.markdown());

        let mut bodies = Table::new(&[
            "body (session_info, 16 conns)",
            "ours req/s",
            "base req/s",
            "ratio",
            "ours CPU µs/req",
            "base CPU µs/req",
            "CPU ratio",
            "ours p99 ms",
            "base p99 ms",
            "never answered ours/base",
        ]);
        for (i, (_, label)) in BODY_SIZES.iter().enumerate() {
            let (o, b) = (&ours.bodies[i], &base.bodies[i]);
            bodies.row(vec![
                label.to_string(),
                format!("{:.0}", o.rate()),
                format!("{:.0}", b.rate()),
                ratio(o.rate(), b.rate()),
                format!("{:.1}", o.cpu_per_request_us()),
                format!("{:.1}", b.cpu_per_request_us()),
                ratio(o.cpu_per_request_us(), b.cpu_per_request_us()),
                format!("{:.3}", o.quantile_ms(0.99)),
                format!("{:.3}", b.quantile_ms(0.99)),
                format!("{}/{}", o.never_answered, b.never_answered),
            ]);
        }
        md.push_str("\n## Request cost by body size\n\n");
        md.push_str(&bodies.markdown());
        let categories: Vec<String> = BODY_SIZES.iter().map(|(_, l)| l.to_string()).collect();
        let mut plots = vec![(
            "bodies.svg",
            line_plot(
                "Server CPU per request by body size (session_info, 16 conns)",
                &categories,
                "µs CPU / request",
                &[
                    Series {
                        name: "ours".into(),
                        color: "#d62728",
                        values: ours
                            .bodies
                            .iter()
                            .map(LoadResult::cpu_per_request_us)
                            .collect(),
                    },
                    Series {
                        name: "baseline".into(),
                        color: "#1f77b4",
                        values: base
                            .bodies
                            .iter()
                            .map(LoadResult::cpu_per_request_us)
                            .collect(),
                    },
                ],
            ),
        )];

        if !sessions.is_empty() {
            let mut table = Table::new(&[
                "sessions (lib-server)",
                "session_info req/s",
                "CPU µs/req",
                "p99 ms",
                "401 (unknown token) req/s",
                "401 CPU µs/req",
                "errors",
                "never answered",
            ]);
            for row in sessions {
                let denied = row.extra.as_ref().expect("session rows carry the 401 run");
                table.row(vec![
                    row.label.clone(),
                    format!("{:.0}", row.ok.rate()),
                    format!("{:.1}", row.ok.cpu_per_request_us()),
                    format!("{:.3}", row.ok.quantile_ms(0.99)),
                    format!("{:.0}", denied.rate()),
                    format!("{:.1}", denied.cpu_per_request_us()),
                    format!("{}", row.ok.errors + denied.errors),
                    format!("{}", row.ok.never_answered + denied.never_answered),
                ]);
            }
            md.push_str(
                "\n## Auth cost by provisioned sessions (session_info and 401, 16 conns)\n\n",
            );
            md.push_str(&table.markdown());
            let categories: Vec<String> = sessions.iter().map(|r| r.label.clone()).collect();
            plots.push((
                "sessions.svg",
                line_plot(
                    "Server CPU per request by provisioned sessions",
                    &categories,
                    "µs CPU / request",
                    &[
                        Series {
                            name: "session_info".into(),
                            color: "#d62728",
                            values: sessions.iter().map(|r| r.ok.cpu_per_request_us()).collect(),
                        },
                        Series {
                            name: "401 unknown".into(),
                            color: "#2ca02c",
                            values: sessions
                                .iter()
                                .filter_map(|r| r.extra.as_ref())
                                .map(LoadResult::cpu_per_request_us)
                                .collect(),
                        },
                    ],
                ),
            ));
        }
        if !projects.is_empty() {
            let mut table = Table::new(&[
                "projects (lib-server, canvas_list, 64 conns)",
                "req/s",
                "p99 ms",
                "CPU µs/req",
                "threads idle",
                "threads peak",
                "threads settled",
                "RSS idle → peak MiB",
                "errors",
                "never answered",
            ]);
            for row in projects {
                table.row(vec![
                    row.label.clone(),
                    format!("{:.0}", row.ok.rate()),
                    format!("{:.3}", row.ok.quantile_ms(0.99)),
                    format!("{:.1}", row.ok.cpu_per_request_us()),
                    row.idle.threads.to_string(),
                    row.ok.peak_threads.to_string(),
                    row.settled.threads.to_string(),
                    format!(
                        "{:.1} → {:.1}",
                        mib(row.idle.rss_kib),
                        mib(row.settled.hwm_kib)
                    ),
                    row.ok.errors.to_string(),
                    row.ok.never_answered.to_string(),
                ]);
            }
            md.push_str("\n## Load spread over projects\n\n");
            md.push_str(&table.markdown());
            let categories: Vec<String> = projects.iter().map(|r| r.label.clone()).collect();
            plots.push((
                "projects.svg",
                line_plot(
                    "canvas_list throughput by projects (64 conns)",
                    &categories,
                    "requests / s",
                    &[Series {
                        name: "req/s".into(),
                        color: "#d62728",
                        values: projects.iter().map(|r| r.ok.rate()).collect(),
                    }],
                ),
            ));
            plots.push((
                "projects-threads.svg",
                line_plot(
                    "Server threads by projects (64 conns)",
                    &categories,
                    "threads",
                    &[
                        Series {
                            name: "peak".into(),
                            color: "#d62728",
                            values: projects.iter().map(|r| r.ok.peak_threads as f64).collect(),
                        },
                        Series {
                            name: "settled".into(),
                            color: "#1f77b4",
                            values: projects.iter().map(|r| r.settled.threads as f64).collect(),
                        },
                    ],
                ),
            ));
        }

        let mut table = Table::new(&["operation", "validate_tool_request ns/call"]);
        for time in validator {
            table.row(vec![
                time.operation.to_string(),
                format!("{:.0}", time.ns_per_call),
            ]);
        }
        md.push_str("\n## Validator time per operation\n\n");
        md.push_str(&table.markdown());

        md.push_str("\n## Targets\n\n");
        md.push_str(
            &self
                .targets(ours, base, (ours_trickle, without.0), sessions)
                .markdown(),
        );

        md.push_str("\nPlots: ");
        md.push_str(
            &plots
                .iter()
                .map(|(name, _)| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", "),
        );
        md.push('\n');

        fs::create_dir_all(&self.options.out)
            .map_err(|e| format!("create {}: {e}", self.options.out.display()))?;
        for (name, svg) in &plots {
            let path = self.options.out.join(name);
            fs::write(&path, svg).map_err(|e| format!("write {}: {e}", path.display()))?;
        }
        let path = self.options.out.join("RESULTS.md");
        fs::write(&path, &md).map_err(|e| format!("write {}: {e}", path.display()))?;
        println!("{md}");
        eprintln!("bench: wrote {}", self.options.out.display());
        Ok(())
    }

    /// `RESULTS.json`: the throughput table's figures for each workload, for scripts.
    fn write_json(&self, ours: &ProcessReport, base: &ProcessReport) -> Result<(), String> {
        let side = |report: &ProcessReport, i: usize| {
            let load = &report.loads[i];
            serde_json::json!({
                "reqPerS": load.rate(),
                "p50Ms": load.quantile_ms(0.5),
                "p99Ms": load.quantile_ms(0.99),
                "cpuUsPerReq": load.cpu_per_request_us(),
                "answerBytes": report.answer_bytes[i],
                "errors": load.errors,
                "neverAnswered": load.never_answered,
            })
        };
        let rows: Vec<_> = WORKLOADS
            .iter()
            .enumerate()
            .map(|(i, (operation, connections))| {
                let rates = ours.sorted_pairs(i, 0);
                let range = [rates.first(), rates.last()].map(|r| r.copied().unwrap_or(0.0));
                serde_json::json!({
                    "operation": operation,
                    "connections": connections,
                    "ours": side(ours, i),
                    "base": side(base, i),
                    "ratioRange": range,
                    "pairRatios": ours.pairs.get(i).map(|pairs| {
                        pairs.iter().map(|pair| {
                            PAIR_MEASURES.iter().zip(pair).map(|(k, r)| (k.to_string(), serde_json::json!(r))).collect::<serde_json::Map<_, _>>()
                        }).collect::<Vec<_>>()
                    }),
                })
            })
            .collect();
        let json = serde_json::json!({
            "repeat": self.options.repeat,
            "durationS": self.options.duration.as_secs_f64(),
            "startToReadyMs": {
                "ours": ms(ours.ready),
                "base": ms(base.ready),
                "medianRoundRatio": self.start_ratio,
            },
            "startToReadyOnDiskMs": self.disk_starts.as_ref().map(|d| serde_json::json!({
                "dir": d.dir,
                "ours": ms(d.ready[0]),
                "base": ms(d.ready[1]),
                "baseWithOursFsyncs": ms(d.ready[2]),
                "fsyncs": d.fsyncs,
                "medianRoundRatios": {"base": d.ours_over[1], "baseWithOursFsyncs": d.ours_over[2]},
            })),
            "workloads": rows,
        });
        fs::create_dir_all(&self.options.out)
            .map_err(|e| format!("create {}: {e}", self.options.out.display()))?;
        let path = self.options.out.join("RESULTS.json");
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        fs::write(&path, text + "\n").map_err(|e| format!("write {}: {e}", path.display()))
    }

    fn targets(
        &self,
        ours: &ProcessReport,
        base: &ProcessReport,
        trickle: (&LoadResult, &LoadResult),
        sessions: &[GrowthRow],
    ) -> Table {
        let mut table = Table::new(&["target", "measured", "verdict"]);
        let mut check = |name: &str, measured: String, met: bool| {
            table.row(vec![
                name.into(),
                measured,
                if met {
                    "met".into()
                } else {
                    "**missed**".into()
                },
            ]);
        };
        // The call path's targets against bare tiny_http answering the same bytes.
        // Each ratio is judged on the median of the back-to-back pairs' ratios: on a
        // shared machine a run's rate or quantile moves by a third from one run to the
        // next, seconds apart, and a pair shares the machine's state; the kept runs'
        // ratio (the table's) and the pairs' range are shown beside it.
        let pair_median = |i: usize, measure: usize| {
            let pairs = ours.sorted_pairs(i, measure);
            let kept = pair_ratios(&ours.loads[i], &base.loads[i])[measure];
            let median = pairs[pairs.len() / 2];
            let shown = format!(
                "{median:.2}× (pairs {:.2}–{:.2}×; kept runs {kept:.2}×)",
                pairs[0],
                pairs[pairs.len() - 1]
            );
            (median, shown)
        };
        let (rate, cpu, p50, p99) = (0, 1, 2, 3);
        let (r, shown) = pair_median(5, rate);
        check(
            "canvas_list x64 throughput ≥ 0.80× baseline",
            shown,
            r >= 0.80,
        );
        let (r, shown) = pair_median(5, cpu);
        check(
            "canvas_list x64 CPU/request ≤ 1.3× baseline",
            shown,
            r <= 1.3,
        );
        let (r, shown) = pair_median(1, rate);
        check(
            "session_info x16 throughput ≥ 0.90× baseline",
            shown,
            r >= 0.90,
        );
        let (r, shown) = pair_median(1, p99);
        check("session_info x16 p99 ≤ 1.15× baseline", shown, r <= 1.15);
        for (i, name) in [(3, "canvas_list x1"), (0, "session_info x1")] {
            let (r, shown) = pair_median(i, p50);
            check(
                &format!("{name} p50 within 10 % of baseline"),
                shown,
                r <= 1.10,
            );
        }
        let idle = ours.idle.rss_kib as f64 / 1024.0;
        check("idle RSS ≤ 4 MiB", format!("{idle:.2} MiB"), idle <= 4.0);
        let peak = ours.peak_hwm_kib as f64 / 1024.0;
        check(
            "peak RSS after 64-conn loads ≤ 16 MiB",
            format!("{peak:.1} MiB"),
            peak <= 16.0,
        );
        // The median of the rounds' ratios, as above (a round: one start of each, in turn).
        let r = self.start_ratio;
        let on_disk = self.disk_starts.as_ref().map_or(String::new(), |d| {
            format!(
                "; data in {}: {:.2}×, and {:.2}× the baseline making ours' {} fsyncs",
                d.dir.display(),
                d.ours_over[1],
                d.ours_over[2],
                d.fsyncs
            )
        });
        check(
            "start → ready ≤ 2× baseline",
            format!(
                "{r:.2}× (medians {:.1} vs {:.1} ms{on_disk})",
                ms(ours.ready),
                ms(base.ready)
            ),
            r <= 2.0,
        );
        let (trickle, without) = trickle;
        let r = trickle.quantile_ms(0.99) / without.quantile_ms(0.99);
        check(
            "trickler: others' p99 ≤ 1.2× without",
            format!("{r:.2}×"),
            r <= 1.2,
        );
        check(
            "trickler: zero errors",
            trickle.errors.to_string(),
            trickle.errors == 0,
        );
        let (how, after, cut) = trickle
            .trickle
            .as_ref()
            .map_or(("none".to_string(), 0.0, false), |t| {
                (t.how.clone(), t.after.as_secs_f64(), t.cut)
            });
        let in_window =
            (15.0..=16.0).contains(&after) && cut && (how == "408" || how.starts_with("closed"));
        check(
            "trickler answered 408 or closed within 15–16 s",
            format!("{how} after {after:.1} s"),
            in_window,
        );
        if let (Some(first), Some(last)) = (sessions.first(), sessions.last()) {
            let denied = |row: &GrowthRow| {
                row.extra
                    .as_ref()
                    .map_or(0.0, LoadResult::cpu_per_request_us)
            };
            let r = denied(last) / denied(first);
            let r_ok = last.ok.cpu_per_request_us() / first.ok.cpu_per_request_us();
            check(
                "10,000 sessions: auth cost ≤ 2× 1 session",
                format!("{r:.2}× (401 path), {r_ok:.2}× (session_info)"),
                r <= 2.0 && r_ok <= 2.0,
            );
        }
        let threads_back = ours.settled.threads as f64 <= ours.idle.threads as f64 * 1.1;
        let rss_back = ours.settled.rss_kib as f64 <= ours.idle.rss_kib as f64 * 1.1;
        check(
            "after load: threads and RSS within 10 % of idle",
            format!(
                "threads {} → {}, RSS {:.1} → {:.1} MiB",
                ours.idle.threads,
                ours.settled.threads,
                ours.idle.rss_kib as f64 / 1024.0,
                ours.settled.rss_kib as f64 / 1024.0
            ),
            threads_back && rss_back,
        );
        table
    }
}

/// Waits (up to 15 s) until the server's threads are back within 10 % of idle.
/// Waits (up to 15 s) for the threads and the resident size to come back within 10 % of
/// idle, and returns the last sample and how long that took.
fn settle(server: &Server) -> (ProcSample, Duration) {
    let began = Instant::now();
    let within = |now: u64, idle: u64| now as f64 <= idle as f64 * 1.1;
    let settled = |s: &ProcSample| {
        within(s.threads, server.idle.threads) && within(s.rss_kib, server.idle.rss_kib)
    };
    let mut last = procfs::sample(server.pid).unwrap_or_default();
    while began.elapsed() < Duration::from_secs(15) && !settled(&last) {
        thread::sleep(Duration::from_millis(250));
        last = procfs::sample(server.pid).unwrap_or(last);
    }
    (last, began.elapsed())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn ratio(ours: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}×", ours / base)
    } else {
        "–".into()
    }
}

/// The 1-minute load average: other work on the machine skews every figure.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn machine(cpus: usize) -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpus} × {cpu}, Linux {}", kernel.trim())
}
