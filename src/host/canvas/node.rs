//! The node model: what a canvas node is ([`NodeKind`], [`Position`], [`Size`], [`Tab`],
//! [`NodeData`], [`Node`]), serialized exactly as `canvas_list` reports it and as
//! `project.json` keeps it, and `read_node`, which reads one `nodes` entry of the file
//! (checking its id, parent and kind data, raising its size to its kind's minimum).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::is_valid_node_id;
use crate::host::terminals::pty::WindowSize;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A shell, or an agent when `data.command` / `data.agentId` are set.
    Terminal,
    /// A browser with `data.tabs` and `data.activeTabId`.
    Browser,
    /// A note with `data.text`.
    Sticky,
    /// A file (`data.path`) in an editor.
    Editor,
    /// A file (`data.path`) in a diff view.
    Diff,
    /// A frame around other nodes, which then have it as `parentId`.
    Group,
}

impl NodeKind {
    /// The name used in `type` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Terminal => "terminal",
            NodeKind::Browser => "browser",
            NodeKind::Sticky => "sticky",
            NodeKind::Editor => "editor",
            NodeKind::Diff => "diff",
            NodeKind::Group => "group",
        }
    }

    /// The smallest size a node of this kind may have; `canvas_resize` raises to it.
    pub fn min_size(self) -> Size {
        let (width, height) = match self {
            NodeKind::Terminal => (320.0, 200.0),
            NodeKind::Browser => (400.0, 300.0),
            NodeKind::Sticky => (120.0, 80.0),
            NodeKind::Editor => (320.0, 200.0),
            NodeKind::Diff => (400.0, 200.0),
            NodeKind::Group => (160.0, 120.0),
        };
        Size { width, height }
    }

    /// The size a new node of this kind gets (a group is sized to what it frames).
    pub fn default_size(self) -> Size {
        let (width, height) = match self {
            NodeKind::Terminal => (760.0, 560.0),
            NodeKind::Browser => (960.0, 640.0),
            NodeKind::Sticky => (240.0, 200.0),
            NodeKind::Editor => (640.0, 480.0),
            NodeKind::Diff => (800.0, 480.0),
            NodeKind::Group => (160.0, 120.0),
        };
        Size { width, height }
    }

    pub(super) fn default_title(self) -> &'static str {
        match self {
            NodeKind::Terminal => "Terminal",
            NodeKind::Browser => "Browser",
            NodeKind::Sticky => "Note",
            NodeKind::Editor => "Editor",
            NodeKind::Diff => "Diff",
            NodeKind::Group => "Group",
        }
    }
}

/// A node's top-left corner: relative to its parent group, absolute when top-level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
}

/// A node's size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Size {
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

/// One cell of a terminal's screen in the canvas view, in canvas px: view.css draws
/// screens in a 15 px monospace font with an 18.75 px line; DejaVu Sans Mono advances
/// 9.03 px there (measured in Chromium), Menlo and SF Mono 9.0–9.03 px, so 9.05 px keeps
/// a full row inside its node.
pub const TERMINAL_CELL: Size = Size {
    width: 9.05,
    height: 18.75,
};

/// What a terminal node's frame takes around its screen, in canvas px (view.css
/// `.kind-terminal`): 2 px borders and 10 px padding each side; above and below, a 48 px
/// head, a 32 px meta line, 8 px padding twice and the borders.
pub const TERMINAL_FRAME: Size = Size {
    width: 24.0,
    height: 100.0,
};

/// The fewest and most columns a terminal gets, whatever its node's size.
pub const TERMINAL_COLS: (u16, u16) = (20, 500);
/// The fewest and most rows a terminal gets, whatever its node's size.
pub const TERMINAL_ROWS: (u16, u16) = (5, 200);

impl Size {
    /// The columns and rows of a terminal in a node this size: as many
    /// [`TERMINAL_CELL`]s as fit inside its [`TERMINAL_FRAME`], within
    /// [`TERMINAL_COLS`] and [`TERMINAL_ROWS`].
    pub fn terminal_grid(self) -> WindowSize {
        let cells = |space: f64, frame: f64, cell: f64, (fewest, most): (u16, u16)| {
            // `as` saturates (a negative or NaN count is 0), then the clamp bounds it.
            (((space - frame) / cell).floor() as u16).clamp(fewest, most)
        };
        WindowSize {
            cols: cells(
                self.width,
                TERMINAL_FRAME.width,
                TERMINAL_CELL.width,
                TERMINAL_COLS,
            ),
            rows: cells(
                self.height,
                TERMINAL_FRAME.height,
                TERMINAL_CELL.height,
                TERMINAL_ROWS,
            ),
        }
    }
}

/// One tab of a browser node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tab {
    /// The tab's id, unique within its node.
    pub id: String,
    /// The URL the tab shows (kept current with its page: see `OwnerState::sync_tabs`).
    pub url: String,
    /// The page's title, once its page has reported one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A node's `data`: `title` always, the rest by kind (absent fields are not written).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeData {
    /// The title shown on the node.
    #[serde(default)]
    pub title: String,
    /// Terminal: the agent command it runs (absent for a plain shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Terminal: which agent it is (`claude`, …; absent for a plain shell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Browser: its tabs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tabs: Option<Vec<Tab>>,
    /// Browser: the id of the tab shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_tab_id: Option<String>,
    /// Sticky: its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Editor / diff: the absolute path of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Keys this host does not know, kept as they were read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One canvas node, serialized exactly as `canvas_list` reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// Stable id, safe for file names (see [`is_valid_node_id`]).
    pub id: String,
    /// What the node is.
    #[serde(rename = "type")]
    pub kind: NodeKind,
    /// Top-left corner, relative to the parent group when there is one.
    pub position: Position,
    /// Size.
    pub size: Size,
    /// The group this node sits in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Title and kind-specific data.
    pub data: NodeData,
    /// Keys this host does not know, kept as they were read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Reads one `nodes` entry; the error says why it is not a node.
pub(super) fn read_node(entry: &Value) -> Result<Node, String> {
    if !entry.is_object() {
        return Err("not a JSON object".to_string());
    }
    let mut node = Node::deserialize(entry).map_err(|e| format!("not a node ({e})"))?;
    if !is_valid_node_id(&node.id) {
        return Err(format!("id {:?} is not a valid node id", node.id));
    }
    if let Some(parent) = &node.parent_id {
        if !is_valid_node_id(parent) || *parent == node.id {
            return Err(format!("parentId {parent:?} is not a valid parent"));
        }
    }
    match node.kind {
        NodeKind::Editor | NodeKind::Diff if node.data.path.as_deref().unwrap_or("").is_empty() => {
            return Err(format!("{} node without data.path", node.kind.name()))
        }
        NodeKind::Browser => {
            let tabs = node.data.tabs.get_or_insert_with(Vec::new);
            let active_is_a_tab = node
                .data
                .active_tab_id
                .as_ref()
                .is_some_and(|active| tabs.iter().any(|t| t.id == *active));
            if !active_is_a_tab {
                node.data.active_tab_id = tabs.first().map(|t| t.id.clone());
            }
        }
        _ => {}
    }
    if node.data.title.is_empty() {
        node.data.title = node.kind.default_title().to_string();
    }
    let min = node.kind.min_size();
    node.size.width = node.size.width.max(min.width);
    node.size.height = node.size.height.max(min.height);
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_gets_the_cells_its_node_shows() {
        let grid = |width, height| {
            let size = Size { width, height }.terminal_grid();
            (size.cols, size.rows)
        };
        // A new terminal node: 736 px for columns, 460 px for rows, the classic 80x24.
        let default = NodeKind::Terminal.default_size();
        assert_eq!(grid(default.width, default.height), (81, 24));
        // A cell more in each direction is one more column and row; a pixel less, not.
        assert_eq!(grid(640.0 + 9.05, 400.0 + 18.75), (69, 17));
        assert_eq!(grid(640.0 - 1.0, 400.0 - 1.0), (67, 15));
        // Bounded at both ends, whatever the numbers.
        let min = NodeKind::Terminal.min_size();
        assert_eq!(grid(min.width, min.height), (32, 5));
        assert_eq!(grid(0.0, -50.0), (20, 5));
        assert_eq!(grid(1e9, f64::INFINITY), (500, 200));
        assert_eq!(grid(f64::NAN, f64::NAN), (20, 5));
    }

    #[test]
    fn node_ids_follow_the_spec_pattern() {
        assert!(is_valid_node_id("a"));
        assert!(is_valid_node_id("term-0a1b2c3d"));
        assert!(is_valid_node_id(&"x".repeat(128)));
        for bad in [
            "",
            "-a",
            "_a",
            "a b",
            "a/b",
            "..",
            "a.b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(!is_valid_node_id(bad), "{bad}");
        }
    }
}
