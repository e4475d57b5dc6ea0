//! Fuzz target `terminal_history`: see `../check_history.rs` (shared with `tests/fuzz_replay.rs`).
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_history.rs"]
mod check_history;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_history::check_history(bytes));
