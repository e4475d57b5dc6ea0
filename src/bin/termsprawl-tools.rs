//! `termsprawl-tools`: the host binary (see docs/guide.md).
#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use termsprawl_tools::host::help;
use termsprawl_tools::host::options::parse_data;
use termsprawl_tools::host::person::activity::{self, ActivityOptions};
use termsprawl_tools::host::person::approvals;
use termsprawl_tools::host::person::browser_control;
use termsprawl_tools::host::person::links;
use termsprawl_tools::host::person::worktrees as worktrees_command;
use termsprawl_tools::host::terminals::{self, pane_filter as pane, TerminalsStop};
use termsprawl_tools::host::{serve, ServeOptions};
use termsprawl_tools::protocol::{catalogue_json, validate_tool_request, ToolResult};
use termsprawl_tools::terminal_text::escape_for_terminal;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(first) = args.first().map(String::as_str) else {
        return usage_error("", "missing COMMAND");
    };
    match first {
        // termsprawlctl's commands (no name is shared): `serve` built alone points the
        // agents' launcher at this binary (`serve::ctl_beside_current_exe`).
        "call" | "doctor" | "mcp" | "--session" => termsprawl_tools::client::run(args),
        // Not in the help: the program of each tmux terminal, started by `serve`; the
        // words after it are a program's, `--help` among them.
        pane::PANE_SUBCOMMAND => pane::main(&args[1..]),
        "-h" | "--help" => print_text(&help::overview()),
        "--version" => print_text(&format!("termsprawl-tools {}", env!("CARGO_PKG_VERSION"))),
        _ => match help::command(first) {
            // Help anywhere after a command is answered before any parsing: asking for
            // help never starts, changes or waits for anything.
            Some(command) if args[1..].iter().any(|w| w == "-h" || w == "--help") => {
                print_text(command.text)
            }
            Some(command) => run(command.name, &args[1..]),
            None => usage_error("", &help::unknown_command(first)),
        },
    }
}

/// The person's own commands, which an agent's confined terminal cannot use.
const PERSON_COMMANDS: [&str; 8] = [
    "stop-terminals",
    "activity",
    "browser-control",
    "approvals",
    "policy",
    "link",
    "unlink",
    "worktrees",
];

/// Runs the person's `command` with the words after it.
fn run(command: &str, args: &[String]) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    if PERSON_COMMANDS.contains(&command) {
        if let Some(refusal) = termsprawl_tools::host::isolation::person_command_refusal(command) {
            return fail(&refusal, 1);
        }
    }
    match command {
        "serve" => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            match ServeOptions::parse(args, env, cwd) {
                Ok(options) => match serve::serve(&options) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(error) => fail(&format!("termsprawl-tools serve: {error}"), 1),
                },
                Err(problem) => usage_error(command, &problem),
            }
        }
        "stop-terminals" => match parse_data(command, args, env) {
            Ok(data) => stop_terminals(&data),
            Err(problem) => usage_error(command, &problem),
        },
        "activity" => match ActivityOptions::parse(args, env) {
            Ok(options) => match activity::run(&options, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) if error.is_empty() => ExitCode::SUCCESS,
                Err(error) => fail(&format!("termsprawl-tools activity: {error}"), 1),
            },
            Err(problem) => usage_error(command, &problem),
        },
        "browser-control" => match browser_control::parse(args, env) {
            Ok((enabled, data)) => match browser_control::request(&data, enabled) {
                Ok(done) => fail(&format!("termsprawl-tools: {done}"), 0),
                Err(error) => fail(&format!("termsprawl-tools browser-control: {error}"), 1),
            },
            Err(problem) => usage_error(command, &problem),
        },
        "approvals" | "policy" => {
            let parsed = match command {
                "approvals" => approvals::parse(args, env),
                _ => approvals::parse_policy(args, env),
            };
            let checked = parsed.and_then(|(asked, data)| {
                approvals::require_known_agent(&asked, &data).map(|()| (asked, data))
            });
            match checked {
                Ok((asked, data)) => {
                    match approvals::run(&asked, &data, &mut std::io::stdout().lock()) {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(error) => fail(&format!("termsprawl-tools {command}: {error}"), 1),
                    }
                }
                Err(problem) => usage_error(command, &problem),
            }
        }
        "link" | "unlink" => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            let is_link = command == "link";
            let done = links::parse(args, is_link, cwd).map(|request| match is_link {
                true => links::link(&request),
                false => links::unlink(&request),
            });
            match done {
                Ok(Ok(done)) => fail(&format!("termsprawl-tools: {done}"), 0),
                Ok(Err(error)) => fail(&format!("termsprawl-tools {command}: {error}"), 1),
                Err(problem) => usage_error(command, &problem),
            }
        }
        "worktrees" => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
            match worktrees_command::parse_with_data(args, cwd, env) {
                Ok((asked, project, data)) => {
                    let done = worktrees_command::run(&asked, &project);
                    worktrees_command::record(&asked, &project, data.as_deref(), &done);
                    match done {
                        Ok(said) => print_text(&said),
                        Err(error) => fail(&format!("termsprawl-tools worktrees: {error}"), 1),
                    }
                }
                Err(problem) => usage_error(command, &problem),
            }
        }
        _ => match args.first() {
            Some(extra) => usage_error(command, &format!("unexpected argument {extra}")),
            None if command == "catalogue" => print_json(&catalogue_json(), ExitCode::SUCCESS),
            None => validate_stdin(),
        },
    }
}

/// `stop-terminals`: says what it found in `data`, which it names.
fn stop_terminals(data: &Path) -> ExitCode {
    let shown = data.display();
    match terminals::stop_terminals(data) {
        Ok(TerminalsStop::Stopped) => fail(
            &format!("termsprawl-tools: stopped the terminals' tmux server of {shown}"),
            0,
        ),
        Ok(TerminalsStop::NoneRunning) => fail(
            &format!(
                "termsprawl-tools: no terminals' tmux server runs for {shown} (nothing to stop)"
            ),
            0,
        ),
        Ok(TerminalsStop::NoTmux) => fail(
            "termsprawl-tools: tmux is not installed; no terminals to stop",
            0,
        ),
        Err(error) => fail(&format!("termsprawl-tools stop-terminals: {error}"), 1),
    }
}

/// A usage error (exit 2): what was wrong first, then where the help is, never the whole
/// usage. `command` is empty for the binary itself.
fn usage_error(command: &str, problem: &str) -> ExitCode {
    let name = match command {
        "" => "termsprawl-tools".to_string(),
        command => format!("termsprawl-tools {command}"),
    };
    fail(
        &format!("{name}: {problem}\nTry '{name} --help' for more information."),
        2,
    )
}

/// Prints help or the version on stdout (exit 0; a closed pipe, as in `--help | head`, is
/// the reader being done).
fn print_text(text: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(2),
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
