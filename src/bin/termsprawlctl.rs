//! `termsprawlctl`: what agents run (see docs/guide.md, "`termsprawlctl`").
//!
//! ```text
//! termsprawlctl [--session FILE] call OPERATION [JSON_ARGS]
//! termsprawlctl [--session FILE] doctor
//! termsprawlctl [--session FILE] mcp
//! ```
//!
//! The whole CLI is [`termsprawl_tools::client::run`], so an app can ship it in its own binary.
#![deny(unsafe_code)]

fn main() -> std::process::ExitCode {
    termsprawl_tools::client::run(std::env::args().skip(1))
}
