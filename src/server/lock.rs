//! `server.lock`: one running server per data directory.
//!
//! The lock holds `{pid, instanceId}`. A lock whose PID is alive (`kill(pid, 0)` succeeds
//! or fails with anything but `ESRCH`, e.g. `EPERM` for another user's process) refuses
//! the start; a lock whose PID is gone is stale and removed; a lock that does not parse,
//! or names a non-positive PID, is refused too, because guessing could let two servers
//! share one directory. The new lock is created exclusively (`O_CREAT|O_EXCL`, no
//! symlink followed), so two servers starting at once cannot both win.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{json, Value};

use super::files::read_json;
use super::ServerError;

/// Takes the lock at `path` for this process and `instance_id`.
pub fn acquire(path: &Path, instance_id: &str) -> Result<(), ServerError> {
    match read_json(path) {
        Ok(None) => {}
        Ok(Some(lock)) => {
            let pid = lock_pid(&lock).ok_or_else(|| ServerError::BadLock {
                path: path.to_path_buf(),
                detail: "it names no positive pid".into(),
            })?;
            if pid_alive(pid) {
                return Err(ServerError::DataDirInUse { pid: Some(pid) });
            }
            match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(ServerError::io("remove the stale server.lock", e))
                }
                _ => {}
            }
        }
        Err(e) => {
            return Err(ServerError::BadLock {
                path: path.to_path_buf(),
                detail: e.to_string(),
            })
        }
    }
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        // Another server created it between our read and our create.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(ServerError::DataDirInUse { pid: None })
        }
        Err(e) => return Err(ServerError::io("create server.lock", e)),
    };
    let body = json!({ "pid": std::process::id(), "instanceId": instance_id }).to_string();
    file.write_all(body.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| ServerError::io("write server.lock", e))
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

/// True unless `kill(pid, 0)` says no such process.
fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 delivers nothing; kill only checks that `pid` exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_pid_is_alive_and_an_exited_child_is_not() {
        assert!(pid_alive(std::process::id() as i32));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!pid_alive(pid));
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
