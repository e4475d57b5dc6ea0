//! The `http_request`, `mcp_line`, `transcript`, `trail`, `shell_marks` and
//! `terminal_history` fuzz targets' bodies
//! (`fuzz/check_*.rs`, the same files the libFuzzer targets include) run on stable Rust
//! in every `cargo test`: over each checked-in seed corpus `fuzz/corpus/<target>/`, then
//! over deterministic pseudo-random mutations of it (bit flips, inserts, deletions,
//! truncations, splices, target-specific snippets).
#![deny(unsafe_code)]

#[cfg(feature = "host")]
#[path = "../fuzz/check_history.rs"]
mod check_history;
#[path = "../fuzz/check_http.rs"]
mod check_http;
#[cfg(feature = "host")]
#[path = "../fuzz/check_marks.rs"]
mod check_marks;
#[path = "../fuzz/check_mcp.rs"]
mod check_mcp;
#[path = "../fuzz/check_transcript.rs"]
mod check_transcript;
// It prints the trail as `termsprawl-tools activity` does (the host feature).
#[cfg(feature = "host")]
#[path = "../fuzz/check_trail.rs"]
mod check_trail;
mod seeded;

use seeded::{seeds, Rng};

use std::fs;

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], snippets: &[&[u8]]) {
    match rng.below(7) {
        0 if !input.is_empty() => {
            let at = rng.below(input.len());
            input[at] ^= 1 << rng.below(8);
        }
        1 => {
            let at = rng.below(input.len() + 1);
            input.insert(at, rng.next() as u8);
        }
        2 if !input.is_empty() => {
            let at = rng.below(input.len());
            let end = (at + 1 + rng.below(16)).min(input.len());
            input.drain(at..end);
        }
        3 => {
            let keep = rng.below(input.len() + 1);
            input.truncate(keep);
        }
        4 => {
            let keep = rng.below(input.len() + 1);
            let from = rng.below(other.len() + 1);
            input.truncate(keep);
            input.extend_from_slice(&other[from..]);
        }
        _ => {
            let at = rng.below(input.len() + 1);
            let snippet = snippets[rng.below(snippets.len())];
            input.splice(at..at, snippet.iter().copied());
        }
    }
}

fn replay(target: &str, check: fn(&[u8]), mutations: usize, snippets: &[&[u8]], seed: u64) {
    let seeds = seeds(target);
    assert!(
        seeds.len() >= 5,
        "{target}: a few seeds, found {}",
        seeds.len()
    );
    for (name, bytes) in &seeds {
        eprintln!("{target} seed {name}");
        check(bytes);
    }
    let mut rng = Rng(seed);
    for n in 0..mutations {
        let mut input = seeds[rng.below(seeds.len())].1.clone();
        let other = &seeds[rng.below(seeds.len())].1;
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut input, other, snippets);
        }
        if let Err(panic) = std::panic::catch_unwind(|| check(&input)) {
            let path = std::env::temp_dir().join(format!("{target}-crash-{n}"));
            fs::write(&path, &input).unwrap();
            eprintln!(
                "{target}: mutation {n} failed; input saved at {}",
                path.display()
            );
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn http_request_holds_on_seeds_and_mutations() {
    let snippets: &[&[u8]] = &[
        b"\r\n",
        b"\r\n\r\n",
        b"@T",
        b"Origin: null\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 0\r\n",
        b"Content-Length: 18446744073709551616\r\n",
        b"Content-Length: 99999999999999\r\n",
        b"Expect: 100-continue\r\n",
        b"Connection: close\r\n",
        b"ffffffff\r\n",
        b"\x00",
        b" ",
        b":",
    ];
    replay(
        "http_request",
        check_http::check_http,
        600,
        snippets,
        0x0b5e_55ed_4777_0001,
    );
}

#[test]
fn mcp_line_holds_on_seeds_and_mutations() {
    let snippets: &[&[u8]] = &[
        b"\n",
        b"\"id\":null,",
        b"\"id\":1.5e300,",
        b"\"jsonrpc\":\"1.0\",",
        b"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"},",
        b"\"arguments\":\"x\",",
        b"[",
        b"{}",
        b"\xff",
        b"\\u0000",
    ];
    replay(
        "mcp_line",
        check_mcp::check_mcp,
        5_000,
        snippets,
        0x0b5e_55ed_4777_0002,
    );
}

#[test]
fn transcript_holds_on_seeds_and_mutations() {
    let snippets: &[&[u8]] = &[
        b"\n",
        b"\r\n",
        b"{\"type\":\"user\",\"message\":{\"content\":\"x\"}}\n",
        b"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"t\"}]}}\n",
        b"\xe2\x80\xa8",
        b"\xf0\x9f",
        b"\\ud800",
        b"\x00",
    ];
    replay(
        "transcript",
        check_transcript::check_transcript,
        3_000,
        snippets,
        0x0b5e_55ed_4777_0003,
    );
}

#[cfg(feature = "host")]
#[test]
fn trail_holds_on_seeds_and_mutations() {
    let snippets: &[&[u8]] = &[
        b"\n",
        b"\r\n",
        b"\\u001b[2K",
        b"\\u009b",
        b"\xc2\x9b",
        b"\xe2\x80\xae",
        b"\xf3\xa0\x80\x81",
        b"\\ud800",
        b"\"operation\":\"x\",",
        b"\"nodeId\":\"\\u202e\",",
        b"\"args\":{\"k\":[\"\\u0007\",{}]},",
        b"{\"time\":\"\",\"outcome\":\"\"}\n",
        b"\x00",
        b"\xff",
    ];
    replay(
        "trail",
        check_trail::check_trail,
        3_000,
        snippets,
        0x0b5e_55ed_4777_0004,
    );
}

#[cfg(feature = "host")]
#[test]
fn shell_marks_hold_on_seeds_and_mutations() {
    let snippets: &[&[u8]] = &[
        b"\x1b]5379;ab12;",
        b"\x1b]5379;ab12;D;0\x07",
        b"\x1b]5379;ab12;B;make%0A\x07",
        b"\x1b]5379;ab12;A\x1b\\",
        b"ab12",
        b"\x1b",
        b"\x07",
        b";",
    ];
    replay(
        "shell_marks",
        check_marks::check_marks,
        5_000,
        snippets,
        0x0b5e_55ed_4777_0005,
    );
}

#[cfg(feature = "host")]
#[test]
fn terminal_history_holds_on_seeds_and_mutations() {
    let snippets: &[&[u8]] = &[
        b"\n",
        b"\r\n",
        b"\r",
        b"\x1b[",
        b"\x1b[K",
        b"\x1b]0;t\x07",
        "\u{2800}".as_bytes(),
        b"\xe2",
        b"error:",
    ];
    replay(
        "terminal_history",
        check_history::check_history,
        5_000,
        snippets,
        0x0b5e_55ed_4777_0006,
    );
}
