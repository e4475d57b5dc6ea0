//! The README's tour, run as a reader would run it: its two commands are the ones CI runs,
//! every `$ ` line of its `console` blocks runs with bash (in order, in one shell, so its
//! `export`s carry over) against a fresh `serve --agent me` started in a scratch "clone"
//! with a scratch `HOME`, every `termsprawlctl call` answers `"ok": true`, and the MCP
//! configuration it writes for Claude Code starts an MCP server that lists the tools and
//! runs one (with the official Python SDK too, where it is installed). And every relative
//! link in the project's Markdown pages points to a file that exists (and a heading, when
//! it names one).
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use serve_harness::*;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SERVE_COMMAND: &str = "cargo run --release --bin termsprawl-tools -- serve --agent me";
const TEST_COMMAND: &str = "cargo test --release";
/// Printed after each tour command, so its output can be told from the next one's.
const STEP_END: &str = "<<<tour-step-end>>>";

fn page(relative: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(relative))
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The commands of the `console` blocks: each `$ ` line, with the body of a here-document
/// it opens (through its closing `EOF`); other lines are sample output.
fn console_commands(markdown: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_console = false;
    let mut heredoc: Option<String> = None;
    for line in markdown.lines() {
        if let Some(command) = heredoc.as_mut() {
            command.push('\n');
            command.push_str(line);
            if line == "EOF" {
                commands.push(heredoc.take().unwrap());
            }
        } else if line.starts_with("```") {
            in_console = line == "```console";
        } else if let Some(command) = line.strip_prefix("$ ").filter(|_| in_console) {
            if command.contains("<<EOF") {
                heredoc = Some(command.to_string());
            } else {
                commands.push(command.to_string());
            }
        }
    }
    assert!(heredoc.is_none(), "a here-document without its EOF line");
    commands
}

#[test]
fn the_readme_shows_the_commands_ci_runs() {
    let readme = page("README.md");
    for command in [SERVE_COMMAND, TEST_COMMAND] {
        assert!(
            readme.lines().any(|line| line == format!("    {command}")),
            "README.md no longer shows `{command}` as a command block of its own"
        );
    }
    assert!(
        page(".ci/run").lines().any(|line| line == TEST_COMMAND),
        ".ci/run does not run the README's test command"
    );
    assert!(
        readme.lines().count() < 200,
        "README.md is meant to stay short"
    );
}

#[test]
fn the_readme_tour_runs_against_a_fresh_serve() {
    let commands = console_commands(&page("README.md"));
    assert!(
        commands.len() >= 8,
        "the tour lost its commands: {commands:?}"
    );

    // A scratch "clone" (the project folder `cargo run` serves) whose target/release is
    // the binaries cargo built for this test, and a scratch HOME for the default data
    // directory. Short paths: the tmux socket under the data directory must fit.
    let root = PathBuf::from(format!("/tmp/tss-{}-tour", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let home = root.join("home");
    let clone = root.join("clone");
    let dirs = Dirs {
        data: home.join(".local/share/termsprawl-tools"),
        project: clone.clone(),
        root,
    };
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(clone.join("target")).unwrap();
    let binaries = Path::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
        .parent()
        .unwrap();
    std::os::unix::fs::symlink(binaries, clone.join("target/release")).unwrap();

    // `cargo run … serve --agent me`, with the binary cargo already built.
    let serve_args = SERVE_COMMAND.split_once(" -- ").unwrap().1;
    let mut command = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"));
    command
        .args(serve_args.split(' '))
        .current_dir(&clone)
        .env("HOME", &home)
        .env("SHELL", "/bin/sh")
        .env_remove("XDG_DATA_HOME")
        .env_remove("TERMSPRAWL_SESSION_FILE")
        .env_remove("TMUX")
        .stdin(Stdio::null());
    let serve = Serve::start_command(command);
    let session_file = dirs.agent_tools().join("sessions/me.json");
    assert_eq!(
        serve.ready["sessions"][0]["sessionFile"],
        json!(session_file),
        "the tour's session file path is not where serve puts it"
    );

    // The tour's commands, in one bash; cargo has built what they would build, and an
    // agent CLI is not installed here: its MCP configuration is checked below instead.
    let mut script = String::from("set -euo pipefail\n");
    let mut run = Vec::new();
    let mut mcp_config = None;
    for command in &commands {
        if let Some(args) = command.strip_prefix("claude ") {
            let file = args
                .strip_prefix("--mcp-config ")
                .expect("claude --mcp-config FILE");
            mcp_config = Some(match file.strip_prefix("~/") {
                Some(rest) => home.join(rest),
                None => clone.join(file),
            });
        } else if command.starts_with("cargo ") {
            assert_eq!(
                command, "cargo build --release",
                "a cargo command the test does not know"
            );
        } else {
            if command.starts_with("termsprawl-tools activity") {
                // The trail's writer appends in batches on its own thread: wait (bounded)
                // until it has written the tour's calls, as a person reading it later would.
                script.push_str(
                    "for _ in $(seq 100); do termsprawl-tools activity | grep -q terminal_submit && break; sleep 0.1; done\n",
                );
            }
            script.push_str(command);
            script.push_str(&format!("\nprintf '\\n%s\\n' '{STEP_END}'\n"));
            run.push(command.as_str());
        }
    }
    let output = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&clone)
        .env("HOME", &home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("TERMSPRAWL_SESSION_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let steps: Vec<&str> = stdout.split(&format!("\n{STEP_END}\n")).collect();
    let finished = steps.len() - 1;
    assert!(
        output.status.success() && finished == run.len(),
        "the tour stopped at `{}`\nstdout:\n{stdout}\nstderr:\n{stderr}\nserve's stderr:\n{}",
        run.get(finished).unwrap_or(&"(after its last command)"),
        serve.stderr()
    );
    let mut calls = 0;
    for (command, output) in run.iter().zip(&steps) {
        if command.starts_with("termsprawlctl call ") {
            let answer: Value = serde_json::from_str(output.trim())
                .unwrap_or_else(|e| panic!("`{command}` did not print JSON ({e}): {output}"));
            assert_eq!(answer["ok"], json!(true), "`{command}` answered {answer}");
            calls += 1;
        } else if command.starts_with("termsprawl-tools activity") {
            assert!(
                output.contains("terminal_submit"),
                "`{command}` does not show the tour's calls: {output}"
            );
        }
    }
    assert!(calls >= 4, "the tour makes fewer calls than it shows");

    let mcp_config = mcp_config.expect("the tour shows no `claude --mcp-config FILE`");
    check_mcp_config(&mcp_config, &home);
    serve.stop();
}

/// The configuration the README has a user write for Claude Code starts an MCP server
/// (`termsprawlctl … mcp` through the launcher) that answers `initialize`, lists the
/// tools and runs `session_info` as the agent `me`.
fn check_mcp_config(file: &Path, home: &Path) {
    let config: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap())
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", file.display()));
    let server = &config["mcpServers"]["termsprawl"];
    let program = server["command"].as_str().expect("command");
    let args: Vec<&str> = server["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("args are strings"))
        .collect();
    assert!(Path::new(program).is_file(), "{program} does not exist");

    let mut child = Command::new(program)
        .args(&args)
        .env("HOME", home)
        .env_remove("TERMSPRAWL_SESSION_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ask = |id: u64, method: &str, params: Value| -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(input, "{request}").unwrap();
        if id == 1 {
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            writeln!(input, "{initialized}").unwrap();
        }
        let line = lines.next().expect("an answer").unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], json!(id), "{line}");
        answer["result"].clone()
    };
    let client = json!({"name": "readme-tour", "version": "1"});
    let init = ask(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}),
    );
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    let tools = ask(2, "tools/list", json!({}));
    let names: BTreeSet<&str> = tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains("terminal_open") && names.contains("canvas_list"),
        "{names:?}"
    );
    let called = ask(
        3,
        "tools/call",
        json!({"name": "session_info", "arguments": {}}),
    );
    assert_ne!(called["isError"], json!(true), "{called}");
    assert_eq!(
        called["structuredContent"]["nodeId"],
        json!("me"),
        "{called}"
    );
    drop(input);
    assert!(child.wait().unwrap().success());

    // The same configuration with the official Python SDK's stdio client, where installed.
    let Some(version) = python_package("mcp", "mcp") else {
        eprintln!("notice: python3 with the `mcp` package is missing; the README's MCP configuration was checked without the Python SDK (pip install mcp)");
        return;
    };
    let ["--session", session_file, "mcp"] = args[..] else {
        panic!("the script takes `--session FILE mcp`; the README's args are {args:?}");
    };
    let sdk = Command::new("python3")
        .arg(Path::new(ROOT).join("tests/mcp_sdk_client.py"))
        .arg(program)
        .arg(session_file)
        .arg("me")
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        sdk.status.success(),
        "the Python MCP SDK {version} failed on the README's configuration:\n{}\n{}",
        String::from_utf8_lossy(&sdk.stdout),
        String::from_utf8_lossy(&sdk.stderr)
    );
}

/// GitHub's anchor for a heading: lower case, spaces as hyphens, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown page's headings (outside code blocks).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut found = BTreeSet::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.insert(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of `[text](target)` links and images on a page, outside code.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_code = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code || line.starts_with("    ") {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_in_the_pages_resolves() {
    let mut pages = vec![
        "README.md".to_string(),
        "SECURITY.md".to_string(),
        "CHANGELOG.md".to_string(),
        "ARCHITECTURE.md".to_string(),
        "AUDIT.md".to_string(),
    ];
    for entry in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut checked = 0;
    for page_name in &pages {
        let text = page(page_name);
        let folder = Path::new(page_name).parent().unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, heading) = match target.split_once('#') {
                Some((file, heading)) => (file, Some(heading)),
                None => (target.as_str(), None),
            };
            let linked = if file.is_empty() {
                page_name.clone()
            } else {
                let path = folder.join(file);
                assert!(
                    Path::new(ROOT).join(&path).exists(),
                    "{page_name} links to {target}, which does not exist"
                );
                path.to_string_lossy().into_owned()
            };
            if let Some(heading) = heading.filter(|_| linked.ends_with(".md")) {
                assert!(
                    anchors(&page(&linked)).contains(heading),
                    "{page_name} links to {target}: {linked} has no such heading"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 10, "the link check found only {checked} links");
}

#[test]
fn anchors_follow_githubs_rule() {
    assert_eq!(anchor(" `termsprawlctl`"), "termsprawlctl");
    assert_eq!(
        anchor(" Agent messaging and A2A"),
        "agent-messaging-and-a2a"
    );
    assert_eq!(
        anchor(" Dependencies (runtime; versions from `Cargo.lock`)"),
        "dependencies-runtime-versions-from-cargolock"
    );
    assert_eq!(
        console_commands("```console\n$ a\nout\n$ cat > f <<EOF\nx\nEOF\n```\n$ b\n"),
        ["a", "cat > f <<EOF\nx\nEOF"]
    );
}
