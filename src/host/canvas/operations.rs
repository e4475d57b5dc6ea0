//! The canvas-owned operations: [`Canvas::apply`] and what it runs (`canvas_list`,
//! `canvas_select`, `canvas_move`, `canvas_resize`, `canvas_group`, `sticky_open`,
//! `artifact_open`, `browser_open`, `terminal_open`, `agent_launch`, `terminal_close`),
//! adding new nodes with fresh ids, the look-ups that refuse unknown ids, and the
//! helpers that read the operations' arguments.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{
    random_hex, refused, Canvas, CanvasError, Node, NodeData, NodeKind, Position, Size, Tab,
    GROUP_PADDING,
};

impl Canvas {
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

    fn fresh_id(&self, prefix: &str) -> Result<String, CanvasError> {
        for _ in 0..8 {
            let id = format!("{prefix}-{}", random_hex(4).map_err(CanvasError::Refused)?);
            if self.node(&id).is_none() {
                return Ok(id);
            }
        }
        refused("Could not pick a new node id; try again")
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
    use super::super::test_support::{args, file_bytes, open, project};
    use super::*;
    use crate::host::canvas::is_valid_node_id;
    use std::fs;

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
                "size": {"width": 760.0, "height": 560.0},
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
}
