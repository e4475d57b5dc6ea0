//! The files of `browser_upload`, copied where Chromium reads them.
//!
//! The runtime has checked each path (inside the project folder, a regular file, not too
//! big), but an agent with a shell can swap a checked file for a symlink to a secret
//! before Chromium reads it. So the page never gets the agent's path: each file is
//! opened here without following a last symlink and without waiting on a FIFO, the open
//! file's real path (`/proc/self/fd`) is checked to be inside the project folder, and
//! what was opened is copied into the running browser profile (`uploads/<page>/<n>`, a
//! folder per upload, private to this user, removed with the page or the profile: the
//! page reads a file only when it sends it, so earlier uploads' copies stay). The page
//! gets the copies, under the files' own names.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::EngineError;
use crate::runtime::{UPLOAD_BYTES_MAX, UPLOAD_FILES_MAX};

/// The folder of `page`'s uploads in the browser `profile`.
pub fn folder(profile: &Path, page: &super::PageId) -> PathBuf {
    profile.join("uploads").join(page.as_str())
}

/// Copies `paths` (real paths inside `project_root`) into `stage` (made anew, 0700) and
/// returns the copies' paths, in order.
pub fn stage(
    project_root: &Path,
    paths: &[String],
    stage: &Path,
) -> Result<Vec<PathBuf>, EngineError> {
    if paths.is_empty() || paths.len() > UPLOAD_FILES_MAX {
        return Err(EngineError::Page(format!(
            "Give 1 to {UPLOAD_FILES_MAX} files to upload, not {}",
            paths.len()
        )));
    }
    let root = project_root
        .canonicalize()
        .map_err(|_| EngineError::Page("Project folder is not readable".into()))?;
    let _ = fs::remove_dir_all(stage);
    let made = stage
        .parent()
        .map_or(Ok(()), crate::base::files::private_dir);
    let made = made.and_then(|()| crate::base::files::private_dir(stage));
    made.map_err(|e| EngineError::Page(format!("cannot make a folder for the upload: {e}")))?;
    let mut staged = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let (file, name) = open_inside(&root, Path::new(path))?;
        let folder = stage.join(index.to_string());
        let copy = crate::base::files::private_dir(&folder)
            .and_then(|()| copy_into(file, &folder.join(&name)));
        copy.map_err(|e| EngineError::Page(format!("cannot copy {path} for the upload: {e}")))?;
        staged.push(folder.join(name));
    }
    Ok(staged)
}

/// Opens `path` for reading, as it is now, and checks what was opened: a regular file
/// inside `root` of at most [`UPLOAD_BYTES_MAX`] bytes. Returns it with its file name.
fn open_inside(root: &Path, path: &Path) -> Result<(File, std::ffi::OsString), EngineError> {
    let refused = |why: &str| EngineError::Page(format!("Cannot upload {}: {why}", path.display()));
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| refused(&e.to_string()))?;
    let opened = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|e| refused(&format!("cannot see what was opened: {e}")))?;
    if !opened.starts_with(root) {
        return Err(refused(
            "files must stay inside the project folder (symlinks are resolved)",
        ));
    }
    let meta = file.metadata().map_err(|e| refused(&e.to_string()))?;
    if !meta.is_file() {
        return Err(refused("not a regular file"));
    }
    if meta.len() > UPLOAD_BYTES_MAX {
        return Err(refused(&format!(
            "larger than {} MiB",
            UPLOAD_BYTES_MAX >> 20
        )));
    }
    let name = opened.file_name().map(ToOwned::to_owned);
    Ok((file, name.ok_or_else(|| refused("no file name"))?))
}

/// Copies at most [`UPLOAD_BYTES_MAX`] bytes of `from` into a new private file `to`.
fn copy_into(from: File, to: &Path) -> io::Result<()> {
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)?;
    let copied = io::copy(&mut from.take(UPLOAD_BYTES_MAX + 1), &mut out)?;
    if copied > UPLOAD_BYTES_MAX {
        return Err(io::Error::other(
            "the file grew past the limit while it was copied",
        ));
    }
    out.set_permissions(fs::Permissions::from_mode(0o600))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-upload-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("project/src")).unwrap();
        fs::write(dir.join("project/src/a.txt"), "hello").unwrap();
        fs::write(dir.join("secret.txt"), "secret").unwrap();
        dir
    }

    #[test]
    fn copies_project_files_and_refuses_what_leaves_it() {
        let dir = scratch("copies");
        let project = dir.join("project");
        let file = project.join("src/a.txt").to_string_lossy().into_owned();
        let staged = stage(&project, &[file], &dir.join("stage")).unwrap();
        assert_eq!(staged[0].file_name().unwrap(), "a.txt");
        assert_eq!(fs::read_to_string(&staged[0]).unwrap(), "hello");
        // A checked file swapped for a symlink afterwards is not followed.
        symlink(dir.join("secret.txt"), project.join("swapped.txt")).unwrap();
        let swapped = project.join("swapped.txt").to_string_lossy().into_owned();
        let error = stage(&project, &[swapped], &dir.join("stage")).unwrap_err();
        assert!(error.to_string().starts_with("Cannot upload"), "{error}");
        // A folder on the way that is a symlink out of the project is seen through.
        symlink(&dir, project.join("out")).unwrap();
        let through = project
            .join("out/secret.txt")
            .to_string_lossy()
            .into_owned();
        let error = stage(&project, &[through], &dir.join("stage")).unwrap_err();
        assert!(
            error.to_string().contains("inside the project folder"),
            "{error}"
        );
        let folder = project.join("src").to_string_lossy().into_owned();
        assert!(stage(&project, &[folder], &dir.join("stage")).is_err());
        let too_many = vec![project.join("src/a.txt").to_string_lossy().into_owned(); 11];
        assert!(stage(&project, &too_many, &dir.join("stage")).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
