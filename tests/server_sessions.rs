//! Sessions, their files and modes, and the single-instance lock.
#![deny(unsafe_code)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use common::*;
use serde_json::{json, Value};
use termsprawl_tools::protocol::IntegrationState;
use termsprawl_tools::server::AgentToolServer;

fn server(data: &std::path::Path) -> (Arc<AgentToolServer>, Arc<FakeApp>) {
    let app = Arc::new(FakeApp::default());
    (AgentToolServer::new(data, app.clone()).unwrap(), app)
}

#[test]
fn directories_are_0700_and_files_0600() {
    let data = scratch("modes");
    fs::create_dir_all(data.join("agent-tools/sessions")).unwrap();
    fs::set_permissions(data.join("agent-tools"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(
        data.join("agent-tools/sessions"),
        fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let t = start_in(&data, None);
    let dir = t.server.directory().to_path_buf();
    assert_eq!(dir, data.join("agent-tools"));
    assert_eq!(mode(&dir), 0o700, "re-tightened");
    assert_eq!(mode(&dir.join("sessions")), 0o700, "re-tightened");
    assert_eq!(mode(&dir.join("sessions/agent-1.json")), 0o600);
    assert_eq!(mode(&dir.join("endpoint.json")), 0o600);
    assert_eq!(mode(&dir.join("server.lock")), 0o600);
    t.server.close();
}

#[test]
fn session_files_are_named_only_for_valid_node_ids() {
    let (server, _) = server(&scratch("ids"));
    assert!(server
        .session_file("agent_1-A")
        .unwrap()
        .ends_with("sessions/agent_1-A.json"));
    for bad in ["", "../x", "a/b", "-a", ".hidden", &"a".repeat(129)] {
        assert_eq!(
            server.session_file(bad).unwrap_err().to_string(),
            "Invalid agent node ID"
        );
        let err = server
            .provision(&identity(bad, "p"), status("external"), true)
            .unwrap_err();
        assert_eq!(err.to_string(), "Invalid agent node ID");
    }
}

#[test]
fn provision_writes_the_session_and_reports_its_status() {
    let (server, app) = server(&scratch("provision"));
    let session = server
        .provision(&identity("n1", "p1"), status("claude-mcp"), true)
        .unwrap();
    assert_eq!(session.token.len(), 64);
    assert!(session
        .token
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    let file: Value =
        serde_json::from_slice(&fs::read(server.session_file("n1").unwrap()).unwrap()).unwrap();
    assert_eq!(
        file,
        json!({"nodeId": "n1", "projectId": "p1", "token": session.token,
               "status": {"state": "cli-fallback", "adapter": "claude-mcp"}})
    );
    assert_eq!(app.statuses.lock().unwrap().len(), 1);
    assert_eq!(server.session("n1"), Some(session.clone()));
    assert!(server.has_credentials("n1"));
    assert!(!server.has_credentials("n2"));

    let mut connected = status("claude-mcp");
    connected.state = IntegrationState::Connected;
    server.set_status("n1", connected.clone()).unwrap();
    assert_eq!(server.session("n1").unwrap().status, connected);
    assert_eq!(app.statuses.lock().unwrap().last().unwrap().1, connected);
    let file: Value =
        serde_json::from_slice(&fs::read(server.session_file("n1").unwrap()).unwrap()).unwrap();
    assert_eq!(file["status"]["state"], "connected");
    assert!(server.set_status("nobody", connected).is_err());
}

#[test]
fn provisioning_the_session_a_file_already_holds_does_not_write_it_again() {
    use std::os::unix::fs::MetadataExt;
    let data = scratch("same-session");
    let (first, _) = server(&data);
    let original = first
        .provision(&identity("n1", "p1"), status("external"), true)
        .unwrap();
    let file = first.session_file("n1").unwrap();
    // Every write is a new file renamed over the old one: a new inode.
    let inode = || fs::metadata(&file).unwrap().ino();
    let written = inode();
    // A restart: the same node, project, token and status.
    let (second, app) = server(&data);
    let same = second
        .provision(&identity("n1", "p1"), status("external"), true)
        .unwrap();
    assert_eq!(same, original);
    assert_eq!(inode(), written, "the same session is not written again");
    assert_eq!(second.session("n1"), Some(same), "but it is live");
    assert_eq!(
        app.statuses.lock().unwrap().len(),
        1,
        "and its status reported"
    );
    // Another status is written.
    second
        .provision(&identity("n1", "p1"), status("claude-mcp"), true)
        .unwrap();
    assert_ne!(inode(), written);
    let on_disk: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert_eq!(on_disk["status"]["adapter"], "claude-mcp");
    assert_eq!(on_disk["token"], original.token.as_str());
}

#[test]
fn tokens_are_reused_only_for_the_same_node_and_project() {
    let data = scratch("reuse");
    let (first, _) = server(&data);
    let original = first
        .provision(&identity("n1", "p1"), status("external"), true)
        .unwrap();
    // A new server (as after a restart) on the same directory.
    let (second, _) = server(&data);
    assert!(second.has_credentials("n1"), "the persisted session counts");
    assert!(
        second.session("n1").is_none(),
        "but is not live until provisioned"
    );
    let same = second
        .provision(&identity("n1", "p1"), status("external"), true)
        .unwrap();
    assert_eq!(same.token, original.token);
    let fresh = second
        .provision(&identity("n1", "p1"), status("external"), false)
        .unwrap();
    assert_ne!(fresh.token, original.token, "reuse=false draws a new token");
    let moved = second
        .provision(&identity("n1", "p2"), status("external"), true)
        .unwrap();
    assert_ne!(
        moved.token, fresh.token,
        "another project gets another token"
    );

    // A persisted token that is not 64 lowercase hex is never reused.
    let file = second.session_file("n1").unwrap();
    for bad in ["ABCDEF".repeat(10) + "ABCD", "abc".into(), "0".repeat(65)] {
        fs::write(
            &file,
            json!({"nodeId": "n1", "projectId": "p2", "token": bad,
                   "status": {"state": "cli-fallback", "adapter": "external"}})
            .to_string(),
        )
        .unwrap();
        let (third, _) = server(&data);
        assert!(!third.has_credentials("n1"));
        let session = third
            .provision(&identity("n1", "p2"), status("external"), true)
            .unwrap();
        assert_ne!(session.token, bad);
        assert_eq!(session.token.len(), 64);
    }
    // Junk in the file is no reason to fail.
    fs::write(&file, "{").unwrap();
    let (fourth, _) = server(&data);
    assert!(fourth
        .provision(&identity("n1", "p2"), status("external"), true)
        .is_ok());
}

#[test]
fn revoke_forgets_the_session_and_deletes_its_file() {
    let (server, _) = server(&scratch("revoke"));
    server
        .provision(&identity("n1", "p1"), status("external"), true)
        .unwrap();
    let file = server.session_file("n1").unwrap();
    assert!(file.exists());
    server.revoke("n1");
    assert!(!file.exists());
    assert!(server.session("n1").is_none());
    assert!(!server.has_credentials("n1"));
    server.revoke("n1");
    server.revoke("../etc");
}

#[test]
fn statuses_lists_the_valid_sessions_of_one_project() {
    let (server, app) = server(&scratch("statuses"));
    for (node, project) in [("b", "p1"), ("a", "p1"), ("c", "p2"), ("gone", "p1")] {
        server
            .provision(&identity(node, project), status("external"), false)
            .unwrap();
    }
    app.invalid.lock().unwrap().insert("gone".into());
    let nodes: Vec<String> = server.statuses("p1").into_iter().map(|(n, _)| n).collect();
    assert_eq!(nodes, vec!["a", "b"]);
    assert_eq!(server.statuses("p2").len(), 1);
    assert!(server.statuses("p3").is_empty());
}

#[test]
fn a_second_server_on_a_live_directory_is_refused() {
    let data = scratch("live-lock");
    let t = start_in(&data, None);
    assert_eq!(
        t.server.start().unwrap_err().to_string(),
        "Tool service already started"
    );
    let (second, _) = server(&data);
    let err = second.start().unwrap_err().to_string();
    assert!(err.contains("already using this data directory"), "{err}");
    assert!(second.endpoint().is_none());
    // The refused server touched nothing of the running one.
    let lock: Value =
        serde_json::from_slice(&fs::read(data.join("agent-tools/server.lock")).unwrap()).unwrap();
    assert_eq!(lock["instanceId"], t.server.instance_id());
    assert_eq!(lock["pid"], std::process::id());
    second.close();
    assert!(data.join("agent-tools/server.lock").exists());
    assert!(data.join("agent-tools/endpoint.json").exists());
    t.server.close();
    assert!(!data.join("agent-tools/server.lock").exists());
}

#[test]
fn a_stale_lock_is_taken_over_and_a_bad_one_refused() {
    let data = scratch("stale-lock");
    let lock = data.join("agent-tools/server.lock");
    fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    fs::write(&lock, json!({"pid": dead, "instanceId": "old"}).to_string()).unwrap();
    let (server1, _) = server(&data);
    server1.start().expect("stale lock taken over");
    let now: Value = serde_json::from_slice(&fs::read(&lock).unwrap()).unwrap();
    assert_eq!(now["instanceId"], server1.instance_id());
    server1.close();

    for bad in [
        "not json",
        r#"{"pid": 0}"#,
        r#"{"pid": -1}"#,
        r#"{"pid": "x"}"#,
        "{}",
    ] {
        fs::write(&lock, bad).unwrap();
        let (server2, _) = server(&data);
        let err = server2.start().unwrap_err().to_string();
        assert!(err.contains("server.lock"), "{bad}: {err}");
        assert_eq!(
            fs::read_to_string(&lock).unwrap(),
            bad,
            "left for a person to judge"
        );
    }
}

/// The token in `node`'s session file, if there is one.
fn file_token(server: &AgentToolServer, node: &str) -> Option<String> {
    let text = fs::read(server.session_file(node).unwrap()).ok()?;
    let value: Value = serde_json::from_slice(&text).unwrap();
    Some(value["token"].as_str().unwrap().to_string())
}

#[test]
fn set_status_racing_revoke_never_brings_the_file_back() {
    let data = scratch("status-vs-revoke");
    let (server, _app) = server(&data);
    let me = identity("agent-1", "project-a");
    for _ in 0..200 {
        server.provision(&me, status("external"), false).unwrap();
        let setter = std::thread::spawn({
            let server = server.clone();
            move || server.set_status("agent-1", status("claude-mcp"))
        });
        server.revoke("agent-1");
        let _ = setter.join().unwrap();
        assert!(server.session("agent-1").is_none());
        assert_eq!(
            file_token(&server, "agent-1"),
            None,
            "revoked file rewritten"
        );
    }
}

#[test]
fn concurrent_provisions_leave_file_and_memory_agreeing() {
    let data = scratch("provision-race");
    let (server, _app) = server(&data);
    let me = identity("agent-1", "project-a");
    for _ in 0..200 {
        let other = std::thread::spawn({
            let (server, me) = (server.clone(), me.clone());
            move || server.provision(&me, status("external"), false).unwrap()
        });
        server.provision(&me, status("external"), false).unwrap();
        other.join().unwrap();
        let memory = server.session("agent-1").unwrap().token;
        assert_eq!(file_token(&server, "agent-1"), Some(memory));
    }
}

#[test]
fn a_running_server_keeps_its_directory_even_if_its_lock_looks_stale() {
    // The stale-takeover race leaves a running server whose server.lock another starter
    // believes dead; here that is planted directly.
    let data = scratch("flock");
    let (running, _) = server(&data);
    running.start().unwrap();
    let lock = data.join("agent-tools/server.lock");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    fs::write(&lock, json!({"pid": dead, "instanceId": "old"}).to_string()).unwrap();
    let (second, _) = server(&data);
    let err = second.start().unwrap_err().to_string();
    assert!(err.contains("already using this data directory"), "{err}");
    running.close();
    // A child another test in this binary is forking holds a copy of the lock's
    // descriptor (and so the flock) until its exec closes it: retry, bounded.
    let mut started = second.start();
    for _ in 0..50 {
        if started.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        started = second.start();
    }
    started.expect("free once the first has closed");
    second.close();
}
