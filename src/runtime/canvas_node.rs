//! A canvas node as `canvas_list` answers it, typed: an owner that builds its list from
//! [`CanvasNode`]s cannot leave out a field the runtime reads (an agent's
//! `data.agentId`, a browser's tabs), and gets the wire shape the catalogue publishes.

use serde_json::{json, Map, Value};

/// What a node is, with what the runtime reads for that kind.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// A plain shell terminal. `remote`: on another machine (terminal operations refuse it).
    Shell {
        /// On another machine.
        remote: bool,
    },
    /// An agent's terminal: `agent_cards` lists it, and commands are never submitted
    /// into it (`terminal_submit` is for shells).
    Agent {
        /// Which agent (`claude`, `codex`, `custom`, …): `data.agentId`.
        agent_id: String,
        /// The command line it runs: `data.command`.
        command: String,
        /// On another machine.
        remote: bool,
    },
    /// A browser: its tabs and the one shown (the runtime drives that one's page).
    Browser {
        /// Its tabs, in order.
        tabs: Vec<CanvasTab>,
        /// The id of the tab shown; `None`: the first.
        active_tab: Option<String>,
    },
    /// A note.
    Sticky {
        /// Its text.
        text: String,
    },
    /// A file open in an editor.
    Editor {
        /// The file's absolute path.
        path: String,
    },
    /// A frame around other nodes (theirs `parent` is its id).
    Group,
    /// Any other `type` the app has: listed as is, nothing of it is read.
    Other(String),
}

/// One tab of a browser node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanvasTab {
    /// Its id, unique within its node.
    pub id: String,
    /// The URL it shows.
    pub url: String,
}

/// One node of a canvas, as an owner lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct CanvasNode {
    /// Its id (agents pass it back as `nodeId`).
    pub id: String,
    /// What it is.
    pub kind: NodeKind,
    /// Its left edge: relative to its parent group, absolute when it has none.
    pub x: f64,
    /// Its top edge, as `x`.
    pub y: f64,
    /// Its width.
    pub width: f64,
    /// Its height.
    pub height: f64,
    /// The title shown on it.
    pub title: String,
    /// The group it sits in, if any.
    pub parent: Option<String>,
}

impl CanvasNode {
    /// A top-level node at (0, 0), 480 × 320, titled with its id.
    pub fn new(id: &str, kind: NodeKind) -> CanvasNode {
        CanvasNode {
            id: id.to_string(),
            kind,
            x: 0.0,
            y: 0.0,
            width: 480.0,
            height: 320.0,
            title: id.to_string(),
            parent: None,
        }
    }

    /// The node as `canvas_list` answers it: `{id, type, position, size, parentId?, data}`.
    pub fn to_json(&self) -> Value {
        let mut data = Map::new();
        data.insert("title".into(), json!(self.title));
        let kind = match &self.kind {
            NodeKind::Shell { remote } => {
                data.insert("remote".into(), json!(remote));
                "terminal"
            }
            NodeKind::Agent {
                agent_id,
                command,
                remote,
            } => {
                data.insert("agentId".into(), json!(agent_id));
                data.insert("command".into(), json!(command));
                data.insert("remote".into(), json!(remote));
                "terminal"
            }
            NodeKind::Browser { tabs, active_tab } => {
                let active = active_tab
                    .clone()
                    .or_else(|| Some(tabs.first()?.id.clone()));
                let tabs: Vec<Value> = tabs
                    .iter()
                    .map(|tab| json!({"id": tab.id, "url": tab.url}))
                    .collect();
                data.insert("tabs".into(), json!(tabs));
                data.insert("activeTabId".into(), json!(active));
                "browser"
            }
            NodeKind::Sticky { text } => {
                data.insert("text".into(), json!(text));
                "sticky"
            }
            NodeKind::Editor { path } => {
                data.insert("path".into(), json!(path));
                "editor"
            }
            NodeKind::Group => "group",
            NodeKind::Other(kind) => kind,
        };
        let mut node = json!({
            "id": self.id,
            "type": kind,
            "position": {"x": self.x, "y": self.y},
            "size": {"width": self.width, "height": self.height},
            "data": data,
        });
        if let Some(parent) = &self.parent {
            node["parentId"] = json!(parent);
        }
        node
    }

    /// A whole `canvas_list` answer.
    pub fn list(nodes: &[CanvasNode]) -> Value {
        Value::Array(nodes.iter().map(CanvasNode::to_json).collect())
    }
}

/// A string field of a node as the canvas owner lists it (`id`, `type`, `nodeId`, …).
pub(super) fn node_field<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_carries_what_the_runtime_reads() {
        let node = |kind| CanvasNode {
            x: 1.0,
            y: 2.0,
            width: 300.0,
            height: 200.0,
            title: "T".into(),
            ..CanvasNode::new("n1", kind)
        };
        let agent = node(NodeKind::Agent {
            agent_id: "custom".into(),
            command: "my-agent".into(),
            remote: false,
        })
        .to_json();
        assert_eq!(
            agent,
            json!({"id": "n1", "type": "terminal", "position": {"x": 1.0, "y": 2.0},
                   "size": {"width": 300.0, "height": 200.0},
                   "data": {"title": "T", "agentId": "custom", "command": "my-agent",
                            "remote": false}})
        );
        let tab = |id: &str| CanvasTab {
            id: id.into(),
            url: "https://example.com/".into(),
        };
        let browser = node(NodeKind::Browser {
            tabs: vec![tab("t1"), tab("t2")],
            active_tab: None,
        })
        .to_json();
        assert_eq!(browser["data"]["activeTabId"], "t1");
        assert_eq!(browser["data"]["tabs"][1]["id"], "t2");
        let mut grouped = node(NodeKind::Group);
        grouped.parent = Some("g0".into());
        let grouped = grouped.to_json();
        assert_eq!(
            (grouped["type"].as_str(), grouped["parentId"].as_str()),
            (Some("group"), Some("g0"))
        );
        let other = node(NodeKind::Other("diagram".into())).to_json();
        assert_eq!(other["type"], "diagram");
        assert_eq!(
            CanvasNode::list(&[node(NodeKind::Group)])
                .as_array()
                .map(Vec::len),
            Some(1)
        );
    }
}
