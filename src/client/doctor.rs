//! `termsprawlctl doctor`: checks, in the order a call depends on them, and reports each in
//! a plain line a person can read. It never prints the token.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{endpoint_path, http, is_token, loopback_port, ClientError};
use crate::base::terminal_text::escape_for_terminal;
use crate::protocol::ToolResult;

/// How one line of the report came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The check passed.
    Pass,
    /// The check failed; the line says what to do.
    Fail,
    /// Not a check: information (integration status, browser control).
    Info,
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// How it came out.
    pub outcome: Outcome,
    /// What was checked and what was found.
    pub text: String,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.outcome {
            Outcome::Pass => "ok  ",
            Outcome::Fail => "FAIL",
            Outcome::Info => "info",
        };
        write!(f, "{tag}  {}", self.text)
    }
}

/// The whole report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every line, in check order.
    pub lines: Vec<Line>,
}

impl Report {
    /// Whether every check passed (info lines do not count).
    pub fn passed(&self) -> bool {
        self.lines.iter().all(|l| l.outcome != Outcome::Fail)
    }

    fn pass(&mut self, text: impl Into<String>) {
        self.push(Outcome::Pass, text);
    }

    fn fail(&mut self, text: impl Into<String>) {
        self.push(Outcome::Fail, text);
    }

    fn info(&mut self, text: impl Into<String>) {
        self.push(Outcome::Info, text);
    }

    fn push(&mut self, outcome: Outcome, text: impl Into<String>) {
        self.lines.push(Line {
            outcome,
            // A line may quote the session or endpoint file, or the host's answer.
            text: escape_for_terminal(&text.into()).into_owned(),
        });
    }
}

/// Runs every check for `session_file` (`None` when neither `--session` nor the
/// environment named one). The host is asked once, with `session_info`.
pub fn run(session_file: Option<&Path>, timeout: Duration) -> Report {
    let mut report = Report::default();
    let Some(path) = session_file else {
        report.fail(ClientError::NoSessionFile.to_string());
        return report;
    };
    let Some(token) = check_session_file(path, &mut report) else {
        return report;
    };
    let Some(port) = check_endpoint(path, &mut report) else {
        return report;
    };
    check_host(port, &token, timeout, &mut report);
    report
}

/// The session file checks; returns the token when it is usable.
fn check_session_file(path: &Path, report: &mut Report) -> Option<String> {
    let shown = path.display();
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_file() => metadata,
        Ok(_) => {
            report.fail(format!("session file {shown} is not a regular file"));
            return None;
        }
        Err(e) => {
            report.fail(format!(
                "session file {shown} cannot be read ({e}); relaunch the agent from the canvas"
            ));
            return None;
        }
    };
    report.pass(format!("session file {shown} exists"));
    check_mode(&metadata, report);

    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            report.fail(format!("session file cannot be read ({e})"));
            return None;
        }
    };
    let raw: Value = match serde_json::from_slice(&bytes) {
        Ok(raw) => raw,
        Err(e) => {
            report.fail(format!("session file is not JSON ({e})"));
            return None;
        }
    };
    let text = |key: &str| raw.get(key).and_then(Value::as_str);
    match (text("nodeId"), text("projectId")) {
        (Some(node), Some(project)) => report.pass(format!(
            "session file parses: node {node:?}, project {project:?}"
        )),
        _ => {
            report.fail("session file has no nodeId or projectId; relaunch the agent");
            return None;
        }
    }
    match text("token") {
        Some(token) if is_token(token) => {
            report.pass("session token is 64 hex characters");
            Some(token.to_string())
        }
        _ => {
            report.fail("session file has no 64-hex token; relaunch the agent");
            None
        }
    }
}

#[cfg(unix)]
fn check_mode(metadata: &std::fs::Metadata, report: &mut Report) {
    use std::os::unix::fs::PermissionsExt;
    let mode = metadata.permissions().mode() & 0o777;
    if mode == 0o600 {
        report.pass("session file mode is 0600");
    } else {
        report.fail(format!(
            "session file mode is {mode:04o}, expected 0600 (it holds a credential; chmod 600 it)"
        ));
    }
}

#[cfg(not(unix))]
fn check_mode(_metadata: &std::fs::Metadata, report: &mut Report) {
    report.info("session file mode not checked on this platform");
}

/// The endpoint checks; returns the port when the endpoint is usable.
fn check_endpoint(session_file: &Path, report: &mut Report) -> Option<u16> {
    let Some(path): Option<PathBuf> = endpoint_path(session_file) else {
        report.fail("session file is not inside <data>/agent-tools/sessions/");
        return None;
    };
    let shown = path.display();
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            report.fail(format!(
                "endpoint file {shown} cannot be read ({e}); is the host running? (start it with termsprawl-tools serve)"
            ));
            return None;
        }
    };
    report.pass(format!("endpoint file {shown} exists"));
    let url = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|raw| raw.get("url").and_then(Value::as_str).map(str::to_string));
    let Some(url) = url else {
        report.fail("endpoint file has no url");
        return None;
    };
    match loopback_port(&url) {
        Some(port) => {
            report.pass(format!("endpoint {url} is a loopback URL"));
            Some(port)
        }
        None => {
            report.fail(ClientError::InvalidEndpoint(url).to_string());
            None
        }
    }
}

/// Asks the host for `session_info` and reports what it says.
fn check_host(port: u16, token: &str, timeout: Duration, report: &mut Report) {
    let body = serde_json::json!({ "operation": "session_info", "args": Map::new() }).to_string();
    let answer = match http::post_call(port, token, body.as_bytes(), timeout) {
        Ok(answer) => answer,
        Err(cause) => {
            report.fail(format!(
                "server does not answer on port {port}: {cause}; is the host running? (start it with termsprawl-tools serve)"
            ));
            return;
        }
    };
    let result = serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(|raw| ToolResult::from_json(&raw));
    let Some(result) = result else {
        report.fail(format!(
            "server on port {port} answered HTTP {} without a tool result",
            answer.status
        ));
        return;
    };
    report.pass(format!("server answers on port {port}"));
    let value = match result {
        ToolResult::Ok(value) => value,
        ToolResult::Err(error) => {
            report.fail(format!(
                "token refused: {error}; relaunch the agent from the canvas"
            ));
            return;
        }
    };
    report.pass("token accepted (session_info)");
    let status = &value["status"];
    let mut integration = format!(
        "integration: {} ({})",
        status["state"].as_str().unwrap_or("unknown"),
        status["adapter"].as_str().unwrap_or("unknown adapter")
    );
    if let Some(reason) = status["reason"].as_str() {
        integration.push_str(" - ");
        integration.push_str(reason);
    }
    report.info(integration);
    report.info(match value["browserEnabled"].as_bool() {
        Some(true) => "browser control: on",
        Some(false) => "browser control: off (the person turns it on: termsprawl-tools browser-control on, serve --browser or the canvas view; in an app that embeds the host, its Settings)",
        None => "browser control: unknown",
    });
    let isolation = &value["isolation"];
    if let Some(mode) = isolation["mode"].as_str() {
        let why = isolation["why"].as_str().unwrap_or_default();
        report.info(match isolation["boundary"].as_bool() {
            Some(true) => format!("isolation: {mode}, a boundary ({why})"),
            _ => format!("isolation: {mode}, no boundary ({why})"),
        });
    }
    if let Some(dropped) = value["activityDropped"].as_u64() {
        report.info(match dropped {
            0 => "activity trail: no line dropped".to_string(),
            n => format!("activity trail: {n} line(s) dropped (disk full or writer behind; see serve's stderr)"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_session_file_fails() {
        let report = run(None, Duration::from_secs(1));
        assert!(!report.passed());
        assert!(report.lines[0]
            .to_string()
            .starts_with("FAIL  No session file"));
    }

    #[test]
    fn a_missing_session_file_stops_the_checks() {
        let report = run(
            Some(Path::new("/nonexistent/agent-tools/sessions/x.json")),
            Duration::from_secs(1),
        );
        assert_eq!(report.lines.len(), 1);
        assert!(!report.passed());
    }
}
