//! What `termsprawl-tools --help` and each command's `--help` print: one table, the only
//! place the host binary's help is written. The commands' parsers (`options.rs`,
//! `person/`) take their "did you mean" from it ([`unknown_word`]), and `tests/cli_help.rs`
//! checks that every option a parser accepts is described here.
//!
//! A command's help says what it does, its usage, and each option on one line
//! (`  --name VALUE   what it does`): the lines [`options`] reads. A subcommand (`approvals
//! allow`, `policy set`) is described in its command's help, which its `--help` prints.

use crate::protocol::nearest_name;

/// One command of `termsprawl-tools`.
#[derive(Debug)]
pub struct CommandHelp {
    /// Its name, the first word.
    pub name: &'static str,
    /// One line for the list of commands.
    pub summary: &'static str,
    /// What `termsprawl-tools NAME --help` prints.
    pub text: &'static str,
}

/// Every command the person runs, in the order the overview lists them (not `pane`, the
/// program `serve` starts in each tmux terminal).
pub const COMMANDS: &[CommandHelp] = &[
    CommandHelp {
        name: "serve",
        summary: "run the tool server for one folder project (agents call it)",
        text: SERVE,
    },
    CommandHelp {
        name: "stop-terminals",
        summary: "end the tmux server that keeps a data directory's terminals running",
        text: STOP_TERMINALS,
    },
    CommandHelp {
        name: "activity",
        summary: "show the trail of agents' calls",
        text: ACTIVITY,
    },
    CommandHelp {
        name: "approvals",
        summary: "list and answer the calls waiting for your answer",
        text: APPROVALS,
    },
    CommandHelp {
        name: "policy",
        summary: "show or set what agents may do",
        text: POLICY,
    },
    CommandHelp {
        name: "browser-control",
        summary: "switch agent browser control on or off while serve runs",
        text: BROWSER_CONTROL,
    },
    CommandHelp {
        name: "link",
        summary: "let two agents read each other's transcript (and one send work)",
        text: LINK,
    },
    CommandHelp {
        name: "unlink",
        summary: "remove a link between two agents",
        text: UNLINK,
    },
    CommandHelp {
        name: "worktrees",
        summary: "review, merge or discard what agents did in their git worktrees",
        text: WORKTREES,
    },
    CommandHelp {
        name: "catalogue",
        summary: "print the operations agents can call, as JSON",
        text: CATALOGUE,
    },
    CommandHelp {
        name: "validate",
        summary: "check one request on stdin against the catalogue",
        text: VALIDATE,
    },
];

const SERVE: &str = "\
termsprawl-tools serve: the tool server for one folder project, with the default host: a
headless canvas, terminals, a browser engine and the canvas view. Once it listens it prints
one JSON ready line on stdout (logs go to stderr); SIGINT or SIGTERM stop it cleanly.

Usage: termsprawl-tools serve [OPTIONS]

Options (--option VALUE or --option=VALUE):
  --data DIR                 data directory (default: see below)
  --project DIR              project folder (default: the current folder)
  --project-id ID            project id (default: the one kept in .termsprawl/project.json)
  --agent NODE_ID[=ADAPTER]  an agent node with a session; repeatable (ADAPTER default: external)
  --browser                  enable agent browser control (off by default)
  --terminals auto|tmux|pty  terminal backend (default auto: tmux when installed, else PTYs)
  --kill-terminals           end the tmux terminals when serve stops (default: they live on)
  --no-view                  no canvas view (and no viewUrl in the ready line)
  --view-only                the canvas view only shows: every action from it is refused
  --no-activity              write no activity trail
  --no-query-filter          run tmux terminals' programs without the pane filter
  --policy NAME|FILE         starting policy: open (default), careful, strict, or a policy file
  --isolation auto|required|landlock|off
                             confine agents' terminals: auto (default: bubblewrap where it
                             works, else Landlock), required (refuse to start them without a
                             boundary), landlock (Landlock even where bubblewrap works), off
                             (never)
  --worktrees                every launched agent works in a git worktree of its own, on a
                             branch from the project's current one (see worktrees --help)
  --notify-command PROGRAM   run PROGRAM (no shell) when an agent starts waiting for you or
                             is done: its arguments are a summary and a body (as notify-send
                             takes them), TERMSPRAWL_AGENT, _STATE, _WHY, _REASON and _PROJECT
                             in its environment
  -h, --help                 print this help

The data directory defaults to $XDG_DATA_HOME/termsprawl-tools, else
~/.local/share/termsprawl-tools; the other commands' --data default to the same. Every
--data also takes the agent-tools folder inside it (the ready line's directory).

The manual: docs/guide.md, \"termsprawl-tools serve\".";

const STOP_TERMINALS: &str = "\
termsprawl-tools stop-terminals: ends the private tmux server of a data directory, and every
terminal in it (tmux terminals outlive serve). When none runs there, it says so and exits 0;
it creates nothing.

Usage: termsprawl-tools stop-terminals [--data DIR]

Options:
  --data DIR   data directory (default: serve's)
  -h, --help   print this help";

const ACTIVITY: &str = "\
termsprawl-tools activity: prints the activity trail, one line per call agents made, for
people (every field escaped for the terminal and cut; times in UTC).

Usage: termsprawl-tools activity [--data DIR] [--project-id ID] [--follow] [--json]

Options:
  --data DIR        data directory (default: serve's)
  --project-id ID   the project whose trail to print (needed when several have one)
  --follow          print the last ten lines, then each new one as it is written
  --json            print the lines as the file holds them, for scripts
  -h, --help        print this help";

const APPROVALS: &str = "\
termsprawl-tools approvals: lists the calls the policy holds for your answer, and answers
them, while serve runs.

Usage: termsprawl-tools approvals list [--json] [--data DIR]
       termsprawl-tools approvals allow ID [--for-session|--always] [--data DIR]
       termsprawl-tools approvals deny ID [--reason TEXT] [--data DIR]

  list       print the waiting calls: id, agent, operation, class and arguments
  allow ID   run the call ID (as listed) once
  deny ID    refuse the call ID; the agent is told so, with your reason

Options:
  --json          (list) one JSON object a line
  --for-session   (allow) also allow that class for that agent until serve stops
  --always        (allow) also save allow as that agent's rule for that class
  --reason TEXT   (deny) the reason the agent is told
  --data DIR      data directory of the running serve (default: serve's)
  -h, --help      print this help";

const POLICY: &str = "\
termsprawl-tools policy: shows or sets the rules of what agents may do, while serve runs.

Usage: termsprawl-tools policy show [--json] [--data DIR]
       termsprawl-tools policy set CLASS RULE [--agent NODE] [--data DIR]

  show             print the starting policy, the saved rules and this session's grants
  set CLASS RULE   save RULE (allow, ask or deny) for CLASS, for the project or one agent

  CLASS: read, canvas, terminals-own, terminals-others, terminals-unconfined, browser,
         launch, messaging

Options:
  --json         (show) print the rules as one JSON object
  --agent NODE   (set) for this agent only; it must have a session in the data directory
  --data DIR     data directory of the running serve (default: serve's)
  -h, --help     print this help";

const BROWSER_CONTROL: &str = "\
termsprawl-tools browser-control: switches agent browser control of the running serve on or
off, and returns once serve applied it. The switch lasts while that serve runs.

Usage: termsprawl-tools browser-control on|off [--data DIR]

Options:
  --data DIR   data directory of the running serve (default: serve's)
  -h, --help   print this help";

const LINK: &str = "\
termsprawl-tools link: links agent A to agent B of a folder project: each may then read the
other's transcript (context_read); serve need not run.

Usage: termsprawl-tools link A B [--messages] [--project DIR]

Options:
  --messages      also let A send work to B (agent messages, in that direction only)
  --project DIR   project folder (default: the current folder)
  -h, --help      print this help";

const UNLINK: &str = "\
termsprawl-tools unlink: removes the link from agent A to agent B of a folder project.

Usage: termsprawl-tools unlink A B [--project DIR]

Options:
  --project DIR   project folder (default: the current folder)
  -h, --help      print this help";

const WORKTREES: &str = "\
termsprawl-tools worktrees: the git worktrees agents work in (agent_launch with worktree,
or serve --worktrees): list them, show one's diff against its base, merge it into its base
branch in the project's checkout, or remove it; serve need not run.

Usage: termsprawl-tools worktrees list [--json] [--project DIR]
       termsprawl-tools worktrees diff NODE [--project DIR]
       termsprawl-tools worktrees merge NODE [--project DIR]
       termsprawl-tools worktrees discard NODE [--delete-branch] [--force] [--project DIR]

Options:
  --json            list: one JSON object per line
  --delete-branch   discard: delete the branch too (only once merged, unless --force)
  --force           discard: also when that loses uncommitted work or unmerged commits
  --project DIR     project folder (default: the current folder)
  --data DIR        data folder, whose activity trail records merges and discards
                    (default: as serve's)
  -h, --help        print this help

merge fast-forwards when it can, else makes a merge commit; it refuses, changing nothing,
while a process still works in the worktree, when the worktree has uncommitted changes,
when the project's checkout is on another branch or has uncommitted changes, and on a
conflict (naming the files).";

const CATALOGUE: &str = "\
termsprawl-tools catalogue: prints every operation agents can call as a JSON array, with its
input schema, output schema and MCP hints.

Usage: termsprawl-tools catalogue

Options:
  -h, --help   print this help";

const VALIDATE: &str = "\
termsprawl-tools validate: reads one JSON request ({\"operation\": ..., \"args\": {...}}) on
stdin and prints the validator's answer; exit 0 valid, 1 rejected, 2 not JSON.

Usage: termsprawl-tools validate < REQUEST.json

Options:
  -h, --help   print this help";

/// What `termsprawl-tools --help` prints: the commands, a line each.
pub fn overview() -> String {
    let width = COMMANDS.iter().map(|c| c.name.len()).max().unwrap_or(0);
    let commands: Vec<String> = COMMANDS
        .iter()
        .map(|c| format!("  {:width$}  {}", c.name, c.summary))
        .collect();
    format!(
        "termsprawl-tools {}: the agent tool server and the person's commands around it.

Usage: termsprawl-tools COMMAND [OPTIONS]

Commands:
{}
  {:width$}  termsprawlctl's commands, for a build without it (termsprawlctl --help)

Options:
  -h, --help   print this help (after a command: that command's)
  --version    print the version

Run 'termsprawl-tools COMMAND --help' for a command's options. The manual: docs/guide.md.",
        env!("CARGO_PKG_VERSION"),
        commands.join("\n"),
        "call|doctor|mcp",
    )
}

/// The command named `name`.
pub fn command(name: &str) -> Option<&'static CommandHelp> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// The options `command`'s help describes: the `--name` words before the explanation of
/// each line that starts (after its indent) with `-`. Empty for an unknown command.
pub fn options(command: &str) -> Vec<&'static str> {
    let text = self::command(command).map_or("", |c| c.text);
    text.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .flat_map(|line| {
            let synopsis = line.split("  ").next().unwrap_or("");
            synopsis.split(' ').filter_map(|word| {
                let name = word.trim_end_matches(',');
                name.starts_with("--").then_some(name)
            })
        })
        .collect()
}

/// A command's refusal of `word`, which none of its options matched: an unexpected
/// argument, or an unknown option with the nearest one `command`'s help describes.
pub fn unknown_word(command: &str, word: &str) -> String {
    if !word.starts_with('-') {
        return format!("unexpected argument {word}");
    }
    let flag = word.split_once('=').map_or(word, |(flag, _)| flag);
    match nearest_name(flag, options(command)) {
        Some(near) => format!("unknown option {word} (did you mean {near}?)"),
        None => format!("unknown option {word}"),
    }
}

/// The refusal of a first word that is no command (or an unknown option before one).
pub fn unknown_command(word: &str) -> String {
    let near = |names: &[&'static str]| match nearest_name(word, names.iter().copied()) {
        Some(near) => format!(" (did you mean {near}?)"),
        None => String::new(),
    };
    match word.starts_with('-') {
        true => format!("unknown option {word}{}", near(&["--help", "--version"])),
        false => {
            let names: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
            format!("unknown command {word}{}", near(&names))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::OPERATION_CLASSES;

    #[test]
    fn options_are_read_from_the_option_lines() {
        assert_eq!(options("stop-terminals"), ["--data", "--help"]);
        assert_eq!(
            options("approvals"),
            [
                "--json",
                "--for-session",
                "--always",
                "--reason",
                "--data",
                "--help"
            ]
        );
        assert!(options("nope").is_empty());
    }

    #[test]
    fn refusals_name_the_word_and_what_is_near() {
        assert_eq!(
            unknown_word("serve", "--brwser"),
            "unknown option --brwser (did you mean --browser?)"
        );
        assert_eq!(
            unknown_word("serve", "--projct=x"),
            "unknown option --projct=x (did you mean --project?)"
        );
        assert_eq!(unknown_word("serve", "--zzz"), "unknown option --zzz");
        assert_eq!(unknown_word("serve", "here"), "unexpected argument here");
        assert_eq!(
            unknown_command("serv"),
            "unknown command serv (did you mean serve?)"
        );
        assert_eq!(
            unknown_command("--versoin"),
            "unknown option --versoin (did you mean --version?)"
        );
    }

    #[test]
    fn every_line_fits_a_wide_terminal() {
        let overview = overview();
        let texts = COMMANDS.iter().map(|c| c.text).chain([overview.as_str()]);
        for line in texts.flat_map(str::lines) {
            assert!(line.chars().count() <= 100, "{line}");
        }
    }

    #[test]
    fn every_command_is_in_the_overview_and_every_class_in_policy() {
        let overview = overview();
        for command in COMMANDS {
            assert!(overview.contains(command.name), "{}", command.name);
            assert!(command.text.contains("Usage: termsprawl-tools "));
        }
        for class in OPERATION_CLASSES {
            assert!(POLICY.contains(class.name()), "{}", class.name());
        }
    }
}
