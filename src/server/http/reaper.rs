//! The reaper thread: what happens to connections without a call in flight.
//!
//! tiny_http reads request headers with no timeout and keeps a thread and two
//! descriptors per open connection, with no upper bound. A reaper thread therefore looks
//! at our connections every [`REAP_EVERY`]: one with no call in flight that has been
//! quiet (no complete request since it connected or since its last answer) for
//! [`REQUEST_DEADLINE`] is ended, which cuts header slowloris, a TLS preface and idle
//! keep-alive alike (a head past 64 KiB or 100 header lines is cut at once by the patched
//! tiny_http, `vendor/tiny_http/PATCHES.md`); and when more than [`QUIET_CONNECTIONS_MAX`] are quiet,
//! the longest-quiet ones beyond that are ended, so threads and descriptors fall back
//! within one period after a flood of idle connections. Once no connection has been
//! open for [`TRIM_AFTER`], it hands the heap the burst freed back to the OS. Its scan
//! of all connections is also what `can_write_now` knows their descriptors from.
//!
//! tiny_http's connection pool can also leave a connection with no thread at all after
//! a burst of new connections; its request then sits unread on the socket and never
//! reaches us. The same scan finds such connections and gets each a thread by opening
//! a throw-away connection to ourselves (`unserved` says how, and why no call is cut).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use super::body::error_body;
use super::{
    Front, On, FORGET_ENDED_AFTER, QUIET_CONNECTIONS_MAX, REAP_EVERY, REQUEST_DEADLINE, TRIM_AFTER,
};
use crate::base::sockets::{self, Connection};
use crate::server::unserved::{self, NotReached, Unserved};
use crate::server::{lock_or_recover, ANSWER_TIMEOUT_ERROR};
use crate::sys::process::release_free_heap;

/// The reaper (module docs), which each round also answers the queued calls left
/// unanswered for `Clock::answer_wait` ([`answer_overdue`]).
pub(super) fn reap_loop(front: &Arc<Front>, stopping: &AtomicBool) {
    let (in_order, local) = (&front.in_order, front.local);
    // When the reaper first saw each connection (an estimate of when it connected).
    let mut seen: HashMap<SocketAddr, Instant> = HashMap::new();
    let mut unserved = Unserved::default();
    // Since when no connection has been open, and whether the heap was trimmed since.
    let (mut closed_since, mut trimmed) = (None::<Instant>, true);
    loop {
        // `Http::stop` unparks it: a stop does not wait out the period.
        thread::park_timeout(REAP_EVERY);
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        answer_overdue(front);
        let now = Instant::now();
        if !front.known.searching() {
            // Blind to connections: forget by age; "idle" is no call for TRIM_AFTER.
            let recent = |at: Instant| now.duration_since(at) < FORGET_ENDED_AFTER;
            lock_or_recover(&in_order.ended).retain(|_, at| recent(*at));
            lock_or_recover(&in_order.answered).retain(|_, (at, _)| recent(*at));
            let busy = !lock_or_recover(&in_order.waiting).is_empty()
                || lock_or_recover(&in_order.answered)
                    .values()
                    .any(|(at, _)| now.duration_since(*at) < TRIM_AFTER);
            trim_after_a_burst(front, busy, now, &mut closed_since, &mut trimmed);
            continue;
        }
        // A failed scan (no descriptor left to read /proc with) knows nothing: skip it.
        let Some(open) = front.known.open_connections(local) else {
            continue;
        };
        let busy = !open.is_empty();
        trim_after_a_burst(front, busy, now, &mut closed_since, &mut trimmed);
        // Entries made since the scan began are kept: their connection may be newer.
        let current = |peer: &SocketAddr, at: Instant| open.contains_key(peer) || at >= now;
        seen.retain(|peer, _| open.contains_key(peer));
        lock_or_recover(&in_order.answered).retain(|peer, (at, _)| current(peer, *at));
        lock_or_recover(&in_order.ended).retain(|peer, at| current(peer, *at));
        front.known.remember(&open);
        let mut quiet: Vec<(Instant, Connection)> = Vec::new();
        for (peer, connection) in &open {
            let first_seen = *seen.entry(*peer).or_insert(now);
            if in_order.in_flight(peer) {
                continue;
            }
            let answered = lock_or_recover(&in_order.answered)
                .get(peer)
                .map(|(at, _)| *at);
            quiet.push((answered.unwrap_or(first_seen).max(first_seen), *connection));
        }
        quiet.sort_by_key(|(since, _)| *since);
        let over_cap = quiet.len().saturating_sub(QUIET_CONNECTIONS_MAX);
        for (n, (since, connection)) in quiet.into_iter().enumerate() {
            if n < over_cap || now.saturating_duration_since(since) >= REQUEST_DEADLINE {
                connection.end();
            }
        }
        give_threads(front, &open, &seen, &mut unserved, now);
    }
}

/// Trims the heap once nothing has been `busy` for [`TRIM_AFTER`] (once per quiet spell),
/// unless the embedder turned that off.
fn trim_after_a_burst(
    front: &Front,
    busy: bool,
    now: Instant,
    quiet_since: &mut Option<Instant>,
    trimmed: &mut bool,
) {
    if busy {
        (*quiet_since, *trimmed) = (None, false);
    } else if !*trimmed && now.duration_since(*quiet_since.get_or_insert(now)) >= TRIM_AFTER {
        // glibc keeps freed memory in its arenas: without this the resident size stays
        // near its peak after a burst of calls has gone.
        if front.trim_heap {
            release_free_heap();
        }
        *trimmed = true;
    }
}

/// Gives a tiny_http thread to each connection it accepted but runs on none
/// (`unserved`): finds the connections that have not reached us, looks again after
/// [`unserved::RECHECK_AFTER`] at those with unread bytes, and makes the kicks due.
pub(super) fn give_threads(
    front: &Front,
    open: &HashMap<SocketAddr, Connection>,
    seen: &HashMap<SocketAddr, Instant>,
    unserved: &mut Unserved,
    now: Instant,
) {
    let in_order = &front.in_order;
    unserved.forget_closed_kicks(now, |kick| open.contains_key(kick));
    let mut not_reached: Vec<(NotReached, Connection)> = open
        .iter()
        .filter(|(peer, _)| !in_order.reached(peer))
        .map(|(peer, connection)| {
            let waiting = NotReached {
                peer: *peer,
                first_seen: seen.get(peer).copied().unwrap_or(now),
                unread: connection.has_unread_bytes(),
            };
            (waiting, *connection)
        })
        .collect();
    if not_reached.iter().any(|(c, _)| c.unread) {
        thread::sleep(unserved::RECHECK_AFTER);
        not_reached.retain(|(waiting, _)| !in_order.reached(&waiting.peer));
        for (waiting, connection) in &mut not_reached {
            waiting.unread = waiting.unread && connection.has_unread_bytes();
        }
    }
    let not_reached: Vec<NotReached> = not_reached.into_iter().map(|(c, _)| c).collect();
    for _ in 0..unserved.kicks(now, &not_reached) {
        match sockets::kick(front.local) {
            Some(kick) => unserved.made(kick, Instant::now()),
            // The listen backlog is full: tiny_http's accept thread is behind and
            // will start threads as it catches up.
            None => break,
        }
    }
}

/// Answers each queued call whose operation has not finished within the answer wait:
/// its outcome is unknown (the operation may still run; its result is then dropped).
pub(super) fn answer_overdue(front: &Arc<Front>) {
    let Some(owner) = front.owner.upgrade() else {
        return;
    };
    for request in front.queued.take_overdue() {
        let answer = (400, error_body(ANSWER_TIMEOUT_ERROR));
        let next = front.finish(&owner, request, answer, true, On::SharedThread);
        front.drive(&owner, next, On::SharedThread);
    }
}
