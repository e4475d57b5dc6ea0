//! The embedder API of the default host: several folder projects in one `DefaultHost`,
//! each with its own canvas, agents and terminals, over real HTTP.
#![cfg(feature = "host")] // drives `serve` or the default host
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use serve_harness::{node, poll, post, Dirs};
use termsprawl_tools::host::{AgentFlag, DefaultHost, HostConfig, TerminalsMode};

#[test]
fn two_projects_keep_their_canvases_and_folders_apart() {
    let dirs = Dirs::new("projects");
    let web = dirs.root.join("web");
    let api = dirs.root.join("api");
    std::fs::create_dir_all(&web).unwrap();
    std::fs::create_dir_all(&api).unwrap();
    let mut host = DefaultHost::new(HostConfig {
        data: dirs.data.clone(),
        terminals: TerminalsMode::Pty,
        browser: false,
        pane_filter: None,
        isolation: termsprawl_tools::host::isolation::Setting::Auto,
    })
    .unwrap();
    let flag = |id: &str| AgentFlag {
        node_id: id.into(),
        adapter: None,
    };
    let web_id = host.add_project(&web, Some("web")).unwrap();
    // As `serve --agent` does: the agent's node goes into the new project's first write.
    let api_id = host
        .add_project_with_agents(&api, None, &[flag("a")])
        .unwrap();
    assert_ne!(web_id, api_id);
    assert!(host.add_project(&web, Some("web")).is_err(), "opened twice");
    // The launcher needs some path; no test here runs it.
    let endpoint = host.start(Path::new("/usr/bin/true")).unwrap();
    let api_file = api.join(".termsprawl/project.json");
    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&api_file).unwrap());
    let api_written = inode();
    host.add_agent(&web_id, &flag("w")).unwrap();
    host.add_agent(&api_id, &flag("a")).unwrap();
    assert_eq!(inode(), api_written, "its node was there: no second write");
    let call = |node: &str, operation: &str, args: serde_json::Value| {
        let token = serve_harness::token(&dirs, node);
        post(
            endpoint.port,
            &token,
            &json!({"operation": operation, "args": args}),
        )
        .1
    };

    let sticky = call("w", "sticky_open", json!({"text": "web only"}));
    let sticky_id = sticky["value"]["nodeId"].as_str().unwrap().to_string();
    let web_list = call("w", "canvas_list", json!({}))["value"].clone();
    let api_list = call("a", "canvas_list", json!({}))["value"].clone();
    assert!(node(&web_list, &sticky_id).is_some() && node(&web_list, "a").is_none());
    assert!(node(&api_list, &sticky_id).is_none() && node(&api_list, "a").is_some());
    // An agent cannot reach another project's nodes.
    let refused = call(
        "a",
        "canvas_move",
        json!({"nodeId": sticky_id, "x": 1, "y": 1}),
    );
    assert_eq!(refused["ok"], false);

    let term = call("a", "terminal_open", json!({}))["value"]["nodeId"].clone();
    call(
        "a",
        "terminal_submit",
        json!({"nodeId": term, "command": "pwd"}),
    );
    let real_api = api.canonicalize().unwrap();
    poll("pwd in the api folder", Duration::from_secs(5), || {
        let read = call("a", "terminal_read", json!({"nodeId": term}));
        let output = read["value"]["output"].as_str()?.to_string();
        output
            .contains(&format!("\n{}", real_api.display()))
            .then_some(())
    });
    assert!(web.join(".termsprawl/project.json").is_file());
    assert!(api.join(".termsprawl/project.json").is_file());
    host.shutdown(false);
    assert!(!dirs.agent_tools().join("endpoint.json").exists());
}
