//! The body of the `validate` fuzz target, shared by `fuzz/fuzz_targets/validate.rs`
//! (libFuzzer) and `tests/fuzz_corpus.rs` (stable `cargo test`) through `#[path]`,
//! so both run exactly this code. It uses only the crate's public API.

use serde_json::Value;
use termsprawl_tools::protocol::validate_tool_request;

/// The phrases every validator message begins with (the spec's wording).
const ERROR_PHRASES: &[&str] = &[
    "Expected an operation and args object",
    "Unknown operation",
    "Expected args object",
    "Missing argument: ",
    "Unknown argument: ",
    "Invalid ",
];

/// Runs `bytes` through JSON parsing and the validator as `termsprawl-tools validate`
/// does. Panics (a finding) only when a property breaks: the validator must not
/// panic, every rejection must begin with a spec phrase, an accepted request must be
/// exactly what was sent, and, re-serialized (as a value and as JSON text), it must
/// validate again to itself.
pub fn check_validate(bytes: &[u8]) {
    let Ok(raw) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let request = match validate_tool_request(&raw) {
        Ok(request) => request,
        Err(error) => {
            let message = error.to_string();
            assert!(
                ERROR_PHRASES.iter().any(|p| message.starts_with(p)),
                "rejection without a spec phrase: {message:?}"
            );
            return;
        }
    };
    // Validation normalizes nothing: what was accepted is what was sent.
    assert_eq!(raw["operation"], request.operation.as_str());
    assert_eq!(raw["args"], Value::Object(request.args.clone()));
    let as_value = serde_json::to_value(&request).expect("a ToolRequest serializes");
    assert_eq!(
        validate_tool_request(&as_value).as_ref(),
        Ok(&request),
        "the re-serialized request (as a value) did not validate to itself"
    );
    let as_text = serde_json::to_vec(&request).expect("a ToolRequest serializes");
    let reparsed: Value = serde_json::from_slice(&as_text).expect("our own JSON parses");
    assert_eq!(
        validate_tool_request(&reparsed),
        Ok(request),
        "the re-serialized request (as JSON text) did not validate to itself"
    );
}
