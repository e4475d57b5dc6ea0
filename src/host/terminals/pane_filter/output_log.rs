//! A tmux pane's output history ([`crate::host::terminals::history`]): the pane filter
//! appends what it passes to tmux (the program's output, our marks and answered queries
//! taken out) to files in the pane's log folder, `<tmux dir>/panes/<node>.out/` (in the
//! data folder: private, hidden from confined agents); `serve` reads them.
//!
//! Each file is named `<position>-<lines>-<starts line: 1|0>`: the position of its first
//! byte, the newlines written before it, and whether it starts a line. Once the newest
//! holds [`FILE_BYTES`], the next block starts a new file and all but the two newest are
//! removed: between 1 and 2 MiB (plus one block) is kept. A file that cannot be written
//! (a full disk) ends the log, not the pane: the filter leaves a file named `stopped`, and
//! the pane then has no history to read (reads say so rather than answer old output).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::host::terminals::history::History;

/// A log file's size at which the next block starts a new one.
pub const FILE_BYTES: u64 = 1 << 20;
/// How many files are kept.
const FILES_KEPT: usize = 2;
/// The file whose presence says the log stopped.
const STOPPED: &str = "stopped";

/// Node `node`'s log folder in the panes folder `panes`.
pub fn log_dir(panes: &Path, node: &str) -> PathBuf {
    panes.join(format!("{node}.out"))
}

/// Removes the log folders in `panes` of nodes for which `kept` is false (their pane is
/// gone: ended while `serve` was down, or by `stop-terminals`).
pub fn remove_stale(panes: &Path, kept: &dyn Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(panes) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let node = name.to_str().and_then(|name| name.strip_suffix(".out"));
        if node.is_some_and(|node| !kept(node)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The writing end, in the pane filter.
pub struct OutputLog {
    dir: PathBuf,
    file: Option<File>,
    /// The position after the last byte written, and the newlines so far.
    position: u64,
    lines: u64,
    file_bytes: u64,
    last_byte: Option<u8>,
}

impl OutputLog {
    /// Makes the (private) folder `dir`, empty, with its first file.
    pub fn create(dir: &Path) -> io::Result<OutputLog> {
        crate::base::files::private_dir(dir)?;
        for entry in std::fs::read_dir(dir)?.flatten() {
            std::fs::remove_file(entry.path())?;
        }
        let mut log = OutputLog {
            dir: dir.to_path_buf(),
            file: None,
            position: 0,
            lines: 0,
            file_bytes: 0,
            last_byte: None,
        };
        log.file = Some(log.new_file()?);
        Ok(log)
    }

    fn new_file(&self) -> io::Result<File> {
        let starts_line = self.last_byte.map_or(true, |b| b == b'\n');
        let name = format!("{}-{}-{}", self.position, self.lines, u8::from(starts_line));
        std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(self.dir.join(name))
    }

    /// Appends `bytes`; on a write error the log stops (see the module docs).
    pub fn append(&mut self, bytes: &[u8]) {
        if bytes.is_empty() || self.file.is_none() {
            return;
        }
        if self.file_bytes >= FILE_BYTES {
            self.file = self.new_file().ok();
            if self.file.is_none() {
                return self.stop();
            }
            self.file_bytes = 0;
            for old in files(&self.dir).iter().rev().skip(FILES_KEPT) {
                let _ = std::fs::remove_file(&old.path);
            }
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if file.write_all(bytes).is_err() {
            return self.stop();
        }
        self.position += bytes.len() as u64;
        self.lines += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        self.file_bytes += bytes.len() as u64;
        self.last_byte = bytes.last().copied();
    }
}

impl OutputLog {
    fn stop(&mut self) {
        self.file = None;
        let _ = File::create(self.dir.join(STOPPED));
    }
}

/// One file of a log folder, as its name describes it.
#[derive(Debug, PartialEq, Eq)]
struct LogFile {
    start: u64,
    lines_before: u64,
    starts_line: bool,
    path: PathBuf,
}

/// The log files of `dir`, oldest first (names not ours are ignored).
fn files(dir: &Path) -> Vec<LogFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<LogFile> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let mut parts = name.split('-');
            let file = LogFile {
                start: parts.next()?.parse().ok()?,
                lines_before: parts.next()?.parse().ok()?,
                starts_line: parts.next()? == "1",
                path: entry.path(),
            };
            parts.next().is_none().then_some(file)
        })
        .collect();
    files.sort_by_key(|file| file.start);
    files
}

/// Where the output of log folder `dir` ends; `None` without a log.
pub fn end(dir: &Path) -> Option<u64> {
    let files = files(dir);
    let newest = files.last()?;
    Some(newest.start + std::fs::symlink_metadata(&newest.path).ok()?.len())
}

/// The history kept in `dir` from position `from` on (from the first byte kept when that
/// is later), at most `limit` bytes; `None` without a log. A file the filter removes while
/// this reads is read again from the new list of files.
pub fn history_from(dir: &Path, from: u64, limit: usize) -> Option<History> {
    if dir.join(STOPPED).exists() {
        return None;
    }
    for _ in 0..3 {
        let files = files(dir);
        let (oldest, newest) = (files.first()?, files.last()?);
        let end = newest.start + std::fs::symlink_metadata(&newest.path).ok()?.len();
        let start = from.clamp(oldest.start, end.max(oldest.start));
        let mut history = History {
            start,
            lines_before: oldest.lines_before,
            starts_line: oldest.starts_line,
            bytes: Vec::new(),
            cut: false,
        };
        if read_files(&files, start, limit as u64, &mut history.bytes).is_ok() {
            history.cut = history.end() < end;
            return Some(history);
        }
    }
    None
}

/// Opens a log file to read, only a regular file: `O_NOFOLLOW` refuses a symlink and
/// `O_NONBLOCK` keeps a FIFO planted in the folder from blocking the open (and with it
/// the project's calls).
fn open_log_file(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    match file.metadata()?.is_file() {
        true => Ok(file),
        false => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        )),
    }
}

/// Appends the bytes of `files` from position `from` on to `bytes`, at most `limit`.
fn read_files(files: &[LogFile], from: u64, limit: u64, bytes: &mut Vec<u8>) -> io::Result<()> {
    for (at, file) in files.iter().enumerate() {
        let room = limit.saturating_sub(bytes.len() as u64);
        if room == 0 {
            break;
        }
        // Each file ends where the next starts; the newest where it ends now.
        let next_start = files.get(at + 1).map(|next| next.start);
        if next_start.is_some_and(|next| next <= from) {
            continue;
        }
        let mut opened = open_log_file(&file.path)?;
        opened.seek(SeekFrom::Start(from.saturating_sub(file.start)))?;
        match next_start {
            Some(next) => {
                let want = (next - from.max(file.start)).min(room);
                let read = opened.take(want).read_to_end(bytes)?;
                if (read as u64) < want {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            None => {
                opened.take(room).read_to_end(bytes)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("output-log-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn what_is_appended_reads_back_from_any_position() {
        let dir = folder("back");
        let mut log = OutputLog::create(&dir).unwrap();
        log.append(b"one\r\ntwo\r\n");
        log.append(b"thr");
        assert_eq!(end(&dir), Some(13));
        let all = history_from(&dir, 0, usize::MAX).unwrap();
        assert_eq!(
            (all.start, all.bytes.as_slice()),
            (0, &b"one\r\ntwo\r\nthr"[..])
        );
        let later = history_from(&dir, 5, usize::MAX).unwrap();
        assert_eq!(
            (later.start, later.bytes.as_slice()),
            (5, &b"two\r\nthr"[..])
        );
        let past = history_from(&dir, 99, usize::MAX).unwrap();
        let few = history_from(&dir, 2, 4).unwrap();
        assert_eq!((few.start, few.bytes.as_slice()), (2, &b"e\r\nt"[..]));
        assert_eq!((past.start, past.bytes.len()), (13, 0));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_rotate_and_only_two_are_kept() {
        let dir = folder("rotate");
        let mut log = OutputLog::create(&dir).unwrap();
        let block = format!("{}\n", "x".repeat(1023)); // 1 KiB, one line
        let blocks = 3 * (FILE_BYTES as usize / 1024) + 7;
        for _ in 0..blocks {
            log.append(block.as_bytes());
        }
        let kept = files(&dir);
        assert_eq!(kept.len(), 2, "{kept:?}");
        let total = (blocks * 1024) as u64;
        assert_eq!(end(&dir), Some(total));
        let history = history_from(&dir, 0, usize::MAX).unwrap();
        assert_eq!(history.start, kept[0].start);
        assert_eq!(history.end(), total);
        assert_eq!(history.lines_before, history.start / 1024);
        assert!(history.starts_line);
        // From inside the older file: the bytes of both, in order.
        let from = kept[0].start + 10;
        let part = history_from(&dir, from, usize::MAX).unwrap();
        assert_eq!((part.start, part.end()), (from, total));
        assert_eq!(&part.bytes[..block.len() - 10], &block.as_bytes()[10..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_starting_inside_a_line_says_so() {
        let dir = folder("inside");
        let mut log = OutputLog::create(&dir).unwrap();
        let chunk = vec![b'y'; 64 * 1024];
        for _ in 0..(3 * FILE_BYTES as usize / chunk.len()) {
            log.append(&chunk);
        }
        log.append(b"\n");
        let history = history_from(&dir, 0, usize::MAX).unwrap();
        assert!(!history.starts_line);
        assert_eq!(history.lines_before, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stale_folders_are_removed_and_kept_ones_stay() {
        let panes = folder("stale");
        OutputLog::create(&log_dir(&panes, "gone")).unwrap();
        OutputLog::create(&log_dir(&panes, "kept")).unwrap();
        std::fs::write(panes.join("kept.sock"), b"").unwrap();
        remove_stale(&panes, &|node| node == "kept");
        assert!(!log_dir(&panes, "gone").exists());
        assert!(log_dir(&panes, "kept").exists() && panes.join("kept.sock").exists());
        std::fs::remove_dir_all(&panes).unwrap();
    }

    #[test]
    fn a_fifo_or_a_symlink_in_the_folder_is_not_read() {
        let dir = folder("fifo");
        let mut log = OutputLog::create(&dir).unwrap();
        log.append(b"kept\n");
        // Planted as the newest file: reading it must neither block nor follow it.
        let planted = dir.join("5-1-1");
        assert!(std::process::Command::new("mkfifo")
            .arg(&planted)
            .status()
            .unwrap()
            .success());
        assert_eq!(history_from(&dir, 0, usize::MAX), None);
        std::fs::remove_file(&planted).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &planted).unwrap();
        assert_eq!(history_from(&dir, 0, usize::MAX), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stopped_log_has_no_history() {
        let dir = folder("stopped");
        let mut log = OutputLog::create(&dir).unwrap();
        log.append(b"kept\n");
        log.stop();
        log.append(b"never\n");
        assert_eq!(history_from(&dir, 0, usize::MAX), None);
        assert_eq!(end(&dir), Some(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_folder_no_history() {
        let dir = folder("none");
        assert_eq!(end(&dir), None);
        assert_eq!(history_from(&dir, 0, usize::MAX), None);
    }
}
