//! `validate_tool_request`: the spec's request validator, driven entirely by
//! [`AGENT_TOOLS`], so a new catalogue entry is validated without new code here.
//!
//! Checks run in this order: the request is a JSON object, the operation, the args object,
//! then no top-level keys besides `operation` and `args` (so a request with a bad operation
//! and an extra key reports the operation), then missing required arguments, unknown
//! arguments, then each value in catalogue order, then that exactly one of an operation's
//! alternatives (`selector` or `ref`) is given, or at least one of two (`text` or `keys`).
//! The first failure is reported. Every limit checked here is also stated in the
//! published schema (see `ArgKind::schema`; a `keys` item's names as a pattern,
//! [`crate::protocol::keys::KEY_NAME_PATTERN`]).

use std::fmt;

use serde_json::Value;

use super::catalogue::{at_least_one_of, exactly_one_of, find_tool, ArgKind};
use super::keys::{TerminalKey, KNOWN_KEYS};
use super::limits::{
    MAX_ARRAY_ITEMS, MAX_ITEM_CHARS, MAX_MESSAGE_CHARS, MAX_NUMBER_ABS, MAX_STRING_CHARS,
};
use super::wire::ToolRequest;

/// Why a request was rejected. `Display` gives the message an agent sees; each
/// message begins with the spec's phrase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValidationError {
    /// Not a JSON object of exactly `operation` and `args`.
    NotARequest,
    /// `operation` is missing, not a string, or not in the catalogue: the name asked for
    /// (shortened for the message) when it is a string.
    UnknownOperation(Option<String>),
    /// `args` is missing or not an object.
    ArgsNotObject,
    /// A required argument is absent (its kind: the message lists a choice's values).
    MissingArgument {
        /// The argument.
        arg: &'static str,
        /// Its shape.
        kind: ArgKind,
    },
    /// Neither of two alternatives (exactly one is required) is given.
    MissingAlternative([&'static str; 2]),
    /// Neither of two arguments (one or both are required) is given.
    MissingEither([&'static str; 2]),
    /// An argument the operation does not take.
    UnknownArgument {
        /// The argument's name, shortened for the message.
        arg: String,
        /// The operation, whose arguments the message suggests.
        operation: &'static str,
    },
    /// An argument's value breaks its schema.
    Invalid {
        /// The argument.
        arg: &'static str,
        /// What its value must be.
        rule: String,
    },
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidationError::NotARequest => f.write_str("Expected an operation and args object"),
            ValidationError::UnknownOperation(asked) => {
                f.write_str("Unknown operation")?;
                if let Some(name) = asked {
                    write!(f, ": {name}")?;
                }
                f.write_str("; the operations you may call are in session_info's operations")
            }
            ValidationError::ArgsNotObject => f.write_str("Expected args object"),
            ValidationError::MissingArgument { arg, kind } => match kind {
                ArgKind::OneOf(choices) => {
                    write!(f, "Missing argument: {arg} (one of {})", choices.join(", "))
                }
                _ => write!(f, "Missing argument: {arg}"),
            },
            ValidationError::MissingAlternative([first, second]) => {
                write!(f, "Missing argument: {first} (give {first} or {second})")
            }
            ValidationError::MissingEither([first, second]) => {
                write!(
                    f,
                    "Missing argument: {first} (give {first}, {second} or both)"
                )
            }
            ValidationError::UnknownArgument { arg, operation } => {
                let takes: Vec<&str> = find_tool(operation).map_or(Vec::new(), |tool| {
                    tool.args.iter().map(|a| a.name).collect()
                });
                write!(f, "Unknown argument: {arg} ")?;
                match nearest_name(arg, takes.iter().copied()) {
                    Some(near) => write!(f, "(did you mean {near}?)"),
                    None if takes.is_empty() => write!(f, "({operation} takes no arguments)"),
                    None => write!(f, "({operation} takes {})", takes.join(", ")),
                }
            }
            ValidationError::Invalid { arg, rule } => write!(f, "Invalid {arg}: {rule}"),
        }
    }
}

impl std::error::Error for ValidationError {}

/// Checks a raw request against the catalogue and returns it as a [`ToolRequest`].
/// Never panics, whatever `raw` holds.
pub fn validate_tool_request(raw: &Value) -> Result<ToolRequest, ValidationError> {
    let request = raw.as_object().ok_or(ValidationError::NotARequest)?;
    let asked = request.get("operation").and_then(Value::as_str);
    let tool = asked
        .and_then(find_tool)
        .ok_or_else(|| ValidationError::UnknownOperation(asked.map(shorten)))?;
    let args = request
        .get("args")
        .and_then(Value::as_object)
        .ok_or(ValidationError::ArgsNotObject)?;
    if request.len() != 2 {
        // Only `operation` and `args` exist on the wire; anything else is a client bug
        // (e.g. a projectId placed beside args) and must not pass silently.
        return Err(ValidationError::NotARequest);
    }
    for arg in tool.args {
        if arg.required && !args.contains_key(arg.name) {
            return Err(ValidationError::MissingArgument {
                arg: arg.name,
                kind: arg.kind,
            });
        }
    }
    for key in args.keys() {
        if !tool.args.iter().any(|a| a.name == key.as_str()) {
            return Err(ValidationError::UnknownArgument {
                arg: shorten(key),
                operation: tool.name,
            });
        }
    }
    for arg in tool.args {
        if let Some(value) = args.get(arg.name) {
            check_value(arg.kind, value).map_err(|rule| ValidationError::Invalid {
                arg: arg.name,
                rule,
            })?;
        }
    }
    if let Some([first, second]) = exactly_one_of(tool.name) {
        match (args.contains_key(first), args.contains_key(second)) {
            (false, false) => return Err(ValidationError::MissingAlternative([first, second])),
            (true, true) => {
                return Err(ValidationError::Invalid {
                    arg: second,
                    rule: format!("give {first} or {second}, not both"),
                })
            }
            _ => {}
        }
    }
    if let Some([first, second]) = at_least_one_of(tool.name) {
        if !args.contains_key(first) && !args.contains_key(second) {
            return Err(ValidationError::MissingEither([first, second]));
        }
    }
    Ok(ToolRequest {
        operation: tool.name.to_string(),
        args: args.clone(),
    })
}

fn check_value(kind: ArgKind, value: &Value) -> Result<(), String> {
    match kind {
        ArgKind::Text => check_text(value, MAX_STRING_CHARS),
        // serde_json never yields a non-finite f64, but a number beyond f64 range
        // or a u64/i64 beyond the limit must still fail here, not later.
        ArgKind::Number => match value.as_f64() {
            Some(n) if n.is_finite() && n.abs() <= MAX_NUMBER_ABS as f64 => Ok(()),
            _ => Err(format!("must be a number between -{MAX_NUMBER_ABS} and {MAX_NUMBER_ABS}")),
        },
        ArgKind::Ids => match value.as_array() {
            Some(items) if (1..=MAX_ARRAY_ITEMS).contains(&items.len())
                && items.iter().all(|item| check_text(item, MAX_ITEM_CHARS).is_ok()) => Ok(()),
            _ => Err(format!("must be an array of 1 to {MAX_ARRAY_ITEMS} strings of at most {MAX_ITEM_CHARS} characters without NUL")),
        },
        ArgKind::OneOf(allowed) => match value.as_str() {
            Some(s) if allowed.contains(&s) => Ok(()),
            _ => Err(format!("must be one of {}", allowed.join(", "))),
        },
        ArgKind::Message => match value.as_str() {
            Some(s) if !s.is_empty()
                && !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t')
                && s.chars().take(MAX_MESSAGE_CHARS + 1).count() <= MAX_MESSAGE_CHARS => Ok(()),
            _ => Err(format!("must be a string of 1 to {MAX_MESSAGE_CHARS} characters without control characters other than newline and tab")),
        },
        ArgKind::Key => match value.as_str() {
            Some(s) if (1..=128).contains(&s.len())
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') => Ok(()),
            _ => Err("must be 1 to 128 letters, digits, '_' or '-'".to_string()),
        },
        ArgKind::Whole(min, max) => match value.as_f64() {
            Some(n) if n.fract() == 0.0 && (min as f64..=max as f64).contains(&n) => Ok(()),
            _ => Err(format!("must be a whole number from {min} to {max}")),
        },
        ArgKind::Flag if value.is_boolean() => Ok(()),
        ArgKind::Flag => Err("must be true or false".to_string()),
        ArgKind::Wait => match value {
            Value::String(s) if s == "exit" || s == "idle" => Ok(()),
            Value::Object(o) if o.len() == 1 && o.get("pattern").is_some_and(|p| check_text(p, MAX_STRING_CHARS).is_ok()) => Ok(()),
            _ => Err(format!("must be \"exit\", \"idle\" or {{\"pattern\": \"plain text\"}} (at most {MAX_STRING_CHARS} characters without NUL)")),
        },
        ArgKind::Command if value.as_str() == Some("last") => Ok(()),
        ArgKind::Command => check_value(ArgKind::Whole(1, MAX_NUMBER_ABS), value)
            .map_err(|_| format!("must be \"last\" or a commandId from 1 to {MAX_NUMBER_ABS}")),
        ArgKind::Keys => check_keys(value),
    }
}

/// `keys`: 1 to 100 key names, each one [`TerminalKey::parse`] knows.
fn check_keys(value: &Value) -> Result<(), String> {
    let names = match value.as_array() {
        Some(items) if (1..=MAX_ARRAY_ITEMS).contains(&items.len()) => items,
        _ => {
            return Err(format!(
                "must be an array of 1 to {MAX_ARRAY_ITEMS} key names"
            ))
        }
    };
    for name in names {
        if name.as_str().and_then(TerminalKey::parse).is_none() {
            let shown = shorten(
                &name
                    .as_str()
                    .map_or_else(|| name.to_string(), str::to_string),
            );
            return Err(format!(
                "unknown key {shown:?}: each key is {KNOWN_KEYS}; type words with text"
            ));
        }
    }
    Ok(())
}

fn check_text(value: &Value, max_chars: usize) -> Result<(), String> {
    let rule = || format!("must be a string of at most {max_chars} characters without NUL");
    let s = value.as_str().ok_or_else(rule)?;
    // Count at most max_chars + 1 characters: a 128 KiB body bounds this anyway,
    // but the count should not depend on the caller's input size.
    if s.contains('\0') || s.chars().take(max_chars + 1).count() > max_chars {
        return Err(rule());
    }
    Ok(())
}

/// The name among `names` nearest to `word`, for a "did you mean": at most 2 edits away
/// (a character added, removed or changed); the first of equally near ones.
pub fn nearest_name<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .filter_map(|name| edits_within(word, name, 2).map(|edits| (edits, name)))
        .min_by_key(|(edits, _)| *edits)
        .map(|(_, name)| name)
}

/// The edit (Levenshtein) distance between `a` and `b`, if it is at most `max`.
fn edits_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Each edit changes the length by at most one: a long key is answered at once.
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    // One row of the table at a time: row[j] is the distance from a[..i] to b[..j].
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    Some(row[b.len()]).filter(|&edits| edits <= max)
}

/// Unknown keys are echoed in the error; keep what we echo short.
pub(crate) fn shorten(key: &str) -> String {
    const MAX: usize = 64;
    match key.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}…", &key[..end]),
        None => key.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message `raw` is rejected with.
    fn rejection(raw: Value) -> String {
        validate_tool_request(&raw)
            .expect_err("request should be rejected")
            .to_string()
    }

    #[test]
    fn not_a_request_message() {
        let message = "Expected an operation and args object";
        assert_eq!(ValidationError::NotARequest.to_string(), message);
        assert_eq!(rejection(json!("session_info")), message);
        assert_eq!(rejection(json!(["session_info", {}])), message);
        assert_eq!(rejection(Value::Null), message);
        assert_eq!(
            rejection(json!({"operation": "session_info", "args": {}, "projectId": "p"})),
            message
        );
    }

    #[test]
    fn unknown_operation_message_names_it() {
        let hint = "; the operations you may call are in session_info's operations";
        let named = |name: &str| format!("Unknown operation: {name}{hint}");
        assert_eq!(
            rejection(json!({"operation": "nope", "args": {}})),
            named("nope")
        );
        assert_eq!(
            rejection(json!({"operation": "Session_info", "args": {}})),
            named("Session_info")
        );
        assert_eq!(
            rejection(json!({"operation": "o".repeat(65), "args": {}})),
            named(&format!("{}…", "o".repeat(64)))
        );
        // No name to echo: not a string, or none.
        let unnamed = format!("Unknown operation{hint}");
        assert_eq!(rejection(json!({"operation": 7, "args": {}})), unnamed);
        assert_eq!(rejection(json!({"args": {}})), unnamed);
    }

    #[test]
    fn args_not_object_message() {
        let message = "Expected args object";
        assert_eq!(ValidationError::ArgsNotObject.to_string(), message);
        assert_eq!(rejection(json!({"operation": "session_info"})), message);
        assert_eq!(
            rejection(json!({"operation": "session_info", "args": []})),
            message
        );
        assert_eq!(
            rejection(json!({"operation": "session_info", "args": null})),
            message
        );
        assert_eq!(
            rejection(json!({"operation": "session_info", "args": "{}"})),
            message
        );
    }

    #[test]
    fn missing_argument_message() {
        assert_eq!(
            rejection(json!({"operation": "canvas_move", "args": {"nodeId": "n", "x": 1}})),
            "Missing argument: y"
        );
        // A choice lists its values.
        assert_eq!(
            rejection(json!({"operation": "guide_read", "args": {}})),
            "Missing argument: topic (one of overview, browser, terminal, canvas, context, artifacts, agents)"
        );
    }

    #[test]
    fn unknown_argument_message_suggests_or_lists_and_shortens() {
        assert_eq!(
            rejection(json!({"operation": "terminal_open", "args": {"titel": "x"}})),
            "Unknown argument: titel (did you mean title?)"
        );
        assert_eq!(
            rejection(
                json!({"operation": "terminal_read", "args": {"nodeId": "t", "maxchars": 9}})
            ),
            "Unknown argument: maxchars (did you mean maxChars?)"
        );
        assert_eq!(
            rejection(
                json!({"operation": "terminal_read", "args": {"nodeId": "t", "projectId": "x"}})
            ),
            "Unknown argument: projectId (terminal_read takes nodeId, maxChars, command, since, search, maxMatches)"
        );
        let long_key = "k".repeat(65);
        assert_eq!(
            rejection(json!({"operation": "session_info", "args": {long_key: 1}})),
            format!(
                "Unknown argument: {}… (session_info takes no arguments)",
                "k".repeat(64)
            )
        );
        let key_at_limit = "é".repeat(64);
        assert_eq!(
            rejection(json!({"operation": "session_info", "args": {key_at_limit.clone(): 1}})),
            format!("Unknown argument: {key_at_limit} (session_info takes no arguments)")
        );
    }

    #[test]
    fn nearest_name_is_at_most_two_edits_away() {
        let names = ["title", "nodeId", "x"];
        assert_eq!(nearest_name("titel", names), Some("title"));
        assert_eq!(nearest_name("nodeid", names), Some("nodeId"));
        assert_eq!(nearest_name("y", names), Some("x"));
        assert_eq!(nearest_name("subject", names), None);
        assert_eq!(nearest_name("", ["ab", "abc"]), Some("ab"));
        assert_eq!(edits_within("kitten", "sitting", 3), Some(3));
        assert_eq!(edits_within("kitten", "sitting", 2), None);
    }

    #[test]
    fn invalid_messages_name_the_argument_and_the_rule() {
        assert_eq!(
            ValidationError::Invalid {
                arg: "x",
                rule: "must be finite".into()
            }
            .to_string(),
            "Invalid x: must be finite"
        );
        assert_eq!(
            rejection(
                json!({"operation": "terminal_read", "args": {"nodeId": "t", "maxChars": 1_000_001}})
            ),
            "Invalid maxChars: must be a number between -1000000 and 1000000"
        );
        assert_eq!(
            rejection(
                json!({"operation": "canvas_move", "args": {"nodeId": "n", "x": "1", "y": 0}})
            ),
            "Invalid x: must be a number between -1000000 and 1000000"
        );
        assert_eq!(
            rejection(json!({"operation": "sticky_open", "args": {"text": "a\u{0}"}})),
            "Invalid text: must be a string of at most 64000 characters without NUL"
        );
        assert_eq!(
            rejection(json!({"operation": "terminal_close", "args": {"nodeId": 5}})),
            "Invalid nodeId: must be a string of at most 64000 characters without NUL"
        );
        assert_eq!(
            rejection(json!({"operation": "canvas_select", "args": {"nodeIds": []}})),
            "Invalid nodeIds: must be an array of 1 to 100 strings of at most 255 characters without NUL"
        );
        assert_eq!(
            rejection(json!({"operation": "guide_read", "args": {"topic": "Overview"}})),
            "Invalid topic: must be one of overview, browser, terminal, canvas, context, artifacts, agents"
        );
        assert_eq!(
            rejection(json!({"operation": "artifact_open", "args": {"path": "/p", "view": 1}})),
            "Invalid view: must be one of editor, diff"
        );
    }

    #[test]
    fn first_failing_value_in_catalogue_order_is_reported() {
        // Both x and y are invalid; x comes first in the catalogue.
        assert_eq!(
            rejection(
                json!({"operation": "canvas_move", "args": {"y": 2e6, "x": 2e6, "nodeId": "n"}})
            ),
            "Invalid x: must be a number between -1000000 and 1000000"
        );
    }

    #[test]
    fn accepted_request_is_returned_unchanged() {
        let args = json!({"nodeId": "t", "maxChars": 12.5});
        let request =
            validate_tool_request(&json!({"operation": "terminal_read", "args": args})).unwrap();
        assert_eq!(request.operation, "terminal_read");
        assert_eq!(Value::Object(request.args), args);
    }

    #[test]
    fn text_keys_or_both() {
        let input = |args: Value| json!({"operation": "terminal_input", "args": args});
        assert_eq!(
            rejection(input(json!({"nodeId": "t"}))),
            "Missing argument: text (give text, keys or both)"
        );
        for args in [
            json!({"nodeId": "t", "text": "ls"}),
            json!({"nodeId": "t", "keys": ["Up", "Enter"]}),
            json!({"nodeId": "t", "text": ":q!", "keys": ["Enter"]}),
        ] {
            assert!(
                validate_tool_request(&input(args.clone())).is_ok(),
                "{args}"
            );
        }
        let unknown = rejection(input(json!({"nodeId": "t", "keys": ["Up", "Upp"]})));
        assert!(
            unknown.starts_with(
                "Invalid keys: unknown key \"Upp\": each key is a single character, Enter,"
            ),
            "{unknown}"
        );
        let long = rejection(input(json!({"nodeId": "t", "keys": ["x".repeat(100_000)]})));
        assert!(long.len() < 1_000, "{long}");
        assert_eq!(
            rejection(input(json!({"nodeId": "t", "keys": []}))),
            "Invalid keys: must be an array of 1 to 100 key names"
        );
        assert!(rejection(input(json!({"nodeId": "t", "keys": [7]}))).contains("unknown key \"7\""));
    }

    #[test]
    fn exactly_one_of_selector_and_ref() {
        let click = |args: Value| rejection(json!({"operation": "browser_click", "args": args}));
        assert_eq!(
            click(json!({"nodeId": "b"})),
            "Missing argument: selector (give selector or ref)"
        );
        assert_eq!(
            click(json!({"nodeId": "b", "selector": "#a", "ref": "e1"})),
            "Invalid ref: give selector or ref, not both"
        );
        for args in [
            json!({"nodeId": "b", "selector": "#a"}),
            json!({"nodeId": "b", "ref": "e1"}),
        ] {
            assert!(
                validate_tool_request(&json!({"operation": "browser_click", "args": args})).is_ok()
            );
        }
        let typed = json!({"operation": "browser_type", "args": {"nodeId": "b", "text": "x"}});
        assert_eq!(
            rejection(typed),
            "Missing argument: selector (give selector or ref)"
        );
    }

    #[test]
    fn whole_numbers_within_their_range() {
        let inspect = |max: Value| {
            validate_tool_request(&json!({"operation": "browser_inspect",
                "args": {"nodeId": "b", "mode": "snapshot", "maxChars": max}}))
        };
        assert!(inspect(json!(3000)).is_ok());
        assert!(inspect(json!(40000.0)).is_ok());
        for bad in [json!(2999), json!(40001), json!(1500.5), json!("2000")] {
            assert_eq!(
                inspect(bad).unwrap_err().to_string(),
                "Invalid maxChars: must be a whole number from 3000 to 40000"
            );
        }
    }
}
