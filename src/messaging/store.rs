//! Tasks on disk: one private file per task under `<data>/agent-tools/tasks/<projectId>/`,
//! `{"version":1,"projectId":…,"task":{…}}`, written like every private file (exclusive
//! temp file, fsync, rename, fsync of the folder). A file's name is random, never made
//! from an id or a text. At load every entry is looked at with `lstat` first: symlinks,
//! non-files, files over [`MAX_TASK_FILE_BYTES`], files not private to this user and
//! records that do not parse or break a rule are skipped (never followed, never trusted,
//! left as they are).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{Task, TaskState, MAX_TASKS, RESTARTED};
use crate::base::files::{private_dir, private_json, read_private_json};
use crate::base::random_id;
use crate::protocol::{is_valid_node_id, validate_tool_request};

/// A task file larger than this is not one of ours (two 16,000-character texts fit).
pub const MAX_TASK_FILE_BYTES: u64 = 150_000;
/// Entries of a project's folder looked at when loading.
const MAX_ENTRIES: usize = 10_000;

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Record {
    version: u32,
    project_id: String,
    task: Task,
}

/// A task and the file that holds it (`None`: kept in memory only).
pub struct Stored {
    pub task: Task,
    file: Option<PathBuf>,
    project_id: String,
}

/// The folder of `project_id`'s tasks; `None` for an id that is no safe file name (its
/// tasks then live in memory only).
pub fn project_dir(root: &Path, project_id: &str) -> Option<PathBuf> {
    is_valid_node_id(project_id).then(|| root.join(project_id))
}

impl Stored {
    /// Records a new task in a new file of `dir`.
    pub fn new(task: Task, dir: Option<PathBuf>, project_id: &str) -> io::Result<Stored> {
        let file = match dir {
            Some(dir) => {
                private_dir(&dir)?;
                Some(dir.join(format!("{}.json", random_id())))
            }
            None => None,
        };
        let stored = Stored {
            task,
            file,
            project_id: project_id.to_string(),
        };
        stored.write()?;
        Ok(stored)
    }

    fn write(&self) -> io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let record = Record {
            version: 1,
            project_id: self.project_id.clone(),
            task: self.task.clone(),
        };
        private_json(
            file,
            &serde_json::to_value(record).map_err(io::Error::other)?,
        )
    }

    /// Writes the task's new state. A failed write keeps the state in memory for this run
    /// (said on stderr); the next start then reads the state written before.
    pub fn save(&self) {
        if let Err(e) = self.write() {
            eprintln!(
                "termsprawl-tools: could not record task {}: {e}",
                self.task.task_id
            );
        }
    }

    /// Removes the task's file.
    pub fn remove(&self) {
        if let Some(file) = &self.file {
            let _ = fs::remove_file(file);
        }
    }
}

/// The tasks of `dir`, oldest first, at most [`MAX_TASKS`] (the newest); those found
/// pending fail with [`RESTARTED`].
pub fn load(dir: Option<PathBuf>, project_id: &str, now: u64) -> Vec<Stored> {
    // Only a real folder: a symlink planted in its place is never followed.
    let real = |d: &PathBuf| fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_dir());
    let Some(entries) = dir.filter(real).and_then(|d| fs::read_dir(d).ok()) else {
        return Vec::new();
    };
    let mut tasks: Vec<Stored> = Vec::new();
    for entry in entries.filter_map(Result::ok).take(MAX_ENTRIES) {
        let path = entry.path();
        let Some(task) = read_task(&path, project_id) else {
            continue;
        };
        if tasks.iter().any(|s| s.task.task_id == task.task_id) {
            continue;
        }
        let mut stored = Stored {
            task,
            file: Some(path),
            project_id: project_id.to_string(),
        };
        if stored.task.pending() {
            stored.task.fail(RESTARTED, now);
            stored.save();
        }
        tasks.push(stored);
    }
    tasks.sort_by_key(|s| s.task.created_ms);
    // Our own records past the cap (a cap lowered since): the oldest go, as when sending.
    let extra = tasks.len().saturating_sub(MAX_TASKS);
    tasks.drain(..extra).for_each(|s| s.remove());
    tasks
}

/// The task in `path`, if it is a well-formed record of `project_id` in a private
/// regular file of ours.
fn read_task(path: &Path, project_id: &str) -> Option<Task> {
    let name = path.file_name()?.to_str()?;
    if name.starts_with('.') || !name.ends_with(".json") {
        return None;
    }
    let meta = fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_file() || meta.len() > MAX_TASK_FILE_BYTES {
        return None;
    }
    let record: Record = serde_json::from_value(read_private_json(path).ok()??).ok()?;
    let task = record.task;
    let outcome_fits = match task.state {
        TaskState::Submitted => task.reply.is_none(),
        TaskState::Completed => task.reply.is_some(),
        TaskState::Failed => task.reply.is_some() || task.reason.is_some(),
    };
    let mut sent = json!({"nodeId": task.to, "text": task.text});
    if let Some(id) = &task.message_id {
        sent["messageId"] = json!(id);
    }
    let valid = record.version == 1
        && record.project_id == project_id
        && outcome_fits
        && task.task_id.starts_with("task-")
        && is_valid_node_id(&task.from)
        && is_valid_node_id(&task.to)
        && task.from != task.to
        && accepted("agent_send", sent)
        && accepted("agent_task", json!({"taskId": task.task_id}))
        && task.reply.as_ref().map_or(true, |reply| {
            accepted(
                "agent_reply",
                json!({"taskId": task.task_id, "text": reply}),
            )
        });
    valid.then_some(task)
}

/// Whether the validator accepts `operation` with `args`: a record's ids and texts obey
/// the rules their operations do (the same rules, not a copy of them).
fn accepted(operation: &str, args: Value) -> bool {
    validate_tool_request(&json!({"operation": operation, "args": args})).is_ok()
}
