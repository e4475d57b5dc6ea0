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
    Some(ProcStat {
        pid,
        state,
        ppid,
        pgrp,
        session,
    })
}

/// Reads `/proc/<pid>/stat`; `None` when there is no such process.
pub fn proc_stat(pid: libc::pid_t) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// The running (non-zombie) processes of session `session`, from `/proc`.
pub fn session_members(session: libc::pid_t) -> Vec<libc::pid_t> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter_map(proc_stat)
        .filter(|stat| stat.session == session && stat.running())
        .map(|stat| stat.pid)
        .collect()
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
                session: 40
            }
        );
        assert!(stat.running());
        assert!(!parse_stat("9 (x) Z 1 9 9").unwrap().running());
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S one 2 3"), None);
    }

    #[test]
    fn own_process_is_found_in_its_session() {
        let me = std::process::id() as libc::pid_t;
        let stat = proc_stat(me).expect("/proc/self exists");
        assert_eq!(stat.pid, me);
        assert!(session_members(stat.session).contains(&me));
    }
}
