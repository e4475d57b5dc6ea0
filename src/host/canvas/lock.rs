//! `<project>/.termsprawl/serve.lock`: one host serves a project folder at a time.
//!
//! Two hosts on one folder (say `serve --data A` and `serve --data B`, easy to start with
//! `XDG_DATA_HOME` set in one shell and not in another) would each write `project.json`
//! from their own copy of the canvas: the last writer wins, and a note made through the
//! other is lost. So a host takes `flock(LOCK_EX|LOCK_NB)` on the project's `.termsprawl`
//! folder for as long as it serves the project ([`ProjectLock`]). The kernel drops the
//! flock when the process dies, so a crash (`kill -9`) leaves nothing stale: like the data
//! folder's lock, whose design this follows (`server/lock.rs`).
//!
//! Beside it, `serve.lock` says who holds the folder (`{pid, data}`), written whole and
//! renamed, so a second host can name the first: its pid, its data folder and the address
//! in that folder's `endpoint.json`. The file is only a description; the flock is the lock.
//! Both files are read only as private regular files of this user (`read_private_json`):
//! whoever can write the project folder could otherwise plant a FIFO there, or name a
//! data folder holding one, and hang a starting host on its read.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::PROJECT_DIR;
use crate::base::files::{private_dir, private_json, read_private_json};
use crate::host::HostError;
use crate::runtime::context::check_state_folders;

/// The file naming the host that serves the project.
pub const LOCK_FILE: &str = "serve.lock";

/// A project folder's lock, held while the host serves it; dropping it unlocks.
#[derive(Debug)]
pub struct ProjectLock {
    _dir: File,
    file: PathBuf,
}

impl ProjectLock {
    /// Takes the lock of the project at `folder` (an existing folder) for this process,
    /// whose data folder is `data`. Refused, naming the holder, when another host (or
    /// this one) serves it.
    pub fn acquire(folder: &Path, data: &Path) -> Result<ProjectLock, HostError> {
        let state = folder.join(PROJECT_DIR);
        let io = |what: &str, e: std::io::Error| {
            HostError::Other(format!("cannot {what} {}: {e}", state.display()))
        };
        // As the canvas file's loading does: a state folder someone else owns or can
        // write to is refused, never tightened; a missing one is made private.
        match check_state_folders(folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                private_dir(&state).map_err(|e| io("create", e))?
            }
            Err(e) => return Err(HostError::Other(e.to_string())),
        }
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&state)
            .map_err(|e| io("open", e))?;
        let file = state.join(LOCK_FILE);
        let data = data.canonicalize().unwrap_or_else(|_| data.to_path_buf());
        if !crate::sys::fd::try_lock_exclusive(&dir).map_err(|e| io("lock", e))? {
            return Err(HostError::Other(held_by(folder, &file, &data)));
        }
        let body = json!({ "pid": std::process::id(), "data": data });
        private_json(&file, &body).map_err(|e| io("write serve.lock in", e))?;
        Ok(ProjectLock { _dir: dir, file })
    }
}

impl Drop for ProjectLock {
    /// Removes `serve.lock` if it still names this process (the flock goes with `_dir`).
    fn drop(&mut self) {
        let ours = read_private_json(&self.file)
            .ok()
            .flatten()
            .and_then(|v| pid_of(&v))
            == Some(std::process::id());
        if ours {
            let _ = fs::remove_file(&self.file);
        }
    }
}

/// Why the project at `folder` cannot be served by the host of data folder `ours`: who
/// holds it, as `serve.lock` says.
fn held_by(folder: &Path, file: &Path, ours: &Path) -> String {
    let holder = read_private_json(file)
        .ok()
        .flatten()
        .unwrap_or(Value::Null);
    let pid = pid_of(&holder);
    if pid == Some(std::process::id()) {
        return format!(
            "the project folder {} is already open in this host",
            folder.display()
        );
    }
    let data = holder.get("data").and_then(Value::as_str);
    if data == ours.to_str() {
        // The data folder's own lock would say this, were it taken first.
        let pid = pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default();
        return format!(
            "Another instance{pid} is already using this data directory ({}) and the project folder {}; quit it or choose another data directory",
            ours.display(),
            folder.display()
        );
    }
    let url = data.and_then(|data| {
        let endpoint =
            read_private_json(&Path::new(data).join("agent-tools/endpoint.json")).ok()??;
        endpoint.get("url")?.as_str().map(str::to_string)
    });
    let mut who = Vec::new();
    if let Some(pid) = pid {
        who.push(format!("pid {pid}"));
    }
    if let Some(data) = data {
        who.push(format!("data folder {data}"));
    }
    if let Some(url) = url {
        who.push(format!("agents call {url}"));
    }
    let who = match who.is_empty() {
        true => String::new(),
        false => format!(" ({})", who.join(", ")),
    };
    // "already using", as a second `serve` on a live data folder says.
    format!(
        "another termsprawl-tools serve{who} is already using the project folder {}; \
         use that one (its --data), or stop it first",
        folder.display()
    )
}

fn pid_of(holder: &Value) -> Option<u32> {
    holder
        .get("pid")?
        .as_u64()
        .and_then(|p| u32::try_from(p).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write_private(path: &Path, text: &str) {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() {
        let root = std::env::temp_dir().join(format!("project-lock-{}", std::process::id()));
        let (folder, data) = (root.join("project"), root.join("data"));
        fs::create_dir_all(&folder).unwrap();
        fs::create_dir_all(data.join("agent-tools")).unwrap();
        let first = ProjectLock::acquire(&folder, &data).unwrap();
        let lock_file = folder.join(PROJECT_DIR).join(LOCK_FILE);
        let written = read_private_json(&lock_file).unwrap().unwrap();
        assert_eq!(pid_of(&written), Some(std::process::id()));
        // The same process asking again is told so (a flock conflicts across open files).
        let again = ProjectLock::acquire(&folder, &data)
            .unwrap_err()
            .to_string();
        assert!(again.contains("already open in this host"), "{again}");
        drop(first);
        assert!(!lock_file.exists(), "serve.lock is removed with the lock");
        let second = ProjectLock::acquire(&folder, &data).unwrap();
        drop(second);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_refusal_names_the_holder() {
        let root = std::env::temp_dir().join(format!("project-held-{}", std::process::id()));
        let data = root.join("data");
        fs::create_dir_all(data.join("agent-tools")).unwrap();
        let endpoint = json!({"url": "http://127.0.0.1:4242/call"}).to_string();
        write_private(&data.join("agent-tools/endpoint.json"), &endpoint);
        let file = root.join(LOCK_FILE);
        write_private(&file, &json!({"pid": 1, "data": data}).to_string());
        let why = held_by(Path::new("/p"), &file, Path::new("/other"));
        assert!(why.starts_with("another termsprawl-tools serve ("), "{why}");
        assert!(
            why.contains("is already using the project folder /p;"),
            "{why}"
        );
        for part in [
            "pid 1",
            &format!("data folder {}", data.display()),
            "http://127.0.0.1:4242/call",
        ] {
            assert!(why.contains(part), "{why} lacks {part}");
        }
        // An unreadable description still refuses, naming no one.
        write_private(&file, "not json");
        let why = held_by(Path::new("/p"), &file, Path::new("/other"));
        assert!(
            why.starts_with("another termsprawl-tools serve is already using"),
            "{why}"
        );
        // The same data folder: said as the data folder's own lock says it.
        write_private(&file, &json!({"pid": 1, "data": data}).to_string());
        let why = held_by(Path::new("/p"), &file, &data);
        assert!(
            why.starts_with("Another instance (pid 1) is already using this data directory"),
            "{why}"
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
