//! One `serve` per project folder: a second one on the same folder, whatever its data
//! folder, refuses naming the first (its data folder and address), so no note made
//! through one is lost to the other's writes; after a crash (`kill -9`) the next starts.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use serde_json::json;
use serve_harness::*;

const PTY: &[&str] = &["--terminals", "pty"];

#[test]
fn a_second_serve_on_a_served_folder_names_the_first_and_a_crash_frees_it() {
    let first_dirs = Dirs::new("plock-a");
    // Another data folder, the same project folder.
    let second_dirs = Dirs::new("plock-b");
    let second_dirs = Dirs {
        root: second_dirs.root.clone(),
        data: second_dirs.data.clone(),
        project: first_dirs.project.clone(),
    };
    let first = Serve::start(&first_dirs, &[PTY, &["--agent", "me"]].concat());
    first.ok(
        &first_dirs,
        "me",
        "sticky_open",
        json!({"text": "made through the first"}),
    );

    let (status, stdout, stderr) = serve_fails(&second_dirs, &[PTY, &["--agent", "me"]].concat());
    assert_eq!(status.code(), Some(1), "stderr: {stderr}");
    assert!(stdout.is_empty(), "no ready line: {stdout}");
    let data = first_dirs.data.canonicalize().unwrap();
    let url = first.ready["url"].as_str().unwrap();
    for part in [
        "is already using the project folder",
        &format!("pid {}", first.pid()),
        &format!("data folder {}", data.display()),
        url,
    ] {
        assert!(stderr.contains(part), "stderr lacks {part:?}: {stderr}");
    }
    // The refused serve wrote nothing: the first's note is still in the canvas file.
    let canvas = std::fs::read_to_string(first_dirs.project_file()).unwrap();
    assert!(canvas.contains("made through the first"), "{canvas}");
    assert!(!second_dirs.agent_tools().join("sessions/me.json").exists());

    // A crash leaves no stale lock: the kernel dropped the flock with the process.
    let killed = first.stop_with(libc::SIGKILL);
    assert!(!killed.success());
    let second = Serve::start(&second_dirs, &[PTY, &["--agent", "me"]].concat());
    let notes = second.ok(&second_dirs, "me", "canvas_list", json!({}));
    assert!(
        notes.to_string().contains("made through the first"),
        "the note survived: {notes}"
    );
    assert!(second.stop().success());
    // A clean stop removes the description; the folder can be served again at once.
    assert!(!first_dirs.project.join(".termsprawl/serve.lock").exists());
    let third = Serve::start(&first_dirs, PTY);
    assert!(third.stop().success());
}
