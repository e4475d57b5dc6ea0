//! `server.lock`: one running server per data directory.
//!
//! The lock holds `{pid, instanceId}`. A lock whose PID is alive (`kill(pid, 0)` succeeds
//! or fails with anything but `ESRCH`, e.g. `EPERM` for another user's process) refuses
//! the start; a lock whose PID is gone is stale and removed; a lock that does not parse,
//! or names a non-positive PID, is refused too, because guessing could let two servers
//! share one directory. The new lock is created exclusively (`O_CREAT|O_EXCL`, no
//! symlink followed).
//!
//! The PID alone leaves a race: two starters both find a dead PID, A removes it and
//! writes its own lock, then B (still believing it stale) removes A's fresh lock and
//! writes its own, and both run. So a starter first takes `flock(LOCK_EX|LOCK_NB)` on
//! the `agent-tools` directory itself and holds it for the server's lifetime ([`Held`]);
//! one that gets `EWOULDBLOCK` is refused as "already using this data directory". The
//! directory, unlike `server.lock` (which `close` removes), is never replaced, so the
//! flock always names the same inode. The kernel drops it when the process dies, so it
//! is never stale; the PID check still guards against a holder that does not flock.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{json, Value};

use super::ServerError;
use crate::base::files::read_json;

/// The data directory's flock, held while the server runs; dropping it unlocks.
pub struct Held {
    _dir: File,
}

/// `flock(LOCK_EX|LOCK_NB)` on `dir`: `Ok(None)` if another holder has it.
fn flock_dir(dir: &Path) -> io::Result<Option<Held>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)?;
    Ok(crate::sys::fd::try_lock_exclusive(&file)?.then_some(Held { _dir: file }))
}

/// Takes the lock at `path` (in the data directory it flocks) for this process and
/// `instance_id`.
pub fn acquire(path: &Path, instance_id: &str) -> Result<Held, ServerError> {
    let held = flock_dir(path.parent().unwrap_or(Path::new(".")))
        .map_err(|e| ServerError::io("lock the data directory", e))?
        .ok_or_else(|| {
            let pid = read_json(path).ok().flatten().as_ref().and_then(lock_pid);
            ServerError::DataDirInUse { pid }
        })?;
    let bad = |detail: String| ServerError::BadLock {
        path: path.to_path_buf(),
        detail,
    };
    if let Some(lock) = read_json(path).map_err(|e| bad(e.to_string()))? {
        let pid = lock_pid(&lock).ok_or_else(|| bad("it names no positive pid".into()))?;
        if crate::sys::process::pid_exists(pid) {
            return Err(ServerError::DataDirInUse { pid: Some(pid) });
        }
        fs::remove_file(path).or_else(|e| match e.kind() {
            io::ErrorKind::NotFound => Ok(()),
            _ => Err(ServerError::io("remove the stale server.lock", e)),
        })?;
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            // Another server created it between our read and our create.
            io::ErrorKind::AlreadyExists => ServerError::DataDirInUse { pid: None },
            _ => ServerError::io("create server.lock", e),
        })?;
    let body = json!({ "pid": std::process::id(), "instanceId": instance_id }).to_string();
    file.write_all(body.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| ServerError::io("write server.lock", e))?;
    Ok(held)
}

/// Removes the lock at `path` if it is this process's and `instance_id`'s.
pub fn release(path: &Path, instance_id: &str) {
    if let Ok(Some(lock)) = read_json(path) {
        let ours = lock_pid(&lock) == Some(std::process::id() as i32)
            && lock.get("instanceId").and_then(Value::as_str) == Some(instance_id);
        if ours {
            let _ = fs::remove_file(path);
        }
    }
}

fn lock_pid(lock: &Value) -> Option<i32> {
    let pid = lock.get("pid")?.as_i64()?;
    i32::try_from(pid).ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_pid_is_alive_and_an_exited_child_is_not() {
        assert!(crate::sys::process::pid_exists(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!crate::sys::process::pid_exists(pid));
    }

    #[test]
    fn pids_must_be_positive_integers() {
        assert_eq!(lock_pid(&json!({"pid": 12})), Some(12));
        for bad in [
            json!({"pid": 0}),
            json!({"pid": -3}),
            json!({"pid": "12"}),
            json!({"pid": 1e12}),
            json!({}),
            json!([]),
        ] {
            assert_eq!(lock_pid(&bad), None, "{bad}");
        }
    }
}
