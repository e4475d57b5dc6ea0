//! Fuzz target `trail`: see `../check_trail.rs` (shared with `tests/fuzz_replay.rs`).
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_trail.rs"]
mod check_trail;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_trail::check_trail(bytes));
