//! The person's policy over real loopback HTTP: a call in an `ask` class waits off its
//! project's queue until the person answers through the runtime's API (what the view and
//! the `approvals` command call); each answer is bound to its call and given once. The
//! host is the fake one (`fakes`), the server and runtime the real ones.
#![deny(unsafe_code)]

mod fakes;

use std::path::Path;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fakes::{call, who, Rig};
use serde_json::{json, Value};
use termsprawl_tools::protocol::{IntegrationState, IntegrationStatus, OperationClass};
use termsprawl_tools::runtime::approvals::{Asked, Decision, Shown};
use termsprawl_tools::runtime::policy::{Policy, Rule};

struct Agents {
    rig: Rig,
    url: String,
    a: String,
    b: String,
}

/// A runtime with agents `a` and `b`, a shell terminal `sh` nobody of them opened, and
/// the `careful` policy, its saved rules in `<data>/agent-tools/policy.json`.
fn careful(name: &str) -> Agents {
    let rig = Rig::new(name, &["a", "b"]);
    rig.canvas
        .add(json!({"id": "sh", "type": "terminal", "data": {"title": "Shell"}}));
    for id in ["a", "b", "sh"] {
        rig.terminals.start(id);
    }
    let endpoint = rig.runtime.start(Path::new("/bin/echo")).unwrap();
    let saved = rig.data().join("policy.json");
    let starting = Policy::named("careful").unwrap();
    rig.runtime.set_policy(starting, Some(saved)).unwrap();
    let server = Arc::clone(rig.runtime.server());
    let status = IntegrationStatus {
        state: IntegrationState::CliFallback,
        adapter: "external".into(),
        version: None,
        reason: None,
    };
    let token = |node| {
        let provisioned = server.provision(&who(node), status.clone(), false);
        provisioned.unwrap().token
    };
    let (a, b) = (token("a"), token("b"));
    Agents {
        url: endpoint.url,
        rig,
        a,
        b,
    }
}

impl Agents {
    /// `text` typed into `sh` by agent `a`, on a thread (it may wait for the person).
    fn type_into_shell(&self, text: &str) -> JoinHandle<(u16, Value)> {
        let (url, token) = (self.url.clone(), self.a.clone());
        let args = json!({"nodeId": "sh", "text": text});
        thread::spawn(move || call(&url, &token, "terminal_input", args))
    }

    /// The one call waiting for the person, once there is one.
    fn asked(&self) -> Asked {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let [asked] = self.rig.runtime.pending_approvals().as_slice() {
                return asked.clone();
            }
            assert!(Instant::now() < deadline, "no call waits for the person");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn typed(&self, text: &str) -> usize {
        let written = self.rig.terminals.written.lock().unwrap();
        written.iter().filter(|(_, t)| t == text).count()
    }
}

fn shown(asked: &Asked) -> Shown {
    Shown {
        node_id: asked.node_id.clone(),
        operation: asked.operation.clone(),
        args: asked.args.clone(),
    }
}

#[test]
fn a_call_into_another_terminal_waits_for_the_person_and_runs_once_when_allowed() {
    let agents = careful("approvals-once");
    let runtime = &agents.rig.runtime;
    let waiting = agents.type_into_shell("ls\n");
    let asked = agents.asked();
    assert_eq!(
        (asked.node_id.as_str(), asked.operation.as_str()),
        ("a", "terminal_input")
    );
    assert_eq!(asked.args["text"], "ls\n");
    assert_eq!(asked.class, OperationClass::TerminalsOthers);
    assert_eq!(agents.typed("ls\n"), 0, "typed before the person answered");

    // While it waits, another agent of the same project is answered as ever.
    let mut took = Vec::new();
    for _ in 0..200 {
        let began = Instant::now();
        let (status, answer) = call(&agents.url, &agents.b, "canvas_list", json!({}));
        took.push(began.elapsed());
        assert_eq!(status, 200, "{answer}");
    }
    assert!(!waiting.is_finished(), "answered before the person did");
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "200 canvas_list calls beside a call waiting for the person: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms",
        ms(took[100]),
        ms(took[190]),
        ms(took[199])
    );

    // An answer for other arguments, another id or another agent does nothing.
    let mut other = shown(&asked);
    other.args.insert("text".into(), json!("rm -rf ~\n"));
    let refused = runtime.decide(&asked.id, &other, Decision::AllowOnce);
    assert!(refused.unwrap_err().contains("not the one shown"));
    let refused = runtime.decide("0123", &shown(&asked), Decision::AllowOnce);
    assert!(refused.unwrap_err().contains("No call waits"));
    assert!(!waiting.is_finished());

    runtime
        .decide(&asked.id, &shown(&asked), Decision::AllowOnce)
        .unwrap();
    let (status, answer) = waiting.join().unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(agents.typed("ls\n"), 1);
    // The trail says who let it run.
    let trail = agents.rig.data().join("activity");
    let decided = (0..500).find_map(|_| {
        thread::sleep(Duration::from_millis(10)); // the trail's writer catches up
        let lines = termsprawl_tools::activity::read_tail(&trail, fakes::PROJECT, 1_000);
        lines.into_iter().find(|line| line.decided.is_some())
    });
    let decided = decided.expect("the allowed call's line in the trail");
    assert_eq!(decided.operation.as_deref(), Some("terminal_input"));
    assert_eq!(
        decided.decided.as_deref(),
        Some("allowed once by the person")
    );
    let printed = decided.display((4, 16));
    assert!(
        printed.ends_with("(allowed once by the person)"),
        "{printed}"
    );
    // A replay of the same answer is refused; the next identical call asks again.
    let replay = runtime.decide(&asked.id, &shown(&asked), Decision::AllowOnce);
    assert!(replay
        .unwrap_err()
        .contains("answered, withdrawn or expired"));
    let again = agents.type_into_shell("ls\n");
    let second = agents.asked();
    assert_ne!(second.id, asked.id);
    let no = Decision::Deny(Some("use your own terminal".into()));
    runtime.decide(&second.id, &shown(&second), no).unwrap();
    let (status, answer) = again.join().unwrap();
    assert_eq!(status, 400);
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with("The person denied this call: use your own terminal."),
        "{error}"
    );
    assert_eq!(agents.typed("ls\n"), 1, "a denied call typed");

    // "For this session": this call and the next ones of the class run without asking.
    let third = agents.type_into_shell("pwd\n");
    let asked = agents.asked();
    runtime
        .decide(&asked.id, &shown(&asked), Decision::AllowForSession)
        .unwrap();
    assert_eq!(third.join().unwrap().0, 200);
    let (status, _) = agents.type_into_shell("whoami\n").join().unwrap();
    assert_eq!(status, 200);
    assert!(runtime.pending_approvals().is_empty());
    // ...for that agent only: `b` still asks (answered by denying, without a reason).
    let (url, token) = (agents.url.clone(), agents.b.clone());
    let by_b = thread::spawn(move || {
        call(
            &url,
            &token,
            "terminal_input",
            json!({"nodeId": "sh", "text": "id\n"}),
        )
    });
    let asked = agents.asked();
    assert_eq!(asked.node_id, "b");
    runtime
        .decide(&asked.id, &shown(&asked), Decision::Deny(None))
        .unwrap();
    let (status, answer) = by_b.join().unwrap();
    assert_eq!(status, 400, "{answer}");
}

#[test]
fn always_is_saved_privately_and_read_again_by_a_new_policy() {
    use std::os::unix::fs::PermissionsExt;
    let agents = careful("approvals-always");
    let runtime = &agents.rig.runtime;
    let waiting = agents.type_into_shell("make\n");
    let asked = agents.asked();
    runtime
        .decide(&asked.id, &shown(&asked), Decision::AllowAlways)
        .unwrap();
    assert_eq!(waiting.join().unwrap().0, 200);
    let saved = agents.rig.data().join("policy.json");
    let mode = std::fs::metadata(&saved).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // As at the next start: the starting policy again, the saved rules read back.
    let careful = Policy::named("careful").unwrap();
    runtime.set_policy(careful, Some(saved)).unwrap();
    let (_, read) = runtime.policy();
    let project = fakes::PROJECT;
    let rule = read.rule(project, "a", OperationClass::TerminalsOthers);
    assert_eq!(rule, Some(Rule::Allow));
    let (status, answer) = agents.type_into_shell("make\n").join().unwrap();
    assert_eq!(status, 200, "{answer}");
    assert!(runtime.pending_approvals().is_empty());
}

#[test]
fn revoking_the_agent_withdraws_its_waiting_call() {
    let agents = careful("approvals-revoke");
    let waiting = agents.type_into_shell("ls\n");
    let asked = agents.asked();
    agents.rig.runtime.revoke("a");
    let (status, answer) = waiting.join().unwrap();
    assert_eq!(status, 400);
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.contains("withdrawn") || error.contains("revoked"),
        "{error}"
    );
    assert!(agents.rig.runtime.pending_approvals().is_empty());
    let late = agents
        .rig
        .runtime
        .decide(&asked.id, &shown(&asked), Decision::AllowOnce);
    assert!(late.is_err());
    assert_eq!(agents.typed("ls\n"), 0);
}

#[test]
fn a_denied_class_is_refused_and_leaves_session_info() {
    let agents = careful("approvals-deny");
    let runtime = &agents.rig.runtime;
    let operations = |token: &str| {
        let (_, info) = call(&agents.url, token, "session_info", json!({}));
        let names = info["value"]["operations"].as_array().unwrap().clone();
        (names, info["value"]["policy"].clone())
    };
    let (before, policy) = operations(&agents.a);
    assert!(before.contains(&json!("agent_launch")));
    assert_eq!(policy["launch"], "ask");
    assert_eq!(policy["read"], "allow");
    runtime
        .set_rule(
            fakes::PROJECT,
            Some("a"),
            OperationClass::Launch,
            Rule::Deny,
        )
        .unwrap();
    let (after, policy) = operations(&agents.a);
    assert!(!after.contains(&json!("agent_launch")), "{after:?}");
    assert_eq!(policy["launch"], "deny");
    // `b` keeps it; `a`'s call is refused at once, naming the class.
    assert!(operations(&agents.b).0.contains(&json!("agent_launch")));
    let args = json!({"agent": "claude"});
    let (status, answer) = call(&agents.url, &agents.a, "agent_launch", args);
    assert_eq!(status, 400);
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with("The person's policy denies launch operations"),
        "{error}"
    );
    assert!(runtime.pending_approvals().is_empty());
}

#[test]
fn an_unanswered_call_gets_the_stated_timeout_and_the_same_call_waits_on_the_same_request() {
    use termsprawl_tools::runtime::approvals::HOLD;
    let agents = careful("approvals-late");
    let began = Instant::now();
    let (status, answer) = agents.type_into_shell("ls\n").join().unwrap();
    assert!(began.elapsed() >= HOLD, "answered before the hold ended");
    assert_eq!(status, 400);
    let error = answer["error"].as_str().unwrap();
    let asked = agents.asked();
    assert!(
        error.starts_with("The person has not answered this call yet")
            && error.contains(&asked.id)
            && error.contains("call again with the same arguments"),
        "{error}"
    );
    assert_eq!(agents.typed("ls\n"), 0);
    // Called again: still one request, and the person's answer reaches this call.
    let again = agents.type_into_shell("ls\n");
    thread::sleep(Duration::from_millis(300));
    assert_eq!(agents.asked().id, asked.id);
    let runtime = &agents.rig.runtime;
    runtime
        .decide(&asked.id, &shown(&asked), Decision::AllowOnce)
        .unwrap();
    assert_eq!(again.join().unwrap().0, 200);
    assert_eq!(agents.typed("ls\n"), 1);
}
