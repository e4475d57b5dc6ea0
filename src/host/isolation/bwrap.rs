//! bubblewrap (`bwrap`, a Debian package; what Flatpak, Codex and Claude Code use): the
//! command line that runs a program confined by a [`Plan`], and the check, once at start,
//! that it works here (a kernel without unprivileged user namespaces, or one refused by
//! AppArmor as on Ubuntu 24.04 without a profile, fails it).
//!
//! The whole machine is bound as it is (`--dev-bind / /`, so writes and devices work as
//! before, the terminal's `/dev/pts` too), then the plan's changes are mounted over it.
//! Inside, a `bwrap` of its own is the namespace's first process and the program the
//! second, so the program gets signals as anywhere (`kill -9 $$` ends a shell; a first
//! process ignores what it does not handle); seen from outside, the program is the first
//! descendant of the `bwrap` process that is not `bwrap` ([`confined_program`]: what the
//! kernel checks of shell integration ask about). When it ends, every process inside ends
//! with it, and `bwrap` ends with its exit code, or 128 + the signal that killed it
//! ([`program_wait_status`] turns that back). Not `--die-with-parent`: its signal is tied
//! to the thread that started `bwrap`, and `serve` starts terminals on threads that end;
//! a PTY terminal ends with `serve` anyway (its terminal hangs up), a tmux one lives on.
//! `--cap-drop ALL` keeps root inside from unmounting what hides the data folder.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Plan;
use crate::runtime::agents::resolve_executable;

/// How long the check at start may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The namespaces and limits every confined program gets.
/// `TERMSPRAWL_CONFINED` tells the person's commands run inside why they fail (they
/// cannot reach the state; unsetting it changes only the message).
const BASE: [&str; 12] = [
    "--dev-bind",
    "/",
    "/",
    "--unshare-pid",
    "--unshare-ipc",
    "--cap-drop",
    "ALL",
    "--proc",
    "/proc",
    "--setenv",
    "TERMSPRAWL_CONFINED",
    "namespaces",
];

/// `bwrap …plan… -- argv`: `argv` confined by `plan`. Paths of the plan that do not exist
/// are left out (a hidden folder is always hidden).
pub fn command(bwrap: &Path, plan: &Plan, argv: &[OsString]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![bwrap.into()];
    args.extend(BASE.iter().map(OsString::from));
    let mut add = |flag: &str, paths: &[&PathBuf]| {
        args.push(flag.into());
        args.extend(paths.iter().map(|p| p.as_os_str().to_owned()));
    };
    for hidden in &plan.hidden {
        add("--tmpfs", &[hidden]);
    }
    for shown in plan.shown.iter().filter(|p| p.exists()) {
        add("--ro-bind", &[shown, shown]);
    }
    // A writable path inside a read-only one is bound after it (else the read-only bind
    // would cover it); one inside a hidden folder before that folder is made read-only.
    let under_read_only = |p: &PathBuf| plan.read_only.iter().any(|r| p.starts_with(r));
    let writable: Vec<&PathBuf> = plan.writable.iter().filter(|p| p.exists()).collect();
    for path in writable.iter().filter(|p| !under_read_only(p)) {
        add("--bind", &[path, path]);
    }
    // After the binds inside it: the folder itself becomes read-only.
    for hidden in &plan.hidden {
        add("--remount-ro", &[hidden]);
    }
    for read_only in plan.read_only.iter().filter(|p| p.exists()) {
        add("--ro-bind", &[read_only, read_only]);
    }
    for path in writable.iter().filter(|p| under_read_only(p)) {
        add("--bind", &[path, path]);
    }
    args.push("--".into());
    args.extend(argv.iter().cloned());
    args
}

/// The program `bwrap` process `bwrap` runs confined (the first descendant that is
/// neither `bwrap` nor one of the first `steps` it `exec`s on the way, such as
/// `pane --take-terminal`), once it runs: its pid as seen from outside. `None` when
/// `bwrap` ended first or `timeout` passed.
pub fn confined_program(
    bwrap: libc::pid_t,
    steps: &[PathBuf],
    timeout: Duration,
) -> Option<libc::pid_t> {
    let program_of = |pid: libc::pid_t| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let first_child = |pid: libc::pid_t| {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
        children
            .ok()?
            .split_whitespace()
            .next()?
            .parse::<libc::pid_t>()
            .ok()
    };
    let own_program = program_of(bwrap)?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        // bwrap → its first process inside (bwrap) → the program.
        let mut pid = bwrap;
        for _ in 0..3 {
            let Some(child) = first_child(pid) else {
                break;
            };
            match program_of(child) {
                Some(program) if program == own_program => pid = child,
                // Still the first step: the program is not there yet.
                Some(program) if steps.contains(&program) => break,
                Some(_) => return Some(child),
                None => break,
            }
        }
        // `bwrap` ended before its program ran.
        program_of(bwrap)?;
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

/// The wait status of the program bubblewrap ran, from bubblewrap's own (`waitpid`'s raw
/// status): bubblewrap ends with the program's exit code, or with 128 + the signal that
/// killed it, which becomes that signal again (so a program's own `exit 137` reads as
/// killed by signal 9: the one thing lost).
pub fn program_wait_status(status: libc::c_int) -> libc::c_int {
    if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        if (129..=128 + 64).contains(&code) {
            // A raw status whose low bits are the signal: killed by it, no core file.
            return code - 128;
        }
    }
    status
}

/// The first `bwrap` on `PATH` that confines `true` here, or why none does and what to do.
pub fn find() -> Result<PathBuf, String> {
    let path_var = std::env::var_os("PATH");
    let bwrap = resolve_executable("bwrap", path_var.as_deref()).ok_or(
        "bubblewrap (bwrap) is not installed: install it (Debian, Ubuntu: apt-get install bubblewrap) and start serve again",
    )?;
    let argv = command(&bwrap, &Plan::default(), &["true".into()]);
    check(&argv).map_err(|why| {
        format!(
            "bubblewrap ({}) cannot confine here: {why}; unprivileged user namespaces may be off (sysctl kernel.unprivileged_userns_clone, or AppArmor's kernel.apparmor_restrict_unprivileged_userns on Ubuntu)",
            bwrap.display()
        )
    })?;
    Ok(bwrap)
}

/// Runs `argv` with nothing in and a bounded wait; its error output when it fails.
fn check(argv: &[OsString]) -> Result<(), String> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + CHECK_TIMEOUT;
    // A sandbox starts in a few milliseconds: look again soon, then less often (this
    // check runs before `serve`'s ready line).
    let mut pause = Duration::from_micros(500);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "it did not finish in {} s",
                CHECK_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    };
    if status.success() {
        return Ok(());
    }
    let mut said = String::new();
    if let Some(stderr) = child.stderr.as_mut() {
        let _ = stderr.take(2048).read_to_string(&mut said);
    }
    Err(match said.trim() {
        "" => format!("it ended with {status}"),
        said => said.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_bubblewrap_reports_as_128_plus_it_is_a_signal_again() {
        let exited = |code: libc::c_int| code << 8;
        assert_eq!(program_wait_status(exited(3)), exited(3));
        let killed = program_wait_status(exited(128 + 9));
        assert!(libc::WIFSIGNALED(killed) && libc::WTERMSIG(killed) == 9);
        assert_eq!(program_wait_status(exited(128)), exited(128));
        assert_eq!(program_wait_status(15), 15); // bwrap itself killed
    }

    #[test]
    fn the_plan_is_mounted_over_the_whole_machine_in_order() {
        let dir = std::env::temp_dir().join(format!("ts-bwrap-{}", std::process::id()));
        let shown = dir.join("data/agent-tools/sessions/a.json");
        std::fs::create_dir_all(shown.parent().unwrap()).unwrap();
        std::fs::write(&shown, "{}").unwrap();
        let plan = Plan {
            hidden: vec![dir.join("data")],
            shown: vec![shown.clone(), dir.join("data/missing")],
            writable: Vec::new(),
            read_only: vec![dir.join("gone")],
        };
        let argv = command(Path::new("/usr/bin/bwrap"), &plan, &["sh".into()]);
        let text: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let data = dir.join("data").display().to_string();
        let shown = shown.display().to_string();
        let at = |word: &str| text.iter().position(|a| a == word).unwrap();
        assert_eq!(text[..4], ["/usr/bin/bwrap", "--dev-bind", "/", "/"]);
        assert_eq!(text[at("--tmpfs") + 1], data);
        assert_eq!(
            text[at("--ro-bind") + 1..at("--ro-bind") + 3],
            [shown.clone(), shown]
        );
        assert!(at("--tmpfs") < at("--ro-bind") && at("--ro-bind") < at("--remount-ro"));
        assert_eq!(text[at("--remount-ro") + 1], data);
        assert!(!text
            .iter()
            .any(|a| a.ends_with("missing") || a.ends_with("gone")));
        assert_eq!(text[text.len() - 2..], ["--", "sh"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
