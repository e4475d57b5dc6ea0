//! Connections tiny_http accepted but gives no thread, and how the reaper gets them one.
//!
//! tiny_http 0.12 runs each connection, for its whole life, as one task of its pool. A
//! new connection gets a new thread only when no pool thread counts as waiting;
//! otherwise it is queued and one waiting thread is woken. A woken thread still counts
//! as waiting until it runs, so on a busy CPU the accept thread can queue a whole burst
//! while only the few idle threads take from it; the rest wait until some connection
//! closes (with idle keep-alive connections holding threads, up to the 15 s quiet cut).
//! The request of such a connection sits unread in its receive queue.
//!
//! The reaper finds them: a connection none of whose requests has reached us (no call in
//! flight, none answered, not ended) with unread bytes (`SIOCINQ`) at one scan and again
//! [`RECHECK_AFTER`] later. (A pool thread serving a connection reads its bytes as they
//! arrive, unless it is starved of CPU for that long; a kick then costs an idle thread,
//! nothing else.) For each, it makes one "kick" ([`sockets::kick`]): a connection to our
//! own listener, closed at once. While the pool has no waiting thread, which is always so
//! while a task waits in its queue for longer than a thread takes to wake, tiny_http starts
//! a new thread for the kick; the kick ends at once (end-of-file) and that thread then
//! takes the oldest queued connection. So each kick gives one queued connection a thread.
//!
//! A kick may go to a connection queued ahead that has sent nothing yet. So when
//! connections wait unread, every connection the reaper saw before the newest of them that
//! has not reached us either (it may be queued ahead) gets one kick too, once. A connection
//! that stays unread is kicked again at doubling intervals (from [`REKICK_FIRST`]): a kick
//! can be taken by a thread that was already about to run, so their number must stay
//! small (6 in the 15 s until such a connection is cut as quiet). Our own kicks are never
//! kicked for.
//!
//! Why this is sound: a kick touches no client's connection, so no call is cut, lost or
//! answered twice, and the accept thread is not involved. The reaper waits for nothing
//! but its own loopback connect (bounded by a short timeout). The cost is a tiny_http
//! thread per kick, which (idle) exits after 5 s: at most one per connection, plus the
//! few re-kicks.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A connection found with unread bytes is looked at again after this long: if its
/// bytes are still unread, no thread serves it.
pub const RECHECK_AFTER: Duration = Duration::from_millis(50);
/// A connection still unread this long after its first kick is kicked again; each
/// further wait doubles.
pub const REKICK_FIRST: Duration = Duration::from_millis(250);

/// A kick not yet accepted by tiny_http after this long is taken as gone.
const KICK_ACCEPTED_WITHIN: Duration = Duration::from_secs(1);

/// A connection of ours none of whose requests has reached us.
pub struct NotReached {
    pub peer: SocketAddr,
    /// When the reaper first saw it.
    pub first_seen: Instant,
    /// Unread bytes at both looks ([`RECHECK_AFTER`] apart).
    pub unread: bool,
}

/// What the reaper remembers between scans to decide how many kicks to make.
#[derive(Default)]
pub struct Unserved {
    /// Connections found unread: kicks made for each so far, and when the last was.
    unread: HashMap<SocketAddr, (u32, Instant)>,
    /// Connections kicked for once as possibly queued ahead of an unread one.
    ahead: HashSet<SocketAddr>,
    /// The peer addresses of our own kicks, with when each was made.
    own: HashMap<SocketAddr, Instant>,
}

impl Unserved {
    /// How many kicks to make now, given every connection that has not reached us
    /// (module docs); forgets the connections not among them (served or closed).
    pub fn kicks(&mut self, now: Instant, not_reached: &[NotReached]) -> usize {
        let present: HashSet<SocketAddr> = not_reached.iter().map(|c| c.peer).collect();
        self.unread.retain(|peer, _| present.contains(peer));
        self.ahead.retain(|peer| present.contains(peer));
        let clients: Vec<&NotReached> = not_reached
            .iter()
            .filter(|c| !self.own.contains_key(&c.peer))
            .collect();
        let mut kicks = 0;
        let mut newest_unread: Option<Instant> = None;
        for connection in clients.iter().filter(|c| c.unread) {
            newest_unread = newest_unread.max(Some(connection.first_seen));
            let (made, last) = self
                .unread
                .get(&connection.peer)
                .copied()
                .unwrap_or((0, now));
            // Kicked before: again once twice the last wait has passed.
            let wait = REKICK_FIRST.saturating_mul(1 << made.saturating_sub(1).min(16));
            if made == 0 || now.saturating_duration_since(last) >= wait {
                self.unread.insert(connection.peer, (made + 1, now));
                kicks += 1;
            }
        }
        if let Some(newest) = newest_unread {
            for connection in clients
                .iter()
                .filter(|c| !c.unread && c.first_seen < newest)
            {
                if self.ahead.insert(connection.peer) {
                    kicks += 1;
                }
            }
        }
        kicks
    }

    /// Records one of our own kicks (its address, as tiny_http sees the peer), made `at`.
    pub fn made(&mut self, kick: SocketAddr, at: Instant) {
        self.own.insert(kick, at);
    }

    /// Forgets our own kicks that are gone: not `open` at a scan made at `now`, and
    /// made at least [`KICK_ACCEPTED_WITHIN`] before it (so not still waiting in the
    /// listen backlog, where a scan cannot see them).
    pub fn forget_closed_kicks(&mut self, now: Instant, open: impl Fn(&SocketAddr) -> bool) {
        self.own.retain(|kick, made| {
            open(kick) || now.saturating_duration_since(*made) < KICK_ACCEPTED_WITHIN
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn conn(port: u16, first_seen: Instant, unread: bool) -> NotReached {
        NotReached {
            peer: peer(port),
            first_seen,
            unread,
        }
    }

    #[test]
    fn each_unread_connection_gets_one_kick() {
        let mut unserved = Unserved::default();
        let t0 = Instant::now();
        let burst: Vec<NotReached> = (1..=60).map(|p| conn(p, t0, true)).collect();
        assert_eq!(unserved.kicks(t0, &burst), 60);
        // Still unread a scan later, before the re-kick wait: nothing more.
        assert_eq!(unserved.kicks(t0 + Duration::from_millis(100), &burst), 0);
        // Served meanwhile (no longer listed), then a new one arrives: only that one.
        let later = [conn(61, t0, true)];
        assert_eq!(unserved.kicks(t0 + Duration::from_millis(200), &later), 1);
    }

    #[test]
    fn a_connection_that_stays_unread_is_kicked_at_doubling_intervals() {
        let mut unserved = Unserved::default();
        let t0 = Instant::now();
        let stuck = [conn(1, t0, true)];
        let mut kicked_at = Vec::new();
        let mut at = t0;
        while at < t0 + Duration::from_secs(15) {
            if unserved.kicks(at, &stuck) > 0 {
                kicked_at.push(at.duration_since(t0).as_millis());
            }
            at += Duration::from_millis(250);
        }
        assert_eq!(kicked_at, [0, 250, 750, 1750, 3750, 7750]);
    }

    #[test]
    fn silent_connections_seen_before_an_unread_one_are_kicked_once() {
        let mut unserved = Unserved::default();
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(250);
        let scan = [
            conn(1, t0, false), // seen before the unread one: may be queued ahead of it
            conn(2, t1, true),
            conn(3, t1, false), // seen with it: not ahead
        ];
        assert_eq!(unserved.kicks(t1, &scan), 2);
        let t2 = t1 + Duration::from_millis(250);
        assert_eq!(unserved.kicks(t2, &scan), 1, "only the unread one, again");
        // Silent connections alone never cause kicks.
        let mut fresh = Unserved::default();
        assert_eq!(
            fresh.kicks(t2, &[conn(1, t0, false), conn(3, t1, false)]),
            0
        );
    }

    #[test]
    fn our_own_kicks_are_never_kicked_for() {
        let mut unserved = Unserved::default();
        let t0 = Instant::now();
        unserved.made(peer(9), t0);
        let t1 = t0 + Duration::from_millis(250);
        // A kick still queued, seen before an unread connection.
        let scan = [conn(9, t0, false), conn(2, t1, true)];
        assert_eq!(unserved.kicks(t1, &scan), 1);
        // Not seen at a scan right after it was made: maybe not accepted yet, kept.
        unserved.forget_closed_kicks(t1, |_| false);
        assert_eq!(unserved.own.len(), 1);
        unserved.forget_closed_kicks(t0 + KICK_ACCEPTED_WITHIN, |_| false);
        assert!(unserved.own.is_empty());
    }
}
