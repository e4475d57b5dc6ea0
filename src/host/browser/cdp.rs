//! The DevTools protocol over Chromium's pipe: NUL-terminated JSON messages.
//!
//! One reader thread owns the read end. Replies (messages with an `id`) go to the caller
//! waiting for that id through a one-shot channel; the caller waits with `recv_timeout`,
//! so no call outlives its deadline. Events go first to the connection's event hook
//! (the engine's navigation policy, run on the reader thread and never blocking on
//! anything but a pipe write), then to every subscriber of the event's session. When the
//! pipe closes (Chromium exited) every waiting caller is woken with [`CdpError::Closed`].

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The largest message we accept from Chromium (a full-HD PNG in base64 is far smaller).
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Why a command produced no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CdpError {
    /// The pipe is closed: Chromium exited or was killed.
    Closed,
    /// The deadline passed before Chromium replied.
    Timeout,
    /// Chromium replied with an error (its message).
    Protocol(String),
}

/// An event from Chromium: its method, parameters and the session it belongs to
/// (`None` for the browser session).
#[derive(Debug, Clone)]
pub struct Event {
    /// E.g. `Page.lifecycleEvent`.
    pub method: String,
    /// The event's `params` object.
    pub params: Value,
    /// The flat-mode session id, if the event came from an attached target.
    pub session: Option<String>,
}

/// Called on the reader thread for every event, before subscribers see it.
pub type EventHook = Box<dyn Fn(&Connection, &Event) + Send + Sync>;

/// Called once on the reader thread when the pipe has closed.
pub type CloseHook = Box<dyn FnOnce() + Send>;

/// One DevTools pipe connection.
pub struct Connection {
    writer: Mutex<File>,
    next_id: AtomicU64,
    alive: AtomicBool,
    pending: Mutex<HashMap<u64, Sender<Result<Value, CdpError>>>>,
    subscribers: Mutex<HashMap<String, Vec<Sender<Event>>>>,
}

/// Recovers a guard from a poisoned mutex: our maps stay consistent across a panic
/// because every critical section is a single insert or remove.
use crate::base::lock_or_recover as lock;

impl Connection {
    /// Starts the reader thread on `replies` and returns the connection.
    pub fn start(
        commands: File,
        replies: File,
        hook: EventHook,
        on_close: CloseHook,
    ) -> std::io::Result<Arc<Self>> {
        let connection = Arc::new(Connection {
            writer: Mutex::new(commands),
            next_id: AtomicU64::new(1),
            alive: AtomicBool::new(true),
            pending: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(HashMap::new()),
        });
        let reader = Arc::clone(&connection);
        thread::Builder::new()
            .name("chromium-devtools-reader".to_string())
            .spawn(move || {
                reader.read_loop(replies, hook);
                on_close();
            })?;
        Ok(connection)
    }

    /// False once the pipe has closed or a write to it failed.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Sends `method` and waits for its reply until `deadline`.
    pub fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        deadline: Instant,
    ) -> Result<Value, CdpError> {
        if !self.is_alive() {
            return Err(CdpError::Closed);
        }
        // A command sent after its deadline could act with nobody waiting for the result.
        if Instant::now() >= deadline {
            return Err(CdpError::Timeout);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(id, tx);
        if let Err(error) = self.write(id, method, params, session) {
            lock(&self.pending).remove(&id);
            return Err(error);
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => {
                lock(&self.pending).remove(&id);
                Err(CdpError::Timeout)
            }
            Err(RecvTimeoutError::Disconnected) => Err(CdpError::Closed),
        }
    }

    /// Sends `method` and returns at once; the reply is taken later from the [`Pending`]
    /// (a check that runs every tick must never wait for Chromium).
    pub fn request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Pending {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(id, tx);
        if let Err(error) = self.write(id, method, params, session) {
            lock(&self.pending).remove(&id);
            let (tx, rx) = mpsc::channel();
            drop(tx.send(Err(error)));
            return Pending(Arc::clone(self), id, rx);
        }
        Pending(Arc::clone(self), id, rx)
    }

    /// Sends `method` without waiting; its reply is dropped. Used by the event hook,
    /// which must never wait for the reader thread it runs on.
    pub fn send(&self, method: &str, params: Value, session: Option<&str>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        drop(self.write(id, method, params, session));
    }

    /// Events of `session` (`""` for the browser session) from now on, until the
    /// receiver is dropped or the session is forgotten.
    pub fn subscribe(&self, session: &str) -> Receiver<Event> {
        let (tx, rx) = mpsc::channel();
        lock(&self.subscribers)
            .entry(session.to_string())
            .or_default()
            .push(tx);
        rx
    }

    /// Drops every subscription of a session that no longer exists.
    pub fn forget_session(&self, session: &str) {
        lock(&self.subscribers).remove(session);
    }

    fn write(
        &self,
        id: u64,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<(), CdpError> {
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::String(session.to_string());
        }
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        // Chromium drains the pipe on its own I/O thread, so this write does not wait on us.
        let mut writer = lock(&self.writer);
        if writer.write_all(&bytes).is_err() {
            self.alive.store(false, Ordering::SeqCst);
            return Err(CdpError::Closed);
        }
        Ok(())
    }

    fn read_loop(&self, mut replies: File, hook: EventHook) {
        let mut buffer: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = match replies.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            // Only the new bytes can hold a terminator; earlier ones were searched.
            let searched = buffer.len();
            buffer.extend_from_slice(&chunk[..n]);
            let mut start = 0;
            for offset in memchr_all(&buffer[searched..]) {
                let end = searched + offset;
                self.dispatch(&buffer[start..end], &hook);
                start = end + 1;
            }
            buffer.drain(..start);
            if buffer.len() > MAX_MESSAGE_BYTES {
                // A message this large is not something we asked for: stop trusting the pipe.
                break;
            }
        }
        self.close();
    }

    fn dispatch(&self, bytes: &[u8], hook: &EventHook) {
        let message: Value = match serde_json::from_slice(bytes) {
            Ok(message) => message,
            Err(_) => {
                // Chromium can emit strings serde refuses (lone surrogates). A reply we
                // cannot read still must wake its caller.
                if let Some(id) = leading_id(bytes) {
                    self.deliver(
                        id,
                        Err(CdpError::Protocol(
                            "Chromium sent a reply that could not be read".to_string(),
                        )),
                    );
                }
                return;
            }
        };
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            let reply = match message.get("error") {
                Some(error) => Err(CdpError::Protocol(
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error")
                        .to_string(),
                )),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            self.deliver(id, reply);
            return;
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return;
        };
        let event = Event {
            method: method.to_string(),
            params: message.get("params").cloned().unwrap_or(Value::Null),
            session: message
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        hook(self, &event);
        let key = event.session.clone().unwrap_or_default();
        let mut subscribers = lock(&self.subscribers);
        if let Some(list) = subscribers.get_mut(&key) {
            list.retain(|tx| tx.send(event.clone()).is_ok());
        }
    }

    fn deliver(&self, id: u64, reply: Result<Value, CdpError>) {
        if let Some(tx) = lock(&self.pending).remove(&id) {
            drop(tx.send(reply));
        }
    }

    fn close(&self) {
        self.alive.store(false, Ordering::SeqCst);
        // Dropping the senders wakes every waiting caller with Disconnected -> Closed.
        lock(&self.pending).clear();
        lock(&self.subscribers).clear();
    }
}

/// A command's reply to come (see [`Connection::request`]); dropping it forgets the reply.
pub struct Pending(Arc<Connection>, u64, Receiver<Result<Value, CdpError>>);

impl Pending {
    /// The reply if it has come; `None`: not yet.
    pub fn reply(&self) -> Option<Result<Value, CdpError>> {
        match self.2.try_recv() {
            Ok(reply) => Some(reply),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => Some(Err(CdpError::Closed)),
        }
    }

    /// The reply if it comes within `wait`; `None`: not yet.
    pub fn wait(&self, wait: Duration) -> Option<Result<Value, CdpError>> {
        match self.2.recv_timeout(wait) {
            Ok(reply) => Some(reply),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Err(CdpError::Closed)),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        lock(&self.0.pending).remove(&self.1);
    }
}

/// Offsets of every NUL byte in `bytes`.
fn memchr_all(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == 0)
        .map(|(i, _)| i)
}

/// The id of a reply that begins `{"id":N`, as Chromium writes them.
fn leading_id(bytes: &[u8]) -> Option<u64> {
    let rest = bytes.strip_prefix(b"{\"id\":")?;
    let digits: Vec<u8> = rest
        .iter()
        .copied()
        .take_while(u8::is_ascii_digit)
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// A connection whose "Chromium" is the test, holding the other ends of both pipes.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;

    /// (connection, what the connection wrote, where to write replies and events).
    pub(crate) fn connection(hook: EventHook) -> (Arc<Connection>, File, File) {
        let (cmd_read, cmd_write) = crate::sys::fd::pipe().unwrap();
        let (rep_read, rep_write) = crate::sys::fd::pipe().unwrap();
        let [cmd_read, cmd_write, rep_read, rep_write] =
            [cmd_read, cmd_write, rep_read, rep_write].map(File::from);
        let connection = Connection::start(cmd_write, rep_read, hook, Box::new(|| {})).unwrap();
        (connection, cmd_read, rep_write)
    }

    /// The next command the connection wrote.
    pub(crate) fn read_command(from: &mut File) -> Value {
        let mut bytes = Vec::new();
        let mut byte = [0u8; 1];
        while from.read(&mut byte).unwrap() == 1 && byte[0] != 0 {
            bytes.push(byte[0]);
        }
        serde_json::from_slice(&bytes).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::fake::read_command;
    use super::*;
    use std::time::Duration;

    fn fake() -> (Arc<Connection>, File, File) {
        super::fake::connection(Box::new(|_, _| {}))
    }

    #[test]
    fn replies_reach_their_caller_and_events_their_session() {
        let (connection, mut chromium_in, mut chromium_out) = fake();
        let events = connection.subscribe("S1");
        let caller = {
            let connection = Arc::clone(&connection);
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(5);
                connection.call("Page.enable", json!({}), Some("S1"), deadline)
            })
        };
        let command = read_command(&mut chromium_in);
        assert_eq!(command["method"], "Page.enable");
        assert_eq!(command["sessionId"], "S1");
        let id = command["id"].as_u64().unwrap();
        let out = format!(
            "{{\"method\":\"Page.loadEventFired\",\"params\":{{}},\"sessionId\":\"S1\"}}\0{{\"id\":{id},\"result\":{{\"ok\":1}}}}\0"
        );
        chromium_out.write_all(out.as_bytes()).unwrap();
        assert_eq!(caller.join().unwrap(), Ok(json!({"ok": 1})));
        let event = events.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(event.method, "Page.loadEventFired");
    }

    #[test]
    fn errors_timeouts_and_closing_wake_callers() {
        let (connection, mut chromium_in, mut chromium_out) = fake();
        assert_eq!(
            connection.call("Late.call", json!({}), None, Instant::now()),
            Err(CdpError::Timeout)
        );
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(
            connection.call("A.b", json!({}), None, soon),
            Err(CdpError::Timeout)
        );
        // The late call was never sent: the first command Chromium sees is A.b.
        assert_eq!(read_command(&mut chromium_in)["method"], "A.b");

        let caller = {
            let connection = Arc::clone(&connection);
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(5);
                connection.call("C.d", json!({}), None, deadline)
            })
        };
        let id = read_command(&mut chromium_in)["id"].as_u64().unwrap();
        let out = format!("{{\"id\":{id},\"error\":{{\"code\":-32000,\"message\":\"No\"}}}}\0");
        chromium_out.write_all(out.as_bytes()).unwrap();
        assert_eq!(
            caller.join().unwrap(),
            Err(CdpError::Protocol("No".to_string()))
        );

        let caller = {
            let connection = Arc::clone(&connection);
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(5);
                connection.call("E.f", json!({}), None, deadline)
            })
        };
        read_command(&mut chromium_in);
        drop(chromium_out);
        assert_eq!(caller.join().unwrap(), Err(CdpError::Closed));
        assert!(!connection.is_alive());
    }

    #[test]
    fn unreadable_reply_still_wakes_its_caller() {
        assert_eq!(leading_id(b"{\"id\":42,\"result\":\"\\ud800\"}"), Some(42));
        assert_eq!(leading_id(b"{\"method\":\"x\"}"), None);
    }
}
