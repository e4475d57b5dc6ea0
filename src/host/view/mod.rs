//! # The view room
//!
//! Owns the canvas view, the page where the person watches and acts. Offers the rest of
//! the host `BoundView` (bound before `serve`'s ready line, started after it). It reads
//! the canvas, terminals and browser rooms and acts only through their code and the
//! person room's (`links`, `browser_control`).
//!
//! The canvas view: a web page on its own loopback port that shows a person the
//! project's canvas live — every node where it is, terminal screens, browser pages,
//! links, the selection, and the agents with their status — and lets that person act:
//! type into terminals, open and close terminals, move and resize nodes, link agents,
//! switch browser control, launch agents, answer the calls waiting for their approval
//! and set each agent's rules (`actions.rs`, `keys.rs`). `serve --view-only` serves the
//! same page watch-only: the waiting calls show, every action is refused.
//!
//! The agents' `/call` port and its rules are untouched: this is a second tiny_http server
//! owned by the host, started by `serve` unless `--no-view`.
//!
//! Access (the same rules as `/call` where they apply):
//! - A view key, 32 random bytes in hex, made at start and carried in the URL fragment
//!   (`http://127.0.0.1:PORT/#key=…`), so it is never in a request line, a log or a
//!   `Referer`. The page's own files (HTML, JS, CSS, embedded in the binary) are served
//!   without it; every data request needs `Authorization: Bearer <view key>`, compared in
//!   constant time. An agent token is not a view key, and the view key is not a session:
//!   it opens nothing on `/call`.
//! - `Host` must be `127.0.0.1:PORT` or `localhost:PORT` (DNS rebinding); an `Origin` other
//!   than the view's own, or a `Sec-Fetch-Site` other than `same-origin`/`none`, is refused
//!   (another localhost port is same-site, so `same-site` is refused too). `GET` takes
//!   no body and changes nothing.
//! - Actions are `POST /api/act` only, refused before anything is read or done unless
//!   all of these hold: `Origin` present and the view's own, `Sec-Fetch-Site:
//!   same-origin` present, `Content-Type: application/json` (no form or `text/plain`
//!   post, the content types a page can send cross-site without a preflight), a
//!   `Content-Length` of at most [`actions::MAX_ACT_BODY`] (no chunked body), the key,
//!   and a view that is not watch-only. Any other method (`OPTIONS` included: a preflight
//!   gets 403 or 405, never a CORS header) is refused.
//! - The view's port is refused to the host's own Chromium (handed to the browser's
//!   navigation policy, [`crate::host::browser::refuse_port`]), so an agent cannot open
//!   the page that acts.
//! - Every answer carries a `Content-Security-Policy` allowing only the page's own script
//!   and style (images from `data:` for screenshots), `frame-ancestors 'none'`,
//!   `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`, `Referrer-Policy:
//!   no-referrer` and `Cache-Control: no-store`; never a CORS header.
//!
//! Live updates are long polls: `GET /api/state?viewer=V&since=VERSION&visible=ID,…`
//! answers once the snapshot (`snapshot.rs`) differs from the one of `since` (at the
//! soonest one tick after the poll, so a viewer is answered at most 4 times a second), else
//! after [`LONG_POLL`]. A snapshot is made only for a waiting poll, every [`POLL_TICK`]
//! (terminal sessions and screens at most every `snapshot::SCREENS_EVERY`, in one tmux call,
//! and none while nothing in view can have changed: `HostTerminals::states_and_screens`),
//! so nothing is computed while nobody watches; terminal screens are captured only for
//! the node ids the page says are in view, and `GET /api/screenshot?node=ID` takes at
//! most one screenshot per page every [`SCREENSHOT_EVERY`] (cached), however many ask.
//! At most [`MAX_VIEWERS`] viewers (page instances, by their random viewer id) at once.
//! For [`ECHO_WINDOW`] after the person's last key, polls tick every [`ECHO_TICK`] and
//! read the screens as often (so an echo shows within tens of milliseconds), and the
//! poll the page starts right after sending keys (`soon=1`) does not wait first.
//! Answers go out in one write (`whole_answer`).
//!
//! Threads: one accept thread (the only `recv` caller, through `Listening`, which
//! outlives tiny_http's own accept thread) checks the head and refuses what it must with
//! a small answer; anything else runs on a short-lived thread of its own, at most
//! [`MAX_IN_FLIGHT`] at once. A client that stalls holds a thread only so long: each
//! write waits at most 15 s (`SO_SNDTIMEO` on the listener), and a reaper thread ends a
//! connection on which no request is being answered once it has been quiet for
//! [`QUIET_CUT`] (a head that never arrives included), and the quietest ones past
//! [`MAX_CONNECTIONS`]. (A read timeout on the listener is no way to do this: it would
//! also end `accept` after that long without a new connection, and tiny_http's accept
//! thread with it.)

mod actions;
mod keys;
mod snapshot;
mod styled;

use std::collections::{HashMap, HashSet};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tiny_http::{HTTPVersion, Header, Method, Request, Response, StatusCode};

pub use actions::MAX_ACT_BODY;
pub use keys::MAX_TEXT_CHARS;
pub use snapshot::ViewSource;

use crate::base::listening::Listening;
use crate::base::sockets::{open_connections, set_listener_write_timeout, Connection};
use crate::base::{constant_time_eq, decode_secret, lock_or_recover, to_hex};
use crate::host::HostError;

/// At most this many viewers (open pages) at once; the next is refused.
pub const MAX_VIEWERS: usize = 8;
/// A viewer that has not polled for this long no longer counts.
pub const VIEWER_TTL: Duration = Duration::from_secs(20);
/// A poll with nothing new is answered after this long anyway.
pub const LONG_POLL: Duration = Duration::from_secs(10);
/// How often a waiting poll looks for a change.
pub const POLL_TICK: Duration = Duration::from_millis(250);
/// At most one screenshot of a page this often.
pub const SCREENSHOT_EVERY: Duration = Duration::from_secs(2);
/// At most this many requests being answered at once.
pub const MAX_IN_FLIGHT: usize = 32;
/// A view connection with no request being answered is ended after this long quiet.
pub const QUIET_CUT: Duration = Duration::from_secs(15);
/// At most this many view connections are kept open; past it the quietest are ended.
pub const MAX_CONNECTIONS: usize = 64;
/// How often the reaper looks at the view's connections.
const REAP_EVERY: Duration = Duration::from_secs(1);
/// The path of the person's actions, the view's only `POST`.
pub const ACT_PATH: &str = "/api/act";
/// For this long after the person's last key, polls look at the screens every
/// [`ECHO_TICK`] (so a key's echo shows at once), and a poll the page starts right
/// after its keys (`soon=1`) does not wait a tick first.
pub const ECHO_WINDOW: Duration = Duration::from_millis(1500);
/// How often a poll looks while the person types.
pub const ECHO_TICK: Duration = Duration::from_millis(15);

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_JS: &str = include_str!("view.js");
const PAGE_CSS: &str = include_str!("view.css");

/// The headers every answer carries.
const SECURITY_HEADERS: [(&str, &str); 6] = [
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
];

/// A canvas view with its port bound and its URL made, not serving yet. `serve` prints
/// its ready line (with the URL) between [`CanvasView::bind`] and [`BoundView::serve`],
/// so a start does not wait for the view's seven threads (tiny_http's five, the accept
/// thread, the reaper); a page opened meanwhile waits in the listen backlog.
pub struct BoundView {
    listener: TcpListener,
    shared: Arc<Shared>,
    url: String,
}

impl BoundView {
    /// The page's address with its key in the fragment (the ready line's `viewUrl`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Starts tiny_http on the bound port, the accept thread and the reaper.
    pub fn serve(self) -> Result<CanvasView, HostError> {
        let BoundView {
            listener,
            shared,
            url,
        } = self;
        let listening = Arc::new(Listening::new(listener, "canvas view").map_err(view_failed)?);
        let mut view = CanvasView {
            listening: listening.clone(),
            shared: shared.clone(),
            threads: Vec::new(),
            url,
        };
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("view-accept".into())
                .spawn(move || accept_loop(&listening, &shared))
                .map_err(view_failed)?
        };
        view.threads.push(accept);
        let reaper = std::thread::Builder::new()
            .name("view-reaper".into())
            .spawn(move || reap_loop(&shared))
            .map_err(view_failed)?;
        view.threads.push(reaper);
        Ok(view)
    }
}

fn view_failed(e: io::Error) -> HostError {
    HostError::Other(format!("cannot start the canvas view: {e}"))
}

/// A running canvas view; [`CanvasView::stop`] (or dropping it) ends it.
pub struct CanvasView {
    listening: Arc<Listening>,
    shared: Arc<Shared>,
    /// The accept thread and the reaper.
    threads: Vec<JoinHandle<()>>,
    url: String,
}

/// What the request threads share.
struct Shared {
    key: [u8; 32],
    /// The accepted `Host` values and the view's own origins.
    hosts: [String; 2],
    origins: [String; 2],
    source: ViewSource,
    /// Viewer id -> when it last polled.
    viewers: Mutex<HashMap<String, Instant>>,
    in_flight: AtomicUsize,
    /// (node, tab) -> when taken and the answer.
    screenshots: Mutex<HashMap<(String, String), (Instant, Value)>>,
    /// Each connection's requests being answered and when it was last busy (reaper).
    peers: Mutex<HashMap<SocketAddr, Peer>>,
    local: SocketAddr,
    stopping: AtomicBool,
    /// `serve --view-only`: every action is refused.
    view_only: bool,
    /// `<data>`, for `browser-control`'s request file.
    data: PathBuf,
    /// When the person last typed (see [`ECHO_WINDOW`]).
    last_key: Mutex<Option<Instant>>,
}

/// What the reaper needs to know of one view connection.
struct Peer {
    in_flight: usize,
    last_busy: Instant,
}

/// A request being answered: counts its connection busy until dropped.
struct Busy {
    shared: Arc<Shared>,
    peer: Option<SocketAddr>,
}

impl Busy {
    fn new(shared: &Arc<Shared>, request: &Request) -> Busy {
        let peer = request.remote_addr().copied();
        if let Some(peer) = peer {
            let mut peers = lock_or_recover(&shared.peers);
            let entry = peers.entry(peer).or_insert(Peer {
                in_flight: 0,
                last_busy: Instant::now(),
            });
            entry.in_flight += 1;
        }
        Busy {
            shared: shared.clone(),
            peer,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let Some(peer) = self.peer else { return };
        if let Some(entry) = lock_or_recover(&self.shared.peers).get_mut(&peer) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_busy = Instant::now();
        }
    }
}

impl CanvasView {
    /// Binds `127.0.0.1:0` and makes a new view key: the URL is known, nothing is served
    /// yet ([`BoundView::serve`] starts the threads). `view_only` refuses every action;
    /// `data` is the data directory (`browser_control`'s request file lives under it).
    pub fn bind(source: ViewSource, view_only: bool, data: &Path) -> Result<BoundView, HostError> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(view_failed)?;
        set_listener_write_timeout(&listener).map_err(view_failed)?;
        let local = listener.local_addr().map_err(view_failed)?;
        let port = local.port();
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key)
            .map_err(|e| view_failed(io::Error::other(format!("no random bytes: {e}"))))?;
        let url = format!("http://127.0.0.1:{port}/#key={}", to_hex(&key));
        let shared = Arc::new(Shared {
            key,
            hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            origins: [
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
            ],
            source,
            viewers: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            screenshots: Mutex::default(),
            peers: Mutex::default(),
            local,
            stopping: AtomicBool::new(false),
            view_only,
            data: data.to_path_buf(),
            last_key: Mutex::new(None),
        });
        // The host's Chromium may never open the page that acts for the person.
        crate::host::browser::refuse_port(port);
        Ok(BoundView {
            listener,
            shared,
            url,
        })
    }

    /// The page's address with its key in the fragment (the ready line's `viewUrl`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops listening; polls in progress are answered at their next tick. Idempotent.
    pub fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Still refused to the host browser: the port may be bound again by anything.
        self.listening.stop();
        for thread in self.threads.drain(..) {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Drop for CanvasView {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listening: &Listening, shared: &Arc<Shared>) {
    while let Some(request) = listening.next(&shared.stopping) {
        let busy = Busy::new(shared, &request);
        if let Err((status, message)) = check_head(shared, &request) {
            refuse(request, status, &json!({ "error": message }));
            continue;
        }
        if shared.in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            refuse(
                request,
                503,
                &json!({ "error": "The view is busy; try again" }),
            );
            continue;
        }
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("view-request".into())
            .spawn(move || {
                route(&worker, request);
                drop(busy);
                worker.in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // The request went with the closure: tiny_http answers it 500 when dropped.
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The reaper (module docs): every [`REAP_EVERY`], ends the view's connections that have
/// had no request being answered for [`QUIET_CUT`] (since they were first seen, or since
/// their last answer), and the quietest past [`MAX_CONNECTIONS`].
fn reap_loop(shared: &Shared) {
    // When the reaper first saw each connection (an estimate of when it connected).
    let mut seen: HashMap<SocketAddr, Instant> = HashMap::new();
    // Connections ended and not yet closed by tiny_http's thread: not counted again (a
    // set: after a flood it can hold thousands, each looked up once per connection).
    let mut ended: HashSet<SocketAddr> = HashSet::new();
    while !shared.stopping.load(Ordering::SeqCst) {
        std::thread::park_timeout(REAP_EVERY);
        // A failed scan (no descriptor left to read /proc with) knows nothing: skip it.
        let Some(open) = open_connections(shared.local) else {
            continue;
        };
        let now = Instant::now();
        seen.retain(|peer, _| open.contains_key(peer));
        ended.retain(|peer| open.contains_key(peer));
        let mut quiet: Vec<(Instant, Connection)> = Vec::new();
        {
            let mut peers = lock_or_recover(&shared.peers);
            peers.retain(|peer, p| p.in_flight > 0 || open.contains_key(peer));
            for (peer, connection) in open.iter().filter(|(peer, _)| !ended.contains(peer)) {
                let first_seen = *seen.entry(*peer).or_insert(now);
                match peers.get(peer) {
                    Some(p) if p.in_flight > 0 => {}
                    Some(p) => quiet.push((p.last_busy.max(first_seen), *connection)),
                    None => quiet.push((first_seen, *connection)),
                }
            }
        }
        quiet.sort_by_key(|(since, _)| *since);
        let over_cap = (open.len() - ended.len()).saturating_sub(MAX_CONNECTIONS);
        for (n, (since, connection)) in quiet.into_iter().enumerate() {
            if n < over_cap || now.saturating_duration_since(since) >= QUIET_CUT {
                connection.end();
                ended.insert(connection.peer());
            }
        }
    }
}

fn header<'a>(request: &'a Request, name: &'static str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

/// The checks every request passes before anything is read or made for it (module docs).
fn check_head(shared: &Shared, request: &Request) -> Result<(), (u16, &'static str)> {
    const REFUSED: &str = "This view answers only its own page";
    const ACT_REFUSED: &str = "Actions are taken only from the view's own page (its Host, its Origin, Sec-Fetch-Site: same-origin)";
    let path = request.url().split('?').next().unwrap_or_default();
    let acting = *request.method() == Method::Post && path == ACT_PATH;
    let [ip_host, name_host] = &shared.hosts;
    let host_ok = header(request, "Host")
        .is_some_and(|host| host == ip_host || host.eq_ignore_ascii_case(name_host));
    // A browser sends both on every POST; an action without them did not come from the page.
    let origin_ok = match header(request, "Origin") {
        Some(origin) => shared.origins.iter().any(|own| own == origin),
        None => !acting,
    };
    let site_ok = match header(request, "Sec-Fetch-Site") {
        Some(site) => site == "same-origin" || (site == "none" && !acting),
        None => !acting,
    };
    if !host_ok || !origin_ok || !site_ok {
        return Err((403, if acting { ACT_REFUSED } else { REFUSED }));
    }
    let has_body = request.body_length().is_some_and(|n| n > 0)
        || header(request, "Transfer-Encoding").is_some();
    match *request.method() {
        Method::Get if has_body => return Err((400, "The view takes no request body on GET")),
        Method::Get => {}
        Method::Post if acting => check_action_head(request)?,
        _ => return Err((405, "The view answers GET, and POST on /api/act only")),
    }
    if path.starts_with("/api/") && !key_matches(shared, request) {
        return Err((
            401,
            "This view needs its key: open the viewUrl that serve printed (the key is after #key=)",
        ));
    }
    if acting && shared.view_only {
        return Err((
            403,
            "This view is watch-only (serve --view-only): it takes no actions",
        ));
    }
    Ok(())
}

/// An action's body: JSON (a content type no page can send cross-site without a
/// preflight), of a declared length within [`MAX_ACT_BODY`].
fn check_action_head(request: &Request) -> Result<(), (u16, &'static str)> {
    let json = header(request, "Content-Type").is_some_and(|kind| {
        let mime = kind.split(';').next().unwrap_or_default().trim();
        mime.eq_ignore_ascii_case("application/json")
    });
    if !json {
        return Err((415, "An action needs Content-Type: application/json"));
    }
    if header(request, "Transfer-Encoding").is_some() {
        return Err((411, "Send an action with a Content-Length, not chunked"));
    }
    match request.body_length() {
        Some(n) if n > MAX_ACT_BODY => Err((413, "This action is too large (at most 128 KiB)")),
        Some(1..) => Ok(()),
        _ => Err((411, "An action needs a JSON body with a Content-Length")),
    }
}

fn key_matches(shared: &Shared, request: &Request) -> bool {
    let presented = header(request, "Authorization").and_then(|value| {
        let (scheme, key) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| decode_secret(key.trim()))?
    });
    presented.is_some_and(|key| constant_time_eq(&key, &shared.key))
}

/// Answers a request that passed [`check_head`].
fn route(shared: &Shared, mut request: Request) {
    let (path, query) = match request.url().split_once('?') {
        Some((path, query)) => (path.to_string(), query.to_string()),
        None => (request.url().to_string(), String::new()),
    };
    let params = match parse_query(&query) {
        Ok(params) => params,
        Err(message) => return answer(request, 400, &json!({ "error": message })),
    };
    match path.as_str() {
        "/" | "/index.html" => asset(request, PAGE_HTML, "text/html; charset=utf-8"),
        "/view.js" => asset(request, PAGE_JS, "text/javascript; charset=utf-8"),
        "/view.css" => asset(request, PAGE_CSS, "text/css; charset=utf-8"),
        "/api/state" => match state(shared, &params) {
            Ok(value) => answer(request, 200, &value),
            Err((status, message)) => answer(request, status, &json!({ "error": message })),
        },
        ACT_PATH if *request.method() == Method::Post => {
            let mut body = Vec::new();
            let limit = MAX_ACT_BODY as u64 + 1;
            if request
                .as_reader()
                .take(limit)
                .read_to_end(&mut body)
                .is_err()
            {
                let error = json!({ "error": "The action's body did not arrive whole" });
                return refuse(request, 400, &error);
            }
            let acted = actions::act(&shared.source, &shared.data, &body);
            if acted.typed {
                *lock_or_recover(&shared.last_key) = Some(Instant::now());
            }
            match acted.outcome {
                Ok(value) => answer(request, 200, &json!({ "ok": true, "value": value })),
                Err(error) => answer(request, 400, &json!({ "ok": false, "error": error })),
            }
        }
        "/api/screenshot" => match screenshot(shared, &params) {
            Ok(value) => answer(request, 200, &value),
            Err((status, message)) => answer(request, status, &json!({ "error": message })),
        },
        _ => answer(request, 404, &json!({ "error": "No such page" })),
    }
}

/// `key=value&…` with values made only of id characters (`[A-Za-z0-9_,-]`), so no
/// decoding is needed and nothing odd gets further.
fn parse_query(query: &str) -> Result<HashMap<&str, &str>, &'static str> {
    let mut params = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let plain = |text: &str| {
            text.len() <= 64 * 1024
                && text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-,".contains(&b))
        };
        if !plain(key) || !plain(value) {
            return Err("Unexpected characters in the query");
        }
        params.insert(key, value);
    }
    Ok(params)
}

/// Which nodes' screens a poll wants: those it names, or (a page that has drawn nothing
/// yet, so cannot know) all of them.
pub enum Visible<'a> {
    /// These node ids.
    Only(Vec<&'a str>),
    /// Every node.
    All,
}

impl Visible<'_> {
    fn contains(&self, id: &str) -> bool {
        match self {
            Visible::Only(ids) => ids.contains(&id),
            Visible::All => true,
        }
    }
}

/// Most node ids a poll may name as visible (the canvas holds at most 500 nodes).
const MAX_VISIBLE: usize = 500;

/// `GET /api/state`: the long poll (module docs).
fn state(shared: &Shared, params: &HashMap<&str, &str>) -> Result<Value, (u16, &'static str)> {
    let viewer = params
        .get("viewer")
        .copied()
        .filter(|v| (16..=64).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or((400, "Missing or malformed viewer id"))?;
    admit_viewer(shared, viewer)?;
    let visible = match params.get("visible") {
        Some(ids) => Visible::Only(
            ids.split(',')
                .filter(|id| !id.is_empty())
                .take(MAX_VISIBLE)
                .collect(),
        ),
        None => Visible::All,
    };
    let since = params.get("since").copied().unwrap_or_default();
    let deadline = Instant::now() + LONG_POLL;
    let mut screens = snapshot::Screens::default();
    let typing = || lock_or_recover(&shared.last_key).is_some_and(|at| at.elapsed() < ECHO_WINDOW);
    // A viewer that has a version is answered at most once a tick: while something
    // changes all the time (the activity panel under load) it must not poll in a loop.
    // While the person types, a tick is short (their keys' echo may come in the answer
    // after one that showed something else), and right after their keys the page asks
    // at once (`soon`).
    let soon = params.get("soon") == Some(&"1") && typing();
    if !since.is_empty() && !soon {
        std::thread::sleep(if typing() { ECHO_TICK } else { POLL_TICK });
    }
    let answer = loop {
        let (tick, screens_every) = match typing() {
            true => (ECHO_TICK, ECHO_TICK),
            false => (POLL_TICK, snapshot::SCREENS_EVERY),
        };
        let snapshot = shared
            .source
            .snapshot(&visible, &mut screens, screens_every)
            .map_err(|_| (503, "The canvas has stopped"))?;
        let version = snapshot::version_of(&snapshot);
        if version != since || Instant::now() >= deadline || shared.stopping.load(Ordering::SeqCst)
        {
            let can_act = !shared.view_only;
            let kinds = crate::protocol::AGENT_KINDS;
            break json!({ "version": version, "canvas": snapshot, "canAct": can_act, "agentKinds": kinds });
        }
        std::thread::sleep(tick);
    };
    // Seen again at the end: a viewer with a poll in flight stays counted.
    admit_viewer(shared, viewer)?;
    Ok(answer)
}

/// Counts `viewer` in, unless [`MAX_VIEWERS`] others are watching.
fn admit_viewer(shared: &Shared, viewer: &str) -> Result<(), (u16, &'static str)> {
    let mut viewers = lock_or_recover(&shared.viewers);
    let now = Instant::now();
    viewers.retain(|_, seen| now.duration_since(*seen) < VIEWER_TTL);
    if !viewers.contains_key(viewer) && viewers.len() >= MAX_VIEWERS {
        return Err((
            429,
            "At most 8 viewers can watch this canvas at once: close another view (its place frees within 20 s), then reload",
        ));
    }
    viewers.insert(viewer.to_string(), now);
    Ok(())
}

/// `GET /api/screenshot?node=ID`: the active tab's page, at most one new picture per
/// page every [`SCREENSHOT_EVERY`].
fn screenshot(shared: &Shared, params: &HashMap<&str, &str>) -> Result<Value, (u16, &'static str)> {
    let node = params.get("node").copied().unwrap_or_default();
    let tab = shared
        .source
        .active_tab(node)
        .ok_or((404, "No such browser node"))?;
    let key = (node.to_string(), tab.clone());
    if let Some((taken, value)) = lock_or_recover(&shared.screenshots).get(&key) {
        if taken.elapsed() < SCREENSHOT_EVERY {
            return Ok(value.clone());
        }
    }
    // Taken outside the lock; two viewers at once may both take one (still bounded).
    let image = shared
        .source
        .browsers
        .screenshot(node, &tab)
        .ok()
        .filter(|b64| {
            b64.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
        });
    let value = json!({ "nodeId": node, "tabId": tab, "image": image });
    let mut screenshots = lock_or_recover(&shared.screenshots);
    screenshots.retain(|_, (taken, _)| taken.elapsed() < SCREENSHOT_EVERY * 5);
    screenshots.insert(key, (Instant::now(), value.clone()));
    Ok(value)
}

fn with_security_headers<R: io::Read>(mut response: Response<R>, kind: &str) -> Response<R> {
    for (name, value) in SECURITY_HEADERS.iter().chain(&[("Content-Type", kind)]) {
        if let Ok(header) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(header);
        }
    }
    response
}

fn asset(request: Request, body: &'static str, kind: &str) {
    whole_answer(request, 200, kind, body.as_bytes());
}

/// Answers a request whose body was read (or that had none).
fn answer(request: Request, status: u16, value: &Value) {
    whole_answer(
        request,
        status,
        "application/json",
        value.to_string().as_bytes(),
    );
}

/// Writes the whole answer from one buffer in one write. tiny_http's `respond` writes the
/// head, then a body larger than its 8 KiB buffer, separately; with Nagle's algorithm the
/// second write then waits for the client's delayed acknowledgement (40 ms on Linux), on
/// every poll that carries terminal screens.
fn whole_answer(request: Request, status: u16, kind: &str, body: &[u8]) {
    let HTTPVersion(major, minor) = *request.http_version();
    let reason = StatusCode(status).default_reason_phrase();
    let mut bytes = Vec::with_capacity(body.len() + 640);
    bytes.extend_from_slice(format!("HTTP/{major}.{minor} {status} {reason}\r\n").as_bytes());
    for (name, value) in SECURITY_HEADERS.iter().chain(&[("Content-Type", kind)]) {
        bytes.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    bytes.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    bytes.extend_from_slice(body);
    let mut writer = request.into_writer();
    let _ = writer.write_all(&bytes).and_then(|()| writer.flush());
}

/// Answers a request refused before its body was read: tiny_http's `respond`, after
/// which the patched tiny_http ends the connection rather than read the rest.
fn refuse(request: Request, status: u16, value: &Value) {
    let response = Response::from_string(value.to_string()).with_status_code(status);
    let response = with_security_headers(response, "application/json");
    let _ = request.respond(response);
}
