//! The file checks of `artifact_open`: the path must name a text file inside the project
//! folder after every symlink is resolved.

use std::path::{Path, PathBuf};

/// Extensions of formats an editor or diff view cannot show: archives, documents,
/// executables and libraries, WebAssembly, fonts, audio and video.
pub const BINARY_EXTENSIONS: &[&str] = &[
    "zip", "tar", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "jar", "war", "whl", "dmg", "iso",
    "deb", "rpm", "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "exe", "dll", "so", "dylib",
    "a", "o", "obj", "lib", "bin", "class", "pyc", "node", "wasm", "ttf", "otf", "woff", "woff2",
    "eot", "mp3", "wav", "flac", "ogg", "oga", "m4a", "aac", "opus", "mp4", "m4v", "mov", "avi",
    "mkv", "webm", "wmv", "flv",
];

/// Extensions of raster images: shown in an editor, never in a diff.
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "bmp", "ico", "tif", "tiff", "avif", "heic",
];

/// Checks `path` for `artifact_open` in the project folder `project_dir` and returns the
/// real path the canvas owner should open. `view` is `editor` (default) or `diff`.
pub fn check_artifact_path(project_dir: &Path, path: &str, view: &str) -> Result<PathBuf, String> {
    let requested = Path::new(path);
    if !requested.is_absolute() {
        return Err("Artifact path must be absolute: use the project folder's full path".into());
    }
    let root = project_dir
        .canonicalize()
        .map_err(|_| "Project folder is not readable".to_string())?;
    let real = requested
        .canonicalize()
        .map_err(|_| format!("Artifact not found: {path}"))?;
    if !real.starts_with(&root) {
        return Err(
            "Artifact path must stay inside the project folder (symlinks are resolved)".into(),
        );
    }
    if !real.is_file() {
        return Err(format!("Artifact is not a file: {path}"));
    }
    let extension = real
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if BINARY_EXTENSIONS.contains(&extension.as_str()) {
        return Err(format!(
            "Binary .{extension} files cannot be opened as artifacts; serve the file and open it in a browser preview instead"
        ));
    }
    if view == "diff" && IMAGE_EXTENSIONS.contains(&extension.as_str()) {
        return Err("Images cannot be shown as a diff; open them with view editor".into());
    }
    Ok(real)
}

/// At most this many files a `browser_upload`.
pub const UPLOAD_FILES_MAX: usize = 10;
/// At most this many bytes a file of a `browser_upload`.
pub const UPLOAD_BYTES_MAX: u64 = 20 * 1024 * 1024;

/// Checks the `paths` of a `browser_upload` in the project folder `project_dir`: 1 to
/// [`UPLOAD_FILES_MAX`] absolute paths of regular files inside it (after every symlink is
/// resolved) of at most [`UPLOAD_BYTES_MAX`] bytes. Returns their real paths.
pub fn check_upload_paths(project_dir: &Path, paths: &[&str]) -> Result<Vec<String>, String> {
    if paths.is_empty() || paths.len() > UPLOAD_FILES_MAX {
        return Err(format!(
            "Give 1 to {UPLOAD_FILES_MAX} files to upload, not {}",
            paths.len()
        ));
    }
    let root = project_dir
        .canonicalize()
        .map_err(|_| "Project folder is not readable".to_string())?;
    let mut real_paths = Vec::new();
    for path in paths {
        let requested = Path::new(path);
        if !requested.is_absolute() {
            return Err(format!(
                "Upload path must be absolute: use the project folder's full path, not {path}"
            ));
        }
        let real = requested
            .canonicalize()
            .map_err(|_| format!("File to upload not found: {path}"))?;
        if !real.starts_with(&root) {
            return Err(format!(
                "Files to upload must stay inside the project folder (symlinks are resolved): {path}"
            ));
        }
        let meta = real
            .metadata()
            .map_err(|e| format!("Cannot upload {path}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("Cannot upload {path}: not a regular file"));
        }
        if meta.len() > UPLOAD_BYTES_MAX {
            return Err(format!(
                "Cannot upload {path}: larger than {} MiB",
                UPLOAD_BYTES_MAX >> 20
            ));
        }
        real_paths.push(real.to_string_lossy().into_owned());
    }
    Ok(real_paths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-artifact-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("project/src")).unwrap();
        fs::write(dir.join("project/src/main.rs"), "fn main() {}").unwrap();
        fs::write(dir.join("outside.txt"), "secret").unwrap();
        dir
    }

    #[test]
    fn accepts_files_inside_and_returns_the_real_path() {
        let dir = scratch("inside");
        let project = dir.join("project");
        let file = project.join("src/main.rs");
        let real = check_artifact_path(&project, file.to_str().unwrap(), "editor").unwrap();
        assert_eq!(real, file.canonicalize().unwrap());
        symlink(&file, project.join("link.rs")).unwrap();
        let via_link = project.join("link.rs");
        assert_eq!(
            check_artifact_path(&project, via_link.to_str().unwrap(), "diff").unwrap(),
            real
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_escapes() {
        let dir = scratch("escape");
        let project = dir.join("project");
        symlink(dir.join("outside.txt"), project.join("evil.txt")).unwrap();
        let dotdot = format!("{}/src/../../outside.txt", project.display());
        let link = format!("{}/evil.txt", project.display());
        for path in [dotdot.as_str(), link.as_str()] {
            let error = check_artifact_path(&project, path, "editor").unwrap_err();
            assert!(
                error.contains("inside the project folder"),
                "{path}: {error}"
            );
        }
        let error = check_artifact_path(&project, "src/main.rs", "editor").unwrap_err();
        assert!(error.contains("must be absolute"), "{error}");
        let missing = format!("{}/nope.rs", project.display());
        assert!(check_artifact_path(&project, &missing, "editor")
            .unwrap_err()
            .contains("not found"));
        let folder = format!("{}/src", project.display());
        assert!(check_artifact_path(&project, &folder, "editor")
            .unwrap_err()
            .contains("not a file"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_binaries_and_image_diffs() {
        let dir = scratch("binary");
        let project = dir.join("project");
        for name in ["a.PDF", "b.zip", "c.wasm", "d.woff2", "e.mp4", "f.so"] {
            fs::write(project.join(name), b"\0").unwrap();
            let path = project.join(name);
            let error =
                check_artifact_path(&project, path.to_str().unwrap(), "editor").unwrap_err();
            assert!(error.contains("browser preview"), "{name}: {error}");
        }
        fs::write(project.join("shot.png"), b"\x89PNG").unwrap();
        let png = project.join("shot.png");
        assert!(check_artifact_path(&project, png.to_str().unwrap(), "editor").is_ok());
        let error = check_artifact_path(&project, png.to_str().unwrap(), "diff").unwrap_err();
        assert!(
            error.contains("Images cannot be shown as a diff"),
            "{error}"
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
