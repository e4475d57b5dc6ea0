//! The HTTP front: one accept thread, the only caller of tiny_http's `recv`; handler
//! threads for everything that may block on a client; and the rule that decides which
//! thread does what.
//!
//! ## Who may block on a client, and who must not
//! tiny_http reads a body over 1 KiB lazily, from the socket, on whichever thread reads
//! the `Request`, with no timeout (dropping a `Request` with its body unread reads none
//! of it and ends the connection: the patch in `vendor/tiny_http`); writing a response
//! blocks while the client does not read. Either on the accept thread (or on a project
//! worker, or the reaper) would let one client stall every other. The accept thread
//! first checks the headers, in the spec's order:
//! 1. `Origin` or `Sec-Fetch-Site` present, method and path not POST `/call` (nor A2A's:
//!    `messaging::a2a::Dialect`), or a protocol upgrade -> 403 `Unsupported request`;
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
//! (`Front::can_write_now`): the answers written since the connection's send queue was
//! last seen empty (`SIOCOUTQ`, asked once per several small answers), this one
//! included, come to at most [`WRITE_NOW_BYTES`]. Otherwise, and for handlers always, a
//! handler writes it. So a client that does not read its answers holds one handler (and
//! no one else: never the accept thread or a worker) until it reads or closes; a single write
//! that makes no progress for 15 s (`SO_SNDTIMEO`, see `sockets`) fails, and the
//! handler then ends that connection and drops the calls waiting behind it. (A client
//! that reads a little now and then keeps resetting that timer: bounding a whole answer
//! would need a watchdog thread, which we do not have.) A queued call whose operation
//! has not finished within `Clock::answer_wait` is answered by the reaper ("outcome
//! unknown"); the operation's later result is then dropped.
//!
//! ## Files
//! This file: the accept thread, [`Http`], and `Front` (who runs and answers a call).
//! `checks` (the head's checks), `body` (reading bodies under the deadline), `in_order`
//! (one call in flight per connection), `reaper` (connections without a call in flight:
//! tiny_http reads their heads with no timeout, a thread each), `handlers` (the handler
//! threads).
//!
//! ## Threads
//! Handlers are reused when idle and exit after [`HANDLER_IDLE`] without work. A
//! connection has at most one call in flight at a time (`InOrder`; tiny_http parses
//! pipelined requests ahead of their answers), and whichever thread answers it takes
//! the connection's next one, so calls are answered in order and live handlers never
//! outnumber open connections; at most [`WAITING_CALLS_MAX`] more wait behind it, and
//! one more ends the connection, so a client that pipelines without reading cannot
//! grow memory.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tiny_http::{Header, Request, Response};

mod body;
mod checks;
mod handlers;
mod in_order;
mod reaper;

use body::{error_body, read_body, read_memory_body, Refusal, NOT_JSON};
use checks::{body_in_memory, check_headers, writes_status};
use handlers::Handlers;
use in_order::{Admitted, InOrder};
use reaper::reap_loop;

use super::{lock_or_recover, AgentToolServer, Invoked, ProcessEffects, WireAnswer};
use crate::base::answers::response_bytes;
use crate::base::listening::Listening;
use crate::base::sockets::{self, KnownConnections};
use crate::messaging::a2a::Dialect;
use crate::protocol::ToolSession;

/// A whole request must arrive within this long.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(15);
/// An idle handler thread exits after this long.
pub const HANDLER_IDLE: Duration = Duration::from_secs(5);
/// How often the reaper looks at our connections (module docs).
pub const REAP_EVERY: Duration = Duration::from_millis(250);
/// At most this many connections without a call in flight are kept open.
pub const QUIET_CONNECTIONS_MAX: usize = 256;
/// At most this many calls wait behind a connection's call in flight (module docs).
pub const WAITING_CALLS_MAX: usize = 8;
/// With the descriptor search off, what the server remembers of a connection (that it
/// was ended, when it was last answered) is forgotten after this long, since it cannot
/// see the connection close (`ProcessEffects`).
pub const FORGET_ENDED_AFTER: Duration = Duration::from_secs(60);
/// With no connection open for this long, the burst's threads (ours and tiny_http's
/// connection threads, both idle-timed at 5 s) are gone: the reaper then trims the heap.
const TRIM_AFTER: Duration = Duration::from_secs(6);
/// Bodies up to this size tiny_http has read into memory before `recv` returns.
const EAGER_BODY_BYTES: usize = 1024;
/// Answers coming to at most this many bytes since the connection's send queue was last
/// seen empty may be written by a thread that must not block: Linux makes a TCP write
/// wait only while the bytes queued (unsent or unacknowledged, with the kernel's
/// per-buffer overhead) exceed the send buffer, 16 KiB to start with (tcp_wmem).
const WRITE_NOW_BYTES: usize = 8 * 1024;
/// What an answer counts beyond its body: its head (with a `100 Continue` before it)
/// and the kernel's overhead for one write.
const ANSWER_OVERHEAD: usize = 1024;
/// How long stopping waits for the accept thread, which may be inside an app's callback
/// (`Workspace`, `CanvasOwner::current_list`) that blocks.
pub const ACCEPT_JOIN_WAIT: Duration = Duration::from_secs(2);
/// The longest one body read may block before the deadline is checked again.
const READ_SLICE: Duration = Duration::from_secs(1);

/// A running HTTP front.
pub struct Http {
    /// The listening socket and the tiny_http server on it (rebuilt when tiny_http's
    /// accept thread ends: `listening`).
    listening: Arc<Listening>,
    accept: JoinHandle<()>,
    /// Disconnected when the accept thread ends (its sender is dropped with the thread).
    accept_ended: Receiver<()>,
    reaper: JoinHandle<()>,
    stopping: Arc<AtomicBool>,
    front: Arc<Front>,
}

impl Http {
    /// Binds `127.0.0.1:0` and starts the accept thread for `owner`, doing to the process
    /// only what `effects` allows.
    pub fn start(owner: Weak<AgentToolServer>, effects: ProcessEffects) -> io::Result<Http> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        sockets::set_listener_write_timeout(&listener)?;
        let local = listener.local_addr()?;
        let listening = Arc::new(Listening::new(listener, "agent-tools")?);
        let stopping = Arc::new(AtomicBool::new(false));
        let front = Arc::new(Front {
            owner,
            in_order: InOrder::default(),
            known: KnownConnections::new(effects.search_descriptors),
            trim_heap: effects.trim_heap,
            handlers: Handlers::new(HANDLER_IDLE),
            local,
            hosts: [
                format!("127.0.0.1:{}", local.port()),
                format!("localhost:{}", local.port()),
            ],
            queued: QueuedCalls::default(),
        });
        let (ending, accept_ended) = mpsc::channel::<()>();
        let accept = {
            let (listening, stopping, front) = (listening.clone(), stopping.clone(), front.clone());
            thread::Builder::new()
                .name("agent-tools-accept".into())
                .spawn(move || {
                    let _ending = ending;
                    accept_loop(&listening, &stopping, &front);
                })?
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
            accept_ended,
            reaper,
            stopping,
            front,
        })
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.front.local.port()
    }

    /// Stops listening, joins the accept thread (which answers requests still queued
    /// with 503) unless it is still inside an app callback after [`ACCEPT_JOIN_WAIT`]
    /// (then it is left to end when the callback returns, answering nothing more), ends
    /// every open connection and releases idle handlers.
    pub fn stop(self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.listening.stop();
        if let Err(RecvTimeoutError::Disconnected) =
            self.accept_ended.recv_timeout(ACCEPT_JOIN_WAIT)
        {
            let _ = self.accept.join();
        }
        self.reaper.thread().unpark();
        let _ = self.reaper.join();
        self.front.known.end_all(self.front.local);
        self.front.handlers.release_idle();
        // Dropping the last reference lets tiny_http's own accept thread end.
        drop(self.listening);
    }
}

/// What the accept thread decided from the headers.
enum Verdict {
    Refuse(u16, &'static str),
    Accept(Arc<ToolSession>, Dialect),
}

/// What every thread that answers calls shares: the accept thread, handlers, project
/// workers (answering their queued calls) and the reaper (answering overdue ones).
struct Front {
    owner: Weak<AgentToolServer>,
    in_order: InOrder,
    /// Descriptors of our connections (the reaper remembers every open one).
    known: KnownConnections,
    handlers: Handlers,
    local: SocketAddr,
    /// The `Host` values accepted (see `check_headers`), made once.
    hosts: [String; 2],
    queued: QueuedCalls,
    /// Whether the reaper trims the heap after a burst (`ProcessEffects::trim_heap`).
    trim_heap: bool,
}

/// The requests of calls whose operation went to a project queue, by a number of their
/// own: answered by whoever takes one first, the project worker (or the waiter) with the
/// operation's result or the reaper once it is overdue: `Clock::answer_wait` after it
/// was queued, or after its wait's deadline.
#[derive(Default)]
struct QueuedCalls {
    last_id: AtomicU64,
    /// Each request with when it is overdue.
    waiting: Mutex<HashMap<u64, (Instant, Request)>>,
}

impl QueuedCalls {
    fn add(&self, request: Request, overdue: Instant) -> u64 {
        let id = self.last_id.fetch_add(1, Ordering::Relaxed);
        lock_or_recover(&self.waiting).insert(id, (overdue, request));
        id
    }

    /// The operation of call `id` waits: it is overdue only at `overdue`.
    fn waits_until(&self, id: u64, overdue: Instant) {
        if let Some((due, _)) = lock_or_recover(&self.waiting).get_mut(&id) {
            *due = overdue;
        }
    }

    fn take(&self, id: u64) -> Option<Request> {
        lock_or_recover(&self.waiting)
            .remove(&id)
            .map(|(_, request)| request)
    }

    /// Takes every request that is overdue.
    fn take_overdue(&self) -> Vec<Request> {
        let (mut waiting, now) = (lock_or_recover(&self.waiting), Instant::now());
        let (overdue, kept) = std::mem::take(&mut *waiting)
            .into_iter()
            .partition(|(_, (due, _))| *due <= now);
        *waiting = kept;
        overdue.into_values().map(|(_, request)| request).collect()
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
        let peer = request.remote_addr().copied();
        let call = Call {
            in_memory: body_in_memory(&request),
            request,
            verdict,
            arrived,
        };
        match self.in_order.admit(call) {
            Admitted::Run(call) => self.drive(&owner, Some(call), On::SharedThread),
            Admitted::Parked => {}
            Admitted::Drop(calls) => {
                // Ended both ways first, so tiny_http writes nothing for the dropped calls
                // (the remembered descriptor: no scan of every descriptor on this thread).
                if let Some(connection) = peer.and_then(|p| self.known.find(self.local, p)) {
                    connection.end();
                }
                self.handlers.run(Box::new(move || drop(calls)));
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

    /// Handles `next`, if any, and then each next call of its connection that this thread
    /// answers, in a loop (not by recursion: a client pipelining without end must not
    /// grow the stack). On a thread that must not block, a call that may goes to a
    /// handler with the rest: a body still on the socket, or a session whose next
    /// `session_info` writes its new status to disk.
    fn drive(self: &Arc<Self>, owner: &Arc<AgentToolServer>, mut next: Option<Call>, on: On) {
        while let Some(call) = next {
            if on == On::SharedThread && (writes_status(&call) || !call.in_memory) {
                let (front, owner) = (self.clone(), owner.clone());
                let peer = call.request.remote_addr().copied();
                let job = Box::new(move || front.drive(&owner, Some(call), On::Handler));
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
        let (mut request, verdict) = (call.request, call.verdict);
        let (arrived, in_memory) = (call.arrived, call.in_memory);
        let peer_addr = request.remote_addr().copied();
        let peer_port = peer_addr.map(|peer| peer.port());
        let refuse = |request, session, (status, message): Refusal, body_read| {
            owner.activity.refused(session, status, message, peer_port);
            self.finish(owner, request, (status, error_body(message)), body_read, on)
        };
        let (session, dialect) = match verdict {
            Verdict::Refuse(status, message) => {
                return refuse(request, None, (status, message), in_memory)
            }
            Verdict::Accept(session, dialect) => (session, dialect),
        };
        let body = if in_memory {
            read_memory_body(&mut request)
        } else {
            let connection = request
                .remote_addr()
                .and_then(|peer| self.known.find(self.local, *peer));
            let body = read_body(&mut request, connection, arrived + REQUEST_DEADLINE);
            if let Some(connection) = connection {
                let _ = connection.set_read_timeout(None);
            }
            body
        };
        let raw = match body.map(|body| serde_json::from_slice::<Value>(&body)) {
            Ok(Ok(raw)) => Some(raw),
            // A2A answers this in JSON-RPC's way (`Dialect::read`).
            Ok(Err(_)) if dialect != Dialect::Tool => None,
            Ok(Err(_)) => return refuse(request, Some(&session), NOT_JSON, true),
            Err(refusal) => return refuse(request, Some(&session), refusal, false),
        };
        let (raw, reply) = match dialect.read(raw, self.local.port()) {
            Ok(read) => read,
            Err((answer, why)) => {
                owner
                    .activity
                    .refused(Some(&session), answer.0, &why, peer_port);
                return self.finish(owner, request, answer, true, on);
            }
        };
        let pending = match owner.invoke_wire(&session, &raw) {
            Invoked::Now(answer) => {
                return self.finish(owner, request, reply.answer(answer), true, on)
            }
            Invoked::Queue(pending) => pending,
        };
        let answer_wait = owner.clock.answer_wait();
        let id = self.queued.add(request, Instant::now() + answer_wait);
        let waiting = {
            let front = self.clone();
            move |deadline| front.queued.waits_until(id, deadline + answer_wait)
        };
        let later = {
            let (front, owner, reply) = (self.clone(), owner.clone(), reply.clone());
            move |answer: WireAnswer| {
                // On the project worker, which must not block either; unless the reaper
                // has already answered it as overdue.
                if let Some(request) = front.queued.take(id) {
                    let answer = reply.answer(answer);
                    let next = front.finish(&owner, request, answer, true, On::SharedThread);
                    front.drive(&owner, next, On::SharedThread);
                }
            }
        };
        // A waiting call whose client closed its connection frees its place at once.
        let hung_up = {
            let (front, peer) = (self.clone(), peer_addr);
            move || {
                peer.and_then(|peer| front.known.find(front.local, peer))
                    .is_some_and(|connection| connection.hung_up())
            }
        };
        match pending.queue(later, waiting, hung_up) {
            Ok(()) => None,
            Err(answer) => {
                let request = self.queued.take(id)?;
                self.finish(owner, request, reply.answer(answer), true, on)
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
        if !body_read && !body_in_memory(&request) {
            // The patched tiny_http leaves the rest of a declared length unread and ends
            // the connection; the rest of a chunked body, or what it had already read
            // past the head (a smuggled request), it may still parse as requests: the
            // read side is shut, and the connection counts as ended, so none of them
            // ever runs.
            if let Some(peer) = peer {
                lock_or_recover(&self.in_order.ended).insert(peer, Instant::now());
            }
            if let Some(connection) = peer.and_then(|p| self.known.find(self.local, p)) {
                connection.stop_reading();
            }
        }
        if on == On::Handler || self.can_write_now(peer, answer.len()) {
            return self.respond(request, status, answer, body_read);
        }
        let (front, owner) = (self.clone(), owner.clone());
        let job = Box::new(move || {
            let next = front.respond(request, status, answer, body_read);
            front.drive(&owner, next, On::Handler);
        });
        if !self.handlers.run(job) {
            self.lost(peer);
        }
        None
    }

    /// After a call in flight was lost (a handler could not start, its answer could not be
    /// written): ends its connection and drops the calls behind it, so the connection is
    /// not left in flight.
    fn lost(&self, peer: Option<SocketAddr>) {
        if let Some(connection) = peer.and_then(|p| self.known.find(self.local, p)) {
            connection.end();
        }
        self.in_order.discard(peer);
    }

    /// True when writing `len` bytes to `peer`'s connection cannot block (module docs);
    /// its send queue is asked through the descriptor the reaper remembered.
    fn can_write_now(&self, peer: Option<SocketAddr>, len: usize) -> bool {
        let Some(peer) = peer.filter(|_| len <= WRITE_NOW_BYTES) else {
            return false;
        };
        match self.in_order.unchecked(&peer, false) {
            Some(unchecked) if unchecked + len > WRITE_NOW_BYTES => {
                let known = self.known.remembered(self.local, peer);
                let empty = known.is_some_and(|connection| connection.send_queue_empty());
                if empty {
                    self.in_order.unchecked(&peer, true);
                }
                empty
            }
            _ => true,
        }
    }

    /// Writes the answer (the whole body read: one write, `response_bytes`, through
    /// tiny_http's writer, which keeps pipelined answers in order; else tiny_http's
    /// `respond`, which writes before the request's drop leaves the rest of its body
    /// unread and ends the connection), then gives the connection's next call. A failed write ends the connection.
    fn respond(
        &self,
        request: Request,
        status: u16,
        answer: Vec<u8>,
        body_read: bool,
    ) -> Option<Call> {
        let (peer, written) = (request.remote_addr().copied(), answer.len());
        let sent = if body_read {
            let response = response_bytes(&request, status, &answer, SystemTime::now());
            let mut writer = request.into_writer();
            writer.write_all(&response).and_then(|()| writer.flush())
        } else {
            let json = Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..]);
            let response = Response::from_data(answer).with_status_code(status);
            request.respond(response.with_header(json.expect("a constant, valid header")))
        };
        if sent.is_err() {
            // Most likely `SO_SNDTIMEO`: the client does not read (or it is gone). Its
            // stream is now cut mid-answer, so end it (its waiting calls then fail fast).
            self.lost(peer);
            return None;
        }
        self.in_order.next(peer, written)
    }
}

/// The accept thread: the only caller of tiny_http's `recv` (through [`Listening::next`]).
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
