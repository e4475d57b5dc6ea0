//! `serve`'s side of the person's attention: once a second it looks at what each agent of
//! the project is doing (`runtime::attention`: a call held for the person, what the agent
//! said through its hooks, or its terminal), and when one's state changes it writes a
//! line in the trail (operation `attention`, which `activity --follow` prints) and, with
//! `serve --notify-command PROGRAM`, runs the person's program when an agent starts
//! waiting for them or is done.
//!
//! Looking once a second coalesces a flood of changes (an agent's hooks firing a thousand
//! times a second make at most one line and one run a second). The program runs without
//! a shell: its two arguments are a summary and a body (as `notify-send` takes them), and
//! `TERMSPRAWL_AGENT`, `TERMSPRAWL_STATE`, `TERMSPRAWL_WHY`, `TERMSPRAWL_REASON` and
//! `TERMSPRAWL_PROJECT` are in its environment; the reason is the agent's text, cut and
//! escaped, and only ever an argument or a variable's value. At most
//! [`RUNNING_MAX`] runs at a time (more are skipped, said on stderr); a run past
//! [`RUN_LIMIT`] is killed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::runtime::attention::AgentState;
use crate::runtime::AgentToolRuntime;

/// How often the agents' states are looked at.
pub const EVERY: Duration = Duration::from_secs(1);
/// At most this many runs of the notify program at a time.
pub const RUNNING_MAX: usize = 4;
/// A run of the notify program is killed after this long.
pub const RUN_LIMIT: Duration = Duration::from_secs(10);

/// Starts the watcher thread for `project_id` until `stop` is set.
pub fn watch(
    runtime: Arc<AgentToolRuntime>,
    project_id: String,
    notify: Option<PathBuf>,
    stop: Arc<AtomicBool>,
) {
    let spawned = thread::Builder::new()
        .name("agent-tools-attention".into())
        .spawn(move || {
            let mut watcher = Watcher {
                runtime,
                project_id,
                notify,
                seen: HashMap::new(),
                running: Vec::new(),
                looked: false,
            };
            while !stop.load(Ordering::SeqCst) {
                watcher.look();
                thread::sleep(EVERY);
            }
            watcher.finish();
        });
    if let Err(e) = spawned {
        eprintln!("termsprawl-tools: cannot watch the agents' states: {e}");
    }
}

struct Watcher {
    runtime: Arc<AgentToolRuntime>,
    project_id: String,
    notify: Option<PathBuf>,
    /// Each agent's state as last seen (without its time).
    seen: HashMap<String, (String, Option<String>, Option<String>)>,
    running: Vec<(Child, Instant)>,
    /// Whether the first look was taken: it only notes the states (a restart does not
    /// notify again about agents that were waiting before it).
    looked: bool,
}

impl Watcher {
    fn look(&mut self) {
        self.reap();
        let states = self.runtime.agent_states(&self.project_id);
        let mut now_seen = HashMap::new();
        for (node_id, state) in states {
            let key = (
                state.state.to_string(),
                state.why.map(str::to_string),
                state.reason.clone(),
            );
            if self.seen.get(&node_id) != Some(&key) {
                self.changed(&node_id, &state);
            }
            now_seen.insert(node_id, key);
        }
        self.seen = now_seen;
        self.looked = true;
    }

    fn changed(&mut self, node_id: &str, state: &AgentState) {
        let mut args = Map::new();
        args.insert("state".into(), Value::from(state.state));
        if let Some(why) = state.why {
            args.insert("why".into(), Value::from(why));
        }
        if let Some(reason) = &state.reason {
            args.insert("reason".into(), Value::from(reason.as_str()));
        }
        let server = self.runtime.server();
        server.record_attention(&self.project_id, node_id, &args);
        if self.looked && matches!(state.state, "waiting" | "done") {
            self.run_notify(node_id, state);
        }
    }

    fn run_notify(&mut self, node_id: &str, state: &AgentState) {
        let Some(program) = &self.notify else {
            return;
        };
        if self.running.len() >= RUNNING_MAX {
            eprintln!("termsprawl-tools: --notify-command: {RUNNING_MAX} runs still going; not run for {node_id}");
            return;
        }
        let why = state.why.unwrap_or_default();
        let reason = state.reason.as_deref().unwrap_or_default();
        let summary = match state.state {
            "waiting" => format!("{node_id} waits for you"),
            _ => format!("{node_id} is done"),
        };
        // Always a word of ours first: the agent's text never starts an argument (a
        // leading `-` would read as an option to a program like notify-send).
        let said = if why.is_empty() { state.state } else { why };
        let body = match reason {
            "" => said.to_string(),
            reason => format!("{said}: {reason}"),
        };
        let spawned = Command::new(program)
            .arg(&summary)
            .arg(&body)
            .env("TERMSPRAWL_AGENT", node_id)
            .env("TERMSPRAWL_STATE", state.state)
            .env("TERMSPRAWL_WHY", why)
            .env("TERMSPRAWL_REASON", reason)
            .env("TERMSPRAWL_PROJECT", &self.project_id)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => self.running.push((child, Instant::now())),
            Err(e) => eprintln!(
                "termsprawl-tools: --notify-command {}: {e}",
                program.display()
            ),
        }
    }

    /// Waits for the runs that ended, kills those past [`RUN_LIMIT`].
    fn reap(&mut self) {
        self.running.retain_mut(|(child, started)| {
            if !matches!(child.try_wait(), Ok(None)) {
                return false;
            }
            if started.elapsed() > RUN_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
            true
        });
    }

    fn finish(&mut self) {
        for (child, _) in &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
