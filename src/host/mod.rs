//! The embedded default host used by `termsprawl-tools serve`: a headless canvas owner,
//! real terminals and a browser engine, behind the runtime's traits.

pub mod browser;
pub mod canvas;
pub mod options;
pub(crate) mod pty;
pub mod screen;
pub mod signals;
pub mod terminal;
pub mod tmux;
