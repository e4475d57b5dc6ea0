//! `termsprawl-tools`: the host binary (see DESIGN.md, "Command-line contract").

use std::io::{Read, Write};
use std::process::ExitCode;

use termsprawl_tools::protocol::{catalogue_json, validate_tool_request, ToolResult};

const USAGE: &str = "usage: termsprawl-tools catalogue | validate";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("catalogue") if args.len() == 1 => print_json(&catalogue_json(), ExitCode::SUCCESS),
        Some("validate") if args.len() == 1 => validate_stdin(),
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
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
