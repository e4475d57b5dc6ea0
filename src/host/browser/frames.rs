//! Frames of other sites, which Chromium runs in processes of their own: each page (and
//! each such frame) auto-attaches to them in flat mode, paused before they run; the event
//! hook then sets every one up like a page (the navigation policy's `Fetch`, the events
//! `activity.rs` counts, our watcher) and lets it run. The snapshot reads them through
//! their sessions, and a ref in one acts through it (`elements.rs`).

use std::collections::HashMap;

use serde_json::{json, Value};

use super::activity;
use super::cdp::{Connection, Event};
use super::{lock, PageId, Shared, GUARD_JS, TOOLS_WORLD};

/// A frame in another process: the page it belongs to and its frame id (its target id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildFrame {
    /// The page whose frame tree holds it.
    pub page: PageId,
    /// Its frame id.
    pub frame: String,
}

/// The frames in other processes, by their session id.
pub type ChildFrames = HashMap<String, ChildFrame>;

/// The commands that set up a session, a page's or a frame's: navigation policy, file
/// choosers, activity events, our watcher, the click guard, and attaching to its own
/// other-site frames.
pub fn session_setup() -> Vec<(&'static str, Value)> {
    vec![
        ("Page.enable", json!({})),
        ("Page.setLifecycleEventsEnabled", json!({ "enabled": true })),
        (
            "Fetch.enable",
            json!({ "patterns": [{ "urlPattern": "*", "resourceType": "Document", "requestStage": "Request" }] }),
        ),
        (
            "Page.setInterceptFileChooserDialog",
            json!({ "enabled": true }),
        ),
        // What `activity.rs` counts: requests, and DOM changes our watcher reports.
        (
            "Network.enable",
            json!({ "maxTotalBufferSize": 1_000_000, "maxResourceBufferSize": 100_000 }),
        ),
        (
            "Runtime.addBinding",
            json!({ "name": activity::MUTATION_BINDING, "executionContextName": activity::WATCH_WORLD }),
        ),
        (
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": activity::WATCH_JS, "worldName": activity::WATCH_WORLD, "runImmediately": true }),
        ),
        // The click guard, before any script of the page (`js/guard.js`).
        (
            "Page.addScriptToEvaluateOnNewDocument",
            json!({ "source": GUARD_JS, "worldName": TOOLS_WORLD, "runImmediately": true }),
        ),
        ("Runtime.enable", json!({})),
        // What `logs.rs` keeps beside the console: failed loads, security and the like.
        ("Log.enable", json!({})),
        (
            "Target.setAutoAttach",
            json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true,
                    "filter": [{ "type": "iframe" }] }),
        ),
    ]
}

impl Shared {
    /// Hands an event of a page's session, or of one of its frames in another process, to
    /// that page's activity.
    pub(super) fn record_activity(&self, session: &str, event: &Event) {
        let child = lock(&self.children).get(session).map(|c| c.page.clone());
        let mut pages = lock(&self.pages);
        let (page, main_frame) = match child {
            Some(page) => (pages.get_mut(&page), None),
            None => match pages.iter_mut().find(|(_, s)| s.session == session) {
                Some((page, state)) => (Some(state), Some(page.as_str())),
                None => (None, None),
            },
        };
        if let Some(state) = page {
            let (method, params) = (&event.method, &event.params);
            state.activity.on_event(session, method, params, main_frame);
        }
    }

    /// The page a session belongs to: the page's own, or one of its frames'.
    pub(super) fn page_of_any_session(&self, session: &str) -> Option<PageId> {
        let child = lock(&self.children).get(session).map(|c| c.page.clone());
        child.or_else(|| self.page_of_session(session))
    }

    /// The sessions of `page`'s frames in other processes, by frame id.
    pub(super) fn frame_sessions(&self, page: &PageId) -> HashMap<String, String> {
        let children = lock(&self.children);
        let of_page = children.iter().filter(|(_, c)| c.page == *page);
        of_page.map(|(s, c)| (c.frame.clone(), s.clone())).collect()
    }
}

/// `Target.attachedToTarget` on `parent`, a session of `page`: a frame is set up and let
/// run; anything else attached is only let run. Runs on the reader thread: only sends.
pub fn attached(
    connection: &Connection,
    page: Option<PageId>,
    params: &Value,
) -> Option<(String, ChildFrame)> {
    let session = params["sessionId"].as_str()?;
    let info = &params["targetInfo"];
    let child = match (page, info["type"].as_str()) {
        (Some(page), Some("iframe")) => {
            for (method, params) in session_setup() {
                connection.send(method, params, Some(session));
            }
            let frame = info["targetId"].as_str().unwrap_or_default().to_string();
            Some((session.to_string(), ChildFrame { page, frame }))
        }
        _ => None,
    };
    // Sent after the setup on the same pipe, so the frame runs with it in place.
    connection.send("Runtime.runIfWaitingForDebugger", json!({}), Some(session));
    child
}

#[cfg(test)]
mod tests {
    use super::super::cdp::fake;
    use super::*;

    #[test]
    fn a_frame_is_set_up_before_it_runs_and_anything_else_only_runs() {
        let (connection, mut sent, _chromium) = fake::connection(Box::new(|_, _| {}));
        let params = json!({ "sessionId": "C1", "waitingForDebugger": true,
                             "targetInfo": { "targetId": "F9", "type": "iframe" } });
        let child = attached(&connection, Some(PageId("T1".into())), &params);
        let expected = ChildFrame {
            page: PageId("T1".into()),
            frame: "F9".into(),
        };
        assert_eq!(child, Some(("C1".to_string(), expected)));
        for (method, _) in session_setup() {
            let command = fake::read_command(&mut sent);
            assert_eq!(
                (command["method"].as_str(), command["sessionId"].as_str()),
                (Some(method), Some("C1"))
            );
        }
        let run = fake::read_command(&mut sent);
        assert_eq!(run["method"], "Runtime.runIfWaitingForDebugger");

        let worker =
            json!({ "sessionId": "W1", "targetInfo": { "targetId": "X", "type": "worker" } });
        assert_eq!(
            attached(&connection, Some(PageId("T1".into())), &worker),
            None
        );
        let run = fake::read_command(&mut sent);
        assert_eq!(
            (run["method"].as_str(), run["sessionId"].as_str()),
            (Some("Runtime.runIfWaitingForDebugger"), Some("W1"))
        );
        // A frame of no known page is only let run.
        assert_eq!(attached(&connection, None, &params), None);
    }
}
