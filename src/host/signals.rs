//! Shutdown on SIGINT/SIGTERM through a self-pipe.
//!
//! The handler only `write`s one byte to a pipe (async-signal-safe); the main thread
//! blocks reading the other end. Handlers, unlike a blocked signal mask, are reset by
//! `execve`, so terminals and browsers started later see default signal handling.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_signal: libc::c_int) {
    let fd = WRITE_FD.load(Ordering::Relaxed);
    let byte = 1u8;
    // SAFETY: write(2) is async-signal-safe; fd is our pipe's write end (or -1, which
    // makes write fail harmlessly) and the buffer is one valid byte on our stack.
    unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
}

/// A handle that blocks until SIGINT or SIGTERM arrives.
pub struct ShutdownSignal {
    read_end: File,
}

impl ShutdownSignal {
    /// Installs the handlers. Call once, before starting threads that should not see them.
    pub fn install() -> io::Result<ShutdownSignal> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        WRITE_FD.store(fds[1], Ordering::Relaxed);
        for signal in [libc::SIGINT, libc::SIGTERM] {
            install_handler(signal)?;
        }
        // SAFETY: fds[0] is the read end just created by pipe2 and owned by nobody else.
        let read_end = unsafe { File::from_raw_fd(fds[0]) };
        Ok(ShutdownSignal { read_end })
    }

    /// Blocks until a shutdown signal has arrived.
    pub fn wait(mut self) {
        let mut byte = [0u8; 1];
        loop {
            match self.read_end.read(&mut byte) {
                Ok(1) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                _ => return,
            }
        }
    }
}

fn install_handler(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: an all-zero sigaction is a valid starting value (empty mask, no flags).
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: action is fully initialised and on_signal only performs a write(2).
    if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
