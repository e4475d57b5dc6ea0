//! `serve`'s shutdown on SIGINT/SIGTERM through a self-pipe (the library installs no
//! signal handler; only `serve` calls [`ShutdownSignal::install`]).
//!
//! The handler only `write`s one byte to a pipe (async-signal-safe); the main thread
//! blocks reading the other end. Handlers, unlike a blocked signal mask, are reset by
//! `execve`, so terminals and browsers started later see default signal handling.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicI32, Ordering};

use super::fd::pipe;

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
        let (read_end, write_end) = pipe()?;
        // The write end stays open for the life of the process: the handler may run
        // at any time, and a closed (or reused) number would be worse than none.
        WRITE_FD.store(write_end.into_raw_fd(), Ordering::Relaxed);
        for signal in [libc::SIGINT, libc::SIGTERM] {
            install_handler(signal)?;
        }
        Ok(ShutdownSignal {
            read_end: File::from(read_end),
        })
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
