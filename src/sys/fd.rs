//! Descriptors: pipes, duplication, `poll`, `flock`, FIFOs, and the two calls on raw
//! descriptor numbers that the search for tiny_http's sockets needs.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use super::check;

/// A pipe, both ends close-on-exec: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: fds points to two writable ints, as pipe2 requires.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A close-on-exec duplicate of `fd` numbered `min` or above (`F_DUPFD_CLOEXEC`).
pub fn dup_above(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor the borrow keeps open; no memory is passed.
    let new = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) })?;
    // SAFETY: fcntl returned a fresh descriptor that only we own.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// True when `fd` is close-on-exec (`F_GETFD`).
#[cfg(test)]
pub fn is_close_on_exec(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: F_GETFD on a descriptor the borrow keeps open; no memory is passed.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) })?;
    Ok(flags & libc::FD_CLOEXEC != 0)
}

/// `poll(2)` on `fds`; `timeout_ms` < 0 waits forever. Returns how many fds are ready.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    let count = fds.len() as libc::nfds_t;
    // SAFETY: the pointer and length describe the caller's valid, exclusive slice.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), count, timeout_ms) };
    Ok(check(ready)? as usize)
}

/// Takes an exclusive `flock` on `file` without waiting: `Ok(false)` when another open
/// file description holds it. The lock lasts as long as the descriptor.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock only acts on the open descriptor `file` owns; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(error),
    }
}

/// Makes a FIFO at `path` with permissions `mode` (tests use it as a hostile file).
#[cfg(test)]
pub fn mkfifo(path: &std::path::Path, mode: libc::mode_t) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: mkfifo reads the NUL-terminated path, which lives for the call.
    check(unsafe { libc::mkfifo(path.as_ptr(), mode) })?;
    Ok(())
}

/// The inode of the socket descriptor number `fd` names (unique among open sockets), by
/// `fstat`; `None` if `fd` is closed or not a socket. Any number is memory-safe.
pub fn socket_inode(fd: RawFd) -> Option<u64> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one `stat` through the pointer, which points to a live one;
    // any `fd` is memory-safe (a closed one fails with EBADF).
    let done = unsafe { libc::fstat(fd, &mut stat) };
    (done == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFSOCK).then_some(stat.st_ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn dup_above_moves_a_descriptor_up_and_keeps_it_close_on_exec() {
        let (read_end, _write_end) = pipe().unwrap();
        let moved = dup_above(read_end.as_fd(), 10).unwrap();
        assert!(moved.as_raw_fd() >= 10);
        assert!(is_close_on_exec(moved.as_fd()).unwrap());
    }

    #[test]
    fn a_second_exclusive_lock_is_refused_until_the_first_is_dropped() {
        let path = std::env::temp_dir().join(format!("sys-fd-lock-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        let first = File::open(&path).unwrap();
        let second = File::open(&path).unwrap();
        assert!(try_lock_exclusive(&first).unwrap());
        assert!(!try_lock_exclusive(&second).unwrap());
        drop(first);
        assert!(try_lock_exclusive(&second).unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn socket_inode_is_none_for_a_pipe_and_a_closed_number() {
        let (read_end, _write_end) = pipe().unwrap();
        assert_eq!(socket_inode(read_end.as_raw_fd()), None);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(socket_inode(listener.as_raw_fd()).is_some());
        assert_eq!(socket_inode(-1), None);
    }
}
