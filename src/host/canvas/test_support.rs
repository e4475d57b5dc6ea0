//! Helpers shared by the canvas tests: a fresh project folder, operation arguments,
//! opening a node, and the canvas file's bytes.

use std::fs;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::Canvas;

/// A fresh, empty project folder.
pub(super) fn project(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tst-canvas-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

pub(super) fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

pub(super) fn open(canvas: &mut Canvas, operation: &str, value: Value) -> String {
    let reply = canvas.apply(operation, &args(value)).unwrap();
    reply["nodeId"].as_str().unwrap().to_string()
}

pub(super) fn file_bytes(canvas: &Canvas) -> Vec<u8> {
    fs::read(canvas.file()).unwrap()
}
