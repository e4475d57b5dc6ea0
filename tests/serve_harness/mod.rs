//! Drives the real `termsprawl-tools serve` binary: scratch folders, start/stop with the
//! ready line, calls over loopback HTTP as an agent makes them, and guards that leave no
//! process or tmux server behind even when a test fails. Signals go through `crate::sys`,
//! so a test crate that includes this module includes `mod sys;` too.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::sys;

pub mod view;

/// How long a serve may take to print its ready line.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A scratch root with `data/` and `project/`. Drop kills the data directory's tmux server
/// (if any) and removes everything.
pub struct Dirs {
    pub root: PathBuf,
    pub data: PathBuf,
    pub project: PathBuf,
}

impl Dirs {
    pub fn new(name: &str) -> Dirs {
        Dirs::new_in(Path::new("/tmp"), name)
    }

    /// The same under `base` (a Landlock test keeps `/tmp` off the way to its data folder,
    /// where nothing new could be made).
    pub fn new_in(base: &Path, name: &str) -> Dirs {
        // Short: the tmux socket path under it must fit a Unix socket address.
        let root = base.join(format!("tss-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let data = root.join("data");
        let project = root.join("project");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        Dirs {
            root,
            data,
            project: project.canonicalize().unwrap(),
        }
    }

    pub fn agent_tools(&self) -> PathBuf {
        self.data.join("agent-tools")
    }

    pub fn project_file(&self) -> PathBuf {
        self.project.join(".termsprawl/project.json")
    }

    pub fn tmux_socket(&self) -> PathBuf {
        self.agent_tools().join("tmux/socket")
    }

    /// `tmux -S <our socket> ARGS`.
    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .env_remove("TMUX")
            .arg("-S")
            .arg(self.tmux_socket())
            .args(args)
            .output()
            .unwrap()
    }

    /// The names of the sessions on our tmux server (empty when none runs).
    pub fn tmux_sessions(&self) -> Vec<String> {
        let out = self.tmux(&["list-sessions", "-F", "#{session_name}"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Whether a tmux server answers on our socket.
    pub fn tmux_running(&self) -> bool {
        self.tmux(&["list-sessions"]).status.success()
    }
}

impl Drop for Dirs {
    fn drop(&mut self) {
        if self.tmux_socket().exists() {
            let _ = self.tmux(&["kill-server"]);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Whether tmux is installed (tmux tests skip with a notice otherwise).
pub fn tmux_installed() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The command for `termsprawl-tools serve --data D --project P EXTRA…`.
pub fn serve_command(dirs: &Dirs, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"));
    command
        .arg("serve")
        .arg("--data")
        .arg(&dirs.data)
        .arg("--project")
        .arg(&dirs.project)
        .args(extra)
        // An inherited identity must not reach terminals (serve drops it; see serve_terminals).
        .env("TERMSPRAWL_SESSION_FILE", "/inherited/by/serve")
        .env_remove("TMUX")
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::null());
    command
}

/// Runs a serve that is expected to fail: (status, stdout, stderr).
pub fn serve_fails(dirs: &Dirs, extra: &[&str]) -> (ExitStatus, String, String) {
    let mut child = serve_command(dirs, extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + READY_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stdout, stderr)
}

/// A running serve. Drop kills it (SIGKILL) if the test did not stop it.
pub struct Serve {
    child: Option<Child>,
    pub ready: Value,
    pub port: u16,
    /// Everything it printed on stdout after the ready line (must stay empty).
    extra_stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Serve {
    /// Starts serve and waits for its ready line.
    pub fn start(dirs: &Dirs, extra: &[&str]) -> Serve {
        Serve::start_with_env(dirs, extra, &[])
    }

    /// [`Serve::start`] with `env` added to serve's environment (its terminals inherit it).
    pub fn start_with_env(dirs: &Dirs, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut command = serve_command(dirs, extra);
        command.envs(env.iter().copied());
        Serve::start_command(command)
    }

    /// Starts `command`, a `serve` the test built itself (say, on its default data
    /// directory and project folder), and waits for its ready line.
    pub fn start_command(mut command: Command) -> Serve {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = err.read(&mut buffer) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        let (first, line) = mpsc::channel();
        let extra_stdout = Arc::new(Mutex::new(String::new()));
        let rest = extra_stdout.clone();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(out).lines();
            let _ = first.send(lines.next().and_then(Result::ok));
            for line in lines.map_while(Result::ok) {
                rest.lock().unwrap().push_str(&line);
            }
        });
        let mut serve = Serve {
            child: Some(child),
            ready: Value::Null,
            port: 0,
            extra_stdout,
            stderr,
        };
        let line = match line.recv_timeout(READY_TIMEOUT) {
            Ok(Some(line)) => line,
            other => panic!("no ready line ({other:?}); stderr: {}", serve.stderr()),
        };
        serve.ready = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let url = serve.ready["url"].as_str().unwrap().to_string();
        serve.port = url
            .strip_prefix("http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/call"))
            .unwrap()
            .parse()
            .unwrap();
        serve
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn extra_stdout(&self) -> String {
        self.extra_stdout.lock().unwrap().clone()
    }

    pub fn project_id(&self) -> String {
        self.ready["projectId"].as_str().unwrap().to_string()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn stop(self) -> ExitStatus {
        self.stop_with(libc::SIGTERM)
    }

    /// Sends `signal` and waits for the exit status.
    pub fn stop_with(mut self, signal: i32) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        // Our own child's pid, which we have not reaped yet.
        let _ = sys::kill(child.id(), signal);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "serve did not exit after SIGTERM; stderr: {}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `operation` as agent `node` (token read from its session file), the ToolResult.
    pub fn call(&self, dirs: &Dirs, node: &str, operation: &str, args: Value) -> Value {
        let token = token(dirs, node);
        let (_, body) = self.call_token(&token, operation, args);
        body
    }

    /// A call that must succeed; returns its value.
    pub fn ok(&self, dirs: &Dirs, node: &str, operation: &str, args: Value) -> Value {
        let result = self.call(dirs, node, operation, args.clone());
        assert_eq!(
            result["ok"],
            true,
            "{operation} {args} failed: {result}; stderr: {}",
            self.stderr()
        );
        result["value"].clone()
    }

    /// A call that must fail; returns its error text.
    pub fn err(&self, dirs: &Dirs, node: &str, operation: &str, args: Value) -> String {
        let result = self.call(dirs, node, operation, args.clone());
        assert_eq!(
            result["ok"], false,
            "{operation} {args} succeeded: {result}"
        );
        result["error"].as_str().unwrap().to_string()
    }

    /// One POST /call with `token`: (HTTP status, body).
    pub fn call_token(&self, token: &str, operation: &str, args: Value) -> (u16, Value) {
        post(
            self.port,
            token,
            &json!({ "operation": operation, "args": args }),
        )
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The token in `sessions/<node>.json`.
pub fn token(dirs: &Dirs, node: &str) -> String {
    session(dirs, node)["token"].as_str().unwrap().to_string()
}

/// `sessions/<node>.json`, parsed.
pub fn session(dirs: &Dirs, node: &str) -> Value {
    let file = dirs.agent_tools().join(format!("sessions/{node}.json"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::from_str(&text).unwrap()
}

/// POST /call on a fresh connection: (status, JSON body).
pub fn post(port: u16, token: &str, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let mut length = None;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse::<usize>().ok();
        }
        if name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = length {
        body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
    } else {
        reader.read_to_end(&mut body).unwrap();
    }
    (status, serde_json::from_slice(&body).unwrap())
}

/// Polls `check` every 25 ms until it returns `Some`, failing after `within`.
pub fn poll<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// How long after a waited command's end its answer came, on `backend`'s bash terminal
/// `term`: the call's time less the command's duration, over 10 runs of `sleep 0.3`
/// (each checked to exit 0). Printed, not asserted: the machine is shared.
pub fn print_answer_delays(serve: &Serve, dirs: &Dirs, term: &str, backend: &str) {
    poll("bash's first prompt", Duration::from_secs(10), || {
        let ok = submit_and_wait(serve, dirs, term, "true", json!({}));
        (ok["integration"] == "bash").then_some(())
    });
    let mut after_end = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        let done = submit_and_wait(serve, dirs, term, "sleep 0.3", json!({}));
        let call_ms = started.elapsed().as_millis() as u64;
        assert_eq!(
            (done["state"].as_str(), done["exitCode"].as_i64()),
            (Some("exited"), Some(0)),
            "{done}"
        );
        after_end.push(call_ms.saturating_sub(done["durationMs"].as_u64().unwrap()));
    }
    after_end.sort_unstable();
    println!(
        "{backend}: answer after the end mark, ms (call time less the command's duration), 10 runs: median {}, max {}, all {after_end:?}",
        after_end[5], after_end[9]
    );
}

/// `canvas_list`'s `session.shell` of terminal `term`, asked until `expected` holds (on
/// tmux the listing may be up to 250 ms old), failing after 10 s with `what`.
pub fn listed_shell(
    serve: &Serve,
    dirs: &Dirs,
    term: &str,
    what: &str,
    expected: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = serve.ok(dirs, "me", "canvas_list", json!({}));
        let shell = node(&list, term).map_or(Value::Null, |n| n["session"]["shell"].clone());
        if expected(&shell) {
            return shell;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: canvas_list shows {shell}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `failed` (a waited command that exited 1) as `canvas_list` and the activity trail
/// show it: its status in the terminal's `session.shell`, its end in the call's line.
pub fn ends_are_listed_and_in_the_trail(
    serve: &Serve,
    dirs: &Dirs,
    term: &str,
    failed: &Value,
    name: &str,
) {
    let listed = listed_shell(serve, dirs, term, "the failed command", |shell| {
        shell["command"]["commandId"] == failed["commandId"]
    });
    assert_eq!(listed["integration"], name, "{listed}");
    let command = &listed["command"];
    assert_eq!(
        (command["state"].as_str(), command["exitCode"].as_i64()),
        (Some("exited"), Some(1)),
        "{listed}"
    );
    assert!(command["endedAt"].is_string(), "{listed}");
    let line = poll("the trail's line", Duration::from_secs(5), || {
        view::trail(serve, dirs)
            .into_iter()
            .find(|l| l["operation"] == "terminal_submit" && l["command"]["exitCode"] == 1)
    });
    assert_eq!(line["command"]["state"], "exited", "{line}");
    assert_eq!(
        line["command"]["durationMs"], failed["durationMs"],
        "the trail's duration is the command's, not the call's: {line}"
    );
    // Listed at once after the answer, even right after another listing (which the
    // canvas owner may reuse, and the tmux listing is kept for 250 ms).
    serve.ok(dirs, "me", "canvas_list", json!({}));
    let nine = submit_and_wait(serve, dirs, term, "(exit 9)", json!({}));
    let list = serve.ok(dirs, "me", "canvas_list", json!({}));
    let listed = &node(&list, term).unwrap()["session"]["shell"]["command"];
    assert_eq!(
        (&listed["commandId"], &listed["exitCode"]),
        (&nine["commandId"], &json!(9)),
        "{listed}"
    );
}

/// A listed terminal node's `session` without its `shell` (which says what reports the
/// shell's commands: checked to name an integration, `none` until the first prompt) and
/// its `isolation` (checked to name a mode).
pub fn session_without_shell(node: &Value) -> Value {
    let mut session = node["session"].clone();
    let shell = session.as_object_mut().and_then(|s| s.remove("shell"));
    let shell = shell.unwrap_or_else(|| panic!("no shell in {node}"));
    assert!(shell["integration"].is_string(), "{shell}");
    // How it is confined: said on every live terminal (tests/isolation.rs checks what).
    let isolation = session.as_object_mut().and_then(|s| s.remove("isolation"));
    let isolation = isolation.unwrap_or_else(|| panic!("no isolation in {node}"));
    assert!(isolation["mode"].is_string(), "{isolation}");
    session
}

/// The node with `id` in a `canvas_list` value.
pub fn node<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|n| n["id"] == id)
}

/// Pids of live (not zombie) processes whose session id is `sid` (from /proc).
pub fn session_members(sid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state ppid pgrp session ...
        let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let zombie = fields.first() == Some(&"Z");
        if !zombie && fields.get(3).and_then(|s| s.parse::<u32>().ok()) == Some(sid) {
            found.push(pid);
        }
    }
    found
}

/// Direct children of `pid` (from /proc/<pid>/task/*/children).
pub fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            found.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    found
}

/// Creates `dir` and its missing parents 0700, as `serve` and `link` make the project's
/// `.termsprawl/` and its folders (a looser one is refused).
pub fn private_dirs(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .unwrap();
}

/// Writes an executable script.
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The version of Python distribution `dist` when `python3` can import `module` (with
/// its dependencies); `None` when it cannot (the test then says so and skips).
pub fn python_package(module: &str, dist: &str) -> Option<String> {
    let probe = Command::new("python3")
        .args([
            "-c",
            &format!("import importlib.metadata as m, {module}; print(m.version('{dist}'))"),
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&probe.stdout).trim().to_string();
    probe.status.success().then_some(version)
}

/// The shells the terminal-command tests try, `(integration name, path)`: those
/// installed (zsh may not be; a notice says so).
pub fn shells() -> Vec<(&'static str, &'static str)> {
    let all = [
        ("bash", "/bin/bash"),
        ("zsh", "/bin/zsh"),
        ("sh", "/bin/dash"),
    ];
    all.into_iter()
        .filter(|(name, path)| {
            let there = Path::new(path).exists();
            if !there {
                eprintln!("NOTICE: {path} is not installed; {name} is not tried");
            }
            there
        })
        .collect()
}

/// `terminal_submit` of `command` as agent `me`, waiting for its end (20 s at most),
/// with `extra` arguments added; the call must succeed.
pub fn submit_and_wait(
    serve: &Serve,
    dirs: &Dirs,
    node: &str,
    command: &str,
    extra: Value,
) -> Value {
    let mut args = json!({"nodeId": node, "command": command, "wait": "exit", "timeoutMs": 20000});
    for (key, value) in extra.as_object().unwrap() {
        args[key] = value.clone();
    }
    serve.ok(dirs, "me", "terminal_submit", args)
}

/// A waited multi-line command (and one ending in a backslash, a here-document) on the
/// `name` shell of terminal `term` is answered at the end of everything it typed, with
/// its last command's status, and leaves nothing running that refuses the next submit.
pub fn multi_line_commands_run_as_one(serve: &Serve, dirs: &Dirs, term: &str, name: &str) {
    poll(
        &format!("{name}'s first prompt"),
        Duration::from_secs(10),
        || {
            let ok = submit_and_wait(serve, dirs, term, "true", json!({}));
            (ok["integration"] == name).then_some(())
        },
    );
    let started = Instant::now();
    let all = submit_and_wait(serve, dirs, term, "cd /\nsleep 2; false", json!({}));
    assert_eq!(
        (all["state"].as_str(), all["exitCode"].as_i64()),
        (Some("exited"), Some(1)),
        "{name}: {all}"
    );
    assert!(started.elapsed() >= Duration::from_secs(2), "{name}: {all}");
    assert_eq!(all["cwd"], "/", "{name}: {all}");
    assert_eq!(all["command"], "cd /\nsleep 2; false", "{name}: {all}");
    let joined = submit_and_wait(serve, dirs, term, "echo joined \\", json!({}));
    assert_eq!(joined["exitCode"], 0, "{name}: {joined}");
    assert!(
        joined["output"].as_str().unwrap().contains("joined"),
        "{name}: {joined}"
    );
    let here = "cat <<'END'\nfrom a here-document\nEND";
    let here = submit_and_wait(serve, dirs, term, here, json!({}));
    assert_eq!(here["exitCode"], 0, "{name}: {here}");
    let output = here["output"].as_str().unwrap();
    assert!(output.contains("from a here-document"), "{name}: {here}");
    let next = submit_and_wait(serve, dirs, term, "pwd; (exit 4)", json!({}));
    assert_eq!(
        (next["exitCode"].as_i64(), next["output"].as_str()),
        (Some(4), Some("/\n")),
        "{name}: {next}"
    );
}

/// On bash terminal `term`: output that starts a mark and never ends it does not end
/// integration; a leaked secret does, and the command running then becomes `unknown`
/// (not `running` for ever), so a later waited submit is not refused.
pub fn lost_integration_never_leaves_the_terminal_stuck(serve: &Serve, dirs: &Dirs, term: &str) {
    poll("bash's first prompt", Duration::from_secs(10), || {
        let ok = submit_and_wait(serve, dirs, term, "true", json!({}));
        (ok["integration"] == "bash").then_some(())
    });
    let unfinished = r"printf '\033]5379;'; head -c 16384 /dev/zero | tr '\0' x";
    let unfinished = submit_and_wait(serve, dirs, term, unfinished, json!({}));
    assert_eq!(unfinished["exitCode"], 0, "{unfinished}");
    let next = submit_and_wait(serve, dirs, term, "(exit 5)", json!({}));
    assert_eq!(
        (next["exitCode"].as_i64(), next["integration"].as_str()),
        (Some(5), Some("bash")),
        "{next}"
    );
    // One job, so the shell never has the terminal back in between (which, without
    // integration, reads as the command's end).
    let leak = r#"sh -c 'sleep 1; echo "$0"; exec sleep 600' "$__termsprawl_nonce""#;
    let leak = submit_and_wait(serve, dirs, term, leak, json!({"timeoutMs": 3000}));
    assert_eq!(leak["state"], "timed_out", "{leak}");
    let last = serve.call(
        dirs,
        "me",
        "terminal_read",
        json!({"nodeId": term, "command": "last"}),
    );
    println!("LAST {last}");
    serve.ok(dirs, "me", "terminal_interrupt", json!({"nodeId": term}));
    let after = poll(
        "the shell's prompt after Ctrl+C",
        Duration::from_secs(10),
        || {
            let args = json!({"nodeId": term, "command": "true", "wait": "exit"});
            let answer = serve.call(dirs, "me", "terminal_submit", args);
            (answer["ok"] == true).then_some(answer)
        },
    );
    assert_eq!(after["value"]["state"], "exited", "{after}");
    assert_eq!(after["value"]["integration"], "none", "{after}");
}

/// Whether a Chromium the browser engine can start is on `PATH`.
pub fn chromium_on_path() -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|name| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}

/// [`chromium_on_path`], with a notice that `what` is skipped when it is not.
pub fn chromium_or_notice(what: &str) -> bool {
    let found = chromium_on_path();
    if !found {
        eprintln!("NOTICE: skipping {what}: no Chromium on PATH");
    }
    found
}

/// The title of browser node `browser`'s page, as agent `me` inspects it.
pub fn page_title(serve: &Serve, dirs: &Dirs, browser: &str) -> String {
    let page = serve.ok(
        dirs,
        "me",
        "browser_inspect",
        serde_json::json!({ "nodeId": browser }),
    );
    page["title"].as_str().unwrap().to_string()
}

/// A serve with browser control and agents `me` and `other`, and a browser `me` owns on
/// `url`.
pub fn serve_with_browser(dirs: &Dirs, url: &str) -> (Serve, String) {
    let args = [
        "--terminals",
        "pty",
        "--agent",
        "me",
        "--agent",
        "other",
        "--browser",
    ];
    let serve = Serve::start(dirs, &args);
    let opened = serve.ok(dirs, "me", "browser_open", json!({ "url": url }));
    let browser = opened["nodeId"].as_str().unwrap().to_string();
    (serve, browser)
}
