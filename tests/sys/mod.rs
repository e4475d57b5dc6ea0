#![allow(unsafe_code)]
//! The only place the integration tests call libc unsafely: thin safe wrappers, each
//! `unsafe` block with a `// SAFETY:` comment saying why the call is sound. Every test
//! crate root has `#![deny(unsafe_code)]`; this module alone allows it.
//!
//! A test crate includes it with `mod sys;`. `serve_harness` uses it as `crate::sys`, so
//! a crate that includes the harness includes this module too.

#![allow(dead_code)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `Ok` for a libc return code of 0, else the `errno` it left.
fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes a FIFO at `path` with permission bits `mode` (before the umask).
pub fn mkfifo(path: &Path, mode: libc::mode_t) -> io::Result<()> {
    let path = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `path` is a NUL-terminated string that lives until the call returns;
    // mkfifo only reads it.
    check(unsafe { libc::mkfifo(path.as_ptr(), mode) })
}

/// Sends `signal` to process `pid` (a pid that does not fit `pid_t` is refused rather
/// than wrapped into a negative one, which would name a process group or every process).
pub fn kill(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&pid| pid > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes no pointers and has no memory effects on this process; a
    // stale pid fails with ESRCH.
    check(unsafe { libc::kill(pid, signal) })
}

/// (soft, hard) `RLIMIT_NOFILE` of this process.
pub fn open_files_limit() -> io::Result<(libc::rlim_t, libc::rlim_t)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through the pointer, which points to `limit`,
    // a live local we hold exclusively.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) })?;
    Ok((limit.rlim_cur, limit.rlim_max))
}

fn set_open_files_limit(soft: libc::rlim_t, hard: libc::rlim_t) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads one `rlimit` through the pointer, which points to
    // `limit`, a live local.
    check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })
}

/// Sets this process's soft `RLIMIT_NOFILE` to `soft` (at most the hard limit, which is
/// kept).
pub fn set_open_files_soft_limit(soft: libc::rlim_t) -> io::Result<()> {
    let (_, hard) = open_files_limit()?;
    set_open_files_limit(soft.min(hard), hard)
}

/// Raises this process's soft `RLIMIT_NOFILE` to its hard limit.
pub fn raise_open_files_limit_to_hard() -> io::Result<()> {
    let (_, hard) = open_files_limit()?;
    set_open_files_limit(hard, hard)
}

/// Sets glibc's `M_ARENA_MAX` (most malloc arenas); `false` if malloc refused.
pub fn mallopt_arena_max(arenas: libc::c_int) -> bool {
    // SAFETY: mallopt takes two ints and changes only malloc's own settings.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

/// Hands free heap pages back to the kernel (`malloc_trim(0)`); `true` if any were.
pub fn malloc_trim() -> bool {
    // SAFETY: malloc_trim takes an int and has no preconditions; it only releases free
    // heap pages, never memory in use.
    unsafe { libc::malloc_trim(0) == 1 }
}

fn empty_cpu_set() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain array of integers; all-zero is the valid empty set.
    unsafe { std::mem::zeroed() }
}

const CPU_SET_SIZE: usize = std::mem::size_of::<libc::cpu_set_t>();

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mut set = empty_cpu_set();
    // SAFETY: pid 0 is the calling thread; sched_getaffinity writes at most
    // `CPU_SET_SIZE` bytes into `set`, a live local of exactly that size.
    check(unsafe { libc::sched_getaffinity(0, CPU_SET_SIZE, &mut set) })?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads one bit of `set`; `cpu` is below CPU_SETSIZE, so the
        // bit is inside it.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Limits the calling thread (and the threads and processes it starts from now on) to
/// `cpus`.
pub fn pin_to_cpus(cpus: &[usize]) -> io::Result<()> {
    let mut set = empty_cpu_set();
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond CPU_SETSIZE"),
            ));
        }
        // SAFETY: CPU_SET writes one bit of `set`, a live local; `cpu` is below
        // CPU_SETSIZE (checked above), so the bit is inside it.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; sched_setaffinity reads `CPU_SET_SIZE` bytes
    // from `set`, a live local of exactly that size.
    check(unsafe { libc::sched_setaffinity(0, CPU_SET_SIZE, &set) })
}

/// poll(2) on `fds` for up to `timeout_ms` (-1: no limit); the number of entries with
/// events. Each entry's `revents` is set.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> io::Result<usize> {
    let count = libc::nfds_t::try_from(fds.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many descriptors"))?;
    // SAFETY: the pointer and count describe `fds`, a live, exclusively borrowed slice
    // of initialized pollfd entries; poll reads and writes only those entries.
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), count, timeout_ms) };
    usize::try_from(ready).map_err(|_| io::Error::last_os_error())
}

/// The disposition of `signal` in this process (`sigaction` read only): the handler
/// address, or `libc::SIG_DFL` / `libc::SIG_IGN`, with its flags.
pub fn signal_disposition(signal: libc::c_int) -> io::Result<(libc::sighandler_t, libc::c_int)> {
    // SAFETY: an all-zero sigaction is a valid value for sigaction to overwrite.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `old`, which we own.
    check(unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) })?;
    Ok((old.sa_sigaction, old.sa_flags))
}

/// The calling thread's blocked-signal mask, as the list of blocked signals 1..=64.
pub fn blocked_signals() -> io::Result<Vec<libc::c_int>> {
    // SAFETY: an all-zero sigset_t is a valid value for pthread_sigmask to overwrite.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a null new set only reads the current mask into `set`, which we own.
    let failed = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) };
    if failed != 0 {
        return Err(io::Error::from_raw_os_error(failed));
    }
    // SAFETY: sigismember reads the initialised set; numbers outside it return -1.
    Ok((1..=64)
        .filter(|&signal| unsafe { libc::sigismember(&set, signal) } == 1)
        .collect())
}
