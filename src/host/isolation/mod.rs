//! Confinement of what `serve` starts for agents: every agent `agent_launch` starts and
//! every terminal an agent opens runs inside a boundary that keeps the person's state
//! and the other agents out of its reach, and says so ([`Status`]).
//!
//! The strongest mechanism that works here is chosen once at start ([`Isolation::detect`]):
//! bubblewrap (`bwrap`, [`bwrap`]), mount, PID and IPC namespaces; else Landlock
//! ([`landlock`]), the kernel's own allow-list of files with signal and socket scopes,
//! whose limits its module lists. Under bubblewrap, the machine looks as before (read
//! everything, write the project, `/tmp`, caches, the network) except:
//! - the data folder is an empty read-only folder, but for what this agent's own
//!   `termsprawlctl` needs, shown read-only: its session file, `endpoint.json`, the
//!   launcher and its own launch folder ([`Plan::for_agent`]) — so no other agent's
//!   token, no approvals, policy, browser-control or link state, no tmux or pane socket;
//! - `<project>/.termsprawl/` is read-only: a link file written there is not made;
//! - only its own processes exist (a PID namespace with its own `/proc`): `serve`, the
//!   tmux server and other agents can be neither signalled nor traced nor read;
//! - no capabilities, and no new privileges (`sudo` does not work inside).
//!
//! Whether a terminal is confined is decided by who opened it: an agent's `terminal_open`
//! and every `agent_launch` are; a terminal the person opens from the view, and an agent
//! started outside `serve` (`serve --agent`), are not, and say so.
//!
//! `serve --isolation auto|required|landlock|off` ([`Setting`]): `auto` confines with the
//! strongest mechanism that works and says plainly where none does or where what it
//! gives is not a boundary (tmux under Landlock); `required` refuses to start an agent's
//! terminal without a boundary, with what to install; `landlock` uses Landlock even where
//! bubblewrap works; `off` starts everything as the person's own processes, said loudly
//! at start.

pub mod bwrap;
pub mod landlock;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The person's commands (`approvals`, `policy`, `link`, …) run in an agent's confined
/// terminal: why they fail there, for their message. The variable only words the
/// message; what stops them is that the state is out of reach.
pub fn person_command_refusal(command: &str) -> Option<String> {
    let mode = std::env::var("TERMSPRAWL_CONFINED").ok()?;
    Some(format!(
        "termsprawl-tools {command}: this is an agent's confined terminal (isolation: {mode}): the person's commands cannot reach serve's state from here, by design; run it in your own shell"
    ))
}

/// `serve --isolation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Confine where a mechanism works; say so where none does.
    Auto,
    /// Refuse to start an agent's terminal where no mechanism makes a boundary.
    Required,
    /// Landlock, even where bubblewrap works.
    Landlock,
    /// Confine nothing.
    Off,
}

impl Setting {
    /// `auto`, `required`, `landlock` or `off`.
    pub fn parse(text: &str) -> Option<Setting> {
        match text {
            "auto" => Some(Setting::Auto),
            "required" => Some(Setting::Required),
            "landlock" => Some(Setting::Landlock),
            "off" => Some(Setting::Off),
            _ => None,
        }
    }

    /// The option's value as written.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Auto => "auto",
            Setting::Required => "required",
            Setting::Landlock => "landlock",
            Setting::Off => "off",
        }
    }
}

/// How a process is confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Mount, PID and IPC namespaces (bubblewrap).
    Namespaces,
    /// Landlock's rules on files, signals and abstract sockets.
    Landlock,
    /// Not confined.
    None,
}

impl Mode {
    /// The wire name: `namespaces`, `landlock` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Namespaces => "namespaces",
            Mode::Landlock => "landlock",
            Mode::None => "none",
        }
    }
}

/// A terminal's confinement as answers show it (`session.isolation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The mechanism.
    pub mode: Mode,
    /// Everything in the module's list is out of reach.
    pub boundary: bool,
    /// Why, in a sentence a person can act on.
    pub why: String,
}

impl Status {
    /// A terminal confined by bubblewrap.
    pub fn namespaces() -> Status {
        Status {
            mode: Mode::Namespaces,
            boundary: true,
            why: "bubblewrap: mount, PID and IPC namespaces; the data folder hidden but this \
                  agent's own session, .termsprawl read-only, no other process visible"
                .to_string(),
        }
    }

    /// A terminal confined by Landlock ABI `abi`, on tmux or not: a boundary only with
    /// signals scoped (ABI 6) and no tmux server's socket to reach.
    pub fn landlock(abi: u32, tmux: bool) -> Status {
        let mut gaps = Vec::new();
        if abi < landlock::SCOPED_ABI {
            gaps.push("signals to serve and other agents are not refused before Landlock ABI 6 (Linux 6.12)");
        }
        if tmux {
            gaps.push("the tmux server's socket can still be connected to (Landlock cannot refuse a Unix socket's path here): use the PTY backend (serve --terminals pty) or bubblewrap for a boundary");
        }
        let kept = format!(
            "Landlock ABI {abi}: the data folder unreadable but this agent's own session, .termsprawl read-only, serve and other agents neither traced nor read{}; nothing new directly in the folders above them",
            if abi >= landlock::SCOPED_ABI { " nor signalled" } else { "" }
        );
        Status {
            mode: Mode::Landlock,
            boundary: gaps.is_empty(),
            why: match gaps.is_empty() {
                true => kept,
                false => format!("{kept}; not a boundary: {}", gaps.join("; ")),
            },
        }
    }

    /// A terminal not confined, for the reason `why`.
    pub fn none(why: impl Into<String>) -> Status {
        Status {
            mode: Mode::None,
            boundary: false,
            why: why.into(),
        }
    }

    /// `{"mode", "boundary", "why"}`.
    pub fn to_json(&self) -> Value {
        json!({"mode": self.mode.name(), "boundary": self.boundary, "why": self.why})
    }

    /// The same read back (an answer's `isolation`); `None` if malformed.
    pub fn from_json(value: &Value) -> Option<Status> {
        let mode = match value.get("mode")?.as_str()? {
            "namespaces" => Mode::Namespaces,
            "landlock" => Mode::Landlock,
            "none" => Mode::None,
            _ => return None,
        };
        Some(Status {
            mode,
            boundary: value.get("boundary")?.as_bool()?,
            why: value.get("why")?.as_str()?.to_string(),
        })
    }
}

/// The paths a confined process may not reach, or only read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Each replaced by an empty read-only folder.
    pub hidden: Vec<PathBuf>,
    /// Inside a hidden folder, shown again read-only (those that exist).
    pub shown: Vec<PathBuf>,
    /// Inside a hidden folder, shown again writable: the shell's own start-up folder,
    /// whose nonce file it deletes.
    pub writable: Vec<PathBuf>,
    /// Read-only (those that exist).
    pub read_only: Vec<PathBuf>,
}

impl Plan {
    /// An agent's terminal in `project`, with data folder `data`: `session_file` (the
    /// agent's own, when it has one) and `launch` (its launch folder) shown again.
    pub fn for_agent(
        data: &Path,
        project: &Path,
        session_file: Option<&Path>,
        launch: Option<&Path>,
    ) -> Plan {
        let tools = data.join("agent-tools");
        let mut shown = vec![tools.join("endpoint.json"), tools.join("termsprawlctl")];
        shown.extend(session_file.map(Path::to_path_buf));
        shown.extend(launch.map(Path::to_path_buf));
        Plan {
            hidden: vec![data.to_path_buf()],
            shown,
            writable: Vec::new(),
            read_only: vec![project.join(".termsprawl")],
        }
    }

    /// The same for an agent working in its own git worktree `worktree` of `project`: the
    /// whole project folder read-only (its checkout and other agents' worktrees), but its
    /// worktree and what git writes to commit there writable: the repository's objects,
    /// refs, reflogs and worktrees' administrative folders. Not `.git`'s config, hooks or
    /// `info/`: what there would run as the person when the person, or `serve` looking at
    /// a worktree, runs git.
    pub fn in_worktree(mut self, project: &Path, worktree: &Path) -> Plan {
        self.read_only = vec![project.to_path_buf()];
        self.writable.push(worktree.to_path_buf());
        let git = project.join(".git");
        for written in ["objects", "refs", "logs", "worktrees"] {
            self.writable.push(git.join(written));
        }
        self
    }

    /// The plan as arguments of the pane filter (`--hide P`, `--show P`,
    /// `--show-writable P`, `--read-only P`):
    /// paths only, never a token.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        for (flag, paths) in [
            ("--hide", &self.hidden),
            ("--show", &self.shown),
            ("--show-writable", &self.writable),
            ("--read-only", &self.read_only),
        ] {
            for path in paths {
                args.push(flag.into());
                args.push(path.into());
            }
        }
        args
    }

    /// Takes one `--hide`/`--show`/`--show-writable`/`--read-only` flag and its path; false
    /// when `flag` is none of them.
    pub fn take_arg(&mut self, flag: &str, path: PathBuf) -> bool {
        match flag {
            "--hide" => self.hidden.push(path),
            "--show" => self.shown.push(path),
            "--show-writable" => self.writable.push(path),
            "--read-only" => self.read_only.push(path),
            _ => return false,
        }
        true
    }
}

/// What confines a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confiner {
    /// This bubblewrap runs it, in namespaces of its own.
    Bwrap(PathBuf),
    /// Its first step (`pane --take-terminal --landlock`) restricts itself, then runs it
    /// in the same process.
    Landlock,
}

impl Confiner {
    /// As the pane filter's `--confine` takes it: bubblewrap's path, or `landlock`.
    pub fn to_arg(&self) -> OsString {
        match self {
            Confiner::Bwrap(path) => path.into(),
            Confiner::Landlock => LANDLOCK_ARG.into(),
        }
    }

    /// The same read back.
    pub fn from_arg(arg: &str) -> Option<Confiner> {
        match arg {
            "" => None,
            LANDLOCK_ARG => Some(Confiner::Landlock),
            path => Some(Confiner::Bwrap(PathBuf::from(path))),
        }
    }
}

/// `--confine landlock` (bubblewrap's path is absolute, so never this).
const LANDLOCK_ARG: &str = "landlock";

/// How one terminal is to be started: the status it will report and, when confined, what
/// confines it and with which plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    /// What its `session.isolation` says.
    pub status: Status,
    /// What confines it and what it keeps out; `None`: not confined.
    pub confine: Option<(Confiner, Plan)>,
    /// The executable whose `pane --take-terminal` is the program's first step inside
    /// ([`first_step`]); `None`: under bubblewrap the
    /// program starts directly (then dash, as the shell, ends with status 2 when it exits).
    /// Landlock needs it.
    pub helper: Option<PathBuf>,
}

impl Confinement {
    /// Not confined, for the reason `why`.
    pub fn none(why: impl Into<String>) -> Confinement {
        Confinement {
            status: Status::none(why),
            confine: None,
            helper: None,
        }
    }

    /// The words to put before a program's argv, when confined: `bwrap …plan… -- [HELPER
    /// pane --take-terminal --]`, or `HELPER pane --take-terminal --landlock …plan… --`.
    pub fn prefix(&self) -> Option<Vec<OsString>> {
        let (confiner, plan) = self.confine.as_ref()?;
        Some(confined_words(confiner, plan, self.helper.as_deref()))
    }

    /// Whether the confined program runs in the process the prefix starts (Landlock), not
    /// as a descendant of it (bubblewrap).
    pub fn in_place(&self) -> bool {
        matches!(self.confine, Some((Confiner::Landlock, _)))
    }
}

/// The flag of a confined program's first step, `pane --take-terminal` (see
/// [`crate::host::terminals::pane_filter`], which runs it).
pub const TAKE_TERMINAL: &str = "--take-terminal";

/// The first step's flag to restrict itself with Landlock, before the plan's flags.
pub const LANDLOCK_STEP: &str = "--landlock";

/// The words that make `executable` a confined program's first step: `EXECUTABLE pane
/// --take-terminal [--landlock PLAN…] --`, before the program's argv; with `landlock`, the
/// step restricts itself to that plan.
pub fn first_step(executable: &Path, landlock: Option<&Plan>) -> Vec<OsString> {
    // `pane`: the pane filter's subcommand, which runs the first step.
    let mut words: Vec<OsString> = vec![executable.into(), "pane".into(), TAKE_TERMINAL.into()];
    if let Some(plan) = landlock {
        words.push(LANDLOCK_STEP.into());
        words.extend(plan.to_args());
    }
    words.push("--".into());
    words
}

/// The words before a program's argv that confine it with `confiner` and `plan`, the first
/// step being `helper`'s `pane --take-terminal` (Landlock needs one).
pub fn confined_words(confiner: &Confiner, plan: &Plan, helper: Option<&Path>) -> Vec<OsString> {
    match confiner {
        Confiner::Bwrap(bwrap) => {
            let step = helper.map_or_else(Vec::new, |helper| first_step(helper, None));
            bwrap::command(bwrap, plan, &step)
        }
        Confiner::Landlock => helper.map_or_else(Vec::new, |helper| first_step(helper, Some(plan))),
    }
}

/// The mechanism `serve` confines with.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Mechanism {
    Bwrap(PathBuf),
    /// Landlock at this ABI.
    Landlock(u32),
}

/// What `serve` confines with, found once at start.
#[derive(Clone, Debug)]
pub struct Isolation {
    setting: Setting,
    /// The mechanism that works, or why none does.
    mechanism: Result<Mechanism, String>,
    /// Why bubblewrap is not the mechanism, when Landlock is under `auto` or `required`.
    no_bwrap: Option<String>,
}

impl Isolation {
    /// Looks for a working mechanism (unless `setting` is `off`): bubblewrap, else
    /// Landlock; only Landlock under `landlock`.
    pub fn detect(setting: Setting) -> Isolation {
        let landlock = || landlock::abi().map(Mechanism::Landlock);
        let mut no_bwrap = None;
        let mechanism = match setting {
            Setting::Off => Err("serve --isolation off".to_string()),
            Setting::Landlock => landlock(),
            Setting::Auto | Setting::Required => {
                bwrap::find().map(Mechanism::Bwrap).or_else(|why| {
                    no_bwrap = Some(why.clone());
                    landlock().map_err(|no_landlock| format!("{why}; {no_landlock}"))
                })
            }
        };
        Isolation {
            setting,
            mechanism,
            no_bwrap,
        }
    }

    /// Nothing confined (`--isolation off`), as an embedder without the option gets.
    pub fn off() -> Isolation {
        Isolation::detect(Setting::Off)
    }

    /// Whether agents' terminals are confined (a mechanism works and it is not `off`).
    pub fn confines(&self) -> bool {
        self.mechanism.is_ok()
    }

    /// The setting it was made with.
    pub fn setting(&self) -> Setting {
        self.setting
    }

    /// What an agent's terminal gets, confined by `plan`, on tmux or not, its first step
    /// being `helper`'s (Landlock needs one). `Err` (the reason, with what to do) under
    /// `required` where what there is makes no boundary.
    pub fn for_agent(
        &self,
        plan: Plan,
        tmux: bool,
        helper: Option<PathBuf>,
    ) -> Result<Confinement, String> {
        let confinement = match &self.mechanism {
            Ok(Mechanism::Bwrap(bwrap)) => Confinement {
                status: Status::namespaces(),
                confine: Some((Confiner::Bwrap(bwrap.clone()), plan)),
                helper,
            },
            Ok(Mechanism::Landlock(_)) if helper.is_none() => Confinement::none(
                "Landlock needs this host's executable as the program's first step (HostConfig::pane_filter)",
            ),
            Ok(Mechanism::Landlock(abi)) => Confinement {
                status: Status::landlock(*abi, tmux),
                confine: Some((Confiner::Landlock, plan)),
                helper,
            },
            Err(why) => Confinement::none(why.clone()),
        };
        if self.setting == Setting::Required && !confinement.status.boundary {
            return Err(format!(
                "No agent terminal is started without a boundary under serve --isolation required: {}",
                confinement.status.why
            ));
        }
        Ok(confinement)
    }

    /// The ready line's and `doctor`'s summary: `{"setting", "mode", "why"}`.
    pub fn to_json(&self) -> Value {
        let (mode, why) = match &self.mechanism {
            Ok(Mechanism::Bwrap(path)) => {
                (Mode::Namespaces, format!("bubblewrap ({})", path.display()))
            }
            Ok(Mechanism::Landlock(abi)) => {
                let mut why = Status::landlock(*abi, false).why;
                if let Some(no_bwrap) = &self.no_bwrap {
                    why = format!("{why}; not bubblewrap: {no_bwrap}");
                }
                (Mode::Landlock, why)
            }
            Err(why) => (Mode::None, why.clone()),
        };
        json!({"setting": self.setting.name(), "mode": mode.name(), "why": why})
    }
}

/// How the processes under `root` (a tmux pane's program, found again after a restart)
/// are confined, as the kernel shows it: a descendant in a PID namespace other than ours
/// was started under bubblewrap (only `serve` starts one there, with the full plan); a
/// pane filter started with `--confine landlock` confines its program with Landlock. (A
/// Landlock-confined program tmux started without a filter is not told apart: it reads as
/// not confined, which asks more of the person, never less.)
pub fn of_process_tree(root: libc::pid_t) -> Status {
    let namespace = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    let ours = namespace("self");
    let mut queue = vec![root];
    let mut seen = 0;
    while let Some(pid) = queue.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        let theirs = namespace(&pid.to_string());
        if theirs.is_some() && theirs != ours {
            return Status::namespaces();
        }
        // A pane filter that confines its program with Landlock says so on its command line
        // (only tmux panes are looked at here).
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline
            .windows(18)
            .any(|w| w == b"--confine\0landlock".as_slice())
        {
            return Status::landlock(landlock::abi().unwrap_or(0), true);
        }
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
        queue.extend(
            children
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|child| child.parse::<libc::pid_t>().ok()),
        );
    }
    Status::none("started without confinement (its processes share serve's namespaces)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_statuses_read_back() {
        for name in ["auto", "required", "landlock", "off"] {
            assert_eq!(Setting::parse(name).unwrap().name(), name);
        }
        assert_eq!(Setting::parse("on"), None);
        for status in [
            Status::namespaces(),
            Status::landlock(7, true),
            Status::none("opened by the person"),
        ] {
            assert_eq!(Status::from_json(&status.to_json()), Some(status));
        }
        assert_eq!(Status::from_json(&json!({"mode": "chroot"})), None);
    }

    #[test]
    fn a_plan_goes_through_the_pane_filters_arguments() {
        let plan = Plan::for_agent(
            Path::new("/d"),
            Path::new("/p"),
            Some(Path::new("/d/agent-tools/sessions/a.json")),
            Some(Path::new("/d/agent-tools/launch/a")),
        );
        let plan = Plan {
            writable: vec![PathBuf::from("/d/agent-tools/shell/x")],
            ..plan
        };
        assert_eq!(plan.hidden, [PathBuf::from("/d")]);
        assert_eq!(plan.read_only, [PathBuf::from("/p/.termsprawl")]);
        let args = plan.to_args();
        let mut again = Plan::default();
        for pair in args.chunks(2) {
            let flag = pair[0].to_str().unwrap();
            assert!(again.take_arg(flag, PathBuf::from(&pair[1])));
        }
        assert_eq!(again, plan);
        assert!(!again.take_arg("--integrate", PathBuf::from("/x")));
    }

    #[test]
    fn required_refuses_without_a_mechanism_and_off_confines_nothing() {
        let off = Isolation::off();
        let confinement = off.for_agent(Plan::default(), false, None).unwrap();
        assert_eq!(confinement.confine, None);
        let status = confinement.status;
        assert_eq!((status.mode, status.boundary), (Mode::None, false));
        assert!(status.why.contains("--isolation off"), "{}", status.why);
        let required = Isolation {
            setting: Setting::Required,
            mechanism: Err("bubblewrap is not installed".into()),
            no_bwrap: None,
        };
        let refused = required
            .for_agent(Plan::default(), false, None)
            .unwrap_err();
        assert!(refused.contains("bubblewrap is not installed"), "{refused}");
        // Landlock on tmux reaches the tmux server: no boundary, so required refuses it.
        let landlock = Isolation {
            setting: Setting::Required,
            mechanism: Ok(Mechanism::Landlock(7)),
            no_bwrap: Some("bubblewrap is not installed".into()),
        };
        let said = landlock.to_json()["why"].as_str().unwrap().to_string();
        assert!(
            said.contains("not bubblewrap: bubblewrap is not installed"),
            "{said}"
        );
        let helper = Some(PathBuf::from("/bin/termsprawl-tools"));
        let pty = landlock
            .for_agent(Plan::default(), false, helper.clone())
            .unwrap();
        assert_eq!(
            (pty.status.mode, pty.status.boundary),
            (Mode::Landlock, true)
        );
        assert!(pty.in_place());
        let refused = landlock
            .for_agent(Plan::default(), true, helper)
            .unwrap_err();
        assert!(refused.contains("tmux server's socket"), "{refused}");
        assert!(!Status::landlock(5, false).boundary);
    }
}
