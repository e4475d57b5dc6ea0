//! termsprawl-tools: the Agent Tool Protocol for coding agents that run in terminals of a
//! canvas app.
//!
//! Layers, each depending only on those before it:
//! - [`protocol`]: wire types, the `AGENT_TOOLS` catalogue, the validator, the guides.
//! - [`server`]: private files, sessions, the lock, the HTTP accept thread, project queues.
//! - [`host`]: the embedded default host (headless canvas, terminals, browsers).
//! - [`client`]: the agent side (`termsprawlctl`): discovery, `call`, `doctor`, MCP over stdio.
#![warn(missing_docs)]

pub mod client;
pub mod host;
pub mod protocol;
pub mod runtime;
pub mod server;
