//! MCP over stdio: one JSON-RPC 2.0 message per line, UTF-8; stdout carries nothing but
//! protocol messages. The core ([`McpServer::handle_line`]) is a pure function of its input
//! line, two remembered facts (the legacy version negotiated by `initialize`, the host's
//! app version) and a [`ToolHost`] callback, so it is unit-tested and fuzzable without a
//! process; [`serve`] is the thin stdio loop around it.
//!
//! # What is implemented, by revision (read from the specification text at
//! `modelcontextprotocol.io/specification/REVISION/…` and `schema/REVISION/schema.ts`)
//!
//! A dual-era server ("Versioning and Compatibility", 2026-07-28): a request whose `_meta`
//! names a modern version is served statelessly; `initialize` selects legacy semantics for
//! the rest of the process.
//!
//! - **Legacy era: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25** (`basic/lifecycle`).
//!   `initialize` answers the requested version when it is one of these, else the newest
//!   (2025-11-25); it first calls the host's `session_info` and fails (-32603, the host's
//!   error text) when that fails. Result: `protocolVersion`, `capabilities: {tools: {listChanged: true}}`,
//!   `serverInfo {name: "termsprawl", version: appVersion}` (+ `title` from 2025-06-18),
//!   `instructions` (the overview guide). `notifications/initialized` and every other
//!   notification get no reply; `ping` answers `{}`. Version-dependent shapes
//!   (`schema.ts` of each revision): tool `annotations` from 2025-03-26, tool `title`,
//!   `outputSchema` and `structuredContent` from 2025-06-18. Requests before `initialize`
//!   without a per-request version are refused with -32602 (except `ping`).
//! - **Modern era: 2026-07-28** (`basic/index` "_meta", `basic/versioning`,
//!   `server/discover`, `server/utilities/caching`, `basic/transports/stdio`). Every
//!   request carries `_meta["io.modelcontextprotocol/protocolVersion"]` and
//!   `…/clientCapabilities` (missing → -32602); an unsupported version → -32022
//!   `Unsupported protocol version` with `data {supported, requested}` (every version we
//!   speak, so a legacy-capable client knows to fall back). `server/discover` answers
//!   `supportedVersions: ["2026-07-28"]`, `capabilities`, `instructions` and
//!   `_meta["io.modelcontextprotocol/serverInfo"]`, after calling `session_info` like
//!   `initialize` does. Every result carries `resultType: "complete"` and, once the app
//!   version is known, `_meta` serverInfo; `server/discover` and `tools/list` carry the
//!   required cache hints `ttlMs` and `cacheScope: "public"` (the catalogue is the same
//!   for every caller).
//!   `subscriptions/listen` (`basic/patterns/subscriptions`) honours `toolsListChanged`:
//!   the answer is `notifications/subscriptions/acknowledged` tagged with
//!   `_meta["io.modelcontextprotocol/subscriptionId"]` (the request's id), the stream
//!   stays open until `notifications/cancelled` names it. Not used: MRTR
//!   (`input_required`), logging.
//!   `ping`, removed in 2026-07-28, is still answered so probing clients get no error.
//! - **Both eras**: `tools/list` lists exactly the operations `session_info` names now
//!   (asked on each list; no `browser_*` while browser control is off). While a client
//!   listens (legacy: after `initialize`; modern: an open listen stream), the stdio loop
//!   asks `session_info` at most every [`TOOLS_CHECK_EVERY`] and, when its operations
//!   changed since the client's last list, sends `notifications/tools/list_changed`
//!   (on a modern stream tagged with its subscription id). One page; a cursor is -32602 `Invalid cursor`;
//!   `tools/call` → the host's `{operation: name, args: arguments ?? {}}`; `ok:false` →
//!   `isError: true` with the error text and no `structuredContent`; a value with a
//!   string `image` (a `browser_screenshot`) → image content (`image/png` unless a data
//!   URL says otherwise), its other fields (if any) as text content; other values → text
//!   content with the JSON. Unknown tool or non-object `arguments` → -32602. Unknown
//!   method → -32601; unparsable line or invalid UTF-8 → -32700; not a request object
//!   (incl. batches, `jsonrpc` not "2.0", an id that is not a string or a number) →
//!   -32600; a line over 256 KiB → -32600 and it is skipped. Ids are echoed
//!   exactly (0, negative, fractional, strings). `params._meta` (progress tokens, client
//!   thread ids, trace context) is accepted on any request. Responses sent by the client
//!   are ignored (this server sends no requests). Requests are handled one at a time, in
//!   order, so a `notifications/cancelled` always arrives after its request finished and
//!   is ignored; no progress notifications are sent.
//! - **Structured results** (2025-06-18 and later, both eras): every tool lists the
//!   catalogue's `outputSchema` ([`ToolSpec::output_schema`]), and every successful call
//!   carries `structuredContent` conforming to it, always an object (the spec: a tool
//!   that declares `outputSchema` must answer with conforming `structuredContent`): an
//!   object answer as it is; a list (`canvas_list`, `browser_list`) or any other
//!   non-object as `{"result": value}`; an image answer as its fields other than the
//!   image (`{}` for `browser_screenshot`, whose picture is only in the image content,
//!   not repeated as base64 in JSON). The text content is the same as before 2025-06-18,
//!   for clients that ignore `structuredContent`.

use std::io::{self, BufRead, ErrorKind, Write};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::protocol::{find_tool, guide, ToolResult, ToolSpec, AGENT_TOOLS, IMAGE_KEY, RESULT_KEY};

/// Protocol versions served statelessly with per-request `_meta` (newest first).
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// Protocol versions reachable through `initialize` (newest first).
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Every known revision, oldest to newest, for "at least" comparisons.
const KNOWN_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// Lines longer than this (bytes, without the newline) are answered with an error and skipped.
pub const MAX_LINE_BYTES: usize = 256 * 1024;

/// `serverInfo.name`.
pub const SERVER_NAME: &str = "termsprawl";

const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// How often, at most, the stdio loop asks `session_info` whether the tool list changed
/// (only while a client listens).
pub const TOOLS_CHECK_EVERY: Duration = Duration::from_secs(5);

/// `ttlMs` of cacheable results: the catalogue changes only with this binary.
const CACHE_TTL_MS: u64 = 60 * 60 * 1000;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Calls one operation on the host. A connection failure comes back as `ok:false` with
/// the `Tool connection unavailable: …` text.
pub trait ToolHost {
    /// Forwards `{operation, args}` once.
    fn call(&mut self, operation: &str, args: &Map<String, Value>) -> ToolResult;
}

impl<F: FnMut(&str, &Map<String, Value>) -> ToolResult> ToolHost for F {
    fn call(&mut self, operation: &str, args: &Map<String, Value>) -> ToolResult {
        self(operation, args)
    }
}

/// The era and version one request is served under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Era {
    Legacy(&'static str),
    Modern(&'static str),
}

impl Era {
    fn version(self) -> &'static str {
        match self {
            Era::Legacy(v) | Era::Modern(v) => v,
        }
    }
}

/// A JSON-RPC error on its way out.
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }
}

/// Whether `version` is a known revision at least as new as `minimum`.
fn at_least(version: &str, minimum: &str) -> bool {
    let index = |v: &str| KNOWN_VERSIONS.iter().position(|k| *k == v);
    matches!((index(version), index(minimum)), (Some(a), Some(b)) if a >= b)
}

/// The MCP server state of one stdio process.
#[derive(Debug, Default)]
pub struct McpServer {
    legacy_version: Option<&'static str>,
    app_version: Option<String>,
    /// The operations `session_info` last named (None: not known yet).
    operations: Option<Vec<String>>,
    /// The operations the client was last shown (`tools/list`, or a change notified).
    announced: Option<Vec<String>>,
    /// Ids of the open 2026-07-28 `subscriptions/listen` streams that asked for
    /// `toolsListChanged`.
    listeners: Vec<Value>,
}

impl McpServer {
    /// A server that has seen no `initialize` yet.
    pub fn new() -> Self {
        McpServer::default()
    }

    /// The legacy version `initialize` negotiated, if any.
    pub fn negotiated_version(&self) -> Option<&'static str> {
        self.legacy_version
    }

    /// Handles one input line (without its newline); returns the reply line, if any.
    /// Never panics, whatever the line holds.
    pub fn handle_line(&mut self, line: &[u8], host: &mut dyn ToolHost) -> Option<String> {
        if line.len() > MAX_LINE_BYTES {
            return Some(error_reply(
                Value::Null,
                RpcError::new(
                    INVALID_REQUEST,
                    format!("Message larger than {MAX_LINE_BYTES} bytes; it was skipped"),
                ),
            ));
        }
        let line = line.trim_ascii();
        if line.is_empty() {
            return None;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(message) => self.handle_message(message, host),
            Err(error) => Some(error_reply(
                Value::Null,
                RpcError::new(PARSE_ERROR, format!("Parse error: {error}")),
            )),
        }
    }

    fn handle_message(&mut self, message: Value, host: &mut dyn ToolHost) -> Option<String> {
        let Value::Object(object) = message else {
            let text = if message.is_array() {
                "Invalid Request: batches are not supported; send one message per line"
            } else {
                "Invalid Request: expected a JSON-RPC request object"
            };
            return Some(error_reply(
                Value::Null,
                RpcError::new(INVALID_REQUEST, text),
            ));
        };
        let id = object.get("id");
        let echo_id = match id {
            Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
            _ => None,
        };
        let invalid = |text: &str| {
            Some(error_reply(
                echo_id.clone().unwrap_or(Value::Null),
                RpcError::new(INVALID_REQUEST, format!("Invalid Request: {text}")),
            ))
        };
        let Some(method) = object.get("method") else {
            if id.is_some() && (object.contains_key("result") || object.contains_key("error")) {
                return None; // a response; this server sends no requests
            }
            return invalid("no method");
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return invalid("jsonrpc must be \"2.0\"");
        }
        let Some(method) = method.as_str() else {
            return invalid("method must be a string");
        };
        // Without an id it is a notification, never answered (initialized, cancelled, …).
        if id.is_none() {
            if method == "notifications/cancelled" {
                self.cancelled(object.get("params"));
            }
            return None;
        }
        let Some(id) = echo_id.clone() else {
            return invalid("id must be a string or a number");
        };
        let params = match object.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(_) => {
                return Some(error_reply(
                    id,
                    RpcError::invalid_params("params must be an object"),
                ))
            }
        };
        if method == "subscriptions/listen" {
            return Some(match self.listen(&id, &params) {
                Ok(acknowledgement) => acknowledgement,
                Err(error) => error_reply(id, error),
            });
        }
        Some(match self.request(method, &params, host) {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string(),
            Err(error) => error_reply(id, error),
        })
    }

    fn request(
        &mut self,
        method: &str,
        params: &Map<String, Value>,
        host: &mut dyn ToolHost,
    ) -> Result<Value, RpcError> {
        if method == "initialize" {
            return self.initialize(params, host);
        }
        if !matches!(
            method,
            "ping" | "server/discover" | "tools/list" | "tools/call"
        ) {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            ));
        }
        let era = self.era(method, params)?;
        match method {
            "ping" => Ok(self.finish(era, json!({}), false)),
            "server/discover" => self.discover(era, host),
            "tools/list" => self.tools_list(era, params, host),
            _ => self.tools_call(era, params, host),
        }
    }

    /// Which era serves this request: the per-request `_meta` version, else the legacy
    /// version `initialize` negotiated.
    fn era(&self, method: &str, params: &Map<String, Value>) -> Result<Era, RpcError> {
        let meta = match params.get("_meta") {
            None | Some(Value::Null) => None,
            Some(Value::Object(meta)) => Some(meta),
            Some(_) => return Err(RpcError::invalid_params("_meta must be an object")),
        };
        match meta.and_then(|m| m.get(PROTOCOL_VERSION_KEY)) {
            Some(Value::String(requested)) => {
                if let Some(modern) = MODERN_VERSIONS.iter().find(|v| **v == requested) {
                    return match meta.and_then(|m| m.get(CLIENT_CAPABILITIES_KEY)) {
                        Some(Value::Object(_)) => Ok(Era::Modern(modern)),
                        _ => Err(RpcError::invalid_params(format!(
                            "Missing _meta {CLIENT_CAPABILITIES_KEY} (required on every {modern} request)"
                        ))),
                    };
                }
                match self.legacy_version {
                    Some(legacy) if legacy == requested => Ok(Era::Legacy(legacy)),
                    _ => Err(unsupported_version(requested)),
                }
            }
            Some(_) => Err(RpcError::invalid_params(format!(
                "_meta {PROTOCOL_VERSION_KEY} must be a string"
            ))),
            None => match self.legacy_version {
                Some(legacy) => Ok(Era::Legacy(legacy)),
                None if method == "ping" => Ok(Era::Legacy(LEGACY_VERSIONS[0])),
                None => Err(RpcError::invalid_params(format!(
                    "Missing _meta {PROTOCOL_VERSION_KEY}: name the protocol version on each request ({}) or send initialize first ({} and earlier)",
                    MODERN_VERSIONS[0], LEGACY_VERSIONS[0]
                ))),
            },
        }
    }

    fn initialize(
        &mut self,
        params: &Map<String, Value>,
        host: &mut dyn ToolHost,
    ) -> Result<Value, RpcError> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("initialize needs params.protocolVersion"))?;
        let version = LEGACY_VERSIONS
            .iter()
            .find(|v| **v == requested)
            .copied()
            .unwrap_or(LEGACY_VERSIONS[0]);
        self.session_info(host)?;
        self.legacy_version = Some(version);
        let mut server_info = self.server_info();
        if at_least(version, "2025-06-18") {
            server_info["title"] = json!("Termsprawl");
        }
        Ok(json!({
            "protocolVersion": version,
            "capabilities": capabilities(),
            "serverInfo": server_info,
            "instructions": instructions(),
        }))
    }

    fn discover(&mut self, era: Era, host: &mut dyn ToolHost) -> Result<Value, RpcError> {
        if let Era::Legacy(_) = era {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!(
                    "server/discover is a {} method; name that version in _meta",
                    MODERN_VERSIONS[0]
                ),
            ));
        }
        self.session_info(host)?;
        let result = json!({
            "supportedVersions": MODERN_VERSIONS,
            "capabilities": capabilities(),
            "instructions": instructions(),
        });
        Ok(self.finish(era, result, true))
    }

    /// The tools this session may call now: `session_info`'s operations (asked afresh;
    /// the last known ones, else the whole catalogue, when the host cannot answer).
    fn tools_list(
        &mut self,
        era: Era,
        params: &Map<String, Value>,
        host: &mut dyn ToolHost,
    ) -> Result<Value, RpcError> {
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(RpcError::invalid_params(
                "Invalid cursor: tools/list has a single page",
            ));
        }
        let _ = self.session_info(host);
        self.announced = self.operations.clone();
        let version = era.version();
        let allowed = |tool: &&ToolSpec| {
            self.operations
                .as_ref()
                .map_or(true, |ops| ops.iter().any(|op| op == tool.name))
        };
        let tools: Vec<Value> = AGENT_TOOLS
            .iter()
            .filter(allowed)
            .map(|t| tool_json(t, version))
            .collect();
        // Not cacheable for long: the list follows the session (see `check_tools`).
        Ok(self.finish(era, json!({ "tools": tools }), true))
    }

    /// `subscriptions/listen` (2026-07-28): acknowledges `toolsListChanged` (the only
    /// list this server has) and keeps the stream open until the client cancels it.
    fn listen(&mut self, id: &Value, params: &Map<String, Value>) -> Result<String, RpcError> {
        let era = self.era("subscriptions/listen", params)?;
        if let Era::Legacy(_) = era {
            return Err(RpcError::new(
                METHOD_NOT_FOUND,
                "subscriptions/listen is a 2026-07-28 method; name that version in _meta",
            ));
        }
        let wants_tools = params
            .get("notifications")
            .and_then(|n| n.get("toolsListChanged"))
            .and_then(Value::as_bool)
            == Some(true);
        let mut honoured = Map::new();
        if wants_tools {
            honoured.insert("toolsListChanged".into(), json!(true));
            if !self.listeners.contains(id) {
                self.listeners.push(id.clone());
            }
        }
        Ok(json!({
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": { "notifications": honoured, "_meta": { SUBSCRIPTION_ID_KEY: id } },
        })
        .to_string())
    }

    /// `notifications/cancelled` for an open listen stream closes it.
    fn cancelled(&mut self, params: Option<&Value>) {
        if let Some(request) = params.and_then(|p| p.get("requestId")) {
            self.listeners.retain(|id| id != request);
        }
    }

    /// True while someone would hear of a tool list change: a legacy client after
    /// `initialize`, or an open 2026-07-28 listen stream.
    pub fn has_listeners(&self) -> bool {
        self.legacy_version.is_some() || !self.listeners.is_empty()
    }

    /// Asks `session_info` whether the operations changed since the client was last
    /// shown them; if so, the `notifications/tools/list_changed` lines to send (one for
    /// a legacy client, one per 2026-07-28 listen stream, tagged with its id).
    pub fn check_tools(&mut self, host: &mut dyn ToolHost) -> Vec<String> {
        if !self.has_listeners() || self.session_info(host).is_err() {
            return Vec::new();
        }
        if self.operations == self.announced {
            return Vec::new();
        }
        let first_look = self.announced.is_none();
        self.announced = self.operations.clone();
        if first_look {
            return Vec::new();
        }
        let method = "notifications/tools/list_changed";
        let mut lines = Vec::new();
        if self.legacy_version.is_some() {
            lines.push(json!({ "jsonrpc": "2.0", "method": method }).to_string());
        }
        for id in &self.listeners {
            let params = json!({ "_meta": { SUBSCRIPTION_ID_KEY: id } });
            lines.push(json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string());
        }
        lines
    }

    fn tools_call(
        &mut self,
        era: Era,
        params: &Map<String, Value>,
        host: &mut dyn ToolHost,
    ) -> Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("tools/call needs params.name"))?;
        let tool = find_tool(name)
            .ok_or_else(|| RpcError::invalid_params(format!("Unknown tool: {name}")))?;
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(_) => {
                return Err(RpcError::invalid_params(format!(
                    "Invalid arguments for tool {name}: arguments must be an object"
                )))
            }
        };
        let result = host.call(tool.name, &args);
        if let (ToolResult::Ok(value), "session_info") = (&result, tool.name) {
            self.note_app_version(value);
        }
        Ok(self.finish(era, call_result(result, era), false))
    }

    /// Calls `session_info`; its failure is the request's failure.
    fn session_info(&mut self, host: &mut dyn ToolHost) -> Result<Value, RpcError> {
        match host.call("session_info", &Map::new()) {
            ToolResult::Ok(value) => {
                self.note_app_version(&value);
                Ok(value)
            }
            ToolResult::Err(error) => Err(RpcError::new(INTERNAL_ERROR, error)),
        }
    }

    /// Remembers the app version and the operations a `session_info` answer names.
    fn note_app_version(&mut self, session_info: &Value) {
        let version = session_info
            .get("appVersion")
            .and_then(Value::as_str)
            .unwrap_or("development");
        self.app_version = Some(version.to_string());
        if let Some(operations) = session_info.get("operations").and_then(Value::as_array) {
            let names = operations
                .iter()
                .filter_map(Value::as_str)
                .map(String::from);
            self.operations = Some(names.collect());
        }
    }

    fn server_info(&self) -> Value {
        json!({
            "name": SERVER_NAME,
            "version": self.app_version.as_deref().unwrap_or("development"),
        })
    }

    /// Adds what a 2026-07-28 result must carry; legacy results stay as they are.
    fn finish(&self, era: Era, mut result: Value, cacheable: bool) -> Value {
        if let Era::Modern(_) = era {
            result["resultType"] = json!("complete");
            if cacheable {
                result["ttlMs"] = json!(CACHE_TTL_MS);
                result["cacheScope"] = json!("public");
            }
            if self.app_version.is_some() {
                result["_meta"] = json!({ SERVER_INFO_KEY: self.server_info() });
            }
        }
        result
    }
}

/// Both eras: tools, whose list changes with the session (`check_tools`).
fn capabilities() -> Value {
    json!({ "tools": { "listChanged": true } })
}

fn instructions() -> &'static str {
    guide("overview").unwrap_or_default()
}

fn unsupported_version(requested: &str) -> RpcError {
    let supported: Vec<&str> = MODERN_VERSIONS
        .iter()
        .chain(LEGACY_VERSIONS)
        .copied()
        .collect();
    RpcError {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        message: "Unsupported protocol version".to_string(),
        data: Some(json!({ "supported": supported, "requested": requested })),
    }
}

/// A catalogue entry in the shape `version` defines.
fn tool_json(tool: &ToolSpec, version: &str) -> Value {
    let mut entry = tool.to_json();
    if let Some(fields) = entry.as_object_mut() {
        if !at_least(version, "2025-06-18") {
            fields.remove("title");
            fields.remove("outputSchema");
        }
        if !at_least(version, "2025-03-26") {
            fields.remove("annotations");
        }
    }
    entry
}

/// Whether `era` has `outputSchema` and `structuredContent` (2025-06-18 and later).
fn has_structured_results(era: Era) -> bool {
    at_least(era.version(), "2025-06-18")
}

/// The `tools/call` result for a host answer. Where the era has structured results, a
/// success carries `structuredContent`, always an object: an object answer as it is,
/// an image answer's other fields, anything else as `{"result": value}`.
fn call_result(result: ToolResult, era: Era) -> Value {
    let value = match result {
        ToolResult::Err(error) => {
            return json!({ "content": [{ "type": "text", "text": error }], "isError": true })
        }
        ToolResult::Ok(value) => value,
    };
    let (content, structured) = match image_of(&value) {
        Some((data, mime_type, rest)) => {
            let mut content = vec![json!({ "type": "image", "data": data, "mimeType": mime_type })];
            if !rest.is_empty() {
                content.push(
                    json!({ "type": "text", "text": Value::Object(rest.clone()).to_string() }),
                );
            }
            (content, Value::Object(rest))
        }
        None => {
            let content = vec![json!({ "type": "text", "text": value.to_string() })];
            let structured = match value {
                Value::Object(_) => value,
                other => json!({ RESULT_KEY: other }),
            };
            (content, structured)
        }
    };
    let mut result = json!({ "content": content, "isError": false });
    if has_structured_results(era) {
        result["structuredContent"] = structured;
    }
    result
}

/// `(base64 data, MIME type, other fields)` when `value` is `{image: …}`.
fn image_of(value: &Value) -> Option<(String, String, Map<String, Value>)> {
    let object = value.as_object()?;
    let image = object.get(IMAGE_KEY)?.as_str()?;
    let (mime_type, data) = match image.strip_prefix("data:") {
        Some(url) => {
            let (mime_type, data) = url.split_once(";base64,")?;
            (mime_type.to_string(), data.to_string())
        }
        None => ("image/png".to_string(), image.to_string()),
    };
    let mut rest = object.clone();
    rest.remove(IMAGE_KEY);
    Some((data, mime_type, rest))
}

fn error_reply(id: Value, error: RpcError) -> String {
    let mut body = json!({ "code": error.code, "message": error.message });
    if let Some(data) = error.data {
        body["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": body }).to_string()
}

/// Reads one line of at most `limit` bytes (plus one, so an overlong line is recognisable);
/// the rest of an overlong line is consumed and dropped. `None` at EOF.
pub fn read_bounded_line<R: BufRead>(input: &mut R, limit: usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut read_any = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(read_any.then_some(line));
        }
        read_any = true;
        let newline = available.iter().position(|b| *b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        let room = (limit + 1).saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let consumed = newline.map_or(available.len(), |i| i + 1);
        input.consume(consumed);
        if newline.is_some() {
            return Ok(Some(line));
        }
    }
}

/// Serves MCP on `input`/`output` until EOF. Each reply is written as one line and
/// flushed. Lines are read on a thread of their own, so that while a client listens the
/// tool list is checked every [`TOOLS_CHECK_EVERY`] even when no request comes.
pub fn serve<R: BufRead + Send + 'static, W: Write>(
    mut input: R,
    mut output: W,
    host: &mut dyn ToolHost,
) -> io::Result<()> {
    let (lines, incoming) = mpsc::channel::<io::Result<Vec<u8>>>();
    thread::Builder::new()
        .name("mcp-stdin".into())
        .spawn(move || loop {
            let line = read_bounded_line(&mut input, MAX_LINE_BYTES).transpose();
            let done = !matches!(line, Some(Ok(_)));
            if let Some(line) = line {
                if lines.send(line).is_err() {
                    return;
                }
            }
            if done {
                return;
            }
        })?;
    let mut server = McpServer::new();
    let mut checked = Instant::now();
    let write = |output: &mut W, line: &str| -> io::Result<()> {
        output.write_all(line.as_bytes())?;
        output.write_all(b"\n")?;
        output.flush()
    };
    loop {
        let wait = TOOLS_CHECK_EVERY.saturating_sub(checked.elapsed());
        match incoming.recv_timeout(wait) {
            Ok(line) => {
                if let Some(reply) = server.handle_line(&line?, host) {
                    write(&mut output, &reply)?;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // EOF: the client is gone.
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
        if checked.elapsed() >= TOOLS_CHECK_EVERY {
            checked = Instant::now();
            for notification in server.check_tools(host) {
                write(&mut output, &notification)?;
            }
        }
    }
}

#[cfg(test)]
mod tests;
