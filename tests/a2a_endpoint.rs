//! The A2A endpoint of a real `serve`: an agent's card and JSON-RPC on the tool port,
//! first raw (every refusal, 0.3 without `A2A-Version`, errors in JSON-RPC's shape), then
//! with the official Python `a2a-sdk` client (`tests/a2a_sdk_client.py`), the recipient a
//! fake agent in a PTY terminal that replies through the tool API.
#![cfg(feature = "host")] // drives `serve`
#![deny(unsafe_code)]

mod serve_harness;
mod sys;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use serve_harness::*;

/// One request on a fresh connection: (status, body as JSON, or the text if it is not).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(name, _)| *name == "Host") {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (
        status,
        serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_string())),
    )
}

fn python_with_a2a() -> Option<String> {
    python_package("a2a.client", "a2a-sdk")
}

struct Rig {
    dirs: Dirs,
    serve: Serve,
    /// The recipient (a listening fake claude) and an agent nobody linked.
    b: String,
    c: String,
    token: String,
}

impl Rig {
    fn new(name: &str) -> Rig {
        let dirs = Dirs::new(name);
        let fakes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_agents");
        let path = format!(
            "{}:{}",
            fakes.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env = [("PATH", path.as_str()), ("FAKE_CLAUDE_CONNECT", "listen")];
        let serve = Serve::start_with_env(&dirs, &["--terminals", "pty", "--agent", "me"], &env);
        let mut agents = Vec::new();
        for _ in 0..2 {
            let launched = serve.ok(&dirs, "me", "agent_launch", json!({"agent": "claude"}));
            let node = launched["nodeId"].as_str().unwrap().to_string();
            poll("the agent to listen", Duration::from_secs(15), || {
                let read = serve.ok(&dirs, "me", "terminal_read", json!({"nodeId": node}));
                read["output"]
                    .as_str()
                    .unwrap()
                    .contains("listening as")
                    .then_some(())
            });
            agents.push(node);
        }
        let out = Command::new(env!("CARGO_BIN_EXE_termsprawl-tools"))
            .args(["link", "me", &agents[0], "--messages", "--project"])
            .arg(&dirs.project)
            .output()
            .unwrap();
        assert!(out.status.success());
        let token = token(&dirs, "me");
        let c = agents.pop().unwrap();
        let b = agents.pop().unwrap();
        Rig {
            dirs,
            serve,
            b,
            c,
            token,
        }
    }

    fn rpc(&self, version: Option<&str>, body: Value) -> Value {
        let bearer = format!("Bearer {}", self.token);
        let mut headers = vec![
            ("Authorization", bearer.as_str()),
            ("Content-Type", "application/json"),
        ];
        if let Some(version) = version {
            headers.push(("A2A-Version", version));
        }
        let path = format!("/a2a/agents/{}", self.b);
        let (status, answer) = http(self.serve.port, "POST", &path, &headers, &body.to_string());
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["jsonrpc"], json!("2.0"), "{answer}");
        assert!(
            !answer.to_string().contains(&self.token),
            "no token in an answer"
        );
        answer
    }
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn the_agent_card_and_json_rpc_follow_a2a_with_every_refusal() {
    let rig = Rig::new("a2a-raw");
    let port = rig.serve.port;
    let bearer = format!("Bearer {}", rig.token);
    let auth = [("Authorization", bearer.as_str())];
    let card_of = |node: &str| format!("/a2a/agents/{node}/.well-known/agent-card.json");

    // The card: only for a token of an agent that may send to it; 1.0's for a 1.x client.
    let v1 = [auth[0], ("A2A-Version", "1.0")];
    let (status, card) = http(port, "GET", &card_of(&rig.b), &v1, "");
    assert_eq!(status, 200, "{card}");
    let url = format!("http://127.0.0.1:{port}/a2a/agents/{}", rig.b);
    for legacy in ["url", "preferredTransport", "protocolVersion", "security"] {
        assert!(
            card.get(legacy).is_none(),
            "a 1.0 card has no {legacy}: {card}"
        );
    }
    // 0.3's for a client that sends no A2A-Version.
    let (status, old) = http(port, "GET", &card_of(&rig.b), &auth, "");
    assert_eq!(status, 200, "{old}");
    assert_eq!(
        (&old["url"], &old["protocolVersion"]),
        (&json!(url), &json!("0.3.0"))
    );
    assert_eq!(
        old["securitySchemes"]["termsprawlSession"]["type"],
        json!("http")
    );
    assert_eq!(old["security"], json!([{"termsprawlSession": []}]));
    assert!(old.get("supportedInterfaces").is_none(), "{old}");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(
        card["capabilities"],
        json!({"streaming": false, "pushNotifications": false})
    );
    assert_eq!(card["skills"].as_array().unwrap().len(), 1);
    assert_eq!(
        card["securitySchemes"]["termsprawlSession"]["httpAuthSecurityScheme"]["scheme"],
        json!("Bearer")
    );
    assert!(!card.to_string().contains(&rig.token));
    assert_eq!(
        http(port, "GET", &card_of(&rig.b), &[], "").0,
        401,
        "no token"
    );
    let wrong = [("Authorization", "Bearer 00")];
    assert_eq!(
        http(port, "GET", &card_of(&rig.b), &wrong, "").0,
        401,
        "a wrong token"
    );
    let (status, refused) = http(port, "GET", &card_of(&rig.c), &auth, "");
    assert_eq!(status, 404, "no link to c: {refused}");
    assert!(refused.get("name").is_none(), "no card: {refused}");
    assert_eq!(http(port, "GET", &card_of("nobody"), &auth, "").0, 404);
    let browser = [auth[0], ("Origin", "http://127.0.0.1:9")];
    assert_eq!(
        http(port, "GET", &card_of(&rig.b), &browser, "").0,
        403,
        "Origin"
    );
    let fetch = [auth[0], ("Sec-Fetch-Site", "same-origin")];
    assert_eq!(
        http(port, "GET", &card_of(&rig.b), &fetch, "").0,
        403,
        "Sec-Fetch-Site"
    );
    assert_eq!(
        http(port, "POST", &card_of(&rig.b), &auth, "{}").0,
        403,
        "POST to the card"
    );
    assert_eq!(
        http(port, "GET", &format!("/a2a/agents/{}", rig.b), &auth, "").0,
        403,
        "GET to RPC"
    );
    assert_eq!(http(port, "GET", "/a2a/agents/../call", &auth, "").0, 403);
    assert_eq!(http(port, "DELETE", &card_of(&rig.b), &auth, "").0, 403);
    let rebinding = [auth[0], ("Host", "evil.example:80")];
    assert_eq!(
        http(port, "GET", &card_of(&rig.b), &rebinding, "").0,
        403,
        "Host"
    );
    let rpc_path = format!("/a2a/agents/{}", rig.b);
    let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(130 * 1024));
    let (status, too_large) = http(port, "POST", &rpc_path, &auth, &huge);
    assert_eq!(status, 400, "the 128 KiB cap: {too_large}");

    // JSON-RPC errors, each with its code.
    let request = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), request("FlyToTheMoon", json!({})))),
        -32601
    );
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), request("CancelTask", json!({"id": "x"})))),
        -32004
    );
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), request("SendStreamingMessage", json!({})))),
        -32004
    );
    let v2 = rig.rpc(Some("2.0"), request("SendMessage", json!({})));
    assert_eq!(error_code(&v2), -32009, "{v2}");
    let no_version = rig.rpc(None, request("SendMessage", json!({})));
    assert_eq!(
        error_code(&no_version),
        -32009,
        "no A2A-Version is 0.3, and SendMessage is 1.0's: {no_version}"
    );
    assert!(no_version["error"]["message"]
        .as_str()
        .unwrap()
        .contains("send A2A-Version: 1.0"));
    let empty = rig.rpc(Some(""), request("message/send", json!({})));
    assert_eq!(
        error_code(&empty),
        -32602,
        "an empty header is 0.3: {empty}"
    );
    let legacy_in_v1 = rig.rpc(Some("1"), request("tasks/get", json!({"id": "x"})));
    assert_eq!(
        error_code(&legacy_in_v1),
        -32009,
        "1 is 1.x; tasks/get is 0.3's"
    );
    let push = request("CreateTaskPushNotificationConfig", json!({}));
    assert_eq!(error_code(&rig.rpc(Some("1.0"), push)), -32003);
    let extended = request("GetExtendedAgentCard", json!({}));
    assert_eq!(error_code(&rig.rpc(Some("1.0"), extended)), -32007);
    let notification = json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}});
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), notification)),
        -32600,
        "no id"
    );
    let post_origin = [auth[0], ("Origin", "http://evil.example")];
    let rpc_path = format!("/a2a/agents/{}", rig.b);
    assert_eq!(
        http(port, "POST", &rpc_path, &post_origin, "{}").0,
        403,
        "Origin on RPC"
    );
    let (status, parse) = http(
        port,
        "POST",
        &format!("/a2a/agents/{}", rig.b),
        &auth,
        "{nope",
    );
    assert_eq!((status, error_code(&parse)), (200, -32700), "{parse}");
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), json!({"id": 1, "method": "GetTask"}))),
        -32600
    );
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), json!([1, 2]))),
        -32600,
        "batches"
    );
    let control = request(
        "SendMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "a\u{1b}[201~b"}]}}),
    );
    let control = rig.rpc(Some("1.0"), control);
    assert_eq!(
        error_code(&control),
        -32602,
        "control characters: {control}"
    );
    let data = request(
        "SendMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"x": 1}}]}}),
    );
    assert_eq!(
        error_code(&rig.rpc(Some("1.0"), data)),
        -32602,
        "only text parts"
    );
    let unknown = rig.rpc(Some("1.0"), request("GetTask", json!({"id": "task-0"})));
    assert_eq!(error_code(&unknown), -32001, "{unknown}");

    // 0.3: message/send and tasks/get in 0.3's shapes. The sender is the token's agent,
    // whatever the message's metadata says.
    let message = json!({"kind": "message", "messageId": "legacy-1", "role": "user",
        "parts": [{"kind": "text", "text": "please reply: from 0.3"}], "metadata": {"from": rig.c}});
    let sent = rig.rpc(None, request("message/send", json!({"message": message})));
    let task = &sent["result"];
    assert_eq!(task["kind"], json!("task"), "{sent}");
    assert_eq!(task["status"]["state"], json!("submitted"));
    assert_eq!(
        task["metadata"]["from"],
        json!("me"),
        "identity from the token only"
    );
    assert_eq!(
        task["history"][0]["parts"][0],
        json!({"kind": "text", "text": "please reply: from 0.3"})
    );
    let id = task["id"].clone();
    let done = poll("the fake agent's reply", Duration::from_secs(15), || {
        let got = rig.rpc(None, request("tasks/get", json!({"id": id})));
        Some(got["result"].clone()).filter(|t| t["status"]["state"] == "completed")
    });
    assert_eq!(
        done["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": format!("done by {}", rig.b)})
    );
    // 1.0 reads the same task in its shape.
    let v1 = rig.rpc(Some("1.0"), request("GetTask", json!({"id": id})));
    assert_eq!(
        v1["result"]["status"]["state"],
        json!("TASK_STATE_COMPLETED"),
        "{v1}"
    );
    assert_eq!(v1["result"]["history"][0]["role"], json!("ROLE_USER"));
    assert!(v1["result"].get("kind").is_none());
    // The tool API sees it too (the same task).
    let tool = rig
        .serve
        .ok(&rig.dirs, "me", "agent_task", json!({"taskId": id}));
    assert_eq!(tool["tasks"][0]["messageId"], json!("legacy-1"));
    // Consent still rules: c was not linked.
    let to_c = format!("/a2a/agents/{}", rig.c);
    let headers = [auth[0], ("A2A-Version", "1.0")];
    let body = request(
        "SendMessage",
        json!({"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    );
    let (_, refused) = http(port, "POST", &to_c, &headers, &body.to_string());
    assert_eq!(error_code(&refused), -32000, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No link lets you send"),
        "{refused}"
    );
    // Every A2A request is in the activity trail: the calls it became, and the refusals
    // made before one (here the unknown method), without a token.
    let trail = rig
        .dirs
        .agent_tools()
        .join(format!("activity/{}.jsonl", rig.serve.project_id()));
    let lines = poll("the trail's lines", Duration::from_secs(5), || {
        let text = std::fs::read_to_string(&trail).ok()?;
        text.contains("Method not found: FlyToTheMoon")
            .then_some(text)
    });
    assert!(lines.contains("\"operation\":\"agent_send\""), "{lines}");
    assert!(lines.contains("\"operation\":\"agent_cards\""), "{lines}");
    assert!(!lines.contains(&rig.token));
    assert!(rig.serve.stop().success());
}

#[test]
fn the_python_a2a_sdk_fetches_the_card_sends_and_reads_the_replied_task() {
    let Some(version) = python_with_a2a() else {
        eprintln!("NOTICE: python3 with the `a2a-sdk` package is not installed; skipping the A2A SDK test (pip install a2a-sdk)");
        return;
    };
    let rig = Rig::new("a2a-sdk");
    let base = |node: &str| format!("http://127.0.0.1:{}/a2a/agents/{node}", rig.serve.port);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/a2a_sdk_client.py");
    let out = Command::new("python3")
        .args([script, &base(&rig.b), &rig.token, &base(&rig.c)])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    println!("--- a2a-sdk {version} ---\n{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let result: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| panic!("no RESULT line\n{stdout}"));
    assert_eq!(result["state"], json!("TASK_STATE_COMPLETED"));
    assert_eq!(result["reply"], json!(format!("done by {}", rig.b)));
    let screen = rig
        .serve
        .ok(&rig.dirs, "me", "terminal_read", json!({"nodeId": rig.b}));
    let screen = screen["output"].as_str().unwrap();
    assert!(
        screen.contains("received: [termsprawl] Message from agent me"),
        "{screen}"
    );
    assert!(
        screen.contains("\"please reply: sent by the A2A SDK\""),
        "{screen}"
    );
    println!("--- the recipient's screen ---\n{screen}");
    assert!(rig.serve.stop().success());
}

#[test]
fn a_message_id_shaped_like_an_encoded_one_names_its_own_task() {
    let rig = Rig::new("a2a-ids");
    let send = |message_id: &str| {
        let message = json!({"messageId": message_id, "role": "ROLE_USER",
            "parts": [{"text": "please reply: one id"}]});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}});
        let sent = rig.rpc(Some("1.0"), body);
        assert!(sent.get("error").is_none(), "{message_id}: {sent}");
        sent["result"]["task"].clone()
    };
    let completed = |task: &Value| {
        let id = task["id"].clone();
        poll("the fake agent's reply", Duration::from_secs(15), || {
            let body =
                json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}});
            let got = rig.rpc(Some("1.0"), body);
            Some(got["result"].clone()).filter(|t| t["status"]["state"] == "TASK_STATE_COMPLETED")
        })
    };
    // `q.1` is encoded as h- and its bytes in hex, `h-712e31`; an id that already looks
    // like that is encoded too, so the two are different messages with the same text.
    let dotted = completed(&send("q.1"));
    let shaped = send("h-712e31");
    assert_ne!(
        shaped["id"], dotted["id"],
        "two messageIds, two tasks: {shaped}"
    );
    assert_eq!(dotted["history"][0]["messageId"], json!("q.1"));
    assert_eq!(shaped["history"][0]["messageId"], json!("h-712e31"));
    completed(&shaped);
    // Each is still idempotent on its own.
    assert_eq!(send("q.1")["id"], dotted["id"]);
    assert_eq!(send("h-712e31")["id"], shaped["id"]);
    // An id over the limit is refused with the limit.
    let long = "h-".to_string() + &"a".repeat(62);
    let message = json!({"messageId": long, "role": "ROLE_USER", "parts": [{"text": "x"}]});
    let body =
        json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": message}});
    let refused = rig.rpc(Some("1.0"), body);
    assert_eq!(error_code(&refused), -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 to 63 bytes"),
        "{refused}"
    );
    assert!(rig.serve.stop().success());
}
