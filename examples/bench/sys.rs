//! The bench's one unsafe module: thin safe wrappers of the libc calls it needs (clock
//! ticks, CPU affinity, signals), each `unsafe` block with a `// SAFETY:` comment. The
//! crate root denies `unsafe_code` and allows it only on `mod sys`.

use std::io;

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`); 100 where it is not known.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes an int and only reads a configuration value; it has no
    // memory effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Pins the calling thread (and the threads and processes it starts afterwards) to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond CPU_SETSIZE"));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit inside `set`, which lives on this stack frame;
    // `cpu` is below CPU_SETSIZE (checked above), so the bit is inside it.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 means the calling thread; `set` is a live cpu_set_t of the size given,
    // which sched_setaffinity only reads.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error().to_string())
    }
}

/// Sends SIGTERM to `pid` (a pid that does not fit `pid_t` is ignored rather than wrapped
/// into a negative one, which would name a process group or every process).
pub fn terminate(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 0 {
        return;
    }
    // SAFETY: kill only sends a signal; it takes no pointers, and a stale pid fails with
    // ESRCH.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}
