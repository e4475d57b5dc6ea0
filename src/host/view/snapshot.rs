//! What the canvas view shows, as one JSON value made on demand: the project's id and
//! folder name, the nodes with absolute positions and their `canvas_list` data (terminal
//! `session`s included), each browser's live page (URL and title), the screens of the
//! terminals in view, the selection, the links of `context_read` (and whether each
//! allows messages), the agents with their integration status, the latest agent
//! messages, the latest lines of the activity trail, and the calls waiting for the
//! person's approval with each agent's rules.
//!
//! The canvas lock is held only to copy the nodes; terminal screens and statuses are read
//! after it is released, so a viewer never holds up an agent's canvas call for longer
//! than that copy.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::{styled, Visible};
use crate::activity::read_tail;
use crate::host::browser::guests::ChromiumBrowsers;
use crate::host::canvas::owner::{with_states, HeadlessCanvas};
use crate::host::canvas::{NodeKind, TERMINAL_ROWS};
use crate::host::terminals::{HostTerminals, SessionState, ViewScreen};
use crate::host::HostError;
use crate::protocol::{OperationClass, OPERATION_CLASSES};
use crate::runtime::approvals::Asked;
use crate::runtime::context::read_links;
use crate::runtime::AgentToolRuntime;

/// Most lines of a terminal's screen shown (the last of its visible rows): as many as a
/// terminal can have rows, so a tall node shows all of its screen.
pub const SCREEN_LINES: usize = TERMINAL_ROWS.1 as usize;
/// A poll reads the terminals (their sessions and the screens in view: one `tmux`
/// process) and the activity trail again at most this often: output still shows well
/// within a second.
pub const SCREENS_EVERY: Duration = Duration::from_millis(500);

/// What one poll has read of the terminals and the trail, and when: reused by its ticks
/// until [`SCREENS_EVERY`].
#[derive(Default)]
pub struct Screens {
    taken: Option<Instant>,
    states: HashMap<String, SessionState>,
    by_node: HashMap<String, ViewScreen>,
    /// The latest activity lines, and when read.
    activity: Value,
    activity_taken: Option<Instant>,
}

/// Agent messages the view is given (the latest), and how much of each text.
pub const TASKS_SHOWN: usize = 50;
const TASK_TEXT_CHARS: usize = 80;

/// Activity lines shown in the side panel (the latest).
pub const ACTIVITY_LINES: usize = 30;

/// Where the view reads from: the default host's parts and the project shown.
pub struct ViewSource {
    /// The canvas owner (its nodes are copied under its lock).
    pub canvas: Arc<HeadlessCanvas>,
    /// Terminal screens and session states; the person's keys.
    pub terminals: Arc<HostTerminals>,
    /// Browser pages (live URL, title, screenshots).
    pub browsers: Arc<ChromiumBrowsers>,
    /// Agents' integration statuses.
    pub runtime: Arc<AgentToolRuntime>,
    /// The project shown.
    pub project_id: String,
}

impl ViewSource {
    /// The snapshot (module docs); screens only for terminals `visible` names, read again
    /// once `screens_every` has passed (`SCREENS_EVERY`, shorter while the person types);
    /// the activity trail at most every `SCREENS_EVERY`.
    pub fn snapshot(
        &self,
        visible: &Visible,
        screens: &mut Screens,
        screens_every: Duration,
    ) -> Result<Value, HostError> {
        let project_id = self.project_id.clone();
        let copied = self.canvas.read(move |state| {
            let canvas = state.canvas(&project_id)?;
            let nodes: Vec<Value> = canvas
                .nodes()
                .iter()
                .map(|node| {
                    let mut value = serde_json::to_value(node).unwrap_or(Value::Null);
                    let at = canvas.absolute_position(node);
                    value["absolute"] = json!({ "x": at.x, "y": at.y });
                    value
                })
                .collect();
            let folder: Option<PathBuf> = state.folder(&project_id).map(PathBuf::from);
            let worktrees = state.worktrees(&project_id);
            Some((nodes, canvas.selection().to_vec(), folder, worktrees))
        })?;
        let Some((nodes, selection, folder, worktrees)) = copied else {
            return Err(HostError::Other("the project is not open".into()));
        };
        if screens.taken.map_or(true, |t| t.elapsed() >= screens_every) {
            let in_view: Vec<&str> = nodes
                .iter()
                .filter(|n| n["type"] == NodeKind::Terminal.name())
                .filter_map(|n| n["id"].as_str())
                .filter(|id| visible.contains(id))
                .collect();
            (screens.states, screens.by_node) = self.terminals.states_and_screens(&in_view);
            screens.taken = Some(Instant::now());
        }
        if screens
            .activity_taken
            .map_or(true, |t| t.elapsed() >= SCREENS_EVERY)
        {
            screens.activity = self.latest_activity();
            screens.activity_taken = Some(Instant::now());
        }
        let backend = self.terminals.backend_name();
        let mut nodes = with_states(Value::Array(nodes), backend, &screens.states);
        // Every agent's worktree, also of agents closed since (kept until merged or
        // discarded), each with its node id.
        let worktrees: Vec<Value> = worktrees
            .map(|w| w.states())
            .unwrap_or_default()
            .into_iter()
            .map(|(node_id, mut state)| {
                state["nodeId"] = json!(node_id);
                state
            })
            .collect();
        for node in nodes.as_array_mut().into_iter().flatten() {
            self.add_live_parts(node, visible, screens);
        }
        let links: Vec<Value> = (folder.as_deref())
            .map(read_links)
            .unwrap_or_default()
            .into_iter()
            .map(|(a, b, messages)| json!({ "a": a, "b": b, "agentMessages": messages }))
            .collect();
        // What each agent is doing for the person: the page lists those waiting for them.
        let mut states: HashMap<String, Value> = (self.runtime.agent_states(&self.project_id))
            .into_iter()
            .map(|(node_id, state)| (node_id, state.to_json()))
            .collect();
        let agents: Vec<Value> = self
            .runtime
            .server()
            .statuses(&self.project_id)
            .into_iter()
            .map(|(node_id, status)| {
                let attention = states.remove(&node_id);
                json!({ "nodeId": node_id, "status": status, "attention": attention })
            })
            .collect();
        // The latest agent messages (each shown on its sender's and recipient's node).
        let tasks = self
            .runtime
            .tasks(&self.project_id, TASKS_SHOWN, TASK_TEXT_CHARS);
        let tasks: Vec<Value> = (tasks.iter())
            .map(|t| json!({"taskId": t.task_id, "from": t.from, "to": t.to, "state": t.state, "text": t.text}))
            .collect();
        let agent_ids: Vec<&str> = (agents.iter())
            .filter_map(|agent| agent["nodeId"].as_str())
            .collect();
        let approvals = self.approvals(&agent_ids);
        // The folder's name, which the page shows for the project.
        let project_name = (folder.as_deref())
            .and_then(|f| f.file_name())
            .map(|name| name.to_string_lossy().into_owned());
        Ok(json!({
            "projectId": self.project_id,
            "projectName": project_name,
            "approvals": approvals,
            "activity": screens.activity,
            "tasks": tasks,
            "nodes": nodes,
            "selection": selection,
            "links": links,
            "worktrees": worktrees,
            "agents": agents,
        }))
    }

    /// The calls of this project waiting for the person's answer (oldest first), each
    /// agent's rule per class, and the two counters that change with them (so a poll's
    /// version changes as soon as a call waits or a rule changes).
    fn approvals(&self, agent_ids: &[&str]) -> Value {
        let runtime = &self.runtime;
        let pending: Vec<Value> = (runtime.pending_approvals().iter())
            .filter(|asked| asked.project_id == self.project_id)
            .map(Asked::to_json)
            .collect();
        let rules: Vec<Value> = (agent_ids.iter())
            .map(|node| {
                let classes = runtime.policy_summary(&self.project_id, node);
                json!({ "nodeId": node, "classes": classes })
            })
            .collect();
        let classes = OPERATION_CLASSES.map(OperationClass::name);
        let versions = [runtime.approvals_version(), runtime.policy_version()];
        json!({ "pending": pending, "rules": rules, "classes": classes, "versions": versions })
    }

    /// The project's folder (where its links live), if it is open.
    pub fn project_folder(&self) -> Option<PathBuf> {
        let project_id = self.project_id.clone();
        let read = self
            .canvas
            .read(move |state| state.folder(&project_id).map(PathBuf::from));
        read.ok().flatten()
    }

    /// The latest lines of the project's activity trail (none without a trail).
    fn latest_activity(&self) -> Value {
        let server = self.runtime.server();
        let lines = server
            .activity_file(&self.project_id)
            .and_then(|file| file.parent().map(|dir| dir.to_path_buf()))
            .map(|dir| read_tail(&dir, &self.project_id, ACTIVITY_LINES))
            .unwrap_or_default();
        json!(lines)
    }

    /// The id of browser node `node_id`'s active tab (else its first), if it has one.
    pub fn active_tab(&self, node_id: &str) -> Option<String> {
        let project_id = self.project_id.clone();
        let node_id = node_id.to_string();
        self.canvas
            .read(move |state| {
                let node = state.canvas(&project_id)?.node(&node_id)?;
                let tabs = node.data.tabs.as_ref()?;
                let active = node.data.active_tab_id.as_ref();
                let tab = tabs
                    .iter()
                    .find(|t| Some(&t.id) == active)
                    .or(tabs.first())?;
                Some(tab.id.clone())
            })
            .ok()
            .flatten()
    }

    /// A terminal's screen (when in view) and a browser's live page, added to `node`.
    fn add_live_parts(&self, node: &mut Value, visible: &Visible, screens: &Screens) {
        let id = node["id"].as_str().unwrap_or_default().to_string();
        let kind = node["type"].as_str().unwrap_or_default().to_string();
        let Some(object) = node.as_object_mut() else {
            return;
        };
        if kind == NodeKind::Terminal.name() && visible.contains(&id) {
            if let Some(screen) = screens.by_node.get(&id) {
                // The screen may hold SGR escapes (tmux): only its runs reach the page.
                let (dropped, lines) = styled::screen_lines(&screen.text, SCREEN_LINES);
                let text: Vec<String> = lines.iter().map(|line| styled::text_of(line)).collect();
                let runs: Vec<Value> = (lines.iter())
                    .map(|line| json!(line.iter().map(styled::Run::to_json).collect::<Vec<_>>()))
                    .collect();
                object.insert("screen".into(), json!(text.join("\n")));
                object.insert("screenLines".into(), json!(runs));
                // The cursor's row on `screenLines` (none when its row was dropped).
                let cursor = (screen.cursor)
                    .and_then(|(row, col)| Some((row.checked_sub(dropped)?, col)))
                    .filter(|(row, _)| *row < SCREEN_LINES);
                let cursor = match cursor {
                    Some((row, col)) => json!({"row": row, "col": col, "visible": true}),
                    None => json!({"visible": false}),
                };
                object.insert("cursor".into(), cursor);
            }
        }
        if kind == NodeKind::Browser.name() {
            // Titles set after a load are only known when asked: asked for pages in view.
            let refresh = visible.contains(&id);
            let mut pages = Map::new();
            let tabs = object["data"]["tabs"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for tab in tabs {
                let tab_id = tab["id"].as_str().unwrap_or_default();
                if let Some(page) = self.browsers.page_info(&id, tab_id, refresh) {
                    pages.insert(tab_id.to_string(), json!(page));
                }
            }
            object.insert("pages".into(), Value::Object(pages));
        }
    }
}

/// A short fingerprint of a snapshot: polls compare it to see whether anything changed.
pub fn version_of(snapshot: &Value) -> String {
    let mut hasher = DefaultHasher::new();
    snapshot.to_string().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_the_content() {
        let a = version_of(&json!({"n": [1, 2]}));
        assert_eq!(a, version_of(&json!({"n": [1, 2]})));
        assert_ne!(a, version_of(&json!({"n": [2, 1]})));
        assert_eq!(a.len(), 16);
    }
}
