//! Landlock (Linux 5.13 and later): the three system calls that restrict this process and
//! every process it starts, and `PR_SET_NO_NEW_PRIVS`, which an unprivileged process must
//! set before it may restrict itself. The rules themselves are made in
//! `host::isolation::landlock`; see the kernel's `Documentation/userspace-api/landlock.rst`
//! for the structures, copied here field by field.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::check;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask the ABI version instead of making a ruleset.
const CREATE_RULESET_VERSION: libc::c_uint = 1;
/// `LANDLOCK_RULE_PATH_BENEATH`.
const RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_ruleset_attr` (its size grew with the ABI: 8 bytes up to ABI 3, 16 with
/// `handled_access_net` from ABI 4, 24 with `scoped` from ABI 6).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed, 12 bytes).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version this kernel offers; an error when Landlock is not built in or
/// not enabled (`lsm=` on the kernel's command line).
pub fn abi_version() -> io::Result<u32> {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the call reads no
    // memory and only returns a number (or -1 and errno).
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(version as u32)
}

/// A new ruleset handling `access_fs` (filesystem rights) and `scoped` (IPC scopes, ABI
/// 6 and later; pass 0 before). Rights it handles are refused unless a rule allows them.
pub fn create_ruleset(access_fs: u64, scoped: u64) -> io::Result<OwnedFd> {
    let attr = RulesetAttr {
        handled_access_fs: access_fs,
        handled_access_net: 0,
        scoped,
    };
    // Older kernels refuse a larger structure whose extra fields are not zero, and accept
    // a shorter one: pass only what is used.
    let size = match scoped {
        0 => std::mem::size_of::<u64>(),
        _ => std::mem::size_of::<RulesetAttr>(),
    };
    // SAFETY: `attr` is a live `landlock_ruleset_attr` of at least `size` bytes, which the
    // kernel only reads during the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0 as libc::c_uint,
        )
    };
    let fd = check(fd as libc::c_int)?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Allows `access` on the file or folder `beneath` (open, e.g. with `O_PATH`) and on
/// everything under it.
pub fn add_path_rule(
    ruleset: BorrowedFd<'_>,
    beneath: BorrowedFd<'_>,
    access: u64,
) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: beneath.as_raw_fd(),
    };
    // SAFETY: `attr` is a live, packed `landlock_path_beneath_attr` the kernel only reads
    // during the call; both descriptors are open for the call's length (borrowed).
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0 as libc::c_uint,
        )
    };
    check(result as libc::c_int).map(drop)
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`: this process and its children can gain no privilege
/// through `execve` (set-user-ID programs such as `sudo` run without theirs).
pub fn no_new_privileges() -> io::Result<()> {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integers and touches no memory of ours.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
}

/// Restricts this thread (call it while the process has only one) and everything it
/// starts from now on to `ruleset`. It cannot be undone.
pub fn restrict_self(ruleset: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the call takes a descriptor, borrowed for its length, and a flag word.
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset.as_raw_fd(),
            0 as libc::c_uint,
        )
    };
    check(result as libc::c_int).map(drop)
}
