//! `termsprawlctl`'s command line, behind [`run`]: `call`, `doctor` and `mcp`, and the help
//! of each (the only place it is written).
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
use crate::base::terminal_text::escape_for_terminal;
use crate::protocol::{nearest_name, ToolResult};

/// What `termsprawlctl --help` prints.
const HELP: &str = "\
termsprawlctl: what agents run to call the tools of a termsprawl-tools host (the CLI fallback,
and the MCP server of MCP clients).

Usage: termsprawlctl [--session FILE] COMMAND [ARGS]

Commands:
  call OPERATION [JSON_ARGS]   send one call and print its answer as JSON
  doctor                       check the session file, the endpoint, the server and the token
  mcp                          speak MCP over stdin and stdout, for an MCP client
  hook claude|codex [JSON]     tell the person what the agent is doing, from its CLI's hook

Options:
  --session FILE   the agent's session file (default: $TERMSPRAWL_SESSION_FILE)
  -h, --help       print this help (after a command: that command's)
  --version        print the version

Environment:
  TERMSPRAWL_SESSION_FILE     the session file, when --session is not given
  TERMSPRAWL_CTL_TIMEOUT_MS   how long call and mcp wait for each answer, in ms (default 45000)

Run 'termsprawlctl COMMAND --help' for a command's details.";

/// What `termsprawlctl call --help` prints.
const CALL_HELP: &str = "\
termsprawlctl call: sends one call to the host, once (never retried), and prints its answer,
{\"ok\":true,\"value\":...} or {\"ok\":false,\"error\":...}, as pretty JSON on stdout.

Usage: termsprawlctl [--session FILE] call OPERATION [JSON_ARGS]

  OPERATION   the operation, e.g. canvas_list (session_info lists those you may call)
  JSON_ARGS   its arguments, one JSON object, e.g. '{\"nodeId\":\"n1\"}' (default {})

Options:
  --session FILE   the agent's session file, before call (default: $TERMSPRAWL_SESSION_FILE)
  -h, --help       print this help

It times out after 45 s ($TERMSPRAWL_CTL_TIMEOUT_MS overrides it, in milliseconds).
Exit 0 when the tool answered ok, 1 when it refused, 2 on a usage error, bad JSON_ARGS or no
connection to the host.";

/// What `termsprawlctl doctor --help` prints.
const DOCTOR_HELP: &str = "\
termsprawlctl doctor: checks the path to the host, one line per check: the session file
(exists, private, parses, token shape), the endpoint, the server and the token; then reports
the agent's integration state, browser control and dropped trail lines.

Usage: termsprawlctl [--session FILE] doctor

Options:
  --session FILE   the agent's session file, before doctor (default: $TERMSPRAWL_SESSION_FILE)
  -h, --help       print this help

Exit 0 when every check passes, else 1.";

/// What `termsprawlctl mcp --help` prints.
const MCP_HELP: &str = "\
termsprawlctl mcp: an MCP server on stdin and stdout (one JSON-RPC message a line, nothing
else on stdout) whose tools are the operations this agent may call. It runs until stdin ends.

Usage: termsprawlctl [--session FILE] mcp

Options:
  --session FILE   the agent's session file, before mcp (default: $TERMSPRAWL_SESSION_FILE)
  -h, --help       print this help";

/// What `termsprawlctl hook --help` prints.
const HOOK_HELP: &str = "\
termsprawlctl hook: what an agent CLI's hook runs to tell the person what the agent is doing
(agent_state). agent_launch sets it up in the agent's own launch configuration.

Usage: termsprawlctl [--session FILE] hook claude     (the hook's JSON on stdin)
       termsprawlctl [--session FILE] hook codex JSON (Codex's notify program)

  claude   Notification: waiting (a permission when its message says so, else a question,
           with the message as the reason); Stop: done; UserPromptSubmit, PostToolUse:
           working
  codex    agent-turn-complete: done, with the start of its last message as the reason

Options:
  --session FILE   the agent's session file, before hook (default: $TERMSPRAWL_SESSION_FILE)
  -h, --help       print this help

It prints nothing and exits 0 whatever happens (a failed hook must not stop the agent); a
problem is said on stderr.";

/// The commands, with their help.
const COMMANDS: [(&str, &str); 4] = [
    ("call", CALL_HELP),
    ("doctor", DOCTOR_HELP),
    ("mcp", MCP_HELP),
    ("hook", HOOK_HELP),
];

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
    let session_flag = match take_session_flag(&mut args) {
        Ok(flag) => flag,
        Err(message) => return usage_error("", &message),
    };
    match args.first().map(String::as_str) {
        Some("-h" | "--help" | "help") => return print_text(HELP),
        Some("--version") => {
            return print_text(&format!("termsprawlctl {}", env!("CARGO_PKG_VERSION")))
        }
        _ => {}
    }
    let Some((command, rest)) = args.split_first() else {
        return usage_error("", "missing COMMAND (call, doctor, mcp or hook)");
    };
    let Some((command, help)) = COMMANDS.into_iter().find(|(name, _)| name == command) else {
        return usage_error("", &unknown_command(command));
    };
    // Help anywhere after the command is answered before anything else: no JSON_ARGS
    // (an object) and no operation name is `-h` or `--help`.
    if rest.iter().any(|word| word == "-h" || word == "--help") {
        return print_text(help);
    }
    // After the command, a word starting with `-` is a misplaced or unknown option.
    if let Some(flag) = rest.iter().find(|word| word.starts_with('-')) {
        return usage_error(command, &misplaced_option(command, flag));
    }
    let session_file = session_flag.or_else(|| {
        std::env::var_os(SESSION_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let timeout = timeout_from_env().unwrap_or(DEFAULT_TIMEOUT);
    if std::env::var_os(TIMEOUT_ENV).is_some() && timeout_from_env().is_none() {
        eprintln!("termsprawlctl: ignoring {TIMEOUT_ENV} (not a positive number of milliseconds)");
    }
    match (command, rest) {
        ("call", []) => usage_error(command, "missing OPERATION"),
        ("call", [operation]) => call(session_file, timeout, operation, None),
        ("call", [operation, json_args]) => call(session_file, timeout, operation, Some(json_args)),
        ("doctor", []) => run_doctor(session_file, timeout),
        ("mcp", []) => run_mcp(session_file, timeout),
        ("hook", [agent]) => run_hook(session_file, agent, None),
        ("hook", [agent, json]) => run_hook(session_file, agent, Some(json)),
        // Words past call's JSON_ARGS, or any after doctor and mcp.
        (_, words) => {
            let taken = match command {
                "call" | "hook" => 2,
                _ => 0,
            };
            let extra = words.get(taken).map_or("", String::as_str);
            usage_error(command, &format!("unexpected argument {extra}"))
        }
    }
}

/// The refusal of a first word that is no command: an unknown option or command, with
/// the nearest known one.
fn unknown_command(word: &str) -> String {
    let (what, names) = match word.starts_with('-') {
        true => ("option", &["--session", "--help", "--version"][..]),
        false => ("command", &["call", "doctor", "mcp", "hook"][..]),
    };
    match nearest_name(word, names.iter().copied()) {
        Some(near) => format!("unknown {what} {word} (did you mean {near}?)"),
        None => format!("unknown {what} {word}"),
    }
}

/// The refusal of an option after `command`: `--session` goes before the command; no
/// other option exists.
fn misplaced_option(command: &str, flag: &str) -> String {
    match flag.split_once('=').map_or(flag, |(name, _)| name) {
        "--session" => {
            format!("--session goes before the command: termsprawlctl --session FILE {command} ...")
        }
        _ => unknown_command(flag),
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

/// A usage error (exit 2): what was wrong first, then where the help is. `command` is
/// empty before one is known. The words quoted are escaped for the terminal.
fn usage_error(command: &str, problem: &str) -> ExitCode {
    let name = match command {
        "" => "termsprawlctl".to_string(),
        command => format!("termsprawlctl {command}"),
    };
    let problem = escape_for_terminal(problem);
    eprintln!("{name}: {problem}\nTry '{name} --help' for more information.");
    ExitCode::from(2)
}

/// Prints help or the version on stdout (exit 0; a closed pipe, as in `--help | head`, is
/// the reader being done).
fn print_text(text: &str) -> ExitCode {
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{text}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(2),
    }
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

/// How long a hook waits for the host: an agent waits for its hooks.
const HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// At most this much of a hook's JSON is kept (a `PostToolUse` event can hold a whole
/// file the agent wrote); an event cut there says nothing and changes nothing.
const HOOK_INPUT_MAX: u64 = 4 * 1024 * 1024;

/// `hook claude|codex [JSON]`: the hook's event as an `agent_state` call. Prints nothing,
/// exits 0 (see [`HOOK_HELP`]).
fn run_hook(session_file: Option<PathBuf>, agent: &str, json: Option<&String>) -> ExitCode {
    if !matches!(agent, "claude" | "codex") {
        return usage_error("hook", &format!("unknown agent {agent} (claude or codex)"));
    }
    let input = match json {
        Some(json) => json.clone(),
        None => {
            let mut input = String::new();
            let mut stdin = io::stdin().lock();
            let _ = io::Read::read_to_string(
                &mut io::Read::take(&mut stdin, HOOK_INPUT_MAX),
                &mut input,
            );
            // The rest is read and dropped: the agent's write of its event must not fail.
            let _ = io::copy(&mut stdin, &mut io::sink());
            input
        }
    };
    let event: Value = serde_json::from_str(&input).unwrap_or(Value::Null);
    let Some(args) = hook_state(agent, &event) else {
        return ExitCode::SUCCESS; // an event that says nothing about waiting
    };
    let Some(session_file) = session_file else {
        eprintln!("termsprawlctl hook: {}", ClientError::NoSessionFile);
        return ExitCode::SUCCESS;
    };
    match Connection::new(session_file, HOOK_TIMEOUT).call("agent_state", &args) {
        Ok(ToolResult::Ok(_)) => {}
        Ok(ToolResult::Err(error)) => {
            eprintln!("termsprawlctl hook: {}", escape_for_terminal(&error))
        }
        Err(error) => eprintln!(
            "termsprawlctl hook: {}",
            escape_for_terminal(&error.to_string())
        ),
    }
    ExitCode::SUCCESS
}

/// The `agent_state` arguments a hook's event means, if any.
fn hook_state(agent: &str, event: &Value) -> Option<Map<String, Value>> {
    let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or_default();
    let mut args = Map::new();
    let (state, why, reason) = match (agent, text("hook_event_name"), text("type")) {
        ("claude", "Notification", _) => {
            let message = text("message");
            let why = match message.to_ascii_lowercase().contains("permission") {
                true => "permission",
                false => "question",
            };
            ("waiting", Some(why), message)
        }
        ("claude", "Stop", _) => ("done", None, ""),
        ("claude", "UserPromptSubmit" | "PostToolUse", _) => ("working", None, ""),
        ("codex", _, "agent-turn-complete") => ("done", None, text("last-assistant-message")),
        _ => return None,
    };
    args.insert("state".into(), Value::from(state));
    if let Some(why) = why {
        args.insert("why".into(), Value::from(why));
    }
    // NUL is no text the protocol takes: dropped, so the state still reaches the person.
    let reason: String = reason.chars().filter(|&c| c != '\0').take(1_000).collect();
    if !reason.trim().is_empty() {
        args.insert("reason".into(), Value::from(reason));
    }
    Some(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hook_events_become_states() {
        let state = |agent: &str, event: Value| hook_state(agent, &event).map(Value::Object);
        let asked = json!({"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"});
        assert_eq!(
            state("claude", asked),
            Some(
                json!({"state": "waiting", "why": "permission", "reason": "Claude needs your permission to use Bash"})
            )
        );
        let idle = json!({"hook_event_name": "Notification", "message": "Claude is waiting for your input"});
        assert_eq!(state("claude", idle).unwrap()["why"], "question");
        assert_eq!(
            state("claude", json!({"hook_event_name": "Stop"})),
            Some(json!({"state": "done"}))
        );
        assert_eq!(
            state("claude", json!({"hook_event_name": "PostToolUse"})),
            Some(json!({"state": "working"}))
        );
        assert_eq!(
            state("claude", json!({"hook_event_name": "PreCompact"})),
            None
        );
        let turn =
            json!({"type": "agent-turn-complete", "last-assistant-message": "All tests pass."});
        assert_eq!(
            state("codex", turn),
            Some(json!({"state": "done", "reason": "All tests pass."}))
        );
        assert_eq!(state("codex", json!({"type": "other"})), None);
        assert_eq!(state("gemini", json!({"hook_event_name": "Stop"})), None);
        assert_eq!(state("claude", Value::Null), None);
    }
}
