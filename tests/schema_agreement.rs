//! The published `inputSchema` of every operation and our validator reach the same
//! verdict on every request: an independent JSON Schema implementation (the
//! `jsonschema` crate) judges a deterministic, generated set of valid and invalid
//! args objects for each operation, and `validate_tool_request` must agree on each.
#![deny(unsafe_code)]

mod seeded;

use jsonschema::{Draft, Validator};
use seeded::Rng;
use serde_json::{json, Map, Value};
use termsprawl_tools::protocol::{
    catalogue_json, find_tool, validate_tool_request, ArgKind, ToolSpec, NO_NUL_PATTERN,
};

/// Cases generated per operation (44 operations: about 13,000 requests).
const CASES_PER_OPERATION: usize = 300;

/// Strings at and around every string limit, plus NULs at different places.
fn interesting_strings() -> Vec<String> {
    let mut strings = vec![
        String::new(),
        "n1".into(),
        "a b\tc\nd".into(),
        "\u{1}\u{7f}\u{ffff}".into(),
        "\0".into(),
        "\0a".into(),
        "a\0b".into(),
        "a\0".into(),
        "\\u0000".into(), // the six characters, not a NUL
    ];
    for unit in ["x", "é", "€", "😀"] {
        for n in [255, 256, 64_000, 64_001] {
            strings.push(unit.repeat(n));
        }
        strings.push(format!("{}\0", unit.repeat(254)));
        strings.push(format!("\0{}", unit.repeat(63_999)));
    }
    strings
}

/// Numbers at and around the limit, integers beyond i64/u64 precision included.
fn interesting_numbers() -> Vec<Value> {
    vec![
        json!(0),
        json!(-0.0),
        json!(1),
        json!(0.5),
        json!(-123.25),
        json!(999_999),
        json!(999_999.999_999_9),
        json!(1_000_000),
        json!(-1_000_000),
        json!(1_000_000.0),
        json!(-1_000_000.0),
        json!(1_000_000.5),
        json!(-1_000_000.5),
        json!(1_000_001),
        json!(-1_000_001),
        json!(1_000_000.000_000_1),
        json!(1e-300),
        json!(1e300),
        json!(-1e300),
        json!(f64::MAX),
        json!(f64::MIN),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(u64::from(u32::MAX)),
    ]
}

/// Arrays at and around the item-count and item-length limits.
fn interesting_arrays(rng: &mut Rng, strings: &[String]) -> Value {
    let count = *rng.pick(&[0usize, 1, 2, 3, 99, 100, 101]);
    let mut items: Vec<Value> = (0..count).map(|i| json!(format!("n{i}"))).collect();
    if count > 0 && rng.chance(2) {
        let short: Vec<&String> = strings
            .iter()
            .filter(|s| s.chars().count() <= 256)
            .collect();
        let at = rng.below(count);
        items[at] = json!(rng.pick(&short));
    }
    if count > 0 && rng.chance(6) {
        let at = rng.below(count);
        items[at] = rng
            .pick(&[Value::Null, json!(1), json!(true), json!(["a"]), json!({})])
            .clone();
    }
    Value::Array(items)
}

/// A value for an argument of `kind`: usually a plausible one, sometimes of another type.
fn value_for(kind: ArgKind, rng: &mut Rng, strings: &[String], numbers: &[Value]) -> Value {
    if rng.chance(8) {
        return any_value(rng, strings, numbers);
    }
    match kind {
        ArgKind::Text => json!(rng.pick(strings)),
        ArgKind::Number => rng.pick(numbers).clone(),
        ArgKind::Ids => interesting_arrays(rng, strings),
        ArgKind::OneOf(values) => {
            let value = *rng.pick(values);
            match rng.below(6) {
                0 => json!(value.to_uppercase()),
                1 => json!(format!("{value} ")),
                2 => json!(format!("{value}\0")),
                3 => json!(rng.pick(&["", "overview", "codex", "diff", "editor", "wrong"])),
                _ => json!(value),
            }
        }
        // Messages and keys: the generated strings, and their own edge cases.
        ArgKind::Message | ArgKind::Key if rng.chance(2) => json!(rng.pick(strings)),
        ArgKind::Message => json!(rng.pick(&[
            "",
            "ok",
            "a\u{1b}[201~b",
            "two\nlines\tand a tab",
            "cr\r",
            "nel\u{85}",
            "\u{9f}",
            "\u{a0}€😀",
            "del\u{7f}",
        ])),
        ArgKind::Key => json!(rng.pick(&[
            "",
            "a",
            "_x",
            "-",
            "a-b_C9",
            "a b",
            "a.b",
            "é",
            "k\n",
            "0123456789abcdef",
        ])),
        ArgKind::Whole(min, max) => json!(rng.pick(&[
            json!(min),
            json!(max),
            json!(min - 1),
            json!(max + 1),
            json!(min as f64 + 0.5),
            json!(max as f64),
            json!((min + max) / 2),
            json!("1"),
        ])),
        ArgKind::Flag => json!(rng.pick(&[json!(true), json!(false), json!(1), json!("true")])),
        ArgKind::Wait => rng
            .pick(&[
                json!("exit"),
                json!("idle"),
                json!("EXIT"),
                json!({"pattern": "ready"}),
                json!({"pattern": ""}),
                json!({"pattern": "a\u{0}"}),
                json!({"pattern": 7}),
                json!({"pattern": "x", "regex": true}),
                json!({}),
                json!(["exit"]),
            ])
            .clone(),
        ArgKind::Command => rng
            .pick(&[
                json!("last"),
                json!("first"),
                json!(1),
                json!(0),
                json!(1_000_000),
                json!(1_000_001),
                json!(2.5),
                json!(3.0),
            ])
            .clone(),
        ArgKind::Keys => {
            let names = [
                "Enter",
                "enter",
                "G",
                "é",
                "😀",
                "C-c",
                "C-C",
                "C-1",
                "C-@",
                "M-x",
                "M-M-x",
                "C-M-x",
                "M-C-M-x",
                "F12",
                "F13",
                "ArrowUp",
                "Up ",
                "",
                "\u{3}",
                "a\nb",
                "\u{9b}",
                "PageDown",
                "ESC",
                "BTab",
                "C-\\",
                "C-[",
                "M-Left",
                "xy",
                "ArrowRightArrowRight",
            ];
            let count = *rng.pick(&[0usize, 1, 2, 5, 100, 101]);
            let items: Vec<Value> = (0..count)
                .map(|_| match rng.chance(20) {
                    true => json!(7),
                    false => json!(rng.pick(&names)),
                })
                .collect();
            Value::Array(items)
        }
    }
}

/// A value of any JSON type.
fn any_value(rng: &mut Rng, strings: &[String], numbers: &[Value]) -> Value {
    match rng.below(7) {
        0 => Value::Null,
        1 => json!(rng.chance(2)),
        2 => rng.pick(numbers).clone(),
        3 => json!(rng.pick(strings)),
        4 => interesting_arrays(rng, strings),
        5 => json!({"nodeId": "n1"}),
        _ => json!([]),
    }
}

/// One args value for `tool`: starts valid and is mutated at random.
fn generate_args(tool: &ToolSpec, rng: &mut Rng, strings: &[String], numbers: &[Value]) -> Value {
    if rng.chance(40) {
        // Not an object at all.
        return rng
            .pick(&[Value::Null, json!([]), json!("{}"), json!(1), json!([{}])])
            .clone();
    }
    let mut args = Map::new();
    for arg in tool.args {
        let include = arg.required || rng.chance(2);
        // Missing a required argument now and then.
        if include && !(arg.required && rng.chance(15)) {
            let value = if rng.chance(2) {
                // The plain valid value.
                match arg.kind {
                    ArgKind::Text => json!("n1"),
                    ArgKind::Number => json!(rng.below(2_000_001) as i64 - 1_000_000),
                    ArgKind::Ids => json!(["a", "b"]),
                    ArgKind::OneOf(values) => json!(rng.pick(values)),
                    ArgKind::Message => json!("look at this"),
                    ArgKind::Key => json!("msg-1"),
                    ArgKind::Whole(min, _) => json!(min),
                    ArgKind::Flag => json!(true),
                    ArgKind::Wait => json!({"pattern": "ready"}),
                    ArgKind::Command => json!("last"),
                    ArgKind::Keys => json!(["Escape", ":", "q", "!", "Enter"]),
                }
            } else {
                value_for(arg.kind, rng, strings, numbers)
            };
            args.insert(arg.name.to_string(), value);
        }
    }
    if rng.chance(12) {
        let unknown = *rng.pick(&["projectId", "nodeIds", "nodeId", "x", "", "topic", "Title"]);
        if !tool.args.iter().any(|a| a.name == unknown) {
            args.insert(unknown.to_string(), json!("n1"));
        }
    }
    Value::Object(args)
}

fn compile(schema: &Value, draft: Draft) -> Validator {
    jsonschema::options()
        .with_draft(draft)
        .build(schema)
        .unwrap_or_else(|e| panic!("the published schema compiles: {e}\n{schema}"))
}

fn ours_accepts(tool: &ToolSpec, args: &Value) -> bool {
    validate_tool_request(&json!({"operation": tool.name, "args": args})).is_ok()
}

/// A short description of a value for failure messages (strings can be 64,001 chars).
fn brief(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 300 {
        format!(
            "{}… ({} chars)",
            text.chars().take(300).collect::<String>(),
            text.chars().count()
        )
    } else {
        text
    }
}

#[test]
fn the_nul_pattern_works_in_an_independent_regex_engine() {
    let schema = json!({"type": "string", "pattern": NO_NUL_PATTERN});
    for draft in [Draft::Draft7, Draft::Draft201909, Draft::Draft202012] {
        let validator = compile(&schema, draft);
        for accepted in [
            "",
            "a",
            "a\nb",
            "\\u0000",
            "é😀",
            "\u{1}",
            &"x".repeat(64_000),
        ] {
            assert!(
                validator.is_valid(&json!(accepted)),
                "{draft:?} {accepted:?}"
            );
        }
        for rejected in ["\0", "\0a", "a\0", "a\0b", "\n\0\n"] {
            assert!(
                !validator.is_valid(&json!(rejected)),
                "{draft:?} {rejected:?}"
            );
        }
        let long_with_nul = format!("{}\0", "é".repeat(63_999));
        assert!(!validator.is_valid(&json!(long_with_nul)));
    }
}

#[test]
fn published_schemas_and_validator_agree_on_generated_requests() {
    let strings = interesting_strings();
    let numbers = interesting_numbers();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let catalogue = catalogue_json();
    let mut total = (0usize, 0usize); // (accepted, rejected)
    for entry in catalogue.as_array().expect("the catalogue is an array") {
        let name = entry["name"].as_str().expect("a name");
        let tool = find_tool(name).expect("a catalogue entry");
        let schema = &entry["inputSchema"];
        // The schema says no `$schema`; a client may judge it by any current draft.
        let validators = [
            (Draft::Draft7, compile(schema, Draft::Draft7)),
            (Draft::Draft202012, compile(schema, Draft::Draft202012)),
        ];
        let mut counts = (0usize, 0usize);
        for _ in 0..CASES_PER_OPERATION {
            let args = generate_args(tool, &mut rng, &strings, &numbers);
            let ours = ours_accepts(tool, &args);
            for (draft, validator) in &validators {
                assert_eq!(
                    validator.is_valid(&args),
                    ours,
                    "{name} ({draft:?}): jsonschema and validate_tool_request disagree on {}",
                    brief(&args)
                );
            }
            if ours {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
        // The generator must produce both verdicts for every operation, or agreement
        // would be trivial.
        assert!(counts.0 >= 10, "{name}: only {} accepted", counts.0);
        assert!(counts.1 >= 10, "{name}: only {} rejected", counts.1);
        total.0 += counts.0;
        total.1 += counts.1;
    }
    assert!(total.0 + total.1 >= 8_000);
}

#[test]
fn schemas_and_validator_agree_on_every_boundary_value_of_every_argument() {
    // Exhaustive over the interesting values (not sampled): each argument of each
    // operation set to each value, all other arguments valid.
    let strings = interesting_strings();
    let numbers = interesting_numbers();
    let mut others: Vec<Value> = vec![Value::Null, json!(true), json!([]), json!({})];
    for count in [0usize, 1, 100, 101] {
        others.push(json!((0..count)
            .map(|i| format!("n{i}"))
            .collect::<Vec<_>>()));
    }
    for s in &strings {
        if s.chars().count() <= 256 {
            others.push(json!([s]));
        }
    }
    let values: Vec<Value> = strings
        .iter()
        .map(|s| json!(s))
        .chain(numbers)
        .chain(others)
        .chain(
            [
                "overview",
                "artifacts",
                "editor",
                "diff",
                "claude",
                "custom",
                "Claude",
            ]
            .map(|s| json!(s)),
        )
        .collect();
    for entry in catalogue_json().as_array().expect("an array") {
        let tool = find_tool(entry["name"].as_str().expect("a name")).expect("an entry");
        let validator = compile(&entry["inputSchema"], Draft::Draft202012);
        for arg in tool.args {
            for value in &values {
                let mut args: Map<String, Value> = tool
                    .args
                    .iter()
                    .map(|a| {
                        let valid = match a.kind {
                            ArgKind::Text => json!("n1"),
                            ArgKind::Number => json!(0),
                            ArgKind::Ids => json!(["a"]),
                            ArgKind::OneOf(v) => json!(v[0]),
                            ArgKind::Message => json!("look"),
                            ArgKind::Key => json!("k1"),
                            ArgKind::Whole(min, _) => json!(min),
                            ArgKind::Flag => json!(false),
                            ArgKind::Wait => json!("exit"),
                            ArgKind::Command => json!(1),
                            ArgKind::Keys => json!(["Up"]),
                        };
                        (a.name.to_string(), valid)
                    })
                    .collect();
                args.insert(arg.name.to_string(), value.clone());
                let args = Value::Object(args);
                assert_eq!(
                    validator.is_valid(&args),
                    ours_accepts(tool, &args),
                    "{}.{}: disagreement on {}",
                    tool.name,
                    arg.name,
                    brief(value)
                );
            }
        }
    }
}
