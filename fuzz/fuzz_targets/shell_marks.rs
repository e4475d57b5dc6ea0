//! Fuzz target `shell_marks`: see `../check_marks.rs` (shared with `tests/fuzz_replay.rs`).
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_marks.rs"]
mod check_marks;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_marks::check_marks(bytes));
