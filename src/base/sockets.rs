//! Reaching the sockets tiny_http owns.
//!
//! tiny_http 0.12 never hands out a connection's socket, sets no read timeout on it, and
//! reads a large body only when asked, from whichever thread asks. To read a body under
//! a deadline, to stop reading one we refuse, and to end connections at `close()`, we
//! find the connection's file descriptor ourselves: among this process's descriptors
//! (`/proc/self/fd`), the one connected from `peer` to our listening address. Each
//! connection's peer address is unique, and while we hold its `Request` tiny_http keeps
//! that descriptor open, so the match is the right socket. This is only done for the
//! rare request whose body tiny_http has not already read (over 1 KiB), by the reaper,
//! and at close.
//! [`KnownConnections`] remembers each connection's descriptor (the reaper refreshes it
//! from its scan of all of them), so the search runs at most once per connection, not
//! per request; a thread that must not block only ever asks it for a remembered one, to
//! see whether the connection's send queue is empty ([`Connection::send_queue_empty`]).
//!
//! The reaper also asks each connection none of whose requests has reached us whether
//! bytes wait unread on it ([`Connection::has_unread_bytes`], `SIOCINQ`), and opens
//! throw-away connections to our own listener ([`kick`]); `unserved` says why.
//!
//! The listener gets `SO_SNDTIMEO` before tiny_http takes it; Linux copies it to every
//! accepted socket, so writing a response to a client that never reads gives up after
//! [`WRITE_TIMEOUT`]. (`SO_RCVTIMEO` cannot be set the same way: `accept` would time
//! out too, and tiny_http's accept loop ends on its first error: `listening`.)

use std::collections::HashMap;
use std::fs;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

use super::lock_or_recover;
use crate::sys::fd::socket_inode as inode;
use crate::sys::socket::{tcp_state, unacknowledged_bytes, unread_bytes, with_socket};

/// How long writing one response may block on a client that does not read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// Sets `SO_SNDTIMEO` on the listener, inherited by the sockets it accepts.
pub fn set_listener_write_timeout(listener: &TcpListener) -> io::Result<()> {
    with_socket(listener.as_raw_fd(), |s| {
        s.set_write_timeout(Some(WRITE_TIMEOUT))
    })
}

/// Stops `listener` listening now (Linux: `shutdown` on a listening socket ends the
/// listen and wakes `accept`), though tiny_http's thread still holds its descriptor.
pub fn stop_listening(listener: &TcpListener) {
    let _ = with_socket(listener.as_raw_fd(), |s| s.shutdown(Shutdown::Read));
}

/// True while descriptor `fd` still names `listener`'s socket (same inode; a closed
/// descriptor, or its number reused for anything else, is not).
pub fn same_socket(fd: RawFd, listener: &TcpListener) -> bool {
    matches!((inode(fd), inode(listener.as_raw_fd())), (Some(a), Some(b)) if a == b)
}

/// One connection of ours, found by its addresses.
#[derive(Clone, Copy, Debug)]
pub struct Connection {
    fd: RawFd,
    local: SocketAddr,
    peer: SocketAddr,
}

impl Connection {
    fn at(fd: RawFd, local: SocketAddr, peer: SocketAddr) -> Connection {
        Connection { fd, local, peer }
    }

    /// The connection from `peer` to our listening address `local`, if still open.
    pub fn find(local: SocketAddr, peer: SocketAddr) -> Option<Connection> {
        connected_fds(local)
            .find(|fd| with_socket(*fd, |s| s.peer_addr().ok()) == Some(peer))
            .map(|fd| Connection::at(fd, local, peer))
    }

    /// The address it is connected from (the canvas view's reaper reads it).
    #[cfg(feature = "host")]
    pub fn peer(self) -> SocketAddr {
        self.peer
    }

    /// True while `fd` still connects `peer` to `local`.
    fn is_current(self) -> bool {
        self.act(|_| Ok(())).is_ok()
    }

    /// Runs `f` on the socket only if `fd` still connects `peer` to `local` (it may have
    /// been closed and its number reused since it was found); else `NotFound`.
    fn act<T>(self, f: impl FnOnce(&TcpStream) -> io::Result<T>) -> io::Result<T> {
        with_socket(self.fd, |s| {
            let ours =
                s.local_addr().ok() == Some(self.local) && s.peer_addr().ok() == Some(self.peer);
            if ours {
                f(s)
            } else {
                Err(io::ErrorKind::NotFound.into())
            }
        })
    }

    /// Bounds the next reads (`None`: no bound).
    pub fn set_read_timeout(self, timeout: Option<Duration>) -> io::Result<()> {
        self.act(|s| s.set_read_timeout(timeout))
    }

    /// Makes every further read return end-of-file; writing still works.
    pub fn stop_reading(self) {
        let _ = self.act(|s| s.shutdown(Shutdown::Read));
    }

    /// True when every byte written to the connection has been acknowledged by the peer
    /// (`SIOCOUTQ` is 0), so a small write cannot block. Unlike the other actions this
    /// does not re-check the addresses: use it on a descriptor just checked
    /// ([`KnownConnections::remembered`]); on any other it can only answer wrongly.
    pub fn send_queue_empty(self) -> bool {
        unacknowledged_bytes(self.fd) == Some(0)
    }

    /// Ends the connection both ways; tiny_http's thread for it then sees end-of-file.
    pub fn end(self) {
        let _ = self.act(|s| s.shutdown(Shutdown::Both));
    }

    /// True once the client has closed or reset the connection, so an answer can no
    /// longer reach it: a call waiting for it stops waiting. Asked of TCP itself: the
    /// peer's FIN came (close-wait), or the connection is closed (a reset closes it). Our own
    /// read side being shut (tiny_http does that after a `Connection: close` request)
    /// is no sign, which is why `POLLRDHUP` is not used. A client that shuts down only its
    /// sending side while it waits for the answer looks the same as one that left; HTTP
    /// clients do not do that. False once `fd` no longer names this connection.
    pub fn hung_up(self) -> bool {
        const CLOSED: u8 = 7;
        const CLOSE_WAIT: u8 = 8;
        // Only a look: `SO_ERROR` is left for tiny_http's own write to report.
        self.act(|s| {
            Ok(matches!(
                tcp_state(s.as_raw_fd()),
                Some(CLOSED | CLOSE_WAIT)
            ))
        })
        .unwrap_or(false)
    }

    /// True when bytes the client sent wait in the connection's receive queue, read by
    /// no one yet (`SIOCINQ` above 0); false once `fd` no longer names this connection.
    pub fn has_unread_bytes(self) -> bool {
        self.act(|s| Ok(unread_bytes(s.as_raw_fd()).is_some_and(|n| n > 0)))
            .unwrap_or(false)
    }
}

/// How long [`kick`] may wait for its connection to be set up (loopback: microseconds,
/// unless the listen backlog is full, when tiny_http's accept thread is behind anyway).
const KICK_CONNECT_TIMEOUT: Duration = Duration::from_millis(50);

/// Opens a connection to our own listening address `local` and closes it at once,
/// sending nothing: tiny_http's accept thread then hands its connection pool one more
/// task, which ends as soon as it is run (end-of-file before any request). Why that
/// gives a waiting connection a thread: `unserved`. Returns the kick's own address (the
/// peer address tiny_http sees), or `None` if it could not connect in time.
pub fn kick(local: SocketAddr) -> Option<SocketAddr> {
    let stream = TcpStream::connect_timeout(&local, KICK_CONNECT_TIMEOUT).ok()?;
    stream.local_addr().ok()
}

/// The descriptors of connections found so far, by peer address (unique among open
/// connections), so [`Connection::find`]'s scan of every descriptor runs once per
/// connection. A remembered descriptor is checked before it is handed out, and every
/// action re-checks it, so a stale entry is never acted on.
///
/// The server's only way to its connections' descriptors: made with `search` off (the
/// embedder's `ProcessEffects::search_descriptors`), it searches, finds, ends and
/// closes nothing.
pub struct KnownConnections {
    search: bool,
    /// Each with the inode of its socket when remembered by [`KnownConnections::remember`].
    found: Mutex<HashMap<SocketAddr, (Connection, Option<u64>)>>,
}

impl KnownConnections {
    /// Connections found by searching this process's descriptors, or (`search` false)
    /// never found.
    pub fn new(search: bool) -> KnownConnections {
        KnownConnections {
            search,
            found: Mutex::default(),
        }
    }

    /// False when descriptors are never searched.
    pub fn searching(&self) -> bool {
        self.search
    }

    /// [`open_connections`], unless searching is off (then `None`).
    pub fn open_connections(&self, local: SocketAddr) -> Option<HashMap<SocketAddr, Connection>> {
        self.search.then(|| open_connections(local)).flatten()
    }

    /// [`end_connections`], unless searching is off.
    pub fn end_all(&self, local: SocketAddr) {
        if self.search {
            end_connections(local);
        }
    }

    /// Like [`Connection::find`], from memory when the remembered descriptor still fits;
    /// `None` when searching is off.
    pub fn find(&self, local: SocketAddr, peer: SocketAddr) -> Option<Connection> {
        if !self.search {
            return None;
        }
        let known = lock_or_recover(&self.found).get(&peer).map(|(c, _)| *c);
        if let Some(connection) = known.filter(|c| c.local == local && c.is_current()) {
            return Some(connection);
        }
        let found = Connection::find(local, peer);
        let mut remembered = lock_or_recover(&self.found);
        match found {
            Some(connection) => remembered.insert(peer, (connection, None)),
            None => remembered.remove(&peer),
        };
        found
    }

    /// The remembered descriptor of the connection from `peer`, if it still names the
    /// same socket (one `fstat`: same inode); never searches, for threads that must not
    /// spend long.
    pub fn remembered(&self, local: SocketAddr, peer: SocketAddr) -> Option<Connection> {
        let known = lock_or_recover(&self.found).get(&peer).copied();
        let (connection, socket) = known.filter(|(c, _)| c.local == local)?;
        (socket.is_some() && inode(connection.fd) == socket).then_some(connection)
    }

    /// Remembers exactly the connections in `open` (the reaper's scan of all of them),
    /// each with its socket's inode.
    pub fn remember(&self, open: &HashMap<SocketAddr, Connection>) {
        let found = open
            .iter()
            .map(|(peer, c)| (*peer, (*c, inode(c.fd))))
            .collect();
        *lock_or_recover(&self.found) = found;
    }
}

/// Ends every connection accepted on `local` (their threads see end-of-file).
pub fn end_connections(local: SocketAddr) {
    for connection in open_connections(local).unwrap_or_default().into_values() {
        connection.end();
    }
}

/// Our open connections by peer address (tiny_http holds two descriptors of each: the
/// first found is kept); `None` when `/proc/self/fd` cannot be read (e.g. no descriptor
/// left to open it).
pub fn open_connections(local: SocketAddr) -> Option<HashMap<SocketAddr, Connection>> {
    let listing = fs::read_dir("/proc/self/fd").ok()?;
    let mut found: HashMap<SocketAddr, Connection> = HashMap::new();
    for fd in connected_among(Some(listing), local) {
        let Some(peer) = with_socket(fd, |s| s.peer_addr().ok()) else {
            continue;
        };
        found
            .entry(peer)
            .or_insert_with(|| Connection::at(fd, local, peer));
    }
    Some(found)
}

/// Descriptors of connected sockets whose local address is `local`.
fn connected_fds(local: SocketAddr) -> impl Iterator<Item = RawFd> {
    connected_among(fs::read_dir("/proc/self/fd").ok(), local)
}

/// The descriptors in `listing` (of `/proc/self/fd`) of connected sockets whose local
/// address is `local`.
fn connected_among(listing: Option<fs::ReadDir>, local: SocketAddr) -> impl Iterator<Item = RawFd> {
    listing
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .filter(move |fd| {
            with_socket(*fd, |s| {
                s.local_addr().ok() == Some(local) && s.peer_addr().is_ok()
            })
        })
}
