//! Processes: ids, signals, children, resource limits, glibc's heap, and descriptors a
//! spawned program gets at fixed numbers.

use std::io;

use super::check;

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Gives up every capability, for good: the bounding set (what a program `exec`ed later,
/// root's included, could get back), the ambient set, then the effective, permitted and
/// inheritable sets. A process without `CAP_SETPCAP` (every unprivileged one) cannot
/// shrink its bounding set, and has no capability to give up: that part is skipped.
pub fn drop_all_capabilities() -> io::Result<()> {
    for capability in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes plain integers and touches no memory of ours.
        let dropped = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
        if dropped < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // Past the kernel's last capability.
                Some(libc::EINVAL) => break,
                Some(libc::EPERM) => break,
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }
    // SAFETY: as above.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })?;
    // `struct __user_cap_header_struct` and two `__user_cap_data_struct`s (version 3).
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let none = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset reads the header and the two data structures, live for the call, and
    // (on a version mismatch) writes the header's version, which it may.
    let set = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, none.as_ptr()) };
    check(set as libc::c_int).map(drop)
}

/// True unless `kill(pid, 0)` says there is no such process (`pid` > 0 only; any other
/// number is "no").
pub fn pid_exists(pid: libc::pid_t) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 delivers nothing; kill only checks that `pid` exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Sends `signal` to process `pid` (`pid` > 0 only: never a group, never "everyone").
pub fn send_signal(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill has no memory preconditions; pid > 0 names exactly one process.
    check(unsafe { libc::kill(pid, signal) })?;
    Ok(())
}

/// Sends `signal` to process group `pgid`, which must be above 1 (never our own group
/// by accident, never init's, never "everyone").
pub fn signal_process_group(pgid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill with a negative pid signals that process group; no memory is passed.
    check(unsafe { libc::kill(-pgid, signal) })?;
    Ok(())
}

/// Reaps child `pid` if it has exited: `Ok(Some(raw wait status))`, `Ok(None)` while it
/// runs. With `block`, waits for it to exit.
/// `pid` must be > 0: waitpid(0 or -1) would reap some other child of this process.
pub fn wait_child(pid: libc::pid_t, block: bool) -> io::Result<Option<libc::c_int>> {
    if pid <= 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let flags = if block { 0 } else { libc::WNOHANG };
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: status is a valid int for waitpid to write; pid > 0 names one child.
        let result = unsafe { libc::waitpid(pid, &mut status, flags) };
        match result {
            0 => return Ok(None),
            r if r == pid => return Ok(Some(status)),
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
}

/// Blocks until child `pid` has exited, without reaping it: the pid stays ours (a zombie)
/// until a later `waitpid`, so signalling it in between can never reach another process.
/// `pid` must be > 0.
pub fn wait_exited_unreaped(pid: libc::pid_t) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value for waitid to overwrite.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOWAIT;
        // SAFETY: info is a valid siginfo_t to write; P_PID with pid > 0 names one child.
        let result = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if result == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// This process's open-files limit: (soft, hard).
pub fn open_files_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes one rlimit into `limit`, which we own.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) })?;
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Raises this process's soft open-files limit to its hard limit.
pub fn raise_open_files_limit() -> io::Result<()> {
    let (soft, hard) = open_files_limit()?;
    if soft < hard {
        let limit = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        // SAFETY: setrlimit only reads `limit`, which we own.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    }
    Ok(())
}

/// Hands the free pages of glibc's heap back to the OS (`malloc_trim(0)`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_heap() {
    // SAFETY: malloc_trim takes a size and only returns free pages of malloc's own heap.
    unsafe { libc::malloc_trim(0) };
}

/// Other C libraries keep their own policy.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_heap() {}

/// Caps glibc's malloc arenas at `arenas` (`mallopt(M_ARENA_MAX)`); false when glibc
/// refused. Call it before any thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn limit_malloc_arenas(arenas: libc::c_int) -> bool {
    // SAFETY: mallopt takes two ints and changes only malloc's own settings.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) != 0 }
}

/// Other C libraries keep their own allocator settings.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn limit_malloc_arenas(_arenas: libc::c_int) -> bool {
    false
}

/// Makes the program `command` starts find descriptor `from` at number `to`, for each
/// pair (`dup2` in the child between `fork` and `exec`; the copies are not
/// close-on-exec, the originals stay so). Every `from` must stay open until the spawn
/// and no `from` may equal another pair's `to` (keep them above the targets).
#[cfg(feature = "host")]
pub fn pass_descriptors(command: &mut std::process::Command, pairs: [(i32, i32); 2]) {
    use std::os::unix::process::CommandExt;
    // The closure captures two pairs of ints and touches no memory shared with others.
    // SAFETY: it runs in the forked child before exec and calls only dup2 (signal-safe).
    unsafe {
        command.pre_exec(move || {
            for (from, to) in pairs {
                if libc::dup2(from, to) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_signal_refuses_groups_and_everyone() {
        assert!(send_signal(0, 0).is_err());
        assert!(send_signal(-1, 0).is_err());
        assert!(send_signal(std::process::id() as libc::pid_t, 0).is_ok());
    }

    #[test]
    fn signal_process_group_refuses_init_everyone_and_ours_by_zero() {
        for pgid in [-5, 0, 1] {
            let error = signal_process_group(pgid, 0).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{pgid}");
        }
    }

    #[test]
    fn wait_child_refuses_any_child_and_groups() {
        // Without the guard, these would reap whichever child of the test binary exits.
        for pid in [0, -1, -2] {
            let error = wait_child(pid, false).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{pid}");
        }
    }

    #[test]
    fn pid_exists_knows_this_process_and_refuses_groups() {
        assert!(pid_exists(std::process::id() as libc::pid_t));
        assert!(!pid_exists(0) && !pid_exists(-1));
    }
}
