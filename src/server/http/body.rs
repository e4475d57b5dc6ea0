//! Reading a request's body under the deadline, and what becomes of requests whose body
//! we stop reading.
//!
//! Before answering a request whose body is still partly unread on the socket, the
//! handler shuts the connection's read side, so tiny_http's drop sees end-of-file
//! instead of waiting for the rest; that connection then closes after the answer.
//! tiny_http's drop also allocates the unread remainder of a declared length in one
//! buffer (a length of 10^14 aborts the process), so for a declared length over
//! [`DROP_SAFE_BYTES`] the handler writes its answer itself, never drops the `Request`
//! and closes the connection's two descriptors (`sockets::close_leaked` says why that
//! is sound). That leaks one tiny_http thread, parked for good, and the request's few
//! hundred bytes per such request; tiny_http 0.12 offers no way to release them. (A
//! request tiny_http queues after `close()` has drained the queue is dropped by
//! tiny_http itself.)

use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use tiny_http::Request;

use super::{Front, DROP_SAFE_BYTES, EAGER_BODY_BYTES, READ_SLICE};
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

/// Drops `request`, unless tiny_http's drop would allocate its absurd unread length
/// (module docs): that one is leaked instead, as `Front::finish` does.
pub(super) fn drop_unless_huge(request: Request, front: &Front) {
    if request.body_length().unwrap_or(0) > DROP_SAFE_BYTES {
        leak(request, front, None);
    }
}

/// Leaks `request` without running tiny_http's drop (module docs), after answering
/// with the raw `answer`, if any, and closes its connection's descriptors (with the
/// descriptor search off, neither: the client gets no answer and the connection stays).
/// Its tiny_http thread is parked for good, and counted so (`server::parked`).
pub(super) fn leak(request: Request, front: &Front, answer: Option<&[u8]>) {
    let peer = request.remote_addr().copied();
    std::mem::forget(request);
    front.parked_threads.fetch_add(1, Ordering::Relaxed);
    if let Some(peer) = peer {
        front.known.close_leaked(front.local, peer, answer);
    }
}

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
