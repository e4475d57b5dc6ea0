//! What the server does to the process that embeds it, and the switches an embedder has.
//!
//! Besides its own listening socket, files and threads, the server (all on by default,
//! as `termsprawl-tools serve` runs it):
//! - **searches this process's descriptors** (`/proc/self/fd`) for the sockets of the
//!   connections tiny_http owns, and acts on them: read timeouts for a body's deadline,
//!   `shutdown` to end a connection, `SIOCINQ`/`SIOCOUTQ`, and throw-away loopback
//!   connections to its own port that give a thread to a connection tiny_http's pool
//!   left without one ([`ProcessEffects::search_descriptors`]);
//! - **trims the C heap** (`malloc_trim(0)`) once a burst of calls is over
//!   ([`ProcessEffects::trim_heap`]).
//!
//! It never installs a signal handler, changes a signal mask or disposition, or changes a
//! resource limit or an allocator setting: those are `serve`'s (SIGINT/SIGTERM, the
//! open-files limit, `M_ARENA_MAX`), not the library's.
//!
//! ## Threads (none of them is ever blocked by a client except where said)
//! - one accept thread, one reaper, and tiny_http's own accept thread;
//! - the activity trail's writer, unless the trail is off
//!   (`AgentToolServer::set_activity_directory(None)`);
//! - one worker per project with queued work (it exits when the queue has been empty
//!   for a while);
//! - handlers, at most one per open connection, each exiting after 5 s without work (a
//!   client that sends a body slowly or does not read its answer holds one);
//! - tiny_http's: one per open connection, for the connection's life. Open connections
//!   are bounded by the open-files limit; with the descriptor search on, connections
//!   without a call in flight are ended after 15 s quiet and beyond 256.
//!
//! ## With the descriptor search off
//! What still holds: authentication, every check of the head, the 128 KiB cap (on
//! declared and on read bytes), validation, answers in order, one call in flight per
//! connection and at most 8 waiting behind it, the 15 s answer deadline of queued calls,
//! and nothing run for a refused call. What weakens:
//! - a body still on the socket is read without a timeout: a client trickling it holds
//!   one handler thread for as long as it trickles (the 15 s deadline is checked only
//!   between reads); a refused request's unread body is left unread and its connection
//!   ended by the patched tiny_http (`vendor/tiny_http/PATCHES.md`), as with the search on;
//! - nothing ends quiet connections (header slowloris, idle keep-alive, a flood of idle
//!   connections): each holds a tiny_http thread and two descriptors until its client
//!   closes it; `close` does not end open connections either;
//! - a connection tiny_http's pool left without a thread after a burst waits until
//!   another connection closes;
//! - once a connection's answers come to 8 KiB, each further one is written by a handler
//!   thread (whether a write can block is not known), which costs a thread hop per call;
//! - a connection ended for pipelining past the cap, or refused before its body was read,
//!   is remembered for [`FORGET_ENDED_AFTER`](crate::server::FORGET_ENDED_AFTER) only:
//!   requests its client still sends after that would be run.
//!
//! With the heap trim off, the resident size stays near its peak after a burst (glibc
//! keeps freed memory in its arenas).

/// What the server may do to its process (module docs). [`Default`]: everything on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessEffects {
    /// Search `/proc/self/fd` for the sockets of tiny_http's connections and act on them.
    pub search_descriptors: bool,
    /// `malloc_trim(0)` once no call has been made for a while.
    pub trim_heap: bool,
}

impl Default for ProcessEffects {
    fn default() -> Self {
        ProcessEffects {
            search_descriptors: true,
            trim_heap: true,
        }
    }
}
