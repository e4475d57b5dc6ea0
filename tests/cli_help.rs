//! `--help`, `-h` and `--version` of both binaries, run as a person runs them: every command
//! and subcommand answers its help (exit 0, stdout) without doing anything; every option a
//! parser accepts is described in its command's help, and every option described is
//! accepted; a usage error names what was wrong first, then points to `--help`.
#![cfg(feature = "host")] // runs termsprawl-tools, built only with the host
#![deny(unsafe_code)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

const TOOLS: &str = env!("CARGO_BIN_EXE_termsprawl-tools");
const CTL: &str = env!("CARGO_BIN_EXE_termsprawlctl");

/// Runs `binary WORDS` with no session in the environment and stdin closed.
fn run(binary: &str, words: &[&str]) -> Output {
    Command::new(binary)
        .args(words)
        .env_remove("TERMSPRAWL_SESSION_FILE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The help `binary WORDS` prints, checked to be a help: exit 0, on stdout only.
fn help_of(binary: &str, words: &[&str]) -> String {
    let out = run(binary, words);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{words:?}: {stderr}");
    assert!(stderr.is_empty(), "{words:?}: {stderr}");
    assert!(stdout.contains("Usage: "), "{words:?}: {stdout}");
    assert!(stdout.contains("-h, --help"), "{words:?}: {stdout}");
    stdout
}

/// The options a help describes: the `--name` words before the explanation of each line
/// that starts (after its indent) with `-`.
fn described(help: &str) -> BTreeSet<String> {
    let mut options = BTreeSet::new();
    for line in help.lines().map(str::trim_start) {
        if !line.starts_with('-') {
            continue;
        }
        let synopsis = line.split("  ").next().unwrap();
        for word in synopsis.split(' ') {
            let name = word.trim_end_matches(',');
            if name.starts_with("--") {
                options.insert(name.to_string());
            }
        }
    }
    options
}

/// The commands of `termsprawl-tools` with their subcommands (each answers its command's
/// help), as the person runs them.
const COMMANDS: &[(&str, &[&str])] = &[
    ("serve", &[]),
    ("stop-terminals", &[]),
    ("activity", &[]),
    ("approvals", &["list", "allow", "deny"]),
    ("policy", &["show", "set"]),
    ("browser-control", &["on", "off"]),
    ("link", &[]),
    ("unlink", &[]),
    ("worktrees", &[]),
    ("catalogue", &[]),
    ("validate", &[]),
];

#[test]
fn every_command_and_subcommand_of_termsprawl_tools_answers_its_help() {
    for flag in ["--help", "-h"] {
        let overview = help_of(TOOLS, &[flag]);
        // The overview lists each command with a line, and no other.
        let listed: Vec<&str> = overview
            .lines()
            .skip_while(|line| *line != "Commands:")
            .skip(1)
            .take_while(|line| !line.is_empty())
            .filter_map(|line| line.split_whitespace().next())
            .filter(|name| !name.contains('|'))
            .collect();
        let names: Vec<&str> = COMMANDS.iter().map(|(name, _)| *name).collect();
        assert_eq!(listed, names, "{overview}");
        for (command, subcommands) in COMMANDS {
            let help = help_of(TOOLS, &[command, flag]);
            assert!(
                help.starts_with(&format!("termsprawl-tools {command}: ")),
                "{help}"
            );
            assert!(
                help.contains(&format!("Usage: termsprawl-tools {command}")),
                "{help}"
            );
            for subcommand in *subcommands {
                assert_eq!(help_of(TOOLS, &[command, subcommand, flag]), help);
            }
        }
    }
}

#[test]
fn help_does_nothing_else() {
    let root = PathBuf::from(format!("/tmp/tsh-{}-nothing", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let data = root.join("data");
    let data = data.to_str().unwrap();
    // Each would create or write under `data` (or wait for a serve) if it ran.
    for words in [
        &["serve", "--data", data, "--terminals", "pty", "--help"][..],
        &["stop-terminals", "--data", data, "-h"],
        &["browser-control", "on", "--data", data, "--help"],
        &["policy", "set", "launch", "ask", "--data", data, "--help"],
        &["approvals", "allow", "x", "--data", data, "--help"],
    ] {
        help_of(TOOLS, words);
    }
    assert!(!PathBuf::from(data).exists(), "--help made {data}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn every_command_of_termsprawlctl_answers_its_help() {
    let overview = help_of(CTL, &["--help"]);
    assert_eq!(help_of(CTL, &["-h"]), overview);
    assert_eq!(help_of(CTL, &["help"]), overview);
    assert_eq!(
        help_of(CTL, &["--session", "/nowhere.json", "--help"]),
        overview
    );
    for command in ["call", "doctor", "mcp"] {
        assert!(overview.contains(&format!("\n  {command} ")), "{overview}");
        let help = help_of(CTL, &[command, "--help"]);
        assert!(
            help.starts_with(&format!("termsprawlctl {command}: ")),
            "{help}"
        );
        assert_eq!(help_of(CTL, &[command, "-h"]), help);
        assert_eq!(help_of(CTL, &["--session", "/s.json", command, "-h"]), help);
        // termsprawl-tools answers termsprawlctl's commands (a build without it).
        assert_eq!(help_of(TOOLS, &[command, "--help"]), help);
        // Every command takes --session, before it.
        assert!(described(&help).contains("--session"), "{help}");
    }
    assert_eq!(
        described(&overview),
        ["--help", "--session", "--version"]
            .map(String::from)
            .into()
    );
}

#[test]
fn both_binaries_print_their_version() {
    let version = env!("CARGO_PKG_VERSION");
    for (binary, name) in [(TOOLS, "termsprawl-tools"), (CTL, "termsprawlctl")] {
        let out = run(binary, &["--version"]);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(text(&out.stdout), format!("{name} {version}\n"));
        assert!(out.stderr.is_empty());
    }
}

/// Whether `termsprawl-tools WORDS` parses every word: followed by an option no command
/// has, that one must be the refusal. (Nothing runs: the refusal ends the command.)
fn parses(words: &[&str]) -> bool {
    let command = words[0];
    let mut probe = words.to_vec();
    probe.push("--zz-probe");
    let out = run(TOOLS, &probe);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{probe:?}: {stderr}");
    let first = stderr.lines().next().unwrap_or("");
    first == format!("termsprawl-tools {command}: unknown option --zz-probe")
}

/// An option, and the words of a command line with it (subcommand, arguments, value).
type Probe = (&'static str, &'static [&'static str]);

/// Each command's options as its parser takes them.
const ACCEPTED: &[(&str, &[Probe])] = &[
    (
        "serve",
        &[
            ("--data", &["serve", "--data", "/d"]),
            ("--project", &["serve", "--project", "/p"]),
            ("--project-id", &["serve", "--project-id", "p1"]),
            ("--agent", &["serve", "--agent", "me=claude-mcp"]),
            ("--browser", &["serve", "--browser"]),
            ("--terminals", &["serve", "--terminals", "pty"]),
            ("--kill-terminals", &["serve", "--kill-terminals"]),
            ("--no-view", &["serve", "--no-view"]),
            ("--view-only", &["serve", "--view-only"]),
            ("--no-activity", &["serve", "--no-activity"]),
            ("--no-query-filter", &["serve", "--no-query-filter"]),
            ("--policy", &["serve", "--policy", "careful"]),
            ("--isolation", &["serve", "--isolation", "off"]),
            ("--worktrees", &["serve", "--worktrees"]),
            (
                "--notify-command",
                &["serve", "--notify-command", "notify-send"],
            ),
        ],
    ),
    (
        "stop-terminals",
        &[("--data", &["stop-terminals", "--data", "/d"])],
    ),
    (
        "activity",
        &[
            ("--data", &["activity", "--data", "/d"]),
            ("--project-id", &["activity", "--project-id", "p1"]),
            ("--follow", &["activity", "--follow"]),
            ("--json", &["activity", "--json"]),
        ],
    ),
    (
        "approvals",
        &[
            ("--json", &["approvals", "list", "--json"]),
            (
                "--for-session",
                &["approvals", "allow", "1", "--for-session"],
            ),
            ("--always", &["approvals", "allow", "1", "--always"]),
            ("--reason", &["approvals", "deny", "1", "--reason", "no"]),
            ("--data", &["approvals", "list", "--data", "/d"]),
        ],
    ),
    (
        "policy",
        &[
            ("--json", &["policy", "show", "--json"]),
            (
                "--agent",
                &["policy", "set", "launch", "ask", "--agent", "a"],
            ),
            ("--data", &["policy", "show", "--data", "/d"]),
        ],
    ),
    (
        "browser-control",
        &[("--data", &["browser-control", "on", "--data", "/d"])],
    ),
    (
        "link",
        &[
            ("--messages", &["link", "a", "b", "--messages"]),
            ("--project", &["link", "a", "b", "--project", "/p"]),
        ],
    ),
    (
        "unlink",
        &[("--project", &["unlink", "a", "b", "--project", "/p"])],
    ),
    (
        "worktrees",
        &[
            ("--json", &["worktrees", "list", "--json"]),
            (
                "--delete-branch",
                &["worktrees", "discard", "a", "--delete-branch"],
            ),
            ("--force", &["worktrees", "discard", "a", "--force"]),
            ("--project", &["worktrees", "list", "--project", "/p"]),
            ("--data", &["worktrees", "list", "--data", "/d"]),
        ],
    ),
    ("catalogue", &[]),
    ("validate", &[]),
];

#[test]
fn every_option_a_parser_accepts_is_described_and_every_described_one_accepted() {
    let commands: Vec<&str> = ACCEPTED.iter().map(|(command, _)| *command).collect();
    let expected: Vec<&str> = COMMANDS.iter().map(|(command, _)| *command).collect();
    assert_eq!(commands, expected, "a command without its options here");
    for (command, options) in ACCEPTED {
        let mut accepted = BTreeSet::from(["--help".to_string()]);
        for (option, words) in *options {
            assert!(parses(words), "{command} does not accept {words:?}");
            accepted.insert(option.to_string());
        }
        // Not accepted: a made-up option next to real ones.
        let mut made_up = options.first().map_or(vec![*command], |(_, w)| w.to_vec());
        made_up.push("--zz-other");
        assert!(!parses(&made_up), "{made_up:?}");
        let help = help_of(TOOLS, &[command, "--help"]);
        assert_eq!(described(&help), accepted, "{command}'s help:\n{help}");
    }
}

/// `serve`'s parser, read for every option it names: one added to the parser but not to
/// its help (nor to [`ACCEPTED`], where it is probed) fails here, not in a person's hands.
#[test]
fn every_option_serves_parser_names_is_described() {
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/host/options.rs"))
            .unwrap();
    let code = source.split("#[cfg(test)]").next().unwrap();
    let named: BTreeSet<String> = code
        .split("\"--")
        .skip(1)
        .map(|rest| {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            format!("--{name}")
        })
        // `"--"` alone: a prefix the parser looks for, no option.
        .filter(|name| name != "--")
        .collect();
    assert!(named.contains("--no-query-filter"), "{named:?}");
    let help = help_of(TOOLS, &["serve", "--help"]);
    let described = described(&help);
    let (_, probed) = ACCEPTED[0];
    for option in &named {
        assert!(
            described.contains(option),
            "{option} is not in serve --help"
        );
        assert!(
            probed.iter().any(|(name, _)| name == option),
            "{option} is not probed in ACCEPTED"
        );
    }
}

/// `binary WORDS` as a usage error: exit 2, nothing on stdout, the problem on the first
/// line of stderr and where the help is on the second (and nothing more: no usage dump).
fn usage_error(binary: &str, words: &[&str]) -> (String, String) {
    let out = run(binary, words);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{words:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{words:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{words:?}: {stderr}");
    (lines[0].to_string(), lines[1].to_string())
}

#[test]
fn a_usage_error_names_what_was_wrong_then_points_to_help() {
    let ctl_cases: &[(&[&str], &str, &str)] = &[
        (
            &["--sesion", "s.json", "call", "session_info"],
            "termsprawlctl: unknown option --sesion (did you mean --session?)",
            "termsprawlctl",
        ),
        (
            &["call"],
            "termsprawlctl call: missing OPERATION",
            "termsprawlctl call",
        ),
        (
            &["mcp", "--json"],
            "termsprawlctl mcp: unknown option --json",
            "termsprawlctl mcp",
        ),
        (
            &["call", "--session", "s.json", "session_info"],
            "termsprawlctl call: --session goes before the command: termsprawlctl --session FILE call ...",
            "termsprawlctl call",
        ),
        (
            &["cal", "session_info"],
            "termsprawlctl: unknown command cal (did you mean call?)",
            "termsprawlctl",
        ),
    ];
    for (words, problem, name) in ctl_cases {
        let (first, second) = usage_error(CTL, words);
        assert_eq!(first, *problem, "{words:?}");
        assert_eq!(second, format!("Try '{name} --help' for more information."));
    }
    let tools_cases: &[(&[&str], &str, &str)] = &[
        (&[], "termsprawl-tools: missing COMMAND", "termsprawl-tools"),
        (
            &["serv"],
            "termsprawl-tools: unknown command serv (did you mean serve?)",
            "termsprawl-tools",
        ),
        (
            &["serve", "--brwser"],
            "termsprawl-tools serve: unknown option --brwser (did you mean --browser?)",
            "termsprawl-tools serve",
        ),
        (
            &["serve", "--no-view=yes"],
            "termsprawl-tools serve: --no-view takes no value",
            "termsprawl-tools serve",
        ),
        (
            &["stop-terminals", "--project", "x"],
            "termsprawl-tools stop-terminals: unknown option --project",
            "termsprawl-tools stop-terminals",
        ),
        (
            &["approvals", "allow"],
            "termsprawl-tools approvals: allow needs the call's ID (approvals list shows the waiting calls)",
            "termsprawl-tools approvals",
        ),
        (
            &["policy", "set", "lanch", "ask"],
            "termsprawl-tools policy: unknown class lanch (did you mean launch?); expected one of read, canvas, terminals-own, terminals-others, terminals-unconfined, browser, launch, messaging",
            "termsprawl-tools policy",
        ),
        (
            &["catalogue", "--json"],
            "termsprawl-tools catalogue: unexpected argument --json",
            "termsprawl-tools catalogue",
        ),
    ];
    for (words, problem, name) in tools_cases {
        let (first, second) = usage_error(TOOLS, words);
        assert_eq!(first, *problem, "{words:?}");
        assert_eq!(second, format!("Try '{name} --help' for more information."));
    }
}
