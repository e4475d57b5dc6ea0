#![doc = include_str!("../../docs/api/runtime.md")]

pub(crate) mod agents;
pub mod approvals;
mod artifact;
pub mod attention;
mod canvas;
mod canvas_node;
mod commands;
// Public as a path for the fuzz crate's transcript target (fuzz/check_transcript.rs),
// which checks the reader's internals (`read_claude_jsonl`, `last_chars`, its limits).
pub mod context;
mod execute;
mod gate;
mod host;
mod launch;
mod owners;
mod person;
pub mod policy;
mod stand_in;
mod tool_runtime;
mod url;

pub use crate::base::unix_millis;
pub use agents::{
    find_preset, probe_agent, select_launch_adapter, shell_quote, AgentPreset, AgentProbe,
    LaunchAdapter, AGENT_REGISTRY, PROBE_OUTPUT_CAP, PROBE_TIMEOUT,
};
pub use artifact::{check_artifact_path, UPLOAD_BYTES_MAX, UPLOAD_FILES_MAX};
pub use canvas::{
    CanvasOwner, CanvasReplier, CANVAS_ACK_TIMEOUT, CANVAS_CLOSED_ERROR, CANVAS_EXPIRY,
    CANVAS_TIMEOUT_ERROR,
};
pub use canvas_node::{CanvasNode, CanvasTab, NodeKind};
pub use context::read_context;
pub use execute::{PERSON_TYPING, PERSON_TYPING_WINDOW};
pub use host::{
    Browsers, CommandOutput, CommandRecord, CommandState, Foreground, Host, LineMatch, LinesFound,
    OutputAfter, OutputMark, ProgramEnd, ProjectSnapshot, PtyRequest, ShellIntegration, Terminals,
    Workspace,
};
pub use launch::{
    install_launcher, load_preferences, prepare_tool_launch, LaunchInput, Preferences,
    PreparedLaunch, LAUNCHER_NAME,
};
pub use stand_in::{NoBrowsers, NoTerminals, NO_BROWSERS, NO_TERMINALS};
pub use tool_runtime::{
    AgentToolRuntime, RuntimeError, BROWSER_OPERATION_TIMEOUT, GUEST_NOT_READY, GUEST_READY_TIMEOUT,
};
pub use url::{normalize_browser_url, URL_NOT_ALLOWED};
