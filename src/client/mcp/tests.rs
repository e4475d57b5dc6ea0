//! Scripted conversations against the MCP core with a fake host.

use super::*;
use crate::protocol::validate_tool_request;

/// A fake host: answers like the spec's server (validator included) and records calls.
struct FakeHost {
    calls: Vec<(String, Map<String, Value>)>,
    reachable: bool,
}

impl FakeHost {
    fn new() -> Self {
        FakeHost {
            calls: Vec::new(),
            reachable: true,
        }
    }
}

impl ToolHost for FakeHost {
    fn call(&mut self, operation: &str, args: &Map<String, Value>) -> ToolResult {
        self.calls.push((operation.to_string(), args.clone()));
        if !self.reachable {
            return ToolResult::Err(
                "Tool connection unavailable: cannot connect to 127.0.0.1:9 (refused). Check that the host is running (start it with termsprawl-tools serve). Mutations are not automatically retried.".into(),
            );
        }
        let raw = json!({ "operation": operation, "args": args });
        if let Err(error) = validate_tool_request(&raw) {
            return ToolResult::Err(error.to_string());
        }
        match operation {
            "session_info" => ToolResult::Ok(json!({
                "nodeId": "agent-1", "projectId": "p1", "appVersion": "9.9.9",
                "browserEnabled": true, "status": {"state": "connected", "adapter": "claude-mcp"},
            })),
            "browser_screenshot" => ToolResult::Ok(json!({ "image": "iVBORw0KGgo=" })),
            "canvas_list" => ToolResult::Ok(json!([{ "id": "n1" }])),
            _ => ToolResult::Ok(json!({ "did": operation })),
        }
    }
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "test", "version": "1" },
    })
}

/// Sends one message and returns the parsed reply (panics when there is none).
fn ask(server: &mut McpServer, host: &mut FakeHost, message: Value) -> Value {
    let line = message.to_string();
    let reply = server
        .handle_line(line.as_bytes(), host)
        .unwrap_or_else(|| panic!("no reply to {line}"));
    assert!(!reply.contains('\n'), "a reply is one line");
    serde_json::from_str(&reply).unwrap()
}

fn error_code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {reply}"))
}

fn initialize(server: &mut McpServer, host: &mut FakeHost, version: &str) -> Value {
    ask(
        server,
        host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}
        }}),
    )
}

#[test]
fn legacy_conversation_for_every_handshake_version() {
    for version in LEGACY_VERSIONS {
        let mut server = McpServer::new();
        let mut host = FakeHost::new();
        let reply = initialize(&mut server, &mut host, version);
        let result = &reply["result"];
        assert_eq!(result["protocolVersion"], json!(version));
        assert_eq!(
            result["capabilities"],
            json!({ "tools": { "listChanged": true } })
        );
        assert_eq!(result["serverInfo"]["name"], json!("termsprawl"));
        assert_eq!(result["serverInfo"]["version"], json!("9.9.9"));
        assert_eq!(result["instructions"], json!(guide("overview").unwrap()));
        assert!(
            result.get("resultType").is_none(),
            "legacy results have no resultType"
        );
        assert_eq!(
            host.calls[0].0, "session_info",
            "initialize asks the host first"
        );

        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(
            server.handle_line(initialized.to_string().as_bytes(), &mut host),
            None
        );

        let list = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        );
        let tools = list["result"]["tools"].as_array().unwrap();
        assert_eq!(tools.len(), AGENT_TOOLS.len());
        let first = &tools[0];
        assert_eq!(first["name"], json!("session_info"));
        assert!(first["inputSchema"]["type"] == json!("object"));
        assert_eq!(
            first.get("annotations").is_some(),
            at_least(version, "2025-03-26"),
            "{version}"
        );
        assert_eq!(
            first.get("title").is_some(),
            at_least(version, "2025-06-18"),
            "{version}"
        );
        for tool in tools {
            assert_eq!(
                tool.get("outputSchema").is_some(),
                at_least(version, "2025-06-18"),
                "{version} {}",
                tool["name"]
            );
        }
        assert!(list["result"].get("ttlMs").is_none());

        let call = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "session_info"}}),
        );
        let result = &call["result"];
        assert_eq!(result["isError"], json!(false));
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["nodeId"], json!("agent-1"));
        assert_eq!(
            result.get("structuredContent").is_some(),
            at_least(version, "2025-06-18"),
            "{version}"
        );
        assert_eq!(
            host.calls.last().unwrap().1,
            Map::new(),
            "absent arguments become {{}}"
        );

        let ping = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
        );
        assert_eq!(ping["result"], json!({}));
    }
}

#[test]
fn an_unknown_initialize_version_gets_the_newest_legacy_one() {
    for requested in ["2099-01-01", "2026-07-28", ""] {
        let mut server = McpServer::new();
        let reply = initialize(&mut server, &mut FakeHost::new(), requested);
        assert_eq!(reply["result"]["protocolVersion"], json!("2025-11-25"));
    }
    let mut server = McpServer::new();
    let reply = ask(
        &mut server,
        &mut FakeHost::new(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
    );
    assert_eq!(error_code(&reply), INVALID_PARAMS);
}

#[test]
fn initialize_fails_with_the_hosts_error_when_it_is_unreachable() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    host.reachable = false;
    let reply = initialize(&mut server, &mut host, "2025-06-18");
    assert_eq!(error_code(&reply), INTERNAL_ERROR);
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Tool connection unavailable: "));
    assert_eq!(server.negotiated_version(), None);
}

#[test]
fn modern_conversation() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    let discover = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": "discover-1", "method": "server/discover", "params": {"_meta": modern_meta()}}),
    );
    assert_eq!(discover["id"], json!("discover-1"));
    let result = &discover["result"];
    assert_eq!(result["resultType"], json!("complete"));
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        result["capabilities"],
        json!({ "tools": { "listChanged": true } })
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({ "name": "termsprawl", "version": "9.9.9" })
    );
    assert_eq!(result["instructions"], json!(guide("overview").unwrap()));
    assert!(result["ttlMs"].as_u64().is_some());
    assert_eq!(result["cacheScope"], json!("public"));
    assert_eq!(host.calls[0].0, "session_info");

    let list = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta()}}),
    );
    let result = &list["result"];
    assert_eq!(result["resultType"], json!("complete"));
    assert!(result["ttlMs"].as_u64().is_some());
    assert_eq!(result["cacheScope"], json!("public"));
    assert_eq!(result["tools"][0]["title"], json!("Session info"));
    assert!(result["tools"][0]["annotations"]["readOnlyHint"] == json!(true));

    let call = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "_meta": modern_meta(), "name": "canvas_list", "arguments": {}
        }}),
    );
    let result = &call["result"];
    assert_eq!(result["resultType"], json!("complete"));
    assert_eq!(result["isError"], json!(false));
    assert_eq!(
        result["structuredContent"],
        json!({ "result": [{ "id": "n1" }] }),
        "a list answer is wrapped: structuredContent is an object"
    );
    assert_eq!(
        result["content"][0]["text"],
        json!("[{\"id\":\"n1\"}]"),
        "the text content is the answer itself"
    );
    assert!(result.get("ttlMs").is_none(), "tools/call is not cacheable");
    assert_eq!(
        server.negotiated_version(),
        None,
        "modern requests leave no session state"
    );
}

#[test]
fn modern_requests_need_their_meta_fields_and_a_supported_version() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    let no_meta = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(error_code(&no_meta), INVALID_PARAMS);
    let no_capabilities = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"
        }}}),
    );
    assert_eq!(error_code(&no_capabilities), INVALID_PARAMS);
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/protocolVersion"] = json!("1900-01-01");
    let unsupported = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": meta}}),
    );
    assert_eq!(error_code(&unsupported), -32022);
    assert_eq!(
        unsupported["error"]["message"],
        json!("Unsupported protocol version")
    );
    assert_eq!(
        unsupported["error"]["data"]["requested"],
        json!("1900-01-01")
    );
    let supported = unsupported["error"]["data"]["supported"]
        .as_array()
        .unwrap();
    assert_eq!(supported[0], json!("2026-07-28"));
    assert!(supported.contains(&json!("2025-06-18")));
    assert!(
        host.calls.is_empty(),
        "refused requests never reach the host"
    );
}

#[test]
fn a_legacy_session_still_serves_modern_requests() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    initialize(&mut server, &mut host, "2025-06-18");
    let list = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta()}}),
    );
    assert_eq!(list["result"]["resultType"], json!("complete"));
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2025-06-18");
    let same_legacy = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}}),
    );
    assert!(same_legacy["result"].get("resultType").is_none());
}

#[test]
fn tool_errors_and_bad_arguments() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    initialize(&mut server, &mut host, "2025-11-25");
    let call = |server: &mut McpServer, host: &mut FakeHost, params: Value| {
        ask(
            server,
            host,
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}),
        )
    };

    let bad = call(
        &mut server,
        &mut host,
        json!({"name": "canvas_move", "arguments": {"nodeId": "n1", "x": "left", "y": 0}}),
    );
    assert_eq!(bad["result"]["isError"], json!(true));
    assert!(bad["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Invalid x"));
    assert!(bad["result"].get("structuredContent").is_none());

    let unknown_arg = call(
        &mut server,
        &mut host,
        json!({"name": "session_info", "arguments": {"zzz": 1}}),
    );
    assert_eq!(unknown_arg["result"]["isError"], json!(true));

    for params in [
        json!({}),
        json!({"name": 5}),
        json!({"name": "no_such_tool"}),
        json!({"name": "session_info", "arguments": [1]}),
        json!({"name": "session_info", "arguments": "x"}),
    ] {
        let reply = call(&mut server, &mut host, params.clone());
        assert_eq!(error_code(&reply), INVALID_PARAMS, "{params}");
    }

    let cursor = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "abc"}}),
    );
    assert_eq!(error_code(&cursor), INVALID_PARAMS);

    host.reachable = false;
    let down = call(&mut server, &mut host, json!({"name": "canvas_list"}));
    assert_eq!(down["result"]["isError"], json!(true));
    assert!(down["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Mutations are not automatically retried."));
}

#[test]
fn screenshots_become_image_content() {
    for version in ["2025-06-18", "2024-11-05"] {
        let mut server = McpServer::new();
        let mut host = FakeHost::new();
        initialize(&mut server, &mut host, version);
        let reply = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "browser_screenshot", "arguments": {"nodeId": "b1"}
            }}),
        );
        assert_eq!(
            reply["result"]["content"],
            json!([{ "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png" }])
        );
        assert_eq!(reply["result"]["isError"], json!(false));
        // The picture is not repeated in JSON: its other fields (none) are the
        // structured content where the version has it.
        let structured = reply["result"].get("structuredContent");
        if at_least(version, "2025-06-18") {
            assert_eq!(structured, Some(&json!({})));
        } else {
            assert!(structured.is_none());
        }
    }
    let (data, mime, rest) =
        image_of(&json!({"image": "data:image/jpeg;base64,AAAA", "url": "u"})).unwrap();
    assert_eq!((data.as_str(), mime.as_str()), ("AAAA", "image/jpeg"));
    assert_eq!(rest.get("url"), Some(&json!("u")));
    assert!(image_of(&json!({"image": 5})).is_none());
    assert!(image_of(&json!("image")).is_none());
}

#[test]
fn ids_are_echoed_exactly() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    for id in [
        json!(0),
        json!(-7),
        json!(1.5),
        json!(12345678901234_u64),
        json!(""),
        json!("abc"),
        json!("0"),
    ] {
        let reply = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
        );
        assert_eq!(reply["id"], id);
        assert_eq!(reply["result"], json!({}));
        let unknown = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": id, "method": "nope/nope"}),
        );
        assert_eq!(unknown["id"], id);
        assert_eq!(error_code(&unknown), METHOD_NOT_FOUND);
    }
}

#[test]
fn every_protocol_error_code() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    let raw = |server: &mut McpServer, host: &mut FakeHost, line: &[u8]| -> Value {
        serde_json::from_str(&server.handle_line(line, host).expect("a reply")).unwrap()
    };
    for line in [&b"{not json"[..], b"{\"a\":", b"\xff\xfe", b"nul\x00l"] {
        let reply = raw(&mut server, &mut host, line);
        assert_eq!(error_code(&reply), PARSE_ERROR);
        assert_eq!(reply["id"], Value::Null);
    }
    for message in [
        json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
        json!(5),
        json!("ping"),
        json!({"jsonrpc": "2.0", "id": 1}),
        json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}),
        json!({"id": 1, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": 7}),
        json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": true, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}),
    ] {
        let reply = ask(&mut server, &mut host, message.clone());
        assert_eq!(error_code(&reply), INVALID_REQUEST, "{message}");
    }
    let wrong_version = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "1.0", "id": "x", "method": "ping"}),
    );
    assert_eq!(
        wrong_version["id"],
        json!("x"),
        "a readable id is echoed on errors too"
    );
    let params = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
    );
    assert_eq!(error_code(&params), INVALID_PARAMS);
    let meta = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": 3}}),
    );
    assert_eq!(error_code(&meta), INVALID_PARAMS);
    for method in [
        "resources/list",
        "prompts/list",
        "logging/setLevel",
        "completion/complete",
        "",
    ] {
        let reply = ask(
            &mut server,
            &mut host,
            json!({"jsonrpc": "2.0", "id": 1, "method": method}),
        );
        assert_eq!(error_code(&reply), METHOD_NOT_FOUND, "{method}");
    }
    assert!(host.calls.is_empty());
}

#[test]
fn notifications_responses_and_blank_lines_get_no_reply() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    for message in [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "canvas_list"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/whatever"}),
        json!({"jsonrpc": "2.0", "id": 5, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": 1, "message": "m"}}),
    ] {
        assert_eq!(
            server.handle_line(message.to_string().as_bytes(), &mut host),
            None,
            "{message}"
        );
    }
    for blank in [&b""[..], b"   ", b"\r", b"\t \r"] {
        assert_eq!(server.handle_line(blank, &mut host), None);
    }
    assert!(host.calls.is_empty(), "a notification never calls the host");
}

#[test]
fn meta_is_accepted_anywhere() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    initialize(&mut server, &mut host, "2025-06-18");
    let reply = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "guide_read", "arguments": {"topic": "canvas"},
            "_meta": {"progressToken": "p-1", "codex/threadId": "t-9", "traceparent": "00-aa-bb-01"}
        }}),
    );
    assert_eq!(reply["result"]["isError"], json!(false));
    assert_eq!(
        host.calls.last().unwrap().1,
        json!({"topic": "canvas"}).as_object().unwrap().clone()
    );
    let list = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": {"progressToken": 1}}}),
    );
    assert!(list["result"]["tools"].is_array());
}

#[test]
fn requests_before_initialize_name_their_version() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    let reply = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "canvas_list"}}),
    );
    assert_eq!(error_code(&reply), INVALID_PARAMS);
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .contains("initialize"));
    assert!(host.calls.is_empty());
    let ping = ask(
        &mut server,
        &mut host,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    );
    assert_eq!(ping["result"], json!({}));
}

#[test]
fn the_line_limit_is_256_kib() {
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    initialize(&mut server, &mut host, "2025-06-18");
    let padded = |size: usize| {
        let mut line =
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"pad":""#.to_vec();
        let tail = br#""}}}"#;
        line.resize(size - tail.len(), b'a');
        line.extend_from_slice(tail);
        line
    };
    let at_limit = padded(MAX_LINE_BYTES);
    assert_eq!(at_limit.len(), MAX_LINE_BYTES);
    let reply: Value =
        serde_json::from_str(&server.handle_line(&at_limit, &mut host).unwrap()).unwrap();
    assert_eq!(reply["result"], json!({}));
    let over = padded(MAX_LINE_BYTES + 1);
    let reply: Value =
        serde_json::from_str(&server.handle_line(&over, &mut host).unwrap()).unwrap();
    assert_eq!(error_code(&reply), INVALID_REQUEST);
    assert_eq!(reply["id"], Value::Null);
}

#[test]
fn the_stdio_loop_skips_overlong_lines_and_stops_at_eof() {
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
    input.extend(std::iter::repeat_n(b'x', 3 * MAX_LINE_BYTES));
    input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}");
    let mut output = Vec::new();
    serve(
        std::io::Cursor::new(input),
        &mut output,
        &mut FakeHost::new(),
    )
    .unwrap();
    let lines: Vec<Value> = output
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["id"], json!(1));
    assert_eq!(error_code(&lines[1]), INVALID_REQUEST);
    assert_eq!(
        lines[2]["id"],
        json!("last"),
        "a final line without newline is still read"
    );
}

#[test]
fn bounded_reads_keep_at_most_one_byte_over_the_limit() {
    let data = b"abcdefghij\nxy\n";
    let mut reader = io::BufReader::with_capacity(3, &data[..]);
    assert_eq!(
        read_bounded_line(&mut reader, 4).unwrap(),
        Some(b"abcde".to_vec())
    );
    assert_eq!(
        read_bounded_line(&mut reader, 4).unwrap(),
        Some(b"xy".to_vec())
    );
    assert_eq!(read_bounded_line(&mut reader, 4).unwrap(), None);
}

/// A small deterministic fuzz: random bytes and mutated valid messages never panic and
/// always give at most one JSON line.
#[test]
fn arbitrary_input_never_panics() {
    let seeds = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "canvas_move", "arguments": {"nodeId": "a", "x": 1, "y": 2}, "_meta": modern_meta()}}).to_string(),
        json!({"jsonrpc": "2.0", "id": "s", "method": "server/discover", "params": {"_meta": modern_meta()}}).to_string(),
    ];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut server = McpServer::new();
    let mut host = FakeHost::new();
    for round in 0..3000 {
        let mut line = seeds[round % seeds.len()].clone().into_bytes();
        for _ in 0..(next() % 6) {
            let at = (next() as usize) % line.len();
            match next() % 3 {
                0 => line[at] = next() as u8,
                1 => {
                    line.remove(at);
                }
                _ => line.insert(at, b"{}[]\":,0-e\\"[(next() % 11) as usize]),
            }
            if line.is_empty() {
                break;
            }
        }
        if let Some(reply) = server.handle_line(&line, &mut host) {
            assert!(!reply.contains('\n'));
            let reply: Value = serde_json::from_str(&reply).unwrap();
            assert_eq!(reply["jsonrpc"], json!("2.0"));
        }
    }
}

/// A host whose `session_info` names the operations in `browser` mode or without them.
fn switching_host(
    browser: std::rc::Rc<std::cell::Cell<bool>>,
) -> impl FnMut(&str, &Map<String, Value>) -> ToolResult {
    move |operation, _args| {
        let names: Vec<&str> = AGENT_TOOLS
            .iter()
            .map(|t| t.name)
            .filter(|name| browser.get() || !name.starts_with("browser_"))
            .collect();
        match operation {
            "session_info" => ToolResult::Ok(json!({ "appVersion": "1", "operations": names })),
            _ => ToolResult::Ok(json!({})),
        }
    }
}

fn listed(server: &mut McpServer, host: &mut dyn ToolHost, meta: Option<Value>) -> usize {
    let mut params = json!({});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let line = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list", "params": params});
    let reply: Value = serde_json::from_str(
        &server
            .handle_line(line.to_string().as_bytes(), host)
            .unwrap(),
    )
    .unwrap();
    reply["result"]["tools"].as_array().unwrap().len()
}

#[test]
fn a_legacy_client_hears_of_a_changed_tool_list_and_lists_the_new_one() {
    let browser = std::rc::Rc::new(std::cell::Cell::new(false));
    let mut host = switching_host(browser.clone());
    let mut server = McpServer::new();
    assert!(server.check_tools(&mut host).is_empty(), "no client yet");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let reply: Value = serde_json::from_str(
        &server
            .handle_line(init.to_string().as_bytes(), &mut host)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        reply["result"]["capabilities"]["tools"]["listChanged"],
        json!(true)
    );
    assert_eq!(listed(&mut server, &mut host, None), 25);
    assert!(server.check_tools(&mut host).is_empty(), "unchanged");
    browser.set(true);
    let notes = server.check_tools(&mut host);
    assert_eq!(notes.len(), 1);
    let note: Value = serde_json::from_str(&notes[0]).unwrap();
    assert_eq!(
        note,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    assert!(server.check_tools(&mut host).is_empty(), "told once");
    assert_eq!(listed(&mut server, &mut host, None), AGENT_TOOLS.len());
}

#[test]
fn a_modern_listen_stream_is_acknowledged_notified_by_id_and_cancelled() {
    let browser = std::rc::Rc::new(std::cell::Cell::new(true));
    let mut host = switching_host(browser.clone());
    let mut server = McpServer::new();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let listen = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
        "_meta": meta, "notifications": {"toolsListChanged": true, "promptsListChanged": true}}});
    let ack: Value = serde_json::from_str(
        &server
            .handle_line(listen.to_string().as_bytes(), &mut host)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ack["method"],
        json!("notifications/subscriptions/acknowledged")
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(7)
    );
    assert!(ack.get("id").is_none(), "the listen request stays open");
    assert_eq!(
        listed(&mut server, &mut host, Some(meta.clone())),
        AGENT_TOOLS.len()
    );
    browser.set(false);
    let notes = server.check_tools(&mut host);
    let note: Value = serde_json::from_str(&notes[0]).unwrap();
    assert_eq!(note["method"], json!("notifications/tools/list_changed"));
    assert_eq!(
        note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(7)
    );
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    assert!(server
        .handle_line(cancel.to_string().as_bytes(), &mut host)
        .is_none());
    assert!(!server.has_listeners());
    // Without _meta naming 2026-07-28 and no initialize: refused.
    let bare = json!({"jsonrpc": "2.0", "id": 8, "method": "subscriptions/listen", "params": {}});
    let reply: Value = serde_json::from_str(
        &server
            .handle_line(bare.to_string().as_bytes(), &mut host)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(error_code(&reply), INVALID_PARAMS);
}

/// Arguments that pass the validator for `tool` (the first value of each kind; of two
/// alternatives, the first).
fn valid_args(tool: &ToolSpec) -> Value {
    use crate::protocol::{exactly_one_of, ArgKind};
    let left_out = exactly_one_of(tool.name).map(|[_, second]| second);
    let args: Map<String, Value> = tool
        .args
        .iter()
        .filter(|arg| Some(arg.name) != left_out)
        .map(|arg| {
            let value = match arg.kind {
                ArgKind::Text => json!("n1"),
                ArgKind::Number => json!(1),
                ArgKind::Ids => json!(["n1"]),
                ArgKind::OneOf(values) => json!(values[0]),
                ArgKind::Message => json!("hello"),
                ArgKind::Key => json!("k1"),
                ArgKind::Whole(min, _) => json!(min),
                ArgKind::Flag => json!(true),
                ArgKind::Wait => json!("exit"),
                ArgKind::Command => json!("last"),
                ArgKind::Keys => json!(["Enter"]),
            };
            (arg.name.to_string(), value)
        })
        .collect();
    Value::Object(args)
}

#[test]
fn structured_content_is_an_object_for_every_tool_in_every_version_that_has_it() {
    // The fake host answers an object, a list (canvas_list) and an image
    // (browser_screenshot); a string and a number reach the wrapper through
    // `call_result` directly below.
    let mut eras: Vec<(Era, McpServer)> = Vec::new();
    for version in LEGACY_VERSIONS {
        let mut server = McpServer::new();
        initialize(&mut server, &mut FakeHost::new(), version);
        eras.push((Era::Legacy(version), server));
    }
    eras.push((Era::Modern(MODERN_VERSIONS[0]), McpServer::new()));
    for (era, mut server) in eras {
        let mut host = FakeHost::new();
        let structured = at_least(era.version(), "2025-06-18");
        for tool in AGENT_TOOLS {
            let mut params = json!({ "name": tool.name, "arguments": valid_args(tool) });
            if let Era::Modern(_) = era {
                params["_meta"] = modern_meta();
            }
            let reply = ask(
                &mut server,
                &mut host,
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
            );
            let result = &reply["result"];
            assert_eq!(
                result["isError"],
                json!(false),
                "{era:?} {}: {reply}",
                tool.name
            );
            match result.get("structuredContent") {
                Some(content) => {
                    assert!(structured, "{era:?} {}: {reply}", tool.name);
                    assert!(content.is_object(), "{era:?} {}: {content}", tool.name);
                }
                None => assert!(!structured, "{era:?} {}: {reply}", tool.name),
            }
        }
    }
    let era = Era::Legacy("2025-06-18");
    for value in [json!("text"), json!(3), json!(null), json!([1, 2])] {
        let result = call_result(ToolResult::Ok(value.clone()), era);
        assert_eq!(result["structuredContent"], json!({ "result": value }));
        assert_eq!(result["content"][0]["text"], json!(value.to_string()));
    }
    let failed = call_result(ToolResult::Err("Invalid x".into()), era);
    assert!(failed.get("structuredContent").is_none(), "{failed}");
}

#[test]
fn output_schemas_are_listed_from_2025_06_18_as_the_catalogue_states_them() {
    for version in KNOWN_VERSIONS {
        for tool in AGENT_TOOLS {
            let entry = tool_json(tool, version);
            if at_least(version, "2025-06-18") {
                assert_eq!(entry["outputSchema"], tool.output_schema(), "{version}");
            } else {
                assert!(
                    entry.get("outputSchema").is_none(),
                    "{version} {}",
                    tool.name
                );
            }
        }
    }
}
