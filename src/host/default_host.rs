//! [`DefaultHost`]: the four host traits of the embedded default host, assembled, plus
//! the start-up and shutdown steps `serve` (or an embedder) runs around the runtime.
//!
//! ```no_run
//! use std::path::Path;
//! use termsprawl_tools::host::isolation::Setting;
//! use termsprawl_tools::host::{AgentFlag, DefaultHost, HostConfig, TerminalsMode};
//!
//! # fn main() -> Result<(), termsprawl_tools::host::HostError> {
//! let data = Path::new("/var/lib/my-app");
//! let mut host = DefaultHost::new(HostConfig {
//!     data: data.to_path_buf(),
//!     terminals: TerminalsMode::Auto,
//!     browser: false,
//!     pane_filter: None, // or this app's executable, if its main() runs host::terminals::pane_filter::main
//!     isolation: Setting::Auto, // agents' terminals under bubblewrap where it works
//! })?;
//! let web = host.add_project(Path::new("/src/web"), None)?; // several projects are fine
//! let _api = host.add_project(Path::new("/src/api"), Some("api"))?;
//! let endpoint = host.start(Path::new("/usr/local/bin/termsprawlctl"))?;
//! let (_node, session_file) = host.add_agent(&web, &AgentFlag { node_id: "me".into(), adapter: None })?;
//! println!("{} {}", endpoint.url, session_file.display());
//! host.shutdown(false); // tmux terminals keep running
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::host::browser::guests::{ChromiumBrowsers, BROWSER_OPEN_WAIT};
use crate::host::canvas::lock::ProjectLock;
use crate::host::canvas::owner::HeadlessCanvas;
use crate::host::isolation::{Isolation, Setting};
use crate::host::options::AgentFlag;
use crate::host::terminals::{HostTerminals, TerminalsMode};
use crate::host::view::{BoundView, CanvasView, ViewSource};
use crate::host::workspace::HostWorkspace;
use crate::host::HostError;
use crate::protocol::{IntegrationState, IntegrationStatus, ToolIdentity};
use crate::runtime::LAUNCHER_NAME;
use crate::runtime::{
    prepare_tool_launch, AgentProbe, AgentToolRuntime, Host, LaunchInput, Workspace as _,
};
use crate::server::Endpoint;

/// How to set up the default host.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// The data directory (`agent-tools/` lives in it).
    pub data: PathBuf,
    /// Which terminal backend.
    pub terminals: TerminalsMode,
    /// Agent browser control enabled.
    pub browser: bool,
    /// The executable whose `pane` subcommand ([`crate::host::terminals::pane_filter::main`]) runs the program of
    /// each tmux terminal, so that tmux never answers a terminal query into its input;
    /// `serve` gives its own. `None` runs programs directly under tmux, which then types
    /// its answers to queries (`printf '\033[6n'`) into the program's input. The PTY
    /// backend answers no queries either way.
    pub pane_filter: Option<PathBuf>,
    /// How agents' terminals are confined ([`crate::host::isolation`]): looked for once,
    /// here.
    pub isolation: Setting,
}

/// The default host: workspace, canvas owner, terminals, browsers, and once
/// started the runtime. Dropping it shuts it down, leaving tmux terminals running.
pub struct DefaultHost {
    data: PathBuf,
    workspace: Arc<HostWorkspace>,
    canvas: Arc<HeadlessCanvas>,
    terminals: Arc<HostTerminals>,
    browsers: Arc<ChromiumBrowsers>,
    runtime: Option<Arc<AgentToolRuntime>>,
    /// Whether [`DefaultHost::start`] lets the server write its activity trail.
    activity_trail: bool,
    /// One per project folder added: no other host serves it meanwhile.
    project_locks: Vec<ProjectLock>,
}

impl DefaultHost {
    /// Chooses the terminal backend and makes the canvas owner (no projects yet).
    pub fn new(config: HostConfig) -> Result<DefaultHost, HostError> {
        let terminals = Arc::new(HostTerminals::with_pane_filter(
            config.terminals,
            &config.data,
            config.pane_filter,
        )?);
        terminals.set_isolation(Isolation::detect(config.isolation));
        let workspace = Arc::new(HostWorkspace::new(config.browser));
        let browsers = Arc::new(ChromiumBrowsers::new(&config.data));
        let canvas = HeadlessCanvas::new(workspace.clone(), terminals.clone(), browsers.clone());
        Ok(DefaultHost {
            data: config.data,
            workspace,
            canvas,
            terminals,
            browsers,
            runtime: None,
            activity_trail: true,
            project_locks: Vec::new(),
        })
    }

    /// Turns the activity trail (`<data>/agent-tools/activity/`) off or on; effective
    /// at [`DefaultHost::start`].
    pub fn set_activity_trail(&mut self, on: bool) {
        self.activity_trail = on;
    }

    /// Opens the folder project at `dir` (its canvas from `.termsprawl/project.json`);
    /// returns its id. Before [`DefaultHost::start`], so that start-up sees its terminals.
    ///
    /// The project folder is locked while this host serves it: another host (another
    /// `serve`, whatever its data folder) adding it is refused, naming this one.
    pub fn add_project(
        &mut self,
        dir: &Path,
        project_id: Option<&str>,
    ) -> Result<String, HostError> {
        self.add_project_with_agents(dir, project_id, &[])
    }

    /// [`add_project`](Self::add_project) with the nodes of the agents that
    /// [`add_agent`](Self::add_agent) will add already on its canvas: one write of a new
    /// `project.json` instead of two (each waits for two fsyncs before `serve` is ready).
    pub fn add_project_with_agents(
        &mut self,
        dir: &Path,
        project_id: Option<&str>,
        agents: &[AgentFlag],
    ) -> Result<String, HostError> {
        let nodes: Vec<(&str, &str)> = agents
            .iter()
            .map(|agent| (agent.node_id.as_str(), agent_kind(agent)))
            .collect();
        // A folder that cannot be opened is the canvas owner's error to report.
        let lock = match dir.canonicalize() {
            Ok(folder) if folder.is_dir() => Some(ProjectLock::acquire(&folder, &self.data)?),
            _ => None,
        };
        let id = self.canvas.add_project(dir, project_id, &nodes)?;
        self.project_locks.extend(lock);
        Ok(id)
    }

    /// The host traits, for [`AgentToolRuntime::new`].
    pub fn host(&self) -> Host {
        Host {
            workspace: self.workspace.clone(),
            canvas: self.canvas.clone(),
            browsers: self.browsers.clone(),
            terminals: self.terminals.clone(),
        }
    }

    /// Creates and starts the runtime (taking the data directory's lock, listening,
    /// installing the launcher that execs `ctl_executable`), then restores terminals (only
    /// now: ending stale tmux sessions is safe only while holding the lock), starts
    /// watching for terminals whose program ends and, with
    /// browser control on, reopens the pages of the canvas's browser tabs.
    pub fn start(&mut self, ctl_executable: &Path) -> Result<Endpoint, HostError> {
        if self.runtime.is_some() {
            return Err(HostError::Other("the host is already started".into()));
        }
        let runtime = Arc::new(AgentToolRuntime::new(&self.data, self.host())?);
        self.canvas.attach_runtime(&runtime);
        if !self.activity_trail {
            runtime.set_activity_directory(None);
        }
        let endpoint = runtime.start(ctl_executable)?;
        self.terminals.set_waker(runtime.server().waker());
        self.runtime = Some(runtime);
        for line in self.canvas.with(|state| state.restore_terminals())? {
            eprintln!("termsprawl-tools: {line}");
        }
        // From now on (and for ends found now), a program ending keeps its node's last
        // screen with the canvas and updates its agent's status.
        let canvas = Arc::downgrade(&self.canvas);
        self.terminals.watch(move |node_id, ended| {
            if let Some(canvas) = canvas.upgrade() {
                canvas.terminal_ended(node_id, ended);
            }
        })?;
        if self.workspace.browser_control_enabled() {
            // Pages come back before agents are told the host is ready.
            let reopened = self.browsers.reopen_all(BROWSER_OPEN_WAIT);
            if reopened > 0 {
                eprintln!("termsprawl-tools: reopened {reopened} browser page(s)");
            }
        }
        Ok(endpoint)
    }

    /// Puts `--agent` node `agent.node_id` on project `project_id`'s canvas (if it is not
    /// there) and provisions its session, reusing its token when node and project match.
    /// Status: `cli-fallback`/`external`, or `needs-setup` with the given adapter until its
    /// MCP client connects. Returns the node id and session file.
    pub fn add_agent(
        &self,
        project_id: &str,
        agent: &AgentFlag,
    ) -> Result<(String, PathBuf), HostError> {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| HostError::Other("start the host before adding agents".into()))?;
        let kind = agent_kind(agent).to_string();
        let (project, node, node_kind) =
            (project_id.to_string(), agent.node_id.clone(), kind.clone());
        self.canvas
            .with(move |state| state.add_agent_node(&project, &node, &node_kind))??;
        let status = match &agent.adapter {
            None => IntegrationStatus {
                state: IntegrationState::CliFallback,
                adapter: kind,
                version: None,
                reason: None,
            },
            Some(adapter) => IntegrationStatus {
                state: IntegrationState::NeedsSetup,
                adapter: adapter.clone(),
                version: None,
                reason: Some(
                    "Waiting for the agent's MCP client: configure `termsprawlctl mcp` as its MCP server; its first session_info connects it".into(),
                ),
            },
        };
        let identity = ToolIdentity {
            node_id: agent.node_id.clone(),
            project_id: project_id.to_string(),
        };
        let server = runtime.server();
        server
            .provision(&identity, status, true)
            .map_err(|e| HostError::Runtime(e.into()))?;
        let file = server
            .session_file(&identity.node_id)
            .map_err(|e| HostError::Runtime(e.into()))?;
        // Its guides (the `guidesDirectory` session_info names) and system prompt; the
        // command is not used, the agent runs elsewhere.
        let probe = AgentProbe {
            path: PathBuf::new(),
            name: kind_name(&agent.adapter),
            help: String::new(),
            version: None,
        };
        let launcher = runtime
            .launcher()
            .unwrap_or_else(|| server.directory().join(LAUNCHER_NAME));
        prepare_tool_launch(&LaunchInput {
            launch_root: &server.directory().join("launch"),
            node_id: &identity.node_id,
            command: "",
            probe: &probe,
            instruction_flag: None,
            session_file: &file,
            launcher: &launcher,
        })
        .map_err(|e| {
            HostError::Other(format!(
                "cannot write the guides of agent {}: {e}",
                identity.node_id
            ))
        })?;
        Ok((identity.node_id, file))
    }

    /// Binds the canvas view of project `project_id` (a second loopback listener; see
    /// [`CanvasView`]); [`BoundView::serve`] starts it. The host must be started.
    /// `view_only` serves it watch-only (every action refused).
    pub fn bind_view(&self, project_id: &str, view_only: bool) -> Result<BoundView, HostError> {
        let runtime = self
            .runtime
            .clone()
            .ok_or_else(|| HostError::Other("start the host before its view".into()))?;
        CanvasView::bind(
            ViewSource {
                canvas: self.canvas.clone(),
                terminals: self.terminals.clone(),
                browsers: self.browsers.clone(),
                runtime,
                project_id: project_id.to_string(),
            },
            view_only,
            &self.data,
        )
    }

    /// The runtime, once started.
    pub fn runtime(&self) -> Option<&Arc<AgentToolRuntime>> {
        self.runtime.as_ref()
    }

    /// The canvas owner (run jobs on its thread with [`HeadlessCanvas::with`]).
    pub fn canvas(&self) -> &Arc<HeadlessCanvas> {
        &self.canvas
    }

    /// The terminals.
    pub fn terminals(&self) -> &Arc<HostTerminals> {
        &self.terminals
    }

    /// The workspace (projects, browser setting).
    pub fn workspace(&self) -> &Arc<HostWorkspace> {
        &self.workspace
    }

    /// Closes the runtime (endpoint.json and server.lock removed, sessions kept), stops
    /// the canvas owner, ends PTY terminals (tmux sessions only when `kill_terminals`)
    /// and Chromium. Idempotent.
    pub fn shutdown(&mut self, kill_terminals: bool) {
        if let Some(runtime) = self.runtime.take() {
            runtime.close();
        }
        self.canvas.stop();
        // No canvas is written after this: another host may serve the folders now.
        self.project_locks.clear();
        self.terminals.shutdown(kill_terminals);
        self.browsers.shutdown();
    }
}

/// The `data.agentId` of `--agent` node: its adapter, else `external`.
fn agent_kind(agent: &AgentFlag) -> &str {
    agent.adapter.as_deref().unwrap_or("external")
}

/// The name an external agent's launch files are prepared for (no CLI rule applies).
fn kind_name(adapter: &Option<String>) -> String {
    format!("external-{}", adapter.as_deref().unwrap_or("cli"))
}

impl Drop for DefaultHost {
    fn drop(&mut self) {
        self.shutdown(false);
    }
}
