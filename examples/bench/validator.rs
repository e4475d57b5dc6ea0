//! Validator time per operation: plain `Instant` loops over `validate_tool_request` with
//! a valid request for every operation in the catalogue (every argument filled in).

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use termsprawl_tools::protocol::{exactly_one_of, validate_tool_request, ArgKind, AGENT_TOOLS};

/// One operation's figure.
pub struct ValidatorTime {
    /// The operation.
    pub operation: &'static str,
    /// Nanoseconds per `validate_tool_request` call.
    pub ns_per_call: f64,
}

fn sample_value(kind: ArgKind) -> Value {
    match kind {
        ArgKind::Text => json!("echo hello from the bench"),
        ArgKind::Number => json!(120),
        ArgKind::Ids => json!(["node-1", "node-2", "node-3"]),
        ArgKind::OneOf(choices) => json!(choices.first().copied().unwrap_or("")),
        ArgKind::Message => json!("Please review the diff in src/lib.rs and say what breaks."),
        ArgKind::Key => json!("msg-2026-12-02-1"),
        ArgKind::Whole(min, max) => json!((min + max) / 2),
        ArgKind::Flag => json!(true),
        ArgKind::Wait => json!({"pattern": "Listening on"}),
        ArgKind::Command => json!("last"),
        ArgKind::Keys => json!(["Escape", ":", "q", "!", "Enter"]),
    }
}

/// Times every operation for about `per_operation`.
pub fn measure(per_operation: Duration) -> Result<Vec<ValidatorTime>, String> {
    let mut times = Vec::new();
    for tool in AGENT_TOOLS {
        // Of two alternatives (selector or ref), the first.
        let left_out = exactly_one_of(tool.name).map(|[_, second]| second);
        let args: Map<String, Value> = tool
            .args
            .iter()
            .filter(|a| Some(a.name) != left_out)
            .map(|a| (a.name.to_string(), sample_value(a.kind)))
            .collect();
        let raw = json!({ "operation": tool.name, "args": args });
        validate_tool_request(&raw)
            .map_err(|e| format!("the bench's sample {} request is invalid: {e}", tool.name))?;
        let started = Instant::now();
        let mut calls: u64 = 0;
        while started.elapsed() < per_operation {
            for _ in 0..256 {
                let _ = black_box(validate_tool_request(black_box(&raw)));
            }
            calls += 256;
        }
        times.push(ValidatorTime {
            operation: tool.name,
            ns_per_call: started.elapsed().as_nanos() as f64 / calls as f64,
        });
    }
    Ok(times)
}
