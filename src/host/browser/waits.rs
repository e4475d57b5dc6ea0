//! Waiting on a page: `browser_wait` ([`PageWait`], checked by the server's waiter thread)
//! and the short wait after `browser_click`, `browser_type`, `browser_navigate` and
//! `browser_dialog` (`BrowserEngine::settle`) for what the action started.
//!
//! Both read the page's `Activity` (`browser/activity.rs`), which Chromium's events
//! keep current. The one thing events do not say is whether a text is on the page: a
//! [`PageWait`] for text sends one `Runtime.evaluate` to each frame's watcher world and
//! reads the replies at a later check, never waiting for them, so a check costs a lock and
//! a few channel reads however slow the page is.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::activity::{Mark, Since};
use super::cdp::{Connection, Pending};
use super::{lock, BrowserEngine, PageId};
use crate::server::{Awaited, Outcome};

/// `idle: "network"` is met once no request has been in flight for this long.
pub const NETWORK_QUIET: Duration = Duration::from_millis(500);
/// `idle: "dom"` is met once no frame's DOM has changed for this long.
pub const DOM_QUIET: Duration = Duration::from_millis(500);
/// After an action, this long is given for what it started (a navigation, requests) to
/// show; an action that started nothing answers after it.
pub const SETTLE_START: Duration = Duration::from_millis(500);
/// After an action, at most this long is waited for its navigation to load and its
/// requests to finish; then the answer says what is still going on.
pub const SETTLE_MAX: Duration = Duration::from_secs(5);
/// A text probe not answered in this long is given up and sent again.
const PROBE_PATIENCE: Duration = Duration::from_secs(2);
/// At most this many frames are searched for a text.
const MAX_PROBED_FRAMES: usize = 20;
const POLL: Duration = Duration::from_millis(50);

/// What a `browser_wait` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// The text is shown in some frame (case and runs of white space ignored).
    Text(String),
    /// The text is shown in no frame.
    TextGone(String),
    /// No request in flight for [`NETWORK_QUIET`].
    NetworkIdle,
    /// No DOM change for [`DOM_QUIET`].
    DomIdle,
}

impl Condition {
    /// The one condition of validated `browser_wait` arguments.
    pub fn of(args: &Map<String, Value>) -> Result<Condition, String> {
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
        let given = ["text", "textGone", "idle"]
            .iter()
            .filter(|key| args.contains_key(**key))
            .count();
        if given != 1 {
            return Err(
                "browser_wait needs exactly one of text, textGone or idle; nothing was waited for"
                    .into(),
            );
        }
        Ok(
            match (text("text"), text("textGone"), text("idle").as_deref()) {
                (Some(text), _, _) => Condition::Text(text),
                (_, Some(text), _) => Condition::TextGone(text),
                (_, _, Some("dom")) => Condition::DomIdle,
                _ => Condition::NetworkIdle,
            },
        )
    }
}

/// A `browser_wait` in progress.
pub struct PageWait {
    engine: Arc<BrowserEngine>,
    page: PageId,
    node_id: String,
    condition: Condition,
    started: Instant,
    /// The text probe in flight and when it was sent.
    probe: Option<(Vec<Pending>, Instant)>,
    /// Whether the text was found at the last completed probe.
    text_found: Option<bool>,
}

/// The page's state at one look.
struct Seen {
    in_flight: usize,
    network_quiet: Duration,
    dom_quiet: Duration,
    dialog: Option<Value>,
}

impl PageWait {
    /// A wait on `page` for `condition`, answered for browser node `node_id`.
    pub fn new(
        engine: Arc<BrowserEngine>,
        page: PageId,
        node_id: &str,
        condition: Condition,
    ) -> PageWait {
        PageWait {
            engine,
            page,
            node_id: node_id.to_string(),
            condition,
            started: Instant::now(),
            probe: None,
            text_found: None,
        }
    }

    /// The page now; `None` once it is closed or lost with its Chromium.
    fn look(&self) -> Option<Seen> {
        if !self.engine.is_ready(&self.page) {
            return None;
        }
        let now = Instant::now();
        self.engine.shared.activity(&self.page, |page| Seen {
            in_flight: page.in_flight(),
            network_quiet: page.network_quiet(now),
            // Changes before the wait began do not count against it.
            dom_quiet: page
                .dom_quiet(now)
                .min(now.saturating_duration_since(self.started)),
            dialog: page.dialog().map(|d| d.to_json()),
        })
    }

    /// Whether the text is on the page, once a probe has answered; sends the next one.
    fn text_on_page(&mut self, text: &str) -> Option<bool> {
        if let Some((pending, sent)) = self.probe.take() {
            let replies: Vec<_> = pending.iter().map(Pending::reply).collect();
            if replies.iter().any(Option::is_none) {
                if sent.elapsed() < PROBE_PATIENCE {
                    self.probe = Some((pending, sent));
                }
                return None;
            }
            let found = |reply: &Value| reply.pointer("/result/value") == Some(&Value::Bool(true));
            let answered = |reply: &Value| {
                reply
                    .pointer("/result/type")
                    .is_some_and(|t| t == "boolean")
            };
            let replies: Vec<Value> = replies.into_iter().flatten().flatten().collect();
            if replies.iter().any(found) {
                return Some(true);
            }
            // A frame that could not answer (its document was being replaced) may show it.
            let all = !pending.is_empty() && replies.len() == pending.len();
            return (all && replies.iter().all(answered)).then_some(false);
        }
        let contexts = self
            .engine
            .shared
            .activity(&self.page, |page| page.watch_contexts())?;
        // Only while the page's Chromium runs (a check never starts one).
        let (connection, _) = self.engine.live_page(&self.page)?;
        // serde_json output is a valid JavaScript string literal.
        let expression = format!(
            "(() => {{ const norm = (s) => String(s).replace(/\\s+/g, ' ').trim().toLowerCase(); \
             const body = document.body; return !!body && norm(body.innerText).includes(norm({})); }})()",
            Value::String(text.to_string())
        );
        let pending = contexts
            .into_iter()
            .take(MAX_PROBED_FRAMES)
            .map(|(session, context)| {
                let params = json!({ "expression": expression, "contextId": context, "returnByValue": true });
                connection.request("Runtime.evaluate", params, Some(&session))
            })
            .collect();
        self.probe = Some((pending, Instant::now()));
        None
    }

    fn answer(&self, state: &str, seen: &Seen) -> Value {
        let info = self.engine.page_info(&self.page).unwrap_or_default();
        let millis = |d: Duration| d.as_millis() as u64;
        let mut answer = json!({
            "nodeId": self.node_id,
            "state": state,
            "waitedMs": millis(self.started.elapsed()),
            "url": info.url,
            "title": info.title,
            "requestsInFlight": seen.in_flight,
            "networkQuietMs": millis(seen.network_quiet),
            "domQuietMs": millis(seen.dom_quiet),
        });
        // Known once a look at the page's text has answered (text waits only).
        if let Some(found) = self.text_found {
            answer["textFound"] = json!(found);
        }
        if let Some(dialog) = &seen.dialog {
            answer["dialog"] = dialog.clone();
        }
        answer
    }

    fn closed() -> Outcome {
        Err("The browser page closed while waiting; open it again with browser_open".into())
    }
}

impl Awaited for PageWait {
    fn check(&mut self) -> Option<Outcome> {
        let Some(seen) = self.look() else {
            return Some(PageWait::closed());
        };
        if seen.dialog.is_some() {
            return Some(Ok(self.answer("dialog", &seen)));
        }
        let met = match self.condition.clone() {
            Condition::NetworkIdle => seen.network_quiet >= NETWORK_QUIET,
            Condition::DomIdle => seen.dom_quiet >= DOM_QUIET,
            Condition::Text(text) | Condition::TextGone(text) => {
                if let Some(found) = self.text_on_page(&text) {
                    self.text_found = Some(found);
                }
                let want = matches!(self.condition, Condition::Text(_));
                self.text_found == Some(want)
            }
        };
        met.then(|| Ok(self.answer("met", &seen)))
    }

    fn at_deadline(&mut self) -> Outcome {
        match self.look() {
            Some(seen) => Ok(self.answer("timed_out", &seen)),
            None => PageWait::closed(),
        }
    }
}

impl BrowserEngine {
    /// The counters of `page` now, to [`settle`](Self::settle) after an action.
    pub(super) fn mark(&self, page: &PageId) -> Option<Mark> {
        self.shared.activity(page, |a| a.mark())
    }

    /// Waits (at most [`SETTLE_MAX`], and never past `deadline`) for what an action begun
    /// at `mark` started: a main-frame navigation to load, requests to finish. Returns the
    /// answer's added fields: `after` (`navigated`, `loading`, `requests_done`,
    /// `requests_pending`, `dialog` or `nothing`), `url` after a navigation, the `dialog`
    /// and `fileChooser` when one opened.
    pub(super) fn settle(
        &self,
        page: &PageId,
        mark: Option<Mark>,
        deadline: Instant,
    ) -> Map<String, Value> {
        let mut fields = Map::new();
        let Some(mark) = mark else {
            return fields;
        };
        let started = Instant::now();
        let until = (started + SETTLE_MAX).min(deadline);
        let since = loop {
            let look = self
                .shared
                .activity(page, |a| (a.since(&mark), a.dialog().cloned()));
            let Some((since, dialog)) = look else {
                return fields;
            };
            if let Some(dialog) = dialog {
                fields.insert("after".into(), json!("dialog"));
                fields.insert("dialog".into(), dialog.to_json());
                break since;
            }
            let navigating = since.navigation_started && since.loading;
            let busy = navigating || since.requests_in_flight > 0;
            let loaded = since.committed && since.loaded;
            let now = Instant::now();
            if (!busy && (loaded || now >= started + SETTLE_START)) || now >= until {
                fields.insert("after".into(), json!(after(&since)));
                break since;
            }
            std::thread::sleep(POLL);
        };
        if since.committed || since.in_document || since.loading {
            let url = self.refresh_page_info(page, deadline).map(|info| info.url);
            fields.insert("url".into(), json!(url));
        }
        if since.choosers > 0 {
            fields.insert(
                "fileChooser".into(),
                json!("A file chooser opened and was dismissed: uploading files is not supported"),
            );
        }
        fields
    }

    /// The connection and session of `page` while its Chromium runs; never starts one.
    fn live_page(&self, page: &PageId) -> Option<(Arc<Connection>, String)> {
        let mut running = lock(&self.running);
        let current = running.as_mut()?;
        if !current.alive() {
            return None;
        }
        let state = lock(&self.shared.pages);
        let state = state
            .get(page)
            .filter(|s| s.generation == current.generation)?;
        Some((Arc::clone(&current.connection), state.session.clone()))
    }

    /// The open dialog of `page`, if any.
    pub(super) fn open_dialog(&self, page: &PageId) -> Option<super::activity::Dialog> {
        self.shared
            .activity(page, |a| a.dialog().cloned())
            .flatten()
    }
}

/// What an action led to, in one word.
fn after(since: &Since) -> &'static str {
    match since {
        Since {
            committed: true,
            loaded: false,
            ..
        } => "loading",
        Since {
            committed: true, ..
        }
        | Since {
            in_document: true, ..
        } => "navigated",
        Since {
            navigation_started: true,
            loading: true,
            ..
        } => "loading",
        Since {
            requests_in_flight: 1..,
            ..
        } => "requests_pending",
        Since {
            requests_started: true,
            ..
        } => "requests_done",
        _ => "nothing",
    }
}
