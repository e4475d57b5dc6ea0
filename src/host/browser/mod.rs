//! # The browser room
//!
//! Owns the host's Chromium and its pages. Offers the rest of the host
//! [`guests::ChromiumBrowsers`] (the runtime's `Browsers`: one page per browser tab),
//! [`BrowserEngine`] with its [`EngineConfig`] and [`PageId`], and [`refuse_port`] (the
//! canvas view hands in its port: no page may load it). Below it: `cdp.rs` (the DevTools
//! pipe), `process.rs`, `policy.rs`, `snapshot.rs`/`refs.rs`/`elements.rs`/`frames.rs`,
//! `activity.rs`/`waits.rs`, `dialogs.rs`, `keys.rs`, `logs.rs` (what a page logged and
//! fetched), `upload.rs` (files for a file input).
//!
//! A headless Chromium behind the `browser_*` operations, driven over the DevTools pipe.
//!
//! [`BrowserEngine`] starts one Chromium lazily, on the first [`BrowserEngine::open_page`],
//! with `--remote-debugging-pipe` (the transport is in `cdp.rs`) and a fresh profile under
//! the configured directory. Each page is a target created with `Target.createTarget` and
//! attached in flat mode. Every operation takes a deadline and never waits past it.
//!
//! Readiness: [`BrowserEngine::subscribe`] hands out a channel that receives
//! [`PageEvent::Ready`] once a page is attached and its first load has finished, and
//! [`PageEvent::Gone`] when it is closed, crashes or dies with the engine; a waiter checks
//! [`BrowserEngine::is_ready`] and then waits with `recv_timeout`.
//!
//! Navigation policy, inside the engine (the runtime's URL check covers only the URLs
//! agents pass in; a page can navigate itself):
//! - `Fetch.enable` intercepts every document request of a page (top level and frames,
//!   including each redirect hop); anything but http/https is failed as aborted, so the
//!   page stays where it was.
//! - Schemes Chromium loads without a network request (`data:`, `chrome:` ...) are not seen
//!   by `Fetch`; a main frame that commits such a URL anyway is sent to `about:blank`.
//! - Downloads are denied, pages opened by pages (popups) are closed and file choosers are
//!   intercepted (the action's answer says one opened; `browser_upload` gives a file
//!   input copies of project files instead, `upload.rs`). JavaScript
//!   dialogs stay open for the agent to answer (`dialogs.rs`).
//!
//! Waits: each page's activity (requests in flight, DOM changes, navigations, an open
//! dialog) is kept from its events (`activity.rs`); `browser_wait` and the short wait
//! after an action read it (`waits.rs`).
//!
//! Snapshots and refs: `browser_inspect` with `mode: "snapshot"` lists a page's
//! accessibility tree one element a line (`snapshot.rs`), each element with a ref kept in
//! the page's ref table (`refs.rs`); `browser_click` and `browser_type` act on a ref's
//! element after checking it is still that document's element, showing the same role and
//! name (`elements.rs`). A click reaches its element or nothing: the click guard
//! (`js/guard.js`, in every document before the page's scripts) holds every trusted
//! press, release and click that does not land in the element a click of ours aims at.
//!
//! Our page scripts run in an isolated world with `returnByValue`, so page scripts cannot
//! replace the DOM functions they use, and only JSON data comes back to this process.
//!
//! If Chromium dies, the next operation restarts it and reports that the old pages are
//! gone ([`EngineError::EngineStopped`]). [`BrowserEngine::shutdown`] kills the process
//! group, reaps the browser and removes the profile.

mod activity;
mod cdp;
mod dialogs;
mod elements;
mod frames;
pub mod guests;
mod keys;
mod logs;
mod policy;
mod process;
pub mod refs;
pub mod snapshot;
mod upload;
pub mod waits;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::base::files::private_dir;
use crate::protocol::limits::SNAPSHOT_DEFAULT_CHARS;
use activity::Activity;
use cdp::{CdpError, Connection, Event, EventHook};
use process::ChromiumProcess;
use refs::{PageRefs, RefError};

pub use policy::{document_url_allowed, refuse_port};
pub use process::EXECUTABLE_NAMES;

/// Width of every page's viewport, in CSS pixels (screenshots have this width).
pub const VIEWPORT_WIDTH: u32 = 1280;
/// Height of every page's viewport, in CSS pixels (screenshots have this height).
pub const VIEWPORT_HEIGHT: u32 = 720;
/// `inspect` returns at most this many characters of the page's text.
pub const MAX_TEXT_CHARS: usize = 24_000;
/// `inspect` returns at most this many controls.
pub const MAX_CONTROLS: usize = 100;
/// Each control's text is cut to this many characters.
pub const CONTROL_TEXT_CHARS: usize = 120;

/// The `browser_inspect` arguments that shape a snapshot (and mean nothing without one).
const SNAPSHOT_ONLY: &[&str] = &["maxChars", "snapshot", "offset", "root", "find"];

/// Uploads made so far (each gets a folder of its own, `upload.rs`).
static UPLOADS: AtomicU64 = AtomicU64::new(0);

/// The isolated world our page scripts and the click guard run in, in every frame.
const TOOLS_WORLD: &str = "termsprawl-tools";

const COMMON_JS: &str = include_str!("js/common.js");
/// The click guard (see the file): in [`TOOLS_WORLD`] of every document from its start;
/// `evaluate` and the ref click's arming run it again first, which puts it in a document
/// that lacks it and does nothing otherwise.
const GUARD_JS: &str = include_str!("js/guard.js");
const INSPECT_JS: &str = include_str!("js/inspect.js");
const LOCATE_JS: &str = include_str!("js/locate.js");
const TYPE_JS: &str = include_str!("js/type.js");
/// Arms the click guard for the whole main document (what a key press may click).
const ARM_DOCUMENT_JS: &str =
    "() => { const guard = globalThis.termsprawlGuard; if (guard) guard.arm(document, false); return null; }";
/// The viewport's size as the page sees it (after `browser_resize`).
const INNER_SIZE_JS: &str = "() => ({ w: innerWidth, h: innerHeight })";
/// What the click guard saw of the click it armed; disarms it.
const TAKE_JS: &str =
    "() => { const guard = globalThis.termsprawlGuard; return guard ? guard.take() : null; }";

/// Where Chromium comes from and where its profiles live.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The browser binary (`preferences.json` `browser.executable`); `None` searches PATH
    /// for [`EXECUTABLE_NAMES`].
    pub executable: Option<PathBuf>,
    /// Parent of the per-launch profiles (`<data>/agent-tools/browser`), created 0700.
    pub profile_dir: PathBuf,
}

/// A page: Chromium's target id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageId(pub String);

impl PageId {
    /// The target id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What happened to a page, as sent to [`BrowserEngine::subscribe`] channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageEvent {
    /// Attached and its first load finished: operations may use it.
    Ready(PageId),
    /// Closed, crashed, or lost with the engine.
    Gone(PageId),
}

/// The result of [`BrowserEngine::inspect`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspection {
    /// `location.href`.
    pub url: String,
    /// `document.title`.
    pub title: String,
    /// The first [`MAX_TEXT_CHARS`] characters of the body's `innerText`.
    pub text: String,
    /// Up to [`MAX_CONTROLS`] visible a/button/input/textarea/select/[role=button].
    pub controls: Vec<Control>,
}

/// One visible control of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Control {
    /// Lower-case tag name.
    pub tag: String,
    /// Its visible text, value or label, cut to [`CONTROL_TEXT_CHARS`] characters.
    pub text: String,
    /// A CSS selector that matched exactly this element when inspected.
    pub selector: String,
    /// `link`, `textarea`, `select`, the input or button type, or the role.
    #[serde(rename = "type")]
    pub kind: String,
}

/// Why a browser operation failed. `Display` gives a message for an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// No Chromium binary was found.
    NotInstalled,
    /// Chromium could not be started (the detail says why).
    Launch(String),
    /// Chromium exited; it has been (or will be) restarted and its pages are gone.
    EngineStopped,
    /// [`BrowserEngine::shutdown`] was called.
    ShutDown,
    /// No such page (closed, or never opened here).
    PageNotFound,
    /// The URL is not http, https or about:blank.
    UrlNotAllowed(String),
    /// Chromium reported a navigation error such as `net::ERR_NAME_NOT_RESOLVED`.
    Navigation(String),
    /// The operation's deadline passed.
    Timeout,
    /// The page refused the operation (selector, element or input problems).
    Page(String),
    /// Chromium rejected a command or sent something unexpected.
    Protocol(String),
    /// A ref or snapshot id cannot be used (unknown, stale, gone, hidden, covered).
    Ref(RefError),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::NotInstalled => write!(
                f,
                "No browser found: looked for {} on PATH. Install Chromium (Debian/Ubuntu: \
                 apt install chromium) or set browser.executable in preferences.json",
                EXECUTABLE_NAMES.join(", ")
            ),
            EngineError::Launch(detail) => write!(f, "Chromium could not be started: {detail}"),
            EngineError::EngineStopped => f.write_str(
                "The browser engine stopped and was restarted; its pages are gone. \
                 Open the page again with browser_open",
            ),
            EngineError::ShutDown => f.write_str("The browser engine has been shut down"),
            EngineError::PageNotFound => f.write_str(
                "Browser page not found or already closed; open it again with browser_open",
            ),
            EngineError::UrlNotAllowed(url) => {
                write!(f, "Browser URL is not allowed: {}", cut(url, 200))
            }
            EngineError::Navigation(detail) => write!(f, "Navigation failed: {detail}"),
            EngineError::Timeout => {
                f.write_str("Browser operation timed out; inspect the page before retrying")
            }
            EngineError::Page(message) => f.write_str(message),
            EngineError::Protocol(detail) => write!(f, "Browser command failed: {detail}"),
            EngineError::Ref(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<CdpError> for EngineError {
    fn from(error: CdpError) -> Self {
        match error {
            CdpError::Closed => EngineError::EngineStopped,
            CdpError::Timeout => EngineError::Timeout,
            CdpError::Protocol(message) => EngineError::Protocol(message),
        }
    }
}

fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

use crate::base::lock_or_recover as lock;

/// What the engine knows about one page.
struct PageState {
    session: String,
    generation: u64,
    ready: bool,
    /// [`PageEvent::Gone`] has been sent (the engine died) though the state is kept, so
    /// the next operation can say the page was lost with the engine.
    gone_sent: bool,
    /// The last document URL the policy refused for this page, if any.
    blocked: Option<String>,
    /// What the page is doing, from its events (`activity.rs`).
    activity: Activity,
}

/// State shared with the reader thread's event hook. The hook takes only these locks
/// (never the engine lock), and nobody holds them while waiting for Chromium.
#[derive(Default)]
struct Shared {
    pages: Mutex<HashMap<PageId, PageState>>,
    listeners: Mutex<Vec<Sender<PageEvent>>>,
    /// Every page target's current URL and title, as Chromium last reported them
    /// (`Target.targetInfoChanged`): navigations by agents and by the pages themselves.
    infos: Mutex<HashMap<PageId, PageInfo>>,
    /// Each page's refs and stored snapshots (`refs.rs`), dropped with the page.
    refs: Mutex<HashMap<PageId, Arc<Mutex<PageRefs>>>>,
    /// The pages' frames in other processes, by session (`frames.rs`).
    children: Mutex<frames::ChildFrames>,
}

/// A page's current address and title, as Chromium reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PageInfo {
    /// The committed URL of the main frame.
    pub url: String,
    /// `document.title`.
    pub title: String,
}

impl Shared {
    fn emit(&self, event: PageEvent) {
        lock(&self.listeners).retain(|tx| tx.send(event.clone()).is_ok());
    }

    fn remove(&self, page: &PageId) {
        lock(&self.children).retain(|_, child| child.page != *page);
        lock(&self.infos).remove(page);
        lock(&self.refs).remove(page);
        let removed = lock(&self.pages).remove(page);
        if removed.is_some_and(|state| !state.gone_sent) {
            self.emit(PageEvent::Gone(page.clone()));
        }
    }

    /// The engine of `generation` died: its pages are no longer ready, and listeners
    /// hear so now rather than at the next operation.
    fn announce_lost(&self, generation: u64) {
        let mut lost = Vec::new();
        for (page, state) in lock(&self.pages).iter_mut() {
            if state.generation == generation && !state.gone_sent {
                state.ready = false;
                state.gone_sent = true;
                lost.push(page.clone());
            }
        }
        for page in lost {
            self.emit(PageEvent::Gone(page));
        }
    }

    /// Keeps what a `targetInfo` of a page target says about its URL and title.
    fn record_info(&self, info: &Value) {
        let (Some(target), Some("page")) = (info["targetId"].as_str(), info["type"].as_str())
        else {
            return;
        };
        let text = |key: &str| info[key].as_str().unwrap_or_default().to_string();
        let info = PageInfo {
            url: text("url"),
            title: text("title"),
        };
        lock(&self.infos).insert(PageId(target.to_string()), info);
    }

    /// The ref table of `page`, made on first use.
    fn refs_of(&self, page: &PageId) -> Arc<Mutex<PageRefs>> {
        Arc::clone(lock(&self.refs).entry(page.clone()).or_default())
    }

    fn page_of_session(&self, session: &str) -> Option<PageId> {
        lock(&self.pages)
            .iter()
            .find(|(_, state)| state.session == session)
            .map(|(id, _)| id.clone())
    }

    fn record_blocked(&self, session: &str, url: &str) {
        let mut pages = lock(&self.pages);
        if let Some(state) = pages.values_mut().find(|s| s.session == session) {
            state.blocked = Some(url.to_string());
        }
    }

    /// Reads `page`'s activity, if the page is known.
    fn activity<T>(&self, page: &PageId, read: impl FnOnce(&Activity) -> T) -> Option<T> {
        lock(&self.pages)
            .get(page)
            .map(|state| read(&state.activity))
    }

    fn take_blocked(&self, page: &PageId) -> Option<String> {
        lock(&self.pages)
            .get_mut(page)
            .and_then(|s| s.blocked.take())
    }
}

/// A launched Chromium and its connection.
struct Running {
    connection: Arc<Connection>,
    process: ChromiumProcess,
    profile: PathBuf,
    generation: u64,
}

impl Running {
    fn alive(&mut self) -> bool {
        self.connection.is_alive() && !self.process.exited()
    }
}

/// One headless Chromium shared by all pages of a host. `Send + Sync`; operations on
/// different pages may run on different threads at the same time.
pub struct BrowserEngine {
    config: EngineConfig,
    shared: Arc<Shared>,
    running: Mutex<Option<Running>>,
    generations: AtomicU64,
    shut_down: AtomicBool,
}

impl BrowserEngine {
    /// An engine that has not started Chromium yet; the first `open_page` starts it.
    pub fn new(config: EngineConfig) -> Self {
        BrowserEngine {
            config,
            shared: Arc::new(Shared::default()),
            running: Mutex::new(None),
            generations: AtomicU64::new(0),
            shut_down: AtomicBool::new(false),
        }
    }

    /// The binary the engine would start, or [`EngineError::NotInstalled`]; lets a host
    /// refuse `browser_open` before it creates anything.
    pub fn find_executable(&self) -> Result<PathBuf, EngineError> {
        process::find_executable(self.config.executable.as_deref()).ok_or(EngineError::NotInstalled)
    }

    /// A channel that receives every later [`PageEvent`].
    pub fn subscribe(&self) -> Receiver<PageEvent> {
        let (tx, rx) = mpsc::channel();
        lock(&self.shared.listeners).push(tx);
        rx
    }

    /// True when the page is attached and its first load has finished.
    pub fn is_ready(&self, page: &PageId) -> bool {
        lock(&self.shared.pages)
            .get(page)
            .is_some_and(|state| state.ready)
    }

    /// The pages that are currently open.
    pub fn pages(&self) -> Vec<PageId> {
        lock(&self.shared.pages).keys().cloned().collect()
    }

    /// The browser process id while Chromium runs (also its process group id).
    pub fn browser_pid(&self) -> Option<u32> {
        lock(&self.running).as_ref().map(|r| r.process.pid())
    }

    /// Opens a page on `url` (http, https or about:blank): creates and attaches a target,
    /// applies the navigation policy and the viewport, loads `url` and waits until that
    /// first load has finished. A load that ends in a network error still opens the page
    /// (showing Chromium's error page, as a tab would); a refused URL, a failed engine or
    /// a passed deadline fail and leave no page behind. Starts (or restarts) Chromium if
    /// needed. Sends [`PageEvent::Ready`].
    pub fn open_page(&self, url: &str, deadline: Instant) -> Result<PageId, EngineError> {
        if !document_url_allowed(url) {
            return Err(EngineError::UrlNotAllowed(url.to_string()));
        }
        let (connection, generation) = self.connection(deadline)?;
        let opened = connection
            .call(
                "Target.createTarget",
                json!({ "url": "about:blank", "newWindow": true }),
                None,
                deadline,
            )
            .map_err(EngineError::from)
            .and_then(|created| string_field(&created, "targetId"))
            .map(PageId)
            .and_then(|page| {
                let attached = self.attach(&connection, &page, generation, url, deadline);
                if attached.is_err() {
                    connection.send("Target.closeTarget", json!({ "targetId": page.0 }), None);
                    self.shared.remove(&page);
                }
                attached.map(|()| page)
            });
        let page = self.unless_stopped(opened)?;
        let ready = match lock(&self.shared.pages).get_mut(&page) {
            Some(state) => {
                state.ready = true;
                true
            }
            None => false,
        };
        if !ready {
            // Closed (by itself or a crash) while loading.
            return Err(EngineError::PageNotFound);
        }
        self.shared.emit(PageEvent::Ready(page.clone()));
        Ok(page)
    }

    fn attach(
        &self,
        connection: &Connection,
        page: &PageId,
        generation: u64,
        url: &str,
        deadline: Instant,
    ) -> Result<(), EngineError> {
        let attached = connection.call(
            "Target.attachToTarget",
            json!({ "targetId": page.0, "flatten": true }),
            None,
            deadline,
        )?;
        let session = string_field(&attached, "sessionId")?;
        lock(&self.shared.pages).insert(
            page.clone(),
            PageState {
                session: session.clone(),
                generation,
                ready: false,
                gone_sent: false,
                blocked: None,
                activity: Activity::new(),
            },
        );
        let mut setup = frames::session_setup();
        setup.push((
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": VIEWPORT_WIDTH, "height": VIEWPORT_HEIGHT, "deviceScaleFactor": 1, "mobile": false }),
        ));
        for (method, params) in setup {
            connection.call(method, params, Some(&session), deadline)?;
        }
        if url == "about:blank" {
            return Ok(());
        }
        match self.load(connection, page, &session, url, deadline) {
            // Like a browser tab, the page stays and shows Chromium's error page.
            Ok(_) | Err(EngineError::Navigation(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Navigates `page` to `url` (http, https or about:blank), waits for the load event or
    /// an error, and returns the final URL (after redirects).
    pub fn navigate(
        &self,
        page: &PageId,
        url: &str,
        deadline: Instant,
    ) -> Result<String, EngineError> {
        if !document_url_allowed(url) {
            return Err(EngineError::UrlNotAllowed(url.to_string()));
        }
        self.on_page(page, deadline, |connection, session| {
            self.load(connection, page, session, url, deadline)
        })
    }

    fn load(
        &self,
        connection: &Connection,
        page: &PageId,
        session: &str,
        url: &str,
        deadline: Instant,
    ) -> Result<String, EngineError> {
        self.shared.take_blocked(page);
        // Subscribe before navigating: the load event can arrive before the reply.
        let events = connection.subscribe(session);
        let reply = connection.call(
            "Page.navigate",
            json!({ "url": url }),
            Some(session),
            deadline,
        )?;
        if let Some(error) = reply.get("errorText").and_then(Value::as_str) {
            return Err(match self.shared.take_blocked(page) {
                Some(blocked) => EngineError::UrlNotAllowed(blocked),
                None => EngineError::Navigation(error.to_string()),
            });
        }
        if reply.get("isDownload").and_then(Value::as_bool) == Some(true) {
            return Err(EngineError::Navigation(
                "the URL is a download, and downloads are denied".to_string(),
            ));
        }
        // A same-document navigation (a fragment change) has no loader and no load event.
        if let Some(loader) = reply.get("loaderId").and_then(Value::as_str) {
            wait_for_load(connection, &events, page, loader, deadline)?;
        }
        drop(events);
        if let Some(blocked) = self.shared.take_blocked(page) {
            return Err(EngineError::UrlNotAllowed(blocked));
        }
        let info = connection.call(
            "Target.getTargetInfo",
            json!({ "targetId": page.0 }),
            None,
            deadline,
        )?;
        self.shared.record_info(&info["targetInfo"]);
        info.pointer("/targetInfo/url")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| EngineError::Protocol("target info without a URL".to_string()))
    }

    /// The page's URL, title, first [`MAX_TEXT_CHARS`] characters of text and its visible
    /// controls, each with a selector that matches exactly that element.
    pub fn inspect(&self, page: &PageId, deadline: Instant) -> Result<Inspection, EngineError> {
        let limits = json!({
            "maxControls": MAX_CONTROLS,
            "controlText": CONTROL_TEXT_CHARS,
            // JavaScript counts UTF-16 units; two per character always suffice. The exact
            // cut is made here, in characters.
            "textUnits": MAX_TEXT_CHARS * 2,
        });
        let value = self.on_page(page, deadline, |connection, session| {
            evaluate(connection, page, session, INSPECT_JS, &limits, deadline)
        })?;
        let mut inspection: Inspection = serde_json::from_value(value)
            .map_err(|e| EngineError::Protocol(format!("unexpected inspect result: {e}")))?;
        inspection.text = cut(&inspection.text, MAX_TEXT_CHARS);
        inspection.controls.truncate(MAX_CONTROLS);
        Ok(inspection)
    }

    /// Clicks the one visible element matching `selector`: scrolls it into view and
    /// dispatches a real left-button press and release at its centre. Whatever of the
    /// page's document is there takes the click; a press the page moved into a frame is
    /// held there by the click guard (`js/guard.js`), and the click refused.
    pub fn click(
        &self,
        page: &PageId,
        selector: &str,
        deadline: Instant,
    ) -> Result<(), EngineError> {
        self.on_page(page, deadline, |connection, session| {
            let args = json!({ "selector": selector });
            // Also arms the guard for the page's document.
            let point = evaluate(connection, page, session, LOCATE_JS, &args, deadline)?;
            let (Some(x), Some(y)) = (point["x"].as_f64(), point["y"].as_f64()) else {
                return Err(EngineError::Protocol("no click position".to_string()));
            };
            if !click_at(connection, session, x, y, deadline)? {
                // A dialog opened, and stops the page: the answer's `after` says so.
                return Ok(());
            }
            let report = match evaluate(connection, page, session, TAKE_JS, &json!({}), deadline) {
                // The click navigated, mid-way: taken as made, as before the guard (its
                // `after` says where the page went).
                Err(EngineError::Protocol(_)) => Value::Null,
                report => report?,
            };
            match elements::guarded(&report) {
                elements::Guarded::Clicked => Ok(()),
                // Anything of the document could take it: an element of a frame did.
                _ => Err(EngineError::Page(
                    "The click landed in a frame over the element, where it was held; nothing \
                     was clicked: to click in a frame, take a snapshot (browser_inspect mode \
                     snapshot) and click by ref"
                        .to_string(),
                )),
            }
        })
    }

    /// Replaces the value of the one visible, enabled, writable input or textarea matching
    /// `selector` with `text` (native value setter), then fires `input` and `change`.
    pub fn type_text(
        &self,
        page: &PageId,
        selector: &str,
        text: &str,
        deadline: Instant,
    ) -> Result<(), EngineError> {
        let args = json!({ "selector": selector, "text": text });
        self.on_page(page, deadline, |connection, session| {
            evaluate(connection, page, session, TYPE_JS, &args, deadline).map(drop)
        })
    }

    /// The page's current URL and title as last heard from Chromium (its target events
    /// and the end of every load), without asking it; `None` for a page it does not know.
    /// Chromium reports URL changes as they happen but a title set later (by a script,
    /// or a page the page itself navigated to) only when asked: see
    /// [`BrowserEngine::refresh_page_info`].
    pub fn page_info(&self, page: &PageId) -> Option<PageInfo> {
        lock(&self.shared.infos).get(page).cloned()
    }

    /// Asks Chromium for the page's URL and title now (one round trip) and keeps them.
    pub fn refresh_page_info(&self, page: &PageId, deadline: Instant) -> Option<PageInfo> {
        let (connection, _) = self.page(page, deadline).ok()?;
        let info = connection
            .call(
                "Target.getTargetInfo",
                json!({ "targetId": page.0 }),
                None,
                deadline,
            )
            .ok()?;
        self.shared.record_info(&info["targetInfo"]);
        self.page_info(page)
    }

    /// Runs `script`, a JavaScript function expression, on `args` in a fresh isolated
    /// world of the page (page scripts cannot see or change it) and returns its JSON value.
    /// No operation uses it: it is for an embedder's (and the tests') own checks of a page.
    pub fn evaluate(
        &self,
        page: &PageId,
        script: &str,
        args: &Value,
        deadline: Instant,
    ) -> Result<Value, EngineError> {
        self.on_page(page, deadline, |connection, session| {
            evaluate(connection, page, session, script, args, deadline)
        })
    }

    /// A PNG of the viewport ([`VIEWPORT_WIDTH`] x [`VIEWPORT_HEIGHT`]), base64-encoded.
    pub fn screenshot(&self, page: &PageId, deadline: Instant) -> Result<String, EngineError> {
        self.on_page(page, deadline, |connection, session| {
            let shot = connection.call(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": false }),
                Some(session),
                deadline,
            )?;
            string_field(&shot, "data")
        })
    }

    /// Closes the page's target and sends [`PageEvent::Gone`].
    pub fn close_page(&self, page: &PageId, deadline: Instant) -> Result<(), EngineError> {
        if let Some(running) = lock(&self.running).as_ref() {
            drop(std::fs::remove_dir_all(upload::folder(
                &running.profile,
                page,
            )));
        }
        self.on_page(page, deadline, |connection, session| {
            self.shared.remove(page);
            connection.forget_session(session);
            connection
                .call(
                    "Target.closeTarget",
                    json!({ "targetId": page.0 }),
                    None,
                    deadline,
                )
                .map(drop)
                .map_err(EngineError::from)
        })
    }

    /// Runs one of the page operations by its protocol name on already validated `args`:
    /// `browser_navigate {url}` -> `{url}`, `browser_inspect` -> [`Inspection`],
    /// `browser_click {selector}` and `browser_type {selector, text}` -> `{selector}`,
    /// `browser_screenshot` -> `{image}` (base64 PNG), `browser_dialog {accept,
    /// promptText?}` -> `{dialog, accepted}`. A click, typing, navigation or dialog answer
    /// then waits briefly for what it started and says so (`waits.rs`: `after`, `url`).
    /// While a dialog is open every operation but `browser_dialog` is refused.
    pub fn run_operation(
        &self,
        page: &PageId,
        operation: &str,
        args: &Map<String, Value>,
        deadline: Instant,
    ) -> Result<Value, EngineError> {
        let acts = matches!(
            operation,
            "browser_click"
                | "browser_type"
                | "browser_navigate"
                | "browser_dialog"
                | "browser_press"
                | "browser_history"
                | "browser_select"
                | "browser_hover"
                | "browser_upload"
        );
        // Reading what the page logged and fetched does not touch it: allowed while a
        // dialog is open (the dialog may be why the agent looks).
        match operation {
            "browser_console" => return self.console(page, args, deadline),
            "browser_network" => return self.network(page, args, deadline),
            _ => {}
        }
        if operation != "browser_dialog" {
            if let Some(dialog) = self.open_dialog(page) {
                return Err(dialogs::open_error(&dialog));
            }
        }
        let mark = self.mark(page);
        let answered = self.run_page_operation(page, operation, args, deadline);
        // An operation that failed because a dialog opened says so.
        let mut answer = match (answered, self.open_dialog(page)) {
            (Err(_), Some(dialog)) if operation != "browser_dialog" => {
                return Err(dialogs::open_error(&dialog))
            }
            (answered, _) => answered?,
        };
        if let (true, Value::Object(fields)) = (acts, &mut answer) {
            for (key, value) in self.settle(page, mark, deadline) {
                fields.entry(key).or_insert(value);
            }
        }
        Ok(answer)
    }

    fn run_page_operation(
        &self,
        page: &PageId,
        operation: &str,
        args: &Map<String, Value>,
        deadline: Instant,
    ) -> Result<Value, EngineError> {
        let text = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| EngineError::Page(format!("Missing argument: {key}")))
        };
        // A list of strings (the validator checked it); none when absent.
        let texts = |key: &str| -> Vec<String> {
            let items = args.get(key).and_then(Value::as_array);
            let strings = items.into_iter().flatten().filter_map(Value::as_str);
            strings.map(str::to_string).collect()
        };
        match operation {
            "browser_navigate" => {
                Ok(json!({ "url": self.navigate(page, text("url")?, deadline)? }))
            }
            "browser_press" => {
                let name = text("key")?;
                let key = keys::parse(name).map_err(EngineError::Page)?;
                let element_ref = args.get("ref").and_then(Value::as_str);
                let refs = self.shared.refs_of(page);
                let frames = self.shared.frame_sessions(page);
                self.on_page(page, deadline, |connection, session| {
                    let target = match element_ref {
                        Some(element_ref) => {
                            let page = elements::Page {
                                session,
                                frames: &frames,
                            };
                            elements::focus(connection, &page, &refs, element_ref, deadline)?
                        }
                        None => session.to_string(),
                    };
                    // A key may click (Enter submits a form through its default button,
                    // Space presses a focused button): the click guard lets this document
                    // take it, as for a click by selector, until the keys are done.
                    evaluate(
                        connection,
                        page,
                        session,
                        ARM_DOCUMENT_JS,
                        &json!({}),
                        deadline,
                    )?;
                    for event in key.events() {
                        let sent = dialogs::call_unless_dialog(
                            connection,
                            "Input.dispatchKeyEvent",
                            event,
                            &target,
                            deadline,
                        )?;
                        // The press opened a dialog: the answer's `after` says so.
                        if sent.is_none() {
                            break;
                        }
                    }
                    // Disarms (a navigation the key started may have replaced the document).
                    let _ = evaluate(connection, page, session, TAKE_JS, &json!({}), deadline);
                    Ok(())
                })?;
                let mut answer = json!({ "key": name });
                if let Some(element_ref) = element_ref {
                    answer["ref"] = json!(element_ref);
                }
                Ok(answer)
            }
            "browser_hover" | "browser_select" => {
                let element_ref = text("ref")?;
                let values = texts("values");
                let selected =
                    self.on_elements(page, deadline, |connection, page, refs| match operation {
                        "browser_hover" => {
                            elements::hover(connection, page, refs, element_ref, deadline)
                                .map(|()| Value::Null)
                        }
                        _ => {
                            elements::select(connection, page, refs, element_ref, &values, deadline)
                        }
                    })?;
                let mut answer = json!({ "ref": element_ref });
                if operation == "browser_select" {
                    answer["selected"] = selected;
                }
                Ok(answer)
            }
            "browser_upload" => {
                let element_ref = text("ref")?;
                let paths = texts("paths");
                let profile = lock(&self.running).as_ref().map(|r| r.profile.clone());
                let profile = profile.ok_or(EngineError::EngineStopped)?;
                // A folder per upload: the page reads a file only when it sends it, so an
                // earlier upload's copies must stay (they go with the page or the profile).
                let call = UPLOADS.fetch_add(1, Ordering::Relaxed);
                let stage = upload::folder(&profile, page).join(call.to_string());
                let root = std::path::Path::new(text("projectRoot")?);
                let staged = upload::stage(root, &paths, &stage)?;
                let staged: Vec<String> = staged
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect();
                self.on_elements(page, deadline, |connection, page, refs| {
                    elements::upload(connection, page, refs, element_ref, &staged, deadline)
                })?;
                let names: Vec<String> = staged
                    .iter()
                    .filter_map(|p| std::path::Path::new(p).file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect();
                Ok(json!({ "ref": element_ref, "files": names }))
            }
            "browser_history" => {
                let action = text("action")?;
                self.on_page(page, deadline, |connection, session| {
                    if action == "reload" {
                        connection.call("Page.reload", json!({}), Some(session), deadline)?;
                        return Ok(());
                    }
                    let history = connection.call(
                        "Page.getNavigationHistory",
                        json!({}),
                        Some(session),
                        deadline,
                    )?;
                    let current = history["currentIndex"].as_i64().unwrap_or(0);
                    let step = if action == "back" { -1 } else { 1 };
                    let entry = usize::try_from(current + step)
                        .ok()
                        .and_then(|i| history["entries"].get(i));
                    let Some(id) = entry.and_then(|e| e["id"].as_i64()) else {
                        return Err(EngineError::Page(format!(
                            "There is no page to go {action} to in this browser's history"
                        )));
                    };
                    connection.call(
                        "Page.navigateToHistoryEntry",
                        json!({ "entryId": id }),
                        Some(session),
                        deadline,
                    )?;
                    Ok(())
                })?;
                Ok(json!({ "action": action }))
            }
            "browser_resize" => {
                let size = |key: &str| args.get(key).and_then(Value::as_u64).unwrap_or(0);
                let (width, height) = (size("width"), size("height"));
                let inner = self.on_page(page, deadline, |connection, session| {
                    connection.call(
                        "Emulation.setDeviceMetricsOverride",
                        json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
                        Some(session),
                        deadline,
                    )?;
                    evaluate(connection, page, session, INNER_SIZE_JS, &json!({}), deadline)
                })?;
                Ok(json!({
                    "width": width,
                    "height": height,
                    "innerWidth": inner["w"],
                    "innerHeight": inner["h"],
                }))
            }
            "browser_inspect" if args.contains_key("mode") => self.snapshot(page, args, deadline),
            "browser_inspect" if SNAPSHOT_ONLY.iter().any(|key| args.contains_key(*key)) => {
                Err(EngineError::Page(format!(
                    "{} apply to snapshots only: add mode \"snapshot\"",
                    SNAPSHOT_ONLY.join(", ")
                )))
            }
            "browser_inspect" => serde_json::to_value(self.inspect(page, deadline)?)
                .map_err(|e| EngineError::Protocol(e.to_string())),
            "browser_click" => match args.get("ref").and_then(Value::as_str) {
                Some(element_ref) => {
                    self.on_elements(page, deadline, |connection, page, refs| {
                        elements::click(connection, page, refs, element_ref, deadline)
                    })?;
                    Ok(json!({ "ref": element_ref }))
                }
                None => {
                    let selector = text("selector")?;
                    self.click(page, selector, deadline)?;
                    Ok(json!({ "selector": selector }))
                }
            },
            "browser_type" => match args.get("ref").and_then(Value::as_str) {
                Some(element_ref) => {
                    let typed = text("text")?;
                    self.on_elements(page, deadline, |connection, page, refs| {
                        elements::type_text(connection, page, refs, element_ref, typed, deadline)
                    })?;
                    Ok(json!({ "ref": element_ref }))
                }
                None => {
                    let selector = text("selector")?;
                    self.type_text(page, selector, text("text")?, deadline)?;
                    Ok(json!({ "selector": selector }))
                }
            },
            "browser_screenshot" => Ok(json!({ "image": self.screenshot(page, deadline)? })),
            "browser_dialog" => {
                let accept = args.get("accept").and_then(Value::as_bool) == Some(true);
                let prompt = args.get("promptText").and_then(Value::as_str);
                let dialog = self.open_dialog(page);
                self.on_page(page, deadline, |connection, _| {
                    dialogs::answer(connection, dialog, accept, prompt, deadline)
                })
            }
            other => Err(EngineError::Page(format!(
                "Unknown browser operation: {other}"
            ))),
        }
    }

    /// `browser_inspect` with `mode: "snapshot"` on validated `args`: a new snapshot (or
    /// the stored one `snapshot` names), seen through `offset`, `maxChars`, `root` and
    /// `find`. See `snapshot.rs` for the answer.
    pub fn snapshot(
        &self,
        page: &PageId,
        args: &Map<String, Value>,
        deadline: Instant,
    ) -> Result<Value, EngineError> {
        let whole = |key: &str, default: i64| {
            args.get(key)
                .and_then(Value::as_f64)
                .map_or(default, |n| n as i64)
                .max(0) as usize
        };
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let view = snapshot::View {
            offset: whole("offset", 0),
            max_chars: whole("maxChars", SNAPSHOT_DEFAULT_CHARS),
            root: text("root"),
            find: text("find"),
        };
        let refs = self.shared.refs_of(page);
        let id = match text("snapshot") {
            Some(id) => id.to_string(),
            None => {
                let frames = self.shared.frame_sessions(page);
                self.on_page(page, deadline, |connection, session| {
                    elements::take(connection, session, &frames, page, &refs, deadline)
                })?
            }
        };
        elements::render(&refs, &id, &view)
    }

    /// Kills Chromium's process group, reaps it and removes its profile. Idempotent; every
    /// later operation fails with [`EngineError::ShutDown`].
    pub fn shutdown(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
        let mut running = lock(&self.running);
        if let Some(old) = running.take() {
            self.tear_down(old);
        }
    }

    /// Runs `op` with the page's connection and session. If Chromium died during it, the
    /// dead engine is torn down at once (its pages reported gone).
    fn on_page<T>(
        &self,
        page: &PageId,
        deadline: Instant,
        op: impl FnOnce(&Arc<Connection>, &str) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let (connection, session) = self.page(page, deadline)?;
        self.unless_stopped(op(&connection, &session))
    }

    /// [`Self::on_page`] for an operation on the page's elements: with the page (its
    /// session and its frames' sessions) and its refs.
    fn on_elements<T>(
        &self,
        page: &PageId,
        deadline: Instant,
        op: impl FnOnce(&Arc<Connection>, &elements::Page, &Mutex<PageRefs>) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let refs = self.shared.refs_of(page);
        let frames = self.shared.frame_sessions(page);
        self.on_page(page, deadline, |connection, session| {
            let page = elements::Page {
                session,
                frames: &frames,
            };
            op(connection, &page, &refs)
        })
    }

    fn unless_stopped<T>(&self, result: Result<T, EngineError>) -> Result<T, EngineError> {
        if let Err(EngineError::EngineStopped) = result {
            let mut running = lock(&self.running);
            if running.as_mut().is_some_and(|current| !current.alive()) {
                if let Some(dead) = running.take() {
                    self.tear_down(dead);
                }
            }
        }
        result
    }

    /// The live connection, starting or restarting Chromium if needed.
    fn connection(&self, deadline: Instant) -> Result<(Arc<Connection>, u64), EngineError> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Err(EngineError::ShutDown);
        }
        let mut running = lock(&self.running);
        if let Some(current) = running.as_mut() {
            if current.alive() {
                return Ok((Arc::clone(&current.connection), current.generation));
            }
        }
        if let Some(dead) = running.take() {
            self.tear_down(dead);
        }
        let fresh = self.launch(deadline)?;
        let handle = (Arc::clone(&fresh.connection), fresh.generation);
        *running = Some(fresh);
        Ok(handle)
    }

    /// The connection and session of `page`. If Chromium died, restarts it (so the next
    /// `open_page` is quick) and reports that the page is gone.
    fn page(
        &self,
        page: &PageId,
        deadline: Instant,
    ) -> Result<(Arc<Connection>, String), EngineError> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Err(EngineError::ShutDown);
        }
        let mut running = lock(&self.running);
        let Some(current) = running.as_mut() else {
            return Err(EngineError::PageNotFound);
        };
        let generation = current.generation;
        let state = lock(&self.shared.pages)
            .get(page)
            .map(|s| (s.session.clone(), s.generation));
        if current.alive() {
            return match state {
                Some((session, g)) if g == generation => {
                    Ok((Arc::clone(&current.connection), session))
                }
                _ => Err(EngineError::PageNotFound),
            };
        }
        if let Some(dead) = running.take() {
            self.tear_down(dead);
        }
        *running = Some(self.launch(deadline)?);
        Err(match state {
            Some(_) => EngineError::EngineStopped,
            None => EngineError::PageNotFound,
        })
    }

    fn launch(&self, deadline: Instant) -> Result<Running, EngineError> {
        let executable = self.find_executable()?;
        let generation = self.generations.fetch_add(1, Ordering::SeqCst) + 1;
        let profile = self
            .config
            .profile_dir
            .join(format!("profile-{}", random_hex()?));
        private_dir(&self.config.profile_dir)
            .map(|()| process::remove_stale_profiles(&self.config.profile_dir))
            .and_then(|()| private_dir(&profile))
            .map_err(|e| {
                EngineError::Launch(format!("cannot create {}: {e}", profile.display()))
            })?;
        let spawned = process::spawn(&executable, &profile).map_err(|e| {
            drop(std::fs::remove_dir_all(&profile));
            EngineError::Launch(format!("{}: {e}", executable.display()))
        })?;
        let mut process = spawned.process;
        let shared = Arc::clone(&self.shared);
        let connection = match Connection::start(
            spawned.commands,
            spawned.replies,
            policy_hook(Arc::clone(&self.shared)),
            Box::new(move || shared.announce_lost(generation)),
        ) {
            Ok(connection) => connection,
            Err(e) => {
                process.kill_and_reap();
                drop(std::fs::remove_dir_all(&profile));
                return Err(EngineError::Launch(format!("reader thread: {e}")));
            }
        };
        let running = Running {
            connection,
            process,
            profile,
            generation,
        };
        let setup = [
            ("Browser.getVersion", json!({})),
            ("Browser.setDownloadBehavior", json!({ "behavior": "deny" })),
            ("Target.setDiscoverTargets", json!({ "discover": true })),
        ];
        for (method, params) in setup {
            if let Err(error) = running.connection.call(method, params, None, deadline) {
                let detail = match error {
                    CdpError::Closed => {
                        "it exited before answering on the DevTools pipe".to_string()
                    }
                    CdpError::Timeout => {
                        "it did not answer on the DevTools pipe in time".to_string()
                    }
                    CdpError::Protocol(message) => format!("{method}: {message}"),
                };
                // Give its last words a moment to arrive; it has exited or is hung.
                std::thread::sleep(std::time::Duration::from_millis(100));
                let said = running.process.stderr_tail();
                self.tear_down(running);
                let said = if said.is_empty() {
                    String::new()
                } else {
                    format!(" (it said: {said})")
                };
                return Err(EngineError::Launch(format!(
                    "{}: {detail}{said}",
                    executable.display()
                )));
            }
        }
        Ok(running)
    }

    fn tear_down(&self, mut old: Running) {
        old.process.kill_and_reap();
        drop(std::fs::remove_dir_all(&old.profile));
        let lost: Vec<PageId> = lock(&self.shared.pages)
            .iter()
            .filter(|(_, s)| s.generation == old.generation)
            .map(|(id, _)| id.clone())
            .collect();
        for page in lost {
            self.shared.remove(&page);
        }
    }
}

impl Drop for BrowserEngine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The navigation policy and the housekeeping that must not wait for a caller. Runs on
/// the reader thread; it only sends (never waits for replies).
fn policy_hook(shared: Arc<Shared>) -> EventHook {
    Box::new(move |connection: &Connection, event: &Event| {
        let session = event.session.as_deref();
        let params = &event.params;
        if let Some(session) = session {
            shared.record_activity(session, event);
        }
        match event.method.as_str() {
            "Fetch.requestPaused" => {
                let id = params["requestId"].clone();
                let url = params["request"]["url"].as_str().unwrap_or("");
                if document_url_allowed(url) {
                    connection.send("Fetch.continueRequest", json!({ "requestId": id }), session);
                } else {
                    if let Some(session) = session {
                        shared.record_blocked(session, url);
                    }
                    // Aborted (not an error page) leaves the page where it was.
                    connection.send(
                        "Fetch.failRequest",
                        json!({ "requestId": id, "errorReason": "Aborted" }),
                        session,
                    );
                }
            }
            "Page.frameNavigated" => {
                let frame = &params["frame"];
                let url = frame["url"].as_str().unwrap_or("");
                let main_frame = frame.get("parentId").is_none();
                if main_frame && !document_url_allowed(url) && !policy::is_error_page(url) {
                    if let Some(session) = session {
                        shared.record_blocked(session, url);
                    }
                    connection.send("Page.navigate", json!({ "url": "about:blank" }), session);
                }
            }
            "Target.targetInfoChanged" => shared.record_info(&params["targetInfo"]),
            "Target.targetCreated" => {
                let info = &params["targetInfo"];
                shared.record_info(info);
                if info["type"].as_str() == Some("page") && info.get("openerId").is_some() {
                    // A popup: the agent drives only the pages it opened.
                    connection.send(
                        "Target.closeTarget",
                        json!({ "targetId": info["targetId"] }),
                        None,
                    );
                }
            }
            "Target.targetCrashed" => {
                if let Some(target) = params["targetId"].as_str() {
                    connection.send("Target.closeTarget", json!({ "targetId": target }), None);
                    shared.remove(&PageId(target.to_string()));
                }
            }
            "Target.targetDestroyed" => {
                if let Some(target) = params["targetId"].as_str() {
                    shared.remove(&PageId(target.to_string()));
                }
            }
            "Target.attachedToTarget" => {
                let page = session.and_then(|s| shared.page_of_any_session(s));
                if let Some((child, frame)) = frames::attached(connection, page, params) {
                    lock(&shared.children).insert(child, frame);
                }
            }
            "Target.detachedFromTarget" => {
                let detached = params["sessionId"].as_str().unwrap_or_default();
                lock(&shared.children).remove(detached);
                if let Some(page) = shared.page_of_session(detached) {
                    shared.remove(&page);
                }
            }
            _ => {}
        }
    })
}

/// Waits for the main frame's `load` lifecycle event of `loader`.
fn wait_for_load(
    connection: &Connection,
    events: &Receiver<Event>,
    page: &PageId,
    loader: &str,
    deadline: Instant,
) -> Result<(), EngineError> {
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        let event = match events.recv_timeout(wait) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => return Err(EngineError::Timeout),
            // The session's subscriptions end with the engine or when the page is closed.
            Err(RecvTimeoutError::Disconnected) if connection.is_alive() => {
                return Err(EngineError::PageNotFound)
            }
            Err(RecvTimeoutError::Disconnected) => return Err(EngineError::EngineStopped),
        };
        let params = &event.params;
        // An open dialog stops the load; the page's activity reports it.
        if event.method == "Page.javascriptDialogOpening" {
            return Ok(());
        }
        if event.method == "Page.lifecycleEvent"
            && params["name"] == "load"
            && params["loaderId"] == loader
            && params["frameId"] == page.0.as_str()
        {
            return Ok(());
        }
    }
}

/// Runs one of our scripts on `args` in a fresh isolated world of the page's main frame
/// (whose frame id is the target id) and returns its JSON value. A script reports a
/// refusal as `{error}`, which becomes [`EngineError::Page`].
fn evaluate(
    connection: &Arc<Connection>,
    page: &PageId,
    session: &str,
    script: &str,
    args: &Value,
    deadline: Instant,
) -> Result<Value, EngineError> {
    let world = connection.call(
        "Page.createIsolatedWorld",
        json!({ "frameId": page.0, "worldName": TOOLS_WORLD, "grantUniveralAccess": false }),
        Some(session),
        deadline,
    )?;
    let context = world
        .get("executionContextId")
        .and_then(Value::as_i64)
        .ok_or_else(|| EngineError::Protocol("no isolated world".to_string()))?;
    // `args` is serde_json output, which is a valid JavaScript expression. The guard
    // comes along for `LOCATE_JS`, which arms it.
    let expression =
        format!("(() => {{\n{COMMON_JS}\n{GUARD_JS}\nreturn ({script})({args});\n}})()");
    let reply = dialogs::call_unless_dialog(
        connection,
        "Runtime.evaluate",
        json!({ "expression": expression, "contextId": context, "returnByValue": true, "awaitPromise": false }),
        session,
        deadline,
    )?;
    // A dialog the script caused: the operation's answer reports it.
    let Some(reply) = reply else {
        return Ok(Value::Null);
    };
    script_succeeded(&reply)?;
    let value = reply
        .pointer("/result/value")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(message) = value.get("error").and_then(Value::as_str) {
        return Err(EngineError::Page(message.to_string()));
    }
    Ok(value)
}

/// A real left click: move, press and release at (x, y) in viewport coordinates. False
/// when a dialog opened on the way (and the rest was not sent).
pub(crate) fn click_at(
    connection: &Arc<Connection>,
    session: &str,
    x: f64,
    y: f64,
    deadline: Instant,
) -> Result<bool, EngineError> {
    let mouse = [
        json!({ "type": "mouseMoved", "x": x, "y": y, "button": "none", "buttons": 0 }),
        json!({ "type": "mousePressed", "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1 }),
        json!({ "type": "mouseReleased", "x": x, "y": y, "button": "left", "buttons": 0, "clickCount": 1 }),
    ];
    for event in mouse {
        let sent = dialogs::call_unless_dialog(
            connection,
            "Input.dispatchMouseEvent",
            event,
            session,
            deadline,
        )?;
        if sent.is_none() {
            // The press opened a dialog; the release would wait for it.
            return Ok(false);
        }
    }
    Ok(true)
}

fn string_field(value: &Value, key: &str) -> Result<String, EngineError> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| EngineError::Protocol(format!("reply without {key}")))
}

/// 8 random bytes as hex, for a profile directory name.
fn random_hex() -> Result<String, EngineError> {
    crate::base::random_hex(8)
        .map_err(|e| EngineError::Launch(format!("no randomness for the profile name: {e}")))
}

/// `Err` with the page's exception when a `Runtime.evaluate`/`callFunctionOn` reply
/// reports one (its text cut to 300 characters).
pub(super) fn script_succeeded(reply: &Value) -> Result<(), EngineError> {
    let Some(details) = reply.get("exceptionDetails") else {
        return Ok(());
    };
    let text = details
        .pointer("/exception/description")
        .or_else(|| details.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("exception");
    Err(EngineError::Protocol(format!(
        "page script failed: {}",
        cut(text, 300)
    )))
}

#[cfg(test)]
mod tests {
    use super::cdp::fake;
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// Feeds `event` to the policy hook and returns the command it sent.
    fn policy_reply(shared: &Arc<Shared>, event: Value) -> Value {
        let (_connection, mut sent, mut chromium) =
            fake::connection(policy_hook(Arc::clone(shared)));
        let mut bytes = event.to_string().into_bytes();
        bytes.push(0);
        chromium.write_all(&bytes).unwrap();
        fake::read_command(&mut sent)
    }

    fn shared_with_page() -> Arc<Shared> {
        let shared = Arc::new(Shared::default());
        lock(&shared.pages).insert(
            PageId("T1".into()),
            PageState {
                session: "S1".into(),
                generation: 1,
                ready: true,
                gone_sent: false,
                blocked: None,
                activity: Activity::new(),
            },
        );
        shared
    }

    #[test]
    fn document_requests_outside_the_policy_are_aborted() {
        let shared = shared_with_page();
        let paused = |url: &str| {
            json!({ "method": "Fetch.requestPaused", "sessionId": "S1",
                    "params": { "requestId": "R1", "request": { "url": url } } })
        };
        let sent = policy_reply(&shared, paused("https://example.com/"));
        assert_eq!(sent["method"], "Fetch.continueRequest");
        assert_eq!(sent["params"], json!({ "requestId": "R1" }));
        assert_eq!(sent["sessionId"], "S1");

        let sent = policy_reply(&shared, paused("file:///etc/passwd"));
        assert_eq!(sent["method"], "Fetch.failRequest");
        assert_eq!(
            sent["params"],
            json!({ "requestId": "R1", "errorReason": "Aborted" })
        );
        assert_eq!(
            shared.take_blocked(&PageId("T1".into())).as_deref(),
            Some("file:///etc/passwd")
        );
    }

    #[test]
    fn a_committed_refused_document_is_replaced_by_blank() {
        let shared = shared_with_page();
        let navigated = json!({ "method": "Page.frameNavigated", "sessionId": "S1",
                                "params": { "frame": { "id": "T1", "url": "data:text/html,x" } } });
        let sent = policy_reply(&shared, navigated);
        assert_eq!(sent["method"], "Page.navigate");
        assert_eq!(sent["params"], json!({ "url": "about:blank" }));
        assert_eq!(sent["sessionId"], "S1");
        assert!(shared.take_blocked(&PageId("T1".into())).is_some());
    }

    #[test]
    fn dialogs_are_kept_for_the_agent_and_popups_closed() {
        let shared = shared_with_page();
        let dialog = json!({ "method": "Page.javascriptDialogOpening", "sessionId": "S1",
                             "params": { "type": "confirm", "message": "?" } });
        let (_connection, _sent, mut chromium) = fake::connection(policy_hook(Arc::clone(&shared)));
        chromium
            .write_all(format!("{dialog}\0").as_bytes())
            .unwrap();
        let page = PageId("T1".into());
        let deadline = Instant::now() + Duration::from_secs(5);
        while shared.activity(&page, |a| a.dialog().is_none()) == Some(true) {
            assert!(Instant::now() < deadline, "the dialog was not recorded");
            std::thread::sleep(Duration::from_millis(5));
        }
        let kind = shared.activity(&page, |a| a.dialog().map(|d| d.kind.clone()));
        assert_eq!(kind.flatten().as_deref(), Some("confirm"));

        let popup = json!({ "method": "Target.targetCreated",
                            "params": { "targetInfo": { "targetId": "P2", "type": "page", "openerId": "T1" } } });
        let sent = policy_reply(&shared, popup);
        assert_eq!(sent["method"], "Target.closeTarget");
        assert_eq!(sent["params"], json!({ "targetId": "P2" }));
    }

    #[test]
    fn a_destroyed_target_is_reported_gone() {
        let shared = shared_with_page();
        let (tx, rx) = mpsc::channel();
        lock(&shared.listeners).push(tx);
        let destroyed =
            json!({ "method": "Target.targetDestroyed", "params": { "targetId": "T1" } });
        let (_connection, _sent, mut chromium) = fake::connection(policy_hook(Arc::clone(&shared)));
        chromium
            .write_all(format!("{destroyed}\0").as_bytes())
            .unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)),
            Ok(PageEvent::Gone(PageId("T1".into())))
        );
    }

    #[test]
    fn messages_say_what_to_do() {
        assert!(EngineError::NotInstalled
            .to_string()
            .contains("apt install chromium"));
        assert!(EngineError::EngineStopped
            .to_string()
            .contains("browser_open"));
        assert!(EngineError::Timeout
            .to_string()
            .starts_with("Browser operation timed out"));
        assert!(EngineError::UrlNotAllowed("file:///x".into())
            .to_string()
            .starts_with("Browser URL is not allowed"));
    }

    #[test]
    fn missing_browser_is_reported_before_anything_starts() {
        let dir = std::env::temp_dir().join(format!("tst-browser-missing-{}", std::process::id()));
        let engine = BrowserEngine::new(EngineConfig {
            executable: Some(PathBuf::from("/nonexistent/chromium")),
            profile_dir: dir.clone(),
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(
            engine.open_page("about:blank", deadline),
            Err(EngineError::NotInstalled)
        );
        assert_eq!(engine.browser_pid(), None);
        assert!(!dir.exists());
    }

    #[test]
    fn a_binary_that_is_not_chromium_fails_with_its_own_words() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("tst-browser-fake-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&dir));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("fake-chromium");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho 'no DevTools pipe here' >&2\nexit 3\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let profiles = dir.join("profiles");
        let engine = BrowserEngine::new(EngineConfig {
            executable: Some(fake),
            profile_dir: profiles.clone(),
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let Err(EngineError::Launch(message)) = engine.open_page("about:blank", deadline) else {
            panic!("expected a launch error");
        };
        assert!(message.contains("exited before answering"), "{message}");
        assert!(message.contains("no DevTools pipe here"), "{message}");
        assert_eq!(std::fs::read_dir(&profiles).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refused_urls_never_reach_chromium() {
        let engine = BrowserEngine::new(EngineConfig {
            executable: Some(PathBuf::from("/nonexistent/chromium")),
            profile_dir: std::env::temp_dir().join("tst-browser-unused"),
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        for url in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "data:text/html,x",
        ] {
            assert_eq!(
                engine.open_page(url, deadline),
                Err(EngineError::UrlNotAllowed(url.to_string()))
            );
        }
    }
}
