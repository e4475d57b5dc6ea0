//! `private_json` under SIGKILL: a child process rewrites one file in a loop and is
//! killed at random instants, hundreds of times; the file must always parse.
#![deny(unsafe_code)]

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use termsprawl_tools::server::{private_dir, private_json};

const TARGET_ENV: &str = "TST_PRIVATE_JSON_TARGET";

/// The child's side: rewrite the target forever with values of varying size.
/// Run only as a child of the test below (it is ignored otherwise).
#[test]
#[ignore = "a helper process for killed_writers_never_leave_a_torn_file"]
fn child_rewrites_forever() {
    let Ok(target) = std::env::var(TARGET_ENV) else {
        return;
    };
    for n in 0u64.. {
        let pad = "x".repeat(((n * 7919) % 200_000) as usize);
        private_json(Path::new(&target), &json!({ "n": n, "pad": pad })).unwrap();
    }
}

/// A small xorshift generator: random enough to scatter kill instants.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn killed_writers_never_leave_a_torn_file() {
    let dir = std::env::temp_dir().join(format!("tst-server-kill-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    private_dir(&dir).unwrap();
    let target = dir.join("state.json");
    let exe = std::env::current_exe().unwrap();
    let mut seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut kills = 0;
    for _ in 0..300 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_rewrites_forever",
                "--ignored",
                "--test-threads=1",
            ])
            .env(TARGET_ENV, &target)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Let it start (the harness takes a few ms), then kill it at a random instant.
        let until = Instant::now() + Duration::from_micros(2_000 + next_random(&mut seed) % 20_000);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        if let Ok(bytes) = fs::read(&target) {
            let value: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!("torn file after {kills} kills: {e} ({} bytes)", bytes.len())
            });
            assert!(value["n"].is_u64(), "{value}");
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&target).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
    }
    assert!(target.exists(), "the children wrote at least once");
    // Killed mid-write, a child leaves its temp file; that some did shows the kills
    // landed inside writes, not only between them.
    let leftovers = fs::read_dir(&dir).unwrap().count() - 1;
    eprintln!("{kills} kills, {leftovers} inside a write");
    assert!(leftovers > 0, "no kill landed inside a write");
    fs::remove_dir_all(&dir).unwrap();
}
