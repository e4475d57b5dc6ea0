//! # The canvas room
//!
//! Owns every project's canvas and applies canvas requests to them. Offers the rest of
//! the host [`Canvas`] (one project's nodes and file) and [`owner::HeadlessCanvas`] (the
//! runtime's `CanvasOwner`: every canvas behind one lock, terminals and browser tabs
//! started and closed with their nodes). It uses the terminals and browser rooms; they
//! know nothing of it.
//!
//! The headless canvas: nodes, selection and the canvas-owned operations, persisted to
//! `<project>/.termsprawl/project.json`.
//!
//! Plain state and operations, synchronous, with no thread and no knowledge of the
//! runtime: the host's canvas owner holds one [`Canvas`] per project and calls
//! [`Canvas::apply`] for each `CanvasToolRequest`.
//!
//! This file holds the [`Canvas`] itself, its host-facing API, the constants and
//! [`CanvasError`]; the rest is split by concern:
//! - `node.rs`: the node model ([`Node`], [`NodeKind`], …) and reading one `nodes` entry;
//! - `file.rs`: loading and saving `project.json` ([`Canvas::load`]);
//! - `operations.rs`: [`Canvas::apply`] and the canvas-owned operations;
//! - `placement.rs`: where a new node goes.
//!
//! Rules an auditor can check here (each names the file that implements it):
//! - Every change is made on a copy, saved with `private_json`, and only then becomes the
//!   canvas. An invalid request or a failed save leaves the canvas (and the file) as it was.
//!   (`Canvas::change` here; saving in `file.rs`.)
//! - A `project.json` that cannot be read as a canvas is an error naming the file and is
//!   never written to. (`file.rs`.)
//! - Entries of `nodes` that are not valid nodes (unknown type, bad id, wrong shapes,
//!   a repeated id) are left off the canvas, reported by [`Canvas::warnings`], and written
//!   back verbatim after the known nodes on every save, so a node kind this host does not
//!   know (say, from a newer desktop app) is never lost. Unknown keys of the file, of a
//!   node and of its `data` are kept the same way. (`file.rs`; what a valid node is:
//!   `read_node` in `node.rs`.)
//! - A node's `parentId` must name a top-level group; a loaded node whose parent is
//!   missing or not such a group becomes top-level (its position kept as it was).
//!   A loaded size below its kind's minimum is raised to it. (`file.rs`, `node.rs`.)
//! - Placement of new nodes: candidate top-left corners are `(x, y)` with `x` from
//!   {0} ∪ {right edge + gap of each node} and `y` from {0} ∪ {bottom edge + gap of each
//!   node}, both non-negative; they are tried row by row (smallest `y`, then smallest `x`)
//!   and the first where the new node, kept [`PLACEMENT_GAP`] away from every existing
//!   node (children at their absolute positions), fits and does not run past
//!   [`ROW_WIDTH`] (unless it starts at `x = 0`) is taken. The spot below everything is
//!   always free, so a place is always found. (`placement.rs`.)
//! - A terminal whose program ended keeps its end and last screen in the file's
//!   `endedTerminals` (node id -> [`EndedTerminal::to_json`]) until the node is removed,
//!   so a restart still shows it ended. An entry for no terminal node, or of another
//!   shape, is dropped at load with a warning. (Kept by [`Canvas::record_ended`] and
//!   dropped with its node here; loaded and saved in `file.rs`.)

mod file;
pub mod lock;
mod node;
mod operations;
pub mod owner;
mod placement;
#[cfg(test)]
mod test_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

pub use crate::host::error::CanvasError;
use crate::host::terminals::EndedTerminal;
pub use crate::protocol::is_valid_node_id;
pub use node::{Node, NodeData, NodeKind, Position, Size, Tab};
pub use node::{TERMINAL_CELL, TERMINAL_COLS, TERMINAL_FRAME, TERMINAL_ROWS};

/// The folder inside a project that holds its canvas and links.
pub const PROJECT_DIR: &str = crate::runtime::context::STATE_DIR;
/// The canvas file inside [`PROJECT_DIR`].
pub const PROJECT_FILE: &str = "project.json";
/// The `version` written into `project.json`.
pub const FILE_VERSION: u64 = 1;
/// The top-level key of `project.json` holding ended terminals (see the module docs).
pub const ENDED_KEY: &str = "endedTerminals";
/// The most nodes one canvas holds; creating more is refused.
pub const MAX_NODES: usize = 500;
/// Space between a group's frame and the nodes it frames, on every side.
pub const GROUP_PADDING: f64 = 32.0;
/// Least distance kept between a newly placed node and every existing one.
pub const PLACEMENT_GAP: f64 = 40.0;
/// New nodes are placed in rows no wider than this (a wider node starts a row at x = 0).
pub const ROW_WIDTH: f64 = 2400.0;

fn refused<T>(message: impl Into<String>) -> Result<T, CanvasError> {
    Err(CanvasError::Refused(message.into()))
}

/// One project's canvas: its nodes and selection, and the file they are kept in.
#[derive(Clone, Debug)]
pub struct Canvas {
    file: PathBuf,
    project_id: String,
    nodes: Vec<Node>,
    selection: Vec<String>,
    /// `nodes` entries that are not valid nodes, written back verbatim.
    carried_entries: Vec<Value>,
    /// Top-level keys of the file this host does not know, written back verbatim.
    carried_keys: Map<String, Value>,
    /// Terminal nodes whose program ended: how, when, their last screen.
    ended: BTreeMap<String, EndedTerminal>,
    warnings: Vec<String>,
}

impl Canvas {
    /// Applies `change` to a copy; if the nodes, the selection or the ended terminals
    /// changed, saves the copy and makes it the canvas. On any error the canvas stays as
    /// it was.
    fn change<T>(
        &mut self,
        change: impl FnOnce(&mut Canvas) -> Result<T, CanvasError>,
    ) -> Result<T, CanvasError> {
        let mut next = self.clone();
        let result = change(&mut next)?;
        if next.nodes != self.nodes || next.selection != self.selection || next.ended != self.ended
        {
            next.save()?;
            *self = next;
        }
        Ok(result)
    }

    /// Puts the agent node `node_id` on the canvas (for `serve --agent ID`) and saves: a
    /// terminal with `data.agentId = agent`, no command (its agent runs elsewhere), titled
    /// with its id. Returns `false`, changing nothing, when a terminal with that id is
    /// already there (a restart); another kind of node with that id is refused.
    pub fn add_agent_node(&mut self, node_id: &str, agent: &str) -> Result<bool, CanvasError> {
        self.change(|canvas| canvas.put_agent_node(node_id, agent))
    }

    /// [`add_agent_node`](Self::add_agent_node) without saving, for it and for
    /// [`Canvas::load_with_agents`].
    pub(super) fn put_agent_node(
        &mut self,
        node_id: &str,
        agent: &str,
    ) -> Result<bool, CanvasError> {
        if !is_valid_node_id(node_id) {
            return refused(format!(
                "Invalid agent node id {node_id:?}: use 1 to 128 letters, digits, '_' or '-', starting with a letter or digit"
            ));
        }
        match self.node(node_id) {
            Some(node) if node.kind == NodeKind::Terminal => return Ok(false),
            Some(node) => {
                return refused(format!(
                    "Node {node_id} is already on the canvas as a {}; choose another agent id",
                    node.kind.name()
                ))
            }
            None => {}
        }
        self.require_room()?;
        let size = NodeKind::Terminal.default_size();
        let node = Node {
            id: node_id.to_string(),
            kind: NodeKind::Terminal,
            position: self.place(size),
            size,
            parent_id: None,
            data: NodeData {
                title: node_id.to_string(),
                agent_id: Some(agent.to_string()),
                ..NodeData::default()
            },
            extra: Map::new(),
        };
        self.nodes.push(node);
        Ok(true)
    }

    /// Records that tab `tab_id` of browser node `node_id` now shows `url` titled `title`
    /// (its page navigated, or the page itself did), and saves. Nothing changes when it
    /// already said so or there is no such tab.
    pub fn set_tab_page(
        &mut self,
        node_id: &str,
        tab_id: &str,
        url: &str,
        title: &str,
    ) -> Result<(), CanvasError> {
        fn tab_of<'a>(canvas: &'a mut Canvas, node_id: &str, tab_id: &str) -> Option<&'a mut Tab> {
            let node = canvas.nodes.iter_mut().find(|n| n.id == node_id)?;
            node.data.tabs.as_mut()?.iter_mut().find(|t| t.id == tab_id)
        }
        let title = (!title.is_empty()).then(|| title.to_string());
        match tab_of(self, node_id, tab_id) {
            Some(tab) if tab.url != url || tab.title != title => {}
            _ => return Ok(()),
        }
        self.change(|canvas| {
            if let Some(tab) = tab_of(canvas, node_id, tab_id) {
                tab.url = url.to_string();
                tab.title = title;
            }
            Ok(())
        })
    }

    /// Removes a node of any kind and saves; `None` when there is no such node.
    /// Removing a group releases its members to the top level at the same place.
    pub fn remove_node(&mut self, node_id: &str) -> Result<Option<Node>, CanvasError> {
        if self.node(node_id).is_none() {
            return Ok(None);
        }
        self.change(|canvas| Ok(canvas.remove(node_id)))
    }

    /// Keeps how terminal node `node_id`'s program ended and its last screen, and saves.
    /// `false`, changing nothing, when there is no such terminal node or that end is
    /// kept already.
    pub fn record_ended(
        &mut self,
        node_id: &str,
        ended: &EndedTerminal,
    ) -> Result<bool, CanvasError> {
        let terminal = self
            .node(node_id)
            .is_some_and(|n| n.kind == NodeKind::Terminal);
        if !terminal || self.ended.get(node_id) == Some(ended) {
            return Ok(false);
        }
        self.change(|canvas| {
            canvas.ended.insert(node_id.to_string(), ended.clone());
            Ok(true)
        })
    }

    /// The terminal nodes whose program ended, with how and their last screen.
    pub fn ended_terminals(&self) -> &BTreeMap<String, EndedTerminal> {
        &self.ended
    }

    /// The node with this id.
    pub fn node(&self, node_id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == node_id)
    }

    /// Every node, in drawing order (a group before its members).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The selected node ids.
    pub fn selection(&self) -> &[String] {
        &self.selection
    }

    /// The project's id.
    pub fn project_id(&self) -> &str {
        &self.project_id
    }

    /// The `project.json` this canvas is kept in.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// What was odd about the file when it was loaded (skipped entries, dropped
    /// parents), one line each, for the host's log.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// A node's top-left corner in canvas coordinates.
    pub fn absolute_position(&self, node: &Node) -> Position {
        let parent = node.parent_id.as_deref().and_then(|p| self.node(p));
        match parent {
            Some(parent) => Position {
                x: parent.position.x + node.position.x,
                y: parent.position.y + node.position.y,
            },
            None => node.position,
        }
    }

    /// Removes a node (and its id from the selection) in memory; a group's members
    /// become top-level at their absolute positions.
    fn remove(&mut self, node_id: &str) -> Option<Node> {
        let index = self.nodes.iter().position(|n| n.id == node_id)?;
        let node = self.nodes.remove(index);
        for member in self.nodes.iter_mut() {
            if member.parent_id.as_deref() == Some(node_id) {
                member.parent_id = None;
                member.position.x += node.position.x;
                member.position.y += node.position.y;
            }
        }
        self.selection.retain(|id| id != node_id);
        self.ended.remove(node_id);
        Some(node)
    }

    fn require_room(&self) -> Result<(), CanvasError> {
        if self.nodes.len() >= MAX_NODES {
            return refused(format!(
                "The canvas already holds {MAX_NODES} nodes; close some before opening more"
            ));
        }
        Ok(())
    }
}

/// `bytes` random bytes as lowercase hex.
fn random_hex(bytes: usize) -> Result<String, String> {
    crate::base::random_hex(bytes).map_err(|e| format!("{e}; try again"))
}

#[cfg(test)]
mod tests {
    use super::test_support::{args, file_bytes, open, project};
    use super::*;
    use serde_json::json;
    use std::fs;

    #[test]
    fn a_failed_save_leaves_the_canvas_unchanged() {
        let dir = project("save-fails");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "terminal_open", json!({}));
        // A non-empty directory where the file goes: the rename fails, even for root.
        fs::remove_file(canvas.file()).unwrap();
        fs::create_dir_all(canvas.file().join("blocker")).unwrap();
        let nodes = canvas.nodes().to_vec();
        let err = canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": a, "x": 999, "y": 999})),
            )
            .unwrap_err();
        assert!(err.contains("the canvas was not changed"), "{err}");
        assert!(err.contains(&canvas.file().display().to_string()), "{err}");
        assert_eq!(canvas.nodes(), nodes.as_slice());
        assert!(canvas
            .apply("sticky_open", &args(json!({"text": "x"})))
            .is_err());
        assert_eq!(canvas.nodes(), nodes.as_slice());
        assert!(canvas.remove_node(&a).is_err());
        assert!(canvas.node(&a).is_some());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_canvas_has_a_node_limit() {
        let dir = project("limit");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "sticky_open", json!({"text": "a"}));
        let template = canvas.node(&a).unwrap().clone();
        for n in canvas.nodes.len()..MAX_NODES {
            let mut node = template.clone();
            node.id = format!("filler-{n}");
            canvas.nodes.push(node);
        }
        let err = canvas.apply("terminal_open", &args(json!({}))).unwrap_err();
        assert!(err.contains("close some"), "{err}");
        assert!(canvas
            .apply("canvas_group", &args(json!({"nodeIds": [a]})))
            .is_err());
        assert_eq!(canvas.nodes().len(), MAX_NODES);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_new_project_with_agent_nodes_is_written_once_with_them() {
        use std::os::unix::fs::MetadataExt;
        let dir = project("with-agents");
        let agents = [("me", "external"), ("you", "claude-mcp")];
        let canvas = Canvas::load_with_agents(&dir, Some("p1"), &agents).unwrap();
        let ids: Vec<&str> = canvas.nodes().iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["me", "you"]);
        let on_disk = Canvas::load(&dir, None).unwrap();
        assert_eq!(on_disk.project_id(), "p1");
        assert_eq!(on_disk.nodes(), canvas.nodes());
        assert_eq!(
            on_disk.node("you").unwrap().data.agent_id.as_deref(),
            Some("claude-mcp")
        );
        // Loading again with the same agents changes nothing, so nothing is written.
        let inode = || fs::metadata(canvas.file()).unwrap().ino();
        let written = inode();
        let again = Canvas::load_with_agents(&dir, Some("p1"), &agents).unwrap();
        assert_eq!(again.nodes(), canvas.nodes());
        assert_eq!(inode(), written);
        // A refused agent node fails the load before anything is saved.
        let fresh = project("with-a-bad-agent");
        let refused = Canvas::load_with_agents(&fresh, None, &[("ok", "x"), ("../x", "x")]);
        assert!(matches!(refused, Err(CanvasError::Refused(_))));
        assert!(!fresh.join(PROJECT_DIR).join(PROJECT_FILE).exists());
        fs::remove_dir_all(dir).unwrap();
        fs::remove_dir_all(fresh).unwrap();
    }

    #[test]
    fn host_helpers_add_agent_nodes_and_remove_nodes() {
        let dir = project("helpers");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        assert!(canvas.add_agent_node("me", "external").unwrap());
        let me = canvas.node("me").unwrap();
        assert_eq!(me.kind, NodeKind::Terminal);
        assert_eq!(
            serde_json::to_value(&me.data).unwrap(),
            json!({"title": "me", "agentId": "external"})
        );
        let before = file_bytes(&canvas);
        assert!(
            !canvas.add_agent_node("me", "external").unwrap(),
            "already there"
        );
        assert_eq!(file_bytes(&canvas), before);
        assert!(Canvas::load(&dir, None).unwrap().node("me").is_some());
        assert!(matches!(
            canvas.add_agent_node("../x", "external"),
            Err(CanvasError::Refused(_))
        ));
        let sticky = open(&mut canvas, "sticky_open", json!({"text": "s"}));
        assert!(canvas.add_agent_node(&sticky, "external").is_err());

        // Removing a group releases its member where it was.
        canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": sticky, "x": 3000, "y": 10})),
            )
            .unwrap();
        let group = open(&mut canvas, "canvas_group", json!({"nodeIds": [sticky]}));
        let removed = canvas.remove_node(&group).unwrap().unwrap();
        assert_eq!(removed.kind, NodeKind::Group);
        let released = canvas.node(&sticky).unwrap();
        assert_eq!(released.parent_id, None);
        assert_eq!(released.position, Position { x: 3000.0, y: 10.0 });
        assert!(canvas.remove_node(&group).unwrap().is_none());
        assert!(canvas.remove_node("me").unwrap().is_some());
        assert!(Canvas::load(&dir, None).unwrap().node("me").is_none());
        fs::remove_dir_all(dir).unwrap();
    }
}
