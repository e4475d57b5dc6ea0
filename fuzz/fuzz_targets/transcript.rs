//! Fuzz target `transcript`: see `../check_transcript.rs` (shared with `tests/fuzz_replay.rs`).
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_transcript.rs"]
mod check_transcript;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_transcript::check_transcript(bytes));
