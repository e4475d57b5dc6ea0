//! docs/guide.md says what the program does: its operation counts come from the
//! catalogue, and every file `serve` and the person's commands leave in the data folder
//! and in `.termsprawl/` has a row in its files tables.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::json;
use serve_harness::*;
use termsprawl_tools::protocol::{is_browser_operation, AGENT_TOOLS};

fn guide() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide.md")).unwrap()
}

/// The number before `word` in `text` (`"35 in all"` → 35 for `" in all"`).
fn number_before(text: &str, word: &str) -> usize {
    let at = text
        .find(word)
        .unwrap_or_else(|| panic!("the guide no longer says {word:?}"));
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

#[test]
fn the_guides_operation_counts_are_the_catalogues() {
    let guide = guide();
    let all = AGENT_TOOLS.len();
    let browser = AGENT_TOOLS
        .iter()
        .filter(|t| is_browser_operation(t.name))
        .count();
    assert_eq!(number_before(&guide, " in all"), all);
    assert_eq!(number_before(&guide, " of them `browser_*`"), browser);
    assert_eq!(
        number_before(&guide, " tools while browser control is off"),
        all - browser
    );
    let else_all = guide
        .split("tools while browser control is off, else ")
        .nth(1)
        .expect("the MCP paragraph gives both counts");
    assert_eq!(number_after(else_all), all);
}

fn number_after(text: &str) -> usize {
    let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// The first column's paths of the table whose header starts with `header`.
fn table_paths(guide: &str, header: &str) -> BTreeSet<String> {
    let table = guide
        .split(header)
        .nth(1)
        .unwrap_or_else(|| panic!("no table {header:?}"));
    let mut paths = BTreeSet::new();
    for line in table.lines().skip(2) {
        let Some(first) = line.strip_prefix("| ").and_then(|l| l.split(" | ").next()) else {
            break;
        };
        // `a`, `b` and `x/<nodeId>.json` (and `.jsonl.1`): each name up to its first
        // placeholder or slash.
        for name in first.split('`').skip(1).step_by(2) {
            let top = name.split(['/', '<']).next().unwrap_or_default();
            if !top.is_empty() {
                paths.insert(top.to_string());
            }
        }
    }
    paths
}

fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_file_serve_leaves_has_a_row_in_the_guide() {
    let dirs = Dirs::new("guide-files");
    let backend: &[&str] = match tmux_installed() {
        true => &["--terminals", "tmux"],
        false => &["--terminals", "pty"],
    };
    let serve = Serve::start(
        &dirs,
        &[backend, &["--agent", "me", "--policy", "careful"]].concat(),
    );
    // What leaves files: a terminal, a trail line, the person's commands.
    serve.ok(&dirs, "me", "terminal_open", json!({"title": "t"}));
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
            .args(args)
            .arg("--data")
            .arg(&dirs.data)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    cli(&["approvals", "list"]);
    cli(&["policy", "set", "canvas", "ask", "--agent", "me"]);
    cli(&["browser-control", "on"]);
    poll("approvals.json", std::time::Duration::from_secs(10), || {
        dirs.agent_tools()
            .join("approvals.json")
            .exists()
            .then_some(())
    });

    let guide = guide();
    let data_rows = table_paths(&guide, "| path under `agent-tools/` |");
    let seen = entries(&dirs.agent_tools());
    for name in &seen {
        assert!(
            data_rows.contains(name),
            "agent-tools/{name} has no row in the guide's files table ({data_rows:?})"
        );
    }
    let project_rows = table_paths(&guide, "| path | what it is | written by |");
    let state = dirs.project.join(".termsprawl");
    for name in entries(&state) {
        assert!(
            project_rows.contains(&name),
            ".termsprawl/{name} has no row in the guide ({project_rows:?})"
        );
    }
    assert!(
        seen.len() >= 10,
        "the check saw the data folder's files: {seen:?}"
    );
    assert!(serve.stop().success());
}
