//! `termsprawl-tools`: the host binary (see docs/guide.md).
#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::process::ExitCode;

use termsprawl_tools::host::options::parse_stop_terminals;
use termsprawl_tools::host::person::activity::{self, ActivityOptions};
use termsprawl_tools::host::person::approvals;
use termsprawl_tools::host::person::browser_control;
use termsprawl_tools::host::person::links;
use termsprawl_tools::host::terminals::{self, pane_filter as pane, TerminalsStop};
use termsprawl_tools::host::{serve, ServeOptions};
use termsprawl_tools::protocol::{catalogue_json, validate_tool_request, ToolResult};
use termsprawl_tools::terminal_text::escape_for_terminal;

const USAGE: &str = "usage: termsprawl-tools serve [OPTIONS] | stop-terminals [--data DIR] | \
activity [--data DIR] [--project-id ID] [--follow] [--json] | browser-control on|off [--data DIR] | \
approvals list [--json]|allow ID [--for-session|--always]|deny ID [--reason TEXT] [--data DIR] | \
policy show [--json]|set CLASS allow|ask|deny [--agent NODE] [--data DIR] | \
link A B [--messages] [--project DIR] | unlink A B [--project DIR] | catalogue | validate";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let env = |name: &str| std::env::var(name).ok();
    match args.first().map(String::as_str) {
        // termsprawlctl's commands (no name is shared): `serve` built alone points the
        // agents' launcher at this binary (`serve::ctl_beside_current_exe`).
        Some("call" | "doctor" | "mcp" | "--session") => termsprawl_tools::client::run(args),
        Some("serve") => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            match ServeOptions::parse(&args[1..], env, cwd) {
                Ok(options) => match serve::serve(&options) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(error) => fail(&format!("termsprawl-tools serve: {error}"), 1),
                },
                Err(usage) => fail(&usage, 2),
            }
        }
        Some("stop-terminals") => match parse_stop_terminals(&args[1..], env) {
            Ok(data) => {
                let data_shown = data.display();
                match terminals::stop_terminals(&data) {
                    Ok(TerminalsStop::Stopped) => fail(
                        &format!("termsprawl-tools: stopped the terminals' tmux server of {data_shown}"),
                        0,
                    ),
                    Ok(TerminalsStop::NoneRunning) => fail(
                        &format!("termsprawl-tools: no terminals' tmux server runs for {data_shown} (nothing to stop)"),
                        0,
                    ),
                    Ok(TerminalsStop::NoTmux) => fail(
                        "termsprawl-tools: tmux is not installed; no terminals to stop",
                        0,
                    ),
                    Err(error) => fail(&format!("termsprawl-tools stop-terminals: {error}"), 1),
                }
            }
            Err(usage) => fail(&usage, 2),
        },
        // Not in the usage: the program of each tmux terminal, started by `serve`.
        Some(pane::PANE_SUBCOMMAND) => pane::main(&args[1..]),
        Some("activity") => match ActivityOptions::parse(&args[1..], env) {
            Ok(options) => match activity::run(&options, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) if error.is_empty() => ExitCode::SUCCESS,
                Err(error) => fail(&format!("termsprawl-tools activity: {error}"), 1),
            },
            Err(usage) => fail(&usage, 2),
        },
        Some("browser-control") => match browser_control::parse(&args[1..], env) {
            Ok((enabled, data)) => match browser_control::request(&data, enabled) {
                Ok(done) => fail(&format!("termsprawl-tools: {done}"), 0),
                Err(error) => fail(&format!("termsprawl-tools browser-control: {error}"), 1),
            },
            Err(usage) => fail(&usage, 2),
        },
        Some(name @ ("approvals" | "policy")) => {
            let parsed = match name {
                "approvals" => approvals::parse(&args[1..], env),
                _ => approvals::parse_policy(&args[1..], env),
            };
            match parsed {
                Ok((command, data)) => {
                    match approvals::run(&command, &data, &mut std::io::stdout().lock()) {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(error) => fail(&format!("termsprawl-tools {name}: {error}"), 1),
                    }
                }
                Err(usage) => fail(&usage, 2),
            }
        }
        Some(command @ ("link" | "unlink")) => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            let is_link = command == "link";
            let done = links::parse(&args[1..], is_link, cwd).map(|request| match is_link {
                true => links::link(&request),
                false => links::unlink(&request),
            });
            match done {
                Ok(Ok(done)) => fail(&format!("termsprawl-tools: {done}"), 0),
                Ok(Err(error)) => fail(&format!("termsprawl-tools {command}: {error}"), 1),
                Err(usage) if usage == links::LINK_USAGE => fail(&usage, 2),
                Err(error) => fail(&format!("termsprawl-tools {command}: {error}"), 2),
            }
        }
        Some("catalogue") if args.len() == 1 => print_json(&catalogue_json(), ExitCode::SUCCESS),
        Some("validate") if args.len() == 1 => validate_stdin(),
        _ => fail(USAGE, 2),
    }
}

/// Prints `message` on stderr and exits with `code`. A message may quote names from
/// files or the command line: each of its lines is escaped for the terminal.
fn fail(message: &str, code: u8) -> ExitCode {
    for line in message.lines() {
        eprintln!("{}", escape_for_terminal(line));
    }
    ExitCode::from(code)
}

/// One JSON document on stdin -> its ToolResult on stdout; exit 0 accepted, 1 rejected,
/// 2 when stdin is not JSON.
fn validate_stdin() -> ExitCode {
    let mut input = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("termsprawl-tools validate: cannot read stdin: {error}");
        return ExitCode::from(2);
    }
    let raw: serde_json::Value = match serde_json::from_slice(&input) {
        Ok(raw) => raw,
        Err(error) => {
            eprintln!("termsprawl-tools validate: stdin is not JSON: {error}");
            return ExitCode::from(2);
        }
    };
    match validate_tool_request(&raw) {
        Ok(request) => print_json(
            &ToolResult::Ok(serde_json::to_value(request).expect("a request serializes")),
            ExitCode::SUCCESS,
        ),
        Err(error) => print_json(&ToolResult::Err(error.to_string()), ExitCode::from(1)),
    }
}

fn print_json(value: &impl serde::Serialize, code: ExitCode) -> ExitCode {
    let Ok(text) = serde_json::to_string(value) else {
        return ExitCode::from(2);
    };
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}") {
        Ok(()) => code,
        Err(_) => ExitCode::from(2),
    }
}
