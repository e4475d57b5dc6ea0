//! Finding and starting Chromium with the DevTools pipe on file descriptors 3 and 4, and
//! ending it: the whole process group is killed and the browser process reaped.

use std::env;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;

use crate::sys::fd::{dup_above, pipe};
use crate::sys::process::{effective_uid, pass_descriptors, signal_process_group};

/// Names looked up on PATH when no executable is configured, in this order.
pub const EXECUTABLE_NAMES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// The configured executable if given, else the first of [`EXECUTABLE_NAMES`] on PATH.
pub fn find_executable(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = configured {
        return is_executable_file(path).then(|| path.to_path_buf());
    }
    let path_var = env::var_os("PATH")?;
    EXECUTABLE_NAMES.iter().find_map(|name| {
        env::split_paths(&path_var)
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable_file(candidate))
    })
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A running Chromium, leader of its own process group.
pub struct ChromiumProcess {
    child: Child,
    reaped: bool,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
}

/// How much of Chromium's stderr we keep, for launch error messages.
const STDERR_TAIL_BYTES: usize = 4096;

/// What [`spawn`] hands back: the process and our ends of the two pipes.
pub struct Spawned {
    /// The browser process.
    pub process: ChromiumProcess,
    /// We write commands here; Chromium reads them on its fd 3.
    pub commands: File,
    /// We read replies and events here; Chromium writes them on its fd 4.
    pub replies: File,
}

/// The flags every launch uses (the profile flag is added by [`spawn`]).
pub fn launch_flags(as_root: bool) -> Vec<&'static str> {
    let mut flags = vec![
        "--headless",
        "--remote-debugging-pipe",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-quic",
        "--disable-gpu",
        "--mute-audio",
    ];
    // Chromium refuses to start as root with its sandbox; only then do we drop it.
    if as_root {
        flags.push("--no-sandbox");
    }
    flags
}

/// True when this process runs as root.
pub fn running_as_root() -> bool {
    effective_uid() == 0
}

/// Starts `executable` headless with the DevTools pipe, in a new process group, with
/// `--user-data-dir=<profile>`. Stdin and stdout go to /dev/null; the last few KiB of
/// stderr are kept for error messages.
pub fn spawn(executable: &Path, profile: &Path) -> io::Result<Spawned> {
    // Chromium reads commands from its fd 3 and writes replies to its fd 4.
    let (child_reads, we_write) = pipe()?;
    let (we_read, child_writes) = pipe()?;
    // Keep the child's ends away from 3 and 4 so the dup2 calls below cannot clobber
    // one with the other; both stay close-on-exec in our process.
    let child_reads = dup_above(child_reads.as_fd(), 10)?;
    let child_writes = dup_above(child_writes.as_fd(), 10)?;
    let (read_fd, write_fd) = (child_reads.as_raw_fd(), child_writes.as_raw_fd());

    let mut command = Command::new(executable);
    command
        .args(launch_flags(running_as_root()))
        .arg(format!("--user-data-dir={}", profile.display()))
        // No initial tab: every page is one we create and attach to.
        .arg("--no-startup-window")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    // fds 3 and 4 survive the exec while the originals (and every other descriptor std
    // opened) are closed by it.
    pass_descriptors(&mut command, [(read_fd, 3), (write_fd, 4)]);
    let mut child = command.spawn()?;
    let stderr_tail = Arc::new(Mutex::new(Vec::new()));
    if let Some(stderr) = child.stderr.take() {
        let tail = Arc::clone(&stderr_tail);
        // Ends at EOF, when the last Chromium process holding stderr has exited.
        let drained = thread::Builder::new()
            .name("chromium-stderr".to_string())
            .spawn(move || keep_tail(stderr, &tail));
        if let Err(e) = drained {
            drop(child.kill());
            drop(child.wait());
            return Err(e);
        }
    }
    // Our copies of the child's ends close here, so a dead Chromium means EOF for us.
    drop(child_reads);
    drop(child_writes);
    Ok(Spawned {
        process: ChromiumProcess {
            child,
            reaped: false,
            stderr_tail,
        },
        commands: File::from(we_write),
        replies: File::from(we_read),
    })
}

impl ChromiumProcess {
    /// The browser process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines Chromium wrote to stderr (at most a few hundred characters).
    pub fn stderr_tail(&self) -> String {
        let bytes = self
            .stderr_tail
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let last = lines[lines.len().saturating_sub(3)..].join(" | ");
        let skip = last.chars().count().saturating_sub(600);
        last.chars().skip(skip).collect()
    }

    /// True once the browser process has exited (it is reaped then).
    pub fn exited(&mut self) -> bool {
        if self.reaped {
            return true;
        }
        match self.child.try_wait() {
            Ok(Some(_)) => {
                self.reaped = true;
                true
            }
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Kills the whole process group (browser, zygotes, renderers) and reaps the browser.
    pub fn kill_and_reap(&mut self) {
        if self.reaped {
            // The group may outlive its leader for a moment; kill any stragglers too.
            kill_group(self.pid());
            return;
        }
        kill_group(self.pid());
        // SIGKILL cannot be ignored, so this wait ends as soon as the kernel tears it down.
        drop(self.child.wait());
        self.reaped = true;
    }
}

impl Drop for ChromiumProcess {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

fn keep_tail(mut stderr: impl Read, tail: &Mutex<Vec<u8>>) {
    let mut chunk = [0u8; 4096];
    loop {
        match stderr.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                let Ok(mut kept) = tail.lock() else { return };
                kept.extend_from_slice(&chunk[..n]);
                let excess = kept.len().saturating_sub(STDERR_TAIL_BYTES);
                kept.drain(..excess);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Removes `profile-*` directories under `dir` left by engines that are gone: Chromium
/// keeps a `SingletonLock` symlink to `<host>-<pid>` in a profile it is using.
pub fn remove_stale_profiles(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_profile = entry.file_name().to_string_lossy().starts_with("profile-")
            && entry.file_type().is_ok_and(|t| t.is_dir());
        if is_profile && !profile_in_use(&path) {
            drop(std::fs::remove_dir_all(&path));
        }
    }
}

fn profile_in_use(profile: &Path) -> bool {
    let Ok(target) = std::fs::read_link(profile.join("SingletonLock")) else {
        return false;
    };
    let target = target.to_string_lossy().into_owned();
    target
        .rsplit_once('-')
        .and_then(|(_, pid)| pid.parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // The group we created with process_group(0).
    let _ = signal_process_group(pgid, libc::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_executable_must_exist_and_be_executable() {
        assert_eq!(
            find_executable(Some(Path::new("/nonexistent/chromium"))),
            None
        );
        assert_eq!(find_executable(Some(Path::new("/etc/passwd"))), None);
        assert_eq!(
            find_executable(Some(Path::new("/bin/sh"))),
            Some(PathBuf::from("/bin/sh"))
        );
    }

    #[test]
    fn only_abandoned_profiles_are_removed() {
        let dir = std::env::temp_dir().join(format!("tst-browser-stale-{}", std::process::id()));
        drop(std::fs::remove_dir_all(&dir));
        for name in ["profile-live", "profile-dead", "profile-unlocked", "other"] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        let me = format!("host-{}", std::process::id());
        std::os::unix::fs::symlink(me, dir.join("profile-live/SingletonLock")).unwrap();
        std::os::unix::fs::symlink("host-999999999", dir.join("profile-dead/SingletonLock"))
            .unwrap();
        remove_stale_profiles(&dir);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["other", "profile-live"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let tail = Mutex::new(Vec::new());
        let text: String = (0..2000).map(|i| format!("line {i}\n\n")).collect();
        keep_tail(text.as_bytes(), &tail);
        assert!(tail.lock().unwrap().len() <= STDERR_TAIL_BYTES);
        let process = ChromiumProcess {
            child: Command::new("true").spawn().unwrap(),
            reaped: false,
            stderr_tail: Arc::new(tail),
        };
        assert_eq!(process.stderr_tail(), "line 1997 | line 1998 | line 1999");
    }

    #[test]
    fn no_sandbox_only_as_root() {
        assert!(launch_flags(true).contains(&"--no-sandbox"));
        assert!(!launch_flags(false).contains(&"--no-sandbox"));
        assert!(launch_flags(false).contains(&"--remote-debugging-pipe"));
    }
}
