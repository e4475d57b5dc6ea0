//! Acting on sockets tiny_http owns, by descriptor number, without owning them; and the
//! user at the other end of a Unix socket (the pane filters' sockets).

use std::mem::ManuallyDrop;
use std::net::TcpStream;
use std::os::fd::{FromRawFd, RawFd};

/// Runs `f` on descriptor `fd` as a socket, without taking ownership of it.
///
/// Every call made through the stream is a plain socket syscall: memory-safe whatever
/// `fd` names. If `fd` was closed and its number reused it may name another socket, so
/// callers re-check its addresses right before acting on it (`sockets::Connection`).
pub fn with_socket<T>(fd: RawFd, f: impl FnOnce(&TcpStream) -> T) -> T {
    // SAFETY: the stream is never dropped (ManuallyDrop), so `fd` is never closed here,
    // and TcpStream holds nothing but the number.
    let stream = ManuallyDrop::new(unsafe { TcpStream::from_raw_fd(fd) });
    f(&stream)
}

/// Bytes written to socket `fd` and not yet acknowledged by the peer (`SIOCOUTQ`);
/// `None` if `fd` is not a socket.
pub fn unacknowledged_bytes(fd: RawFd) -> Option<usize> {
    let mut count: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (Linux's name for TIOCOUTQ on sockets) writes one int through
    // the pointer, which points to a live c_int; any `fd` is memory-safe.
    let done = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut count) };
    (done == 0).then(|| usize::try_from(count).unwrap_or(0))
}

/// Bytes the peer sent that wait unread in socket `fd`'s receive queue (`SIOCINQ`);
/// `None` if `fd` is not open.
pub fn unread_bytes(fd: RawFd) -> Option<usize> {
    let mut count: libc::c_int = 0;
    // SAFETY: SIOCINQ (Linux's name for FIONREAD on sockets) writes one int through the
    // pointer, which points to a live c_int; any `fd` is memory-safe.
    let done = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut count) };
    (done == 0).then(|| usize::try_from(count).unwrap_or(0))
}

/// The TCP state of socket `fd` (Linux's `tcpi_state`: 1 established, 7 closed, 8
/// close-wait: the peer sent its FIN), or `None` if `fd` is not a TCP socket.
pub fn tcp_state(fd: RawFd) -> Option<u8> {
    // `struct tcp_info` starts with `tcpi_state`; the kernel copies at most `len` bytes.
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: the pointer and `len` describe `info`, a live buffer the kernel may fill
    // up to `len` bytes; any `fd` is memory-safe.
    let done = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (done == 0 && len >= 1).then_some(info[0])
}

/// The user id of the process at the other end of the connected Unix socket `fd`, as
/// the kernel recorded it at connect (`SO_PEERCRED`).
pub fn peer_uid(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero ucred is a valid value for getsockopt to overwrite.
    let mut credentials: libc::ucred = unsafe { std::mem::zeroed() };
    let mut length = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `length` bytes (one ucred) through the pointer,
    // which points to a live ucred of that size; the descriptor is open for the call.
    let done = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut credentials as *mut libc::ucred).cast(),
            &mut length,
        )
    };
    match done == 0 && length as usize == std::mem::size_of::<libc::ucred>() {
        true => Ok(credentials.uid),
        false if done != 0 => Err(std::io::Error::last_os_error()),
        false => Err(std::io::Error::other("SO_PEERCRED gave a short answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_unix_socket_peer_is_our_user() {
        use std::os::fd::AsFd;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let me = crate::sys::process::effective_uid();
        assert_eq!(peer_uid(ours.as_fd()).unwrap(), me);
        assert_eq!(peer_uid(theirs.as_fd()).unwrap(), me);
        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(peer_uid(file.as_fd()).is_err(), "not a socket");
    }

    #[test]
    fn queue_sizes_follow_what_was_sent_and_read() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert_eq!(unread_bytes(server.as_raw_fd()), Some(0));
        client.write_all(b"hello").unwrap();
        let mut waited = 0;
        while unread_bytes(server.as_raw_fd()) != Some(5) && waited < 200 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            waited += 1;
        }
        assert_eq!(unread_bytes(server.as_raw_fd()), Some(5));
        let mut buf = [0u8; 5];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(unread_bytes(server.as_raw_fd()), Some(0));
        let peer = with_socket(server.as_raw_fd(), |s| s.peer_addr().unwrap());
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(unacknowledged_bytes(server.as_raw_fd()).is_some());
        assert_eq!(unread_bytes(-1), None);
    }
}
