//! The embedded default host used by `termsprawl-tools serve`: a headless canvas owner,
//! real terminals and a browser engine, behind the runtime's traits.

pub mod canvas;
pub mod options;
pub mod signals;
pub mod tmux;
