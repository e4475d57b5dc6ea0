//! What the bench reads about a server process from /proc, and the thin libc wrappers it
//! needs (CPU affinity, clock ticks, signals).

use std::fs;

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
    let ticks = clock_ticks_per_second();
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

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value; it has no memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Pins the calling thread (and the threads and processes it starts afterwards) to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit inside `set`, which lives on this stack frame.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 means the calling thread; `set` is a valid cpu_set_t of the size given.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// Online CPUs.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Sends SIGTERM to `pid`.
pub fn terminate(pid: u32) {
    // SAFETY: kill only sends a signal; a stale pid fails with ESRCH.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
}
