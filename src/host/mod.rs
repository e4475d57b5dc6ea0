//! The embedded default host used by the `serve` binary: the headless canvas owner,
//! terminals and browsers, implementing the runtime's host traits.

pub mod canvas;
