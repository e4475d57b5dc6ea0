//! The host's errors, below every room: [`HostError`], what can stop the default host
//! from starting or serving, and [`CanvasError`], a canvas's (re-exported by `canvas`,
//! here so that the rooms below the canvas can use `HostError` without a circle).

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::runtime::RuntimeError;

/// Why the default host could not start, or an operation on it failed.
#[derive(Debug)]
pub enum HostError {
    /// A project's canvas could not be loaded or saved (a corrupt `project.json` is named).
    Canvas(CanvasError),
    /// The runtime or its server refused (e.g. another instance is already using the data
    /// directory).
    Runtime(RuntimeError),
    /// The terminal backend could not be set up or used.
    Terminal(String),
    /// Something else failed; the message says what.
    Other(String),
    /// The canvas owner has stopped (the host is shutting down, or a change panicked).
    Stopped,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Canvas(error) => write!(f, "{error}"),
            HostError::Runtime(error) => write!(f, "{error}"),
            HostError::Terminal(message) | HostError::Other(message) => f.write_str(message),
            HostError::Stopped => {
                f.write_str("the canvas owner has stopped; the host is shutting down")
            }
        }
    }
}

impl std::error::Error for HostError {}

impl From<CanvasError> for HostError {
    fn from(error: CanvasError) -> Self {
        HostError::Canvas(error)
    }
}

impl From<RuntimeError> for HostError {
    fn from(error: RuntimeError) -> Self {
        HostError::Runtime(error)
    }
}

/// Why a canvas could not be loaded, saved or changed.
#[derive(Debug)]
pub enum CanvasError {
    /// Reading or writing a file failed.
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// `project.json` exists but is not a canvas; it was left untouched.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The request was refused; nothing was changed. The text is for the caller.
    Refused(String),
}

impl fmt::Display for CanvasError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanvasError::Io { path, source } => {
                write!(f, "Could not save or read {}: {source}", path.display())
            }
            CanvasError::Corrupt { path, reason } => write!(
                f,
                "{} is not a readable canvas ({reason}); it was left unchanged: fix it or move it away",
                path.display()
            ),
            CanvasError::Refused(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for CanvasError {}
