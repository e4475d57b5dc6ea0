//! `serve` raises its soft descriptor limit to the hard one (its own test binary: it
//! lowers this process's soft limit, which the other tests must not see).
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use serve_harness::*;

/// (soft, hard) of "Max open files" in /proc/<pid>/limits.
fn open_files_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_string(), fields[4].to_string())
}

#[test]
fn serve_raises_the_soft_descriptor_limit_to_the_hard_one() {
    let (_, hard) = sys::open_files_limit().expect("getrlimit");
    // Below the hard limit, so serve (which inherits it) has something to raise.
    sys::set_open_files_soft_limit((hard / 2).min(1024)).expect("setrlimit");
    let dirs = Dirs::new("fd-limit");
    let serve = Serve::start(&dirs, &["--terminals", "pty"]);
    let (soft, hard) = open_files_limit(serve.pid());
    assert_eq!(soft, hard);
}
