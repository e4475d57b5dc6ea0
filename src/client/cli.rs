//! `termsprawlctl`'s command line, behind [`run`]: `call`, `doctor` and `mcp` (its `USAGE` text).
//!
//! `call` prints the ToolResult as pretty JSON and exits 0 when `ok`, 1 when the host
//! answered `ok:false`, 2 on a usage error, an unreadable session file, bad JSON args or no
//! connection (the result is still printed). `doctor` prints one line per check and exits
//! 0 only if all pass. `mcp` speaks MCP on stdin/stdout until EOF.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Map, Value};

use super::{
    doctor, mcp, timeout_from_env, ClientError, Connection, DEFAULT_TIMEOUT, SESSION_FILE_ENV,
    TIMEOUT_ENV,
};
use crate::protocol::ToolResult;

const USAGE: &str = "\
usage: termsprawlctl [--session FILE] call OPERATION [JSON_ARGS]
       termsprawlctl [--session FILE] doctor
       termsprawlctl [--session FILE] mcp

The session file defaults to $TERMSPRAWL_SESSION_FILE. Each call is sent once and never
retried; it times out after 45 s (override in milliseconds with $TERMSPRAWL_CTL_TIMEOUT_MS).
call exits 0 when ok, 1 when the tool refused, 2 on usage errors or no connection.";

/// Runs `termsprawlctl` with `args` (without the program's name) and returns its exit
/// code: the whole CLI, so an app's own binary can be the `termsprawlctl` its launcher
/// `exec`s (cargo builds no binary of a dependency). For example, when the binary is
/// run by the name `termsprawlctl` (a symlink to it, passed to
/// [`AgentToolRuntime::start`](crate::runtime::AgentToolRuntime::start)):
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     let mut args = std::env::args();
///     let name = args.next().unwrap_or_default();
///     if std::path::Path::new(&name).file_name() == Some("termsprawlctl".as_ref()) {
///         return termsprawl_tools::client::run(args);
///     }
///     // ... the app itself
/// #   std::process::ExitCode::SUCCESS
/// }
/// ```
///
/// It prints to stdout and stderr and reads stdin (`mcp`), so it is for a process of its
/// own; it never exits the process itself.
pub fn run(args: impl IntoIterator<Item = String>) -> ExitCode {
    let mut args: Vec<String> = args.into_iter().collect();
    if matches!(
        args.first().map(String::as_str),
        Some("-h" | "--help" | "help")
    ) {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let session_flag = match take_session_flag(&mut args) {
        Ok(flag) => flag,
        Err(message) => return usage_error(&message),
    };
    let session_file = session_flag.or_else(|| {
        std::env::var_os(SESSION_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let timeout = timeout_from_env().unwrap_or(DEFAULT_TIMEOUT);
    if std::env::var_os(TIMEOUT_ENV).is_some() && timeout_from_env().is_none() {
        eprintln!("termsprawlctl: ignoring {TIMEOUT_ENV} (not a positive number of milliseconds)");
    }

    match args.first().map(String::as_str) {
        Some("call") if (2..=3).contains(&args.len()) => call(
            session_file,
            timeout,
            &args[1],
            args.get(2).map(String::as_str),
        ),
        Some("doctor") if args.len() == 1 => run_doctor(session_file, timeout),
        Some("mcp") if args.len() == 1 => run_mcp(session_file, timeout),
        _ => usage_error("expected call, doctor or mcp"),
    }
}

/// Removes a leading `--session FILE` / `--session=FILE`.
fn take_session_flag(args: &mut Vec<String>) -> Result<Option<PathBuf>, String> {
    let Some(first) = args.first() else {
        return Ok(None);
    };
    if first == "--session" {
        if args.len() < 2 || args[1].is_empty() {
            return Err("--session needs a FILE".to_string());
        }
        let file = PathBuf::from(args.remove(1));
        args.remove(0);
        return Ok(Some(file));
    }
    if let Some(file) = first.strip_prefix("--session=") {
        if file.is_empty() {
            return Err("--session needs a FILE".to_string());
        }
        let file = PathBuf::from(file);
        args.remove(0);
        return Ok(Some(file));
    }
    Ok(None)
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("termsprawlctl: {message}\n{USAGE}");
    ExitCode::from(2)
}

fn call(
    session_file: Option<PathBuf>,
    timeout: std::time::Duration,
    operation: &str,
    json_args: Option<&str>,
) -> ExitCode {
    let args: Map<String, Value> = match json_args.map(serde_json::from_str::<Value>) {
        None => Map::new(),
        Some(Ok(Value::Object(args))) => args,
        Some(Ok(_)) => {
            return print_result(
                &ToolResult::Err(
                    "JSON_ARGS must be a JSON object, e.g. '{\"nodeId\":\"n1\"}'".into(),
                ),
                2,
            )
        }
        Some(Err(error)) => {
            return print_result(
                &ToolResult::Err(format!("JSON_ARGS is not valid JSON ({error})")),
                2,
            )
        }
    };
    let Some(session_file) = session_file else {
        return print_result(&ToolResult::Err(ClientError::NoSessionFile.to_string()), 2);
    };
    match Connection::new(session_file, timeout).call(operation, &args) {
        Ok(result @ ToolResult::Ok(_)) => print_result(&result, 0),
        Ok(result @ ToolResult::Err(_)) => print_result(&result, 1),
        Err(error) => print_result(&ToolResult::Err(error.to_string()), 2),
    }
}

fn print_result(result: &ToolResult, code: u8) -> ExitCode {
    let text = serde_json::to_string_pretty(result).unwrap_or_else(|_| String::from("{}"));
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::from(code),
        Err(_) => ExitCode::from(2),
    }
}

fn run_doctor(session_file: Option<PathBuf>, timeout: std::time::Duration) -> ExitCode {
    let report = doctor::run(session_file.as_deref(), timeout);
    let mut stdout = io::stdout().lock();
    for line in &report.lines {
        let _ = writeln!(stdout, "{line}");
    }
    let failed = report
        .lines
        .iter()
        .filter(|l| l.outcome == doctor::Outcome::Fail)
        .count();
    if failed == 0 {
        let _ = writeln!(stdout, "all checks passed");
        ExitCode::SUCCESS
    } else {
        let _ = writeln!(stdout, "{failed} check(s) failed");
        ExitCode::from(1)
    }
}

fn run_mcp(session_file: Option<PathBuf>, timeout: std::time::Duration) -> ExitCode {
    // Without a session file every host call fails with that reason, so `initialize`
    // reports it to the client instead of the process vanishing.
    let connection = session_file.map(|file| Connection::new(file, timeout));
    let mut host = |operation: &str, args: &Map<String, Value>| match &connection {
        Some(connection) => connection.call_or_error(operation, args),
        None => ToolResult::Err(ClientError::NoSessionFile.to_string()),
    };
    // Read on a thread of its own (see `mcp::serve`), hence not a `StdinLock`.
    let stdin = io::BufReader::new(io::stdin());
    let stdout = io::stdout().lock();
    match mcp::serve(stdin, stdout, &mut host) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("termsprawlctl mcp: {error}");
            ExitCode::from(1)
        }
    }
}
