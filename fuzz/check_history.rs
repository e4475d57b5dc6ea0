//! The body of the `terminal_history` fuzz target, shared by
//! `fuzz/fuzz_targets/terminal_history.rs` (libFuzzer) and `tests/fuzz_replay.rs` (stable
//! `cargo test`) through `#[path]`.
//!
//! The input is a terminal's output: its first byte picks how many characters a read
//! asks for, whether the kept history starts inside a line and whether it was cut by a
//! read's limit; the rest is the history (`host::terminals::history`), followed from its
//! start with `since` and searched for a needle taken from it.

use termsprawl_tools::host::terminals::history::History;

/// Panics (a finding) when a read answers more than it was asked, a control character
/// other than newline and tab, a cursor that goes back or past the end, or stops short
/// of a newline it could have passed; or when a search answers more matches than asked,
/// out of order, or numbers before the first line kept.
pub fn check_history(bytes: &[u8]) {
    let Some((&pick, output)) = bytes.split_first() else {
        return;
    };
    let max_chars = usize::from(pick % 32) * 7 + 1;
    let history = History {
        start: 1000,
        lines_before: 41,
        starts_line: pick & 0x40 == 0,
        bytes: output.to_vec(),
        cut: pick & 0x80 != 0,
    };
    let end = history.end();
    let mut since = 990; // before the kept bytes: what is missing is lost
    for read_number in 0.. {
        let read = history.after(since, max_chars);
        assert!(
            read.text.chars().count() <= max_chars,
            "{} > {max_chars}",
            read.text.len()
        );
        assert!(
            !read
                .text
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{:?}",
            read.text
        );
        assert!(read.cursor >= since.max(history.start) && read.cursor <= end);
        assert!(
            read_number > 0 || read.lost >= 10,
            "the first read loses what was dropped"
        );
        assert!(read_number == 0 || read.lost == 0);
        if read.cursor == since {
            // Stopped: only an unfinished line (waiting for its end) may be left.
            let rest = &output[(since - history.start) as usize..];
            assert!(
                !rest.contains(&b'\n') || since == end,
                "stuck before a newline"
            );
            break;
        }
        since = read.cursor;
    }
    let middle = output.len() / 2;
    let needle = String::from_utf8_lossy(&output[middle..(middle + 2).min(output.len())]);
    for needle in [needle.as_ref(), "e", "\u{0130}"] {
        if needle.is_empty() {
            continue;
        }
        let found = history.search(needle, usize::from(pick % 5) + 1);
        assert!(found.matches.len() <= usize::from(pick % 5) + 1);
        assert!(found.count >= found.matches.len() as u64);
        let mut last = history.lines_before;
        for m in &found.matches {
            assert!(m.line > last, "line {} after {last}", m.line);
            assert!(m.before.len() <= 1 && m.after.len() <= 1);
            last = m.line;
        }
    }
}
