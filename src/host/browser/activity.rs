//! What a page is doing, kept up to date from Chromium's events on the reader thread, so
//! that `browser_wait` and the short wait after an action read it without asking
//! Chromium: requests in flight (`Network.*`), the last DOM mutation (a `MutationObserver`
//! in an isolated world of every frame reports through a binding only that world sees),
//! main-frame navigations, an open JavaScript dialog and file choosers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

use super::logs::{ConsoleLog, NetworkLog};

/// The isolated world our watcher script runs in, in every frame of a page.
pub const WATCH_WORLD: &str = "termsprawl-watch";
/// The binding the watcher calls (at most ten times a second per frame) when the DOM
/// changed; exposed only to [`WATCH_WORLD`], so page scripts cannot call it.
pub const MUTATION_BINDING: &str = "termsprawlMutated";
/// At most this many requests are tracked per page; more count as network activity.
const MAX_TRACKED_REQUESTS: usize = 10_000;
/// A request whose response came but whose body has had no data for this long counts as
/// done: Chromium reports a body's end only once the page reads it, and a page may never
/// read the body of a `fetch` it fired and forgot.
const UNREAD_BODY: Duration = Duration::from_millis(500);
/// A dialog's message is kept to this many characters.
const DIALOG_CHARS: usize = 2_000;

/// The watcher: reports mutations through [`MUTATION_BINDING`], at most one per 100 ms.
pub const WATCH_JS: &str = "(() => {
  const report = globalThis.termsprawlMutated;
  if (typeof report !== 'function') return;
  let last = 0, timer = 0;
  const send = () => { timer = 0; last = Date.now(); report(''); };
  new MutationObserver(() => {
    if (!timer) timer = setTimeout(send, Math.max(0, 100 - (Date.now() - last)));
  }).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})();";

/// A JavaScript dialog a page opened and nobody has answered yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dialog {
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its message (page text: data, not instructions), cut to 2,000 characters.
    pub message: String,
    /// A prompt's default answer.
    #[serde(rename = "defaultPrompt")]
    pub default_prompt: String,
    /// The session that reported it, which must answer it.
    #[serde(skip)]
    pub session: String,
}

impl Dialog {
    /// The dialog as an answer field.
    pub fn to_json(&self) -> Value {
        json!(self)
    }
}

/// Counters to compare against later: what had happened when an action started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    requests: u64,
    nav_started: u64,
    committed: u64,
    loaded: u64,
    in_document: u64,
    choosers: u64,
}

/// A request not known to be done.
#[derive(Debug)]
struct Request {
    /// Its number, in the order requests started.
    number: u64,
    /// When its response or the last data of its body came.
    data: Option<Instant>,
}

impl Request {
    fn in_flight(&self, now: Instant) -> bool {
        match self.data {
            Some(data) => now.saturating_duration_since(data) < UNREAD_BODY,
            None => true,
        }
    }
}

/// One page's activity (its main session's events).
#[derive(Debug)]
pub struct Activity {
    /// Requests not known to be done, by Chromium's request id.
    requests: HashMap<String, Request>,
    /// How many requests have started.
    started: u64,
    /// When a request last started or ended.
    network_changed: Instant,
    /// When the DOM of any frame last changed, as the watcher reported.
    mutated: Instant,
    /// Main-frame navigations that started, committed, finished loading, and
    /// same-document ones (history API, fragments).
    nav_started: u64,
    committed: u64,
    loaded: u64,
    in_document: u64,
    /// The main frame is loading.
    loading: bool,
    /// The open dialog, if any.
    dialog: Option<Dialog>,
    /// How many file choosers opened (each is intercepted: nothing is uploaded).
    choosers: u64,
    /// Our watcher's execution contexts: (session, context id) -> frame id.
    contexts: HashMap<(String, i64), String>,
    /// The main frame's document URL, as last committed.
    document: String,
    /// What the page logged (`logs.rs`).
    pub console: ConsoleLog,
    /// What the page fetched (`logs.rs`).
    pub network: NetworkLog,
}

impl Activity {
    /// A page seen from now.
    pub fn new() -> Activity {
        let now = Instant::now();
        Activity {
            requests: HashMap::new(),
            started: 0,
            network_changed: now,
            mutated: now,
            nav_started: 0,
            committed: 0,
            loaded: 0,
            in_document: 0,
            loading: false,
            dialog: None,
            choosers: 0,
            contexts: HashMap::new(),
            document: String::new(),
            console: ConsoleLog::default(),
            network: NetworkLog::default(),
        }
    }

    /// Takes in one event of `session`: the page's own (`main_frame` is the page's frame
    /// id) or, with `None`, one of its frames in another process (`frames.rs`), whose
    /// navigations and loads are not the page's.
    pub fn on_event(
        &mut self,
        session: &str,
        method: &str,
        params: &Value,
        main_frame: Option<&str>,
    ) {
        let now = Instant::now();
        let of_main = main_frame.is_some() && params["frameId"].as_str() == main_frame;
        let frame_event = method.starts_with("Page.")
            && !matches!(
                method,
                "Page.javascriptDialogOpening"
                    | "Page.javascriptDialogClosed"
                    | "Page.fileChooserOpened"
            );
        if frame_event && main_frame.is_none() {
            return;
        }
        self.console.on_event(method, params, &self.document);
        self.network
            .on_event(session, method, params, &self.document);
        match method {
            "Network.requestWillBeSent" => {
                let id = params["requestId"].as_str().unwrap_or_default();
                // A redirect reuses its request's id: still the same request.
                if !self.requests.contains_key(id) {
                    self.started += 1;
                    if self.requests.len() >= MAX_TRACKED_REQUESTS {
                        self.requests.retain(|_, request| request.in_flight(now));
                    }
                    if self.requests.len() < MAX_TRACKED_REQUESTS {
                        let request = Request {
                            number: self.started,
                            data: None,
                        };
                        self.requests.insert(id.to_string(), request);
                    }
                }
                self.network_changed = now;
            }
            "Network.responseReceived" | "Network.dataReceived" => {
                let id = params["requestId"].as_str().unwrap_or_default();
                if let Some(request) = self.requests.get_mut(id) {
                    request.data = Some(now);
                    self.network_changed = now;
                }
            }
            "Network.loadingFinished" | "Network.loadingFailed" => {
                let id = params["requestId"].as_str().unwrap_or_default();
                if self.requests.remove(id).is_some() {
                    self.network_changed = now;
                }
            }
            "Runtime.executionContextCreated" => {
                let context = &params["context"];
                if context["name"] == WATCH_WORLD {
                    let frame = context["auxData"]["frameId"].as_str().unwrap_or_default();
                    if let Some(id) = context["id"].as_i64() {
                        self.contexts
                            .insert((session.to_string(), id), frame.to_string());
                    }
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let Some(id) = params["executionContextId"].as_i64() {
                    self.contexts.remove(&(session.to_string(), id));
                }
            }
            "Runtime.executionContextsCleared" => self.contexts.retain(|(s, _), _| s != session),
            "Runtime.bindingCalled" => {
                let context = params["executionContextId"].as_i64().unwrap_or_default();
                let ours = self.contexts.contains_key(&(session.to_string(), context));
                if params["name"] == MUTATION_BINDING && ours {
                    self.mutated = now;
                }
            }
            "Page.frameStartedLoading" if of_main => {
                self.nav_started += 1;
                self.loading = true;
            }
            "Page.frameStoppedLoading" if of_main => self.loading = false,
            "Page.frameNavigated" if params["frame"].get("parentId").is_none() => {
                self.committed += 1;
                self.document = params["frame"]["url"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                // A new document: its DOM counts as changed.
                self.mutated = now;
            }
            "Page.navigatedWithinDocument" if of_main => self.in_document += 1,
            "Page.loadEventFired" => self.loaded += 1,
            "Page.javascriptDialogOpening" => {
                let text = |key: &str| {
                    let text = params[key].as_str().unwrap_or_default();
                    text.chars().take(DIALOG_CHARS).collect()
                };
                self.dialog = Some(Dialog {
                    kind: text("type"),
                    message: text("message"),
                    default_prompt: text("defaultPrompt"),
                    session: session.to_string(),
                });
            }
            "Page.javascriptDialogClosed" => self.dialog = None,
            "Page.fileChooserOpened" => self.choosers += 1,
            _ => {}
        }
    }

    /// The counters now, to compare with after an action.
    pub fn mark(&self) -> Mark {
        Mark {
            requests: self.started,
            nav_started: self.nav_started,
            committed: self.committed,
            loaded: self.loaded,
            in_document: self.in_document,
            choosers: self.choosers,
        }
    }

    /// How many requests are in flight.
    pub fn in_flight(&self) -> usize {
        let now = Instant::now();
        self.requests.values().filter(|r| r.in_flight(now)).count()
    }

    /// How long no request has been in flight (zero while one is).
    pub fn network_quiet(&self, now: Instant) -> Duration {
        match self.requests.values().any(|r| r.in_flight(now)) {
            true => Duration::ZERO,
            false => now.saturating_duration_since(self.network_changed),
        }
    }

    /// How long since the DOM last changed.
    pub fn dom_quiet(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.mutated)
    }

    /// The open dialog, if any.
    pub fn dialog(&self) -> Option<&Dialog> {
        self.dialog.as_ref()
    }

    /// Our watcher's contexts (one per frame document): (session, context id).
    pub fn watch_contexts(&self) -> Vec<(String, i64)> {
        self.contexts.keys().cloned().collect()
    }

    /// What happened since `mark`.
    pub fn since(&self, mark: &Mark) -> Since {
        let now = Instant::now();
        let caused = self.requests.values();
        let caused = caused.filter(|r| r.number > mark.requests && r.in_flight(now));
        Since {
            navigation_started: self.nav_started > mark.nav_started,
            committed: self.committed > mark.committed,
            loaded: self.loaded > mark.loaded && !self.loading,
            loading: self.loading,
            in_document: self.in_document > mark.in_document,
            requests_started: self.started > mark.requests,
            requests_in_flight: caused.count(),
            network_quiet: self.network_quiet(now),
            choosers: self.choosers - mark.choosers,
        }
    }
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

/// What happened on a page since a [`Mark`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Since {
    /// A main-frame navigation started (it may have been refused or failed).
    pub navigation_started: bool,
    /// A new main-frame document committed.
    pub committed: bool,
    /// Its load event fired and the frame stopped loading.
    pub loaded: bool,
    /// The main frame is loading now.
    pub loading: bool,
    /// The URL changed within the document (history API, fragment).
    pub in_document: bool,
    /// Requests started.
    pub requests_started: bool,
    /// How many of those are still in flight.
    pub requests_in_flight: usize,
    /// How long the page's network has been quiet.
    pub network_quiet: Duration,
    /// File choosers that opened (and were dismissed).
    pub choosers: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_from_their_events() {
        let mut page = Activity::new();
        let mark = page.mark();
        let sent = |id: &str| json!({ "requestId": id });
        page.on_event("S", "Network.requestWillBeSent", &sent("1"), Some("F"));
        page.on_event("S", "Network.requestWillBeSent", &sent("2"), Some("F"));
        // A redirect hop of request 1 is not a new request.
        page.on_event("S", "Network.requestWillBeSent", &sent("1"), Some("F"));
        assert_eq!(page.in_flight(), 2);
        assert_eq!(page.network_quiet(Instant::now()), Duration::ZERO);
        page.on_event("S", "Network.loadingFinished", &sent("1"), Some("F"));
        page.on_event("S", "Network.loadingFailed", &sent("2"), Some("F"));
        assert_eq!(page.in_flight(), 0);
        let since = page.since(&mark);
        assert!(since.requests_started);
        assert_eq!(since.requests_in_flight, 0);
        // An end never seen to start changes nothing.
        page.on_event("S", "Network.loadingFinished", &sent("9"), Some("F"));
        assert_eq!(page.in_flight(), 0);
        // A body nobody reads: done once no data came for a while.
        page.on_event("S", "Network.requestWillBeSent", &sent("3"), Some("F"));
        page.on_event("S", "Network.responseReceived", &sent("3"), Some("F"));
        assert_eq!(page.in_flight(), 1);
        let later = Instant::now() + UNREAD_BODY;
        assert!(page.network_quiet(later) > Duration::ZERO);
    }

    #[test]
    fn only_our_worlds_binding_counts_as_a_mutation() {
        let mut page = Activity::new();
        let before = page.dom_quiet(Instant::now() + Duration::from_secs(5));
        let called =
            |context: i64| json!({ "name": MUTATION_BINDING, "executionContextId": context });
        page.on_event("S", "Runtime.bindingCalled", &called(7), Some("F"));
        assert!(page.dom_quiet(Instant::now() + Duration::from_secs(5)) >= before);
        let created =
            json!({ "context": { "id": 7, "name": WATCH_WORLD, "auxData": { "frameId": "F" } } });
        page.on_event("S", "Runtime.executionContextCreated", &created, Some("F"));
        std::thread::sleep(Duration::from_millis(20));
        page.on_event("S", "Runtime.bindingCalled", &called(7), Some("F"));
        assert!(page.dom_quiet(Instant::now()) < Duration::from_millis(20));
        assert_eq!(page.watch_contexts(), vec![("S".to_string(), 7)]);
        page.on_event(
            "S",
            "Runtime.executionContextsCleared",
            &json!({}),
            Some("F"),
        );
        assert!(page.watch_contexts().is_empty());
    }

    #[test]
    fn navigations_and_dialogs_of_the_main_frame_are_seen() {
        let mut page = Activity::new();
        let mark = page.mark();
        let main = json!({ "frameId": "F" });
        let child = json!({ "frameId": "child" });
        page.on_event("S", "Page.frameStartedLoading", &child, Some("F"));
        // A frame in another process loading, through its own session.
        page.on_event("C", "Page.loadEventFired", &json!({}), None);
        let since = page.since(&mark);
        assert!(!since.navigation_started && !since.loaded, "a frame's load");
        page.on_event("S", "Page.frameStartedLoading", &main, Some("F"));
        let navigated = json!({ "frame": { "id": "F" } });
        page.on_event("S", "Page.frameNavigated", &navigated, Some("F"));
        let since = page.since(&mark);
        assert!(since.navigation_started && since.committed && since.loading);
        assert!(!since.loaded);
        page.on_event("S", "Page.loadEventFired", &json!({}), Some("F"));
        page.on_event("S", "Page.frameStoppedLoading", &main, Some("F"));
        assert!(page.since(&mark).loaded);

        let long = "x".repeat(5_000);
        let opening = json!({ "type": "prompt", "message": long, "defaultPrompt": "d" });
        page.on_event("S", "Page.javascriptDialogOpening", &opening, Some("F"));
        let dialog = page.dialog().unwrap();
        assert_eq!(dialog.kind, "prompt");
        assert_eq!(dialog.message.chars().count(), DIALOG_CHARS);
        page.on_event("S", "Page.javascriptDialogClosed", &json!({}), Some("F"));
        assert!(page.dialog().is_none());
    }
}
