//! The body of the `mcp_line` fuzz target, shared by `fuzz/fuzz_targets/mcp_line.rs`
//! (libFuzzer) and `tests/fuzz_replay.rs` (stable `cargo test`) through `#[path]`.
//!
//! The input is split into lines and fed, in order, to one `McpServer::handle_line`
//! with a fake host (so a fuzzed `initialize` changes what later lines see).

use serde_json::{json, Map, Value};
use termsprawl_tools::client::mcp::McpServer;
use termsprawl_tools::protocol::ToolResult;

/// JSON-RPC error codes the server may use.
const CODES: &[i64] = &[-32700, -32600, -32601, -32602, -32603, -32022];

fn fake_host(operation: &str, args: &Map<String, Value>) -> ToolResult {
    match operation {
        "session_info" => ToolResult::Ok(json!({ "nodeId": "n", "appVersion": "1.0" })),
        "browser_screenshot" => ToolResult::Ok(json!({ "image": "data:image/png;base64,AAAA" })),
        "canvas_list" => ToolResult::Ok(json!([{ "id": "n", "args": args }])),
        "terminal_read" => ToolResult::Ok(json!({ "output": "\u{1b}[31mred\n" })),
        _ => ToolResult::Err(format!("Unknown operation: {operation}")),
    }
}

/// Panics (a finding) when a reply is not exactly one line of JSON-RPC 2.0 with a
/// result or an error with a known code, or does not echo the request's id.
pub fn check_mcp(bytes: &[u8]) {
    let mut server = McpServer::new();
    let mut host = fake_host;
    for line in bytes.split(|b| *b == b'\n') {
        let reply = server.handle_line(line, &mut host);
        let request: Option<Value> = serde_json::from_slice(line.trim_ascii()).ok();
        let Some(reply) = reply else {
            continue;
        };
        assert!(!reply.contains('\n'), "a reply spans lines: {reply:?}");
        let reply: Value = serde_json::from_str(&reply).expect("a reply is JSON");
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        let result = reply.get("result");
        let error = reply.get("error");
        assert!(
            result.is_some() != error.is_some(),
            "result xor error: {reply}"
        );
        if let Some(error) = error {
            let code = error["code"].as_i64().expect("an integer code");
            assert!(CODES.contains(&code), "unknown code {code}: {reply}");
            assert!(error["message"].is_string(), "{reply}");
        }
        let id = request
            .as_ref()
            .and_then(|r| r.get("id"))
            .filter(|id| id.is_string() || id.is_number());
        let method = request
            .as_ref()
            .and_then(|r| r.get("method"))
            .is_some_and(Value::is_string);
        if let (Some(id), true, Some(Value::Object(_))) = (id, method, &request) {
            if request.as_ref().and_then(|r| r.get("jsonrpc")) == Some(&json!("2.0")) {
                assert_eq!(&reply["id"], id, "the id is echoed exactly: {reply}");
            }
        }
    }
}
