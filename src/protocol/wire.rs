//! The wire types shared by every layer (the spec's `ToolIdentity`, `IntegrationStatus`,
//! `ToolRequest`, `ToolResult`, `CanvasToolRequest`, `CanvasToolReply`, `ToolSession`).
//! Field names are exactly the spec's: camelCase, state values kebab-case.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who is calling: an agent node on the canvas of one project.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolIdentity {
    /// The agent's node id on the canvas.
    pub node_id: String,
    /// The project whose canvas holds the node.
    pub project_id: String,
}

/// How far an agent's tool integration has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntegrationState {
    /// The agent's MCP client has called `session_info` with its token.
    Connected,
    /// The agent reaches the tools through `"$TERMSPRAWL_CTL" call …` from its shell.
    CliFallback,
    /// Something must happen first (install the CLI, relaunch the agent, wait for MCP).
    NeedsSetup,
}

/// The integration status reported for an agent node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrationStatus {
    /// Where the integration stands.
    pub state: IntegrationState,
    /// How the agent is wired to the tools (`claude-mcp`, `codex-mcp`, `external`, …).
    pub adapter: String,
    /// The agent CLI's version, when it was probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A sentence a person can act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A validated `{ operation, args }` request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// A name from [`crate::protocol::AGENT_TOOLS`].
    pub operation: String,
    /// The operation's arguments, already checked against its schema.
    pub args: Map<String, Value>,
}

/// What every operation answers: `{ok:true,value}` or `{ok:false,error}`.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolResult {
    /// The operation succeeded with this value.
    Ok(Value),
    /// The operation failed; the text tells the agent what to do next.
    Err(String),
}

impl ToolResult {
    /// Reads a wire result; `None` when `raw` is not one.
    pub fn from_json(raw: &Value) -> Option<ToolResult> {
        Some(match raw.get("ok")?.as_bool()? {
            true => ToolResult::Ok(raw.get("value").cloned().unwrap_or(Value::Null)),
            false => ToolResult::Err(raw.get("error")?.as_str()?.to_string()),
        })
    }
}

impl From<Result<Value, String>> for ToolResult {
    fn from(result: Result<Value, String>) -> Self {
        result.map_or_else(ToolResult::Err, ToolResult::Ok)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // The spec's field order on the wire: `ok` first.
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("ok", &matches!(self, ToolResult::Ok(_)))?;
        match self {
            ToolResult::Ok(value) => map.serialize_entry("value", value)?,
            ToolResult::Err(error) => map.serialize_entry("error", error)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        ToolResult::from_json(&raw)
            .ok_or_else(|| serde::de::Error::custom("expected {ok:true,value} or {ok:false,error}"))
    }
}

/// A canvas operation on its way to the canvas owner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanvasToolRequest {
    /// Random id the owner's reply must carry.
    pub request_id: String,
    /// The project whose canvas is addressed.
    pub project_id: String,
    /// Milliseconds since the Unix epoch after which the owner must not apply it.
    pub expires_at: u64,
    /// The operation name.
    pub operation: String,
    /// The operation's arguments.
    pub args: Map<String, Value>,
    /// The agent whose call this is (its node id); absent for the person's own actions
    /// (the canvas view). What the call starts for an agent is confined by the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

/// The canvas owner's answer to a [`CanvasToolRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanvasToolReply {
    /// The id of the request answered.
    pub request_id: String,
    /// What happened.
    pub result: ToolResult,
}

/// A provisioned session: an identity, its bearer token and its status. `Debug` shows
/// the token as `<redacted>`, so no panic or log line can carry it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSession {
    /// The agent node.
    pub node_id: String,
    /// Its project.
    pub project_id: String,
    /// 64 lowercase hex characters; never part of any response.
    pub token: String,
    /// The integration status.
    pub status: IntegrationStatus,
}

impl std::fmt::Debug for ToolSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSession")
            .field("node_id", &self.node_id)
            .field("project_id", &self.project_id)
            .field("token", &"<redacted>")
            .field("status", &self.status)
            .finish()
    }
}

impl ToolSession {
    /// The identity part of the session.
    pub fn identity(&self) -> ToolIdentity {
        ToolIdentity {
            node_id: self.node_id.clone(),
            project_id: self.project_id.clone(),
        }
    }
}

/// Whether `id` matches the spec's node-id rule `^[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}$`: safe
/// in file names and tmux session names (no `/`, `.`, `:` or pattern characters).
pub fn is_valid_node_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_names_are_the_specs() {
        let status = IntegrationStatus {
            state: IntegrationState::CliFallback,
            adapter: "external".into(),
            version: None,
            reason: Some("r".into()),
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"state": "cli-fallback", "adapter": "external", "reason": "r"})
        );
        let request = CanvasToolRequest {
            request_id: "r1".into(),
            project_id: "p".into(),
            expires_at: 5,
            operation: "canvas_list".into(),
            args: Map::new(),
            caller: None,
        };
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            json!({"requestId": "r1", "projectId": "p", "expiresAt": 5, "operation": "canvas_list", "args": {}})
        );
        let reply: CanvasToolReply = serde_json::from_value(
            json!({"requestId": "r1", "result": {"ok": false, "error": "no"}}),
        )
        .unwrap();
        assert_eq!(reply.result, ToolResult::Err("no".into()));
    }

    #[test]
    fn tool_result_round_trips() {
        for result in [
            ToolResult::Ok(json!({"a": 1})),
            ToolResult::Err("bad".into()),
        ] {
            let wire = serde_json::to_value(&result).unwrap();
            assert_eq!(ToolResult::from_json(&wire), Some(result));
        }
        assert_eq!(
            serde_json::to_string(&ToolResult::Err("e".into())).unwrap(),
            r#"{"ok":false,"error":"e"}"#
        );
        assert_eq!(
            serde_json::to_string(&ToolResult::Ok(json!(1))).unwrap(),
            r#"{"ok":true,"value":1}"#
        );
        assert_eq!(ToolResult::from_json(&json!({"ok": "yes"})), None);
        assert_eq!(ToolResult::from_json(&json!({"ok": false})), None);
    }
}
