//! Hostile paths and content: artifact paths that try to leave the project (`..`, `//`,
//! unicode look-alikes, symlink chains and loops, bind mounts), context files that are
//! huge, binary, malformed or not files at all, and terminal output carrying escape
//! sequences (title, cursor, OSC 52 clipboard, queries), on both terminal backends.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_harness::{poll, Dirs, Serve};
use termsprawl_tools::protocol::validate_tool_request;
use termsprawl_tools::runtime::{check_artifact_path, read_context};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tst-paths-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

/// `root/project/{a.txt,sub/}` and `root/outside/secret.txt`.
fn layout(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let root = scratch(name);
    let project = root.join("project");
    let outside = root.join("outside");
    fs::create_dir_all(project.join("sub")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(project.join("a.txt"), "inside").unwrap();
    fs::write(outside.join("secret.txt"), "secret").unwrap();
    (root, project, outside)
}

#[test]
fn artifact_paths_never_leave_the_project() {
    let (root, project, outside) = layout("artifact");
    let p = project.display().to_string();
    let o = outside.display().to_string();
    // Symlinks: a chain out, a chain in, a loop, a directory loop, a link to /.
    symlink(project.join("l2"), project.join("l1")).unwrap();
    symlink(project.join("sub/l3"), project.join("l2")).unwrap();
    symlink(outside.join("secret.txt"), project.join("sub/l3")).unwrap();
    symlink(project.join("c2"), project.join("c1")).unwrap();
    symlink(project.join("a.txt"), project.join("c2")).unwrap();
    symlink(project.join("loopB"), project.join("loopA")).unwrap();
    symlink(project.join("loopA"), project.join("loopB")).unwrap();
    symlink(&project, project.join("self")).unwrap();
    symlink("/", project.join("root")).unwrap();
    symlink("../outside", project.join("sub/up")).unwrap();
    // A real directory named like "..", in look-alike characters, inside the project.
    fs::create_dir_all(project.join("\u{2025}")).unwrap();
    fs::write(project.join("\u{2025}/b.txt"), "inside too").unwrap();

    let escapes = [
        format!("{p}/../outside/secret.txt"),
        format!("{p}/sub/../../outside/secret.txt"),
        format!("{p}//..//..//{o}/secret.txt"),
        format!("/{o}/secret.txt"),
        format!("{p}/l1"),
        format!("{p}/sub/l3"),
        format!("{p}/root/etc/passwd"),
        format!("{p}/self/self/root/etc/hostname"),
        format!("{p}/sub/up/secret.txt"),
        format!("{p}/loopA"),
        format!("{p}/\u{2025}/../../outside/secret.txt"),
        format!("{p}/\u{ff0e}\u{ff0e}/outside/secret.txt"),
        format!("{p}\u{2215}..\u{2215}outside\u{2215}secret.txt"),
        format!("{p}/..\u{200b}/outside/secret.txt"),
        format!("{p}/%2e%2e/outside/secret.txt"),
        "project/a.txt".to_string(),
        p.clone(),
    ];
    for path in &escapes {
        let result = check_artifact_path(&project, path, "editor");
        assert!(result.is_err(), "{path:?} was accepted: {result:?}");
    }
    let inside = [
        (format!("{p}//a.txt"), project.join("a.txt")),
        (format!("{p}/./sub/../a.txt"), project.join("a.txt")),
        (format!("{p}/c1"), project.join("a.txt")),
        (format!("{p}/self/self/self/a.txt"), project.join("a.txt")),
        (
            format!("{p}/\u{2025}/b.txt"),
            project.join("\u{2025}/b.txt"),
        ),
    ];
    for (path, real) in &inside {
        assert_eq!(
            check_artifact_path(&project, path, "editor").as_ref(),
            Ok(real),
            "{path:?}"
        );
    }
    // NUL never gets this far: the validator refuses it.
    let nul =
        json!({"operation": "artifact_open", "args": {"path": format!("{p}/a.txt\u{0}../../x")}});
    assert!(validate_tool_request(&nul).is_err());
    eprintln!(
        "figure: {} escaping artifact paths refused, {} inside accepted as their real path",
        escapes.len(),
        inside.len()
    );
    fs::remove_dir_all(root).unwrap();
}

/// Bind mounts are not symlinks: a bind mount inside the project is part of it (making
/// one needs root, i.e. the user's own choice); a bind loop must not hang the check.
#[test]
fn bind_mounts_are_part_of_the_project_and_loops_do_not_hang() {
    let (root, project, outside) = layout("bind");
    fs::create_dir_all(project.join("sub/loop")).unwrap();
    fs::create_dir_all(project.join("mnt")).unwrap();
    let bind = |from: &Path, to: &Path| {
        Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(to)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // An rbind of the project into itself: the path can go round the loop.
    let rbind = Command::new("mount")
        .arg("--rbind")
        .arg(&project)
        .arg(project.join("sub/loop"))
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !rbind {
        eprintln!("NOTICE: cannot bind-mount (not root?): bind-mount case skipped");
        fs::remove_dir_all(root).unwrap();
        return;
    }
    let mounted_outside = bind(&outside, &project.join("mnt"));
    // (The kernel copies the mount tree once: `sub/loop/sub/loop` is the empty directory
    // underneath, so a bind mount can not make an endless path.)
    let deep = format!("{}/sub/loop/a.txt", project.display());
    let began = Instant::now();
    let real = check_artifact_path(&project, &deep, "editor").unwrap();
    assert!(real.starts_with(&project), "{real:?}");
    let round = format!("{}/sub/loop/sub/loop", project.display());
    assert!(
        check_artifact_path(&project, &round, "editor").is_err(),
        "a directory is no artifact"
    );
    eprintln!(
        "figure: bind-mount loop path checked in {:?}",
        began.elapsed()
    );
    if mounted_outside {
        let via_mount = format!("{}/mnt/secret.txt", project.display());
        assert!(check_artifact_path(&project, &via_mount, "editor").is_ok());
    }
    let _ = Command::new("umount").arg(project.join("mnt")).status();
    let _ = Command::new("umount")
        .arg("-R")
        .arg(project.join("sub/loop"))
        .status();
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn artifact_escapes_are_refused_through_serve() {
    let dirs = Dirs::new("artifacts");
    fs::write(dirs.project.join("a.txt"), "inside").unwrap();
    fs::write(dirs.root.join("secret.txt"), "secret").unwrap();
    symlink(dirs.root.join("secret.txt"), dirs.project.join("link.txt")).unwrap();
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", "pty"]);
    let p = dirs.project.display();
    for path in [
        format!("{p}/../secret.txt"),
        format!("{p}/link.txt"),
        format!("{p}/\u{2025}/secret.txt"),
    ] {
        let error = serve.err(&dirs, "me", "artifact_open", json!({ "path": path }));
        assert!(!error.is_empty());
    }
    serve.ok(
        &dirs,
        "me",
        "artifact_open",
        json!({ "path": format!("{p}//a.txt") }),
    );
    serve.stop();
}

/// Bytes this thread has read through read(2) and friends so far.
fn thread_read_bytes() -> u64 {
    let io = fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A folder project where `me` is linked to `peer`, whose transcript is `transcript`.
fn context_project(name: &str, transcript: &Path) -> PathBuf {
    let project = scratch(name);
    let state = project.join(".termsprawl");
    serve_harness::private_dirs(&state.join("links"));
    serve_harness::private_dirs(&state.join("transcripts"));
    fs::write(
        state.join("links/me--peer.json"),
        json!({"version": 1, "a": "me", "b": "peer"}).to_string(),
    )
    .unwrap();
    fs::write(
        state.join("transcripts/peer.json"),
        json!({"version": 1, "path": transcript}).to_string(),
    )
    .unwrap();
    project
}

fn jsonl_turn(n: usize) -> String {
    json!({"type": if n % 2 == 0 { "user" } else { "assistant" }, "message": {"content": format!("turn {n} {}", "w".repeat(200))}}).to_string()
}

/// `read_context` on a thread of its own, with a deadline: (result, bytes read, time).
fn timed_context(project: &Path, within: Duration) -> Option<(Value, u64, Duration)> {
    let (tx, rx) = mpsc::channel();
    let project = project.to_path_buf();
    std::thread::spawn(move || {
        let before = thread_read_bytes();
        let began = Instant::now();
        let value = read_context(&project, "me");
        let _ = tx.send((value, thread_read_bytes() - before, began.elapsed()));
    });
    rx.recv_timeout(within).ok()
}

#[test]
fn a_100_mb_transcript_is_read_from_its_tail_only() {
    let root = scratch("huge");
    let transcript = root.join("transcript.jsonl");
    {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(fs::File::create(&transcript).unwrap());
        let mut n = 0;
        let mut written = 0;
        while written < 100 * 1024 * 1024 {
            let line = jsonl_turn(n);
            written += line.len() + 1;
            writeln!(file, "{line}").unwrap();
            n += 1;
        }
        writeln!(
            file,
            "{}",
            json!({"type": "assistant", "message": {"content": "THE LAST TURN"}})
        )
        .unwrap();
    }
    let size = fs::metadata(&transcript).unwrap().len();
    let project = context_project("huge-project", &transcript);
    let (value, read, took) =
        timed_context(&project, Duration::from_secs(30)).expect("context_read finished");
    let text = value["text"].as_str().unwrap();
    assert!(
        text.contains("THE LAST TURN"),
        "{}",
        &text[text.len().saturating_sub(200)..]
    );
    assert!(text.chars().count() <= 100_000);
    assert!(
        read <= 9 * 1024 * 1024,
        "read {read} bytes of a {size}-byte transcript"
    );
    eprintln!(
        "figure: {size}-byte transcript: read {read} bytes (the tail), {} chars returned, in {took:?}",
        text.chars().count()
    );
    fs::remove_dir_all(root).unwrap();
    fs::remove_dir_all(project).unwrap();
}

#[test]
fn binary_malformed_and_non_file_context_inputs_are_skipped_quickly() {
    let root = scratch("junk");
    let mut random = 0x9e37_79b9_7f4a_7c15_u64;
    let mut bytes = Vec::with_capacity(1 << 20);
    while bytes.len() < 1 << 20 {
        random ^= random << 13;
        random ^= random >> 7;
        random ^= random << 17;
        bytes.extend_from_slice(&random.to_le_bytes());
    }
    let binary = root.join("binary.jsonl");
    fs::write(&binary, &bytes).unwrap();
    let malformed = root.join("malformed.jsonl");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let no_newline = "x".repeat(20 * 1024 * 1024);
    fs::write(
        &malformed,
        format!(
            "{{\"type\":\"user\",\"message\":{{\"content\":\"cut\n{deep}\n{{\"type\":\"user\",\"message\":{{\"content\":[{{\"type\":\"image\"}},{{\"type\":\"text\",\"text\":7}}]}}}}\n\u{0}\u{0}\n{no_newline}\n{{\"type\":\"user\",\"message\":{{\"content\":\"ok turn\"}}}}\n"
        ),
    )
    .unwrap();
    let fifo = root.join("fifo.jsonl");
    sys::mkfifo(&fifo, 0o600).expect("mkfifo");
    let cases: [(&str, PathBuf); 5] = [
        ("binary", binary),
        ("malformed", malformed),
        ("a FIFO", fifo.clone()),
        ("/dev/zero", PathBuf::from("/dev/zero")),
        ("a directory", root.clone()),
    ];
    for (what, path) in cases {
        let project = context_project(&format!("junk-{}", what.replace(['/', ' '], "")), &path);
        let (value, read, took) = timed_context(&project, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("context_read hung on {what}"));
        let text = value["text"].as_str().unwrap();
        assert!(
            text.chars().all(|c| c == '\n' || !c.is_control()),
            "{what}: {text:?}"
        );
        if what == "malformed" {
            assert!(text.contains("user: ok turn"), "{text}");
        }
        eprintln!(
            "figure: context from {what}: {} chars, {read} bytes read, {took:?}",
            text.len()
        );
        fs::remove_dir_all(project).unwrap();
    }
    // Link and pointer files that are FIFOs do not hang either.
    let project = context_project("junk-fifo-link", &root.join("binary.jsonl"));
    let link = project.join(".termsprawl/links/me--x.json");
    sys::mkfifo(&link, 0o600).expect("mkfifo");
    assert!(
        timed_context(&project, Duration::from_secs(10)).is_some(),
        "a FIFO link file hung context_read"
    );
    fs::remove_dir_all(project).unwrap();
    fs::remove_dir_all(root).unwrap();
}

/// Output that tries to set the title, move the cursor, write the clipboard, query the
/// terminal, switch screens and hide text, then a plain marker.
const HOSTILE_PRINTF: &str = concat!(
    "printf '",
    "\\033]0;\\105VIL-TITLE\\007",
    "\\033]2;\\105VIL-TITLE2\\033\\\\",
    "\\033]52;c;\\1210xJUEJPQVJELVBBWUxPQUQ=\\007",
    "\\033]52;p;\\1210xJUEJPQVJELVNU\\033\\\\",
    "\\033]8;;http://\\145vil.example/\\033\\\\link\\033]8;;\\033\\\\",
    "\\033[6n\\033[c\\033[>c\\033[21t",
    "\\033[10;10H\\033[2J\\033[H\\033[1A\\033[?1049h\\033[?1049l",
    "\\033P+q\\0654\\064e\\033\\\\",
    "\\302\\2330;EVIL-C1\\007",
    "\\033[8mHIDDEN\\033[0m",
    " END-OF-HOSTILE\\n'"
);

fn check_inert(backend: &str, output: &str) {
    assert!(
        output
            .chars()
            .all(|c| c == '\n' || c == '\t' || !c.is_control()),
        "{backend}: control characters in {output:?}"
    );
    // (A C1 CSI written as UTF-8 is text to both backends, as in xterm's UTF-8 mode:
    // what follows it is shown, inert.)
    for payload in ["EVIL-TITLE", "Q0xJUEJPQVJE", "evil.example", "544e"] {
        assert!(
            !output.contains(payload),
            "{backend}: {payload} leaked into {output:?}"
        );
    }
}

fn hostile_output(backend: &str) {
    let dirs = Dirs::new(&format!("esc-{backend}"));
    let serve = Serve::start(&dirs, &["--agent", "me", "--terminals", backend]);
    let term = serve.ok(&dirs, "me", "terminal_open", json!({}))["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": HOSTILE_PRINTF}),
    );
    let output = poll("the hostile output", Duration::from_secs(10), || {
        let value = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": term}));
        let output = value["output"].as_str().unwrap().to_string();
        output.contains("END-OF-HOSTILE\n").then_some(output)
    });
    check_inert(backend, &output);
    // tmux, like any real terminal, answers the device-status and device-attribute
    // queries into the shell's input (fixed formats: no attacker text can ride on them,
    // and title reports are not answered, as the check above shows). Clear the line
    // (Ctrl-U) the way an agent would, then the next command runs.
    serve.ok(
        &dirs,
        "me",
        "terminal_input",
        json!({"nodeId": term, "text": "\u{15}"}),
    );
    serve.ok(
        &dirs,
        "me",
        "terminal_submit",
        json!({"nodeId": term, "command": "echo AFTER-$((6*7))"}),
    );
    let output = poll("the next command", Duration::from_secs(10), || {
        let value = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": term}));
        let output = value["output"].as_str().unwrap().to_string();
        output.contains("AFTER-42").then_some(output)
    });
    check_inert(backend, &output);
    eprintln!(
        "figure: {backend}: hostile escapes read back as inert text ({} chars)",
        output.len()
    );
    assert!(serve.stop().success());
}

#[test]
fn terminal_escape_sequences_are_inert_text_pty() {
    hostile_output("pty");
}

#[test]
fn terminal_escape_sequences_are_inert_text_tmux() {
    if !serve_harness::tmux_installed() {
        eprintln!("NOTICE: tmux is not installed: tmux escape test skipped");
        return;
    }
    hostile_output("tmux");
}
