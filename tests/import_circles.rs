//! The layout stays a map: no import circle between the rooms of `src/host` or between the
//! files of `src/runtime` (`docs/import-circles.py` reads the `use` lines and inline
//! paths; ARCHITECTURE.md, "Rooms of the host").

use std::process::Command;

#[test]
fn no_import_circle_between_rooms() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/import-circles.py");
    let output = Command::new("python3")
        .arg(script)
        .output()
        .expect("python3 runs docs/import-circles.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "import circles found:\n{stdout}\n{stderr}"
    );
    // The check saw the rooms it is meant to check (a script that found no files would
    // pass for the wrong reason).
    assert!(stdout.contains("src/host: "), "{stdout}");
    assert!(stdout.contains(" -> terminals"), "{stdout}");
    assert!(stdout.contains("tool_runtime -> gate"), "{stdout}");
}

/// The check fails on a circle, in either folder, whichever way the path is spelled.
#[test]
fn a_circle_is_found() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/import-circles.py");
    let root = std::env::temp_dir().join(format!("import-circles-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "src/host/mod.rs",
        "pub mod a;\npub mod b;\npub use b::Thing;\n",
    );
    write("src/host/a/mod.rs", "use crate::host::Thing;\n");
    write(
        "src/host/b.rs",
        "pub struct Thing;\nfn f() { super::a::g(); }\n",
    );
    write("src/runtime/mod.rs", "mod x;\nmod y;\n");
    write("src/runtime/x.rs", "use super::{y::Y, z};\n");
    write("src/runtime/y.rs", "pub struct Y(super::x::X);\n");
    let output = Command::new("python3")
        .arg(script)
        .arg(&root)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("CIRCLE in src/host: a <-> b"), "{stdout}");
    assert!(
        stdout.contains("CIRCLE in src/runtime: x <-> y"),
        "{stdout}"
    );
}
