//! Reading a request's body under the deadline.
//!
//! A request answered before its body was read to the end is dropped with the rest
//! unread: the patched tiny_http (`vendor/tiny_http/PATCHES.md`) then reads none of it
//! and ends the connection after the answer, whatever length was declared (`Front::finish`
//! also shuts the read side, for a chunked body).

use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
use std::time::{Duration, Instant};

use serde_json::json;
use tiny_http::Request;

use super::{EAGER_BODY_BYTES, READ_SLICE};
use crate::base::sockets::Connection;
use crate::protocol::limits::MAX_BODY_BYTES;

/// Why a request is refused: its answer's status and message.
pub(super) type Refusal = (u16, &'static str);
const TOO_LARGE: Refusal = (400, "Request too large");
const TIMED_OUT: Refusal = (408, "Request did not arrive within 15 s; send it again");
const BROKEN: Refusal = (400, "Request body could not be read");
pub(super) const NOT_JSON: Refusal = (
    400,
    "Request body is not JSON; send {\"operation\":…,\"args\":{…}}",
);

/// The body tiny_http already holds in memory (at most [`EAGER_BODY_BYTES`]): no
/// deadline and no read buffer needed.
pub(super) fn read_memory_body(request: &mut Request) -> Result<Vec<u8>, Refusal> {
    let mut body = Vec::with_capacity(request.body_length().unwrap_or(0).min(EAGER_BODY_BYTES));
    match request.as_reader().read_to_end(&mut body) {
        Ok(_) if body.len() > MAX_BODY_BYTES => Err(TOO_LARGE),
        Ok(_) => Ok(body),
        Err(_) => Err(BROKEN),
    }
}

/// The body still on the socket, read under `deadline`.
pub(super) fn read_body(
    request: &mut Request,
    connection: Option<Connection>,
    deadline: Instant,
) -> Result<Vec<u8>, Refusal> {
    let mut body = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    // Each read blocks at most `READ_SLICE` (set once), then the final slice is set to
    // end exactly at the deadline: two `setsockopt`s per body, not one per read.
    let mut slice_set: Option<Duration> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(TIMED_OUT);
        }
        let slice = left.min(READ_SLICE);
        let stale = slice_set.map_or(true, |set| set == READ_SLICE && slice < READ_SLICE);
        if let (true, Some(connection)) = (stale, connection) {
            connection
                .set_read_timeout(Some(slice))
                .map_err(|_| BROKEN)?;
            slice_set = Some(slice);
        }
        match request.as_reader().read(&mut chunk) {
            Ok(0) => return Ok(body),
            Ok(n) if body.len() + n > MAX_BODY_BYTES => return Err(TOO_LARGE),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            // A read slice ended (or a signal came): check the deadline and go on.
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => {}
            Err(_) => return Err(BROKEN),
        }
    }
}

pub(super) fn error_body(message: &str) -> Vec<u8> {
    json!({ "ok": false, "error": message })
        .to_string()
        .into_bytes()
}
