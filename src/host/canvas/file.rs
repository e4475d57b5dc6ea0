//! The canvas file, `<project>/.termsprawl/project.json`: [`Canvas::load`] (creating the
//! private folder and the project id), reading a parsed file into a canvas (skipping and
//! carrying entries of `nodes` that are not nodes and keys this host does not know,
//! dropping parents that are not top-level groups, loading `endedTerminals`) and saving
//! it back (0600, atomically, with the carried entries and keys).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::node::read_node;
use super::{
    is_valid_node_id, random_hex, refused, Canvas, CanvasError, Node, NodeKind, ENDED_KEY,
    FILE_VERSION, PROJECT_DIR, PROJECT_FILE,
};
use crate::base::files::{private_dir, private_json, read_json};
use crate::host::terminals::EndedTerminal;
use crate::runtime::context::check_state_folders;

impl Canvas {
    /// Loads the canvas of the folder project at `project_dir`, creating
    /// `.termsprawl/` (0700) and `project.json` when missing; refused when `.termsprawl/`,
    /// its `links/` or its `transcripts/` is not a private folder of this user.
    ///
    /// The project id is `project_id` when given, else the one kept in the file, else a
    /// new random one; whichever it is gets written to the file, so a later load without
    /// `project_id` keeps it (and with it the agents' tokens).
    pub fn load(project_dir: &Path, project_id: Option<&str>) -> Result<Canvas, CanvasError> {
        Canvas::load_with_agents(project_dir, project_id, &[])
    }

    /// [`load`](Self::load), with the agent nodes `agents` (node id, agent) put on the
    /// canvas as [`add_agent_node`](Self::add_agent_node) would, in the same one write:
    /// `serve --agent` writes a new project's `project.json` (and waits for its fsyncs)
    /// once, not twice. A refused agent node fails the load before anything is saved.
    pub fn load_with_agents(
        project_dir: &Path,
        project_id: Option<&str>,
        agents: &[(&str, &str)],
    ) -> Result<Canvas, CanvasError> {
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
        // A state folder someone else owns or can write to is refused, never tightened:
        // files put there meanwhile (links, a canvas) would stay and be read as ours.
        if let Err(e) = check_state_folders(project_dir) {
            if e.kind() != io::ErrorKind::NotFound {
                return refused(e.to_string());
            }
            private_dir(&dir).map_err(|source| CanvasError::Io {
                path: dir.clone(),
                source,
            })?;
            // Ours now, unless another user made one between the check and the making.
            check_state_folders(project_dir).or_else(|e| refused(e.to_string()))?;
        }
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
        let mut changed = !existed || wanted != canvas.project_id;
        canvas.project_id = wanted;
        for (node_id, agent) in agents {
            changed |= canvas.put_agent_node(node_id, agent)?;
        }
        if changed {
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
    pub(super) fn save(&self) -> Result<(), CanvasError> {
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
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{args, file_bytes, open, project};
    use super::super::{Position, Size};
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_state_folder_that_is_not_private_is_refused_and_left_as_it_is() {
        let dir = project("loose");
        let state = dir.join(PROJECT_DIR);
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        Canvas::load(&dir, None).unwrap();
        for (folder, loose) in [(state.clone(), 0o755), (state.join("links"), 0o777)] {
            private_dir(&folder).unwrap();
            fs::set_permissions(&folder, fs::Permissions::from_mode(loose)).unwrap();
            let refused = Canvas::load(&dir, None).unwrap_err().to_string();
            assert!(
                refused.contains(&format!("chmod 700 {}", folder.display())),
                "{refused}"
            );
            assert_eq!(mode(&folder), loose, "refused, not tightened");
            fs::set_permissions(&folder, fs::Permissions::from_mode(0o700)).unwrap();
        }
        Canvas::load(&dir, None).unwrap();
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
        private_dir(&dir.join(PROJECT_DIR)).unwrap();
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
        private_dir(&dir.join(PROJECT_DIR)).unwrap();
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
}
