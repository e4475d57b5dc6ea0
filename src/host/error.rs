//! [`HostError`]: what can stop the default host from starting or serving.

use std::fmt;

use super::canvas::CanvasError;
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
