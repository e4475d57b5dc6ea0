//! What the kernel says about a shell on a PTY whose master we hold: whether it waits
//! at its prompt, and what its foreground does. Shared by the PTY reader's terminals
//! and the pane filter (which holds the master of its program's PTY). Asked only when
//! someone asks: nothing polls.

use std::os::fd::BorrowedFd;

use crate::host::terminals::procfs;
use crate::runtime::Foreground;
use crate::sys::pty;

/// The shell `shell` waits at its prompt: its group has the terminal, it is blocked
/// reading it, and nothing it wrote is unread on `master` (so no end mark is on its
/// way). What makes an unconfirmed end final (see [`super::records`]).
pub fn shell_waiting(shell: libc::pid_t, master: BorrowedFd<'_>) -> bool {
    let Ok(tty) = std::fs::read_link(format!("/proc/{shell}/fd/0")) else {
        return false;
    };
    pty::foreground_group(master).is_ok_and(|group| group == shell)
        && procfs::reading_terminal(shell, &tty)
        && pty::unread_bytes(master).is_ok_and(|n| n == 0)
}

/// What the kernel says of `shell` on the terminal whose master is `master`, asked as
/// its marks arrive (see [`super::records`]).
pub struct KernelProbe<'a> {
    /// The shell's pid, which is also its process group's id.
    pub shell: libc::pid_t,
    /// The master of the shell's terminal.
    pub master: BorrowedFd<'a>,
    /// The shell's `read` calls just before the chunk being parsed was read.
    pub reads_before_chunk: Option<u64>,
}

impl super::ShellProbe for KernelProbe<'_> {
    fn has_terminal(&mut self) -> bool {
        pty::foreground_group(self.master).is_ok_and(|group| group == self.shell)
    }

    fn waiting(&mut self) -> bool {
        shell_waiting(self.shell, self.master)
    }

    fn reads(&mut self) -> Option<u64> {
        procfs::read_calls(self.shell)
    }

    fn reads_before_chunk(&mut self) -> Option<u64> {
        self.reads_before_chunk
    }
}

/// Whether the foreground of `shell`'s terminal (`shell` itself, when it has it, or one of
/// its descendants in the foreground group) is blocked reading the terminal: for a
/// terminal whose program is an agent, not a shell, that is the agent waiting for typing.
pub fn reading(shell: libc::pid_t, master: BorrowedFd<'_>) -> bool {
    let (Ok(group), Ok(tty)) = (
        pty::foreground_group(master),
        std::fs::read_link(format!("/proc/{shell}/fd/0")),
    ) else {
        return false;
    };
    (group == shell && procfs::reading_terminal(shell, &tty))
        || (procfs::group_members(shell, group).iter())
            .any(|&pid| procfs::reading_terminal(pid, &tty))
}

/// What the foreground of `shell`'s terminal does, leaving out what the screen tells
/// (full-screen) and the shell's own end, which the caller knows:
/// - another group has the terminal: awaiting input if one of its processes (among the
///   shell's descendants) is blocked reading it, else running;
/// - the shell has it: at its prompt unless `command_running` (a reported command whose
///   end is not final) and the program is still the shell (`replaced` false); then a
///   builtin (`read -p`) blocked reading with nothing unread, after the line the host
///   typed was read (`typed_at_reads`: the shell's completed reads then), awaits input.
pub fn foreground(
    shell: libc::pid_t,
    master: BorrowedFd<'_>,
    command_running: bool,
    replaced: bool,
    typed_at_reads: Option<u64>,
) -> Foreground {
    let Ok(group) = pty::foreground_group(master) else {
        return Foreground::Shell;
    };
    let Ok(tty) = std::fs::read_link(format!("/proc/{shell}/fd/0")) else {
        return Foreground::Shell;
    };
    if group != shell {
        let members = procfs::group_members(shell, group);
        return match members
            .iter()
            .any(|&pid| procfs::reading_terminal(pid, &tty))
        {
            true => Foreground::AwaitingInput,
            false => Foreground::Running,
        };
    }
    if !command_running || replaced {
        return Foreground::Shell;
    }
    let nothing_unread = pty::unread_bytes(master).is_ok_and(|n| n == 0);
    let typed_line_read = typed_at_reads.map_or(true, |reads| {
        procfs::read_calls(shell).is_some_and(|now| now > reads)
    });
    match nothing_unread && typed_line_read && procfs::reading_terminal(shell, &tty) {
        true => Foreground::AwaitingInput,
        false => Foreground::Running,
    }
}
