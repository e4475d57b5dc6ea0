//! Fuzz target `validate`: arbitrary bytes -> JSON -> `validate_tool_request`.
//! The body lives in `../check_validate.rs` so that `tests/fuzz_corpus.rs` runs the
//! very same checks on stable Rust in every `cargo test`.
#![no_main]
#![deny(unsafe_code)]

#[path = "../check_validate.rs"]
mod check_validate;

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| check_validate::check_validate(bytes));
