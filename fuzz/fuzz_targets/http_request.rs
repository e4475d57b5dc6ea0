//! Fuzz target `http_request`: see `../check_http.rs` (shared with `tests/fuzz_replay.rs`).
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_http.rs"]
mod check_http;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_http::check_http(bytes));
