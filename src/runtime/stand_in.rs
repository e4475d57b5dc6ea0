//! Stand-ins for the host parts an app does not have: [`NoTerminals`] and [`NoBrowsers`]
//! answer "this host has none", so an app without terminals or browsers implements only
//! [`Workspace`](crate::runtime::Workspace) and [`CanvasOwner`](crate::runtime::CanvasOwner).
//! They sit beside the traits they implement and count in the core like the rest of it.

use std::sync::mpsc::Sender;

use serde_json::{Map, Value};

use super::host::{Browsers, Terminals};

/// [`Browsers`] for an app without browser nodes: no guest is ever ready, and every page
/// operation answers [`NO_BROWSERS`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoBrowsers;

/// What [`NoBrowsers`] answers a page operation.
pub const NO_BROWSERS: &str = "This host has no browsers; browser operations are not available";

impl Browsers for NoBrowsers {
    // Dropping `ready` unsent: the tab is gone, so the call fails at once, not after 3 s.
    fn watch_guest(&self, _node_id: &str, _tab_id: &str, _ready: Sender<String>) {}
    fn run(
        &self,
        _target_id: &str,
        _op: &str,
        _args: &Map<String, Value>,
    ) -> Result<Value, String> {
        Err(NO_BROWSERS.into())
    }
}

/// [`Terminals`] for an app without terminal sessions: none is warm, ready or live, and
/// writes and external views answer [`NO_TERMINALS`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTerminals;

/// What [`NoTerminals`] answers a write or an external view.
pub const NO_TERMINALS: &str =
    "This host has no terminal sessions; terminal input is not available";

impl Terminals for NoTerminals {
    fn is_warm(&self, _node_id: &str) -> bool {
        false
    }
    fn has_ready_session(&self, _node_id: &str) -> bool {
        false
    }
    fn has_live_session(&self, _node_id: &str) -> bool {
        false
    }
    fn write(&self, _node_id: &str, _text: &str) -> Result<(), String> {
        Err(NO_TERMINALS.into())
    }
    fn capture(&self, _node_id: &str) -> Option<String> {
        None
    }
    fn scrollback(&self, _node_id: &str) -> Option<String> {
        None
    }
    fn attach_external(&self, _node_id: &str) -> Result<Value, String> {
        Err(NO_TERMINALS.into())
    }
}
