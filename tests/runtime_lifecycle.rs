//! Start, close and revoke: the launcher, the `valid` rule with the active set, and that
//! revocation is ignored while the app stops.
#![deny(unsafe_code)]

mod fakes;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use fakes::{call, who, Rig, PROJECT};
use serde_json::json;
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus};
use termsprawl_tools::runtime::PtyRequest;

fn status() -> IntegrationStatus {
    IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    }
}

#[test]
fn start_installs_the_launcher_and_serves() {
    let rig = Rig::new("life-start", &["a"]);
    let endpoint = rig.runtime.start(Path::new("/bin/echo")).unwrap();
    let launcher = rig.data().join("termsprawlctl");
    assert_eq!(rig.runtime.launcher().as_deref(), Some(launcher.as_path()));
    assert_eq!(
        fs::read_to_string(&launcher).unwrap(),
        "#!/bin/sh\nexec /bin/echo \"$@\"\n"
    );
    assert_eq!(
        fs::metadata(&launcher).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let out = std::process::Command::new(&launcher)
        .args(["call", "x y"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "call x y\n");
    let token = rig
        .runtime
        .server()
        .provision(&who("a"), status(), false)
        .unwrap()
        .token;
    let (code, body) = call(&endpoint.url, &token, "canvas_list", json!({}));
    assert_eq!(
        (code, &body["value"][0]["id"]),
        (200, &json!("a")),
        "{body}"
    );
    assert!(
        rig.runtime.start(Path::new("/bin/echo")).is_err(),
        "a second start is refused"
    );
}

#[test]
fn valid_needs_a_local_project_and_an_active_or_present_node() {
    let rig = Rig::new("life-valid", &["a"]);
    assert!(!rig.runtime.valid(&who("c1")));
    let request = PtyRequest {
        node_id: "c1".into(),
        project_id: Some(PROJECT.into()),
        command: Some("/nonexistent/codex".into()),
        env: Default::default(),
    };
    rig.runtime.prepare(request).unwrap();
    assert!(
        rig.runtime.valid(&who("c1")),
        "prepared agents are active before their node is listed"
    );
    rig.runtime.revoke("c1");
    assert!(!rig.runtime.valid(&who("c1")));
    assert!(rig.runtime.server().session("c1").is_none());
}

#[test]
fn revoke_is_ignored_while_stopping() {
    let rig = Rig::new("life-stop", &["a", "b"]);
    rig.runtime.start(Path::new("/bin/echo")).unwrap();
    rig.runtime
        .server()
        .provision(&who("a"), status(), false)
        .unwrap();
    let session_file = rig.runtime.server().session_file("a").unwrap();
    rig.runtime.close();
    rig.runtime.revoke("a");
    assert!(
        session_file.exists(),
        "quitting keeps sessions for the next start"
    );
    rig.runtime.close();
}
