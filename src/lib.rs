//! termsprawl-tools: the Agent Tool Protocol for coding agents that run in terminals of a
//! canvas app.
//!
//! Embed the agent tools in a Rust app: implement the four host traits
//! ([`runtime::Workspace`], [`runtime::CanvasOwner`], [`runtime::Browsers`],
//! [`runtime::Terminals`]), then (`examples/embed.rs` is a complete app):
//!
//! ```no_run
//! # use std::path::Path;
//! # use termsprawl_tools::protocol::ToolIdentity;
//! # use termsprawl_tools::runtime::{AgentToolRuntime, Host};
//! # fn embed(host: Host) -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = AgentToolRuntime::new(Path::new("/var/lib/my-app"), host)?;
//! // An executable file: the termsprawlctl binary, or yours calling client::run.
//! let endpoint = runtime.start(Path::new("/usr/local/bin/termsprawlctl"))?;
//! let agent = ToolIdentity { node_id: "agent1".into(), project_id: "demo".into() };
//! let session_file = runtime.provision_agent(&agent)?;
//! // Your CanvasOwner::send gets each request with its replier: reply(reply) from any thread;
//! // every terminal start goes through runtime.prepare(request) first.
//! println!("agents call {} with {}", endpoint.url, session_file.display());
//! # Ok(()) }
//! ```
//!
//! An app without terminals or browsers hands [`runtime::NoTerminals`] and
//! [`runtime::NoBrowsers`]; `docs/embedding.md` is the guide.
//!
//! Layers, each depending only on those before it (see ARCHITECTURE.md):
//! - [`protocol`]: wire types, the `AGENT_TOOLS` catalogue, the validator, the guides.
//! - `base` (crate-private): private files, ids and secrets, locks, and the socket calls
//!   tiny_http does not offer; shared by `server` and `host`. Its [`terminal_text`]
//!   (text escaped for a person's terminal) is public, for any printer of agents' text.
//! - [`activity`]: the activity trail (one JSON line per call, written off the call's
//!   path by its own thread), which the server records into.
//! - [`server`]: sessions, the lock, the HTTP accept thread, project queues.
//! - [`runtime`]: the host-agnostic runtime behind four small traits (with the stand-ins
//!   [`runtime::NoTerminals`] and [`runtime::NoBrowsers`] for an app without them).
//! - `host` (the default feature `host`): the embedded default host (headless canvas,
//!   terminals, browsers, the canvas view) of `serve`. Built with
//!   `--no-default-features`, the crate is the core alone.
//! - [`client`]: the agent side (`termsprawlctl`): discovery, `call`, `doctor`, MCP over stdio.
//! - `sys` (crate-private): the thin libc wrappers, the only module allowed `unsafe`.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod activity;
mod base;
pub use base::terminal_text;
pub mod client;
#[cfg(feature = "host")]
pub mod host;
pub mod messaging;
pub mod protocol;
pub mod runtime;
pub mod server;
#[allow(unsafe_code)]
mod sys;

/// `docs/embedding.md`, so `cargo test` compiles and runs its example host.
#[cfg(doctest)]
#[doc = include_str!("../docs/embedding.md")]
pub struct EmbeddingGuide;
