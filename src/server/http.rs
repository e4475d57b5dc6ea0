//! The HTTP front: one accept thread, the only caller of tiny_http's `recv`; handler
//! threads for everything that may block on a client; and the rule that decides which
//! thread does what.
//!
//! ## Who may block on a client, and who must not
//! tiny_http reads a body over 1 KiB lazily, from the socket, on whichever thread reads
//! the `Request`, with no timeout; dropping a `Request` reads and discards the rest of
//! its declared body; writing a response blocks while the client does not read. Any of
//! these on the accept thread (or on a project worker, or the reaper) would let one
//! client stall every other. The accept thread first checks the headers, in the spec's
//! order:
//! 1. `Origin` or `Sec-Fetch-Site` present, method not POST, path not exactly `/call`, or a protocol
//!    upgrade -> 403 `Unsupported request`;
//! 2. `Host` not `127.0.0.1:PORT` / `localhost:PORT` -> 403 (DNS-rebinding defence);
//!    both `Transfer-Encoding` and `Content-Length`, or a `Transfer-Encoding` other than
//!    one `chunked` -> 400 (smuggling), connection closed;
//! 3. bearer token unknown -> 401 `Unknown or revoked session` (constant time, see
//!    `session`);
//! 4. declared body over 128 KiB -> 400 `Request too large`.
//!
//! Then (`Front::drive`):
//! - a body still on the socket (over 1 KiB, `Expect`, chunked) goes to a handler thread,
//!   which reads it under a deadline of [`REQUEST_DEADLINE`] from when the headers
//!   arrived (checked between reads, each bounded by `SO_RCVTIMEO` to at most
//!   [`READ_SLICE`], the last slice ending at the deadline, so neither a stall nor a
//!   trickle outlasts it) and refuses bodies that grow past 128 KiB;
//! - a body tiny_http already holds in memory is parsed and validated right there, on
//!   the accept thread (no thread hop: that hop was most of a call's cost). Answers that
//!   need no queue (`session_info`, `guide_read`, `agent_status`, browser operations
//!   while browser control is off, every refusal) are made there, except that a
//!   session's first `session_info` that marks an MCP adapter connected (a disk write)
//!   goes to a handler; a queued operation goes to its project's worker, which answers it
//!   when it has run (`AgentToolServer::invoke_wire`).
//!
//! Whoever has an answer writes it itself only if the write cannot block
//! (`Front::can_write_now`): the answer is at most [`WRITE_NOW_BYTES`] and the
//! connection has nothing unacknowledged in its send queue (`SIOCOUTQ`; a connection
//! never answered has nothing written). Otherwise, and for handlers always, a handler
//! writes it (bounded by `SO_SNDTIMEO`, see `sockets`). So a client that does not read
//! can hold a handler, never the accept thread or a worker. A queued call whose
//! operation has not finished within [`AgentToolServer::answer_wait`] is answered by
//! the reaper ("outcome unknown"); the operation's later result is then dropped.
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
//!
//! A client that does not read its answers holds one handler (and no one else) until
//! it reads or closes; a single write that makes no progress for 15 s (`SO_SNDTIMEO`)
//! fails, and the handler then ends that connection and drops the calls waiting
//! behind it. (A client that reads a little now and then keeps resetting that timer:
//! bounding a whole answer would need a watchdog thread, which we do not have.)
//!
//! ## Connections without a call in flight
//! tiny_http reads request headers with no timeout and keeps a thread and two
//! descriptors per open connection, with no upper bound. A reaper thread therefore looks
//! at our connections every [`REAP_EVERY`]: one with no call in flight that has been
//! quiet (no complete request since it connected or since its last answer) for
//! [`REQUEST_DEADLINE`] is ended, which cuts header slowloris, a TLS or HTTP/2 preface
//! and idle keep-alive alike; and when more than [`QUIET_CONNECTIONS_MAX`] are quiet,
//! the longest-quiet ones beyond that are ended, so threads and descriptors fall back
//! within one period after a flood of idle connections. Once no connection has been
//! open for [`TRIM_AFTER`], it hands the heap the burst freed back to the OS. Its scan
//! of all connections is also what `can_write_now` knows their descriptors from.
//!
//! tiny_http's connection pool can also leave a connection with no thread at all after
//! a burst of new connections; its request then sits unread on the socket and never
//! reaches us. The same scan finds such connections and gets each a thread by opening
//! a throw-away connection to ourselves (`unserved` says how, and why no call is cut).
//!
//! ## Threads
//! Handlers are reused when idle and exit after [`HANDLER_IDLE`] without work. A
//! connection has at most one call in flight at a time (`InOrder`; tiny_http parses
//! pipelined requests ahead of their answers), and whichever thread answers it takes
//! the connection's next one, so calls are answered in order and live handlers never
//! outnumber open connections; at most [`WAITING_CALLS_MAX`] more wait behind it, and one more ends the
//! connection, so a client that pipelines without reading cannot grow memory. tiny_http
//! itself keeps one thread per open connection and reads headers without a timeout;
//! that cost is tiny_http's and blocks no one else.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tiny_http::{Header, Method, Request, Response};

use super::unserved::{self, NotReached, Unserved};
use super::{
    connects_on_session_info, lock_or_recover, AgentToolServer, Invoked, WireAnswer,
    ANSWER_TIMEOUT_ERROR,
};
use crate::base::listening::Listening;
use crate::base::sockets::{self, Connection, KnownConnections};
use crate::protocol::limits::MAX_BODY_BYTES;
use crate::protocol::ToolSession;
use crate::sys::process::release_free_heap;

/// A whole request must arrive within this long.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(15);
/// An idle handler thread exits after this long.
pub const HANDLER_IDLE: Duration = Duration::from_secs(5);
/// Above this declared length tiny_http's drop would allocate too much (module docs).
pub const DROP_SAFE_BYTES: usize = 64 * 1024 * 1024;
/// How often the reaper looks at our connections (module docs).
pub const REAP_EVERY: Duration = Duration::from_millis(250);
/// At most this many connections without a call in flight are kept open.
pub const QUIET_CONNECTIONS_MAX: usize = 256;
/// At most this many calls wait behind a connection's call in flight; one more ends
/// that connection (a client pipelining without reading cannot grow memory unbounded).
pub const WAITING_CALLS_MAX: usize = 8;
/// With no connection open for this long, the burst's threads (ours and tiny_http's
/// connection threads, both idle-timed at 5 s) are gone: the reaper then trims the heap.
const TRIM_AFTER: Duration = Duration::from_secs(6);
/// Bodies up to this size tiny_http has read into memory before `recv` returns.
const EAGER_BODY_BYTES: usize = 1024;
/// Answers up to this size may be written by a thread that must not block, when the
/// connection's send queue is empty. Linux makes a TCP write wait only while the bytes
/// queued on the socket (with the kernel's per-buffer overhead) exceed its send buffer,
/// 16 KiB to start with (tcp_wmem's default); an answer of at most 8 KiB plus its
/// headers, written into an empty queue, stays well below that.
const WRITE_NOW_BYTES: usize = 8 * 1024;

/// The longest one body read may block before the deadline is checked again.
const READ_SLICE: Duration = Duration::from_secs(1);

/// A running HTTP front.
pub struct Http {
    /// The listening socket and the tiny_http server on it (rebuilt when tiny_http's
    /// accept thread ends: `listening`).
    listening: Arc<Listening>,
    accept: JoinHandle<()>,
    reaper: JoinHandle<()>,
    stopping: Arc<AtomicBool>,
    handlers: Handlers,
    local: SocketAddr,
}

impl Http {
    /// Binds `127.0.0.1:0` and starts the accept thread for `owner`.
    pub fn start(owner: Weak<AgentToolServer>) -> io::Result<Http> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        sockets::set_listener_write_timeout(&listener)?;
        let local = listener.local_addr()?;
        let listening = Arc::new(Listening::new(listener, "agent-tools")?);
        let stopping = Arc::new(AtomicBool::new(false));
        let front = Arc::new(Front {
            owner,
            in_order: InOrder::default(),
            handlers: Handlers::default(),
            local,
            hosts: [
                format!("127.0.0.1:{}", local.port()),
                format!("localhost:{}", local.port()),
            ],
            queued: QueuedCalls::default(),
        });
        let accept = {
            let (listening, stopping, front) = (listening.clone(), stopping.clone(), front.clone());
            thread::Builder::new()
                .name("agent-tools-accept".into())
                .spawn(move || accept_loop(&listening, &stopping, &front))?
        };
        let reaper = {
            let (stopping, front) = (stopping.clone(), front.clone());
            thread::Builder::new()
                .name("agent-tools-reaper".into())
                .spawn(move || reap_loop(&front, &stopping))?
        };
        Ok(Http {
            listening,
            accept,
            reaper,
            stopping,
            handlers: front.handlers.clone(),
            local,
        })
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.local.port()
    }

    /// Stops listening, joins the accept thread (which answers requests still queued
    /// with 503), ends every open connection and releases idle handlers.
    pub fn stop(self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.listening.stop();
        let _ = self.accept.join();
        let _ = self.reaper.join();
        sockets::end_connections(self.local);
        self.handlers.release_idle();
        // Dropping the last reference lets tiny_http's own accept thread end.
        drop(self.listening);
    }
}

/// What the accept thread decided from the headers.
enum Verdict {
    Refuse(u16, &'static str),
    Accept(ToolSession),
}

/// What every thread that answers calls shares: the accept thread, handlers, project
/// workers (answering their queued calls) and the reaper (answering overdue ones).
struct Front {
    owner: Weak<AgentToolServer>,
    in_order: InOrder,
    handlers: Handlers,
    local: SocketAddr,
    /// The `Host` values accepted (see `check_headers`), made once.
    hosts: [String; 2],
    /// Calls whose operation went to a project queue.
    queued: QueuedCalls,
}

/// The requests of calls whose operation went to a project queue, by a number of their
/// own: answered by whoever takes one first, the project worker with the operation's
/// result or the reaper once [`AgentToolServer::answer_wait`] has passed.
#[derive(Default)]
struct QueuedCalls {
    calls: Mutex<Queued>,
}

#[derive(Default)]
struct Queued {
    last_id: u64,
    /// Each request with when it was queued.
    waiting: HashMap<u64, (Instant, Request)>,
}

impl QueuedCalls {
    fn add(&self, request: Request) -> u64 {
        let mut calls = lock_or_recover(&self.calls);
        calls.last_id += 1;
        let id = calls.last_id;
        calls.waiting.insert(id, (Instant::now(), request));
        id
    }

    fn take(&self, id: u64) -> Option<Request> {
        let request = lock_or_recover(&self.calls).waiting.remove(&id);
        request.map(|(_, request)| request)
    }

    /// Takes every request queued for `wait` or longer.
    fn take_overdue(&self, wait: Duration) -> Vec<Request> {
        let mut calls = lock_or_recover(&self.calls);
        let overdue: Vec<u64> = calls
            .waiting
            .iter()
            .filter(|(_, (since, _))| since.elapsed() >= wait)
            .map(|(id, _)| *id)
            .collect();
        overdue
            .into_iter()
            .filter_map(|id| calls.waiting.remove(&id).map(|(_, request)| request))
            .collect()
    }
}

fn status_of(ok: bool) -> u16 {
    if ok {
        200
    } else {
        400
    }
}

/// Where a call is being handled: a handler thread may block on its client (reading a
/// body, writing an answer); the accept thread, a project worker and the reaper must not.
#[derive(Clone, Copy, PartialEq)]
enum On {
    Handler,
    SharedThread,
}

impl Front {
    /// On the accept thread: checks `request`'s headers (or refuses it with `refuse`)
    /// and handles it. False once the server is gone.
    fn take(self: &Arc<Self>, request: Request, refuse: Option<&'static str>) -> bool {
        let arrived = Instant::now();
        let Some(owner) = self.owner.upgrade() else {
            return false;
        };
        let verdict = match refuse {
            Some(message) => Verdict::Refuse(503, message),
            None => check_headers(&owner, &request, &self.hosts),
        };
        let call = Call {
            in_memory: body_in_memory(&request),
            request,
            verdict,
            arrived,
        };
        match self.in_order.admit(call, self.local) {
            Admitted::Run(call) => self.drive(&owner, call, On::SharedThread),
            Admitted::Parked => {}
            Admitted::Drop(calls) => {
                let local = self.local;
                self.handlers.run(Box::new(move || {
                    for call in calls {
                        drop_unless_huge(call.request, local);
                    }
                }));
            }
        }
        true
    }

    /// [`Front::take`], keeping the accept thread alive if handling the call panics (a
    /// bug: nothing known panics; the fuzz targets look for it). The call is then lost.
    fn take_guarded(self: &Arc<Self>, request: Request, refuse: Option<&'static str>) -> bool {
        let take = || self.take(request, refuse);
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(take)).unwrap_or_else(|_| {
            eprintln!("agent-tools: handling a call panicked; the call was dropped");
            true
        })
    }

    /// Handles `call` and then each next call of its connection that this thread answers,
    /// in a loop (not by recursion: a client pipelining without end must not grow the
    /// stack). On a thread that must not block, a call that may goes to a handler with
    /// the rest: a body still on the socket, or a session whose next `session_info`
    /// writes its new status to disk.
    fn drive(self: &Arc<Self>, owner: &Arc<AgentToolServer>, call: Call, on: On) {
        let mut next = Some(call);
        while let Some(call) = next {
            if on == On::SharedThread && (writes_status(&call) || !call.in_memory) {
                let (front, owner) = (self.clone(), owner.clone());
                let peer = call.request.remote_addr().copied();
                let job = Box::new(move || front.drive(&owner, call, On::Handler));
                if !self.handlers.run(job) {
                    self.lost(peer);
                }
                return;
            }
            next = self.run(owner, call, on);
        }
    }

    /// Reads the body (from memory, or from the socket under the request deadline),
    /// then answers a refusal or invokes. The connection's next call, when this thread
    /// answered this one.
    fn run(self: &Arc<Self>, owner: &Arc<AgentToolServer>, call: Call, on: On) -> Option<Call> {
        let Call {
            mut request,
            verdict,
            arrived,
            in_memory,
        } = call;
        let peer_port = request.remote_addr().map(SocketAddr::port);
        let session = match verdict {
            Verdict::Refuse(status, message) => {
                owner.record_refused(None, status, message, peer_port);
                return self.finish(owner, request, (status, error_body(message)), in_memory, on);
            }
            Verdict::Accept(session) => session,
        };
        let body = if in_memory {
            read_memory_body(&mut request)
        } else {
            let connection = request
                .remote_addr()
                .and_then(|peer| self.in_order.known.find(self.local, *peer));
            let body = read_body(&mut request, connection, arrived + REQUEST_DEADLINE);
            if let Some(connection) = connection {
                let _ = connection.set_read_timeout(None);
            }
            body
        };
        let raw = match body.map(|body| serde_json::from_slice::<Value>(&body)) {
            Ok(Ok(raw)) => raw,
            Ok(Err(_)) => {
                let message = "Request body is not JSON; send {\"operation\":…,\"args\":{…}}";
                owner.record_refused(Some(&session), 400, message, peer_port);
                return self.finish(owner, request, (400, error_body(message)), true, on);
            }
            Err(e) => {
                let (status, message) = e.answer();
                owner.record_refused(Some(&session), status, message, peer_port);
                return self.finish(owner, request, (status, error_body(message)), false, on);
            }
        };
        let pending = match owner.invoke_wire(&session, &raw) {
            Invoked::Now((ok, answer)) => {
                return self.finish(owner, request, (status_of(ok), answer), true, on)
            }
            Invoked::Queue(pending) => pending,
        };
        let id = self.queued.add(request);
        let later = {
            let (front, owner) = (self.clone(), owner.clone());
            move |(ok, answer): WireAnswer| {
                // On the project worker, which must not block either; unless the reaper
                // has already answered it as overdue.
                if let Some(request) = front.queued.take(id) {
                    let answer = (status_of(ok), answer);
                    if let Some(next) =
                        front.finish(&owner, request, answer, true, On::SharedThread)
                    {
                        front.drive(&owner, next, On::SharedThread);
                    }
                }
            }
        };
        match pending.queue(later) {
            Ok(()) => None,
            Err((ok, answer)) => {
                let request = self.queued.take(id)?;
                self.finish(owner, request, (status_of(ok), answer), true, on)
            }
        }
    }

    /// Answers `request` with `(status, body)`: here when this thread may block or the
    /// write cannot ([`Front::can_write_now`]), else on a handler. `body_read`: the whole
    /// body was read (else it is still partly on the socket). The connection's next
    /// call, when answered here.
    fn finish(
        self: &Arc<Self>,
        owner: &Arc<AgentToolServer>,
        request: Request,
        (status, answer): (u16, Vec<u8>),
        body_read: bool,
        on: On,
    ) -> Option<Call> {
        let peer = request.remote_addr().copied();
        if !body_read && request.body_length().unwrap_or(0) > DROP_SAFE_BYTES {
            // Never drop this request: tiny_http's drop would allocate the whole rest.
            leak(request, self.local, Some(&raw_response(status, &answer)));
            self.in_order.discard(peer);
            return None;
        }
        if !body_read && !body_in_memory(&request) {
            // tiny_http's drop then sees end-of-file instead of waiting for the rest. What
            // it had already read past the head (a smuggled request) it may still parse
            // as requests: the connection counts as ended, so none of them ever runs.
            if let Some(peer) = peer {
                self.in_order.end_after_this(peer);
            }
            if let Some(connection) = peer.and_then(|p| self.in_order.known.find(self.local, p)) {
                connection.stop_reading();
            }
        }
        if on == On::Handler || self.can_write_now(peer, answer.len()) {
            return self.respond(request, status, answer);
        }
        let (front, owner) = (self.clone(), owner.clone());
        let job = Box::new(move || {
            if let Some(next) = front.respond(request, status, answer) {
                front.drive(&owner, next, On::Handler);
            }
        });
        if !self.handlers.run(job) {
            self.lost(peer);
        }
        None
    }

    /// After a call in flight was lost with a handler that could not start: ends its
    /// connection and drops the calls behind it, so the connection is not left in flight.
    fn lost(&self, peer: Option<SocketAddr>) {
        if let Some(connection) = peer.and_then(|p| self.in_order.known.find(self.local, p)) {
            connection.end();
        }
        self.in_order.discard(peer);
    }

    /// True when writing `len` bytes to `peer`'s connection cannot block: the answer is
    /// small and nothing written earlier is still unacknowledged. A connection never
    /// answered has nothing written; else its descriptor must be known (the reaper
    /// remembers every open one) and its send queue empty (`SIOCOUTQ`).
    fn can_write_now(&self, peer: Option<SocketAddr>, len: usize) -> bool {
        let Some(peer) = peer else { return false };
        if len > WRITE_NOW_BYTES {
            return false;
        }
        if !self.in_order.was_answered(&peer) {
            return true;
        }
        self.in_order
            .known
            .remembered(self.local, peer)
            .is_some_and(|connection| connection.send_queue_empty())
    }

    /// Writes the answer; then the connection's next call, if one waits. A failed write
    /// ends the connection and drops the calls waiting behind it.
    fn respond(&self, request: Request, status: u16, answer: Vec<u8>) -> Option<Call> {
        let peer = request.remote_addr().copied();
        let response = Response::from_data(answer)
            .with_status_code(status)
            .with_header(json_header());
        if request.respond(response).is_err() {
            // Most likely `SO_SNDTIMEO`: the client does not read. Its stream is now cut
            // mid-answer, so end it (its waiting calls then fail fast).
            if let Some(connection) = peer.and_then(|p| self.in_order.known.find(self.local, p)) {
                connection.end();
            }
            self.in_order.discard(peer);
            return None;
        }
        self.in_order.next(peer)
    }
}

/// A tiny_http server on `listener`, and the descriptor its accept thread owns.
/// The only caller of tiny_http's `recv` (through [`Listening::next`]).
fn accept_loop(listening: &Listening, stopping: &AtomicBool, front: &Arc<Front>) {
    while let Some(request) = listening.next(stopping) {
        if !front.take_guarded(request, None) {
            return;
        }
    }
    // Requests that arrived before we stopped get an answer, not tiny_http's drop.
    while let Some(request) = listening.queued() {
        if !front.take_guarded(request, Some("Tool service is shutting down; try again")) {
            return;
        }
    }
}

/// A request with the accept thread's verdict on its headers.
struct Call {
    request: Request,
    verdict: Verdict,
    arrived: Instant,
    /// [`body_in_memory`], found once.
    in_memory: bool,
}

/// What [`InOrder::admit`] decided for a call. (Returned once per call and matched at
/// once: boxing the large variant would only add an allocation per call.)
#[allow(clippy::large_enum_variant)]
enum Admitted {
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
struct InOrder {
    waiting: Mutex<HashMap<SocketAddr, VecDeque<Call>>>,
    /// When each connection's last call was answered (for the reaper).
    answered: Mutex<HashMap<SocketAddr, Instant>>,
    /// Connections ended (for pipelining past the cap, or answered before their body was
    /// read), and when: calls tiny_http still delivers for them are dropped, never run
    /// (the reaper forgets them once they are gone).
    ended: Mutex<HashMap<SocketAddr, Instant>>,
    /// Descriptors of our connections (the reaper remembers every open one).
    known: KnownConnections,
}

impl InOrder {
    /// Returns `call` to run now, or parks it behind its connection's call in flight;
    /// past [`WAITING_CALLS_MAX`] it ends the connection and gives back its waiting calls,
    /// this one and any later one, to be dropped unrun (the call in flight finishes; its
    /// answer fails).
    fn admit(&self, call: Call, local: SocketAddr) -> Admitted {
        let Some(peer) = call.request.remote_addr().copied() else {
            return Admitted::Run(call);
        };
        if lock_or_recover(&self.ended).contains_key(&peer) {
            // Ended both ways first, so tiny_http writes nothing for the dropped call
            // (the remembered descriptor: no scan of every descriptor on this thread).
            if let Some(connection) = self.known.find(local, peer) {
                connection.end();
            }
            return Admitted::Drop(vec![call]);
        }
        let mut waiting = lock_or_recover(&self.waiting);
        match waiting.get_mut(&peer) {
            Some(queue) if queue.len() >= WAITING_CALLS_MAX => {
                let dropped = waiting.remove(&peer).unwrap_or_default();
                drop(waiting);
                lock_or_recover(&self.ended).insert(peer, Instant::now());
                if let Some(connection) = self.known.find(local, peer) {
                    connection.end();
                }
                Admitted::Drop(dropped.into_iter().chain([call]).collect())
            }
            Some(queue) => {
                queue.push_back(call);
                Admitted::Parked
            }
            None => {
                waiting.insert(peer, VecDeque::new());
                Admitted::Run(call)
            }
        }
    }

    /// Ends the connection from `peer` once its call in flight is answered: every later
    /// call tiny_http delivers for it is dropped unrun.
    fn end_after_this(&self, peer: SocketAddr) {
        lock_or_recover(&self.ended).insert(peer, Instant::now());
    }

    /// Drops the calls waiting behind a connection that was ended (their bodies are in
    /// memory, and tiny_http's answer to each fails at once on the closed socket).
    fn discard(&self, peer: Option<SocketAddr>) {
        let Some(peer) = peer else { return };
        let dropped = lock_or_recover(&self.waiting).remove(&peer);
        drop(dropped);
    }

    /// The connection's next call, once the one in flight is answered; `None` when
    /// there is none (the connection then has nothing in flight).
    fn next(&self, peer: Option<SocketAddr>) -> Option<Call> {
        let peer = peer?;
        lock_or_recover(&self.answered).insert(peer, Instant::now());
        let mut waiting = lock_or_recover(&self.waiting);
        let next = waiting.get_mut(&peer)?.pop_front();
        if next.is_none() {
            waiting.remove(&peer);
        }
        next
    }

    /// True once any call of the connection from `peer` has been answered.
    fn was_answered(&self, peer: &SocketAddr) -> bool {
        lock_or_recover(&self.answered).contains_key(peer)
    }

    fn in_flight(&self, peer: &SocketAddr) -> bool {
        lock_or_recover(&self.waiting).contains_key(peer)
    }

    /// True once any request of the connection from `peer` has reached us: one is in
    /// flight, one was answered, or the connection was ended for pipelining.
    fn reached(&self, peer: &SocketAddr) -> bool {
        self.in_flight(peer)
            || self.was_answered(peer)
            || lock_or_recover(&self.ended).contains_key(peer)
    }
}

/// The reaper (module docs): ends connections quiet for [`REQUEST_DEADLINE`], and the
/// longest-quiet beyond [`QUIET_CONNECTIONS_MAX`]; answers queued calls left unanswered
/// for [`AgentToolServer::answer_wait`]; remembers every open connection's descriptor;
/// gets a thread for connections tiny_http runs on none ([`give_threads`]).
fn reap_loop(front: &Arc<Front>, stopping: &AtomicBool) {
    let (in_order, local) = (&front.in_order, front.local);
    // When the reaper first saw each connection (an estimate of when it connected).
    let mut seen: HashMap<SocketAddr, Instant> = HashMap::new();
    let mut unserved = Unserved::default();
    // Since when no connection has been open, and whether the heap was trimmed since.
    let (mut closed_since, mut trimmed) = (None::<Instant>, true);
    while !stopping.load(Ordering::SeqCst) {
        thread::sleep(REAP_EVERY);
        answer_overdue(front);
        let now = Instant::now();
        // A failed scan (no descriptor left to read /proc with) knows nothing: skip it.
        let Some(open) = sockets::open_connections(local) else {
            continue;
        };
        if !open.is_empty() {
            (closed_since, trimmed) = (None, false);
        } else if !trimmed && now.duration_since(*closed_since.get_or_insert(now)) >= TRIM_AFTER {
            // glibc keeps freed memory in its arenas: without this the resident size
            // stays near its peak after a burst of calls has gone.
            release_free_heap();
            trimmed = true;
        }
        // Entries made since the scan began are kept: their connection may be newer.
        let current = |peer: &SocketAddr, at: &mut Instant| open.contains_key(peer) || *at >= now;
        seen.retain(|peer, _| open.contains_key(peer));
        lock_or_recover(&in_order.answered).retain(current);
        lock_or_recover(&in_order.ended).retain(current);
        in_order.known.remember(&open);
        let mut quiet: Vec<(Instant, Connection)> = Vec::new();
        for (peer, connection) in &open {
            let first_seen = *seen.entry(*peer).or_insert(now);
            if in_order.in_flight(peer) {
                continue;
            }
            let answered = lock_or_recover(&in_order.answered).get(peer).copied();
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

/// Gives a tiny_http thread to each connection it accepted but runs on none
/// (`unserved`): finds the connections that have not reached us, looks again after
/// [`unserved::RECHECK_AFTER`] at those with unread bytes, and makes the kicks due.
fn give_threads(
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
fn answer_overdue(front: &Arc<Front>) {
    let Some(owner) = front.owner.upgrade() else {
        return;
    };
    for request in front.queued.take_overdue(owner.answer_wait()) {
        let answer = (400, error_body(ANSWER_TIMEOUT_ERROR));
        if let Some(next) = front.finish(&owner, request, answer, true, On::SharedThread) {
            front.drive(&owner, next, On::SharedThread);
        }
    }
}

fn header<'r>(request: &'r Request, name: &'static str) -> Option<&'r str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// `hosts`: the only `Host` values accepted, `127.0.0.1:PORT` and `localhost:PORT` (the
/// latter in any case).
fn check_headers(owner: &AgentToolServer, request: &Request, hosts: &[String; 2]) -> Verdict {
    let upgrade =
        header(request, "Connection").is_some_and(|v| v.to_ascii_lowercase().contains("upgrade"));
    // `Sec-Fetch-Site` is sent only by browsers, and no browser page is a client of
    // ours: refused like `Origin`, as defence in depth for a browser that omits Origin.
    if header(request, "Origin").is_some()
        || header(request, "Sec-Fetch-Site").is_some()
        || *request.method() != Method::Post
        || request.url() != "/call"
        || upgrade
    {
        return Verdict::Refuse(403, "Unsupported request");
    }
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
    Verdict::Accept(session)
}

/// True when the request has exactly one `Transfer-Encoding` header and it is `chunked`.
fn chunked_only(request: &Request) -> bool {
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
fn writes_status(call: &Call) -> bool {
    let Verdict::Accept(session) = &call.verdict else {
        return false;
    };
    connects_on_session_info(&session.status)
}

/// True when tiny_http has already read the whole body into memory (or there is none).
fn body_in_memory(request: &Request) -> bool {
    header(request, "Expect").is_none()
        && header(request, "Transfer-Encoding").is_none()
        && header(request, "Connection")
            .map_or(true, |v| !v.to_ascii_lowercase().contains("upgrade"))
        && request
            .body_length()
            .map_or(true, |n| n <= EAGER_BODY_BYTES)
}

enum BodyError {
    TooLarge,
    TimedOut,
    Broken,
}

/// Drops `request`, unless tiny_http's drop would allocate its absurd unread length
/// (module docs): that one is leaked instead, as `Front::finish` does.
fn drop_unless_huge(request: Request, local: SocketAddr) {
    if request.body_length().unwrap_or(0) > DROP_SAFE_BYTES {
        leak(request, local, None);
    }
}

/// Leaks `request` without running tiny_http's drop (module docs), after answering
/// with the raw `answer`, if any, and closes its connection's descriptors.
fn leak(request: Request, local: SocketAddr, answer: Option<&[u8]>) {
    let peer = request.remote_addr().copied();
    std::mem::forget(request);
    if let Some(peer) = peer {
        sockets::close_leaked(local, peer, answer);
    }
}

impl BodyError {
    fn answer(&self) -> (u16, &'static str) {
        match self {
            BodyError::TooLarge => (400, "Request too large"),
            BodyError::TimedOut => (408, "Request did not arrive within 15 s; send it again"),
            BodyError::Broken => (400, "Request body could not be read"),
        }
    }
}

/// The body tiny_http already holds in memory (at most [`EAGER_BODY_BYTES`]): no
/// deadline and no read buffer needed.
fn read_memory_body(request: &mut Request) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::with_capacity(request.body_length().unwrap_or(0).min(EAGER_BODY_BYTES));
    match request.as_reader().read_to_end(&mut body) {
        Ok(_) if body.len() > MAX_BODY_BYTES => Err(BodyError::TooLarge),
        Ok(_) => Ok(body),
        Err(_) => Err(BodyError::Broken),
    }
}

/// The body still on the socket, read under `deadline`.
fn read_body(
    request: &mut Request,
    connection: Option<Connection>,
    deadline: Instant,
) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    // Each read blocks at most `READ_SLICE` (set once), then the final slice is set to
    // end exactly at the deadline: two `setsockopt`s per body, not one per read.
    let mut slice_set: Option<Duration> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BodyError::TimedOut);
        }
        let slice = left.min(READ_SLICE);
        let stale = slice_set.map_or(true, |set| set == READ_SLICE && slice < READ_SLICE);
        if let (true, Some(connection)) = (stale, connection) {
            connection
                .set_read_timeout(Some(slice))
                .map_err(|_| BodyError::Broken)?;
            slice_set = Some(slice);
        }
        match request.as_reader().read(&mut chunk) {
            Ok(0) => return Ok(body),
            Ok(n) if body.len() + n > MAX_BODY_BYTES => return Err(BodyError::TooLarge),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Err(BodyError::Broken),
        }
    }
}

fn error_body(message: &str) -> Vec<u8> {
    json!({ "ok": false, "error": message })
        .to_string()
        .into_bytes()
}

fn json_header() -> Header {
    Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
        .expect("a constant, valid header")
}

/// A complete HTTP/1.1 response that closes the connection.
fn raw_response(status: u16, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        408 => "Request Timeout",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

type Job = Box<dyn FnOnce() + Send>;
/// The idle handlers: each one's thread id and the sender of its next job.
type IdleList = Mutex<Vec<(ThreadId, Sender<Job>)>>;

/// Handler threads: an idle one is reused, else a new one is started.
#[derive(Clone)]
struct Handlers {
    /// How long an idle handler waits for a job before it exits.
    idle_for: Duration,
    /// Each idle handler, with the sender of its next job. `run` pops one to send it a
    /// job; an idle handler that times out leaves only after taking itself out of this
    /// list, so a job is never sent to a handler that is leaving.
    idle: Arc<IdleList>,
}

impl Default for Handlers {
    fn default() -> Self {
        Handlers {
            idle_for: HANDLER_IDLE,
            idle: Arc::default(),
        }
    }
}

impl Handlers {
    /// Runs `job` on an idle handler or a new one; false when no thread could be started
    /// (the job, with any request it holds, is then dropped here).
    fn run(&self, mut job: Job) -> bool {
        loop {
            let next = lock_or_recover(&self.idle).pop();
            match next {
                Some((_, handler)) => match handler.send(job) {
                    Ok(()) => return true,
                    // Only if that handler died; try the next one.
                    Err(returned) => job = returned.0,
                },
                None => break,
            }
        }
        let (idle, idle_for) = (self.idle.clone(), self.idle_for);
        let spawned = thread::Builder::new()
            .name("agent-tools-http".into())
            .spawn(move || handler_loop(job, &idle, idle_for));
        if let Err(e) = spawned {
            // The job is dropped with its request: tiny_http answers 500.
            eprintln!("agent-tools: could not start a handler thread: {e}");
            return false;
        }
        true
    }

    /// Lets every idle handler exit now.
    fn release_idle(&self) {
        lock_or_recover(&self.idle).clear();
    }
}

fn handler_loop(first: Job, idle: &IdleList, idle_for: Duration) {
    let me = thread::current().id();
    let mut job = first;
    loop {
        job();
        let (sender, jobs) = channel();
        lock_or_recover(idle).push((me, sender));
        job = match jobs.recv_timeout(idle_for) {
            Ok(next) => next,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let mut listed = lock_or_recover(idle);
                if let Some(at) = listed.iter().position(|(id, _)| *id == me) {
                    listed.swap_remove(at);
                    return;
                }
                drop(listed);
                // `run` popped us just now and is sending a job (or `release_idle`
                // dropped our sender): wait for it.
                match jobs.recv() {
                    Ok(next) => next,
                    Err(_) => return,
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::mpsc;

    fn handlers(idle_for: Duration) -> Handlers {
        Handlers {
            idle_for,
            idle: Arc::default(),
        }
    }

    #[test]
    fn an_idle_handler_is_reused() {
        let pool = handlers(Duration::from_secs(5));
        let (done, ran) = mpsc::channel();
        let mut threads = HashSet::new();
        for _ in 0..200 {
            let done = done.clone();
            pool.run(Box::new(move || done.send(thread::current().id()).unwrap()));
            threads.insert(ran.recv_timeout(Duration::from_secs(5)).unwrap());
            // The job has run; wait until its handler has listed itself idle again, so
            // the next job must go to it rather than to a new thread.
            let deadline = Instant::now() + Duration::from_secs(5);
            while lock_or_recover(&pool.idle).is_empty() {
                assert!(Instant::now() < deadline, "the handler never became idle");
                thread::yield_now();
            }
        }
        assert_eq!(threads.len(), 1, "{} threads for 200 jobs", threads.len());
        pool.release_idle();
    }

    #[test]
    fn no_job_is_lost_to_a_handler_that_is_leaving() {
        // Jobs arrive around the moment idle handlers time out, again and again.
        let pool = handlers(Duration::from_micros(300));
        let (done, ran) = mpsc::channel();
        for i in 0..2000u32 {
            let done = done.clone();
            pool.run(Box::new(move || done.send(i).unwrap()));
            ran.recv_timeout(Duration::from_secs(5))
                .expect("every job runs");
            thread::sleep(Duration::from_micros(u64::from(i % 7) * 100));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !lock_or_recover(&pool.idle).is_empty() {
            assert!(Instant::now() < deadline, "idle handlers never left");
            thread::sleep(Duration::from_millis(1));
        }
    }
}
