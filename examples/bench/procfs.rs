//! What the bench reads about a server process from /proc. (The libc calls it needs are
//! in `sys.rs`, the bench's one unsafe module.)

use std::fs;

use crate::sys;

/// A snapshot of one process's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcSample {
    /// utime + stime of all its threads, plus cutime + cstime of the children it waited
    /// for (e.g. `tmux` clients the host runs), in microseconds.
    pub cpu_us: u64,
    /// VmRSS in KiB.
    pub rss_kib: u64,
    /// VmHWM (peak resident set) in KiB.
    pub hwm_kib: u64,
    /// RssAnon (resident anonymous memory: heap, stacks, arenas; no code pages) in KiB.
    pub anon_kib: u64,
    /// Threads.
    pub threads: u64,
}

/// Reads /proc/<pid>/stat and /proc/<pid>/status; `None` once the process is gone.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after ')'.
    let after = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field 3 of this tail is state, so utime (field 14 of stat) is index 11, stime 12.
    let ticks_of = |i: usize| -> Option<u64> { fields.get(i)?.parse().ok() };
    let own = ticks_of(11)? + ticks_of(12)?;
    let children = ticks_of(13)? + ticks_of(14)?;
    let ticks = sys::clock_ticks_per_second();
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Some(ProcSample {
        cpu_us: (own + children) * 1_000_000 / ticks,
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        anon_kib: field("RssAnon:"),
        threads: field("Threads:"),
    })
}

/// Online CPUs.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
