//! Pseudo-terminals: opening them, their settings and size, `signalfd`, and a child
//! process on one (Linux).
//!
//! The spawn is a plain
//! `fork` + `execve`: everything the child needs (paths, argv, envp, an empty signal
//! mask) is prepared before `fork`, and between `fork` and `execve` the child makes only
//! async-signal-safe calls (`setsid`, `ioctl`, `dup2`, `fcntl`, `signal`, `sigprocmask`,
//! `chdir`, `execve`, `write`, `_exit`): no allocation, no locks.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::raw::c_char;

use super::check;
use super::fd::{dup_above, pipe};
use super::process::{send_signal, wait_child};

/// A terminal window size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSize {
    /// Columns (at least 1).
    pub cols: u16,
    /// Rows (at least 1).
    pub rows: u16,
}

impl Default for WindowSize {
    /// 120 x 32: wide enough that an agent's commands rarely wrap.
    fn default() -> Self {
        WindowSize {
            cols: 120,
            rows: 32,
        }
    }
}

/// The two ends of a new pseudo-terminal. Both are close-on-exec.
pub struct PtyPair {
    /// The side the host reads and writes (non-blocking).
    pub master: OwnedFd,
    /// The side that becomes the child's stdin, stdout, stderr and controlling terminal.
    pub slave: OwnedFd,
}

/// Opens a PTY pair with the given window size. Both fds get `O_CLOEXEC` atomically at
/// open, so no process spawned by another thread inherits them.
pub fn open_pty(size: WindowSize) -> io::Result<PtyPair> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: the path is a NUL-terminated literal; open has no other preconditions.
    let master_fd = check(unsafe { libc::open(c"/dev/ptmx".as_ptr(), flags) })?;
    // SAFETY: master_fd was just returned by open and is owned by nothing else.
    let master = unsafe { OwnedFd::from_raw_fd(master_fd) };
    // SAFETY: grantpt and unlockpt only take the master fd, which is open.
    check(unsafe { libc::grantpt(master.as_raw_fd()) })?;
    // SAFETY: as above.
    check(unsafe { libc::unlockpt(master.as_raw_fd()) })?;
    let mut name = [0 as c_char; 128];
    // SAFETY: name is a writable buffer of the length passed; ptsname_r NUL-terminates it
    // on success (and fails with ERANGE rather than overflow).
    let failed = unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
    if failed != 0 {
        return Err(io::Error::from_raw_os_error(failed));
    }
    let slave_flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: ptsname_r succeeded, so name holds a NUL-terminated path.
    let slave_fd = check(unsafe { libc::open(name.as_ptr(), slave_flags) })?;
    // SAFETY: slave_fd was just returned by open and is owned by nothing else.
    let slave = unsafe { OwnedFd::from_raw_fd(slave_fd) };
    set_window_size(master.as_fd(), size)?;
    Ok(PtyPair { master, slave })
}

/// Sets the window size of the terminal behind `fd` (the kernel then sends SIGWINCH to
/// its foreground process group).
pub fn set_window_size(fd: BorrowedFd<'_>, size: WindowSize) -> io::Result<()> {
    let winsize = libc::winsize {
        ws_row: size.rows.max(1),
        ws_col: size.cols.max(1),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize through the pointer, which points at a valid,
    // initialised winsize that outlives the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &winsize) })?;
    Ok(())
}

/// The window size of the terminal behind `fd` (`TIOCGWINSZ`).
pub fn window_size(fd: BorrowedFd<'_>) -> io::Result<WindowSize> {
    // SAFETY: an all-zero winsize is a valid value for the ioctl to overwrite.
    let mut winsize: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize through the pointer, which points at a valid
    // winsize that outlives the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut winsize) })?;
    Ok(WindowSize {
        cols: winsize.ws_col.max(1),
        rows: winsize.ws_row.max(1),
    })
}

/// The process group that has the terminal behind `fd` in the foreground
/// (`tcgetpgrp`; on a PTY master it names the slave's foreground group).
pub fn foreground_group(fd: BorrowedFd<'_>) -> io::Result<libc::pid_t> {
    // SAFETY: tcgetpgrp only reads the descriptor, which is open for the call.
    check(unsafe { libc::tcgetpgrp(fd.as_raw_fd()) })
}

/// Puts this process in a process group of its own and makes that group the foreground
/// of its controlling terminal `fd` (`setpgid(0, 0)`, then `tcsetpgrp`, with SIGTTOU
/// ignored for that call only, as a shell taking its terminal does).
pub fn take_foreground(fd: BorrowedFd<'_>) -> io::Result<()> {
    // A session leader (a PTY terminal's first process) leads its group already, and may
    // not call setpgid.
    // SAFETY: getpgrp and getpid take nothing and cannot fail.
    let leads_its_group = unsafe { libc::getpgrp() == libc::getpid() };
    if !leads_its_group {
        // SAFETY: setpgid(0, 0) changes only this process's own group.
        check(unsafe { libc::setpgid(0, 0) })?;
    }
    // SAFETY: SIG_IGN installs no handler; the old disposition is restored below.
    let old = unsafe { libc::signal(libc::SIGTTOU, libc::SIG_IGN) };
    // SAFETY: the descriptor is open for the call; getpgrp cannot fail.
    let taken = check(unsafe { libc::tcsetpgrp(fd.as_raw_fd(), libc::getpgrp()) });
    // SAFETY: restores the disposition signal() returned above.
    unsafe { libc::signal(libc::SIGTTOU, old) };
    taken.map(drop)
}

/// How many bytes wait to be read from `fd` (`FIONREAD`): on a PTY master, output the
/// program wrote that nobody has read yet.
pub fn unread_bytes(fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut count: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which is valid for the call.
    check(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut count) })?;
    Ok(usize::try_from(count).unwrap_or(0))
}

/// The line settings of the terminal behind `fd` (`tcgetattr`); fails when `fd` is not
/// a terminal.
pub fn terminal_settings(fd: BorrowedFd<'_>) -> io::Result<libc::termios> {
    // SAFETY: an all-zero termios is a valid value for tcgetattr to overwrite.
    let mut settings: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: tcgetattr writes one termios through the pointer, valid for the call.
    check(unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut settings) })?;
    Ok(settings)
}

/// Applies `settings` to the terminal behind `fd` at once (`tcsetattr(TCSANOW)`).
pub fn set_terminal_settings(fd: BorrowedFd<'_>, settings: &libc::termios) -> io::Result<()> {
    // SAFETY: tcsetattr reads one termios through the pointer, valid for the call.
    check(unsafe { libc::tcsetattr(fd.as_raw_fd(), libc::TCSANOW, settings) })?;
    Ok(())
}

/// `settings` in raw mode (`cfmakeraw`): bytes pass as they are, no echo, no line
/// editing, no signals from keys.
pub fn raw_settings(settings: &libc::termios) -> libc::termios {
    let mut raw = *settings;
    // SAFETY: cfmakeraw only rewrites the flags of the termios it is pointed at.
    unsafe { libc::cfmakeraw(&mut raw) };
    raw
}

/// Blocks `signals` for the calling thread and returns a descriptor that reads them
/// (`signalfd`, close-on-exec, non-blocking): they are then handled in a `poll` loop, with
/// no handler. [`spawn`]'s children start with nothing blocked.
pub fn signal_reader(signals: &[libc::c_int]) -> io::Result<File> {
    let mut set = signal_set(false);
    for &signal in signals {
        // SAFETY: set is an initialised sigset_t; sigaddset rejects unknown numbers.
        check(unsafe { libc::sigaddset(&mut set, signal) })?;
    }
    // SAFETY: set is initialised; the old mask is not asked for.
    let failed = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if failed != 0 {
        return Err(io::Error::from_raw_os_error(failed));
    }
    let flags = libc::SFD_CLOEXEC | libc::SFD_NONBLOCK;
    // SAFETY: -1 asks for a new descriptor; set is initialised and read during the call.
    let fd = check(unsafe { libc::signalfd(-1, &set, flags) })?;
    // SAFETY: signalfd returned a fresh descriptor that only we own.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Ends this process the way `signal` ended a child of it, so that whoever waits for us
/// sees the same signal: no core file is written, the signal gets its default action and
/// is unblocked, then raised. Returns only if that default action does not end a process
/// (e.g. `SIGCHLD`), or `signal` is not one.
pub fn end_by_signal(signal: libc::c_int) {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let mut set = signal_set(false);
    // SAFETY: setrlimit reads one valid rlimit; signal, sigaddset, pthread_sigmask, raise
    // take a signal number and initialised sets. On failure we return (caller exits).
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(signal, libc::SIG_DFL);
        if libc::sigaddset(&mut set, signal) == 0 {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
        libc::raise(signal);
    }
}

/// The step of the child's setup that failed, as reported back through the exec pipe.
const STEP_TERMINAL: i32 = 1;
const STEP_CWD: i32 = 2;
const STEP_EXEC: i32 = 3;

/// Why a spawn failed.
#[derive(Debug)]
pub enum SpawnFailure {
    /// `fork` or the parent's preparation failed.
    Fork(io::Error),
    /// The child could not make the PTY its controlling terminal and stdio.
    Terminal(io::Error),
    /// The child could not enter the working directory.
    Cwd(io::Error),
    /// `execve` failed.
    Exec(io::Error),
}

/// Starts `program` with `argv` and `envp` in `cwd`, as the leader of a new session whose
/// controlling terminal (and stdin/stdout/stderr) is `slave`. Returns the child's pid once
/// `execve` has succeeded; a failure in the child is reported back through a
/// close-on-exec pipe, and that child is reaped before returning.
pub fn spawn(
    slave: &OwnedFd,
    program: &CStr,
    argv: &[CString],
    envp: &[CString],
    cwd: &CStr,
) -> Result<libc::pid_t, SpawnFailure> {
    // Everything the child touches is built here, before fork.
    let argv_ptrs: Vec<*const c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_ptrs: Vec<*const c_char> = envp
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let (report_read, first_write) = pipe().map_err(SpawnFailure::Fork)?;
    let mut report_read = File::from(report_read);
    // With the host's stdio closed the pipe can land on fd 0–2, where the child's dup2
    // of the slave would overwrite it: keep the write end at 10 or above.
    let report_write = dup_above(first_write.as_fd(), 10).map_err(SpawnFailure::Fork)?;
    drop(first_write);
    let (slave_fd, report_fd) = (slave.as_raw_fd(), report_write.as_raw_fd());
    let all_signals = signal_set(true);
    let no_signals = signal_set(false);
    let mut old_mask = MaybeUninit::<libc::sigset_t>::uninit();
    // Block every signal across fork so no handler of ours ever runs in the child; the
    // child resets dispositions before unblocking.
    let old_mask_ptr = old_mask.as_mut_ptr();
    // SAFETY: both pointers refer to valid sigset_t storage; old_mask is written here.
    let failed = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all_signals, old_mask_ptr) };
    if failed != 0 {
        return Err(SpawnFailure::Fork(io::Error::from_raw_os_error(failed)));
    }
    // In the child (0) we only call child_exec, which makes async-signal-safe calls on
    // data prepared above and never returns; the parent continues normally.
    // SAFETY: fork has no memory preconditions; the child's obligations are met above.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: we are the child of fork; every pointer refers to memory prepared
        // before fork (argv/envp arrays are NULL-terminated, strings NUL-terminated).
        unsafe {
            child_exec(
                slave_fd,
                program.as_ptr(),
                argv_ptrs.as_ptr(),
                envp_ptrs.as_ptr(),
                cwd.as_ptr(),
                &no_signals,
                report_fd,
            )
        }
    }
    let fork_error = io::Error::last_os_error();
    // SAFETY: old_mask was filled by the successful pthread_sigmask above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old_mask.as_ptr(), std::ptr::null_mut()) };
    drop(report_write);
    if pid < 0 {
        return Err(SpawnFailure::Fork(fork_error));
    }
    // EOF means execve succeeded (the pipe is close-on-exec); 8 bytes mean a step failed.
    let mut report = Vec::new();
    match report_read.read_to_end(&mut report) {
        Ok(_) if report.is_empty() => return Ok(pid),
        Ok(_) => {} // the child reported a failed step and is exiting
        // Unknown whether it exec'd: do not leave it running unowned.
        Err(_) => drop(send_signal(pid, libc::SIGKILL)),
    }
    let _ = wait_child(pid, true);
    let (step, errno) = match report.get(..8) {
        Some(bytes) => (
            i32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            i32::from_ne_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        ),
        None => (STEP_EXEC, libc::EIO),
    };
    let error = io::Error::from_raw_os_error(errno);
    Err(match step {
        STEP_TERMINAL => SpawnFailure::Terminal(error),
        STEP_CWD => SpawnFailure::Cwd(error),
        _ => SpawnFailure::Exec(error),
    })
}

fn signal_set(full: bool) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset/sigemptyset initialise the whole set through the pointer.
    unsafe {
        if full {
            libc::sigfillset(set.as_mut_ptr());
        } else {
            libc::sigemptyset(set.as_mut_ptr());
        }
        set.assume_init()
    }
}

/// The child's side of `spawn`: become a session leader with `slave` as controlling
/// terminal and stdio, reset signals, enter `cwd`, exec. On failure it writes
/// (step, errno) to `report` and exits 127.
///
/// # Safety
/// Call only in the child of `fork`, with pointers valid as `execve` requires.
#[deny(unsafe_op_in_unsafe_fn)]
unsafe fn child_exec(
    slave: RawFd,
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    no_signals: &libc::sigset_t,
    report: RawFd,
) -> ! {
    // SAFETY: each call below is async-signal-safe and gets only fds we own in this
    // process, signal numbers, or pointers the caller vouches for.
    unsafe {
        if libc::setsid() < 0 || libc::ioctl(slave, libc::TIOCSCTTY, 0) < 0 {
            child_fail(report, STEP_TERMINAL);
        }
        for target in 0..3 {
            // dup2 onto itself would keep O_CLOEXEC, so clear the flag instead.
            let ok = if slave == target {
                libc::fcntl(target, libc::F_SETFD, 0) >= 0
            } else {
                libc::dup2(slave, target) >= 0
            };
            if !ok {
                child_fail(report, STEP_TERMINAL);
            }
        }
        // Default dispositions for everything (the host ignores SIGPIPE, say), then
        // unblock: the program starts with the signal state a login shell expects.
        // Linux signals are 1..=64; the few that cannot be reset just return EINVAL.
        for signal in 1..=64 {
            libc::signal(signal, libc::SIG_DFL);
        }
        libc::sigprocmask(libc::SIG_SETMASK, no_signals, std::ptr::null_mut());
        if libc::chdir(cwd) < 0 {
            child_fail(report, STEP_CWD);
        }
        libc::execve(program, argv, envp);
        child_fail(report, STEP_EXEC)
    }
}

/// Writes (step, errno) to `report` and exits the child without running any destructor.
fn child_fail(report: RawFd, step: i32) -> ! {
    let errno = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO);
    let mut message = [0u8; 8];
    message[..4].copy_from_slice(&step.to_ne_bytes());
    message[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: write and _exit are async-signal-safe; message is a valid 8-byte buffer
    // (a pipe write of 8 bytes is atomic).
    unsafe {
        libc::write(report, message.as_ptr().cast(), message.len());
        libc::_exit(127)
    }
}
