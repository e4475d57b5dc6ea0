//! Agent launch preparation: the user's preferences, the `termsprawlctl` launcher and the
//! per-agent launch folder `launch/<nodeId>/` with its instructions, skills and MCP config.
//! Nothing here writes into a user's own agent configuration files.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::agents::{help_has_word, select_launch_adapter, shell_quote, AgentProbe, LaunchAdapter};
use crate::base::files::{holds_private_file, private_dir, private_json, regenerated_write};
use crate::protocol::{guide, is_valid_node_id, IntegrationState, IntegrationStatus, TOOL_GUIDES};

/// The launcher's file name inside `<data>/agent-tools/`.
pub const LAUNCHER_NAME: &str = "termsprawlctl";
/// The MCP server name agents see.
pub const MCP_SERVER_NAME: &str = "termsprawl";

/// What `preferences.json` says about custom agents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preferences {
    /// `custom.executable`: what `agent_launch {agent: "custom"}` starts.
    pub custom_executable: Option<String>,
    /// `custom.instructionFlag`: the flag that passes the custom agent its instructions.
    pub custom_instruction_flag: Option<String>,
}

/// Reads `preferences.json`; a missing file means no preferences, anything malformed is an
/// error that names the file.
pub fn load_preferences(path: &Path) -> Result<Preferences, String> {
    let malformed = |why: &str| format!("Malformed preferences file {}: {why}", path.display());
    let value: Value = match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| malformed(&e.to_string()))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Preferences::default()),
        Err(e) => return Err(malformed(&e.to_string())),
    };
    let root = value
        .as_object()
        .ok_or_else(|| malformed("expected a JSON object"))?;
    let Some(custom) = root.get("custom") else {
        return Ok(Preferences::default());
    };
    let custom = custom
        .as_object()
        .ok_or_else(|| malformed("custom must be an object"))?;
    let text = |key: &str| -> Result<Option<String>, String> {
        match custom.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() && !s.contains('\0') => {
                Ok(Some(s.trim().to_string()))
            }
            Some(_) => Err(malformed(&format!(
                "custom.{key} must be a non-empty string"
            ))),
        }
    };
    let preferences = Preferences {
        custom_executable: text("executable")?,
        custom_instruction_flag: text("instructionFlag")?,
    };
    if matches!(&preferences.custom_instruction_flag, Some(flag) if !is_instruction_flag(flag)) {
        return Err(malformed(
            "custom.instructionFlag must look like --flag-name",
        ));
    }
    Ok(preferences)
}

/// `^--[a-z][a-z-]*$`
fn is_instruction_flag(flag: &str) -> bool {
    let Some(rest) = flag.strip_prefix("--") else {
        return false;
    };
    rest.starts_with(|c: char| c.is_ascii_lowercase())
        && rest.chars().all(|c| c.is_ascii_lowercase() || c == '-')
}

/// Installs `<dir>/termsprawlctl`, a 0700 `#!/bin/sh` script that `exec`s `ctl_executable`
/// with the agent's arguments, and returns its path.
pub fn install_launcher(dir: &Path, ctl_executable: &Path) -> io::Result<PathBuf> {
    let target = ctl_executable
        .to_str()
        .ok_or_else(|| io::Error::other("the termsprawlctl path is not UTF-8"))?;
    let launcher = dir.join(LAUNCHER_NAME);
    let script = format!("#!/bin/sh\nexec {} \"$@\"\n", shell_quote(target));
    write_unless_same(&launcher, script.as_bytes(), 0o700)?;
    Ok(launcher)
}

/// `regenerated_write` with permission bits `mode`, skipped when `path` already holds
/// `bytes` with `mode` (a restart finds the launcher and an agent's guides in place).
fn write_unless_same(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    if holds_private_file(path, bytes, mode) {
        return Ok(());
    }
    regenerated_write(path, bytes, mode)
}

/// What [`prepare_tool_launch`] needs.
#[derive(Clone, Debug)]
pub struct LaunchInput<'a> {
    /// `<data>/agent-tools/launch`.
    pub launch_root: &'a Path,
    /// The agent's node id (a safe file name).
    pub node_id: &'a str,
    /// The command line the host was going to run; our arguments are appended to it.
    pub command: &'a str,
    /// The probed CLI.
    pub probe: &'a AgentProbe,
    /// The user's `custom.instructionFlag`, for a custom agent.
    pub instruction_flag: Option<&'a str>,
    /// The agent's session file.
    pub session_file: &'a Path,
    /// The installed `termsprawlctl` launcher.
    pub launcher: &'a Path,
}

/// A prepared launch: run `command` with `env` added; report `status`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedLaunch {
    /// The shell command line to run instead of the original.
    pub command: String,
    /// `TERMSPRAWL_SESSION_FILE`, `TERMSPRAWL_CTL`, `TERMSPRAWL_SYSTEM_PROMPT_FILE` (and
    /// what the adapter needs).
    pub env: BTreeMap<String, String>,
    /// The status to provision the session with.
    pub status: IntegrationStatus,
    /// The launch folder written.
    pub dir: PathBuf,
}

/// The first message for CLIs that take instructions as their first prompt.
const FIRST_PROMPT: &str = "You are connected to Termsprawl tools. Read these instructions, then wait for the user's request.\n\n";

/// Writes `launch/<nodeId>/` (0700, files 0600): `termsprawl-system.md` (the overview
/// guide), `skills/termsprawl-<topic>/SKILL.md` for every guide, and `mcp.json` for
/// Claude; and returns the command, environment and status for the chosen adapter.
pub fn prepare_tool_launch(input: &LaunchInput) -> io::Result<PreparedLaunch> {
    if !is_valid_node_id(input.node_id) {
        return Err(io::Error::other("Invalid agent node ID"));
    }
    let text = |p: &Path| {
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| io::Error::other("path is not UTF-8"))
    };
    let session_file = text(input.session_file)?;
    let launcher = text(input.launcher)?;
    let dir = input.launch_root.join(input.node_id);
    private_dir(&dir)?;
    let overview = guide("overview").unwrap_or_default();
    let system_prompt_file = dir.join("termsprawl-system.md");
    write_unless_same(&system_prompt_file, overview.as_bytes(), 0o600)?;
    for (topic, body) in TOOL_GUIDES {
        let skill_dir = dir.join("skills").join(format!("termsprawl-{topic}"));
        private_dir(&skill_dir)?;
        let skill = format!(
            "---\nname: termsprawl-{topic}\ndescription: \"How to use the Termsprawl {topic} tools; read it before using them.\"\n---\n\n{body}\n"
        );
        write_unless_same(&skill_dir.join("SKILL.md"), skill.as_bytes(), 0o600)?;
    }

    let system_prompt = text(&system_prompt_file)?;
    let server_args = ["--session", session_file.as_str(), "mcp"];
    let adapter = select_launch_adapter(input.probe, input.instruction_flag);
    let mut env = BTreeMap::from([
        ("TERMSPRAWL_SESSION_FILE".to_string(), session_file.clone()),
        ("TERMSPRAWL_CTL".to_string(), launcher.clone()),
        ("TERMSPRAWL_SYSTEM_PROMPT_FILE".to_string(), system_prompt),
    ]);
    let extra: Vec<String> = match &adapter {
        LaunchAdapter::ClaudeMcp => {
            let mcp = dir.join("mcp.json");
            let config = json!({"mcpServers": {MCP_SERVER_NAME: {"command": launcher, "args": server_args}}});
            private_json(&mcp, &config)?;
            let mut extra = vec![
                "--mcp-config".into(),
                text(&mcp)?,
                "--append-system-prompt".into(),
                overview.into(),
            ];
            // Its hooks tell the person when it waits for them (`attention.rs`), from a
            // settings file of this launch only: the user's own stay untouched.
            if help_has_word(&input.probe.help, "--settings") {
                let settings = dir.join("claude-settings.json");
                private_json(&settings, &claude_hooks(&launcher, &session_file))?;
                extra.extend(["--settings".into(), text(&settings)?]);
            }
            extra
        }
        // Codex hands MCP servers only a few environment variables, so the session file
        // travels in the server's arguments. Values are TOML; a JSON string or array of
        // strings is one.
        // Its `notify` program is told when each turn ends: the person is told it is done.
        LaunchAdapter::CodexMcp => vec![
            "-c".into(),
            format!("mcp_servers.{MCP_SERVER_NAME}.command={}", json!(launcher)),
            "-c".into(),
            format!("mcp_servers.{MCP_SERVER_NAME}.args={}", json!(server_args)),
            "-c".into(),
            format!(
                "notify={}",
                json!([
                    launcher.as_str(),
                    "--session",
                    session_file.as_str(),
                    "hook",
                    "codex"
                ])
            ),
        ],
        LaunchAdapter::OpencodeMcp => {
            let command: Vec<&str> = [launcher.as_str()].into_iter().chain(server_args).collect();
            let config = json!({"mcp": {MCP_SERVER_NAME: {"type": "local", "command": command, "enabled": true}}});
            env.insert("OPENCODE_CONFIG_CONTENT".into(), config.to_string());
            Vec::new()
        }
        LaunchAdapter::InstructionFlag(flag) if flag == "--prompt-interactive" => {
            vec![flag.clone(), format!("{FIRST_PROMPT}{overview}")]
        }
        LaunchAdapter::InstructionFlag(flag) => vec![flag.clone(), overview.into()],
        LaunchAdapter::InitialPrompt => vec![format!("{FIRST_PROMPT}{overview}")],
        LaunchAdapter::Unverified => Vec::new(),
    };
    let mut command = input.command.trim().to_string();
    for arg in &extra {
        command += &format!(" {}", shell_quote(arg));
    }
    let name = &input.probe.name;
    let (state, reason) = match &adapter {
        a if a.is_mcp() => (IntegrationState::NeedsSetup, Some("Waiting for the agent's MCP client to connect".to_string())),
        LaunchAdapter::Unverified => (
            IntegrationState::CliFallback,
            Some(format!("Could not verify how {name} takes instructions; it can still call \"$TERMSPRAWL_CTL\" from its shell")),
        ),
        _ => (IntegrationState::CliFallback, None),
    };
    Ok(PreparedLaunch {
        command,
        env,
        status: IntegrationStatus {
            state,
            adapter: adapter.adapter_name(name),
            version: input.probe.version.clone(),
            reason,
        },
        dir,
    })
}

/// Claude Code's settings for a launch: hooks that run `termsprawlctl hook claude` when
/// it needs the person (`Notification`), ends its turn (`Stop`), gets a prompt
/// (`UserPromptSubmit`) or used a tool (`PostToolUse`, after a permission was given).
fn claude_hooks(launcher: &str, session_file: &str) -> Value {
    let command = format!(
        "{} --session {} hook claude",
        shell_quote(launcher),
        shell_quote(session_file)
    );
    let hook = json!([{ "hooks": [{ "type": "command", "command": command, "timeout": 10 }] }]);
    let after_tools = json!([{ "matcher": "*", "hooks": hook[0]["hooks"].clone() }]);
    json!({ "hooks": {
        "Notification": hook, "Stop": hook, "UserPromptSubmit": hook, "PostToolUse": after_tools,
    } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tst-launch-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        private_dir(&dir).unwrap();
        dir
    }

    #[test]
    fn preferences_are_read_and_malformed_ones_name_the_file() {
        let dir = scratch("prefs");
        let path = dir.join("preferences.json");
        assert_eq!(load_preferences(&path), Ok(Preferences::default()));
        fs::write(
            &path,
            r#"{"custom":{"executable":"/opt/aider","instructionFlag":"--message"},"terminal":{}}"#,
        )
        .unwrap();
        assert_eq!(
            load_preferences(&path),
            Ok(Preferences {
                custom_executable: Some("/opt/aider".into()),
                custom_instruction_flag: Some("--message".into())
            })
        );
        for junk in [
            "{",
            "[]",
            r#"{"custom": 3}"#,
            r#"{"custom":{"executable": 5}}"#,
            r#"{"custom":{"executable": ""}}"#,
            r#"{"custom":{"instructionFlag":"-m"}}"#,
            r#"{"custom":{"instructionFlag":"--Message"}}"#,
            r#"{"custom":{"instructionFlag":"--msg; rm"}}"#,
        ] {
            fs::write(&path, junk).unwrap();
            let error = load_preferences(&path).unwrap_err();
            assert!(error.contains(path.to_str().unwrap()), "{junk}: {error}");
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_unchanged_launcher_is_not_rewritten() {
        let dir = scratch("launcher-same");
        let launcher = install_launcher(&dir, Path::new("/bin/echo")).unwrap();
        let inode = fs::metadata(&launcher).unwrap().ino();
        install_launcher(&dir, Path::new("/bin/echo")).unwrap();
        assert_eq!(fs::metadata(&launcher).unwrap().ino(), inode, "rewritten");
        // Wrong mode or other content: written again (a new file renamed over it).
        fs::set_permissions(&launcher, Permissions::from_mode(0o755)).unwrap();
        install_launcher(&dir, Path::new("/bin/echo")).unwrap();
        let meta = fs::metadata(&launcher).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert_ne!(meta.ino(), inode);
        install_launcher(&dir, Path::new("/bin/true")).unwrap();
        assert!(fs::read_to_string(&launcher).unwrap().contains("/bin/true"));
    }

    #[test]
    fn launcher_execs_the_binary_with_quoted_path() {
        let dir = scratch("launcher");
        let launcher = install_launcher(&dir, Path::new("/opt/my tools/termsprawlctl")).unwrap();
        assert_eq!(
            fs::read_to_string(&launcher).unwrap(),
            "#!/bin/sh\nexec '/opt/my tools/termsprawlctl' \"$@\"\n"
        );
        assert_eq!(
            fs::metadata(&launcher).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // It really runs: exec /bin/echo with the arguments intact.
        let launcher = install_launcher(&dir, Path::new("/bin/echo")).unwrap();
        let out = std::process::Command::new(&launcher)
            .args(["a b", "c"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b c\n");
        fs::remove_dir_all(dir).unwrap();
    }
}
