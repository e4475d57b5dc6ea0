//! The default host's [`Browsers`]: every tab of a browser node is a page of one headless
//! Chromium ([`BrowserEngine`]), its target id the guest id the runtime hands back.
//!
//! The canvas owner registers each tab it knows ([`ChromiumBrowsers::register`], for the
//! nodes loaded from `project.json`) and opens the tab of a new `browser_open` node at once
//! ([`ChromiumBrowsers::open`]). Pages open on their own thread, so the owner never waits
//! for Chromium. [`Browsers::watch_guest`] answers at once for a ready page, waits for one
//! being opened, and opens a registered tab that has no page yet (after a restart, or after
//! Chromium died), so a tab comes back when an agent next uses it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::base::terminal_text::escape_for_terminal;
use crate::host::browser::waits::{Condition, PageWait};
use crate::host::browser::{BrowserEngine, EngineConfig, PageId, PageInfo};
use crate::runtime::Browsers;
use crate::server::Awaited;

/// How long the canvas owner waits for a new node's page before answering `browser_open`
/// (starting Chromium takes seconds; the runtime itself waits only 3 s for the guest).
/// Under the canvas request's 9 s expiry.
pub const BROWSER_OPEN_WAIT: Duration = Duration::from_secs(7);
/// How long opening a page (including starting Chromium) may take.
pub const PAGE_OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// The deadline given to one page operation (the runtime stops waiting at 15 s).
pub const PAGE_OPERATION_TIMEOUT: Duration = Duration::from_secs(14);

enum PageSlot {
    /// Known from the canvas; no page yet.
    Closed,
    /// Being opened; these watchers hear when it is ready.
    Opening(Vec<Sender<String>>),
    /// Open (while the engine reports it ready).
    Open(PageId),
}

struct Tab {
    url: String,
    page: PageSlot,
}

/// (browser node id, tab id).
type TabKey = (String, String);

/// Browser guests on a shared headless Chromium; see the module docs.
pub struct ChromiumBrowsers {
    engine: Arc<BrowserEngine>,
    tabs: Arc<Mutex<HashMap<TabKey, Tab>>>,
}

fn lock(tabs: &Mutex<HashMap<TabKey, Tab>>) -> MutexGuard<'_, HashMap<TabKey, Tab>> {
    // Each slot is replaced whole; a panic elsewhere cannot leave one half-written.
    tabs.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `browser.executable` from `preferences.json`, if it names one.
fn configured_executable(preferences: &Path) -> Option<PathBuf> {
    let value = crate::base::files::read_json(preferences).ok()??;
    let executable = value.get("browser")?.get("executable")?.as_str()?;
    (!executable.trim().is_empty()).then(|| PathBuf::from(executable))
}

impl ChromiumBrowsers {
    /// An engine for the data directory `data`: profiles under `<data>/agent-tools/browser`,
    /// the binary from `preferences.json` `browser.executable`, else found on PATH. Chromium
    /// starts with the first page.
    pub fn new(data: &Path) -> ChromiumBrowsers {
        let agent_tools = data.join("agent-tools");
        let config = EngineConfig {
            executable: configured_executable(&agent_tools.join("preferences.json")),
            profile_dir: agent_tools.join("browser"),
        };
        ChromiumBrowsers {
            engine: Arc::new(BrowserEngine::new(config)),
            tabs: Arc::default(),
        }
    }

    /// Why no page can be opened (no Chromium), if so: lets `browser_open` refuse before
    /// it creates a node.
    pub fn unavailable(&self) -> Option<String> {
        self.engine.find_executable().err().map(|e| e.to_string())
    }

    /// Makes a tab known (its page opens when an agent first needs it).
    pub fn register(&self, node_id: &str, tab_id: &str, url: &str) {
        lock(&self.tabs)
            .entry((node_id.to_string(), tab_id.to_string()))
            .or_insert_with(|| Tab {
                url: url.to_string(),
                page: PageSlot::Closed,
            });
    }

    /// Makes a tab known and starts opening its page now; the receiver gets the page id
    /// once it is ready (it disconnects if opening failed).
    pub fn open(&self, node_id: &str, tab_id: &str, url: &str) -> Receiver<String> {
        self.register(node_id, tab_id, url);
        let key = (node_id.to_string(), tab_id.to_string());
        let (ready, page) = mpsc::channel();
        let mut tabs = lock(&self.tabs);
        self.start_opening(&mut tabs, &key, Some(ready));
        page
    }

    /// Opens the page of every known tab that has none (at start, with browser control
    /// on) and waits up to `wait` for them; returns how many are ready.
    pub fn reopen_all(&self, wait: Duration) -> usize {
        let pending: Vec<Receiver<String>> = {
            let mut tabs = lock(&self.tabs);
            let keys: Vec<TabKey> = tabs.keys().cloned().collect();
            keys.iter()
                .map(|key| {
                    let (ready, page) = mpsc::channel();
                    self.start_opening(&mut tabs, key, Some(ready));
                    page
                })
                .collect()
        };
        let deadline = Instant::now() + wait;
        pending
            .iter()
            .filter(|page| {
                page.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                    .is_ok()
            })
            .count()
    }

    /// The URL and title of tab `tab_id` of browser node `node_id`, while its page is
    /// open, as last heard from Chromium (see [`BrowserEngine::page_info`]); `refresh`
    /// asks Chromium first (one round trip, at most 1 s).
    pub fn page_info(&self, node_id: &str, tab_id: &str, refresh: bool) -> Option<PageInfo> {
        let page = self.open_page(node_id, tab_id)?;
        match refresh {
            true => self
                .engine
                .refresh_page_info(&page, Instant::now() + Duration::from_secs(1)),
            false => self.engine.page_info(&page),
        }
    }

    /// A base64 PNG of the tab's page, if it is open (never opens one).
    pub fn screenshot(&self, node_id: &str, tab_id: &str) -> Result<String, String> {
        let page = self
            .open_page(node_id, tab_id)
            .ok_or("The page is not open")?;
        self.engine
            .screenshot(&page, Instant::now() + PAGE_OPERATION_TIMEOUT)
            .map_err(|e| e.to_string())
    }

    fn open_page(&self, node_id: &str, tab_id: &str) -> Option<PageId> {
        let key = (node_id.to_string(), tab_id.to_string());
        match &lock(&self.tabs).get(&key)?.page {
            PageSlot::Open(page) => Some(page.clone()),
            _ => None,
        }
    }

    /// Ends Chromium (its process group) and removes its profile.
    pub fn shutdown(&self) {
        self.engine.shutdown();
    }

    /// Starts opening `key`'s page unless it is already open or opening; `watcher` (if
    /// any) hears the page id once ready. Dropping a watcher unsent means it failed.
    fn start_opening(
        &self,
        tabs: &mut HashMap<TabKey, Tab>,
        key: &TabKey,
        watcher: Option<Sender<String>>,
    ) {
        let Some(tab) = tabs.get_mut(key) else {
            return; // Unknown tab: the watcher is dropped, which means "gone".
        };
        match &mut tab.page {
            PageSlot::Open(page) if self.engine.is_ready(page) => {
                if let Some(watcher) = watcher {
                    let _ = watcher.send(page.0.clone());
                }
                return;
            }
            PageSlot::Opening(watchers) => {
                watchers.extend(watcher);
                return;
            }
            PageSlot::Open(_) | PageSlot::Closed => {}
        }
        tab.page = PageSlot::Opening(watcher.into_iter().collect());
        let url = tab.url.clone();
        let engine = self.engine.clone();
        let all_tabs = self.tabs.clone();
        let key = key.clone();
        std::thread::spawn(move || {
            let opened = engine.open_page(&url, Instant::now() + PAGE_OPEN_TIMEOUT);
            let mut tabs = lock(&all_tabs);
            let Some(tab) = tabs.get_mut(&key) else {
                return; // The node left the canvas meanwhile.
            };
            let watchers = match std::mem::replace(&mut tab.page, PageSlot::Closed) {
                PageSlot::Opening(watchers) => watchers,
                _ => Vec::new(),
            };
            match opened {
                Ok(page) => {
                    for watcher in watchers {
                        let _ = watcher.send(page.0.clone());
                    }
                    tab.page = PageSlot::Open(page);
                }
                Err(error) => {
                    // The error may quote the page or its address.
                    let error = escape_for_terminal(&error.to_string()).into_owned();
                    eprintln!("termsprawl-tools: browser {} tab {}: {error}", key.0, key.1);
                }
            }
        });
    }
}

impl Browsers for ChromiumBrowsers {
    fn watch_guest(&self, node_id: &str, tab_id: &str, ready: Sender<String>) {
        let key = (node_id.to_string(), tab_id.to_string());
        let mut tabs = lock(&self.tabs);
        self.start_opening(&mut tabs, &key, Some(ready));
    }

    fn run(
        &self,
        target_id: &str,
        operation: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, String> {
        let page = PageId(target_id.to_string());
        self.engine
            .run_operation(
                &page,
                operation,
                args,
                Instant::now() + PAGE_OPERATION_TIMEOUT,
            )
            .map_err(|e| e.to_string())
    }

    fn wait(&self, target_id: &str, args: &Map<String, Value>) -> Result<Box<dyn Awaited>, String> {
        let condition = Condition::of(args)?;
        let page = PageId(target_id.to_string());
        if !self.engine.is_ready(&page) {
            return Err(
                "Browser page not found or already closed; open it again with browser_open".into(),
            );
        }
        let node_id = args
            .get("nodeId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let wait = PageWait::new(Arc::clone(&self.engine), page, node_id, condition);
        Ok(Box::new(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tabs_are_gone_at_once_and_the_executable_comes_from_preferences() {
        let data = std::env::temp_dir().join(format!("host-browsers-{}", std::process::id()));
        let agent_tools = data.join("agent-tools");
        std::fs::create_dir_all(&agent_tools).unwrap();
        let missing = data.join("no-such-chromium");
        std::fs::write(
            agent_tools.join("preferences.json"),
            serde_json::json!({"browser": {"executable": missing}}).to_string(),
        )
        .unwrap();
        let browsers = ChromiumBrowsers::new(&data);
        assert!(browsers.unavailable().unwrap().contains("No browser found"));
        let (ready, page) = mpsc::channel();
        browsers.watch_guest("b1", "t1", ready);
        assert!(
            page.recv_timeout(Duration::from_secs(1)).is_err(),
            "no such tab"
        );
        // A known tab whose page cannot open: its watcher hears nothing, then disconnects.
        browsers.register("b1", "t1", "https://example.com");
        let (ready, page) = mpsc::channel();
        browsers.watch_guest("b1", "t1", ready);
        assert_eq!(
            page.recv_timeout(Duration::from_secs(5)),
            Err(mpsc::RecvTimeoutError::Disconnected)
        );
        browsers.shutdown();
        let _ = std::fs::remove_dir_all(&data);
    }
}
