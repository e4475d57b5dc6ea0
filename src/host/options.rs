//! `termsprawl-tools serve` options, as docs/guide.md gives them, and the `--data` of the
//! other commands. A refusal names what was wrong, first; the binary adds where the help is
//! (`crate::host::help`, which also describes every option).

use std::path::PathBuf;

use crate::host::help::unknown_word;
use crate::host::isolation::Setting;
use crate::host::terminals::TerminalsMode;

/// One `--agent NODE_ID[=ADAPTER]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentFlag {
    /// The agent node's id.
    pub node_id: String,
    /// The status adapter; `None` means `external` (a CLI-fallback agent).
    pub adapter: Option<String>,
}

/// Everything `serve` was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeOptions {
    /// `--data DIR`: where `agent-tools/` lives.
    pub data: PathBuf,
    /// `--project DIR`: the folder project.
    pub project: PathBuf,
    /// `--project-id ID`: else the id kept in the project's `.termsprawl/project.json`.
    pub project_id: Option<String>,
    /// `--agent …`, in order.
    pub agents: Vec<AgentFlag>,
    /// `--browser`: browser control enabled.
    pub browser: bool,
    /// `--terminals auto|tmux|pty` (default auto: tmux when installed).
    pub terminals: TerminalsMode,
    /// `--kill-terminals`: end tmux sessions at shutdown instead of leaving them running.
    pub kill_terminals: bool,
    /// `--no-view`: no canvas view (no second listener).
    pub no_view: bool,
    /// `--view-only`: the canvas view only shows; every action from it is refused.
    pub view_only: bool,
    /// False with `--no-activity`: no activity trail is written.
    pub activity: bool,
    /// False with `--no-query-filter`: tmux terminals' programs run directly, not under
    /// the pane filter that drops terminal queries so tmux types no answers into them (see
    /// `serve::pane_filter`).
    pub query_filter: bool,
    /// `--policy NAME|FILE`: the starting policy (a preset or a policy file; see
    /// `runtime::policy`); `None`: every call runs unless the saved rules say otherwise.
    pub policy: Option<String>,
    /// `--isolation auto|required|landlock|off` (default auto): how agents' terminals are
    /// confined (`crate::host::isolation`).
    pub isolation: Setting,
    /// `--worktrees`: every launched agent works in a git worktree of its own unless its
    /// call says `worktree: false` (`crate::host::worktrees`).
    pub worktrees: bool,
    /// `--notify-command PROGRAM`: run when an agent starts waiting for the person or is
    /// done (`crate::host::person::attention`); never through a shell.
    pub notify_command: Option<PathBuf>,
}

impl ServeOptions {
    /// Parses the words after `serve`. `env` looks up environment variables (for the
    /// `--data` default) and `cwd` is the `--project` default.
    pub fn parse(
        args: &[String],
        env: impl Fn(&str) -> Option<String>,
        cwd: PathBuf,
    ) -> Result<ServeOptions, String> {
        let mut data = None;
        let mut project = None;
        let mut project_id = None;
        let mut agents = Vec::new();
        let mut browser = false;
        let mut terminals = TerminalsMode::Auto;
        let mut kill_terminals = false;
        let mut no_view = false;
        let mut view_only = false;
        let mut query_filter = true;
        let mut activity = true;
        let mut policy = None;
        let mut isolation = Setting::Auto;
        let mut worktrees = false;
        let mut notify_command = None;
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_string())),
                _ => (word.as_str(), None),
            };
            let mut value = || -> Result<String, String> {
                match inline.clone().or_else(|| words.next().cloned()) {
                    Some(v) if !v.is_empty() => Ok(v),
                    _ => Err(format!("{flag} needs a value")),
                }
            };
            match flag {
                "--data" => data = Some(PathBuf::from(value()?)),
                "--project" => project = Some(PathBuf::from(value()?)),
                "--project-id" => project_id = Some(value()?),
                "--agent" => agents.push(parse_agent(&value()?)?),
                "--browser" if inline.is_none() => browser = true,
                "--terminals" => terminals = value()?.parse()?,
                "--kill-terminals" if inline.is_none() => kill_terminals = true,
                "--no-view" if inline.is_none() => no_view = true,
                "--view-only" if inline.is_none() => view_only = true,
                "--no-query-filter" if inline.is_none() => query_filter = false,
                "--no-activity" if inline.is_none() => activity = false,
                "--worktrees" if inline.is_none() => worktrees = true,
                "--policy" => policy = Some(value()?),
                "--notify-command" => notify_command = Some(PathBuf::from(value()?)),
                "--isolation" => {
                    let given = value()?;
                    isolation = Setting::parse(&given).ok_or_else(|| {
                        format!("--isolation {given}: expected auto, required, landlock or off")
                    })?;
                }
                // Only with `=VALUE` (the arms above took them without).
                "--browser" | "--kill-terminals" | "--no-view" | "--view-only"
                | "--no-query-filter" | "--no-activity" | "--worktrees" => {
                    return Err(format!("{flag} takes no value"))
                }
                _ => return Err(unknown_word("serve", word)),
            }
        }
        let data = match data {
            Some(data) => data_folder(data),
            None => default_data_dir(&env)?,
        };
        // Absolute: tmux starts each pane's program in the project folder, and the pane
        // filter's socket path must name the same place from there.
        let data = match data.is_relative() {
            true => cwd.join(data),
            false => data,
        };
        Ok(ServeOptions {
            data,
            project: project.unwrap_or(cwd),
            project_id,
            agents,
            browser,
            terminals,
            kill_terminals,
            no_view,
            view_only,
            activity,
            query_filter,
            policy,
            isolation,
            worktrees,
            notify_command,
        })
    }
}

/// Parses the words after a command whose only option is `--data DIR` (`stop-terminals`;
/// `browser-control`, `approvals` and `policy` hand over theirs) and returns the data
/// directory: the last `--data`, else the default, as `serve`'s. `command` names the
/// command whose options a refusal suggests.
pub fn parse_data(
    command: &str,
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<PathBuf, String> {
    let mut data = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let dir = match word.strip_prefix("--data=") {
            Some(dir) => Some(dir),
            None if word == "--data" => words.next().map(String::as_str),
            None => return Err(unknown_word(command, word)),
        };
        match dir.filter(|dir| !dir.is_empty()) {
            Some(dir) => data = Some(PathBuf::from(dir)),
            None => return Err("--data needs a value".to_string()),
        }
    }
    match data {
        Some(data) => Ok(data_folder(data)),
        None => default_data_dir(&env),
    }
}

/// The data folder `--data DIR` names: `DIR` itself, or, when `DIR` is the `agent-tools`
/// folder inside one (what the ready line's `directory` shows), the folder holding it.
pub fn data_folder(given: PathBuf) -> PathBuf {
    let inside =
        given.file_name() == Some("agent-tools".as_ref()) && !given.join("agent-tools").exists();
    match (inside, given.parent()) {
        (true, Some(parent)) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => given,
    }
}

fn parse_agent(value: &str) -> Result<AgentFlag, String> {
    let (node_id, adapter) = match value.split_once('=') {
        Some((id, adapter)) if !adapter.is_empty() => (id, Some(adapter.to_string())),
        Some(_) => return Err(format!("--agent {value}: the adapter after '=' is empty")),
        None => (value, None),
    };
    Ok(AgentFlag {
        node_id: node_id.to_string(),
        adapter,
    })
}

/// `$XDG_DATA_HOME/termsprawl-tools`, else `~/.local/share/termsprawl-tools`.
pub(crate) fn default_data_dir(env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    if let Some(xdg) = env("XDG_DATA_HOME").filter(|v| v.starts_with('/')) {
        return Ok(PathBuf::from(xdg).join("termsprawl-tools"));
    }
    match env("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/termsprawl-tools")),
        None => Err("neither XDG_DATA_HOME nor HOME is set; pass --data DIR".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ServeOptions, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_string()),
            _ => None,
        };
        ServeOptions::parse(&args, env, PathBuf::from("/cwd"))
    }

    #[test]
    fn defaults() {
        let options = parse(&[]).unwrap();
        assert_eq!(
            options.data,
            PathBuf::from("/home/u/.local/share/termsprawl-tools")
        );
        assert_eq!(options.project, PathBuf::from("/cwd"));
        // A relative data directory is taken from the current folder, once.
        let relative = parse(&["--data", "here/data"]).unwrap();
        assert_eq!(relative.data, PathBuf::from("/cwd/here/data"));
        assert_eq!(options.project_id, None);
        assert!(options.agents.is_empty() && !options.browser);
        assert_eq!(options.terminals, TerminalsMode::Auto);
        assert!(!options.kill_terminals);
    }

    #[test]
    fn every_flag() {
        let options = parse(&[
            "--data",
            "/d",
            "--project=/p",
            "--project-id",
            "pid",
            "--agent",
            "me",
            "--agent=cc=claude-mcp",
            "--browser",
            "--terminals",
            "pty",
            "--kill-terminals",
        ])
        .unwrap();
        assert_eq!(options.terminals, TerminalsMode::Pty);
        assert!(options.kill_terminals);
        assert_eq!(options.data, PathBuf::from("/d"));
        assert_eq!(options.project, PathBuf::from("/p"));
        assert_eq!(options.project_id.as_deref(), Some("pid"));
        assert_eq!(
            options.agents,
            vec![
                AgentFlag {
                    node_id: "me".into(),
                    adapter: None
                },
                AgentFlag {
                    node_id: "cc".into(),
                    adapter: Some("claude-mcp".into())
                },
            ]
        );
        assert!(options.browser);
    }

    #[test]
    fn xdg_data_home_wins() {
        let env = |k: &str| (k == "XDG_DATA_HOME").then(|| "/xdg".to_string());
        let options = ServeOptions::parse(&[], env, PathBuf::from("/")).unwrap();
        assert_eq!(options.data, PathBuf::from("/xdg/termsprawl-tools"));
    }

    #[test]
    fn usage_errors_name_what_was_wrong() {
        assert_eq!(parse(&["--data"]).unwrap_err(), "--data needs a value");
        assert_eq!(
            parse(&["--brwser"]).unwrap_err(),
            "unknown option --brwser (did you mean --browser?)"
        );
        assert!(parse(&["--agent", "x="]).unwrap_err().contains("adapter"));
        assert_eq!(
            parse(&["--browser=yes"]).unwrap_err(),
            "--browser takes no value"
        );
        assert_eq!(
            parse(&["--terminals", "screen"]).unwrap_err(),
            "--terminals screen: expected auto, tmux or pty"
        );
        assert_eq!(parse(&["here"]).unwrap_err(), "unexpected argument here");
    }

    #[test]
    fn data_only_commands_take_only_data() {
        let env = |k: &str| (k == "HOME").then(|| "/h".to_string());
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let data = |w: &[&str]| parse_data("stop-terminals", &words(w), env);
        assert_eq!(
            data(&[]).unwrap(),
            PathBuf::from("/h/.local/share/termsprawl-tools")
        );
        assert_eq!(data(&["--data", "/d"]).unwrap(), PathBuf::from("/d"));
        assert_eq!(data(&["--data=/e"]).unwrap(), PathBuf::from("/e"));
        assert_eq!(
            data(&["--project", "/p"]).unwrap_err(),
            "unknown option --project"
        );
        assert_eq!(
            data(&["--dta", "/p"]).unwrap_err(),
            "unknown option --dta (did you mean --data?)"
        );
        assert_eq!(data(&["--data"]).unwrap_err(), "--data needs a value");
        assert_eq!(data(&["/d"]).unwrap_err(), "unexpected argument /d");
    }

    #[test]
    fn data_takes_the_folder_or_its_agent_tools() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = |_: &str| None;
        for given in ["/d", "/d/", "/d/agent-tools", "/d/agent-tools/"] {
            let data = parse_data("stop-terminals", &words(&["--data", given]), env).unwrap();
            assert_eq!(data, PathBuf::from("/d"), "{given}");
        }
        // A data folder that is itself named agent-tools (it holds its own) stays.
        let root = std::env::temp_dir().join(format!("data-named-{}", std::process::id()));
        let named = root.join("agent-tools");
        std::fs::create_dir_all(named.join("agent-tools")).unwrap();
        assert_eq!(data_folder(named.clone()), named);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
