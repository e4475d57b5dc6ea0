//! The body of the `transcript` fuzz target, shared by `fuzz/fuzz_targets/transcript.rs`
//! (libFuzzer) and `tests/fuzz_replay.rs` (stable `cargo test`) through `#[path]`.
//!
//! The input is written as a transcript file and read with `read_claude_jsonl`, the
//! reader `context_read` uses; its turns are then cut with `last_chars` as
//! `context_read` cuts its answer.

use std::path::PathBuf;
use std::sync::OnceLock;

use termsprawl_tools::runtime::context::{
    last_chars, read_claude_jsonl, MAX_CONTEXT_CHARS, MAX_TURNS, MAX_TURN_CHARS,
};

fn file() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("fuzz-transcript-{}.jsonl", std::process::id()))
    })
}

/// Panics (a finding) when the reader returns more than `MAX_TURNS` turns, a turn that
/// is not `user: …`/`assistant: …` with non-empty text of at most `MAX_TURN_CHARS`
/// characters, or when `last_chars` is not a suffix of at most the asked length.
pub fn check_transcript(bytes: &[u8]) {
    let path = file();
    std::fs::write(path, bytes).expect("a scratch transcript");
    let turns = read_claude_jsonl(path);
    assert!(turns.len() <= MAX_TURNS, "{} turns", turns.len());
    for turn in &turns {
        let text = turn
            .strip_prefix("user: ")
            .or_else(|| turn.strip_prefix("assistant: "))
            .unwrap_or_else(|| panic!("a turn without a role: {turn:?}"));
        assert!(!text.trim().is_empty(), "an empty turn");
        assert!(
            text.chars().count() <= MAX_TURN_CHARS,
            "a turn of {} chars",
            text.chars().count()
        );
    }
    let joined = turns.join("\n\n");
    for max in [0, 1, 7, MAX_CONTEXT_CHARS] {
        let tail = last_chars(&joined, max);
        assert!(tail.chars().count() <= max);
        assert!(joined.ends_with(&tail));
    }
}
