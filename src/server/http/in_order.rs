//! One call in flight per connection, and the calls waiting behind it.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Instant;

use super::{Call, ANSWER_OVERHEAD, WAITING_CALLS_MAX};
use crate::server::lock_or_recover;

/// What [`InOrder::admit`] decided for a call. (Returned once per call and matched at
/// once: boxing the large variant would only add an allocation per call.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Admitted {
    /// Nothing else of its connection is in flight: run it now.
    Run(Call),
    /// It waits behind its connection's call in flight.
    Parked,
    /// Drop these unrun. Dropping a `Request` makes tiny_http write a 500 once the
    /// connection's call in flight is answered, so it is done on a handler.
    Drop(Vec<Call>),
}

/// One call in flight per connection. tiny_http parses a connection's pipelined
/// requests with small bodies before their answers are written (each answer then waits
/// for the one before), so without this one connection could occupy any number of
/// handler threads. Calls waiting here hold no socket I/O, only memory tiny_http had
/// already spent on them.
#[derive(Default)]
pub(super) struct InOrder {
    pub(super) waiting: Mutex<HashMap<SocketAddr, VecDeque<Call>>>,
    /// Each connection answered at least once: when last (for the reaper), and the bytes
    /// written to it since its send queue was last seen empty, each answer counted
    /// [`ANSWER_OVERHEAD`] over its body (`Front::can_write_now`).
    pub(super) answered: Mutex<HashMap<SocketAddr, (Instant, usize)>>,
    /// Connections ended (for pipelining past the cap, or answered before their body was
    /// read), and when: calls tiny_http still delivers for them are dropped, never run
    /// (the reaper forgets them once they are gone).
    pub(super) ended: Mutex<HashMap<SocketAddr, Instant>>,
}

impl InOrder {
    /// Returns `call` to run now, or parks it behind its connection's call in flight;
    /// past [`WAITING_CALLS_MAX`] it counts the connection ended and gives back its waiting
    /// calls, this one and any later one, to be dropped unrun and their connection ended
    /// (the call in flight finishes; its answer fails).
    pub(super) fn admit(&self, call: Call) -> Admitted {
        let Some(peer) = call.request.remote_addr().copied() else {
            return Admitted::Run(call);
        };
        let mut dropped = VecDeque::new();
        if !lock_or_recover(&self.ended).contains_key(&peer) {
            match lock_or_recover(&self.waiting).entry(peer) {
                Entry::Occupied(queue) if queue.get().len() >= WAITING_CALLS_MAX => {
                    dropped = queue.remove();
                }
                Entry::Occupied(mut queue) => {
                    queue.get_mut().push_back(call);
                    return Admitted::Parked;
                }
                Entry::Vacant(none) => {
                    none.insert(VecDeque::new());
                    return Admitted::Run(call);
                }
            }
            lock_or_recover(&self.ended).insert(peer, Instant::now());
        }
        Admitted::Drop(dropped.into_iter().chain([call]).collect())
    }

    /// Drops the calls waiting behind a connection that was ended (their bodies are in
    /// memory, and tiny_http's answer to each fails at once on the closed socket).
    pub(super) fn discard(&self, peer: Option<SocketAddr>) {
        let Some(peer) = peer else { return };
        let dropped = lock_or_recover(&self.waiting).remove(&peer);
        drop(dropped);
    }

    /// The connection's next call, once the one in flight is answered with `written`
    /// bytes of body; `None` when there is none (then nothing is in flight).
    pub(super) fn next(&self, peer: Option<SocketAddr>, written: usize) -> Option<Call> {
        let peer = peer?;
        let mut answered = lock_or_recover(&self.answered);
        let (at, unchecked) = answered.entry(peer).or_insert((Instant::now(), 0));
        (*at, *unchecked) = (Instant::now(), *unchecked + written + ANSWER_OVERHEAD);
        drop(answered);
        let mut waiting = lock_or_recover(&self.waiting);
        let Entry::Occupied(mut queue) = waiting.entry(peer) else {
            return None;
        };
        let next = queue.get_mut().pop_front();
        if next.is_none() {
            queue.remove();
        }
        next
    }

    /// The bytes counted as written to `peer` since its send queue was last seen empty
    /// (`None`: never answered); `seen_empty` first sets the count to 0.
    pub(super) fn unchecked(&self, peer: &SocketAddr, seen_empty: bool) -> Option<usize> {
        let mut answered = lock_or_recover(&self.answered);
        let (_, unchecked) = answered.get_mut(peer)?;
        *unchecked = if seen_empty { 0 } else { *unchecked };
        Some(*unchecked)
    }

    pub(super) fn in_flight(&self, peer: &SocketAddr) -> bool {
        lock_or_recover(&self.waiting).contains_key(peer)
    }

    /// True once any request of the connection from `peer` has reached us: one is in
    /// flight, one was answered, or the connection was ended for pipelining.
    pub(super) fn reached(&self, peer: &SocketAddr) -> bool {
        self.in_flight(peer)
            || self.unchecked(peer, false).is_some()
            || lock_or_recover(&self.ended).contains_key(peer)
    }
}
