//! The embedded default host used by `termsprawl-tools serve`: a headless canvas owner,
//! real terminals and a browser engine, behind the runtime's traits.
//!
//! One room per concern, each a folder whose `mod.rs` says what it owns and offers:
//! - [`terminals`]: tmux or PTY terminals ([`HostTerminals`]), the pane filter, the
//!   screen model and shell integration.
//! - [`browser`]: the headless Chromium and its pages, the browser guests of browser nodes.
//! - [`canvas`]: every project's canvas and its owner, applying canvas requests
//!   ([`HeadlessCanvas`]).
//! - [`view`]: the canvas view, the page where the person watches and acts.
//! - [`person`]: the commands the person runs besides `serve` (`activity`, `approvals`,
//!   `policy`, `browser-control`, `link`).
//! - [`isolation`]: confinement of what `serve` starts for agents (bubblewrap, else
//!   Landlock), and how each terminal says it is confined.
//! - [`worktrees`]: a git worktree per launched agent, and taking its work (merge,
//!   discard).
//!
//! And the files that join them: [`workspace`] (folder projects, [`HostWorkspace`]),
//! [`default_host`] (all of it assembled, [`DefaultHost`]), [`options`] (the command
//! line's options), [`help`] (every command's `--help`, one table), [`serve`] (runs it),
//! and `error.rs` ([`HostError`]).
//!
//! Rooms depend one way (`docs/import-circles.py` checks it): isolation, worktrees and
//! browser use no other room; terminals uses isolation; canvas uses them; view uses canvas,
//! terminals, browser and person.
//! What a lower room needs of a higher one is handed in (the view's port to the browser
//! policy), never imported.

pub mod browser;
pub mod canvas;
pub mod default_host;
mod error;
pub mod help;
pub mod isolation;
pub mod options;
pub mod person;
pub mod serve;
pub mod terminals;
pub mod view;
pub mod workspace;
pub mod worktrees;

pub use canvas::owner::HeadlessCanvas;
pub use default_host::{DefaultHost, HostConfig};
pub use error::HostError;
pub use options::{AgentFlag, ServeOptions};
pub use terminals::{HostTerminals, TerminalsMode};
pub use workspace::HostWorkspace;
