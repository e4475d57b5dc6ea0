//! The `validate` fuzz target's body (`fuzz/check_validate.rs`, the same file the
//! libFuzzer target includes) run on stable Rust in every `cargo test`: over the
//! checked-in seed corpus `fuzz/corpus/validate/`, then over a few thousand
//! deterministic pseudo-random mutations of it (byte flips, inserts, deletions,
//! truncations, splices).
#![deny(unsafe_code)]

#[path = "../fuzz/check_validate.rs"]
mod check_validate;
mod seeded;

use check_validate::check_validate;
use seeded::{seeds, Rng};
use serde_json::Value;
use termsprawl_tools::protocol::{validate_tool_request, AGENT_TOOLS};

/// Mutated inputs judged per run.
const MUTATIONS: usize = 5_000;

/// Snippets a JSON-aware mutation splices in: limits, NULs, keys, structure.
const SNIPPETS: &[&[u8]] = &[
    b"\"\\u0000\"",
    b"\\u0000",
    b"1e400",
    b"1000000.5",
    b"-1000001",
    b"1000000",
    b"18446744073709551616",
    b",\"projectId\":\"x\"",
    b"\"nodeIds\":[]",
    b"[\"a\",\"b\"]",
    b"{}",
    b"[]",
    b"null",
    b"\"\\ud83d\\ude00\"",
    b"\xc3\xa9",
    b"\xff",
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    match rng.below(7) {
        // Flip one bit.
        0 if !input.is_empty() => {
            let at = rng.below(input.len());
            input[at] ^= 1 << rng.below(8);
        }
        // Insert a random byte.
        1 => {
            let at = rng.below(input.len() + 1);
            input.insert(at, rng.next() as u8);
        }
        // Delete a short range.
        2 if !input.is_empty() => {
            let at = rng.below(input.len());
            let end = (at + 1 + rng.below(8)).min(input.len());
            input.drain(at..end);
        }
        // Truncate.
        3 => {
            let keep = rng.below(input.len() + 1);
            input.truncate(keep);
        }
        // Splice: our prefix, the other seed's suffix.
        4 => {
            let keep = rng.below(input.len() + 1);
            let from = rng.below(other.len() + 1);
            input.truncate(keep);
            input.extend_from_slice(&other[from..]);
        }
        // Insert a JSON-aware snippet.
        5 => {
            let at = rng.below(input.len() + 1);
            let snippet = SNIPPETS[rng.below(SNIPPETS.len())];
            input.splice(at..at, snippet.iter().copied());
        }
        // Replace one byte with a JSON structural byte.
        _ if !input.is_empty() => {
            let at = rng.below(input.len());
            const STRUCTURAL: &[u8] = b"{}[]\",:0-.e\\ ";
            input[at] = STRUCTURAL[rng.below(STRUCTURAL.len())];
        }
        _ => input.push(b'"'),
    }
}

#[test]
fn seed_corpus_has_a_valid_request_for_every_operation() {
    let seeds = seeds("validate");
    assert!(
        seeds.len() >= 40,
        "a few dozen seeds, found {}",
        seeds.len()
    );
    for tool in AGENT_TOOLS {
        let accepted = seeds.iter().any(|(_, bytes)| {
            serde_json::from_slice::<Value>(bytes)
                .ok()
                .and_then(|raw| validate_tool_request(&raw).ok())
                .is_some_and(|request| request.operation == tool.name)
        });
        assert!(accepted, "no accepted seed for {}", tool.name);
    }
}

#[test]
fn fuzz_body_holds_on_every_seed() {
    for (name, bytes) in seeds("validate") {
        // A panic names the seed through this message in the test output.
        eprintln!("seed {name}");
        check_validate(&bytes);
    }
}

#[test]
fn fuzz_body_holds_on_deterministic_mutations() {
    let seeds = seeds("validate");
    let mut rng = Rng(0x5eed_0f7e_57ca_fe00);
    let (mut json, mut accepted) = (0usize, 0usize);
    for _ in 0..MUTATIONS {
        let mut input = seeds[rng.below(seeds.len())].1.clone();
        let other = &seeds[rng.below(seeds.len())].1;
        // Mostly one mutation, so that many inputs stay JSON and some stay valid.
        let rounds = if rng.below(2) == 0 {
            1
        } else {
            2 + rng.below(3)
        };
        for _ in 0..rounds {
            mutate(&mut rng, &mut input, other);
        }
        check_validate(&input);
        if let Ok(raw) = serde_json::from_slice::<Value>(&input) {
            json += 1;
            accepted += usize::from(validate_tool_request(&raw).is_ok());
        }
    }
    // The mutations must reach the validator, both sides of it, or this test is idle.
    assert!(json >= MUTATIONS / 10, "only {json} mutations were JSON");
    assert!(
        accepted >= MUTATIONS / 100,
        "only {accepted} mutations were accepted"
    );
    assert!(
        json - accepted >= MUTATIONS / 100,
        "only {} rejected",
        json - accepted
    );
}
