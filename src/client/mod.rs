//! The agent-side helper behind `termsprawlctl`: discovery, one HTTP call per tool call,
//! `doctor`, and the MCP stdio adapter.
//!
//! Discovery happens on every call: the session file (`--session`, else
//! `TERMSPRAWL_SESSION_FILE`) is read, then `endpoint.json` two folders above it
//! (`<data>/agent-tools/sessions/<id>.json` → `<data>/agent-tools/endpoint.json`), so a
//! running agent survives a host restart on a new port without any change on its side.
//! Only `http://127.0.0.1:PORT/call` endpoints are used; a call is sent once and never
//! retried, because the host may already have applied a mutation whose answer was lost.
//! Each call has one overall deadline ([`DEFAULT_TIMEOUT`], 45 s; [`TIMEOUT_ENV`]
//! `TERMSPRAWL_CTL_TIMEOUT_MS` overrides it in milliseconds, which the tests use).

mod cli;
pub mod doctor;
pub mod http;
pub mod mcp;

pub use cli::run;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::protocol::limits::MAX_BODY_BYTES;
use crate::protocol::ToolResult;

/// The environment variable naming the session file when `--session` is not given.
pub const SESSION_FILE_ENV: &str = "TERMSPRAWL_SESSION_FILE";

/// The environment variable overriding the overall per-call timeout, in milliseconds
/// (for tests and slow machines; the default is [`DEFAULT_TIMEOUT`]).
pub const TIMEOUT_ENV: &str = "TERMSPRAWL_CTL_TIMEOUT_MS";

/// The overall timeout of one call: connect, send, and the whole answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(45);

/// Why a call did not get a tool result from the host. `Display` is the text an agent sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// Neither `--session` nor `TERMSPRAWL_SESSION_FILE` names a session file.
    NoSessionFile,
    /// The session file cannot be read or is not a session.
    Session {
        /// The session file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `endpoint.json` names something other than `http://127.0.0.1:PORT/call`.
    InvalidEndpoint(String),
    /// The host could not be reached or did not answer with a tool result.
    Unavailable(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NoSessionFile => write!(
                f,
                "No session file: pass --session FILE or set {SESSION_FILE_ENV} (the host sets it in agent terminals)"
            ),
            ClientError::Session { path, reason } => write!(
                f,
                "Unreadable session file {}: {reason}. Relaunch the agent from the canvas to get a fresh session",
                path.display()
            ),
            ClientError::InvalidEndpoint(url) => write!(
                f,
                "Invalid local endpoint {url:?}: only http://127.0.0.1:PORT/call is accepted"
            ),
            ClientError::Unavailable(cause) => write!(
                f,
                "Tool connection unavailable: {cause}. Check that the host is running (start it with termsprawl-tools serve). Mutations are not automatically retried."
            ),
        }
    }
}

impl std::error::Error for ClientError {}

/// A parsed session file: `{nodeId, projectId, token, status}`.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionFile {
    /// The agent's node id.
    pub node_id: String,
    /// Its project.
    pub project_id: String,
    /// 64 hex characters; never printed.
    pub token: String,
}

impl fmt::Debug for SessionFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionFile")
            .field("node_id", &self.node_id)
            .field("project_id", &self.project_id)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Whether `token` is 64 lowercase hex characters, the only shape the host issues
/// (and the only one the server accepts).
pub fn is_token(token: &str) -> bool {
    token.len() == 64
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Reads and checks a session file.
pub fn read_session(path: &Path) -> Result<SessionFile, ClientError> {
    let fail = |reason: String| ClientError::Session {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let raw: Value = serde_json::from_slice(&bytes).map_err(|e| fail(format!("not JSON ({e})")))?;
    let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_string);
    let node_id = text("nodeId").ok_or_else(|| fail("no nodeId".to_string()))?;
    let project_id = text("projectId").ok_or_else(|| fail("no projectId".to_string()))?;
    let token = text("token")
        .filter(|t| is_token(t))
        .ok_or_else(|| fail("no 64-hex token".to_string()))?;
    Ok(SessionFile {
        node_id,
        project_id,
        token,
    })
}

/// Where `endpoint.json` is for a session file: two folders above it.
pub fn endpoint_path(session_file: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(session_file).ok()?;
    Some(absolute.parent()?.parent()?.join("endpoint.json"))
}

/// The port of an accepted endpoint URL: exactly `http://127.0.0.1:PORT/call`.
pub fn loopback_port(url: &str) -> Option<u16> {
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")?
        .strip_suffix("/call")?
        .parse()
        .ok()?;
    // Re-rendering rejects leading zeros, signs and anything else `parse` tolerates.
    (port != 0 && url == format!("http://127.0.0.1:{port}/call")).then_some(port)
}

/// Reads `endpoint.json` and returns the port of its loopback URL.
pub fn read_endpoint(path: &Path) -> Result<u16, ClientError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClientError::Unavailable(format!(
                "no endpoint file at {} (the host is not running)",
                path.display()
            )))
        }
        Err(e) => {
            return Err(ClientError::Unavailable(format!(
                "cannot read {} ({e})",
                path.display()
            )))
        }
    };
    let raw: Value = serde_json::from_slice(&bytes)
        .map_err(|e| ClientError::Unavailable(format!("{} is not JSON ({e})", path.display())))?;
    let url = raw
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| ClientError::Unavailable(format!("{} has no url", path.display())))?;
    loopback_port(url).ok_or_else(|| ClientError::InvalidEndpoint(url.to_string()))
}

/// Reads the timeout override from [`TIMEOUT_ENV`]; `None` when unset or not a positive
/// number of milliseconds.
pub fn timeout_from_env() -> Option<Duration> {
    let raw = std::env::var(TIMEOUT_ENV).ok()?;
    let millis: u64 = raw.trim().parse().ok()?;
    (millis > 0).then(|| Duration::from_millis(millis))
}

/// The host as reached through one session file. Cheap; discovery runs on each call.
#[derive(Clone, Debug)]
pub struct Connection {
    session_file: PathBuf,
    timeout: Duration,
}

impl Connection {
    /// A connection through `session_file`, each call bounded by `timeout`.
    pub fn new(session_file: PathBuf, timeout: Duration) -> Self {
        Connection {
            session_file,
            timeout,
        }
    }

    /// The session file in use.
    pub fn session_file(&self) -> &Path {
        &self.session_file
    }

    /// Calls `operation` with `args` once: fresh discovery, one POST, no retry.
    pub fn call(
        &self,
        operation: &str,
        args: &Map<String, Value>,
    ) -> Result<ToolResult, ClientError> {
        let session = read_session(&self.session_file)?;
        let endpoint = endpoint_path(&self.session_file).ok_or_else(|| ClientError::Session {
            path: self.session_file.clone(),
            reason: "it is not inside <data>/agent-tools/sessions/".to_string(),
        })?;
        let port = read_endpoint(&endpoint)?;
        let body = json!({ "operation": operation, "args": args }).to_string();
        if body.len() > MAX_BODY_BYTES {
            // The host refuses these unread, and may reset the connection before its answer
            // arrives; say what it would say instead of sending.
            return Ok(ToolResult::Err(format!(
                "Request too large: {} bytes, the limit is {MAX_BODY_BYTES}; send less per call",
                body.len()
            )));
        }
        // A call that waits (a command's end) may take its own timeout before answering.
        let waits = crate::protocol::wait_timeout(operation, args).unwrap_or_default();
        let timeout = self.timeout + waits;
        let answer = http::post_call(port, &session.token, body.as_bytes(), timeout)
            .map_err(ClientError::Unavailable)?;
        tool_result_from(answer.status, &answer.body)
    }

    /// Like [`Connection::call`], with a connection failure folded into `ok:false` (what
    /// MCP and `call` show the agent).
    pub fn call_or_error(&self, operation: &str, args: &Map<String, Value>) -> ToolResult {
        self.call(operation, args)
            .unwrap_or_else(|error| ToolResult::Err(error.to_string()))
    }
}

/// Reads the host's answer: every status the spec defines carries a ToolResult body.
fn tool_result_from(status: u16, body: &[u8]) -> Result<ToolResult, ClientError> {
    if (300..400).contains(&status) {
        return Err(ClientError::Unavailable(format!(
            "the host answered with a redirect (HTTP {status}), which is not followed"
        )));
    }
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|raw| ToolResult::from_json(&raw))
        .ok_or_else(|| {
            ClientError::Unavailable(format!(
                "the host answered HTTP {status} without a tool result"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_loopback_call_url_is_accepted() {
        assert_eq!(loopback_port("http://127.0.0.1:4321/call"), Some(4321));
        for bad in [
            "http://localhost:4321/call",
            "https://127.0.0.1:4321/call",
            "http://127.0.0.2:4321/call",
            "http://10.0.0.5:4321/call",
            "http://127.0.0.1:4321/call/",
            "http://127.0.0.1:4321/other",
            "http://127.0.0.1:04321/call",
            "http://127.0.0.1:+4321/call",
            "http://127.0.0.1:0/call",
            "http://127.0.0.1:70000/call",
            "http://127.0.0.1@evil:4321/call",
            "http://127.0.0.1:4321/call?x",
            "",
        ] {
            assert_eq!(loopback_port(bad), None, "{bad}");
        }
    }

    #[test]
    fn endpoint_is_two_folders_above_the_session_file() {
        assert_eq!(
            endpoint_path(Path::new("/d/agent-tools/sessions/a.json")),
            Some(PathBuf::from("/d/agent-tools/endpoint.json"))
        );
    }

    #[test]
    fn answers_without_a_tool_result_are_connection_failures() {
        assert_eq!(
            tool_result_from(401, br#"{"ok":false,"error":"Unknown or revoked session"}"#),
            Ok(ToolResult::Err("Unknown or revoked session".into()))
        );
        assert_eq!(
            tool_result_from(200, br#"{"ok":true,"value":3}"#),
            Ok(ToolResult::Ok(json!(3)))
        );
        for (status, body) in [(302, &b"{\"ok\":true}"[..]), (500, b"oops"), (200, b"{}")] {
            let error = tool_result_from(status, body).unwrap_err().to_string();
            assert!(
                error.starts_with("Tool connection unavailable: "),
                "{error}"
            );
            assert!(error.ends_with("Mutations are not automatically retried."));
        }
    }

    #[test]
    fn tokens_are_64_hex() {
        assert!(is_token(&"ab".repeat(32)));
        assert!(!is_token(&"ab".repeat(31)));
        assert!(!is_token(&"zz".repeat(32)));
        assert!(
            !is_token(&"AB".repeat(32)),
            "the server accepts only lowercase"
        );
        assert!(!format!(
            "{:?}",
            SessionFile {
                node_id: "n".into(),
                project_id: "p".into(),
                token: "secret".into()
            }
        )
        .contains("secret"));
    }
}
