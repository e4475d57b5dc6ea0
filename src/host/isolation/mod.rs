//! Confinement of what `serve` starts for agents: every agent `agent_launch` starts and
//! every terminal an agent opens runs inside a boundary that keeps the person's state
//! and the other agents out of its reach, and says so ([`Status`]).
//!
//! The one mechanism so far is bubblewrap (`bwrap`, [`bwrap`]): mount, PID and IPC
//! namespaces. Inside, the machine looks as before (read everything, write the project,
//! `/tmp`, caches, the network) except:
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
//! `serve --isolation auto|required|off` ([`Setting`]): `auto` confines where bubblewrap
//! works and says plainly where it does not; `required` refuses to start an agent's
//! terminal without it, with what to install; `off` starts everything as the person's own
//! processes, said loudly at start.

pub mod bwrap;

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
    /// Refuse to start an agent's terminal where no mechanism works.
    Required,
    /// Confine nothing.
    Off,
}

impl Setting {
    /// `auto`, `required` or `off`.
    pub fn parse(text: &str) -> Option<Setting> {
        match text {
            "auto" => Some(Setting::Auto),
            "required" => Some(Setting::Required),
            "off" => Some(Setting::Off),
            _ => None,
        }
    }

    /// The option's value as written.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Auto => "auto",
            Setting::Required => "required",
            Setting::Off => "off",
        }
    }
}

/// How a process is confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Mount, PID and IPC namespaces (bubblewrap).
    Namespaces,
    /// Not confined.
    None,
}

impl Mode {
    /// The wire name: `namespaces` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Namespaces => "namespaces",
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

/// How one terminal is to be started: the status it will report and, when confined, the
/// bubblewrap and plan it runs under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Confinement {
    /// What its `session.isolation` says.
    pub status: Status,
    /// `bwrap` and what it keeps out; `None`: not confined.
    pub bwrap: Option<(PathBuf, Plan)>,
    /// The program's first step inside, before its own argv (`EXECUTABLE pane
    /// --take-terminal --`, [`crate::host::terminals::pane_filter::first_step`]); empty:
    /// the program starts directly (then dash, as the shell, ends with status 2 when it
    /// exits).
    pub first_step: Vec<OsString>,
}

impl Confinement {
    /// Not confined, for the reason `why`.
    pub fn none(why: impl Into<String>) -> Confinement {
        Confinement {
            status: Status::none(why),
            bwrap: None,
            first_step: Vec::new(),
        }
    }

    /// `bwrap …plan… -- FIRST STEP`: the words to put before a program's argv, when
    /// confined.
    pub fn prefix(&self) -> Option<Vec<OsString>> {
        let (bwrap, plan) = self.bwrap.as_ref()?;
        Some(bwrap::command(bwrap, plan, &self.first_step))
    }
}

/// What `serve` confines with, found once at start.
#[derive(Clone, Debug)]
pub struct Isolation {
    setting: Setting,
    /// The bubblewrap that worked, or why none did.
    bwrap: Result<PathBuf, String>,
}

impl Isolation {
    /// Looks for a working bubblewrap (unless `setting` is `off`).
    pub fn detect(setting: Setting) -> Isolation {
        let bwrap = match setting {
            Setting::Off => Err("serve --isolation off".to_string()),
            _ => bwrap::find(),
        };
        Isolation { setting, bwrap }
    }

    /// Nothing confined (`--isolation off`), as an embedder without the option gets.
    pub fn off() -> Isolation {
        Isolation::detect(Setting::Off)
    }

    /// Whether agents' terminals are confined (a mechanism works and it is not `off`).
    pub fn confines(&self) -> bool {
        self.bwrap.is_ok()
    }

    /// The setting it was made with.
    pub fn setting(&self) -> Setting {
        self.setting
    }

    /// What an agent's terminal gets, confined by `plan`. `Err` (the reason, with what to
    /// do) under `required` when there is no mechanism.
    pub fn for_agent(&self, plan: Plan) -> Result<Confinement, String> {
        match (&self.bwrap, self.setting) {
            (Ok(bwrap), _) => Ok(Confinement {
                status: Status::namespaces(),
                bwrap: Some((bwrap.clone(), plan)),
                first_step: Vec::new(),
            }),
            (Err(why), Setting::Required) => Err(format!(
                "No agent terminal is started unconfined under serve --isolation required: {why}"
            )),
            (Err(why), _) => Ok(Confinement::none(why.clone())),
        }
    }

    /// The ready line's and `doctor`'s summary: `{"setting", "mode", "why"}`.
    pub fn to_json(&self) -> Value {
        let (mode, why) = match &self.bwrap {
            Ok(path) => (Mode::Namespaces, format!("bubblewrap ({})", path.display())),
            Err(why) => (Mode::None, why.clone()),
        };
        json!({"setting": self.setting.name(), "mode": mode.name(), "why": why})
    }
}

/// How the processes under `root` (a tmux pane's program, found again after a restart)
/// are confined, as the kernel shows it: a descendant in a PID namespace other than ours
/// was started under bubblewrap (only `serve` starts one there, with the full plan).
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
        for name in ["auto", "required", "off"] {
            assert_eq!(Setting::parse(name).unwrap().name(), name);
        }
        assert_eq!(Setting::parse("on"), None);
        for status in [Status::namespaces(), Status::none("opened by the person")] {
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
        let confinement = off.for_agent(Plan::default()).unwrap();
        assert_eq!(confinement.bwrap, None);
        let status = confinement.status;
        assert_eq!((status.mode, status.boundary), (Mode::None, false));
        assert!(status.why.contains("--isolation off"), "{}", status.why);
        let required = Isolation {
            setting: Setting::Required,
            bwrap: Err("bubblewrap is not installed".into()),
        };
        let refused = required.for_agent(Plan::default()).unwrap_err();
        assert!(refused.contains("bubblewrap is not installed"), "{refused}");
    }
}
