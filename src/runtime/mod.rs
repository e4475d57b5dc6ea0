//! The host-agnostic runtime (the spec's "Main-Process Runtime"): it binds the
//! [`crate::server`] to an app through four small traits ([`Workspace`], [`CanvasOwner`],
//! [`Browsers`], [`Terminals`]) and fulfils accepted operations against the app's live
//! state: identity checks, the canvas bridge with acknowledgement deadlines, browser guest
//! lookup and ownership, terminal access rules, agent launch preparation, artifact and
//! context checks. It knows nothing about what implements the traits.

pub mod agents;
pub mod artifact;
pub mod canvas;
pub mod context;
mod execute;
pub mod host;
pub mod launch;
pub mod owners;
mod tool_runtime;
pub mod url;

pub use agents::{
    find_preset, probe_agent, select_launch_adapter, shell_quote, AgentPreset, AgentProbe,
    LaunchAdapter, AGENT_REGISTRY,
};
pub use artifact::check_artifact_path;
pub use context::read_context;
pub use host::{Browsers, CanvasOwner, Host, ProjectSnapshot, PtyRequest, Terminals, Workspace};
pub use launch::{
    install_launcher, load_preferences, prepare_tool_launch, LaunchInput, Preferences,
    PreparedLaunch,
};
pub use tool_runtime::{
    AgentToolRuntime, RuntimeError, BROWSER_OPERATION_TIMEOUT, GUEST_NOT_READY, GUEST_READY_TIMEOUT,
};
pub use url::normalize_browser_url;
