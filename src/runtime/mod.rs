//! The host-agnostic runtime (the spec's "Main-Process Runtime"): it binds the
//! [`crate::server`] to an app through four small traits ([`Workspace`], [`CanvasOwner`],
//! [`Browsers`], [`Terminals`]) and fulfils accepted operations against the app's live
//! state: identity checks, the canvas bridge with acknowledgement deadlines, browser guest
//! lookup and ownership, terminal access rules, agent launch preparation, artifact and
//! context checks. It knows nothing about what implements the traits.
//!
//! Embedding it: see the [crate docs](crate) and `examples/embed.rs`, a complete, runnable app.
//!
//! Threads: the runtime has none of its own. `execute` runs on the server's project
//! worker, so the operations of one project run one at a time; it blocks on
//! `recv_timeout` for canvas acknowledgements (10 s), guest readiness (3 s) and page
//! operations (15 s, run on a short-lived thread).

pub(crate) mod agents;
mod artifact;
mod canvas;
// Public as a path for the fuzz crate's transcript target (fuzz/check_transcript.rs),
// which checks the reader's internals (`read_claude_jsonl`, `last_chars`, its limits).
pub mod context;
mod execute;
mod host;
mod launch;
mod owners;
mod tool_runtime;
mod url;

pub use crate::base::unix_millis;
pub use agents::{
    find_preset, probe_agent, select_launch_adapter, shell_quote, AgentPreset, AgentProbe,
    LaunchAdapter, AGENT_REGISTRY, PROBE_OUTPUT_CAP, PROBE_TIMEOUT,
};
pub use artifact::check_artifact_path;
pub use canvas::{CANVAS_ACK_TIMEOUT, CANVAS_CLOSED_ERROR, CANVAS_EXPIRY, CANVAS_TIMEOUT_ERROR};
pub use context::read_context;
pub use host::{
    Browsers, CanvasOwner, Host, NoBrowsers, NoTerminals, ProgramEnd, ProjectSnapshot, PtyRequest,
    Terminals, Workspace, NO_BROWSERS, NO_TERMINALS,
};
pub use launch::{
    install_launcher, load_preferences, prepare_tool_launch, LaunchInput, Preferences,
    PreparedLaunch, LAUNCHER_NAME,
};
pub use tool_runtime::{
    AgentToolRuntime, RuntimeError, BROWSER_OPERATION_TIMEOUT, GUEST_NOT_READY, GUEST_READY_TIMEOUT,
};
pub use url::{normalize_browser_url, URL_NOT_ALLOWED};
