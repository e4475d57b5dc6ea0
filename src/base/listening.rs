//! A tiny_http server that keeps listening after tiny_http's own accept thread ends.
//!
//! tiny_http 0.12's accept thread ends for good on its first accept error (e.g.
//! `EMFILE`: `recv` then fails once) or panics when it cannot clone an accepted socket
//! (one descriptor left: `recv` then just waits), and drops its listener. [`Listening`]
//! keeps its own clone of the listening socket, so the socket stays open; it sees the
//! first case as an error from `recv`, and the second, on each idle second, as the
//! listener descriptor tiny_http holds no longer naming our socket. Then, after a pause
//! growing from 100 ms to 1 s, it builds a new tiny_http server on another clone of the
//! socket; requests the old one had queued are still handed out. Connections the old
//! server accepted stay with it: their later requests are never received, so whoever
//! owns the connections must end quiet ones (the `/call` reaper does; so does the view's).
//!
//! No `SO_RCVTIMEO` may be set on the listener: `accept` would time out with it, which
//! tiny_http takes as its first error (see `sockets`).

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tiny_http::Request;

use super::{lock_or_recover, sockets};

/// First and longest pause before rebuilding a tiny_http server whose accept died.
const REBUILD_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(1));

/// A listening socket and the tiny_http server currently accepting on it.
pub struct Listening {
    /// Our own handle on the socket: to stop it listening at once, and to give a rebuilt
    /// tiny_http server a clone of it.
    listener: TcpListener,
    /// The server receiving, with the descriptor of the listener clone it owns.
    current: Mutex<(Arc<tiny_http::Server>, RawFd)>,
    /// The server the last rebuild replaced, until what it had queued is handed out.
    retired: Mutex<Option<Arc<tiny_http::Server>>>,
    /// Named in the one line logged when accepting fails ("agent-tools", "canvas view").
    name: &'static str,
}

fn serve_on(listener: TcpListener) -> io::Result<(Arc<tiny_http::Server>, RawFd)> {
    let fd = listener.as_raw_fd();
    let server = tiny_http::Server::from_listener(listener, None).map_err(io::Error::other)?;
    Ok((Arc::new(server), fd))
}

impl Listening {
    /// Starts a tiny_http server on a clone of `listener`.
    pub fn new(listener: TcpListener, name: &'static str) -> io::Result<Listening> {
        let current = Mutex::new(serve_on(listener.try_clone()?)?);
        Ok(Listening {
            listener,
            current,
            retired: Mutex::default(),
            name,
        })
    }

    /// The next request; `None` once `stopping` is set (after [`Listening::stop`]).
    pub fn next(&self, stopping: &AtomicBool) -> Option<Request> {
        let (mut pause, mut logged) = (REBUILD_BACKOFF.0, false);
        while !stopping.load(Ordering::SeqCst) {
            if let Some(request) = self.take_retired() {
                return Some(request);
            }
            let (server, accept_fd) = lock_or_recover(&self.current).clone();
            let failure = match server.recv_timeout(REBUILD_BACKOFF.1) {
                Ok(Some(request)) => return Some(request),
                Ok(None) if sockets::same_socket(accept_fd, &self.listener) => continue,
                Ok(None) => "tiny_http's accept thread stopped".to_string(),
                Err(e) => e.to_string(),
            };
            if stopping.load(Ordering::SeqCst) {
                break;
            }
            if !logged {
                let name = self.name;
                eprintln!("{name}: accepting connections failed ({failure}); retrying");
                logged = true;
            }
            thread::sleep(pause);
            pause = (pause * 2).min(REBUILD_BACKOFF.1);
            if let Ok(rebuilt) = self.listener.try_clone().and_then(serve_on) {
                *lock_or_recover(&self.current) = rebuilt;
                *lock_or_recover(&self.retired) = Some(server);
            }
        }
        None
    }

    /// A request the retired server had queued; forgets that server once it has none.
    fn take_retired(&self) -> Option<Request> {
        let mut retired = lock_or_recover(&self.retired);
        let request = retired.as_ref()?.try_recv().ok().flatten();
        if request.is_none() {
            *retired = None;
        }
        request
    }

    /// A request already received and not yet handed out, without waiting (for answering
    /// what is left at shutdown).
    pub fn queued(&self) -> Option<Request> {
        if let Some(request) = self.take_retired() {
            return Some(request);
        }
        let (server, _) = lock_or_recover(&self.current).clone();
        server.try_recv().ok().flatten()
    }

    /// Stops listening now and wakes a [`Listening::next`] that is waiting; set its
    /// `stopping` first. Dropping `self` afterwards lets tiny_http's accept thread end.
    pub fn stop(&self) {
        sockets::stop_listening(&self.listener);
        lock_or_recover(&self.current).0.unblock();
    }
}
