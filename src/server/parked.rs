//! Connections whose tiny_http thread is parked for good, and how their descriptors are
//! given back.
//!
//! A request we leak on purpose, one declaring a body over 64 MiB (`http::body`: tiny_http's
//! drop would allocate that length), parks its connection's tiny_http thread for good:
//! nothing but the end of the process frees it; `http::body` closes its descriptors at
//! once. (Release 0.12.0 also parked the thread of every `HTTP/2.0` or `HTTP/3.0` request
//! line; the patched copy in `vendor/tiny_http` answers those 505 and closes.)
//!
//! The reaper ends a connection that never reached us as it ends every quiet one (after
//! 15 s, or at once beyond the cap of quiet connections) and then watches its descriptors,
//! in case its thread was parked some other way: a thread that is not parked sees
//! end-of-file and closes them at once. Still open
//! [`SUSPECT_AFTER`] after the end, the connection counts as parked
//! (`AgentToolServer::parked_threads`, which `serve` restarts itself on past a
//! ceiling); still open [`CLOSE_AFTER`] after the end, long past any thread merely
//! waiting for the CPU, its descriptors are closed, each only while it still names the
//! same socket (same inode), so a number reused since is never touched.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// An ended connection whose descriptors are still open this long after counts as parked.
pub const SUSPECT_AFTER: Duration = Duration::from_secs(1);
/// An ended connection whose descriptors are still open this long after has them closed.
pub const CLOSE_AFTER: Duration = Duration::from_secs(15);

/// The ended connections being watched.
#[derive(Default)]
pub struct Parked {
    watched: Vec<Watched>,
}

struct Watched {
    ended: Instant,
    fds: Vec<RawFd>,
    socket: u64,
    counted: bool,
}

impl Parked {
    /// Watches the descriptors `fds` of socket `socket`, a connection that never reached
    /// us, ended at `ended`.
    pub fn watch(&mut self, ended: Instant, fds: Vec<RawFd>, socket: u64) {
        if !fds.is_empty() && !self.watched.iter().any(|w| w.socket == socket) {
            self.watched.push(Watched {
                ended,
                fds,
                socket,
                counted: false,
            });
        }
    }

    /// Looks at every watched connection: forgets those whose descriptors were closed
    /// (`names(fd, socket)` false for all), counts in `parked` those open past
    /// [`SUSPECT_AFTER`], and `close`s the descriptors of those open past [`CLOSE_AFTER`].
    pub fn look(
        &mut self,
        now: Instant,
        parked: &AtomicUsize,
        names: impl Fn(RawFd, u64) -> bool,
        mut close: impl FnMut(RawFd, u64),
    ) {
        self.watched.retain_mut(|watched| {
            watched.fds.retain(|fd| names(*fd, watched.socket));
            if watched.fds.is_empty() {
                return false;
            }
            let open_for = now.saturating_duration_since(watched.ended);
            if !watched.counted && open_for >= SUSPECT_AFTER {
                watched.counted = true;
                parked.fetch_add(1, Ordering::Relaxed);
            }
            if open_for < CLOSE_AFTER {
                return true;
            }
            for fd in &watched.fds {
                close(*fd, watched.socket);
            }
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::HashSet;

    #[test]
    fn a_thread_that_closes_is_never_counted_and_a_parked_one_is_counted_then_closed() {
        let start = Instant::now();
        let open: RefCell<HashSet<RawFd>> = RefCell::new([10, 11, 20, 21].into());
        let closed = RefCell::new(Vec::new());
        let parked = AtomicUsize::new(0);
        let mut watch = Parked::default();
        watch.watch(start, vec![10, 11], 1);
        watch.watch(start, vec![20, 21], 2);
        watch.watch(start, vec![20, 21], 2); // the same socket again: watched once
        let look = |watch: &mut Parked, at: Duration| {
            watch.look(
                start + at,
                &parked,
                |fd, _| open.borrow().contains(&fd),
                |fd, socket| closed.borrow_mut().push((fd, socket)),
            )
        };
        look(&mut watch, Duration::from_millis(250));
        assert_eq!(
            (watch.watched.len(), parked.load(Ordering::Relaxed)),
            (2, 0)
        );
        // Socket 1's thread saw end-of-file and closed both.
        open.borrow_mut().retain(|fd| *fd >= 20);
        look(&mut watch, SUSPECT_AFTER);
        assert_eq!(
            (watch.watched.len(), parked.load(Ordering::Relaxed)),
            (1, 1)
        );
        look(&mut watch, SUSPECT_AFTER * 2);
        assert_eq!(parked.load(Ordering::Relaxed), 1, "counted once");
        assert!(closed.borrow().is_empty());
        look(&mut watch, CLOSE_AFTER);
        assert_eq!(*closed.borrow(), vec![(20, 2), (21, 2)]);
        assert_eq!(watch.watched.len(), 0);
    }

    #[test]
    fn a_descriptor_that_no_longer_names_the_socket_is_not_closed() {
        let start = Instant::now();
        let parked = AtomicUsize::new(0);
        let mut watch = Parked::default();
        watch.watch(start, vec![30, 31], 3);
        let mut closed = Vec::new();
        // fd 31 was closed and its number reused by another socket.
        watch.look(
            start + CLOSE_AFTER,
            &parked,
            |fd, _| fd == 30,
            |fd, _| closed.push(fd),
        );
        assert_eq!(closed, vec![30]);
        assert_eq!(parked.load(Ordering::Relaxed), 1);
    }
}
