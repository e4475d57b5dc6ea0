//! The default host's [`Workspace`]: local folder projects (never remote) whose node ids
//! come from the canvas owner, and the `--browser` setting.
//!
//! The canvas owner is the only writer of the canvases; after each change it
//! publishes the node ids here ([`HostWorkspace::publish`]), so the runtime's identity
//! checks read a snapshot without taking the owner's lock.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::protocol::{IntegrationState, IntegrationStatus};
use crate::runtime::{ProjectSnapshot, Workspace};

/// The open folder projects and the browser-control setting.
#[derive(Debug, Default)]
pub struct HostWorkspace {
    /// Project id -> (folder, node ids on its canvas).
    projects: Mutex<HashMap<String, (PathBuf, Vec<String>)>>,
    browser: AtomicBool,
    /// Project id -> the device and inode of its `.termsprawl/` when first published
    /// ([`Workspace::state_intact`]).
    state_dirs: Mutex<HashMap<String, (u64, u64)>>,
    /// (Project id, node id) -> its worktree's `{path, branch, base}`, as the canvas owner
    /// last found them ([`HostWorkspace::publish_worktrees`]).
    worktrees: Mutex<HashMap<String, HashMap<String, Arc<Value>>>>,
}

/// The device and inode of `<cwd>/.termsprawl`, if it is there.
fn state_dir_identity(cwd: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(cwd.join(".termsprawl")).ok()?;
    Some((meta.dev(), meta.ino()))
}

impl HostWorkspace {
    /// A workspace with no projects; `browser` enables agent browser control.
    pub fn new(browser: bool) -> HostWorkspace {
        HostWorkspace {
            projects: Mutex::default(),
            browser: AtomicBool::new(browser),
            state_dirs: Mutex::default(),
            worktrees: Mutex::default(),
        }
    }

    /// Sets the node ids of project `id` (opening it, in folder `cwd`, if it is new).
    pub fn publish(&self, id: &str, cwd: PathBuf, node_ids: Vec<String>) {
        let mut state_dirs = crate::base::lock_or_recover(&self.state_dirs);
        if !state_dirs.contains_key(id) {
            if let Some(identity) = state_dir_identity(&cwd) {
                state_dirs.insert(id.to_string(), identity);
            }
        }
        drop(state_dirs);
        self.lock().insert(id.to_string(), (cwd, node_ids));
    }

    /// The worktrees of project `id`'s agents: node id -> `{path, branch, base}`.
    pub fn publish_worktrees(&self, id: &str, worktrees: Vec<(String, Value)>) {
        let facts = worktrees
            .into_iter()
            .map(|(node, facts)| (node, Arc::new(facts)))
            .collect();
        crate::base::lock_or_recover(&self.worktrees).insert(id.to_string(), facts);
    }

    /// Forgets project `id` (its agents' calls are then refused).
    pub fn close_project(&self, id: &str) {
        self.lock().remove(id);
    }

    /// The ids of the open projects, sorted.
    pub fn project_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.lock().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Turns agent browser control on or off.
    pub fn set_browser_control(&self, enabled: bool) {
        self.browser.store(enabled, Ordering::SeqCst);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (PathBuf, Vec<String>)>> {
        // Plain data: a panic elsewhere cannot leave it half-written.
        crate::base::lock_or_recover(&self.projects)
    }
}

impl Workspace for HostWorkspace {
    fn worktree(&self, project_id: &str, node_id: &str) -> Option<Arc<Value>> {
        let known = crate::base::lock_or_recover(&self.worktrees);
        known.get(project_id)?.get(node_id).cloned()
    }

    fn project(&self, project_id: &str) -> Option<ProjectSnapshot> {
        let projects = self.lock();
        let (cwd, node_ids) = projects.get(project_id)?;
        Some(ProjectSnapshot {
            id: project_id.to_string(),
            cwd: Some(cwd.clone()),
            remote: false,
            node_ids: node_ids.clone(),
        })
    }

    fn has_node(&self, project_id: &str, node_id: &str) -> Option<bool> {
        let projects = self.lock();
        Some(projects.get(project_id)?.1.iter().any(|id| id == node_id))
    }

    fn browser_control_enabled(&self) -> bool {
        self.browser.load(Ordering::SeqCst)
    }

    fn state_intact(&self, project_id: &str) -> bool {
        let Some(cwd) = self.lock().get(project_id).map(|(cwd, _)| cwd.clone()) else {
            return false;
        };
        let opened = crate::base::lock_or_recover(&self.state_dirs)
            .get(project_id)
            .copied();
        opened.map_or(true, |opened| state_dir_identity(&cwd) == Some(opened))
    }

    fn status_changed(&self, node_id: &str, status: &IntegrationStatus) {
        // There is no UI: the log is where a user sees an agent connect or need setup.
        let state = match status.state {
            IntegrationState::Connected => "connected",
            IntegrationState::CliFallback => "cli-fallback",
            IntegrationState::NeedsSetup => "needs-setup",
        };
        match &status.reason {
            Some(reason) => eprintln!("termsprawl-tools: agent {node_id}: {state} ({reason})"),
            None => eprintln!("termsprawl-tools: agent {node_id}: {state}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_are_local_folders_with_published_nodes() {
        let workspace = HostWorkspace::new(false);
        assert!(workspace.project("p").is_none());
        workspace.publish("p", PathBuf::from("/w"), vec!["a".into()]);
        let project = workspace.project("p").unwrap();
        assert_eq!(project.cwd, Some(PathBuf::from("/w")));
        assert!(!project.remote);
        assert_eq!(project.node_ids, vec!["a".to_string()]);
        workspace.publish("p", PathBuf::from("/w"), vec![]);
        assert!(workspace.project("p").unwrap().node_ids.is_empty());
        assert!(!workspace.browser_control_enabled());
        workspace.set_browser_control(true);
        assert!(workspace.browser_control_enabled());
        workspace.close_project("p");
        assert!(workspace.project_ids().is_empty());
    }
}
