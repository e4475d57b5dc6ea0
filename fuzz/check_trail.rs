//! The body of the `trail` fuzz target, shared by `fuzz/fuzz_targets/trail.rs`
//! (libFuzzer) and `tests/fuzz_replay.rs` (stable `cargo test`) through `#[path]`.
//!
//! The input is written as a project's activity trail and read back as
//! `termsprawl-tools activity` reads it (`read_tail_lines`, and `read_from` as `--follow`
//! does), then printed for people and with `--json` (`print_lines`).

use std::path::PathBuf;
use std::sync::OnceLock;

use termsprawl_tools::activity::{read_from, read_tail_lines, ActivityLine};
use termsprawl_tools::host::person::activity::print_lines;

/// The project whose trail the input becomes.
const PROJECT: &str = "fuzz";

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = std::path::Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("fuzz-trail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch trail folder");
        dir
    })
}

/// What must never reach a terminal raw, written out independently of the printer's
/// own rule: C0 (the newline ending each line aside), DEL, C1, and the bidi and
/// invisible formatting characters. (`tests/activity.rs` judges `serve`'s output by it too.)
pub fn acts_or_hides(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{9}'
            | '\u{b}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{ad}'
            | '\u{61c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{e0000}'..='\u{e007f}'
    )
}

/// Panics (a finding) when reading or printing panics, when the lines for people are
/// not valid UTF-8, hold a raw control, bidi or invisible character, or are not exactly
/// one output line per trail line, or when `--json` is not exactly the file's lines
/// that parse, byte for byte.
pub fn check_trail(bytes: &[u8]) {
    let file = dir().join(format!("{PROJECT}.jsonl"));
    std::fs::write(&file, bytes).expect("a scratch trail");
    let lines = read_tail_lines(dir(), PROJECT, usize::MAX);

    let parsable: Vec<&[u8]> = bytes
        .split(|b| *b == b'\n')
        .filter(|line| serde_json::from_slice::<ActivityLine>(line).is_ok())
        .collect();
    let mut json = Vec::new();
    print_lines(&lines, true, &mut json).expect("printing to memory");
    let mut expected = Vec::new();
    for line in &parsable {
        expected.extend_from_slice(line);
        expected.push(b'\n');
    }
    assert!(json == expected, "--json is not the file's parsable lines");

    let mut human = Vec::new();
    print_lines(&lines, false, &mut human).expect("printing to memory");
    let text = std::str::from_utf8(&human).expect("the lines for people are UTF-8");
    assert_eq!(
        text.matches('\n').count(),
        lines.len(),
        "one output line per trail line"
    );
    if let Some(c) = text.chars().find(|c| acts_or_hides(*c)) {
        panic!("a raw {c:?} in the lines for people: {text:?}");
    }

    // `--follow` reads whole lines from an offset: a prefix of the same lines.
    let mut opened = std::fs::File::open(&file).expect("the scratch trail");
    let (followed, _) = read_from(&mut opened, 0).expect("reading the scratch trail");
    assert!(followed.len() <= lines.len());
    assert!(followed.iter().zip(&lines).all(|(a, b)| a == b));
    let mut shown = Vec::new();
    print_lines(&followed, false, &mut shown).expect("printing to memory");
}
