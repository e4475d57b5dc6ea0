//! The in-process server: sessions and private files, the single-instance lock, the
//! HTTP accept thread and the per-project worker threads.

pub mod files;

pub use files::{private_dir, private_json, private_write, read_json};
