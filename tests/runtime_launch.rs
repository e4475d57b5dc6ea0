//! Agent launch preparation through `prepare`: which PTY requests are touched, the
//! launch folder and its modes, the command each adapter gets (run through a real shell
//! to prove the quoting), and the statuses provisioned on the real server.
#![deny(unsafe_code)]

mod fakes;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fakes::{script, Rig, PROJECT};
use serde_json::{json, Value};
use termsprawl_tools::protocol::{guide, IntegrationState, ToolIdentity, GUIDE_TOPICS};
use termsprawl_tools::runtime::PtyRequest;

/// A fake agent CLI: `--help` prints `help`, `--version` prints `version`; any other call
/// writes its arguments, one per line-free record, to `$ARGS_OUT`.
fn fake_cli(dir: &Path, name: &str, help: &str) -> PathBuf {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let path = bin.join(name);
    let help = help.replace('\'', "");
    script(
        &path,
        &format!(
            "case \"$1\" in --help) printf '%s\\n' '{help}';; --version) echo '{name} 9.9.9';; *) for a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$ARGS_OUT\";; esac"
        ),
    );
    path
}

fn pty(node: &str, command: &str) -> PtyRequest {
    PtyRequest {
        node_id: node.into(),
        project_id: Some(PROJECT.into()),
        command: Some(command.into()),
        env: BTreeMap::new(),
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Runs a prepared command line in `sh` and returns the arguments the CLI received.
fn run_in_shell(rig: &Rig, command: &str) -> Vec<String> {
    let out = rig.dir.join("args.out");
    let status = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .env("ARGS_OUT", &out)
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = fs::read(&out).unwrap();
    bytes
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[test]
fn claude_gets_mcp_config_system_prompt_and_private_launch_files() {
    let rig = Rig::new("launch-claude", &["a"]);
    rig.runtime
        .start(Path::new(env!("CARGO_BIN_EXE_termsprawlctl")))
        .unwrap();
    let cli = fake_cli(
        &rig.dir,
        "claude",
        "  --mcp-config <configs...>\n  --append-system-prompt <prompt>\n",
    );
    let original = format!("{} --model opus", cli.display());
    let prepared = rig.runtime.prepare(pty("c1", &original)).unwrap();

    let data = rig.data();
    let launch = data.join("launch/c1");
    let session_file = rig.runtime.server().session_file("c1").unwrap();
    let launcher = data.join("termsprawlctl");
    let env = &prepared.env;
    assert_eq!(env["TERMSPRAWL_NODE_ID"], "c1");
    assert_eq!(env["TERMSPRAWL_PROJECT_ID"], PROJECT);
    assert_eq!(Path::new(&env["TERMSPRAWL_SESSION_FILE"]), session_file);
    assert_eq!(Path::new(&env["TERMSPRAWL_CTL"]), launcher);
    assert_eq!(
        Path::new(&env["TERMSPRAWL_SYSTEM_PROMPT_FILE"]),
        launch.join("termsprawl-system.md")
    );

    // Files and modes.
    assert_eq!(mode(&launch), 0o700);
    assert_eq!(
        fs::read_to_string(launch.join("termsprawl-system.md")).unwrap(),
        guide("overview").unwrap()
    );
    assert_eq!(mode(&launch.join("termsprawl-system.md")), 0o600);
    for topic in GUIDE_TOPICS {
        let skill = launch.join(format!("skills/termsprawl-{topic}/SKILL.md"));
        let text = fs::read_to_string(&skill).unwrap();
        assert!(
            text.starts_with(&format!("---\nname: termsprawl-{topic}\ndescription: ")),
            "{text}"
        );
        assert!(text.contains("\n---\n\n") && text.contains(guide(topic).unwrap()));
        assert_eq!(
            (mode(skill.parent().unwrap()), mode(&skill)),
            (0o700, 0o600)
        );
    }
    let mcp: Value = serde_json::from_slice(&fs::read(launch.join("mcp.json")).unwrap()).unwrap();
    assert_eq!(
        mcp,
        json!({"mcpServers": {"termsprawl": {"command": launcher, "args": ["--session", session_file, "mcp"]}}})
    );
    assert_eq!(mode(&launch.join("mcp.json")), 0o600);

    // The command keeps the user's arguments and adds ours, quoted for the shell.
    let args = run_in_shell(&rig, prepared.command.as_deref().unwrap());
    let mcp_path = launch.join("mcp.json").to_string_lossy().into_owned();
    assert_eq!(
        args,
        [
            "--model",
            "opus",
            "--mcp-config",
            &mcp_path,
            "--append-system-prompt",
            guide("overview").unwrap()
        ]
    );

    // The session exists with the MCP status; the node counts as active.
    let session = rig.runtime.server().session("c1").unwrap();
    assert_eq!(session.status.state, IntegrationState::NeedsSetup);
    assert_eq!(session.status.adapter, "claude-mcp");
    assert_eq!(session.status.version.as_deref(), Some("claude 9.9.9"));
    assert_eq!(rig.runtime.status("c1").unwrap().adapter, "claude-mcp");
    assert!(rig.runtime.valid(&ToolIdentity {
        node_id: "c1".into(),
        project_id: PROJECT.into()
    }));
}

#[test]
fn codex_gets_config_pairs_with_the_session_in_args() {
    let rig = Rig::new("launch-codex", &["a"]);
    let cli = fake_cli(&rig.dir, "codex", "Usage: codex [OPTIONS] [PROMPT]\n  -c, --config <key=value>\nCommands:\n  mcp  Run as MCP server\n");
    let prepared = rig
        .runtime
        .prepare(pty("x1", &cli.to_string_lossy()))
        .unwrap();
    let session_file = rig.runtime.server().session_file("x1").unwrap();
    let launcher = rig.data().join("termsprawlctl");
    let args = run_in_shell(&rig, prepared.command.as_deref().unwrap());
    assert_eq!(
        args,
        [
            "-c".to_string(),
            format!("mcp_servers.termsprawl.command={}", json!(launcher)),
            "-c".to_string(),
            format!(
                "mcp_servers.termsprawl.args={}",
                json!(["--session", session_file.to_str().unwrap(), "mcp"])
            ),
            "-c".to_string(),
            format!(
                "notify={}",
                json!([
                    launcher,
                    "--session",
                    session_file.to_str().unwrap(),
                    "hook",
                    "codex"
                ])
            ),
        ]
    );
    assert_eq!(rig.runtime.status("x1").unwrap().adapter, "codex-mcp");
}

/// A Claude Code that has `--settings` gets one file of settings for this launch, whose
/// hooks tell the person when it waits (run here as Claude Code runs a hook: the command
/// through `sh -c`, the event's JSON on stdin).
#[test]
fn claude_with_settings_gets_hooks_that_say_when_it_waits() {
    let rig = Rig::new("launch-claude-hooks", &["a"]);
    rig.runtime
        .start(Path::new(env!("CARGO_BIN_EXE_termsprawlctl")))
        .unwrap();
    let help = "  --mcp-config <configs...>\n  --append-system-prompt <prompt>\n  --settings <file-or-json>\n";
    let cli = fake_cli(&rig.dir, "claude", help);
    let prepared = rig
        .runtime
        .prepare(pty("c2", &cli.to_string_lossy()))
        .unwrap();
    let settings = rig.data().join("launch/c2/claude-settings.json");
    let args = run_in_shell(&rig, prepared.command.as_deref().unwrap());
    assert_eq!(
        args[args.len() - 2..],
        [
            "--settings".to_string(),
            settings.to_string_lossy().into_owned()
        ]
    );
    assert_eq!(mode(&settings), 0o600);
    let hooks: Value = serde_json::from_slice(&fs::read(&settings).unwrap()).unwrap();
    for event in ["Notification", "Stop", "UserPromptSubmit", "PostToolUse"] {
        assert!(
            hooks["hooks"][event][0]["hooks"][0]["command"].is_string(),
            "{event}: {hooks}"
        );
    }
    let command = hooks["hooks"]["Notification"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    let event = json!({"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"});
    let mut hook = std::process::Command::new("sh")
        .args(["-c", command])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    hook.stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    assert!(hook.wait().unwrap().success());
    let states = rig.runtime.agent_states(PROJECT);
    let (_, state) = states
        .iter()
        .find(|(node, _)| node == "c2")
        .expect("c2's state");
    assert_eq!(
        (state.state, state.why),
        ("waiting", Some("permission")),
        "{state:?}"
    );
    assert_eq!(
        state.reason.as_deref(),
        Some("Claude needs your permission to use Bash")
    );
}

#[test]
fn prompt_and_flag_adapters_fall_back_to_the_cli() {
    let rig = Rig::new("launch-prompt", &["a"]);
    let gemini = fake_cli(
        &rig.dir,
        "gemini",
        "  -i, --prompt-interactive  Execute the prompt and continue\n",
    );
    let prepared = rig
        .runtime
        .prepare(pty("g1", &gemini.to_string_lossy()))
        .unwrap();
    let args = run_in_shell(&rig, prepared.command.as_deref().unwrap());
    assert_eq!(args[0], "--prompt-interactive");
    assert!(args[1].ends_with(guide("overview").unwrap()));
    let status = rig.runtime.status("g1").unwrap();
    assert_eq!(
        (status.state, status.adapter.as_str()),
        (IntegrationState::CliFallback, "gemini-instructions")
    );

    let grok = fake_cli(&rig.dir, "grok", "Usage: grok [options] [message...]\n");
    let prepared = rig
        .runtime
        .prepare(pty("k1", &grok.to_string_lossy()))
        .unwrap();
    assert_eq!(
        run_in_shell(&rig, prepared.command.as_deref().unwrap()).len(),
        1
    );
    assert_eq!(rig.runtime.status("k1").unwrap().adapter, "grok-prompt");

    let openclaude = fake_cli(&rig.dir, "openclaude", "Usage: openclaude [options]\n");
    let prepared = rig
        .runtime
        .prepare(pty("o1", &openclaude.to_string_lossy()))
        .unwrap();
    assert_eq!(
        prepared.command.as_deref(),
        Some(openclaude.to_str().unwrap()),
        "nothing added when unverified"
    );
    let status = rig.runtime.status("o1").unwrap();
    assert_eq!(
        (status.state, status.adapter.as_str()),
        (IntegrationState::CliFallback, "openclaude-unverified")
    );
    assert!(prepared.env.contains_key("TERMSPRAWL_CTL"));

    let aider = fake_cli(&rig.dir, "aider", "usage: aider [options]\n");
    let preferences = json!({"custom": {"executable": aider, "instructionFlag": "--message"}});
    fs::write(rig.data().join("preferences.json"), preferences.to_string()).unwrap();
    let prepared = rig
        .runtime
        .prepare(pty("u1", &aider.to_string_lossy()))
        .unwrap();
    let args = run_in_shell(&rig, prepared.command.as_deref().unwrap());
    assert_eq!(args, ["--message", guide("overview").unwrap()]);
    assert_eq!(
        rig.runtime.status("u1").unwrap().adapter,
        "aider-instructions"
    );
}

#[test]
fn requests_that_are_not_agent_launches_are_left_alone() {
    let rig = Rig::new("launch-skip", &["a"]);
    let cli = fake_cli(&rig.dir, "claude", "--mcp-config --append-system-prompt");
    let claude = cli.to_string_lossy().into_owned();
    let untouched = [
        PtyRequest {
            project_id: None,
            ..pty("n1", &claude)
        },
        PtyRequest {
            command: None,
            ..pty("n2", "")
        },
        pty("n3", "   "),
        pty("n4", "bash -l"),
        pty("n5", &format!("{claude} auth login")),
        pty("n6", &format!("{claude} /login")),
        PtyRequest {
            project_id: Some("elsewhere".into()),
            ..pty("n7", &claude)
        },
    ];
    for request in untouched {
        assert_eq!(rig.runtime.prepare(request.clone()).unwrap(), request);
        assert!(
            rig.runtime.server().session(&request.node_id).is_none(),
            "{request:?}"
        );
    }
    rig.workspace
        .projects
        .lock()
        .unwrap()
        .get_mut(PROJECT)
        .unwrap()
        .remote = true;
    let remote = pty("n8", &claude);
    assert_eq!(rig.runtime.prepare(remote.clone()).unwrap(), remote);
    assert!(rig.runtime.server().session("n8").is_none());
}

#[test]
fn missing_or_warm_agents_need_setup_and_bad_preferences_are_named() {
    let rig = Rig::new("launch-setup", &["a"]);
    let missing = pty("m1", "/nonexistent/bin/claude --resume");
    assert_eq!(
        rig.runtime.prepare(missing.clone()).unwrap(),
        missing,
        "request unchanged"
    );
    let status = rig.runtime.server().session("m1").unwrap().status;
    assert_eq!(
        (status.state, status.adapter.as_str()),
        (IntegrationState::NeedsSetup, "claude")
    );
    assert!(status.reason.unwrap().contains("Install Claude Code"));

    let cli = fake_cli(&rig.dir, "claude", "--mcp-config --append-system-prompt");
    rig.terminals.warm.lock().unwrap().insert("w1".into());
    let prepared = rig
        .runtime
        .prepare(pty("w1", &cli.to_string_lossy()))
        .unwrap();
    assert_eq!(prepared.env["TERMSPRAWL_NODE_ID"], "w1");
    let status = rig.runtime.server().session("w1").unwrap().status;
    assert_eq!(status.state, IntegrationState::NeedsSetup);
    assert!(status
        .reason
        .unwrap()
        .contains("close it and launch it fresh"));
    // Warm again, but now with credentials: the MCP status stands.
    rig.runtime
        .prepare(pty("w1", &cli.to_string_lossy()))
        .unwrap();
    let status = rig.runtime.server().session("w1").unwrap().status;
    assert_eq!(
        status.reason.as_deref(),
        Some("Waiting for the agent's MCP client to connect")
    );

    let preferences = rig.data().join("preferences.json");
    fs::write(&preferences, "{\"custom\": 1}").unwrap();
    let error = rig
        .runtime
        .prepare(pty("p1", "my-agent"))
        .unwrap_err()
        .to_string();
    assert!(error.contains(preferences.to_str().unwrap()), "{error}");
    // A registry agent does not depend on the custom preferences.
    assert!(rig
        .runtime
        .prepare(pty("p2", &cli.to_string_lossy()))
        .is_ok());
}

#[test]
fn probes_are_cached_per_path() {
    let rig = Rig::new("launch-cache", &["a"]);
    let bin = rig.dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let counter = rig.dir.join("probes");
    let cli = bin.join("grok");
    script(
        &cli,
        &format!(
            "echo \"$1\" >> '{}'; echo 'Usage: grok [message...]'",
            counter.display()
        ),
    );
    for node in ["q1", "q2"] {
        rig.runtime
            .prepare(pty(node, &cli.to_string_lossy()))
            .unwrap();
    }
    assert_eq!(
        fs::read_to_string(&counter).unwrap(),
        "--help\n--version\n",
        "one probe for both launches"
    );
}
