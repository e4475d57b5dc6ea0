//! The accept thread's checks of a request's head, in the spec's order (the parent
//! module's docs list them), and what it asks of a call before running it there.

use tiny_http::{Method, Request};

use super::{Call, Verdict, EAGER_BODY_BYTES};
use crate::messaging::a2a::Dialect;
use crate::protocol::limits::MAX_BODY_BYTES;
use crate::server::{connects_on_session_info, AgentToolServer};

pub(super) fn header<'r>(request: &'r Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// `hosts`: the only `Host` values accepted, `127.0.0.1:PORT` and `localhost:PORT` (the
/// latter in any case).
pub(super) fn check_headers(
    owner: &AgentToolServer,
    request: &Request,
    hosts: &[String; 2],
) -> Verdict {
    let upgrade =
        header(request, "Connection").is_some_and(|v| v.to_ascii_lowercase().contains("upgrade"));
    // `Sec-Fetch-Site` is sent only by browsers, and no browser page is a client of
    // ours: refused like `Origin`, as defence in depth for a browser that omits Origin.
    let post = *request.method() == Method::Post;
    let dialect = match *request.method() {
        Method::Post | Method::Get => {
            Dialect::of(post, request.url(), || header(request, "A2A-Version"))
        }
        _ => None,
    };
    let Some(dialect) = dialect.filter(|_| {
        header(request, "Origin").is_none()
            && header(request, "Sec-Fetch-Site").is_none()
            && !upgrade
    }) else {
        return Verdict::Refuse(403, "Unsupported request");
    };
    let [ip_host, name_host] = hosts;
    let host_ok = header(request, "Host")
        .is_some_and(|host| host == ip_host || host.eq_ignore_ascii_case(name_host));
    if !host_ok {
        return Verdict::Refuse(403, "Unsupported request");
    }
    // Both framings at once is the request-smuggling shape, and tiny_http 0.12 reads any
    // Transfer-Encoding as chunked (CVE-2026-66752): after `identity`, `chunked,
    // identity` or two such headers, the bytes past a `0` chunk would run as the next
    // request. Only one `chunked` is read; the rest is refused and, the body being on
    // the socket, the connection closes after the answer (RFC 9112 6.3).
    if header(request, "Transfer-Encoding").is_some()
        && (header(request, "Content-Length").is_some() || !chunked_only(request))
    {
        return Verdict::Refuse(400, "Unsupported request");
    }
    let token = header(request, "Authorization").and_then(|value| {
        let (scheme, token) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then_some(token.trim())
    });
    let Some(session) = token.and_then(|t| owner.authenticate(t)) else {
        return Verdict::Refuse(401, "Unknown or revoked session");
    };
    if request.body_length().is_some_and(|n| n > MAX_BODY_BYTES) {
        return Verdict::Refuse(400, "Request too large");
    }
    Verdict::Accept(session, dialect)
}

/// True when the request has exactly one `Transfer-Encoding` header and it is `chunked`.
pub(super) fn chunked_only(request: &Request) -> bool {
    let mut encodings = request
        .headers()
        .iter()
        .filter(|h| h.field.equiv("Transfer-Encoding"));
    let first = encodings.next();
    encodings.next().is_none()
        && first.is_some_and(|h| h.value.as_str().trim().eq_ignore_ascii_case("chunked"))
}

/// True when answering `call` writes to disk: a session's first `session_info` that
/// marks its MCP adapter connected.
pub(super) fn writes_status(call: &Call) -> bool {
    matches!(&call.verdict, Verdict::Accept(s, _) if connects_on_session_info(&s.status))
}

/// True when tiny_http has already read the whole body into memory (or there is none).
pub(super) fn body_in_memory(request: &Request) -> bool {
    header(request, "Expect").is_none()
        && header(request, "Transfer-Encoding").is_none()
        && header(request, "Connection")
            .map_or(true, |v| !v.to_ascii_lowercase().contains("upgrade"))
        && request
            .body_length()
            .map_or(true, |n| n <= EAGER_BODY_BYTES)
}
