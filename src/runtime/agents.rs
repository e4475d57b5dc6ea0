//! The agent CLIs the runtime knows how to launch: the registry, the probe that checks a
//! CLI is installed and reads its own `--help`, and the choice of how to wire it to the
//! tools from what that help says.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::{io::Read, os::unix::fs::PermissionsExt, sync::mpsc, time::Duration};

/// One launchable agent kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentPreset {
    /// The `agent_launch` argument (`claude`, …, `custom`).
    pub kind: &'static str,
    /// The command that starts it; `None` for `custom` (from `preferences.json`).
    pub command: Option<&'static str>,
    /// A human name.
    pub title: &'static str,
}

/// Every agent `agent_launch` can start (the spec's `AGENT_REGISTRY`).
pub const AGENT_REGISTRY: &[AgentPreset] = &[
    AgentPreset::new("claude", Some("claude"), "Claude Code"),
    AgentPreset::new("codex", Some("codex"), "Codex CLI"),
    AgentPreset::new("gemini", Some("gemini"), "Gemini CLI"),
    AgentPreset::new("grok", Some("grok"), "Grok CLI"),
    AgentPreset::new("openclaude", Some("openclaude"), "OpenClaude"),
    AgentPreset::new("custom", None, "Custom agent"),
];

impl AgentPreset {
    const fn new(kind: &'static str, command: Option<&'static str>, title: &'static str) -> Self {
        AgentPreset {
            kind,
            command,
            title,
        }
    }
}

/// The registry entry of an `agent_launch` kind.
pub fn find_preset(kind: &str) -> Option<&'static AgentPreset> {
    AGENT_REGISTRY.iter().find(|p| p.kind == kind)
}

/// How long `--help` and `--version` may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How much of their output is read.
pub const PROBE_OUTPUT_CAP: usize = 256 * 1024;

/// What probing an agent CLI found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentProbe {
    /// The executable, as found on `PATH` (not resolved through symlinks).
    pub path: PathBuf,
    /// Its file name, which names the CLI (`claude`, `codex`, …).
    pub name: String,
    /// What `--help` printed on stdout (empty if it printed nothing in time).
    pub help: String,
    /// The first line `--version` printed, if any.
    pub version: Option<String>,
}

/// Finds `command` (a name looked up on `PATH`, or an absolute path), requires an
/// executable regular file, and runs `--help` and `--version` on it (stdin closed,
/// stderr ignored, [`PROBE_TIMEOUT`] each, [`PROBE_OUTPUT_CAP`] of stdout kept).
pub fn probe_agent(command: &str) -> Result<AgentProbe, String> {
    let path = resolve_executable(command, std::env::var_os("PATH").as_deref())
        .ok_or_else(|| format!("{command} is not installed or not executable"))?;
    probe_executable(path)
}

/// What [`probe_agent`] runs once [`resolve_executable`] has found `path`. Fails only when
/// no thread could be started to read its output.
pub(super) fn probe_executable(path: PathBuf) -> Result<AgentProbe, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let help = run_capped(&path, "--help")?.unwrap_or_default();
    let version = run_capped(&path, "--version")?.and_then(|text| {
        let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
        Some(line.chars().take(200).collect())
    });
    Ok(AgentProbe {
        path,
        name,
        help,
        version,
    })
}

/// `command` on `path_var` (or itself when absolute), if it is an executable regular file.
pub fn resolve_executable(command: &str, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if command.is_empty() || command.contains('\0') {
        return None;
    }
    if command.contains('/') {
        let path = PathBuf::from(command);
        return (path.is_absolute() && is_executable_file(&path)).then_some(path);
    }
    std::env::split_paths(path_var?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `path arg` and returns up to the cap of its stdout, or `None` if it could not run
/// or did not finish in time (it is then killed). `Err` when no reader thread could be
/// started (the child is then killed too).
fn run_capped(path: &Path, arg: &str) -> Result<Option<String>, String> {
    let spawned = Command::new(path)
        .arg(arg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("NO_COLOR", "1")
        .spawn();
    let Ok(mut child) = spawned else {
        return Ok(None);
    };
    let stdout = child.stdout.take().expect("stdout is piped");
    let (done, output) = mpsc::channel();
    let reader = std::thread::Builder::new()
        .name("agent-probe".into())
        .spawn(move || {
            let mut bytes = Vec::new();
            let _ = stdout.take(PROBE_OUTPUT_CAP as u64).read_to_end(&mut bytes);
            let _ = done.send(bytes);
        });
    let bytes = reader.map(|_| output.recv_timeout(PROBE_TIMEOUT).ok());
    // Whether it finished, filled the cap or hung: it has said all we will read.
    let _ = child.kill();
    let _ = child.wait();
    let bytes = bytes.map_err(|e| {
        format!(
            "Could not start a thread to probe {} ({e}); try again",
            path.display()
        )
    })?;
    Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// How an agent CLI is wired to the tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchAdapter {
    /// Claude Code: `--mcp-config <file>` and `--append-system-prompt <text>`.
    ClaudeMcp,
    /// Codex: `-c mcp_servers.termsprawl.command=…` and `-c mcp_servers.termsprawl.args=…`.
    CodexMcp,
    /// opencode: a whole config with the MCP server in `OPENCODE_CONFIG_CONTENT`.
    OpencodeMcp,
    /// The CLI takes its first instructions through this flag.
    InstructionFlag(String),
    /// The CLI takes its first prompt as a positional argument.
    InitialPrompt,
    /// Nothing in its help says how to pass instructions; it can still use the CLI.
    Unverified,
}

impl LaunchAdapter {
    /// The status adapter name reported for a CLI called `name`.
    pub fn adapter_name(&self, name: &str) -> String {
        match self {
            LaunchAdapter::ClaudeMcp => "claude-mcp".into(),
            LaunchAdapter::CodexMcp => "codex-mcp".into(),
            LaunchAdapter::OpencodeMcp => "opencode-mcp".into(),
            LaunchAdapter::InstructionFlag(_) => format!("{name}-instructions"),
            LaunchAdapter::InitialPrompt => format!("{name}-prompt"),
            LaunchAdapter::Unverified => format!("{name}-unverified"),
        }
    }

    /// Whether the agent reaches the tools over MCP (and reports `connected` when it does).
    pub fn is_mcp(&self) -> bool {
        matches!(
            self,
            LaunchAdapter::ClaudeMcp | LaunchAdapter::CodexMcp | LaunchAdapter::OpencodeMcp
        )
    }
}

/// Chooses the adapter from the executable's name AND its own `--help`: a flag is used
/// only when the installed version says it has it. `instruction_flag` is the user's
/// `custom.instructionFlag`, used for a CLI we have no rule for.
pub fn select_launch_adapter(probe: &AgentProbe, instruction_flag: Option<&str>) -> LaunchAdapter {
    let help = probe.help.as_str();
    let has = |flag: &str| help_has_word(help, flag);
    let has_prompt_positional =
        help.contains("[PROMPT]") || help.contains("[prompt]") || help.contains("[message...]");
    match probe.name.as_str() {
        "claude" if has("--mcp-config") && has("--append-system-prompt") => {
            LaunchAdapter::ClaudeMcp
        }
        "codex" if has("--config") && has("mcp") => LaunchAdapter::CodexMcp,
        // opencode documents OPENCODE_CONFIG_CONTENT, not in --help; require its own
        // help to be opencode's and to list its MCP commands.
        "opencode" if help.contains("opencode") && has("mcp") => LaunchAdapter::OpencodeMcp,
        "gemini" if has("--prompt-interactive") => {
            LaunchAdapter::InstructionFlag("--prompt-interactive".into())
        }
        "gemini" | "grok" | "openclaude" if has_prompt_positional => LaunchAdapter::InitialPrompt,
        _ => match instruction_flag {
            Some(flag) => LaunchAdapter::InstructionFlag(flag.to_string()),
            None => LaunchAdapter::Unverified,
        },
    }
}

/// Whether `word` (a flag such as `--config`, or a command) appears in `help` whole, not
/// as part of a longer flag or word: `-` and `_` are word characters.
pub(super) fn help_has_word(help: &str, word: &str) -> bool {
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .any(|w| w == word)
}

/// `text` quoted for a POSIX shell (left bare when it is plainly safe).
pub fn shell_quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c));
    if safe {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn probe(name: &str, help: &str) -> AgentProbe {
        AgentProbe {
            path: PathBuf::from(format!("/usr/bin/{name}")),
            name: name.into(),
            help: help.into(),
            version: None,
        }
    }

    #[test]
    fn registry_matches_the_catalogue() {
        let kinds: Vec<_> = AGENT_REGISTRY.iter().map(|p| p.kind).collect();
        assert_eq!(kinds, crate::protocol::AGENT_KINDS);
        assert_eq!(find_preset("codex").unwrap().command, Some("codex"));
        assert_eq!(find_preset("custom").unwrap().command, None);
    }

    #[test]
    fn shell_quotes() {
        assert_eq!(shell_quote("/usr/bin/claude"), "/usr/bin/claude");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$(x)"), "'$(x)'");
    }

    #[test]
    fn flags_match_whole() {
        assert!(help_has_word("  --config <k=v>  set", "--config"));
        assert!(!help_has_word("  --config-file <f>", "--config"));
        assert!(!help_has_word("  --mcp-config-x", "--mcp-config"));
        assert!(help_has_word("  mcp  Run MCP server", "mcp"));
        assert!(!help_has_word("  mcp-server  x", "mcp"));
    }

    #[test]
    fn resolves_on_path_only_executable_files() {
        let dir = std::env::temp_dir().join(format!("tst-agents-path-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin/folder-cli")).unwrap();
        fs::write(dir.join("bin/plain"), "x").unwrap();
        fs::write(dir.join("bin/tool"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(dir.join("bin/tool"), fs::Permissions::from_mode(0o755)).unwrap();
        let path_var =
            std::env::join_paths(["relative", dir.join("bin").to_str().unwrap()]).unwrap();
        assert_eq!(
            resolve_executable("tool", Some(&path_var)),
            Some(dir.join("bin/tool"))
        );
        assert_eq!(resolve_executable("plain", Some(&path_var)), None);
        assert_eq!(resolve_executable("folder-cli", Some(&path_var)), None);
        assert_eq!(resolve_executable("missing", Some(&path_var)), None);
        assert_eq!(resolve_executable("bin/tool", Some(&path_var)), None);
        let absolute = dir.join("bin/tool");
        assert_eq!(
            resolve_executable(absolute.to_str().unwrap(), None),
            Some(absolute.clone())
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn probe_reads_help_and_version_and_survives_a_hang() {
        let dir = std::env::temp_dir().join(format!("tst-agents-probe-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let cli = dir.join("claude");
        fs::write(&cli, "#!/bin/sh\ncase \"$1\" in --help) echo '  --mcp-config <f>'; echo '  --append-system-prompt <p>';; --version) echo; echo '2.0.1 (Claude Code)'; echo 'err' >&2;; esac\n").unwrap();
        fs::set_permissions(&cli, fs::Permissions::from_mode(0o755)).unwrap();
        let found = probe_agent(cli.to_str().unwrap()).unwrap();
        assert_eq!(found.name, "claude");
        assert_eq!(found.version.as_deref(), Some("2.0.1 (Claude Code)"));
        assert_eq!(
            select_launch_adapter(&found, None),
            LaunchAdapter::ClaudeMcp
        );
        // A CLI that prints forever is capped; one that hangs is killed at the deadline.
        let flood = dir.join("flood");
        fs::write(&flood, "#!/bin/sh\nexec yes\n").unwrap();
        fs::set_permissions(&flood, fs::Permissions::from_mode(0o755)).unwrap();
        let flooded = probe_agent(flood.to_str().unwrap()).unwrap();
        assert_eq!(flooded.help.len(), PROBE_OUTPUT_CAP);
        let hang = dir.join("hang");
        fs::write(
            &hang,
            "#!/bin/sh\n[ \"$1\" = --version ] && exec sleep 30\necho '[PROMPT]'\n",
        )
        .unwrap();
        fs::set_permissions(&hang, fs::Permissions::from_mode(0o755)).unwrap();
        let hung = probe_agent(hang.to_str().unwrap()).unwrap();
        assert_eq!((hung.help.as_str(), hung.version), ("[PROMPT]\n", None));
        assert!(probe_agent(dir.join("nope").to_str().unwrap())
            .unwrap_err()
            .contains("not installed"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn selects_adapters_from_sample_help_texts() {
        let claude = "Usage: claude [options] [command] [prompt]\n  --mcp-config <configs...>  Load MCP servers\n  --append-system-prompt <prompt>  Append a system prompt\n";
        let old_claude = "Usage: claude [options] [prompt]\n  --print\n";
        let codex = "Usage: codex [OPTIONS] [PROMPT]\n  -c, --config <key=value>  Override a configuration value\nCommands:\n  mcp  [experimental] Run Codex as an MCP server\n";
        let gemini = "Usage: gemini [options] [command]\n  -i, --prompt-interactive  Execute the provided prompt and continue in interactive mode\n";
        let old_gemini = "gemini [prompt]\n  -p, --prompt  Prompt\n";
        let grok = "Usage: grok [options] [message...]\n  -d, --directory <dir>\n";
        let openclaude = "Usage: openclaude [options] [PROMPT]\n";
        let opencode = "opencode [project]\nCommands:\n  opencode mcp  manage MCP (model context protocol) servers\n";
        let cases = [
            (
                probe("claude", claude),
                LaunchAdapter::ClaudeMcp,
                "claude-mcp",
            ),
            (
                probe("claude", old_claude),
                LaunchAdapter::Unverified,
                "claude-unverified",
            ),
            (probe("codex", codex), LaunchAdapter::CodexMcp, "codex-mcp"),
            (
                probe("codex", "Usage: codex [PROMPT]\n"),
                LaunchAdapter::Unverified,
                "codex-unverified",
            ),
            (
                probe("gemini", gemini),
                LaunchAdapter::InstructionFlag("--prompt-interactive".into()),
                "gemini-instructions",
            ),
            (
                probe("gemini", old_gemini),
                LaunchAdapter::InitialPrompt,
                "gemini-prompt",
            ),
            (
                probe("grok", grok),
                LaunchAdapter::InitialPrompt,
                "grok-prompt",
            ),
            (
                probe("openclaude", openclaude),
                LaunchAdapter::InitialPrompt,
                "openclaude-prompt",
            ),
            (
                probe("opencode", opencode),
                LaunchAdapter::OpencodeMcp,
                "opencode-mcp",
            ),
            (
                probe("grok", "Usage: grok [options]\n"),
                LaunchAdapter::Unverified,
                "grok-unverified",
            ),
            (
                probe("aider", claude),
                LaunchAdapter::Unverified,
                "aider-unverified",
            ),
        ];
        for (found, adapter, name) in cases {
            let chosen = select_launch_adapter(&found, None);
            assert_eq!(chosen, adapter, "{}: {}", found.name, found.help);
            assert_eq!(chosen.adapter_name(&found.name), name);
        }
        let custom = select_launch_adapter(&probe("aider", ""), Some("--message"));
        assert_eq!(custom, LaunchAdapter::InstructionFlag("--message".into()));
        assert_eq!(custom.adapter_name("aider"), "aider-instructions");
    }
}
