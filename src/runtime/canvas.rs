//! The canvas bridge: sends a canvas operation to the [`CanvasOwner`] and waits for its
//! acknowledgement. A request goes out once; if no acknowledgement comes in time the agent
//! is told to inspect the canvas, because the mutation may or may not have been applied.
//! The [`CanvasOwner`] trait (the host's side) is here too, with the [`CanvasReplier`] it
//! answers through.

use std::sync::{mpsc, Arc, Mutex, Weak};
use std::{collections::HashMap, time::Duration};

use serde_json::{Map, Value};

use crate::base::{random_id, unix_millis};
use crate::protocol::{CanvasToolReply, CanvasToolRequest, ToolResult};

/// How long the runtime waits for an acknowledgement.
pub const CANVAS_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the owner may still apply a request (its `expiresAt`).
pub const CANVAS_EXPIRY: Duration = Duration::from_secs(9);
/// The error of a request that was not acknowledged in time.
pub const CANVAS_TIMEOUT_ERROR: &str =
    "Canvas did not acknowledge the operation. Inspect the canvas before retrying.";
/// The error when nobody shows the project's canvas.
pub const CANVAS_CLOSED_ERROR: &str =
    "The project's canvas is not open; ask the user to show the project tab, then retry";

#[doc = include_str!("../../docs/api/canvas-owner.md")]
pub trait CanvasOwner: Send + Sync + 'static {
    /// The sender id of whoever shows this project's canvas now; `None` when nobody does.
    fn target(&self, project_id: &str) -> Option<u64>;
    /// Delivers a request to that sender (on the project's worker: hand it over, do not
    /// apply it here). It must not be applied after `expires_at`, and is answered once,
    /// from any thread, with `replier`.
    fn send(
        &self,
        target: u64,
        request: CanvasToolRequest,
        replier: CanvasReplier,
    ) -> Result<(), String>;
    /// `canvas_list`'s answer for `project_id` when the owner can give it at once, never
    /// waiting (its last one, known to be current), so the call skips its project's
    /// queue; `None` (the default): ask through [`send`](Self::send). The same `Arc` while
    /// the list is the same: the server serializes each list once.
    fn current_list(&self, _project_id: &str) -> Option<Arc<Value>> {
        None
    }
}

struct Pending {
    sender_id: u64,
    finish: mpsc::Sender<ToolResult>,
}

/// The bridge's state, under one lock so a request cannot slip in after [`CanvasBridge::fail_all`].
#[derive(Default)]
struct BridgeState {
    /// Requests waiting for the owner's reply, by request id.
    pending: HashMap<String, Pending>,
    /// Set by `fail_all`: the app is stopping and no request may wait any more.
    closed: bool,
}

/// Answers canvas requests: the owner gets one with each request
/// ([`CanvasOwner::send`]). Cloneable and `Send`; it holds the runtime's bridge weakly, so
/// the app's canvas thread can keep it without keeping the runtime alive.
#[derive(Clone)]
pub struct CanvasReplier {
    bridge: Weak<CanvasBridge>,
    sender_id: u64,
}

impl CanvasReplier {
    /// Hands `reply` to the request waiting for it. Refused with the reason when no
    /// request with that id waits (answered already, timed out, the app stopped), it was
    /// sent to another target than this replier's, or the runtime is gone; the agent's
    /// call then ends by its own deadline.
    pub fn reply(&self, reply: CanvasToolReply) -> Result<(), String> {
        let bridge = self
            .bridge
            .upgrade()
            .ok_or("The agent tool runtime is gone")?;
        bridge.answer(self.sender_id, reply)
    }

    /// The target ([`CanvasOwner::target`]) the request this came with went to.
    pub fn target(&self) -> u64 {
        self.sender_id
    }

    /// A replier no request waits on (its replies are refused): for owners' unit tests.
    #[cfg(all(test, feature = "host"))]
    pub(crate) fn unconnected(sender_id: u64) -> CanvasReplier {
        CanvasReplier {
            bridge: Weak::new(),
            sender_id,
        }
    }
}

/// Requests waiting for the owner's reply, by request id.
#[derive(Default)]
pub struct CanvasBridge {
    state: Mutex<BridgeState>,
}

fn stopped_error(request_id: &str) -> String {
    format!("App stopped during request {request_id}")
}

impl CanvasBridge {
    /// Sends `operation` for `project_id` to the owner once, with a replier, and waits
    /// for its reply. `caller` is the calling agent's node id (`None`: the person).
    pub fn request(
        self: &Arc<Self>,
        owner: &dyn CanvasOwner,
        (project_id, caller): (&str, Option<&str>),
        operation: &str,
        args: Map<String, Value>,
    ) -> Result<Value, String> {
        let sender_id = owner.target(project_id).ok_or(CANVAS_CLOSED_ERROR)?;
        let request_id = random_id();
        let (finish, result) = mpsc::channel();
        {
            let mut state = self.lock();
            if state.closed {
                return Err(stopped_error(&request_id));
            }
            let waiting = Pending { sender_id, finish };
            state.pending.insert(request_id.clone(), waiting);
        }
        let request = CanvasToolRequest {
            request_id: request_id.clone(),
            project_id: project_id.to_string(),
            expires_at: unix_millis() + CANVAS_EXPIRY.as_millis() as u64,
            operation: operation.to_string(),
            args,
            caller: caller.map(str::to_string),
        };
        let replier = CanvasReplier {
            bridge: Arc::downgrade(self),
            sender_id,
        };
        if let Err(error) = owner.send(sender_id, request, replier) {
            self.lock().pending.remove(&request_id);
            return Err(error);
        }
        let outcome = result.recv_timeout(CANVAS_ACK_TIMEOUT);
        self.lock().pending.remove(&request_id);
        match outcome {
            Ok(ToolResult::Ok(value)) => Ok(value),
            Ok(ToolResult::Err(error)) => Err(error),
            Err(_) => Err(CANVAS_TIMEOUT_ERROR.to_string()),
        }
    }

    /// Implements [`crate::runtime::AgentToolRuntime::canvas_reply`].
    pub fn reply(&self, sender_id: u64, main_frame: bool, reply: CanvasToolReply) -> bool {
        main_frame && self.answer(sender_id, reply).is_ok()
    }

    /// Hands `reply` to the request waiting for it from `sender_id`, or says why not.
    pub fn answer(&self, sender_id: u64, reply: CanvasToolReply) -> Result<(), String> {
        let id = &reply.request_id;
        let pending = &mut self.lock().pending;
        let waiting = pending.remove(id).ok_or_else(|| {
            format!("No canvas request {id} is waiting: answered already, timed out, or the app stopped")
        })?;
        if waiting.sender_id != sender_id {
            let to = waiting.sender_id;
            pending.insert(id.clone(), waiting);
            return Err(format!(
                "Canvas request {id} went to sender {to}, not {sender_id}"
            ));
        }
        // The waiter may have timed out a moment ago; then nobody listens.
        if waiting.finish.send(reply.result).is_err() {
            return Err(format!("Canvas request {id} timed out before this reply"));
        }
        Ok(())
    }

    /// Fails every waiting request with `App stopped during request <id>`, and from now on
    /// every new one at once (no acknowledgement will come).
    pub fn fail_all(&self) {
        let mut state = self.lock();
        state.closed = true;
        for (id, waiting) in state.pending.drain() {
            let _ = waiting.finish.send(ToolResult::Err(stopped_error(&id)));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BridgeState> {
        // A panic while holding this lock cannot leave the map inconsistent.
        crate::base::lock_or_recover(&self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records requests and replies from a thread, as a real owner would.
    struct Owner {
        bridge: Arc<CanvasBridge>,
        sent: Mutex<Vec<CanvasToolRequest>>,
        answer_as: u64,
        main_frame: bool,
    }

    impl Owner {
        /// An owner of project `p` (target 7) that answers every request from the main frame.
        fn answering(bridge: &Arc<CanvasBridge>) -> Owner {
            Owner {
                bridge: bridge.clone(),
                sent: Mutex::default(),
                answer_as: 7,
                main_frame: true,
            }
        }
    }

    impl CanvasOwner for Owner {
        fn target(&self, project_id: &str) -> Option<u64> {
            (project_id == "p").then_some(7)
        }
        fn send(
            &self,
            _target: u64,
            request: CanvasToolRequest,
            _replier: CanvasReplier,
        ) -> Result<(), String> {
            self.sent.lock().unwrap().push(request.clone());
            let bridge = self.bridge.clone();
            let (sender, main) = (self.answer_as, self.main_frame);
            std::thread::spawn(move || {
                let reply = CanvasToolReply {
                    request_id: request.request_id,
                    result: ToolResult::Ok(serde_json::json!({"op": request.operation})),
                };
                bridge.reply(sender, main, reply);
            });
            Ok(())
        }
    }

    #[test]
    fn answers_reach_the_waiter_with_id_and_expiry() {
        let bridge = Arc::new(CanvasBridge::default());
        let owner = Owner::answering(&bridge);
        let before = unix_millis();
        let value = bridge
            .request(&owner, ("p", None), "canvas_list", Map::new())
            .unwrap();
        assert_eq!(value, serde_json::json!({"op": "canvas_list"}));
        let sent = owner.sent.lock().unwrap();
        assert_eq!(sent[0].request_id.len(), 32);
        assert!(
            sent[0].expires_at >= before + 9_000 && sent[0].expires_at <= unix_millis() + 9_000
        );
        assert_eq!(bridge.lock().pending.len(), 0);
        assert_eq!(
            bridge.request(&owner, ("other", None), "canvas_list", Map::new()),
            Err(CANVAS_CLOSED_ERROR.into())
        );
    }

    #[test]
    fn ignores_unknown_ids_wrong_senders_and_subframes() {
        let bridge = Arc::new(CanvasBridge::default());
        let (finish, result) = mpsc::channel();
        bridge.lock().pending.insert(
            "r1".into(),
            Pending {
                sender_id: 7,
                finish,
            },
        );
        let reply = |id: &str| CanvasToolReply {
            request_id: id.into(),
            result: ToolResult::Err("no".into()),
        };
        assert!(!bridge.reply(7, false, reply("r1")));
        assert!(!bridge.reply(8, true, reply("r1")));
        assert!(!bridge.reply(7, true, reply("r2")));
        assert!(result.try_recv().is_err());
        assert!(bridge.reply(7, true, reply("r1")));
        assert_eq!(result.try_recv().unwrap(), ToolResult::Err("no".into()));
        assert!(
            !bridge.reply(7, true, reply("r1")),
            "a second reply is unknown"
        );
        let (finish, result) = mpsc::channel();
        bridge.lock().pending.insert(
            "r3".into(),
            Pending {
                sender_id: 7,
                finish,
            },
        );
        bridge.fail_all();
        assert_eq!(
            result.try_recv().unwrap(),
            ToolResult::Err("App stopped during request r3".into())
        );
    }
    #[test]
    fn a_request_after_fail_all_fails_at_once() {
        let bridge = Arc::new(CanvasBridge::default());
        let owner = Owner::answering(&bridge);
        bridge.fail_all();
        let error = bridge
            .request(&owner, ("p", None), "canvas_list", Map::new())
            .unwrap_err();
        // Without the closed flag the owner would be sent it and answer (Ok).
        assert!(error.starts_with("App stopped during request "), "{error}");
        assert!(owner.sent.lock().unwrap().is_empty(), "nothing is sent");
        assert_eq!(bridge.lock().pending.len(), 0);
    }
}
