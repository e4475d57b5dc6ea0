//! The body of the `shell_marks` fuzz target, shared by `fuzz/fuzz_targets/shell_marks.rs`
//! (libFuzzer) and `tests/fuzz_replay.rs` (stable `cargo test`) through `#[path]`.
//!
//! The input is a terminal's output: its first byte picks where it is split into
//! chunks, the rest is fed to the OSC 5379 mark parser (`host::terminals::shell::marks`) with a
//! short nonce (`ab12`, so that mutations find real marks), whole and in those chunks.

use termsprawl_tools::host::terminals::shell::marks::{MarkParser, Parsed};

const NONCE: &str = "ab12";

fn feed_in_chunks(bytes: &[u8], step: usize) -> Parsed {
    let mut parser = MarkParser::new(NONCE);
    let mut all = Parsed::default();
    for chunk in bytes.chunks(step.max(1)) {
        let parsed = parser.feed(chunk);
        let offset = all.plain.len();
        all.marks.extend(
            parsed
                .marks
                .into_iter()
                .map(|(at, mark)| (at + offset, mark)),
        );
        all.plain.extend_from_slice(&parsed.plain);
        all.nonce_seen |= parsed.nonce_seen;
    }
    all
}

/// Panics (a finding) when a split changes what the parser found, a mark's place is
/// outside the plain output or out of order, the plain output grew beyond the input, or
/// the plain output holds a mark that counts while the nonce was not seen in it (so
/// nothing a program prints without the nonce reaches the screen as our mark).
pub fn check_marks(bytes: &[u8]) {
    let Some((&split, output)) = bytes.split_first() else {
        return;
    };
    let whole = feed_in_chunks(output, output.len());
    let chunked = feed_in_chunks(output, usize::from(split % 17) + 1);
    assert_eq!(whole, chunked, "a split changed the result");
    assert!(whole.plain.len() <= output.len());
    let mut last = 0;
    for (at, _) in &whole.marks {
        assert!(*at >= last && *at <= whole.plain.len(), "{at} out of place");
        last = *at;
    }
    let again = feed_in_chunks(&whole.plain, whole.plain.len());
    assert!(
        again.marks.is_empty() || whole.nonce_seen,
        "a mark reached the screen without the nonce showing: {:?}",
        again.marks
    );
}
