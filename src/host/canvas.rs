//! The headless canvas: nodes, selection and the canvas-owned operations, persisted to
//! `<project>/.termsprawl/project.json`.
//!
//! Plain state and operations, synchronous, with no thread and no knowledge of the
//! runtime: the host's canvas owner holds one [`Canvas`] per project and calls
//! [`Canvas::apply`] for each `CanvasToolRequest`.
//!
//! Rules an auditor can check here:
//! - Every change is made on a copy, saved with `private_json`, and only then becomes the
//!   canvas. An invalid request or a failed save leaves the canvas (and the file) as it was.
//! - A `project.json` that cannot be read as a canvas is an error naming the file and is
//!   never written to.
//! - Entries of `nodes` that are not valid nodes (unknown type, bad id, wrong shapes,
//!   a repeated id) are left off the canvas, reported by [`Canvas::warnings`], and written
//!   back verbatim after the known nodes on every save, so a node kind this host does not
//!   know (say, from a newer desktop app) is never lost. Unknown keys of the file, of a
//!   node and of its `data` are kept the same way.
//! - A node's `parentId` must name a top-level group; a loaded node whose parent is
//!   missing or not such a group becomes top-level (its position kept as it was).
//!   A loaded size below its kind's minimum is raised to it.
//! - Placement of new nodes: candidate top-left corners are `(x, y)` with `x` from
//!   {0} ∪ {right edge + gap of each node} and `y` from {0} ∪ {bottom edge + gap of each
//!   node}, both non-negative; they are tried row by row (smallest `y`, then smallest `x`)
//!   and the first where the new node, kept [`PLACEMENT_GAP`] away from every existing
//!   node (children at their absolute positions), fits and does not run past
//!   [`ROW_WIDTH`] (unless it starts at `x = 0`) is taken. The spot below everything is
//!   always free, so a place is always found.
//! - A terminal whose program ended keeps its end and last screen in the file's
//!   `endedTerminals` (node id -> [`EndedTerminal::to_json`]) until the node is removed,
//!   so a restart still shows it ended. An entry for no terminal node, or of another
//!   shape, is dropped at load with a warning.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::terminals::EndedTerminal;
use crate::base::files::{private_dir, private_json, read_json};
pub use crate::protocol::is_valid_node_id;

/// The folder inside a project that holds its canvas and links.
pub const PROJECT_DIR: &str = ".termsprawl";
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
            NodeKind::Terminal => (640.0, 400.0),
            NodeKind::Browser => (960.0, 640.0),
            NodeKind::Sticky => (240.0, 200.0),
            NodeKind::Editor => (640.0, 480.0),
            NodeKind::Diff => (800.0, 480.0),
            NodeKind::Group => (160.0, 120.0),
        };
        Size { width, height }
    }

    fn default_title(self) -> &'static str {
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

/// Why a canvas could not be loaded, saved or changed.
#[derive(Debug)]
pub enum CanvasError {
    /// Reading or writing a file failed.
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// `project.json` exists but is not a canvas; it was left untouched.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The request was refused; nothing was changed. The text is for the caller.
    Refused(String),
}

impl fmt::Display for CanvasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanvasError::Io { path, source } => {
                write!(f, "Could not save or read {}: {source}", path.display())
            }
            CanvasError::Corrupt { path, reason } => write!(
                f,
                "{} is not a readable canvas ({reason}); it was left unchanged: fix it or move it away",
                path.display()
            ),
            CanvasError::Refused(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for CanvasError {}

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
    /// Loads the canvas of the folder project at `project_dir`, creating
    /// `.termsprawl/` (0700) and `project.json` when missing.
    ///
    /// The project id is `project_id` when given, else the one kept in the file, else a
    /// new random one; whichever it is gets written to the file, so a later load without
    /// `project_id` keeps it (and with it the agents' tokens).
    pub fn load(project_dir: &Path, project_id: Option<&str>) -> Result<Canvas, CanvasError> {
        if let Some(id) = project_id {
            if !is_valid_node_id(id) {
                return refused(format!(
                    "Invalid project id {id:?}: use 1 to 128 letters, digits, '_' or '-', starting with a letter or digit"
                ));
            }
        }
        if !project_dir.is_dir() {
            return Err(CanvasError::Io {
                path: project_dir.to_path_buf(),
                source: io::Error::new(io::ErrorKind::NotFound, "not a folder"),
            });
        }
        let dir = project_dir.join(PROJECT_DIR);
        private_dir(&dir).map_err(|source| CanvasError::Io {
            path: dir.clone(),
            source,
        })?;
        let file = dir.join(PROJECT_FILE);
        let raw = match read_json(&file) {
            Ok(raw) => raw,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(CanvasError::Corrupt {
                    path: file,
                    reason: format!("invalid JSON: {e}"),
                })
            }
            Err(source) => return Err(CanvasError::Io { path: file, source }),
        };
        let mut canvas = match raw {
            Some(raw) => Canvas::from_file(file, raw)?,
            None => Canvas {
                file,
                project_id: String::new(),
                nodes: Vec::new(),
                selection: Vec::new(),
                carried_entries: Vec::new(),
                carried_keys: Map::new(),
                ended: BTreeMap::new(),
                warnings: Vec::new(),
            },
        };
        let existed = !canvas.project_id.is_empty();
        let wanted = match project_id {
            Some(id) => id.to_string(),
            None if existed => canvas.project_id.clone(),
            None => format!("project-{}", random_hex(8).map_err(CanvasError::Refused)?),
        };
        if !existed || wanted != canvas.project_id {
            canvas.project_id = wanted;
            canvas.save()?;
        }
        Ok(canvas)
    }

    /// Reads a parsed `project.json`; shapes that are not a canvas are `Corrupt`.
    fn from_file(file: PathBuf, raw: Value) -> Result<Canvas, CanvasError> {
        let corrupt = |reason: &str| CanvasError::Corrupt {
            path: file.clone(),
            reason: reason.to_string(),
        };
        let Value::Object(mut keys) = raw else {
            return Err(corrupt("the top level is not a JSON object"));
        };
        let project_id = match keys.remove("projectId") {
            None => String::new(),
            Some(Value::String(id)) if is_valid_node_id(&id) => id,
            Some(_) => {
                return Err(corrupt(
                    "projectId is not 1 to 128 letters, digits, '_' or '-'",
                ))
            }
        };
        let entries = match keys.remove("nodes") {
            None => Vec::new(),
            Some(Value::Array(entries)) => entries,
            Some(_) => return Err(corrupt("nodes is not an array")),
        };
        let selection = keys.remove("selection");
        let ended_entries = keys.remove(ENDED_KEY);
        keys.remove("version");

        let mut warnings = Vec::new();
        let mut nodes: Vec<Node> = Vec::new();
        let mut carried_entries = Vec::new();
        for (index, entry) in entries.into_iter().enumerate() {
            match read_node(&entry) {
                Ok(node) if nodes.iter().any(|n| n.id == node.id) => {
                    warnings.push(format!("nodes[{index}]: id {} repeats an earlier node; kept in the file but not shown", node.id));
                    carried_entries.push(entry);
                }
                Ok(node) => nodes.push(node),
                Err(reason) => {
                    warnings.push(format!(
                        "nodes[{index}]: {reason}; kept in the file but not shown"
                    ));
                    carried_entries.push(entry);
                }
            }
        }
        // A parent must be a top-level group; anything else makes the node top-level.
        let groups: Vec<String> = nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Group && n.parent_id.is_none())
            .map(|n| n.id.clone())
            .collect();
        for node in &mut nodes {
            if let Some(parent) = &node.parent_id {
                if node.kind == NodeKind::Group || !groups.contains(parent) {
                    warnings.push(format!(
                        "node {}: parent {parent} is not a top-level group; shown as top-level",
                        node.id
                    ));
                    node.parent_id = None;
                }
            }
        }
        let mut ended = BTreeMap::new();
        match ended_entries {
            None => {}
            Some(Value::Object(entries)) => {
                for (id, entry) in entries {
                    let terminal = nodes
                        .iter()
                        .any(|n| n.id == id && n.kind == NodeKind::Terminal);
                    match EndedTerminal::from_json(&entry) {
                        Some(entry) if terminal => {
                            ended.insert(id, entry);
                        }
                        Some(_) => warnings.push(format!(
                            "{ENDED_KEY}.{id}: no terminal node has this id; dropped"
                        )),
                        None => warnings.push(format!(
                            "{ENDED_KEY}.{id}: not an ended terminal's record; dropped"
                        )),
                    }
                }
            }
            Some(_) => warnings.push(format!("{ENDED_KEY} is not an object; dropped")),
        }
        let mut canvas = Canvas {
            file,
            project_id,
            nodes,
            selection: Vec::new(),
            carried_entries,
            carried_keys: keys,
            ended,
            warnings,
        };
        if let Some(Value::Array(ids)) = selection {
            for id in ids.iter().filter_map(Value::as_str) {
                if canvas.node(id).is_some() && !canvas.selection.iter().any(|s| s == id) {
                    canvas.selection.push(id.to_string());
                }
            }
        }
        Ok(canvas)
    }

    /// Writes the canvas to its file (0600, atomically).
    fn save(&self) -> Result<(), CanvasError> {
        let mut document = self.carried_keys.clone();
        let mut nodes: Vec<Value> = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            nodes.push(serde_json::to_value(node).map_err(|e| CanvasError::Io {
                path: self.file.clone(),
                source: io::Error::other(e),
            })?);
        }
        nodes.extend(self.carried_entries.iter().cloned());
        document.insert("version".into(), json!(FILE_VERSION));
        document.insert("projectId".into(), json!(self.project_id));
        document.insert("nodes".into(), Value::Array(nodes));
        document.insert("selection".into(), json!(self.selection));
        if !self.ended.is_empty() {
            let ended = self.ended.iter().map(|(id, e)| (id.clone(), e.to_json()));
            document.insert(ENDED_KEY.into(), Value::Object(ended.collect()));
        }
        private_json(&self.file, &Value::Object(document)).map_err(|source| CanvasError::Io {
            path: self.file.clone(),
            source,
        })
    }

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

    /// Runs one canvas-owned operation with its (already validated) arguments and
    /// returns its reply value. Refused or failed operations change nothing.
    ///
    /// Operations: `canvas_list`, `canvas_select`, `canvas_move`, `canvas_resize`,
    /// `canvas_group`, `sticky_open`, `artifact_open`, `browser_open`, `terminal_open`,
    /// `agent_launch` (args `agent`, `command`, optional `title`), `terminal_close`.
    pub fn apply(&mut self, operation: &str, args: &Map<String, Value>) -> Result<Value, String> {
        if operation == "canvas_list" {
            return Ok(self.list());
        }
        self.change(|canvas| canvas.apply_unsaved(operation, args))
            .map_err(|e| match e {
                CanvasError::Refused(message) => message,
                other => format!("{other}; the canvas was not changed"),
            })
    }

    fn apply_unsaved(
        &mut self,
        operation: &str,
        args: &Map<String, Value>,
    ) -> Result<Value, CanvasError> {
        match operation {
            "canvas_select" => self.select(args),
            "canvas_move" => self.move_node(args),
            "canvas_resize" => self.resize(args),
            "canvas_group" => self.group(args),
            "sticky_open" => {
                let data = NodeData {
                    text: Some(text_arg(args, "text")?.to_string()),
                    ..NodeData::default()
                };
                let id = self.add(NodeKind::Sticky, "sticky", data)?;
                Ok(json!({ "nodeId": id }))
            }
            "artifact_open" => self.artifact_open(args),
            "browser_open" => {
                let url = text_arg(args, "url")?;
                if url.is_empty() {
                    return refused("Invalid url: it is empty");
                }
                let tab_id = format!("tab-{}", random_hex(4).map_err(CanvasError::Refused)?);
                let data = NodeData {
                    tabs: Some(vec![Tab {
                        id: tab_id.clone(),
                        url: url.to_string(),
                        title: None,
                    }]),
                    active_tab_id: Some(tab_id.clone()),
                    ..NodeData::default()
                };
                let id = self.add(NodeKind::Browser, "browser", data)?;
                Ok(json!({ "nodeId": id, "tabId": tab_id }))
            }
            "terminal_open" => {
                let data = NodeData {
                    title: optional_text_arg(args, "title")?.unwrap_or_default(),
                    ..NodeData::default()
                };
                let id = self.add(NodeKind::Terminal, "term", data)?;
                Ok(json!({ "nodeId": id }))
            }
            "agent_launch" => {
                let agent = text_arg(args, "agent")?;
                let command = text_arg(args, "command")?;
                if agent.is_empty() || command.trim().is_empty() {
                    return refused("Invalid agent launch: agent and command must not be empty");
                }
                let data = NodeData {
                    title: optional_text_arg(args, "title")?.unwrap_or_else(|| agent.to_string()),
                    command: Some(command.to_string()),
                    agent_id: Some(agent.to_string()),
                    ..NodeData::default()
                };
                let id = self.add(NodeKind::Terminal, "agent", data)?;
                Ok(json!({ "nodeId": id }))
            }
            "terminal_close" => {
                let id = text_arg(args, "nodeId")?;
                let node = self.existing(id)?;
                if node.kind != NodeKind::Terminal {
                    return refused(format!(
                        "Node {id} is a {}, not a terminal; terminal_close only closes terminals",
                        node.kind.name()
                    ));
                }
                self.remove(id);
                Ok(json!({ "nodeId": id, "closed": true }))
            }
            _ => refused(format!(
                "Unknown canvas operation: {operation}; the canvas owner does not handle it"
            )),
        }
    }

    /// `canvas_list`: every node, as a JSON array.
    fn list(&self) -> Value {
        Value::Array(
            self.nodes
                .iter()
                .map(|node| serde_json::to_value(node).unwrap_or(Value::Null))
                .collect(),
        )
    }

    fn select(&mut self, args: &Map<String, Value>) -> Result<Value, CanvasError> {
        let ids = ids_arg(args, "nodeIds")?;
        self.require_all(&ids, "nothing was selected")?;
        self.selection = ids.clone();
        Ok(json!({ "selected": ids }))
    }

    fn move_node(&mut self, args: &Map<String, Value>) -> Result<Value, CanvasError> {
        let id = text_arg(args, "nodeId")?;
        let position = Position {
            x: number_arg(args, "x")?,
            y: number_arg(args, "y")?,
        };
        let node = self.existing_mut(id)?;
        node.position = position;
        Ok(json!({
            "nodeId": id,
            "position": position,
            "relativeTo": node.parent_id,
        }))
    }

    fn resize(&mut self, args: &Map<String, Value>) -> Result<Value, CanvasError> {
        let id = text_arg(args, "nodeId")?;
        let asked = Size {
            width: number_arg(args, "width")?,
            height: number_arg(args, "height")?,
        };
        let node = self.existing_mut(id)?;
        let min = node.kind.min_size();
        let size = Size {
            width: asked.width.max(min.width),
            height: asked.height.max(min.height),
        };
        node.size = size;
        let mut reply = json!({ "nodeId": id, "size": size, "clamped": size != asked });
        if size != asked {
            reply["message"] = json!(format!(
                "Raised to the {} minimum size of {} x {}",
                node.kind.name(),
                min.width,
                min.height
            ));
        }
        Ok(reply)
    }

    fn group(&mut self, args: &Map<String, Value>) -> Result<Value, CanvasError> {
        let ids = ids_arg(args, "nodeIds")?;
        let title = optional_text_arg(args, "title")?;
        self.require_all(&ids, "nothing was grouped")?;
        for id in &ids {
            let node = self.existing(id)?;
            if let Some(parent) = &node.parent_id {
                return refused(format!(
                    "Node {id} is already inside group {parent}; only top-level nodes can be grouped"
                ));
            }
            if node.kind == NodeKind::Group {
                return refused(format!("Node {id} is a group; groups cannot be nested"));
            }
        }
        self.require_room()?;
        let members: Vec<&Node> = self.nodes.iter().filter(|n| ids.contains(&n.id)).collect();
        let left = members
            .iter()
            .map(|n| n.position.x)
            .fold(f64::INFINITY, f64::min);
        let top = members
            .iter()
            .map(|n| n.position.y)
            .fold(f64::INFINITY, f64::min);
        let right = members
            .iter()
            .map(|n| n.position.x + n.size.width)
            .fold(f64::NEG_INFINITY, f64::max);
        let bottom = members
            .iter()
            .map(|n| n.position.y + n.size.height)
            .fold(f64::NEG_INFINITY, f64::max);
        let origin = Position {
            x: left - GROUP_PADDING,
            y: top - GROUP_PADDING,
        };
        let min = NodeKind::Group.min_size();
        let group = Node {
            id: self.fresh_id("group")?,
            kind: NodeKind::Group,
            position: origin,
            size: Size {
                width: (right - left + 2.0 * GROUP_PADDING).max(min.width),
                height: (bottom - top + 2.0 * GROUP_PADDING).max(min.height),
            },
            parent_id: None,
            data: NodeData {
                title: title.unwrap_or_else(|| NodeKind::Group.default_title().to_string()),
                ..NodeData::default()
            },
            extra: Map::new(),
        };
        let group_id = group.id.clone();
        for node in self.nodes.iter_mut().filter(|n| ids.contains(&n.id)) {
            node.parent_id = Some(group_id.clone());
            node.position.x -= origin.x;
            node.position.y -= origin.y;
        }
        // The frame goes just before its first member, so it is drawn underneath them.
        let first = self
            .nodes
            .iter()
            .position(|n| ids.contains(&n.id))
            .unwrap_or(self.nodes.len());
        self.nodes.insert(first, group);
        Ok(json!({ "nodeId": group_id, "nodeIds": ids }))
    }

    fn artifact_open(&mut self, args: &Map<String, Value>) -> Result<Value, CanvasError> {
        let path = text_arg(args, "path")?;
        if !Path::new(path).is_absolute() {
            return refused(format!(
                "Invalid path {path:?}: it must be absolute (the runtime resolves it first)"
            ));
        }
        let kind = match optional_text_arg(args, "view")?.as_deref() {
            None | Some("editor") => NodeKind::Editor,
            Some("diff") => NodeKind::Diff,
            Some(other) => return refused(format!("Invalid view {other:?}: use editor or diff")),
        };
        let title = Path::new(path)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string());
        let data = NodeData {
            title,
            path: Some(path.to_string()),
            ..NodeData::default()
        };
        let id = self.add(kind, kind.name(), data)?;
        Ok(json!({ "nodeId": id }))
    }

    /// Puts the agent node `node_id` on the canvas (for `serve --agent ID`): a terminal
    /// with `data.agentId = agent`, no command (its agent runs elsewhere), titled with
    /// its id. Returns `false`, changing nothing, when a terminal with that id is already
    /// there (a restart); another kind of node with that id is refused.
    pub fn add_agent_node(&mut self, node_id: &str, agent: &str) -> Result<bool, CanvasError> {
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
        self.change(|canvas| {
            canvas.require_room()?;
            let size = NodeKind::Terminal.default_size();
            let node = Node {
                id: node_id.to_string(),
                kind: NodeKind::Terminal,
                position: canvas.place(size),
                size,
                parent_id: None,
                data: NodeData {
                    title: node_id.to_string(),
                    agent_id: Some(agent.to_string()),
                    ..NodeData::default()
                },
                extra: Map::new(),
            };
            canvas.nodes.push(node);
            Ok(true)
        })
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

    /// Adds a new node of `kind` at a free place, with a fresh `<prefix>-<8 hex>` id.
    fn add(
        &mut self,
        kind: NodeKind,
        prefix: &str,
        mut data: NodeData,
    ) -> Result<String, CanvasError> {
        self.require_room()?;
        if data.title.is_empty() {
            data.title = kind.default_title().to_string();
        }
        let size = kind.default_size();
        let node = Node {
            id: self.fresh_id(prefix)?,
            kind,
            position: self.place(size),
            size,
            parent_id: None,
            data,
            extra: Map::new(),
        };
        let id = node.id.clone();
        self.nodes.push(node);
        Ok(id)
    }

    /// The first free top-left corner for a node of `size` (the rule is in the module docs).
    fn place(&self, size: Size) -> Position {
        let rects: Vec<(Position, Size)> = self
            .nodes
            .iter()
            .map(|n| (self.absolute_position(n), n.size))
            .collect();
        let candidates = |edges: Vec<f64>| {
            let mut values: Vec<f64> = std::iter::once(0.0)
                .chain(edges)
                .filter(|v| *v >= 0.0)
                .collect();
            values.sort_by(f64::total_cmp);
            values.dedup();
            values
        };
        let ys = candidates(
            rects
                .iter()
                .map(|(p, s)| p.y + s.height + PLACEMENT_GAP)
                .collect(),
        );
        let xs = candidates(
            rects
                .iter()
                .map(|(p, s)| p.x + s.width + PLACEMENT_GAP)
                .collect(),
        );
        for &y in &ys {
            // Only nodes reaching into this row (with the gap) can be in the way.
            let in_row: Vec<&(Position, Size)> = rects
                .iter()
                .filter(|(p, s)| {
                    y < p.y + s.height + PLACEMENT_GAP && p.y < y + size.height + PLACEMENT_GAP
                })
                .collect();
            for &x in &xs {
                if x > 0.0 && x + size.width > ROW_WIDTH {
                    break;
                }
                let clear = in_row.iter().all(|(p, s)| {
                    !(x < p.x + s.width + PLACEMENT_GAP && p.x < x + size.width + PLACEMENT_GAP)
                });
                if clear {
                    return Position { x, y };
                }
            }
        }
        // Not reached (the last row is below everything); kept so no input can panic.
        let bottom = rects
            .iter()
            .map(|(p, s)| p.y + s.height + PLACEMENT_GAP)
            .fold(0.0, f64::max);
        Position { x: 0.0, y: bottom }
    }

    fn fresh_id(&self, prefix: &str) -> Result<String, CanvasError> {
        for _ in 0..8 {
            let id = format!("{prefix}-{}", random_hex(4).map_err(CanvasError::Refused)?);
            if self.node(&id).is_none() {
                return Ok(id);
            }
        }
        refused("Could not pick a new node id; try again")
    }

    fn require_room(&self) -> Result<(), CanvasError> {
        if self.nodes.len() >= MAX_NODES {
            return refused(format!(
                "The canvas already holds {MAX_NODES} nodes; close some before opening more"
            ));
        }
        Ok(())
    }

    fn require_all(&self, ids: &[String], outcome: &str) -> Result<(), CanvasError> {
        let unknown: Vec<&str> = ids
            .iter()
            .filter(|id| self.node(id).is_none())
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return refused(format!(
                "Unknown node ids: {}; {outcome}. Call canvas_list for the current ids",
                unknown.join(", ")
            ));
        }
        Ok(())
    }

    fn existing(&self, id: &str) -> Result<&Node, CanvasError> {
        match self.node(id) {
            Some(node) => Ok(node),
            None => refused(unknown_node(id)),
        }
    }

    fn existing_mut(&mut self, id: &str) -> Result<&mut Node, CanvasError> {
        match self.nodes.iter_mut().find(|n| n.id == id) {
            Some(node) => Ok(node),
            None => refused(unknown_node(id)),
        }
    }
}

fn unknown_node(id: &str) -> String {
    format!("Unknown node id: {id}; nothing was changed. Call canvas_list for the current ids")
}

/// Reads one `nodes` entry; the error says why it is not a node.
fn read_node(entry: &Value) -> Result<Node, String> {
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

/// `bytes` random bytes as lowercase hex.
fn random_hex(bytes: usize) -> Result<String, String> {
    crate::base::random_hex(bytes).map_err(|e| format!("{e}; try again"))
}

fn text_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, CanvasError> {
    match args.get(key) {
        None => refused(format!("Missing argument: {key}")),
        Some(Value::String(text)) => Ok(text),
        Some(_) => refused(format!("Invalid {key}: expected a string")),
    }
}

fn optional_text_arg(args: &Map<String, Value>, key: &str) -> Result<Option<String>, CanvasError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => refused(format!("Invalid {key}: expected a string")),
    }
}

fn number_arg(args: &Map<String, Value>, key: &str) -> Result<f64, CanvasError> {
    match args.get(key).map(Value::as_f64) {
        None => refused(format!("Missing argument: {key}")),
        Some(Some(n)) if n.is_finite() => Ok(n),
        Some(_) => refused(format!("Invalid {key}: expected a finite number")),
    }
}

/// A non-empty array of node ids, repeats dropped, order kept.
fn ids_arg(args: &Map<String, Value>, key: &str) -> Result<Vec<String>, CanvasError> {
    let Some(value) = args.get(key) else {
        return refused(format!("Missing argument: {key}"));
    };
    let Some(items) = value.as_array().filter(|items| !items.is_empty()) else {
        return refused(format!(
            "Invalid {key}: expected a non-empty array of node ids"
        ));
    };
    let mut ids: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Some(id) = item.as_str() else {
            return refused(format!(
                "Invalid {key}: expected a non-empty array of node ids"
            ));
        };
        if !ids.iter().any(|known| known == id) {
            ids.push(id.to_string());
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    /// A fresh, empty project folder.
    fn project(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-canvas-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn open(canvas: &mut Canvas, operation: &str, value: Value) -> String {
        let reply = canvas.apply(operation, &args(value)).unwrap();
        reply["nodeId"].as_str().unwrap().to_string()
    }

    fn file_bytes(canvas: &Canvas) -> Vec<u8> {
        fs::read(canvas.file()).unwrap()
    }

    fn overlaps(a: (Position, Size), b: (Position, Size)) -> bool {
        a.0.x < b.0.x + b.1.width
            && b.0.x < a.0.x + a.1.width
            && a.0.y < b.0.y + b.1.height
            && b.0.y < a.0.y + a.1.height
    }

    #[test]
    fn load_creates_a_private_folder_and_a_stable_project_id() {
        let dir = project("create");
        let canvas = Canvas::load(&dir, None).unwrap();
        let meta = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(meta(&dir.join(PROJECT_DIR)), 0o700);
        assert_eq!(meta(canvas.file()), 0o600);
        assert!(canvas.project_id().starts_with("project-"));
        assert!(is_valid_node_id(canvas.project_id()));
        let again = Canvas::load(&dir, None).unwrap();
        assert_eq!(again.project_id(), canvas.project_id());
        let saved = read_json(canvas.file()).unwrap().unwrap();
        assert_eq!(
            saved,
            json!({"version": 1, "projectId": canvas.project_id(), "nodes": [], "selection": []})
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn ended_terminals_are_kept_with_the_canvas_until_their_node_is_removed() {
        use crate::runtime::ProgramEnd;
        let dir = project("ended");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let term = open(&mut canvas, "terminal_open", json!({}));
        let sticky = open(&mut canvas, "sticky_open", json!({"text": "x"}));
        let ended = EndedTerminal {
            end: ProgramEnd::Status(3),
            ended_at: 1_700_000_000_000,
            last_screen: "$ exit 3".into(),
        };
        assert!(canvas.record_ended(&term, &ended).unwrap());
        // Again, or for what is no terminal: nothing to change, nothing written.
        let before = file_bytes(&canvas);
        assert!(!canvas.record_ended(&term, &ended).unwrap());
        assert!(!canvas.record_ended(&sticky, &ended).unwrap());
        assert!(!canvas.record_ended("nobody", &ended).unwrap());
        assert_eq!(file_bytes(&canvas), before);
        // canvas_list does not carry it (the owner adds `session`); the file does.
        assert!(!canvas
            .apply("canvas_list", &Map::new())
            .unwrap()
            .to_string()
            .contains("exit 3"));
        let reloaded = Canvas::load(&dir, None).unwrap();
        assert_eq!(reloaded.ended_terminals().get(&term), Some(&ended));
        assert!(reloaded.warnings().is_empty(), "{:?}", reloaded.warnings());

        canvas
            .apply(
                "terminal_close",
                json!({"nodeId": term}).as_object().unwrap(),
            )
            .unwrap();
        assert!(canvas.ended_terminals().is_empty());
        let file: Value = serde_json::from_slice(&file_bytes(&canvas)).unwrap();
        assert!(file.get(ENDED_KEY).is_none(), "{file}");

        // Entries for no terminal node, or of another shape, are dropped with a warning.
        let mut file: Value = serde_json::from_slice(&file_bytes(&canvas)).unwrap();
        file[ENDED_KEY] = json!({ sticky.clone(): ended.to_json(), "gone": ended.to_json() });
        fs::write(canvas.file(), file.to_string()).unwrap();
        let reloaded = Canvas::load(&dir, None).unwrap();
        assert!(reloaded.ended_terminals().is_empty());
        assert_eq!(reloaded.warnings().len(), 2, "{:?}", reloaded.warnings());
        file[ENDED_KEY] = json!([1]);
        fs::write(canvas.file(), file.to_string()).unwrap();
        let reloaded = Canvas::load(&dir, None).unwrap();
        assert!(reloaded.warnings()[0].contains("not an object"));
    }

    #[test]
    fn a_given_project_id_is_used_and_kept() {
        let dir = project("given-id");
        Canvas::load(&dir, None).unwrap();
        let canvas = Canvas::load(&dir, Some("my-project")).unwrap();
        assert_eq!(canvas.project_id(), "my-project");
        assert_eq!(Canvas::load(&dir, None).unwrap().project_id(), "my-project");
        let err = Canvas::load(&dir, Some("../escape")).unwrap_err();
        assert!(matches!(err, CanvasError::Refused(_)), "{err}");
        assert!(Canvas::load(&dir.join("missing"), None).is_err());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn canvas_list_reports_nodes_in_the_wire_shape() {
        let dir = project("list");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        assert_eq!(canvas.apply("canvas_list", &Map::new()).unwrap(), json!([]));
        let term = open(&mut canvas, "terminal_open", json!({}));
        let list = canvas.apply("canvas_list", &Map::new()).unwrap();
        assert_eq!(
            list,
            json!([{
                "id": term,
                "type": "terminal",
                "position": {"x": 0.0, "y": 0.0},
                "size": {"width": 640.0, "height": 400.0},
                "data": {"title": "Terminal"},
            }])
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn new_nodes_have_their_kind_data_and_safe_ids() {
        let dir = project("kinds");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let term = open(&mut canvas, "terminal_open", json!({"title": "build"}));
        let agent = open(
            &mut canvas,
            "agent_launch",
            json!({"agent": "claude", "command": "'claude' --mcp-config x"}),
        );
        let sticky = open(&mut canvas, "sticky_open", json!({"text": "remember"}));
        let editor = open(
            &mut canvas,
            "artifact_open",
            json!({"path": "/p/src/main.rs"}),
        );
        let diff = open(
            &mut canvas,
            "artifact_open",
            json!({"path": "/p/a.txt", "view": "diff"}),
        );
        let browser = canvas
            .apply(
                "browser_open",
                &args(json!({"url": "https://example.com/"})),
            )
            .unwrap();
        let browser_id = browser["nodeId"].as_str().unwrap();
        let tab_id = browser["tabId"].as_str().unwrap();

        let data = |id: &str| serde_json::to_value(&canvas.node(id).unwrap().data).unwrap();
        let kind = |id: &str| canvas.node(id).unwrap().kind;
        assert_eq!(kind(&term), NodeKind::Terminal);
        assert_eq!(data(&term), json!({"title": "build"}));
        assert_eq!(kind(&agent), NodeKind::Terminal);
        assert_eq!(
            data(&agent),
            json!({"title": "claude", "command": "'claude' --mcp-config x", "agentId": "claude"})
        );
        assert_eq!(data(&sticky), json!({"title": "Note", "text": "remember"}));
        assert_eq!(kind(&editor), NodeKind::Editor);
        assert_eq!(
            data(&editor),
            json!({"title": "main.rs", "path": "/p/src/main.rs"})
        );
        assert_eq!(kind(&diff), NodeKind::Diff);
        assert_eq!(kind(browser_id), NodeKind::Browser);
        assert_eq!(
            data(browser_id),
            json!({"title": "Browser", "tabs": [{"id": tab_id, "url": "https://example.com/"}], "activeTabId": tab_id})
        );
        for (id, prefix) in [
            (&term, "term-"),
            (&agent, "agent-"),
            (&sticky, "sticky-"),
            (&editor, "editor-"),
            (&diff, "diff-"),
            (&browser_id.to_string(), "browser-"),
            (&tab_id.to_string(), "tab-"),
        ] {
            assert!(
                id.starts_with(prefix) && id.len() == prefix.len() + 8,
                "{id}"
            );
            assert!(is_valid_node_id(id));
        }
        let titled = open(
            &mut canvas,
            "agent_launch",
            json!({"agent": "codex", "command": "codex", "title": "reviewer"}),
        );
        assert_eq!(canvas.node(&titled).unwrap().data.title, "reviewer");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn invalid_create_arguments_are_refused() {
        let dir = project("bad-create");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let before = file_bytes(&canvas);
        for (operation, value) in [
            ("artifact_open", json!({"path": "relative/file.txt"})),
            ("artifact_open", json!({"path": "/p/x", "view": "hex"})),
            ("sticky_open", json!({})),
            ("sticky_open", json!({"text": 3})),
            ("browser_open", json!({"url": ""})),
            ("agent_launch", json!({"agent": "claude"})),
            ("agent_launch", json!({"agent": "claude", "command": "  "})),
            ("terminal_open", json!({"title": 7})),
        ] {
            assert!(
                canvas.apply(operation, &args(value)).is_err(),
                "{operation}"
            );
        }
        assert!(canvas.nodes().is_empty());
        assert_eq!(file_bytes(&canvas), before);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn unknown_operations_fail_and_change_nothing() {
        let dir = project("unknown-op");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let err = canvas.apply("browser_click", &Map::new()).unwrap_err();
        assert!(
            err.contains("Unknown canvas operation: browser_click"),
            "{err}"
        );
        assert!(canvas.nodes().is_empty());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn select_needs_every_id_to_exist() {
        let dir = project("select");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "terminal_open", json!({}));
        let b = open(&mut canvas, "sticky_open", json!({"text": "x"}));
        let reply = canvas
            .apply("canvas_select", &args(json!({"nodeIds": [b, a, b]})))
            .unwrap();
        assert_eq!(reply, json!({"selected": [b, a]}));
        assert_eq!(canvas.selection(), [b.clone(), a.clone()]);
        let before = file_bytes(&canvas);
        let err = canvas
            .apply("canvas_select", &args(json!({"nodeIds": [a, "ghost"]})))
            .unwrap_err();
        assert!(
            err.contains("Unknown node ids: ghost") && err.contains("nothing was selected"),
            "{err}"
        );
        assert_eq!(canvas.selection(), [b.clone(), a.clone()]);
        assert_eq!(file_bytes(&canvas), before);
        assert!(canvas
            .apply("canvas_select", &args(json!({"nodeIds": []})))
            .is_err());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn move_is_absolute_at_top_level_and_relative_inside_a_group() {
        let dir = project("move");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "sticky_open", json!({"text": "a"}));
        let reply = canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": a, "x": 1000, "y": -50})),
            )
            .unwrap();
        assert_eq!(
            reply,
            json!({"nodeId": a, "position": {"x": 1000.0, "y": -50.0}, "relativeTo": null})
        );
        let group = open(&mut canvas, "canvas_group", json!({"nodeIds": [a]}));
        let reply = canvas
            .apply("canvas_move", &args(json!({"nodeId": a, "x": 10, "y": 20})))
            .unwrap();
        assert_eq!(reply["relativeTo"], json!(group));
        let node = canvas.node(&a).unwrap();
        assert_eq!(node.position, Position { x: 10.0, y: 20.0 });
        let frame = canvas.node(&group).unwrap().position;
        assert_eq!(
            canvas.absolute_position(node),
            Position {
                x: frame.x + 10.0,
                y: frame.y + 20.0
            }
        );
        // Moving the group carries its member along.
        canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": group, "x": 0, "y": 0})),
            )
            .unwrap();
        let node = canvas.node(&a).unwrap();
        assert_eq!(
            canvas.absolute_position(node),
            Position { x: 10.0, y: 20.0 }
        );
        let err = canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": "ghost", "x": 0, "y": 0})),
            )
            .unwrap_err();
        assert!(err.contains("Unknown node id: ghost"), "{err}");
        assert!(canvas
            .apply("canvas_move", &args(json!({"nodeId": a, "x": "1", "y": 0})))
            .is_err());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn resize_clamps_to_the_kind_minimum_and_says_so() {
        let dir = project("resize");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let term = open(&mut canvas, "terminal_open", json!({}));
        let reply = canvas
            .apply(
                "canvas_resize",
                &args(json!({"nodeId": term, "width": 10, "height": 900})),
            )
            .unwrap();
        assert_eq!(reply["size"], json!({"width": 320.0, "height": 900.0}));
        assert_eq!(reply["clamped"], json!(true));
        assert_eq!(
            reply["message"],
            json!("Raised to the terminal minimum size of 320 x 200")
        );
        assert_eq!(
            canvas.node(&term).unwrap().size,
            Size {
                width: 320.0,
                height: 900.0
            }
        );
        let reply = canvas
            .apply(
                "canvas_resize",
                &args(json!({"nodeId": term, "width": 700, "height": 500})),
            )
            .unwrap();
        assert_eq!(
            reply,
            json!({"nodeId": term, "size": {"width": 700.0, "height": 500.0}, "clamped": false})
        );
        let sticky = open(&mut canvas, "sticky_open", json!({"text": "x"}));
        let reply = canvas
            .apply(
                "canvas_resize",
                &args(json!({"nodeId": sticky, "width": -5, "height": -5})),
            )
            .unwrap();
        assert_eq!(reply["size"], json!({"width": 120.0, "height": 80.0}));
        assert!(canvas
            .apply(
                "canvas_resize",
                &args(json!({"nodeId": "ghost", "width": 500, "height": 500}))
            )
            .is_err());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn group_frames_top_level_nodes_with_padding_and_relative_positions() {
        let dir = project("group");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "sticky_open", json!({"text": "a"}));
        let b = open(&mut canvas, "sticky_open", json!({"text": "b"}));
        let other = open(&mut canvas, "terminal_open", json!({}));
        canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": a, "x": 100, "y": 200})),
            )
            .unwrap();
        canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": b, "x": 500, "y": 300})),
            )
            .unwrap();
        let reply = canvas
            .apply(
                "canvas_group",
                &args(json!({"nodeIds": [a, b], "title": "ideas"})),
            )
            .unwrap();
        let group = reply["nodeId"].as_str().unwrap().to_string();
        assert_eq!(reply["nodeIds"], json!([a, b]));
        let frame = canvas.node(&group).unwrap();
        assert_eq!(frame.kind, NodeKind::Group);
        assert_eq!(frame.data.title, "ideas");
        assert_eq!(frame.parent_id, None);
        assert_eq!(
            frame.position,
            Position {
                x: 100.0 - GROUP_PADDING,
                y: 200.0 - GROUP_PADDING
            }
        );
        // sticky default size 240 x 200: right edge 740, bottom 500.
        assert_eq!(
            frame.size,
            Size {
                width: 640.0 + 2.0 * GROUP_PADDING,
                height: 300.0 + 2.0 * GROUP_PADDING
            }
        );
        let node_a = canvas.node(&a).unwrap();
        assert_eq!(node_a.parent_id.as_deref(), Some(group.as_str()));
        assert_eq!(
            node_a.position,
            Position {
                x: GROUP_PADDING,
                y: GROUP_PADDING
            }
        );
        assert_eq!(
            canvas.node(&b).unwrap().position,
            Position {
                x: 400.0 + GROUP_PADDING,
                y: 100.0 + GROUP_PADDING
            }
        );
        assert_eq!(
            canvas.absolute_position(node_a),
            Position { x: 100.0, y: 200.0 }
        );
        assert_eq!(canvas.node(&other).unwrap().parent_id, None);
        // The frame is drawn before (under) its members.
        let index = |id: &str| canvas.nodes().iter().position(|n| n.id == id).unwrap();
        assert!(index(&group) < index(&a) && index(&group) < index(&b));
        let untitled = open(&mut canvas, "canvas_group", json!({"nodeIds": [other]}));
        assert_eq!(canvas.node(&untitled).unwrap().data.title, "Group");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn group_refuses_members_of_groups_groups_and_unknown_ids() {
        let dir = project("group-refused");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "sticky_open", json!({"text": "a"}));
        let b = open(&mut canvas, "sticky_open", json!({"text": "b"}));
        let group = open(&mut canvas, "canvas_group", json!({"nodeIds": [a]}));
        let nodes_before = canvas.nodes().to_vec();
        let file_before = file_bytes(&canvas);
        for (ids, expected) in [
            (json!([b, a]), "already inside group"),
            (json!([b, group]), "groups cannot be nested"),
            (json!([b, "ghost"]), "Unknown node ids: ghost"),
        ] {
            let err = canvas
                .apply("canvas_group", &args(json!({"nodeIds": ids})))
                .unwrap_err();
            assert!(err.contains(expected), "{err}");
            assert_eq!(canvas.nodes(), nodes_before.as_slice());
            assert_eq!(file_bytes(&canvas), file_before);
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn terminal_close_removes_only_terminals() {
        let dir = project("close");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let term = open(&mut canvas, "terminal_open", json!({}));
        let sticky = open(&mut canvas, "sticky_open", json!({"text": "x"}));
        canvas
            .apply("canvas_select", &args(json!({"nodeIds": [term, sticky]})))
            .unwrap();
        let err = canvas
            .apply("terminal_close", &args(json!({"nodeId": sticky})))
            .unwrap_err();
        assert!(err.contains("not a terminal"), "{err}");
        let reply = canvas
            .apply("terminal_close", &args(json!({"nodeId": term})))
            .unwrap();
        assert_eq!(reply, json!({"nodeId": term, "closed": true}));
        assert!(canvas.node(&term).is_none());
        assert_eq!(canvas.selection(), [sticky]);
        assert!(canvas
            .apply("terminal_close", &args(json!({"nodeId": term})))
            .is_err());
        assert!(Canvas::load(&dir, None).unwrap().node(&term).is_none());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn new_nodes_never_overlap_existing_ones() {
        let dir = project("placement");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let first = open(&mut canvas, "terminal_open", json!({}));
        assert_eq!(
            canvas.node(&first).unwrap().position,
            Position { x: 0.0, y: 0.0 }
        );
        // The next one goes to the right, one gap away.
        let second = open(&mut canvas, "terminal_open", json!({}));
        assert_eq!(
            canvas.node(&second).unwrap().position,
            Position {
                x: 640.0 + PLACEMENT_GAP,
                y: 0.0
            }
        );
        // A grouped node and a node moved into the way must be avoided too.
        let grouped = open(&mut canvas, "sticky_open", json!({"text": "g"}));
        open(&mut canvas, "canvas_group", json!({"nodeIds": [grouped]}));
        let moved = open(
            &mut canvas,
            "browser_open",
            json!({"url": "https://a.example"}),
        );
        canvas
            .apply(
                "canvas_move",
                &args(json!({"nodeId": moved, "x": 300, "y": 450})),
            )
            .unwrap();
        for n in 0..12 {
            let kind = ["terminal_open", "sticky_open", "browser_open"][n % 3];
            open(
                &mut canvas,
                kind,
                json!({"text": "t", "url": "https://b.example"}),
            );
        }
        let rects: Vec<(String, Position, Size)> = canvas
            .nodes()
            .iter()
            .filter(|n| n.kind != NodeKind::Group)
            .map(|n| (n.id.clone(), canvas.absolute_position(n), n.size))
            .collect();
        for (i, a) in rects.iter().enumerate() {
            for b in &rects[i + 1..] {
                assert!(
                    !overlaps((a.1, a.2), (b.1, b.2)),
                    "{} overlaps {}",
                    a.0,
                    b.0
                );
            }
        }
        for node in canvas.nodes().iter().filter(|n| n.parent_id.is_none()) {
            assert!(
                node.kind == NodeKind::Group
                    || node.position.x + node.size.width <= ROW_WIDTH
                    || node.position.x == 0.0
                    || node.id == moved
            );
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn placement_is_deterministic() {
        let place_all = |name: &str| {
            let dir = project(name);
            let mut canvas = Canvas::load(&dir, None).unwrap();
            for _ in 0..6 {
                open(
                    &mut canvas,
                    "browser_open",
                    json!({"url": "https://x.example"}),
                );
            }
            let positions: Vec<Position> = canvas.nodes().iter().map(|n| n.position).collect();
            fs::remove_dir_all(dir).unwrap();
            positions
        };
        let positions = place_all("determinism-a");
        assert_eq!(positions, place_all("determinism-b"));
        // 960 wide: two fit in a 2400 row, the third starts the next row.
        assert_eq!(
            positions[2],
            Position {
                x: 0.0,
                y: 640.0 + PLACEMENT_GAP
            }
        );
    }

    #[test]
    fn the_canvas_survives_a_reload() {
        let dir = project("round-trip");
        let mut canvas = Canvas::load(&dir, None).unwrap();
        let a = open(&mut canvas, "terminal_open", json!({"title": "one"}));
        let b = open(
            &mut canvas,
            "browser_open",
            json!({"url": "https://example.com"}),
        );
        open(
            &mut canvas,
            "artifact_open",
            json!({"path": "/p/x.rs", "view": "diff"}),
        );
        open(
            &mut canvas,
            "canvas_group",
            json!({"nodeIds": [a, b], "title": "pair"}),
        );
        canvas
            .apply("canvas_select", &args(json!({"nodeIds": [b]})))
            .unwrap();
        let again = Canvas::load(&dir, None).unwrap();
        assert_eq!(again.nodes(), canvas.nodes());
        assert_eq!(again.selection(), canvas.selection());
        assert_eq!(again.project_id(), canvas.project_id());
        assert!(again.warnings().is_empty(), "{:?}", again.warnings());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_corrupt_project_file_is_reported_and_left_untouched() {
        let dir = project("corrupt");
        fs::create_dir_all(dir.join(PROJECT_DIR)).unwrap();
        let file = dir.join(PROJECT_DIR).join(PROJECT_FILE);
        for bytes in [
            &b"{\"nodes\": [ truncated"[..],
            b"[1, 2, 3]",
            b"{\"nodes\": {}}",
            b"{\"projectId\": \"no spaces allowed\"}",
        ] {
            fs::write(&file, bytes).unwrap();
            let err = Canvas::load(&dir, None).unwrap_err();
            assert!(matches!(err, CanvasError::Corrupt { .. }), "{err}");
            assert!(
                err.to_string().contains(&file.display().to_string()),
                "{err}"
            );
            assert!(err.to_string().contains("left unchanged"), "{err}");
            assert_eq!(fs::read(&file).unwrap(), bytes);
            assert_eq!(
                Canvas::load(&dir, Some("given"))
                    .map(|_| ())
                    .unwrap_err()
                    .to_string(),
                err.to_string()
            );
            assert_eq!(fs::read(&file).unwrap(), bytes);
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn junk_node_entries_are_skipped_reported_and_kept_in_the_file() {
        let dir = project("junk");
        fs::create_dir_all(dir.join(PROJECT_DIR)).unwrap();
        let file = dir.join(PROJECT_DIR).join(PROJECT_FILE);
        let good = json!({
            "id": "note-1", "type": "sticky", "position": {"x": 5, "y": 6},
            "size": {"width": 300, "height": 10}, "data": {"text": "hi", "color": "yellow"},
            "zIndex": 3
        });
        let junk = [
            json!(42),
            json!({"id": "bad id", "type": "sticky", "position": {"x": 0, "y": 0}, "size": {"width": 1, "height": 1}, "data": {}}),
            json!({"id": "img-1", "type": "image", "position": {"x": 0, "y": 0}, "size": {"width": 1, "height": 1}, "data": {}}),
            json!({"id": "ed-1", "type": "editor", "position": {"x": 0, "y": 0}, "size": {"width": 400, "height": 400}, "data": {"title": "no path"}}),
            json!({"id": "note-1", "type": "sticky", "position": {"x": 9, "y": 9}, "size": {"width": 300, "height": 300}, "data": {}}),
            json!({"id": "t-1", "type": "terminal", "position": {"x": "0", "y": 0}, "size": {"width": 400, "height": 400}, "data": {}}),
        ];
        let orphan = json!({
            "id": "t-2", "type": "terminal", "parentId": "gone", "position": {"x": 7, "y": 8},
            "size": {"width": 400, "height": 400}, "data": {"title": "orphan"}
        });
        let mut entries = vec![good.clone()];
        entries.extend(junk.iter().cloned());
        entries.push(orphan);
        fs::write(
            &file,
            serde_json::to_vec(&json!({
                "projectId": "p1", "nodes": entries, "selection": ["note-1", "img-1", 5],
                "viewport": {"zoom": 2}
            }))
            .unwrap(),
        )
        .unwrap();
        let before = fs::read(&file).unwrap();
        let mut canvas = Canvas::load(&dir, None).unwrap();
        assert_eq!(
            fs::read(&file).unwrap(),
            before,
            "loading alone does not rewrite"
        );
        let ids: Vec<&str> = canvas.nodes().iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["note-1", "t-2"]);
        assert_eq!(canvas.selection(), ["note-1"]);
        let warnings = canvas.warnings().join("\n");
        for index in 1..=6 {
            assert!(warnings.contains(&format!("nodes[{index}]")), "{warnings}");
        }
        assert!(
            warnings.contains("t-2") && warnings.contains("gone"),
            "{warnings}"
        );
        let note = canvas.node("note-1").unwrap();
        assert_eq!(note.data.title, "Note");
        assert_eq!(
            note.size,
            Size {
                width: 300.0,
                height: 80.0
            },
            "raised to the minimum"
        );
        let orphan = canvas.node("t-2").unwrap();
        assert_eq!(
            (orphan.parent_id.clone(), orphan.position),
            (None, Position { x: 7.0, y: 8.0 })
        );

        open(&mut canvas, "sticky_open", json!({"text": "new"}));
        let saved = read_json(&file).unwrap().unwrap();
        let saved_nodes = saved["nodes"].as_array().unwrap();
        assert_eq!(saved_nodes.len(), 3 + junk.len());
        assert_eq!(
            &saved_nodes[3..],
            &junk[..],
            "junk kept verbatim, after the known nodes"
        );
        assert_eq!(saved_nodes[0]["zIndex"], json!(3));
        assert_eq!(saved_nodes[0]["data"]["color"], json!("yellow"));
        assert_eq!(saved["viewport"], json!({"zoom": 2}));
        assert_eq!(saved["projectId"], json!("p1"));
        // And a reload sees the same canvas and the same junk.
        let again = Canvas::load(&dir, None).unwrap();
        assert_eq!(again.nodes(), canvas.nodes());
        assert_eq!(again.warnings().len(), junk.len());
        fs::remove_dir_all(dir).unwrap();
    }

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
