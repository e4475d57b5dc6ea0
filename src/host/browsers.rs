//! The default host's [`Browsers`] until a browser engine is wired in: browser nodes exist
//! on the canvas, but their guests never become ready.

use std::sync::mpsc::Sender;

use serde_json::{Map, Value};

use crate::runtime::Browsers;

/// No browser engine: every guest is reported gone at once, so the runtime answers
/// with its "not ready or was closed" error without waiting out its timeout.
#[derive(Debug, Default)]
pub struct NoBrowserEngine;

impl Browsers for NoBrowserEngine {
    fn watch_guest(&self, _node_id: &str, _tab_id: &str, ready: Sender<String>) {
        // Dropping `ready` unsent tells the runtime there is no guest for this tab.
        drop(ready);
    }

    fn run(
        &self,
        _target_id: &str,
        _operation: &str,
        _args: &Map<String, Value>,
    ) -> Result<Value, String> {
        Err("This host has no browser engine; browser pages cannot be driven".into())
    }
}
