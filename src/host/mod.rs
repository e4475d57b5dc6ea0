//! The embedded default host used by `termsprawl-tools serve`: a headless canvas owner,
//! real terminals and a browser engine, behind the runtime's traits.
//!
//! - [`workspace`]: folder projects and the browser setting ([`HostWorkspace`]).
//! - [`canvas_owner`]: the owner of the canvases, applying canvas requests ([`HeadlessCanvas`]).
//! - [`terminals`]: tmux or PTY terminals ([`HostTerminals`]).
//! - [`browsers`]: browser guests, pages of the headless Chromium [`browser`] engine.
//! - [`default_host`]: all of it assembled ([`DefaultHost`]); [`serve`] runs it.
//! - [`activity`]: the `activity` command, the trail for people.
//! - [`browser_control`]: `browser-control on|off`, switched while `serve` runs.

pub mod activity;
pub mod approvals;
pub mod browser;
pub mod browser_control;
pub mod browsers;
pub mod canvas;
pub mod canvas_owner;
pub mod default_host;
mod error;
pub mod links;
pub mod options;
pub mod pane;
mod pane_shell;
pub(crate) mod procfs;
pub mod query_filter;
pub mod screen;
pub mod serve;
mod sgr;
pub mod shell;
pub mod terminal;
pub mod terminals;
pub mod tmux;
mod tmux_panes;
pub mod view;
pub mod workspace;

pub use canvas_owner::HeadlessCanvas;
pub use default_host::{DefaultHost, HostConfig};
pub use error::HostError;
pub use options::{AgentFlag, ServeOptions};
pub use terminals::{HostTerminals, TerminalsMode};
pub use workspace::HostWorkspace;
