//! Fuzz target `mcp_line`: see `../check_mcp.rs` (shared with `tests/fuzz_replay.rs`).
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_mcp.rs"]
mod check_mcp;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_mcp::check_mcp(bytes));
