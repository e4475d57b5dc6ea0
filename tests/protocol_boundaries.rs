//! Every boundary of the operation contract, driven through the library's
//! `validate_tool_request` and through the real `termsprawl-tools validate` and
//! `catalogue` binaries. Per-argument cases are generated from `AGENT_TOOLS`, so
//! every string, number, array and enum argument of every operation is covered;
//! `catalogue_matches_the_operation_table` pins `AGENT_TOOLS` itself to a table of every
//! operation's arguments, written out by hand from the spec.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Map, Value};
use termsprawl_tools::protocol::keys::KEY_NAME_PATTERN;
use termsprawl_tools::protocol::{
    at_least_one_of, catalogue_json, exactly_one_of, find_tool, validate_tool_request, ArgKind,
    ArgSpec, ToolSpec, AGENT_KINDS, AGENT_TOOLS, ARTIFACT_VIEWS, BROWSER_IDLE, GUIDE_TOPICS,
    INSPECT_MODES, NO_CONTROL_PATTERN,
};

// ---------------------------------------------------------------- helpers

fn request(operation: &str, args: Value) -> Value {
    json!({ "operation": operation, "args": args })
}

/// The refusal of a call without `arg`: a choice lists its values.
fn missing(arg: &ArgSpec) -> String {
    match arg.kind {
        ArgKind::OneOf(choices) => {
            format!(
                "Missing argument: {} (one of {})",
                arg.name,
                choices.join(", ")
            )
        }
        _ => format!("Missing argument: {}", arg.name),
    }
}

/// `Ok(())` when accepted, else the rejection message.
fn verdict(raw: &Value) -> Result<(), String> {
    validate_tool_request(raw)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A value every argument of this kind accepts.
fn valid_value(kind: ArgKind) -> Value {
    match kind {
        ArgKind::Text => json!("n1"),
        ArgKind::Number => json!(1),
        ArgKind::Ids => json!(["a"]),
        ArgKind::OneOf(values) => json!(values[0]),
        ArgKind::Message => json!("please look"),
        ArgKind::Key => json!("k1"),
        ArgKind::Whole(min, _) => json!(min),
        ArgKind::Flag => json!(true),
        ArgKind::Wait => json!({"pattern": "ready"}),
        ArgKind::Command => json!("last"),
        ArgKind::Keys => json!(["Enter"]),
    }
}

/// Valid args for `tool`: every required argument, and the optional ones too when asked.
/// Of two alternatives (exactly one must be given), always the first.
fn valid_args(tool: &ToolSpec, with_optional: bool) -> Map<String, Value> {
    let alternatives = exactly_one_of(tool.name);
    // Of one-or-both, the first is always given.
    let first_of_either = at_least_one_of(tool.name).map(|[first, _]| first);
    tool.args
        .iter()
        .filter(|a| match alternatives {
            Some([first, second]) if [first, second].contains(&a.name) => a.name == first,
            _ => a.required || with_optional || Some(a.name) == first_of_either,
        })
        .map(|a| (a.name.to_string(), valid_value(a.kind)))
        .collect()
}

/// Every (operation, argument) pair whose argument has a kind matching `pick`.
fn args_where(pick: fn(ArgKind) -> bool) -> Vec<(&'static ToolSpec, &'static ArgSpec)> {
    let pairs: Vec<_> = AGENT_TOOLS
        .iter()
        .flat_map(|tool| tool.args.iter().map(move |arg| (tool, arg)))
        .filter(|(_, arg)| pick(arg.kind))
        .collect();
    assert!(
        !pairs.is_empty(),
        "the catalogue has arguments of this kind"
    );
    pairs
}

/// The verdict on `tool`'s full valid args with `arg` set to `value`.
fn verdict_with(tool: &ToolSpec, arg: &ArgSpec, value: Value) -> Result<(), String> {
    let mut args = valid_args(tool, true);
    if let Some(pair) = exactly_one_of(tool.name).filter(|pair| pair.contains(&arg.name)) {
        // The argument stands in for its alternative.
        pair.iter().for_each(|name| drop(args.remove(*name)));
    }
    args.insert(arg.name.to_string(), value);
    verdict(&request(tool.name, Value::Object(args)))
}

fn assert_accepts(tool: &ToolSpec, arg: &ArgSpec, value: Value, what: &str) {
    assert_eq!(
        verdict_with(tool, arg, value),
        Ok(()),
        "{}.{}: {what} should be accepted",
        tool.name,
        arg.name
    );
}

fn assert_rejects(tool: &ToolSpec, arg: &ArgSpec, value: Value, what: &str) {
    match verdict_with(tool, arg, value) {
        Err(message) => assert!(
            message.starts_with(&format!("Invalid {}: ", arg.name)),
            "{}.{}: {what}: unexpected message {message:?}",
            tool.name,
            arg.name
        ),
        Ok(()) => panic!("{}.{}: {what} should be rejected", tool.name, arg.name),
    }
}

fn is_text(kind: ArgKind) -> bool {
    kind == ArgKind::Text
}
fn is_number(kind: ArgKind) -> bool {
    kind == ArgKind::Number
}
fn is_ids(kind: ArgKind) -> bool {
    kind == ArgKind::Ids
}
fn is_enum(kind: ArgKind) -> bool {
    matches!(kind, ArgKind::OneOf(_))
}
fn is_message(kind: ArgKind) -> bool {
    kind == ArgKind::Message
}
fn is_key(kind: ArgKind) -> bool {
    kind == ArgKind::Key
}

/// Values that are not of the argument's JSON type, for every kind.
fn wrong_types() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!("1"),
        json!([]),
        json!({}),
    ]
}

// ---------------------------------------------------------------- the catalogue itself

#[test]
fn catalogue_matches_the_operation_table() {
    use ArgKind::*;
    /// (argument, kind, required)
    type Arg = (&'static str, ArgKind, bool);
    // (operation, arguments), written out from the spec's operation table.
    let table: &[(&str, &[Arg])] = &[
        ("session_info", &[]),
        ("canvas_list", &[]),
        ("browser_list", &[]),
        // Beyond the spec: an agent tells the person what it is doing.
        (
            "agent_state",
            &[
                ("state", OneOf(&["working", "waiting", "done"]), true),
                ("why", OneOf(&["question", "permission"]), false),
                ("reason", Text, false),
            ],
        ),
        ("agent_status", &[]),
        ("context_read", &[]),
        ("guide_read", &[("topic", OneOf(GUIDE_TOPICS), true)]),
        ("canvas_select", &[("nodeIds", Ids, true)]),
        (
            "canvas_move",
            &[
                ("nodeId", Text, true),
                ("x", Number, true),
                ("y", Number, true),
            ],
        ),
        (
            "canvas_resize",
            &[
                ("nodeId", Text, true),
                ("width", Number, true),
                ("height", Number, true),
            ],
        ),
        (
            "canvas_group",
            &[("nodeIds", Ids, true), ("title", Text, false)],
        ),
        ("sticky_open", &[("text", Text, true)]),
        (
            "artifact_open",
            &[("path", Text, true), ("view", OneOf(ARTIFACT_VIEWS), false)],
        ),
        ("browser_open", &[("url", Text, true)]),
        ("browser_claim", &[("nodeId", Text, true)]),
        (
            "browser_inspect",
            &[
                ("nodeId", Text, true),
                // Beyond the spec: the accessibility snapshot.
                ("mode", OneOf(INSPECT_MODES), false),
                ("maxChars", Whole(3_000, 40_000), false),
                ("snapshot", Key, false),
                ("offset", Whole(0, 1_000_000), false),
                ("root", Key, false),
                ("find", Text, false),
            ],
        ),
        ("browser_screenshot", &[("nodeId", Text, true)]),
        (
            "browser_transfer",
            &[("nodeId", Text, true), ("agentNodeId", Text, true)],
        ),
        (
            "browser_navigate",
            &[("nodeId", Text, true), ("url", Text, true)],
        ),
        (
            "browser_click",
            // The spec's required selector, or (beyond the spec) a snapshot ref: the
            // validator requires exactly one of the two.
            &[
                ("nodeId", Text, true),
                ("selector", Text, false),
                ("ref", Key, false),
            ],
        ),
        (
            "browser_type",
            &[
                ("nodeId", Text, true),
                ("text", Text, true),
                ("selector", Text, false),
                ("ref", Key, false),
            ],
        ),
        // Beyond the spec: waiting on a page, answering its dialog.
        (
            "browser_wait",
            &[
                ("nodeId", Text, true),
                ("text", Text, false),
                ("textGone", Text, false),
                ("idle", OneOf(BROWSER_IDLE), false),
                ("timeoutMs", Whole(0, 600_000), false),
            ],
        ),
        (
            "browser_dialog",
            &[
                ("nodeId", Text, true),
                ("accept", Flag, true),
                ("promptText", Text, false),
            ],
        ),
        // Beyond the spec: keys, history and the viewport.
        (
            "browser_press",
            &[
                ("nodeId", Text, true),
                ("key", Text, true),
                ("ref", Key, false),
            ],
        ),
        (
            "browser_select",
            &[
                ("nodeId", Text, true),
                ("ref", Key, true),
                ("values", Ids, true),
            ],
        ),
        (
            "browser_hover",
            &[("nodeId", Text, true), ("ref", Key, true)],
        ),
        (
            "browser_history",
            &[
                ("nodeId", Text, true),
                ("action", OneOf(&["back", "forward", "reload"]), true),
            ],
        ),
        (
            "browser_resize",
            &[
                ("nodeId", Text, true),
                ("width", Whole(200, 3840), true),
                ("height", Whole(200, 2160), true),
            ],
        ),
        // Beyond the spec: what a page logged and fetched, and files for its inputs.
        (
            "browser_console",
            &[
                ("nodeId", Text, true),
                ("since", Whole(0, 1_000_000), false),
                ("levels", Ids, false),
                ("maxChars", Whole(500, 100_000), false),
            ],
        ),
        (
            "browser_network",
            &[
                ("nodeId", Text, true),
                ("since", Whole(0, 1_000_000), false),
                ("urlContains", Text, false),
                ("failedOnly", Flag, false),
                ("maxChars", Whole(500, 100_000), false),
                ("requestId", Text, false),
            ],
        ),
        (
            "browser_upload",
            &[
                ("nodeId", Text, true),
                ("ref", Key, true),
                ("paths", Ids, true),
            ],
        ),
        ("terminal_open", &[("title", Text, false)]),
        (
            "terminal_read",
            // Beyond the spec: `command`, `since`, `search`, `maxMatches`.
            &[
                ("nodeId", Text, true),
                ("maxChars", Number, false),
                ("command", Command, false),
                ("since", Whole(0, 9_007_199_254_740_991), false),
                ("search", Message, false),
                ("maxMatches", Whole(1, 200), false),
            ],
        ),
        (
            "terminal_submit",
            // Beyond the spec: all but the first two.
            &[
                ("nodeId", Text, true),
                ("command", Text, true),
                ("wait", Wait, false),
                ("timeoutMs", Whole(0, 600_000), false),
                ("maxChars", Whole(200, 100_000), false),
                ("force", Flag, false),
            ],
        ),
        // Beyond the spec: waiting again for a command.
        (
            "terminal_wait",
            &[
                ("nodeId", Text, true),
                ("until", OneOf(&["exit", "idle", "pattern"]), true),
                ("commandId", Whole(1, 1_000_000), false),
                ("pattern", Text, false),
                ("timeoutMs", Whole(0, 600_000), false),
                ("maxChars", Whole(200, 100_000), false),
            ],
        ),
        (
            "terminal_input",
            // Beyond the spec: `keys`; `text` may then be left out.
            &[
                ("nodeId", Text, true),
                ("text", Text, false),
                ("keys", Keys, false),
            ],
        ),
        ("terminal_interrupt", &[("nodeId", Text, true)]),
        ("terminal_external", &[("nodeId", Text, true)]),
        ("terminal_close", &[("nodeId", Text, true)]),
        (
            "agent_launch",
            &[
                ("agent", OneOf(AGENT_KINDS), true),
                // Beyond the spec: a git worktree of its own.
                ("worktree", Flag, false),
                ("branch", Text, false),
            ],
        ),
        // Beyond the spec: agent messaging.
        ("agent_cards", &[]),
        (
            "agent_send",
            &[
                ("nodeId", Text, true),
                ("text", Message, true),
                ("messageId", Key, false),
            ],
        ),
        ("agent_task", &[("taskId", Key, false)]),
        (
            "agent_reply",
            &[
                ("taskId", Key, true),
                ("text", Message, true),
                ("state", OneOf(&["completed", "failed"]), false),
            ],
        ),
    ];
    assert_eq!(table.len(), 44);
    assert_eq!(AGENT_TOOLS.len(), table.len());
    for (name, expected) in table {
        let tool = find_tool(name).unwrap_or_else(|| panic!("{name} is in AGENT_TOOLS"));
        let actual: Vec<_> = tool
            .args
            .iter()
            .map(|a| (a.name, a.kind, a.required))
            .collect();
        assert_eq!(&actual, expected, "{name}");
    }
    assert_eq!(
        GUIDE_TOPICS,
        [
            "overview",
            "browser",
            "terminal",
            "canvas",
            "context",
            "artifacts",
            "agents"
        ]
    );
    assert_eq!(ARTIFACT_VIEWS, ["editor", "diff"]);
    assert_eq!(
        AGENT_KINDS,
        ["claude", "codex", "gemini", "grok", "openclaude", "custom"]
    );
}

#[test]
fn every_operation_accepts_its_valid_args_with_and_without_optional_ones() {
    for tool in AGENT_TOOLS {
        for with_optional in [false, true] {
            let args = Value::Object(valid_args(tool, with_optional));
            let raw = request(tool.name, args.clone());
            let accepted =
                validate_tool_request(&raw).unwrap_or_else(|e| panic!("{}: {e}", tool.name));
            assert_eq!(accepted.operation, tool.name);
            assert_eq!(
                Value::Object(accepted.args),
                args,
                "args come back unchanged"
            );
        }
    }
}

// ---------------------------------------------------------------- strings

#[test]
fn strings_of_64000_characters_pass_and_64001_fail() {
    // ASCII, 2-byte, 3-byte and 4-byte characters: the limit counts characters, not bytes.
    for unit in ["x", "é", "€", "😀"] {
        let at_limit = unit.repeat(64_000);
        let over_limit = unit.repeat(64_001);
        for (tool, arg) in args_where(is_text) {
            assert_accepts(tool, arg, json!(at_limit), &format!("64000 x {unit:?}"));
            assert_rejects(tool, arg, json!(over_limit), &format!("64001 x {unit:?}"));
        }
    }
    // Mixed widths right at the limit.
    let mixed: String = "aé€😀".repeat(16_000);
    assert_eq!(mixed.chars().count(), 64_000);
    let plus_one = format!("{mixed}z");
    for (tool, arg) in args_where(is_text) {
        assert_accepts(tool, arg, json!(mixed), "64000 mixed-width characters");
        assert_rejects(tool, arg, json!(plus_one), "64001 mixed-width characters");
        assert_accepts(tool, arg, json!(""), "the empty string");
    }
}

#[test]
fn nul_anywhere_in_any_string_argument_fails() {
    let with_nul = [
        "\0".to_string(),
        "\0abc".to_string(),
        "ab\0c".to_string(),
        "abc\0".to_string(),
        format!("{}\0", "é".repeat(100)),
        format!("{}\0{}", "x".repeat(31_999), "y".repeat(32_000)),
    ];
    for (tool, arg) in args_where(is_text) {
        for text in &with_nul {
            assert_rejects(tool, arg, json!(text), "a string with NUL");
        }
        // Other control characters are fine.
        assert_accepts(tool, arg, json!("\u{1}\t\n\r\u{7f}"), "control characters");
    }
}

#[test]
fn string_arguments_reject_other_types() {
    for (tool, arg) in args_where(is_text) {
        for value in wrong_types().into_iter().filter(|v| !v.is_string()) {
            assert_rejects(tool, arg, value.clone(), &format!("{value}"));
        }
        assert_rejects(tool, arg, json!(["n1"]), "a one-string array");
    }
}

// ---------------------------------------------------------------- messages and keys

#[test]
fn messages_hold_1_to_16000_characters_without_control_characters_but_newline_and_tab() {
    for (tool, arg) in args_where(is_message) {
        for unit in ["x", "é", "😀"] {
            assert_accepts(tool, arg, json!(unit.repeat(16_000)), "16000 characters");
            assert_rejects(tool, arg, json!(unit.repeat(16_001)), "16001 characters");
        }
        assert_rejects(tool, arg, json!(""), "the empty string");
        assert_accepts(tool, arg, json!("line one\n\tline two"), "newline and tab");
        // C0 (ESC could end the bracketed paste that delivers it), DEL and C1.
        for control in [
            '\0', '\u{1}', '\r', '\u{1b}', '\u{1f}', '\u{7f}', '\u{80}', '\u{9b}', '\u{9f}',
        ] {
            let text = format!("before{control}after");
            assert_rejects(tool, arg, json!(text), &format!("{control:?}"));
        }
        assert_accepts(tool, arg, json!("\u{a0}\u{2028}€"), "characters past C1");
        for value in wrong_types().into_iter().filter(|v| !v.is_string()) {
            assert_rejects(tool, arg, value.clone(), &format!("{value}"));
        }
    }
}

#[test]
fn keys_are_1_to_128_letters_digits_underscores_or_dashes() {
    for (tool, arg) in args_where(is_key) {
        for good in ["a", "_", "-x", "msg_1-A", &"k".repeat(128)] {
            assert_accepts(tool, arg, json!(good), good);
        }
        for bad in ["", "a b", "a.b", "a/b", "é", "a\n", &"k".repeat(129)] {
            assert_rejects(tool, arg, json!(bad), bad);
        }
        for value in wrong_types().into_iter().filter(|v| !v.is_string()) {
            assert_rejects(tool, arg, value.clone(), &format!("{value}"));
        }
    }
}

// ---------------------------------------------------------------- numbers

#[test]
fn numbers_up_to_a_million_pass_and_beyond_fail() {
    let accepted = [
        json!(0),
        json!(-0.0),
        json!(0.5),
        json!(1_000_000),
        json!(-1_000_000),
        json!(1_000_000.0),
        json!(-1_000_000.0),
        json!(999_999.999_999),
        json!(1e-300),
        json!(u64::from(1_000_000u32)),
    ];
    let rejected = [
        json!(1_000_000.5),
        json!(-1_000_000.5),
        json!(1_000_001),
        json!(-1_000_001),
        json!(1e300),
        json!(-1e300),
        json!(f64::MAX),
        json!(u64::MAX),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::from(u32::MAX)),
        json!(9_007_199_254_740_993u64),
    ];
    for (tool, arg) in args_where(is_number) {
        for value in &accepted {
            assert_accepts(tool, arg, value.clone(), &value.to_string());
        }
        for value in &rejected {
            assert_rejects(tool, arg, value.clone(), &value.to_string());
        }
        for value in wrong_types().into_iter().filter(|v| !v.is_number()) {
            assert_rejects(tool, arg, value.clone(), &format!("{value}"));
        }
    }
}

#[test]
fn numbers_parsed_from_text_respect_the_limit() {
    // What a client sends as text, through serde_json as the server and the CLI parse it.
    let cases = [
        ("1000000", true),
        ("1e6", true),
        ("-1E+6", true),
        // Within half a ULP of 1e6 the nearest f64 is 1e6 itself; beyond, it is over.
        ("1000000.00000000005", true),
        ("1000000.00000000006", false),
        ("-1000000.00000000006", false),
        ("1000000.0000000001", false),
        ("999999.99999999994", true),
        ("1000000.5", false),
        ("-1000001", false),
        ("18446744073709551615", false), // u64::MAX
        ("18446744073709551616", false), // beyond u64: parsed as f64
        ("-9223372036854775809", false), // beyond i64: parsed as f64
        ("1e308", false),
    ];
    for (text, ok) in cases {
        let raw: Value = serde_json::from_str(&format!(
            r#"{{"operation":"canvas_move","args":{{"nodeId":"n","x":{text},"y":0}}}}"#
        ))
        .unwrap();
        assert_eq!(verdict(&raw).is_ok(), ok, "x = {text}");
    }
}

#[test]
fn numbers_are_parsed_exactly_as_sent() {
    // The server parses numbers correctly rounded (serde_json's float_roundtrip), like
    // the agents' JSON libraries and any JSON Schema validator: every f64 within 64 ULPs
    // of the limits, and some tiny ones, survive text -> parse unchanged, and the verdict
    // follows the exact value.
    let mut values = Vec::new();
    for limit in [1_000_000f64, -1_000_000f64] {
        for delta in 0..=64u64 {
            values.push(f64::from_bits(limit.to_bits() - delta));
            values.push(f64::from_bits(limit.to_bits() + delta));
        }
    }
    values.extend([
        8.099125053969803e-222,
        -7.931694080927817e-171,
        0.1,
        1.0 / 3.0,
    ]);
    for x in values {
        let text =
            format!(r#"{{"operation":"canvas_move","args":{{"nodeId":"n","x":{x:?},"y":0}}}}"#);
        let raw: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(raw["args"]["x"].as_f64(), Some(x), "{x:?} parsed exactly");
        assert_eq!(verdict(&raw).is_ok(), x.abs() <= 1e6, "{x:?}");
        if let Ok(request) = validate_tool_request(&raw) {
            let again: Value =
                serde_json::from_str(&serde_json::to_string(&request).unwrap()).unwrap();
            assert_eq!(
                validate_tool_request(&again),
                Ok(request),
                "{x:?} round-trips"
            );
        }
    }
}

#[test]
fn numbers_beyond_f64_never_reach_the_validator() {
    // serde_json refuses them, so `validate` answers "not JSON" (exit 2) rather than panicking.
    for text in ["1e400", "-1e400", "[1e400]"] {
        assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
    }
    let raw = r#"{"operation":"canvas_move","args":{"nodeId":"n","x":1e400,"y":0}}"#;
    assert!(serde_json::from_str::<Value>(raw).is_err());
}

// ---------------------------------------------------------------- arrays

#[test]
fn arrays_hold_1_to_100_items() {
    let ids = |n: usize| json!((0..n).map(|i| format!("n{i}")).collect::<Vec<_>>());
    for (tool, arg) in args_where(is_ids) {
        assert_rejects(tool, arg, ids(0), "0 items");
        assert_accepts(tool, arg, ids(1), "1 item");
        assert_accepts(tool, arg, ids(100), "100 items");
        assert_rejects(tool, arg, ids(101), "101 items");
        assert_accepts(tool, arg, json!(["a", "a"]), "repeated items");
    }
}

#[test]
fn array_items_of_255_characters_pass_and_256_fail() {
    for unit in ["x", "é", "😀"] {
        for (tool, arg) in args_where(is_ids) {
            for position in [0, 50, 99] {
                let mut items: Vec<String> = (0..100).map(|i| format!("n{i}")).collect();
                items[position] = unit.repeat(255);
                assert_accepts(tool, arg, json!(items), &format!("255 x {unit:?}"));
                items[position] = unit.repeat(256);
                assert_rejects(tool, arg, json!(items), &format!("256 x {unit:?}"));
            }
            assert_accepts(tool, arg, json!([""]), "an empty item");
        }
    }
}

#[test]
fn nul_anywhere_in_any_array_item_fails() {
    for (tool, arg) in args_where(is_ids) {
        for item in ["\0", "\0a", "a\0b", "a\0"] {
            for position in [0, 1, 2] {
                let mut items = vec!["a".to_string(), "b".to_string(), "c".to_string()];
                items[position] = item.to_string();
                assert_rejects(tool, arg, json!(items), &format!("{item:?} at {position}"));
            }
        }
    }
}

#[test]
fn arrays_reject_other_types_and_non_string_items() {
    for (tool, arg) in args_where(is_ids) {
        for value in wrong_types().into_iter().filter(|v| !v.is_array()) {
            assert_rejects(tool, arg, value.clone(), &format!("{value}"));
        }
        for item in [Value::Null, json!(1), json!(true), json!(["a"]), json!({})] {
            assert_rejects(tool, arg, json!(["a", item]), &format!("item {item}"));
        }
    }
}

// ---------------------------------------------------------------- enums

#[test]
fn every_enum_value_passes_and_near_misses_fail() {
    for (tool, arg) in args_where(is_enum) {
        let ArgKind::OneOf(values) = arg.kind else {
            unreachable!("args_where(is_enum) yields enums only")
        };
        for value in values {
            assert_accepts(tool, arg, json!(value), value);
            assert_rejects(tool, arg, json!(value.to_uppercase()), "upper case");
            assert_rejects(tool, arg, json!(format!(" {value}")), "leading space");
            assert_rejects(tool, arg, json!(format!("{value}\0")), "trailing NUL");
            assert_rejects(tool, arg, json!([value]), "in an array");
        }
        assert_rejects(tool, arg, json!(""), "empty");
        assert_rejects(tool, arg, json!("wrong"), "wrong");
        for value in wrong_types() {
            assert_rejects(tool, arg, value.clone(), &format!("{value}"));
        }
    }
    // A value of another enum is not accepted.
    assert!(verdict(&request("guide_read", json!({"topic": "codex"}))).is_err());
    assert!(verdict(&request("agent_launch", json!({"agent": "overview"}))).is_err());
    assert!(verdict(&request(
        "artifact_open",
        json!({"path": "/p", "view": "terminal"})
    ))
    .is_err());
}

// ---------------------------------------------------------------- missing and unknown

#[test]
fn every_missing_required_argument_is_named() {
    for tool in AGENT_TOOLS {
        for arg in tool.args.iter().filter(|a| a.required) {
            let mut args = valid_args(tool, true);
            args.remove(arg.name);
            assert_eq!(
                verdict(&request(tool.name, Value::Object(args))),
                Err(missing(arg)),
                "{}",
                tool.name
            );
        }
        // Optional arguments may be left out, but not both of two alternatives.
        let alternatives = exactly_one_of(tool.name);
        for arg in tool.args.iter().filter(|a| !a.required) {
            let mut args = valid_args(tool, true);
            args.remove(arg.name);
            let expected = match alternatives {
                Some([first, second]) if arg.name == first => Err(format!(
                    "Missing argument: {first} (give {first} or {second})"
                )),
                _ => Ok(()),
            };
            assert_eq!(verdict(&request(tool.name, Value::Object(args))), expected);
        }
        // One or both of two: neither is refused, naming the first.
        if let Some([first, second]) = at_least_one_of(tool.name) {
            let mut args = valid_args(tool, true);
            args.remove(first);
            args.remove(second);
            assert_eq!(
                verdict(&request(tool.name, Value::Object(args))),
                Err(format!(
                    "Missing argument: {first} (give {first}, {second} or both)"
                ))
            );
        }
    }
}

#[test]
fn every_unknown_argument_is_named() {
    let all_names: Vec<&str> = AGENT_TOOLS
        .iter()
        .flat_map(|t| t.args.iter().map(|a| a.name))
        .chain([
            "projectId",
            "token",
            "operation",
            "args",
            "",
            "NODEID",
            "nodeid",
            "é",
        ])
        .collect();
    for tool in AGENT_TOOLS {
        for name in all_names
            .iter()
            .filter(|n| !tool.args.iter().any(|a| a.name == **n))
        {
            let mut args = valid_args(tool, true);
            args.insert(name.to_string(), json!("n1"));
            let refusal = verdict(&request(tool.name, Value::Object(args))).unwrap_err();
            // Named first, then a near argument of the tool or the list of them.
            let hint = refusal
                .strip_prefix(&format!("Unknown argument: {name} ("))
                .and_then(|rest| rest.strip_suffix(')'))
                .unwrap_or_else(|| panic!("{}: {refusal}", tool.name));
            let takes: Vec<&str> = tool.args.iter().map(|a| a.name).collect();
            let listed = match takes.as_slice() {
                [] => format!("{} takes no arguments", tool.name),
                _ => format!("{} takes {}", tool.name, takes.join(", ")),
            };
            let near = hint
                .strip_prefix("did you mean ")
                .and_then(|rest| rest.strip_suffix('?'));
            assert!(
                hint == listed || near.is_some_and(|near| takes.contains(&near)),
                "{}: {refusal}",
                tool.name
            );
        }
    }
}

#[test]
fn a_project_id_in_args_is_an_unknown_argument() {
    let raw = json!({"operation": "terminal_read", "args": {"nodeId": "t", "projectId": "x"}});
    assert_eq!(
        verdict(&raw),
        Err("Unknown argument: projectId (terminal_read takes nodeId, maxChars, command, since, search, maxMatches)".into())
    );
}

// ---------------------------------------------------------------- the request's shape

#[test]
fn non_objects_are_not_requests() {
    let message = Err("Expected an operation and args object".to_string());
    for raw in [
        Value::Null,
        json!(true),
        json!(1),
        json!("session_info"),
        json!([]),
        json!(["session_info", {}]),
    ] {
        assert_eq!(verdict(&raw), message, "{raw}");
    }
}

#[test]
fn extra_top_level_keys_are_rejected() {
    for key in ["projectId", "nodeId", "token", "requestId", ""] {
        for tool in AGENT_TOOLS {
            let mut raw = request(tool.name, Value::Object(valid_args(tool, true)));
            raw[key] = json!("x");
            assert_eq!(
                verdict(&raw),
                Err("Expected an operation and args object".into()),
                "{} + {key}",
                tool.name
            );
        }
    }
}

#[test]
fn operations_must_be_catalogue_strings() {
    for operation in [
        Value::Null,
        json!(7),
        json!(true),
        json!(["session_info"]),
        json!({"name": "session_info"}),
        json!(""),
        json!("SESSION_INFO"),
        json!(" session_info"),
        json!("session_info\0"),
        json!("terminal"),
    ] {
        let raw = json!({"operation": operation, "args": {}});
        let message = verdict(&raw).unwrap_err();
        assert!(
            message.starts_with("Unknown operation"),
            "{operation}: {message}"
        );
    }
    assert!(verdict(&json!({"args": {}}))
        .unwrap_err()
        .starts_with("Unknown operation"));
}

#[test]
fn args_must_be_an_object() {
    for tool in AGENT_TOOLS {
        for args in [
            Value::Null,
            json!(true),
            json!(0),
            json!("{}"),
            json!([]),
            json!([{}]),
        ] {
            assert_eq!(
                verdict(&request(tool.name, args.clone())),
                Err("Expected args object".into()),
                "{} with args {args}",
                tool.name
            );
        }
        assert_eq!(
            verdict(&json!({ "operation": tool.name })),
            Err("Expected args object".into()),
            "{} without args",
            tool.name
        );
    }
}

// ---------------------------------------------------------------- check order

#[test]
fn checks_run_required_then_unknown_then_values() {
    // Missing beats unknown and invalid values.
    assert_eq!(
        verdict(&request(
            "canvas_move",
            json!({"x": "bad", "bogus": 1, "y": 0})
        )),
        Err("Missing argument: nodeId".into())
    );
    // With several missing, the first in catalogue order is named.
    assert_eq!(
        verdict(&request("canvas_resize", json!({}))),
        Err("Missing argument: nodeId".into())
    );
    // Unknown beats invalid values.
    assert_eq!(
        verdict(&request(
            "canvas_move",
            json!({"nodeId": "n\0", "x": 2e6, "y": 0, "bogus": 1})
        )),
        Err("Unknown argument: bogus (canvas_move takes nodeId, x, y)".into())
    );
    // Then values, in catalogue order.
    assert_eq!(
        verdict(&request(
            "canvas_move",
            json!({"y": 2e6, "x": 0, "nodeId": "n\0"})
        )),
        Err("Invalid nodeId: must be a string of at most 64000 characters without NUL".into())
    );
    // The request's shape comes before anything in args.
    assert_eq!(
        verdict(&json!({"operation": "nope", "args": []})),
        Err(
            "Unknown operation: nope; the operations you may call are in session_info's operations"
                .into()
        )
    );
    assert_eq!(
        verdict(&json!({"operation": "session_info", "args": [], "extra": 1})),
        Err("Expected args object".into())
    );
    assert_eq!(
        verdict(&json!({"operation": "canvas_move", "args": {}, "extra": 1})),
        Err("Expected an operation and args object".into())
    );
    // Every operation: missing before unknown.
    for tool in AGENT_TOOLS {
        if let Some(first_required) = tool.args.iter().find(|a| a.required) {
            let raw = request(tool.name, json!({"bogus": 1}));
            assert_eq!(verdict(&raw), Err(missing(first_required)), "{}", tool.name);
        }
    }
}

// ---------------------------------------------------------------- the real binaries

/// Runs `termsprawl-tools ARGS` with `stdin`; the child is always waited for.
fn run_cli(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("termsprawl-tools starts");
    let write_result = child.stdin.take().expect("piped stdin").write_all(stdin);
    let output = child.wait_with_output().expect("termsprawl-tools ends");
    write_result.expect("stdin written");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("panicked"),
        "termsprawl-tools panicked: {stderr}"
    );
    output
}

fn stdout_json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON document")
}

#[test]
fn cli_validate_prints_an_unknown_argument_refusal_and_exits_1() {
    let output = run_cli(
        &["validate"],
        br#"{"operation":"terminal_read","args":{"nodeId":"t","projectId":"x"}}"#,
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "{\"ok\":false,\"error\":\"Unknown argument: projectId (terminal_read takes nodeId, maxChars, command, since, search, maxMatches)\"}\n"
    );
}

#[test]
fn cli_validate_refusals_say_what_to_do_next() {
    let cases = [
        (
            json!({"operation": "terminal_open", "args": {"titel": "build"}}),
            "Unknown argument: titel (did you mean title?)",
        ),
        (
            json!({"operation": "canvas_lst", "args": {}}),
            "Unknown operation: canvas_lst; the operations you may call are in session_info's operations",
        ),
        (
            json!({"operation": "guide_read", "args": {}}),
            "Missing argument: topic (one of overview, browser, terminal, canvas, context, artifacts, agents)",
        ),
        (
            json!({"operation": "guide_read", "args": {"topic": "intro"}}),
            "Invalid topic: must be one of overview, browser, terminal, canvas, context, artifacts, agents",
        ),
    ];
    for (raw, error) in cases {
        let output = run_cli(&["validate"], raw.to_string().as_bytes());
        assert_eq!(output.status.code(), Some(1), "{raw}");
        assert_eq!(stdout_json(&output), json!({"ok": false, "error": error}));
    }
}

#[test]
fn cli_validate_accepts_and_prints_the_request() {
    let raw =
        json!({"operation": "canvas_move", "args": {"nodeId": "n", "x": -1_000_000, "y": 0.5}});
    let output = run_cli(&["validate"], raw.to_string().as_bytes());
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout_json(&output), json!({"ok": true, "value": raw}));
}

#[test]
fn cli_validate_rejects_boundaries_with_exit_1() {
    let over = json!({"operation": "sticky_open", "args": {"text": "😀".repeat(64_001)}});
    let at = json!({"operation": "sticky_open", "args": {"text": "😀".repeat(64_000)}});
    let cases = [
        (over, Some("Invalid text: ")),
        (at, None),
        (
            json!({"operation": "canvas_move", "args": {"nodeId": "n", "x": 1_000_000.5, "y": 0}}),
            Some("Invalid x: "),
        ),
        (
            json!({"operation": "canvas_select", "args": {"nodeIds": ["a\u{0}"]}}),
            Some("Invalid nodeIds: "),
        ),
        (
            json!({"operation": "nope", "args": {}}),
            Some("Unknown operation"),
        ),
        (json!([]), Some("Expected an operation and args object")),
    ];
    for (raw, expected_error) in cases {
        let output = run_cli(&["validate"], raw.to_string().as_bytes());
        let result = stdout_json(&output);
        match expected_error {
            Some(prefix) => {
                assert_eq!(output.status.code(), Some(1));
                assert_eq!(result["ok"], json!(false));
                let error = result["error"].as_str().expect("error is a string");
                assert!(error.starts_with(prefix), "{error}");
            }
            None => {
                assert_eq!(output.status.code(), Some(0));
                assert_eq!(result, json!({"ok": true, "value": raw}));
            }
        }
    }
}

#[test]
fn cli_validate_exits_2_on_input_that_is_not_json() {
    let inputs: &[&[u8]] = &[
        b"1e400",
        br#"{"operation":"canvas_move","args":{"nodeId":"n","x":1e400,"y":0}}"#,
        b"",
        b"not json",
        b"{\"operation\":",
        b"{} {}",
        b"\"\\ud800\"",
        b"\xff\xfe",
    ];
    for input in inputs {
        let output = run_cli(&["validate"], input);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert!(output.stdout.is_empty(), "nothing on stdout");
        assert!(String::from_utf8_lossy(&output.stderr).contains("not JSON"));
    }
}

#[test]
fn cli_catalogue_prints_44_operations_whose_schemas_carry_the_limits() {
    let output = run_cli(&["catalogue"], b"");
    assert_eq!(output.status.code(), Some(0));
    let catalogue = stdout_json(&output);
    assert_eq!(catalogue, catalogue_json());
    let entries = catalogue.as_array().expect("an array");
    assert_eq!(entries.len(), 44);
    for (entry, tool) in entries.iter().zip(AGENT_TOOLS) {
        assert_eq!(entry["name"], json!(tool.name));
        assert!(entry["description"].as_str().is_some_and(|d| !d.is_empty()));
        let schema = &entry["inputSchema"];
        assert_eq!(schema["type"], json!("object"));
        assert_eq!(schema["additionalProperties"], json!(false));
        let required: Vec<&str> = tool
            .args
            .iter()
            .filter(|a| a.required)
            .map(|a| a.name)
            .collect();
        assert_eq!(schema["required"], json!(required));
        let properties = schema["properties"].as_object().expect("properties");
        assert_eq!(properties.len(), tool.args.len());
        for arg in tool.args {
            let p = &properties[arg.name];
            match arg.kind {
                ArgKind::Text => {
                    assert_eq!(p["type"], json!("string"));
                    assert_eq!(p["maxLength"], json!(64_000));
                    assert_eq!(p["pattern"], json!("^[^\\u0000]*$"));
                }
                ArgKind::Number => {
                    assert_eq!(p["type"], json!("number"));
                    assert_eq!(p["minimum"], json!(-1_000_000));
                    assert_eq!(p["maximum"], json!(1_000_000));
                }
                ArgKind::Ids => {
                    assert_eq!(p["type"], json!("array"));
                    assert_eq!(p["minItems"], json!(1));
                    assert_eq!(p["maxItems"], json!(100));
                    assert_eq!(p["items"]["type"], json!("string"));
                    assert_eq!(p["items"]["maxLength"], json!(255));
                    assert_eq!(p["items"]["pattern"], json!("^[^\\u0000]*$"));
                }
                ArgKind::OneOf(values) => {
                    assert_eq!(p["type"], json!("string"));
                    assert_eq!(p["enum"], json!(values));
                }
                ArgKind::Message => {
                    assert_eq!(p["type"], json!("string"));
                    assert_eq!(p["minLength"], json!(1));
                    assert_eq!(p["maxLength"], json!(16_000));
                    assert_eq!(p["pattern"], json!(NO_CONTROL_PATTERN));
                }
                ArgKind::Key => {
                    assert_eq!(p["type"], json!("string"));
                    assert_eq!(p["pattern"], json!("^[a-zA-Z0-9_-]{1,128}$"));
                }
                ArgKind::Whole(min, max) => {
                    assert_eq!(p["type"], json!("integer"));
                    assert_eq!((&p["minimum"], &p["maximum"]), (&json!(min), &json!(max)));
                }
                ArgKind::Flag => assert_eq!(p["type"], json!("boolean")),
                ArgKind::Wait => {
                    assert_eq!(p["oneOf"][0]["enum"], json!(["exit", "idle"]));
                    let pattern = &p["oneOf"][1]["properties"]["pattern"];
                    assert_eq!(pattern["maxLength"], json!(64_000));
                    assert_eq!(p["oneOf"][1]["additionalProperties"], json!(false));
                }
                ArgKind::Command => {
                    assert_eq!(p["oneOf"][0]["enum"], json!(["last"]));
                    assert_eq!(p["oneOf"][1]["maximum"], json!(1_000_000));
                }
                ArgKind::Keys => {
                    assert_eq!(p["type"], json!("array"));
                    assert_eq!((&p["minItems"], &p["maxItems"]), (&json!(1), &json!(100)));
                    assert_eq!(p["items"]["maxLength"], json!(16));
                    assert_eq!(p["items"]["pattern"], json!(KEY_NAME_PATTERN));
                }
            }
        }
        // Exactly one of two alternatives: the required arguments and one more.
        if exactly_one_of(tool.name).is_some() {
            assert_eq!(schema["minProperties"], json!(required.len() + 1));
            assert_eq!(schema["maxProperties"], json!(required.len() + 1));
        } else if at_least_one_of(tool.name).is_some() {
            // One or both of two: the required arguments and at least one more.
            assert_eq!(schema["minProperties"], json!(required.len() + 1));
            assert!(schema.get("maxProperties").is_none(), "{}", tool.name);
        } else {
            assert!(schema.get("minProperties").is_none(), "{}", tool.name);
        }
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(
                entry["annotations"][hint].is_boolean(),
                "{} {hint}",
                tool.name
            );
        }
    }
}

#[test]
fn cli_without_a_known_subcommand_exits_2() {
    for (args, said) in [
        (&[][..], "termsprawl-tools: missing COMMAND"),
        (&["nope"], "termsprawl-tools: unknown command nope"),
        (
            &["validate", "extra"],
            "termsprawl-tools validate: unexpected argument extra",
        ),
        (
            &["catalogue", "x"],
            "termsprawl-tools catalogue: unexpected argument x",
        ),
    ] {
        let output = run_cli(args, b"");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines[0], said, "{args:?}");
        assert!(
            lines[1].ends_with("--help' for more information."),
            "{stderr}"
        );
    }
}
