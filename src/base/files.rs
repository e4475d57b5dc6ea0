//! Private state on disk: directories 0700, files 0600, every write atomic.
//!
//! `private_json` writes a temp file created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`,
//! so a symlink or file planted at the temp name is never followed or reused), fsyncs
//! it, renames it over the target and fsyncs the directory. A crash at any instant
//! leaves the old file or the new one, never a torn one. `regenerated_write` does the same
//! without the fsyncs, for files each start writes again, with the owner-only mode given
//! (0700 for the launcher, which must be executable).
//!
//! The spec's "chmods both the temp result and final file to 0600" holds in effect: the
//! temp file is created 0600 and `fchmod`ed 0600 (or the mode given) through its open
//! descriptor (so the umask cannot loosen it), and `rename` keeps the inode, so the final
//! file is that same inode. A second chmod by path after the rename is deliberately not done: it
//! would follow a symlink swapped in at the target name meanwhile.

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

/// Creates `dir` (and missing parents) with mode 0700 and tightens it to 0700 if it
/// already existed with a looser mode.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        fs::set_permissions(dir, Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Checks that `dir` is a private folder of this user, as [`private_dir`] makes it: a
/// directory (not a symlink to one) owned by the effective user, with no group or other
/// permission bits. Whatever is in a folder another user owns, or could once write to,
/// may be theirs, so nothing in it is taken as this user's state. `NotFound` when `dir`
/// does not exist; else the error says what is wrong and how to fix it.
pub fn check_private_dir(dir: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    let (me, shown) = (crate::sys::process::effective_uid(), dir.display());
    let problem = if !meta.is_dir() {
        format!("{shown} is not a folder (a symlink or a file); remove it")
    } else if meta.uid() != me {
        format!(
            "{shown} belongs to uid {}, not to you (uid {me}), so what it holds may be theirs; remove it (rm -r {shown}), or take it if you trust what it holds (chown -R {me} {shown} && chmod 700 {shown})",
            meta.uid()
        )
    } else if meta.mode() & 0o077 != 0 {
        format!(
            "{shown} is not private (mode {:o}), so others may have put files in it; make it yours alone: chmod 700 {shown}",
            meta.mode() & 0o777
        )
    } else {
        return Ok(());
    };
    Err(io::Error::new(io::ErrorKind::PermissionDenied, problem))
}

/// Atomically replaces `path` with `value` as pretty JSON, mode 0600.
pub fn private_json(path: &Path, value: &Value) -> io::Result<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    text.push(b'\n');
    private_write(path, &text)
}

/// Atomically replaces `path` with `bytes`, mode 0600 (see the module docs).
pub fn private_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true, 0o600)
}

/// [`private_write`] without its two fsyncs, for a file each start writes again from what
/// the program holds (an agent's guides, the launcher): still atomic, with permission
/// bits `mode` (owner-only: 0600, or 0700 for the launcher) set before the rename, but a
/// crash can lose the new contents, which the next start then writes again. (An fsync
/// costs about half a millisecond here: those of the guides were most of `serve`'s start.)
pub fn regenerated_write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    replace(path, bytes, false, mode)
}

fn replace(path: &Path, bytes: &[u8], sync: bool, mode: u32) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temp = temp_name(path);
    let result = write_new_file(&temp, bytes, sync, mode).and_then(|()| {
        fs::rename(&temp, path)?;
        match sync {
            true => File::open(dir)?.sync_all(),
            false => Ok(()),
        }
    });
    match &result {
        // Someone else's file sits at the temp name: not ours to remove.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        // Best effort: a temp file we created must not linger.
        Err(_) => drop(fs::remove_file(&temp)),
        Ok(()) => {}
    }
    result
}

fn write_new_file(temp: &Path, bytes: &[u8], sync: bool, mode: u32) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true) // O_CREAT | O_EXCL
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(temp)?;
    file.write_all(bytes)?;
    file.set_permissions(Permissions::from_mode(mode))?;
    match sync {
        true => file.sync_all(),
        false => Ok(()),
    }
}

/// `<dir>/.<name>.<pid>.<counter>.tmp`: unique within this process, and never the name
/// of another live writer's temp file.
fn temp_name(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Whether `path` already is a regular file (not a symlink) with exactly permission bits
/// `mode`, one link, and exactly `bytes` as its content: then rewriting it changes nothing.
pub fn holds_private_file(path: &Path, bytes: &[u8], mode: u32) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    let same_shape = meta.file_type().is_file()
        && meta.permissions().mode() & 0o7777 == mode
        && meta.nlink() == 1
        && meta.len() == bytes.len() as u64;
    same_shape && fs::read(path).is_ok_and(|content| content == bytes)
}

/// Reads and parses a JSON file; `Ok(None)` when it does not exist.
pub fn read_json(path: &Path) -> io::Result<Option<Value>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads a JSON file only if it is private state of this user: a regular file (never
/// through a symlink, never a FIFO), owned by the effective user, with no group or other
/// permission bits. A session file planted while the directory was still loose (a
/// `0777` directory from before, a symlink to a file the planter controls) must not make
/// the server reuse a token someone else knows. `Ok(None)` when it does not exist.
pub fn read_private_json(path: &Path) -> io::Result<Option<Value>> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let me = crate::sys::process::effective_uid();
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private file of this user; not trusted",
                path.display()
            ),
        ));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-files-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn only_a_private_folder_of_this_user_passes_the_check() {
        let dir = scratch("check");
        assert_eq!(
            check_private_dir(&dir).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        private_dir(&dir).unwrap();
        check_private_dir(&dir).unwrap();
        for mode in [0o755, 0o777, 0o750, 0o701, 0o710, 0o704] {
            fs::set_permissions(&dir, Permissions::from_mode(mode)).unwrap();
            let refused = check_private_dir(&dir).unwrap_err().to_string();
            assert!(refused.contains(&format!("mode {mode:o}")), "{refused}");
            assert!(refused.contains("chmod 700"), "{refused}");
        }
        fs::set_permissions(&dir, Permissions::from_mode(0o700)).unwrap();
        if crate::sys::process::effective_uid() == 0 {
            // Root can hand the folder to `nobody`: private, but not ours.
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            let refused = check_private_dir(&dir).unwrap_err().to_string();
            assert!(refused.contains("belongs to uid 65534"), "{refused}");
            std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
        }
        let link = dir.with_extension("symlink");
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let refused = check_private_dir(&link).unwrap_err().to_string();
        assert!(refused.contains("not a folder"), "{refused}");
        fs::remove_file(&link).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_private_files_in_private_dirs() {
        let dir = scratch("modes");
        private_dir(&dir.join("a/b")).unwrap();
        assert_eq!(
            fs::metadata(dir.join("a/b")).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let file = dir.join("a/b/x.json");
        private_json(&file, &json!({"k": 1})).unwrap();
        private_json(&file, &json!({"k": 2})).unwrap();
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(read_json(&file).unwrap(), Some(json!({"k": 2})));
        assert_eq!(
            fs::read_dir(dir.join("a/b")).unwrap().count(),
            1,
            "no temp file left"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_loose_target_is_replaced_by_a_0600_file() {
        // The final mode comes from the temp file's inode alone (module docs).
        let dir = scratch("loose-target");
        private_dir(&dir).unwrap();
        let file = dir.join("x.json");
        fs::write(&file, b"{}").unwrap();
        fs::set_permissions(&file, Permissions::from_mode(0o666)).unwrap();
        private_json(&file, &json!({"k": 3})).unwrap();
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn tightens_a_loose_directory() {
        let dir = scratch("loose");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, Permissions::from_mode(0o777)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_file_reads_as_none_and_junk_as_error() {
        let dir = scratch("read");
        private_dir(&dir).unwrap();
        assert_eq!(read_json(&dir.join("nope.json")).unwrap(), None);
        fs::write(dir.join("bad.json"), b"{").unwrap();
        assert_eq!(
            read_json(&dir.join("bad.json")).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
