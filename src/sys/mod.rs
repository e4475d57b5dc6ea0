//! Every call into libc that Rust cannot check: the crate's only `unsafe` code.
//!
//! The crate root says `#![deny(unsafe_code)]`; this module alone is allowed it. Each
//! function here is a thin, safe wrapper around one system call (or a few that belong
//! together), with a `// SAFETY:` comment on every `unsafe` block saying why the call is
//! sound whatever its safe arguments are. AUDIT.md lists them with their invariants.
//!
//! - [`fd`]: pipes, descriptor duplication, `poll`, `flock`, FIFOs, and the two calls on
//!   raw descriptor numbers the socket search needs (`fstat`, `close`).
//! - [`socket`]: acting on a socket tiny_http owns, by its number, without owning it;
//!   the send and receive queue sizes (`SIOCOUTQ`, `SIOCINQ`); a Unix socket peer's
//!   user (`SO_PEERCRED`).
//! - [`process`]: user and process ids, signals to one process or our own process group,
//!   waiting for children, resource limits, glibc's heap (`malloc_trim`, `mallopt`), and
//!   descriptors a spawned program gets at fixed numbers.
//! - `pty` (host): pseudo-terminals, terminal settings, `signalfd`, and the
//!   `fork` + `execve` of a program on a terminal.
//! - `landlock` (host): the Landlock system calls and `PR_SET_NO_NEW_PRIVS`, with which a
//!   confined program's first step restricts itself before it runs the program.
//! - `signals` (host): `serve`'s SIGINT/SIGTERM handler (a self-pipe). The library
//!   installs no signal handler; only `serve` calls this.

// Without the host, some wrappers (pipes, poll, children) have no caller.
#![cfg_attr(not(feature = "host"), allow(dead_code))]

pub mod fd;
#[cfg(feature = "host")]
pub mod landlock;
pub mod process;
#[cfg(feature = "host")]
pub mod pty;
#[cfg(feature = "host")]
pub mod signals;
pub mod socket;

use std::io;

/// `Ok(result)` unless a libc call returned a negative value (then `errno`).
fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}
