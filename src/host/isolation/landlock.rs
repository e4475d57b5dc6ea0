//! Landlock: where bubblewrap cannot confine (no unprivileged user namespaces, or AppArmor
//! refusing them without a profile), a confined program's first step (`pane
//! --take-terminal --landlock PLAN`, single-threaded, before it `exec`s the program)
//! restricts itself with the rules [`rules`] makes of the [`Plan`]; every process it
//! starts inherits them, and nothing inside can lift them.
//!
//! Landlock only allows: a rule grants rights on a folder and everything under it, and
//! nothing can be taken back beneath. So the machine is granted piece by piece around what
//! the plan keeps out: every entry of `/` gets every right, except an entry on the way
//! to a hidden or read-only folder, which is entered and done the same way, and the hidden
//! folder itself, which gets nothing (but what the plan shows again). Folders on the way
//! may be listed but get no other right, so what is kept out holds these limits, said in
//! the guide:
//! - nothing new can be made, renamed or removed directly in a folder on the way (the
//!   project's top folder, the folders above the data folder such as the home folder);
//!   inside their other entries, everything works as before;
//! - an entry made in such a folder after the program started cannot be opened by it;
//! - the names in a hidden folder can be listed (not read);
//! - mounts are refused to a Landlock-restricted process, so an agent's own sandbox
//!   (bubblewrap inside) cannot start; and no new privileges (`sudo` does not work).
//!
//! With ABI 6 (Linux 6.12) and later, signals to processes outside the sandbox (`serve`,
//! the tmux server, other agents) and abstract Unix sockets made outside are refused too;
//! `ptrace` and `/proc/PID/{mem,environ,root,fd}` of outside processes are refused by
//! every ABI. Connecting to a Unix socket by its path is not a right any ABI this build
//! knows handles, so the tmux server's socket stays reachable: tmux terminals under
//! Landlock are not a boundary, and say so ([`super::Status`]).

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::Plan;
use crate::sys::landlock as sys;

/// `LANDLOCK_ACCESS_FS_*`: the rights of ABI 1 (bits 0–12), then REFER (ABI 2), TRUNCATE
/// (ABI 3) and IOCTL_DEV (ABI 5).
mod access {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const ABI_1: u64 = (1 << 13) - 1;
    pub const REFER: u64 = 1 << 13;
    pub const TRUNCATE: u64 = 1 << 14;
    pub const IOCTL_DEV: u64 = 1 << 15;
    /// The rights that apply to a file (not a folder).
    pub const FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /// Reading and running, no writing.
    pub const READ: u64 = EXECUTE | READ_FILE | READ_DIR;
}

/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL` (ABI 6).
const SCOPES: u64 = 0b11;

/// The first ABI that scopes signals and abstract sockets.
pub const SCOPED_ABI: u32 = 6;

/// Every filesystem right ABI `abi` knows.
fn all_rights(abi: u32) -> u64 {
    let mut rights = access::ABI_1;
    if abi >= 2 {
        rights |= access::REFER;
    }
    if abi >= 3 {
        rights |= access::TRUNCATE;
    }
    if abi >= 5 {
        rights |= access::IOCTL_DEV;
    }
    rights
}

/// One rule: `access` on `path` and beneath.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The file or folder.
    pub path: PathBuf,
    /// `LANDLOCK_ACCESS_FS_*` bits.
    pub access: u64,
}

/// The Landlock ABI here, or why there is none.
pub fn abi() -> Result<u32, String> {
    sys::abi_version().map_err(|error| {
        format!("Landlock is not available ({error}): it needs Linux 5.13 or later with landlock in the kernel's lsm= list")
    })
}

/// The rules that grant everything but what `plan` keeps out, for ABI `abi`.
pub fn rules(plan: &Plan, abi: u32) -> Vec<Rule> {
    let all = all_rights(abi);
    // Real paths: the kernel checks the path a file is reached by after links.
    let real = |paths: &[PathBuf]| -> Vec<PathBuf> {
        paths
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect()
    };
    let hidden = real(&plan.hidden);
    let read_only = real(&plan.read_only);
    let mut rules = Vec::new();
    let kept_out: Vec<&PathBuf> = hidden.iter().chain(&read_only).collect();
    grant_around(
        Path::new("/"),
        &hidden,
        &read_only,
        &kept_out,
        all,
        &mut rules,
    );
    for shown in real(&plan.shown) {
        let access = if shown.is_dir() {
            access::READ
        } else {
            access::READ & access::FILE
        };
        rules.push(Rule {
            path: shown,
            access,
        });
    }
    for writable in real(&plan.writable) {
        let access = if writable.is_dir() {
            all
        } else {
            all & access::FILE
        };
        rules.push(Rule {
            path: writable,
            access,
        });
    }
    rules
}

/// Grants `folder` and what is under it, around `kept_out` (the hidden and read-only
/// folders).
fn grant_around(
    folder: &Path,
    hidden: &[PathBuf],
    read_only: &[PathBuf],
    kept_out: &[&PathBuf],
    all: u64,
    rules: &mut Vec<Rule>,
) {
    if hidden.iter().any(|p| p == folder) {
        return;
    }
    if read_only.iter().any(|p| p == folder) {
        rules.push(Rule {
            path: folder.to_path_buf(),
            access: access::READ,
        });
        return;
    }
    let on_the_way = kept_out.iter().any(|p| p.starts_with(folder));
    if !on_the_way {
        let is_dir = std::fs::symlink_metadata(folder).is_ok_and(|m| m.is_dir());
        let access = if is_dir { all } else { all & access::FILE };
        rules.push(Rule {
            path: folder.to_path_buf(),
            access,
        });
        return;
    }
    // On the way: listed only, each entry granted on its own.
    rules.push(Rule {
        path: folder.to_path_buf(),
        access: access::READ_DIR,
    });
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        // A link is not followed: what it leads to is granted (or not) where it is.
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        grant_around(&entry.path(), hidden, read_only, kept_out, all, rules);
    }
}

/// Restricts this process (single-threaded: a confined program's first step) to `rules`,
/// with signals and abstract sockets scoped from ABI 6. A rule whose path cannot be
/// opened any more (removed since) is left out: less is granted, never more.
pub fn restrict(rules: &[Rule], abi: u32) -> io::Result<()> {
    let scopes = if abi >= SCOPED_ABI { SCOPES } else { 0 };
    let ruleset = sys::create_ruleset(all_rights(abi), scopes)?;
    for rule in rules {
        let Ok(beneath) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&rule.path)
        else {
            continue;
        };
        let beneath: File = beneath;
        sys::add_path_rule(ruleset.as_fd(), beneath.as_fd(), rule.access)?;
    }
    sys::no_new_privileges()?;
    // Root keeps the user id but no capability (as bubblewrap's `--cap-drop ALL`): with
    // one, a confined root could still read outside processes' `/proc/PID/environ`.
    crate::sys::process::drop_all_capabilities()?;
    sys::restrict_self(ruleset.as_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_is_granted_around_what_is_kept_out() {
        let dir = std::env::temp_dir().join(format!("ts-landlock-{}", std::process::id()));
        let data = dir.join("data");
        let session = data.join("agent-tools/sessions/a.json");
        std::fs::create_dir_all(session.parent().unwrap()).unwrap();
        std::fs::write(&session, "{}").unwrap();
        std::fs::write(data.join("agent-tools/sessions/b.json"), "{}").unwrap();
        let project = dir.join("project");
        std::fs::create_dir_all(project.join(".termsprawl/links")).unwrap();
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("README"), "x").unwrap();
        std::os::unix::fs::symlink(&data, project.join("data-link")).unwrap();
        let plan = Plan::for_agent(&data, &project, Some(&session), None);
        let dir = std::fs::canonicalize(&dir).unwrap();
        let rules = rules(&plan, 7);
        let of = |path: PathBuf| -> Option<u64> {
            rules.iter().find(|r| r.path == path).map(|r| r.access)
        };
        let all = all_rights(7);
        assert_eq!(of(PathBuf::from("/")), Some(access::READ_DIR));
        assert_eq!(of(dir.clone()), Some(access::READ_DIR));
        assert_eq!(of(dir.join("project")), Some(access::READ_DIR));
        assert_eq!(of(dir.join("project/src")), Some(all));
        assert_eq!(of(dir.join("project/README")), Some(all & access::FILE));
        assert_eq!(of(dir.join("project/.termsprawl")), Some(access::READ));
        assert_eq!(of(dir.join("data")), None);
        assert_eq!(of(dir.join("project/data-link")), None);
        assert_eq!(
            of(dir.join("data/agent-tools/sessions/a.json")),
            Some(access::READ & access::FILE)
        );
        assert!(!rules.iter().any(|r| r.path.ends_with("b.json")));
        // Granted in full somewhere unrelated, e.g. /usr.
        assert_eq!(of(PathBuf::from("/usr")), Some(all));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rights_grow_with_the_abi() {
        assert_eq!(all_rights(1), access::ABI_1);
        assert_eq!(all_rights(3) & access::TRUNCATE, access::TRUNCATE);
        assert_eq!(all_rights(4) & access::IOCTL_DEV, 0);
        assert_eq!(all_rights(7) & access::IOCTL_DEV, access::IOCTL_DEV);
    }
}
