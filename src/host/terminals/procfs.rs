//! Processes as `/proc` describes them: the PTY terminals use it to find what still
//! runs in a terminal's session.

/// One process as `/proc/<pid>/stat` describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// The process id.
    pub pid: libc::pid_t,
    /// State letter: `R`, `S`, `D`, `T`, `Z` (zombie), `X` (dead), ...
    pub state: char,
    /// Parent process id.
    pub ppid: libc::pid_t,
    /// Process group id.
    pub pgrp: libc::pid_t,
    /// Session id.
    pub session: libc::pid_t,
    /// The foreground process group of its controlling terminal (-1: it has none).
    pub tpgid: libc::pid_t,
}

impl ProcStat {
    /// Whether the process still runs (it is neither a zombie nor dead).
    pub fn running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted after the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let (head, tail) = text.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    let mut fields = tail.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    let _tty_nr = fields.next()?;
    let tpgid = fields.next()?.parse().ok()?;
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
        session,
        tpgid,
    })
}

/// Reads `/proc/<pid>/stat`; `None` when there is no such process.
pub fn proc_stat(pid: libc::pid_t) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The running (non-zombie) processes of session `session`, from `/proc`.
pub fn session_members(session: libc::pid_t) -> Vec<libc::pid_t> {
    all_processes()
        .filter(|stat| stat.session == session && stat.running())
        .map(|stat| stat.pid)
        .collect()
}

/// The running processes of process group `group` among `root`'s descendants (a job of
/// the shell `root`): found by walking `/proc/<pid>/task/<pid>/children` down from it,
/// at most [`DESCENDANTS_MAX`] processes, so asking costs a few reads, not a scan of
/// every process. A kernel without that file: every process is looked at.
pub fn group_members(root: libc::pid_t, group: libc::pid_t) -> Vec<libc::pid_t> {
    let children = |pid: libc::pid_t| {
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).map(|text| {
            let pids = text.split_whitespace().filter_map(|p| p.parse().ok());
            pids.collect::<Vec<libc::pid_t>>()
        })
    };
    let Ok(mut pending) = children(root) else {
        return all_processes()
            .filter(|stat| stat.pgrp == group && stat.running())
            .map(|stat| stat.pid)
            .collect();
    };
    let (mut members, mut seen) = (Vec::new(), 0);
    while let Some(pid) = pending.pop().filter(|_| seen < DESCENDANTS_MAX) {
        seen += 1;
        if proc_stat(pid).is_some_and(|stat| stat.pgrp == group && stat.running()) {
            members.push(pid);
        }
        pending.extend(children(pid).unwrap_or_default());
    }
    members
}

/// The most descendants [`group_members`] looks at.
pub const DESCENDANTS_MAX: usize = 256;

fn all_processes() -> impl Iterator<Item = ProcStat> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries
        .filter_map(|entry| entry.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(proc_stat)
}

/// The running children of process `parent` that lead a session of their own (what a
/// program that runs another on a terminal of its own, such as the pane filter, starts).
/// From the kernel's lists of the children of each of `parent`'s threads, else all of
/// `/proc` (a kernel without those lists).
pub fn session_leading_children(parent: libc::pid_t) -> Vec<libc::pid_t> {
    let pids = |text: &str| -> Vec<libc::pid_t> {
        text.split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let lists: Vec<String> = std::fs::read_dir(format!("/proc/{parent}/task"))
        .map(|tasks| {
            let paths = tasks.flatten().map(|task| task.path().join("children"));
            paths
                .filter_map(|path| std::fs::read_to_string(path).ok())
                .collect()
        })
        .unwrap_or_default();
    let candidates: Vec<libc::pid_t> = match lists.is_empty() {
        false => lists.iter().flat_map(|list| pids(list)).collect(),
        true => std::fs::read_dir("/proc")
            .map(|entries| {
                let names = entries.flatten().map(|entry| entry.file_name());
                names
                    .filter_map(|name| name.to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default(),
    };
    candidates
        .into_iter()
        .filter_map(proc_stat)
        .filter(|stat| stat.ppid == parent && stat.session == stat.pid && stat.running())
        .map(|stat| stat.pid)
        .collect()
}

/// How many `read` calls the main thread of process `pid` has made itself (`syscr` in
/// `/proc/<pid>/task/<pid>/io`): whether a shell has read since a moment. The process's
/// own `/proc/<pid>/io` would not do: it adds the reads of every child it reaped.
pub fn read_calls(pid: libc::pid_t) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/io")).ok()?;
    let line = text.lines().find_map(|line| line.strip_prefix("syscr:"))?;
    line.trim().parse().ok()
}

/// The program process `pid` runs now (`/proc/<pid>/exe`); it changes when it `exec`s.
pub fn executable(pid: libc::pid_t) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// Waits, at most `timeout`, until process `pid`, started as this executable (a confined
/// program's first step under Landlock, which `exec`s the program in place), runs
/// another program or has ended: what is read of it afterwards is the program's.
pub fn wait_until_exec(pid: libc::pid_t, timeout: std::time::Duration) {
    let this = std::env::current_exe().ok();
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        let running = proc_stat(pid).is_some_and(|stat| stat.running());
        if !running || executable(pid) != this {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Whether process `pid` is blocked waiting to read the terminal `tty` (a path such as
/// `/dev/pts/3`), as the kernel shows it in `/proc/<pid>/syscall`: a `read` of a
/// descriptor that is `tty`, or a `select`/`pselect6` over its standard streams only
/// (at most 3 descriptors) whose stdin is `tty` (readline and bash's prompt wait so).
/// A program that waits with `poll` or `epoll` is not recognised: it reads as running.
pub fn reading_terminal(pid: libc::pid_t, tty: &std::path::Path) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let Some(call) = parse_syscall(&text) else {
        return false;
    };
    let is_tty =
        |fd: u64| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|p| p == tty);
    match call.kind() {
        SyscallKind::Read => is_tty(call.args[0]),
        SyscallKind::Select => (1..=3).contains(&call.args[0]) && is_tty(0),
        SyscallKind::Other => false,
    }
}

/// A blocked system call as `/proc/<pid>/syscall` shows it: its number and arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockedCall {
    /// The system call number (this architecture's).
    pub number: i64,
    /// Its first three arguments.
    pub args: [u64; 3],
}

/// What a blocked call means for reading the terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallKind {
    /// `read`, `readv`, `pread64`: the first argument is the descriptor.
    Read,
    /// `select`, `pselect6`: the first argument is the number of descriptors.
    Select,
    /// Anything else.
    Other,
}

impl BlockedCall {
    /// Which kind of call this is.
    pub fn kind(&self) -> SyscallKind {
        #[cfg(target_arch = "x86_64")]
        if self.number == libc::SYS_select {
            return SyscallKind::Select;
        }
        match self.number {
            n if n == libc::SYS_read || n == libc::SYS_readv || n == libc::SYS_pread64 => {
                SyscallKind::Read
            }
            n if n == libc::SYS_pselect6 => SyscallKind::Select,
            _ => SyscallKind::Other,
        }
    }
}

/// Parses `/proc/<pid>/syscall`: `running`, `-1 sp pc` (not in a call) or
/// `number arg0 … arg5 sp pc` with hexadecimal arguments.
pub fn parse_syscall(text: &str) -> Option<BlockedCall> {
    let mut fields = text.split_whitespace();
    let number: i64 = fields.next()?.parse().ok()?;
    if number < 0 {
        return None;
    }
    let mut args = [0u64; 3];
    for arg in &mut args {
        let field = fields.next()?;
        *arg = u64::from_str_radix(field.trim_start_matches("0x"), 16).ok()?;
    }
    Some(BlockedCall { number, args })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_counts_fields_after_the_last_parenthesis() {
        let stat = parse_stat("42 (we (ird) name) S 7 42 40 34816 42 4194560 0 0").unwrap();
        assert_eq!(
            stat,
            ProcStat {
                pid: 42,
                state: 'S',
                ppid: 7,
                pgrp: 42,
                session: 40,
                tpgid: 42
            }
        );
        assert!(stat.running());
        assert!(!parse_stat("9 (x) Z 1 9 9 0 -1").unwrap().running());
        assert_eq!(parse_stat("9 (x) S 1 9 9"), None, "no tpgid");
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S one 2 3"), None);
    }

    #[test]
    fn blocked_calls_are_parsed_and_others_are_not() {
        let read = parse_syscall("0 0x0 0x55c52f0a1f40 0x1000 0x0 0x7f 0x0 0x7ffe 0x7f41").unwrap();
        assert_eq!(read.args, [0, 0x55c52f0a1f40, 0x1000]);
        assert_eq!(read.number, 0);
        assert_eq!(parse_syscall("running"), None);
        assert_eq!(parse_syscall("-1 0x7ffe 0x7f41"), None);
        assert_eq!(parse_syscall("0 0xzz 0x1 0x2"), None);
        assert_eq!(parse_syscall("7 0x1"), None);
        let select = BlockedCall {
            number: libc::SYS_pselect6,
            args: [1, 0, 0],
        };
        assert_eq!(select.kind(), SyscallKind::Select);
        let read = BlockedCall {
            number: libc::SYS_read,
            args: [0, 0, 0],
        };
        assert_eq!(read.kind(), SyscallKind::Read);
    }

    #[test]
    fn own_process_is_found_in_its_session() {
        let me = std::process::id() as libc::pid_t;
        let stat = proc_stat(me).expect("/proc/self exists");
        assert_eq!(stat.pid, me);
        assert!(session_members(stat.session).contains(&me));
    }

    #[test]
    fn a_child_leading_its_own_session_is_found_and_others_are_not() {
        let me = std::process::id() as libc::pid_t;
        let spawn = |program: &str| {
            std::process::Command::new(program)
                .args(["sleep", "30"])
                .spawn()
                .unwrap()
        };
        // `env sleep` stays in our session; `setsid sleep` (not a group leader, so it
        // does not fork) makes its own and becomes `sleep`.
        let (mut plain, mut leader) = (spawn("env"), spawn("setsid"));
        let leader_id = leader.id() as libc::pid_t;
        let mut found = Vec::new();
        for _ in 0..200 {
            found = session_leading_children(me);
            if found.contains(&leader_id) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert!(found.contains(&leader_id), "{found:?}");
        assert!(!found.contains(&(plain.id() as libc::pid_t)), "{found:?}");
        for child in [&mut plain, &mut leader] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}
