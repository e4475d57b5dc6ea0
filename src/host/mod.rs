//! The embedded default host used by the `serve` binary: the pieces of an app that the
//! runtime reaches through its traits.

pub mod browser;
