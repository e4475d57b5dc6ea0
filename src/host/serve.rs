//! `termsprawl-tools serve` (docs/guide.md, "`termsprawl-tools serve`"): one folder project, the
//! default host, one JSON ready line on stdout, clean shutdown on SIGINT/SIGTERM.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::host::default_host::{DefaultHost, HostConfig};
use crate::host::options::ServeOptions;
use crate::host::person::browser_control;
use crate::host::person::{approvals, attention};
use crate::host::view::BoundView;
use crate::host::HostError;
use crate::protocol::OperationClass;
use crate::runtime::agents::resolve_executable;
use crate::runtime::policy::{Policy, Rule};
use crate::runtime::LAUNCHER_NAME;
use crate::sys::process::{limit_malloc_arenas, raise_open_files_limit};
use crate::sys::signals::ShutdownSignal;

/// The name of the agent-side binary the launcher execs.
pub const CTL_NAME: &str = "termsprawlctl";

/// What the launcher execs: `termsprawlctl` beside the running executable (cargo builds
/// both into one folder), else this executable itself, which answers termsprawlctl's
/// commands too (see the `termsprawl-tools` binary): `cargo run --bin termsprawl-tools`
/// builds only that one, and its `serve` must still give agents a working launcher.
pub fn ctl_beside_current_exe() -> Result<PathBuf, HostError> {
    use std::os::unix::fs::PermissionsExt;
    let exe = std::env::current_exe()
        .map_err(|e| HostError::Other(format!("cannot find this executable: {e}")))?;
    let ctl = exe.with_file_name(CTL_NAME);
    let executable =
        std::fs::metadata(&ctl).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    Ok(if executable { ctl } else { exe })
}

/// This executable, for tmux terminals' pane filter (`termsprawl-tools pane`): `serve`
/// runs in the binary that has that subcommand. `None` with `--no-query-filter` or without
/// `/proc/self/exe`: then tmux terminals run their programs directly.
fn pane_filter(wanted: bool) -> Option<PathBuf> {
    if !wanted {
        return None;
    }
    match std::env::current_exe() {
        Ok(exe) => Some(exe),
        Err(error) => {
            eprintln!("termsprawl-tools: note: cannot find this executable ({error}); tmux terminals run without the pane filter, so tmux may type answers to terminal queries into them");
            None
        }
    }
}

/// The ready line, fields in the contract's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Ready<'a> {
    ready: bool,
    url: &'a str,
    instance_id: &'a str,
    directory: PathBuf,
    project_id: &'a str,
    sessions: Vec<ReadySession>,
    /// The launcher agents and MCP clients run (`<directory>/termsprawlctl`).
    launcher: PathBuf,
    /// How agents' terminals are confined: `{"setting", "mode", "why"}`.
    isolation: serde_json::Value,
    /// The canvas view's address, its key in the fragment (absent with `--no-view`).
    #[serde(skip_serializing_if = "Option::is_none")]
    view_url: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReadySession {
    node_id: String,
    session_file: PathBuf,
}

/// Runs `serve` until SIGINT or SIGTERM. Stdout gets the ready line and nothing else.
///
/// Call it before starting any thread: it removes this process's own `TERMSPRAWL_*`
/// variables (say, an exported `TERMSPRAWL_SESSION_FILE`), so terminals it starts never
/// inherit another agent's identity; agents get theirs from `prepare`.
pub fn serve(options: &ServeOptions) -> Result<(), HostError> {
    // The soft open-files limit goes up to the hard one: the usual soft limit (1024) is
    // low for a server that holds two descriptors per connection besides terminals and
    // browsers; running out makes accepting fail (the server recovers, refusing
    // meanwhile). Best effort: on failure the limit stays as it was.
    let _ = raise_open_files_limit();
    if !limit_malloc_arenas(MALLOC_ARENA_MAX) {
        eprintln!(
            "termsprawl-tools: note: could not limit malloc arenas (memory may stay up after load)"
        );
    }
    let inherited: Vec<_> = std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_string_lossy().starts_with("TERMSPRAWL_"))
        .collect();
    for name in inherited {
        std::env::remove_var(name);
    }
    // The notify program is found now: a typo is said before the ready line, not when an
    // agent first waits.
    let notify_command = match &options.notify_command {
        Some(program) => Some(
            resolve_executable(
                &program.to_string_lossy(),
                std::env::var_os("PATH").as_deref(),
            )
            .ok_or_else(|| {
                HostError::Other(format!(
                    "--notify-command {}: no such executable (give a path, or a program on PATH)",
                    program.display()
                ))
            })?,
        ),
        None => None,
    };
    let signal = ShutdownSignal::install()
        .map_err(|e| HostError::Other(format!("cannot install signal handlers: {e}")))?;
    let mut host = DefaultHost::new(HostConfig {
        data: options.data.clone(),
        terminals: options.terminals,
        browser: options.browser,
        pane_filter: pane_filter(options.query_filter),
        isolation: options.isolation,
    })?;
    host.set_activity_trail(options.activity);
    host.canvas().set_worktree_default(options.worktrees)?;
    // This executable's `pane --take-terminal` starts confined programs, with or without
    // the pane filter.
    host.terminals().set_helper(std::env::current_exe().ok());
    let project_id = host.add_project_with_agents(
        &options.project,
        options.project_id.as_deref(),
        &options.agents,
    )?;
    let mut starting = match &options.policy {
        Some(name) => {
            Policy::named(name).map_err(|e| HostError::Other(format!("--policy: {e}")))?
        }
        None => Policy::default(),
    };
    if host.terminals().isolation_setup().confines() {
        // Typing into the person's own (unconfined) shell would undo the confinement.
        let class = OperationClass::TerminalsUnconfined;
        starting.classes.entry(class).or_insert(Rule::Ask);
    }
    let endpoint = host.start(&ctl_beside_current_exe()?)?;
    let runtime = host.runtime().cloned();
    if let Some(runtime) = &runtime {
        let saved = options.data.join("agent-tools").join("policy.json");
        runtime
            .set_policy(starting, Some(saved))
            .map_err(|e| HostError::Other(format!("cannot read the saved policy: {e}")))?;
    }
    let mut sessions = Vec::new();
    for agent in &options.agents {
        let (node_id, file) = host.add_agent(&project_id, agent)?;
        sessions.push(ReadySession {
            node_id,
            session_file: file,
        });
    }
    let view = match options.no_view {
        true => None,
        false => Some(host.bind_view(&project_id, options.view_only)?),
    };
    let agent_tools = options.data.join("agent-tools");
    let watched = approvals::Watched {
        project_id: project_id.clone(),
        starting: options.policy.clone().unwrap_or_else(|| "open".into()),
    };
    if let Some(runtime) = &runtime {
        // From the ready line on, the person's commands read this serve's rules.
        approvals::write_list(&agent_tools, runtime, &watched);
    }
    let directory = host
        .runtime()
        .map(|runtime| runtime.server().directory().to_path_buf())
        .unwrap_or_default();
    let ready = serde_json::to_string(&Ready {
        ready: true,
        url: &endpoint.url,
        instance_id: &endpoint.instance_id,
        launcher: directory.join(LAUNCHER_NAME),
        directory,
        project_id: &project_id,
        sessions,
        isolation: host.terminals().isolation_setup().to_json(),
        view_url: view.as_ref().map(|v| v.url()),
    })
    .map_err(|e| HostError::Other(format!("cannot encode the ready line: {e}")))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{ready}")
        .and_then(|()| stdout.flush())
        .map_err(|e| HostError::Other(format!("cannot write the ready line: {e}")))?;
    drop(stdout);
    // After the ready line: agents need not wait for the view's threads (`BoundView`).
    let mut view = view.map(BoundView::serve).transpose()?;
    eprintln!(
        "termsprawl-tools: serving project {project_id} at {} ({} terminals); Ctrl+C stops",
        endpoint.url,
        host.terminals().backend_name()
    );
    let isolation = host.terminals().isolation_setup().to_json();
    if isolation["mode"] == "none" {
        let why = isolation["why"].as_str().unwrap_or_default();
        eprintln!("termsprawl-tools: WARNING: agents' terminals are NOT confined ({why}): any agent can act as you, read other agents' tokens and answer its own held calls");
    } else if isolation["mode"] == "landlock" && host.terminals().backend_name() == "tmux" {
        eprintln!("termsprawl-tools: WARNING: agents' tmux terminals are confined by Landlock, which cannot keep them from the tmux server's socket: NOT a boundary (install bubblewrap, or serve --terminals pty)");
    }
    if let Some(view) = &view {
        eprintln!(
            "termsprawl-tools: canvas view (open it in a browser): {}",
            view.url()
        );
    }
    let stop_watching = Arc::new(AtomicBool::new(false));
    browser_control::watch(
        agent_tools.clone(),
        host.workspace().clone(),
        stop_watching.clone(),
    );
    if let Some(runtime) = runtime {
        let notify = notify_command.clone();
        attention::watch(
            runtime.clone(),
            project_id.clone(),
            notify,
            stop_watching.clone(),
        );
        approvals::watch(agent_tools, runtime, watched, stop_watching.clone());
    }
    signal.wait();
    stop_watching.store(true, Ordering::SeqCst);
    eprintln!("termsprawl-tools: stopping");
    if let Some(view) = view.as_mut() {
        view.stop();
    }
    host.shutdown(options.kill_terminals);
    Ok(())
}

/// At most this many glibc malloc arenas in `serve`. glibc gives threads their own arena
/// (up to 8 per core) and keeps what each one grew to, so after a burst on many connection
/// threads the resident memory stays up; two arenas keep that small at little contention
/// cost (the threads mostly wait on sockets). Set first thing in `serve`, before this
/// process starts any thread. Library embedders keep their own setting.
const MALLOC_ARENA_MAX: libc::c_int = 2;
