//! What a page said and what it fetched, for `browser_console` and `browser_network`:
//! two bounded rings per page, kept from Chromium's events on the reader thread
//! (`Runtime.consoleAPICalled`, `Runtime.exceptionThrown`, `Log.entryAdded`, `Network.*`)
//! across navigations, each entry with the document it came from.
//!
//! Bounds, per page: the last [`MESSAGES_KEPT`] messages, each cut to [`MESSAGE_CHARS`]
//! characters with at most [`STACK_FRAMES`] stack frames; the last [`REQUESTS_KEPT`]
//! requests, each URL cut to [`URL_CHARS`] characters, at most [`HEADERS_KEPT`] headers a
//! side, each cut to [`HEADER_CHARS`], and a request body's first [`BODY_CHARS`]. So a
//! page that logs without end costs at most a few MiB.
//!
//! Everything in them is page content, untrusted: every string is cut and escaped
//! ([`cut_escaped`]: controls, bidi and invisible characters shown as `\u202e`
//! and the like) before it is kept, and credentials in headers are never kept
//! ([`is_credential`]).
//!
//! Reading: every entry has a number in the order it came; an answer lists the entries
//! after `since` (0: all kept), gives the `cursor` to pass next time, says how many after
//! `since` were pushed out of the ring (`lost`) and, when `maxChars` is too small for
//! all, keeps the newest and says how many older ones it left out (`omitted`).

use std::collections::VecDeque;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::cdp::CdpError;
use super::{BrowserEngine, EngineError, PageId};
use crate::base::terminal_text::cut_escaped;
use crate::protocol::CONSOLE_LEVELS;

/// Console messages kept per page.
pub const MESSAGES_KEPT: usize = 1_000;
/// A message's text is cut to this many characters.
pub const MESSAGE_CHARS: usize = 1_000;
/// Stack frames kept of an exception or `console.error`.
pub const STACK_FRAMES: usize = 3;
/// Requests kept per page.
pub const REQUESTS_KEPT: usize = 500;
/// A request's URL (and a message's source URL) is cut to this many characters.
pub const URL_CHARS: usize = 2_000;
/// Headers kept per request, each side.
pub const HEADERS_KEPT: usize = 60;
/// A header's value is cut to this many characters.
pub const HEADER_CHARS: usize = 1_000;
/// A request's or response's body is shown up to this many characters.
pub const BODY_CHARS: usize = 4_000;
/// A list answer's size when `maxChars` is not given.
pub const LIST_DEFAULT_CHARS: usize = 8_000;

/// Header names whose values are credentials: shown as redacted, never kept.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "set-cookie2",
];
/// Parts of header names that mark a credential too (`X-Api-Key`, `X-Auth-Token`,
/// `X-CSRF-Token`, `X-Session-Id`, …).
const CREDENTIAL_PARTS: &[&str] = &[
    "auth", "token", "secret", "key", "session", "csrf", "xsrf", "password", "cookie",
];

/// Whether a header named `name` carries a credential (its value is not kept).
pub fn is_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    CREDENTIAL_HEADERS.contains(&name.as_str())
        || CREDENTIAL_PARTS.iter().any(|part| name.contains(part))
}

/// `text` cut to `max` characters (an ellipsis marks a cut) and escaped, as kept.
fn clean(text: &str, max: usize) -> String {
    cut_escaped(text, max).into_owned()
}

/// One console message.
#[derive(Debug, Clone)]
struct Message {
    number: u64,
    level: &'static str,
    /// `console`, `exception`, or the `Log` domain's source (`network`, `security`, …).
    source: String,
    text: String,
    /// Where it was logged or thrown: `url:line:column`.
    at: Option<String>,
    stack: Vec<String>,
    /// The page's document when it came.
    page: String,
}

impl Message {
    fn to_json(&self) -> Value {
        let mut entry = json!({
            "n": self.number,
            "level": self.level,
            "source": self.source,
            "text": self.text,
            "page": self.page,
        });
        if let Some(at) = &self.at {
            entry["at"] = json!(at);
        }
        if !self.stack.is_empty() {
            entry["stack"] = json!(self.stack);
        }
        entry
    }
}

/// A page's console: the last [`MESSAGES_KEPT`] messages.
#[derive(Debug, Default)]
pub struct ConsoleLog {
    messages: VecDeque<Message>,
    /// Messages ever seen (the newest one's number).
    seen: u64,
}

/// `url:line:column` of a stack frame (0-based line and column, shown 1-based).
fn frame_text(frame: &Value) -> String {
    let url = frame["url"].as_str().unwrap_or_default();
    let line = frame["lineNumber"].as_u64().unwrap_or(0) + 1;
    let column = frame["columnNumber"].as_u64().unwrap_or(0) + 1;
    let place = clean(&format!("{url}:{line}:{column}"), URL_CHARS);
    match frame["functionName"].as_str().filter(|f| !f.is_empty()) {
        Some(function) => format!("{} ({place})", clean(function, 200)),
        None => place,
    }
}

/// A remote object (a console argument) as text: a primitive's value, else its
/// description (`Array(3)`, `Error: boom\n    at …`, `{a: 1}` from its preview).
fn object_text(object: &Value) -> String {
    match &object["value"] {
        Value::String(text) => return text.clone(),
        Value::Null | Value::Object(_) | Value::Array(_) => {}
        value => return value.to_string(),
    }
    if let Some(text) = object["unserializableValue"].as_str() {
        return text.to_string();
    }
    if object["type"] == "undefined" {
        return "undefined".into();
    }
    if object["subtype"] == "null" {
        return "null".into();
    }
    if let Some(properties) = object["preview"]["properties"].as_array() {
        if object["subtype"] != "error" {
            let shown: Vec<String> = properties
                .iter()
                .map(|p| {
                    let value = p["value"].as_str().unwrap_or_default();
                    match p["type"].as_str() {
                        Some("string") => {
                            format!("{}: {:?}", p["name"].as_str().unwrap_or_default(), value)
                        }
                        _ => format!("{}: {value}", p["name"].as_str().unwrap_or_default()),
                    }
                })
                .collect();
            let more = if object["preview"]["overflow"] == true {
                ", …"
            } else {
                ""
            };
            return match object["subtype"].as_str() {
                Some("array") => format!("[{}{more}]", shown.join(", ")),
                _ => format!("{{{}{more}}}", shown.join(", ")),
            };
        }
    }
    object["description"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

impl ConsoleLog {
    fn push(
        &mut self,
        level: &'static str,
        source: &str,
        text: &str,
        at: Option<String>,
        stack: Vec<String>,
        page: &str,
    ) {
        self.seen += 1;
        if self.messages.len() >= MESSAGES_KEPT {
            self.messages.pop_front();
        }
        self.messages.push_back(Message {
            number: self.seen,
            level,
            source: clean(source, 40),
            text: clean(text, MESSAGE_CHARS),
            at,
            stack,
            page: clean(page, URL_CHARS),
        });
    }

    /// Takes in an event that may be a message; `page` is the current document's URL.
    pub fn on_event(&mut self, method: &str, params: &Value, page: &str) {
        match method {
            "Runtime.consoleAPICalled" => {
                let level = match params["type"].as_str().unwrap_or_default() {
                    "debug" => "debug",
                    "info" => "info",
                    "warning" => "warning",
                    "error" | "assert" => "error",
                    _ => "log",
                };
                let args = params["args"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let mut text = String::new();
                for object in args {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(&object_text(object));
                    if text.len() > MESSAGE_CHARS * 4 {
                        break; // enough to cut from
                    }
                }
                let frames = params["stackTrace"]["callFrames"].as_array();
                let frames = frames.map(Vec::as_slice).unwrap_or_default();
                let at = frames.first().map(frame_text);
                let stack = match level {
                    "error" | "warning" => {
                        frames.iter().take(STACK_FRAMES).map(frame_text).collect()
                    }
                    _ => Vec::new(),
                };
                self.push(level, "console", &text, at, stack, page);
            }
            "Runtime.exceptionThrown" => {
                let details = &params["exceptionDetails"];
                let description = details["exception"]["description"].as_str();
                // The description starts with the message and goes on with the stack:
                // keep its first line, the frames come from the stack trace.
                let text = match description.and_then(|d| d.lines().next()) {
                    Some(first) => format!("Uncaught {first}"),
                    None => details["text"]
                        .as_str()
                        .unwrap_or("Uncaught exception")
                        .to_string(),
                };
                let frames = details["stackTrace"]["callFrames"].as_array();
                let frames = frames.map(Vec::as_slice).unwrap_or_default();
                let at = match frames.first() {
                    Some(frame) => Some(frame_text(frame)),
                    None => details["url"].as_str().map(|_| frame_text(details)),
                };
                let stack = frames.iter().take(STACK_FRAMES).map(frame_text).collect();
                self.push("error", "exception", &text, at, stack, page);
            }
            "Log.entryAdded" => {
                let entry = &params["entry"];
                let level = match entry["level"].as_str().unwrap_or_default() {
                    "verbose" => "debug",
                    "warning" => "warning",
                    "error" => "error",
                    _ => "info",
                };
                let at = entry["url"].as_str().map(|url| clean(url, URL_CHARS));
                let source = entry["source"].as_str().unwrap_or("other");
                let text = entry["text"].as_str().unwrap_or_default();
                self.push(level, source, text, at, Vec::new(), page);
            }
            _ => {}
        }
    }

    /// The answer of `browser_console`: messages after `since` at one of `levels` (all
    /// when `None`), newest kept within `max_chars`.
    pub fn answer(&self, since: u64, levels: Option<&[String]>, max_chars: usize) -> Value {
        let oldest = self.messages.front().map_or(self.seen + 1, |m| m.number);
        let chosen = self
            .messages
            .iter()
            .filter(|m| m.number > since)
            .filter(|m| levels.map_or(true, |levels| levels.iter().any(|l| l == m.level)))
            .map(Message::to_json);
        let (messages, omitted) = newest_within(chosen.collect(), max_chars);
        let mut answer = Map::new();
        answer.insert("messages".into(), Value::Array(messages));
        answer.insert("cursor".into(), json!(self.seen));
        answer.insert(
            "lost".into(),
            json!(oldest.saturating_sub(since.saturating_add(1))),
        );
        answer.insert("omitted".into(), json!(omitted));
        Value::Object(answer)
    }
}

/// The newest of `entries` (oldest first) whose JSON fits in `max_chars` together, and
/// how many older ones were left out.
fn newest_within(mut entries: Vec<Value>, max_chars: usize) -> (Vec<Value>, usize) {
    let mut used = 2; // the list's brackets
    let mut kept = 0;
    for entry in entries.iter().rev() {
        let size = entry.to_string().chars().count() + 1;
        if used + size > max_chars {
            break;
        }
        used += size;
        kept += 1;
    }
    let omitted = entries.len() - kept;
    entries.drain(..omitted);
    (entries, omitted)
}

/// One request a page made (a redirect's hops are one entry each).
#[derive(Debug, Clone)]
pub struct Request {
    number: u64,
    /// Chromium's request id (the `requestId` an agent passes back).
    pub id: String,
    /// The session that saw it: the page's, or a frame's in another process.
    pub session: String,
    method: String,
    url: String,
    kind: String,
    started: Instant,
    ended: Option<Instant>,
    status: Option<i64>,
    status_text: String,
    /// The response's MIME type.
    pub mime: String,
    bytes: Option<u64>,
    failure: Option<String>,
    request_headers: Vec<(String, String)>,
    response_headers: Vec<(String, String)>,
    /// The request's body, if it had one: its start, or `None` when Chromium did not
    /// send it with the event (then it is asked for when the request is read).
    pub post_data: Option<(String, usize)>,
    /// It had a body.
    pub has_post_data: bool,
    page: String,
}

/// Headers as kept: credentials redacted, values cut.
fn headers_of(headers: &Value) -> Vec<(String, String)> {
    let Some(headers) = headers.as_object() else {
        return Vec::new();
    };
    headers
        .iter()
        .take(HEADERS_KEPT)
        .map(|(name, value)| {
            let value = value.as_str().unwrap_or_default();
            let shown = match is_credential(name) {
                true => format!("[redacted: {} characters]", value.chars().count()),
                false => clean(value, HEADER_CHARS),
            };
            (clean(name, 200), shown)
        })
        .collect()
}

fn headers_json(headers: &[(String, String)]) -> Value {
    let list = headers
        .iter()
        .map(|(name, value)| json!({ "name": name, "value": value }));
    Value::Array(list.collect())
}

impl Request {
    fn state(&self) -> &'static str {
        match (&self.failure, self.ended, self.status) {
            (Some(_), _, _) => "failed",
            (None, Some(_), _) => "done",
            (None, None, Some(_)) => "receiving",
            (None, None, None) => "pending",
        }
    }

    fn failed(&self) -> bool {
        self.failure.is_some() || self.status.is_some_and(|status| status >= 400)
    }

    /// The request as a list shows it.
    fn to_json(&self) -> Value {
        let mut entry = json!({
            "requestId": self.id,
            "n": self.number,
            "method": self.method,
            "url": self.url,
            "type": self.kind,
            "state": self.state(),
        });
        if let Some(status) = self.status {
            entry["status"] = json!(status);
        }
        if let Some(failure) = &self.failure {
            entry["failure"] = json!(failure);
        }
        if let Some(ended) = self.ended {
            let duration = ended.saturating_duration_since(self.started).as_millis();
            entry["durationMs"] = json!(duration as u64);
        }
        if let Some(bytes) = self.bytes {
            entry["bytes"] = json!(bytes);
        }
        if !self.mime.is_empty() {
            entry["mimeType"] = json!(self.mime);
        }
        entry
    }

    /// The request with its headers (and the body fields the caller adds).
    pub fn detail(&self) -> Value {
        let mut entry = self.to_json();
        entry["statusText"] = json!(self.status_text);
        entry["page"] = json!(self.page);
        entry["requestHeaders"] = headers_json(&self.request_headers);
        entry["responseHeaders"] = headers_json(&self.response_headers);
        entry
    }
}

/// A body as an answer shows it: text (cut to [`BODY_CHARS`], escaped) or, for binary
/// data, what it is. `body` is as Chromium gives it (`base64` when binary).
pub fn body_fields(body: &str, base64: bool, mime: &str) -> (Value, Option<String>) {
    body_fields_of(body, body.chars().count(), base64, mime)
}

/// [`body_fields`] of a body of `chars` characters in all, whose start is `body`.
fn body_fields_of(body: &str, chars: usize, base64: bool, mime: &str) -> (Value, Option<String>) {
    if base64 {
        let bytes = body.len() / 4 * 3;
        let note = format!("binary body of about {bytes} bytes ({mime}): not shown");
        return (Value::Null, Some(note));
    }
    let mut text = clean(body, BODY_CHARS);
    if chars > BODY_CHARS && !text.ends_with('…') {
        text.push('…'); // `body` was cut before it came here
    }
    let note =
        (chars > BODY_CHARS).then(|| format!("the first {BODY_CHARS} of {chars} characters"));
    (json!(text), note)
}

/// A page's requests: the last [`REQUESTS_KEPT`].
#[derive(Debug, Default)]
pub struct NetworkLog {
    requests: VecDeque<Request>,
    /// Requests ever seen (the newest one's number).
    seen: u64,
}

impl NetworkLog {
    /// The newest entry of Chromium's request `id` (a redirect's last hop).
    fn newest_mut(&mut self, id: &str) -> Option<&mut Request> {
        self.requests.iter_mut().rev().find(|r| r.id == id)
    }

    /// The newest entry of Chromium's request `id`.
    pub fn request(&self, id: &str) -> Option<&Request> {
        self.requests.iter().rev().find(|r| r.id == id)
    }

    /// Takes in an event of `session` that may be about a request; `page` is the current
    /// document's URL.
    pub fn on_event(&mut self, session: &str, method: &str, params: &Value, page: &str) {
        let id = params["requestId"].as_str().unwrap_or_default();
        let now = Instant::now();
        match method {
            "Network.requestWillBeSent" => {
                let redirect = &params["redirectResponse"];
                if redirect.is_object() {
                    if let Some(hop) = self.newest_mut(id) {
                        hop.status = redirect["status"].as_i64();
                        hop.status_text =
                            clean(redirect["statusText"].as_str().unwrap_or_default(), 200);
                        hop.response_headers = headers_of(&redirect["headers"]);
                        hop.ended = Some(now);
                    }
                }
                let request = &params["request"];
                self.seen += 1;
                if self.requests.len() >= REQUESTS_KEPT {
                    self.requests.pop_front();
                }
                let text = |value: &Value, max| clean(value.as_str().unwrap_or_default(), max);
                self.requests.push_back(Request {
                    number: self.seen,
                    id: clean(id, 200),
                    session: session.to_string(),
                    method: text(&request["method"], 20),
                    url: text(&request["url"], URL_CHARS),
                    kind: text(&params["type"], 40),
                    started: now,
                    ended: None,
                    status: None,
                    status_text: String::new(),
                    mime: String::new(),
                    bytes: None,
                    failure: None,
                    request_headers: headers_of(&request["headers"]),
                    response_headers: Vec::new(),
                    post_data: request["postData"].as_str().map(|body| {
                        (
                            body.chars().take(BODY_CHARS).collect(),
                            body.chars().count(),
                        )
                    }),
                    has_post_data: request["hasPostData"] == true,
                    page: clean(page, URL_CHARS),
                });
            }
            "Network.responseReceived" => {
                if let Some(request) = self.newest_mut(id) {
                    let response = &params["response"];
                    request.status = response["status"].as_i64();
                    request.status_text =
                        clean(response["statusText"].as_str().unwrap_or_default(), 200);
                    request.mime = clean(response["mimeType"].as_str().unwrap_or_default(), 100);
                    request.response_headers = headers_of(&response["headers"]);
                }
            }
            "Network.loadingFinished" => {
                if let Some(request) = self.newest_mut(id) {
                    request.ended = Some(now);
                    request.bytes = params["encodedDataLength"].as_f64().map(|b| b as u64);
                }
            }
            "Network.loadingFailed" => {
                if let Some(request) = self.newest_mut(id) {
                    request.ended = Some(now);
                    let mut failure = params["errorText"].as_str().unwrap_or("failed").to_string();
                    if params["canceled"] == true {
                        failure.push_str(" (canceled)");
                    }
                    if let Some(reason) = params["blockedReason"].as_str() {
                        failure = format!("{failure} (blocked: {reason})");
                    }
                    request.failure = Some(clean(&failure, 300));
                }
            }
            _ => {}
        }
    }

    /// The answer of `browser_network` without a `requestId`: requests that started after
    /// `since`, whose URL contains `url_contains`, only failed ones (a failure or a status
    /// of 400 or more) with `failed_only`; newest kept within `max_chars`.
    pub fn answer(
        &self,
        since: u64,
        url_contains: Option<&str>,
        failed_only: bool,
        max_chars: usize,
    ) -> Value {
        let oldest = self.requests.front().map_or(self.seen + 1, |r| r.number);
        let chosen = self
            .requests
            .iter()
            .filter(|r| r.number > since)
            .filter(|r| url_contains.map_or(true, |part| r.url.contains(part)))
            .filter(|r| !failed_only || r.failed())
            .map(Request::to_json);
        let (requests, omitted) = newest_within(chosen.collect(), max_chars);
        json!({
            "requests": requests,
            "cursor": self.seen,
            "lost": oldest.saturating_sub(since.saturating_add(1)),
            "omitted": omitted,
        })
    }
}

/// `maxChars` of a list call, or [`LIST_DEFAULT_CHARS`].
fn max_chars(args: &Map<String, Value>) -> usize {
    let given = args.get("maxChars").and_then(Value::as_u64);
    given.map_or(LIST_DEFAULT_CHARS, |max| {
        usize::try_from(max).unwrap_or(usize::MAX)
    })
}

impl BrowserEngine {
    /// `browser_console {since?, levels?, maxChars?}` (see the module docs).
    pub(super) fn console(
        &self,
        page: &PageId,
        args: &Map<String, Value>,
        deadline: Instant,
    ) -> Result<Value, EngineError> {
        let since = args.get("since").and_then(Value::as_u64).unwrap_or(0);
        let levels: Option<Vec<String>> =
            args.get("levels").and_then(Value::as_array).map(|levels| {
                levels
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            });
        if let Some(unknown) = levels
            .iter()
            .flatten()
            .find(|l| !CONSOLE_LEVELS.contains(&l.as_str()))
        {
            return Err(EngineError::Page(format!(
                "Unknown console level {:?}: use {}",
                unknown.chars().take(40).collect::<String>(),
                CONSOLE_LEVELS.join(", ")
            )));
        }
        self.on_page(page, deadline, |_, _| Ok(()))?;
        let answer = |activity: &super::activity::Activity| {
            activity
                .console
                .answer(since, levels.as_deref(), max_chars(args))
        };
        self.shared
            .activity(page, answer)
            .ok_or(EngineError::PageNotFound)
    }

    /// `browser_network {since?, urlContains?, failedOnly?, maxChars?}`, or with
    /// `requestId` one request with its headers and the start of its bodies.
    pub(super) fn network(
        &self,
        page: &PageId,
        args: &Map<String, Value>,
        deadline: Instant,
    ) -> Result<Value, EngineError> {
        let Some(id) = args.get("requestId").and_then(Value::as_str) else {
            let since = args.get("since").and_then(Value::as_u64).unwrap_or(0);
            let url_contains = args.get("urlContains").and_then(Value::as_str);
            let failed_only = args.get("failedOnly") == Some(&Value::Bool(true));
            self.on_page(page, deadline, |_, _| Ok(()))?;
            let answer = |activity: &super::activity::Activity| {
                activity
                    .network
                    .answer(since, url_contains, failed_only, max_chars(args))
            };
            return self
                .shared
                .activity(page, answer)
                .ok_or(EngineError::PageNotFound);
        };
        let request = self
            .shared
            .activity(page, |a| a.network.request(id).cloned())
            .flatten();
        let request = request.ok_or_else(|| {
            EngineError::Page(format!(
                "No request {:?} on this page: list them with browser_network (the last {REQUESTS_KEPT} are kept)",
                id.chars().take(100).collect::<String>()
            ))
        })?;
        self.on_page(page, deadline, |connection, _| {
            let mut detail = request.detail();
            let on = Some(request.session.as_str());
            let ask = |method: &str| {
                connection.call(method, json!({ "requestId": request.id }), on, deadline)
            };
            let sent = match (&request.post_data, request.has_post_data) {
                (Some(body), _) => Some(body.clone()),
                (None, true) => ask("Network.getRequestPostData").ok().and_then(|reply| {
                    let body = reply["postData"].as_str()?;
                    Some((
                        body.chars().take(BODY_CHARS).collect(),
                        body.chars().count(),
                    ))
                }),
                (None, false) => None,
            };
            if let Some((body, chars)) = sent {
                let (text, note) = body_fields_of(&body, chars, false, "");
                detail["requestBody"] = text;
                if let Some(note) = note {
                    detail["requestBodyNote"] = json!(note);
                }
            }
            match ask("Network.getResponseBody") {
                Ok(reply) => {
                    let body = reply["body"].as_str().unwrap_or_default();
                    let (text, note) =
                        body_fields(body, reply["base64Encoded"] == true, &request.mime);
                    detail["responseBody"] = text;
                    if let Some(note) = note {
                        detail["responseBodyNote"] = json!(note);
                    }
                }
                // No body yet, none at all (a redirect, a failure), or Chromium let it go.
                Err(CdpError::Protocol(why)) => {
                    let why: String = why.chars().take(200).collect();
                    detail["responseBodyNote"] = json!(format!("not available: {why}"));
                }
                Err(other) => return Err(other.into()),
            }
            Ok(json!({ "request": detail }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(text: &str) -> Value {
        json!({ "type": "log", "args": [{ "type": "string", "value": text }] })
    }

    #[test]
    fn the_console_keeps_the_newest_and_says_what_it_lost() {
        let mut console = ConsoleLog::default();
        for i in 0..(MESSAGES_KEPT + 10) {
            console.on_event(
                "Runtime.consoleAPICalled",
                &log(&format!("m{i}")),
                "http://a/",
            );
        }
        let all = console.answer(0, None, 10_000_000);
        assert_eq!(all["messages"].as_array().unwrap().len(), MESSAGES_KEPT);
        assert_eq!(all["lost"], 10);
        assert_eq!(all["cursor"], (MESSAGES_KEPT + 10) as u64);
        assert_eq!(all["messages"][0]["text"], "m10");
        let after = console.answer(MESSAGES_KEPT as u64 + 8, None, 10_000_000);
        let texts: Vec<_> = after["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["text"].clone())
            .collect();
        assert_eq!(
            texts,
            [
                json!(format!("m{}", MESSAGES_KEPT + 8)),
                json!(format!("m{}", MESSAGES_KEPT + 9))
            ]
        );
        assert_eq!(after["lost"], 0);
    }

    #[test]
    fn max_chars_keeps_the_newest_and_counts_the_rest() {
        let mut console = ConsoleLog::default();
        for i in 0..50 {
            console.on_event(
                "Runtime.consoleAPICalled",
                &log(&format!("message {i}")),
                "http://a/",
            );
        }
        let answer = console.answer(0, None, 500);
        assert!(answer["messages"].to_string().chars().count() <= 500);
        let kept = answer["messages"].as_array().unwrap();
        assert!(!kept.is_empty());
        assert_eq!(kept.last().unwrap()["text"], "message 49");
        assert_eq!(
            answer["omitted"].as_u64().unwrap() as usize + kept.len(),
            50
        );
    }

    #[test]
    fn levels_exceptions_and_hostile_text() {
        let mut console = ConsoleLog::default();
        let warn = json!({ "type": "warning", "args": [{ "type": "string", "value": "careful\u{202e}\u{1b}[2J" }],
            "stackTrace": { "callFrames": [{ "functionName": "f", "url": "http://a/app.js", "lineNumber": 9, "columnNumber": 4 }] } });
        console.on_event("Runtime.consoleAPICalled", &warn, "http://a/");
        let thrown = json!({ "exceptionDetails": { "text": "Uncaught", "exception": { "description": "Error: boom\n    at g (http://a/app.js:3:1)" },
            "stackTrace": { "callFrames": [{ "functionName": "g", "url": "http://a/app.js", "lineNumber": 2, "columnNumber": 0 }] } } });
        console.on_event("Runtime.exceptionThrown", &thrown, "http://a/");
        let failed = json!({ "entry": { "source": "network", "level": "error", "text": "Failed to load resource: 404", "url": "http://a/x.js" } });
        console.on_event("Log.entryAdded", &failed, "http://a/");
        let errors = console.answer(0, Some(&["error".to_string()]), 10_000);
        let errors = errors["messages"].as_array().unwrap();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0]["text"], "Uncaught Error: boom");
        assert_eq!(errors[0]["stack"][0], "g (http://a/app.js:3:1)");
        assert_eq!(errors[1]["source"], "network");
        let warning = &console.answer(0, Some(&["warning".to_string()]), 10_000)["messages"][0];
        assert_eq!(warning["text"], "careful\\u202e\\x1b[2J");
        assert_eq!(warning["at"], "f (http://a/app.js:10:5)");
    }

    #[test]
    fn requests_keep_status_failure_and_no_credentials() {
        let mut network = NetworkLog::default();
        let sent = |id: &str, url: &str| {
            json!({ "requestId": id, "type": "Fetch",
            "request": { "method": "GET", "url": url, "headers": { "Authorization": "Bearer s3cret", "Accept": "*/*", "X-Api-Key": "k" } } })
        };
        network.on_event(
            "S",
            "Network.requestWillBeSent",
            &sent("1", "http://a/api/missing"),
            "http://a/",
        );
        network.on_event("S", "Network.responseReceived",
            &json!({ "requestId": "1", "response": { "status": 404, "statusText": "Not Found", "mimeType": "application/json", "headers": { "Set-Cookie": "id=1" } } }), "http://a/");
        network.on_event(
            "S",
            "Network.loadingFinished",
            &json!({ "requestId": "1", "encodedDataLength": 120.0 }),
            "http://a/",
        );
        network.on_event(
            "S",
            "Network.requestWillBeSent",
            &sent("2", "http://a/ok"),
            "http://a/",
        );
        network.on_event(
            "S",
            "Network.requestWillBeSent",
            &sent("3", "http://down/"),
            "http://a/",
        );
        network.on_event(
            "S",
            "Network.loadingFailed",
            &json!({ "requestId": "3", "errorText": "net::ERR_CONNECTION_REFUSED" }),
            "http://a/",
        );
        let failed = network.answer(0, None, true, 10_000);
        let failed = failed["requests"].as_array().unwrap();
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0]["status"], 404);
        assert_eq!(failed[1]["failure"], "net::ERR_CONNECTION_REFUSED");
        assert_eq!(
            network.answer(0, Some("/ok"), false, 10_000)["requests"][0]["state"],
            "pending"
        );
        let detail = network.request("1").unwrap().detail().to_string();
        assert!(
            !detail.contains("s3cret") && !detail.contains("id=1") && !detail.contains("\"k\""),
            "{detail}"
        );
        assert!(detail.contains("[redacted: 13 characters]"), "{detail}");
        assert!(detail.contains("*/*"));
        assert_eq!(
            network.answer(2, None, false, 10_000)["requests"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn bodies_are_cut_and_binary_ones_described() {
        let (text, note) = body_fields(&"x".repeat(BODY_CHARS + 5), false, "text/plain");
        assert_eq!(text.as_str().unwrap().chars().count(), BODY_CHARS + 1);
        assert!(note.unwrap().contains("of 4005"));
        let (image, note) = body_fields("iVBORw0KGgo=", true, "image/png");
        assert_eq!(image, Value::Null);
        assert!(note.unwrap().contains("image/png"));
    }
}
