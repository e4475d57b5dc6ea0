//! Calls that wait (a terminal command's end; later a page, an approval) without holding
//! their project's worker. The operation does its immediate part on the worker, then hands
//! the server a [`Wait`]. One waiter thread, started with the first wait and gone when none
//! is left, checks the waits when woken ([`Waker`]) and every [`TICK`] while any exists, and
//! answers each when its check says so, at its deadline, or when its caller is gone
//! (revoked session, a caller that hung up, [`Waits::close`]). A place is
//! [`Waits::reserve`]d before the operation acts, so a call past the bound is refused
//! having done nothing.
//!
//! The bounds: [`WAITS_MAX`] in all, [`WAITS_PER_PROJECT`] per project, and
//! [`WAITS_PER_AGENT`] per agent, a quarter of its project's: one agent that fills its
//! share leaves the rest of the project's places to the others, so its hoarding cannot
//! keep another agent from waiting or from being asked about (a call held for the
//! person waits too); only four agents all hoarding at once could.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::base::lock_or_recover;

/// How often the waits are checked while any exists, besides each wake.
pub const TICK: Duration = Duration::from_millis(250);
/// At most this many calls of one project wait at once…
pub const WAITS_PER_PROJECT: usize = 64;
/// …and this many in all…
pub const WAITS_MAX: usize = 256;
/// …and one agent at most this many (its fair share of its project's places).
pub const WAITS_PER_AGENT: usize = WAITS_PER_PROJECT / 4;

/// A waited call's answer, as `ServerCallbacks::execute` gives it.
pub type Outcome = Result<Value, String>;

/// What a waiting call waits for.
pub trait Awaited: Send {
    /// The answer once it has happened; `None`: not yet.
    fn check(&mut self) -> Option<Outcome>;
    /// The answer when the deadline came first.
    fn at_deadline(&mut self) -> Outcome;
}

/// A call that waits.
pub struct Wait {
    /// Its place among the bounded waits (`AgentToolServer::reserve_wait`), given back
    /// when the wait is dropped.
    pub slot: WaitSlot,
    /// When it is answered at the latest.
    pub deadline: Instant,
    /// What it waits for.
    pub awaited: Box<dyn Awaited>,
}

impl Wait {
    /// Waits on this thread: for a caller outside the server (an embedder's `execute`).
    pub fn block(mut self) -> Outcome {
        loop {
            match self.checked() {
                Some(answer) => return answer,
                None => thread::sleep(TICK),
            }
        }
    }

    /// The answer if the call is done or its deadline has come (or its check panicked).
    fn checked(&mut self) -> Option<Outcome> {
        let check = || match self.awaited.check() {
            None if Instant::now() >= self.deadline => Some(self.awaited.at_deadline()),
            answer => answer,
        };
        catch_unwind(AssertUnwindSafe(check)).unwrap_or_else(|_| Some(Err(FAILED.into())))
    }
}

const FAILED: &str = "Checking on the waiting call failed unexpectedly; inspect before retrying";
const SHUTTING_DOWN: &str =
    "Tool service is shutting down; the call stopped waiting (what it started goes on)";

/// A place among the bounded waits, of one agent (project id, node id).
pub struct WaitSlot(Arc<Shared>, (String, String));

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let state = &mut *lock_or_recover(&self.0.state);
        let (project, _) = &self.1;
        state.held.entry(project.clone()).and_modify(|n| *n -= 1);
        state.held.retain(|_, n| *n > 0);
        state.by_agent.entry(self.1.clone()).and_modify(|n| *n -= 1);
        state.by_agent.retain(|_, n| *n > 0);
    }
}

/// Wakes the waiter: call it when something a wait may wait for happened (output, a
/// command's end, a terminal closing). Cheap, from any thread.
#[derive(Clone)]
pub struct Waker(Arc<Shared>);

impl Waker {
    /// Has every wait checked now.
    pub fn wake(&self) {
        lock_or_recover(&self.0.state).woken = true;
        self.0.wakeup.notify_one();
    }
}

/// A wait, why its caller may be gone (asked before each check), how it is answered.
struct Waiting(
    Wait,
    Box<dyn Fn() -> Option<String> + Send>,
    Box<dyn FnOnce(Outcome) + Send>,
);

#[derive(Default)]
struct State {
    /// Places taken, by project…
    held: HashMap<String, usize>,
    /// …and by agent (project id, node id).
    by_agent: HashMap<(String, String), usize>,
    waiting: Vec<Waiting>,
    woken: bool,
    closed: bool,
    /// The waiter thread runs.
    running: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wakeup: Condvar,
}

/// The server's waiting calls.
#[derive(Default)]
pub struct Waits(Arc<Shared>);

impl Waits {
    /// A place for one more wait of agent `node` of `project`, or the refusal for the
    /// agent.
    pub fn reserve(&self, project: &str, node: &str) -> Result<WaitSlot, String> {
        let mut state = lock_or_recover(&self.0.state);
        let agent = (project.to_string(), node.to_string());
        let held = state.held.get(project).copied().unwrap_or(0);
        let mine = state.by_agent.get(&agent).copied().unwrap_or(0);
        let total: usize = state.held.values().sum();
        if state.closed {
            return Err("Tool service is shutting down; try again".into());
        }
        if mine >= WAITS_PER_AGENT {
            return Err(format!("This agent has {mine} calls waiting already (at most {WAITS_PER_AGENT}, its share of the project's {WAITS_PER_PROJECT}); nothing was done. Let one of them answer first, or call without waiting and check back later."));
        }
        if held >= WAITS_PER_PROJECT || total >= WAITS_MAX {
            return Err(format!("Too many calls are waiting already ({held} in this project, at most {WAITS_PER_PROJECT}; {} in all, at most {WAITS_MAX}); nothing was done. Try again when one has answered, or call without waiting and check back later.", total));
        }
        state.held.insert(project.to_string(), held + 1);
        state.by_agent.insert(agent.clone(), mine + 1);
        Ok(WaitSlot(Arc::clone(&self.0), agent))
    }

    /// Waits for `wait`, then `finish`es with its answer (on the waiter thread), unless
    /// `gone` says why its caller may no longer be answered.
    pub fn add(
        &self,
        wait: Wait,
        gone: Box<dyn Fn() -> Option<String> + Send>,
        finish: Box<dyn FnOnce(Outcome) + Send>,
    ) {
        let mut state = lock_or_recover(&self.0.state);
        if state.closed {
            drop(state);
            return finish(Err(SHUTTING_DOWN.into()));
        }
        if !state.running {
            let shared = Arc::clone(&self.0);
            let waiter = thread::Builder::new().name("agent-tools-waits".into());
            if waiter.spawn(move || run_waiter(&shared)).is_err() {
                drop(state);
                return finish(Err("Could not start waiting; try again".into()));
            }
            state.running = true;
        }
        state.waiting.push(Waiting(wait, gone, finish));
        state.woken = true;
        self.0.wakeup.notify_one();
    }

    /// A handle that wakes the waiter.
    pub fn waker(&self) -> Waker {
        Waker(Arc::clone(&self.0))
    }

    /// Ends every wait with a shutting-down answer; later ones are answered so at once.
    pub fn close(&self) {
        let mut state = lock_or_recover(&self.0.state);
        state.closed = true;
        let ended = std::mem::take(&mut state.waiting);
        drop(state);
        end_all(ended);
    }

    /// How many calls wait now.
    pub fn waiting(&self) -> usize {
        lock_or_recover(&self.0.state).held.values().sum()
    }
}

fn end_all(waits: Vec<Waiting>) {
    for Waiting(_, _, finish) in waits {
        finish(Err(SHUTTING_DOWN.into()));
    }
}

/// The waiter thread (module docs); it exits when no wait is left.
fn run_waiter(shared: &Shared) {
    let mut state = lock_or_recover(&shared.state);
    while !state.waiting.is_empty() {
        if !state.woken {
            let first = state.waiting.iter().map(|w| w.0.deadline).min();
            let until = first.map_or(TICK, |d| d.saturating_duration_since(Instant::now()));
            let woken = shared.wakeup.wait_timeout(state, until.min(TICK));
            state = woken.map_or_else(|poisoned| poisoned.into_inner().0, |(state, _)| state);
        }
        state.woken = false;
        let round = std::mem::take(&mut state.waiting);
        // Checks and answers run without the lock: they call the host and write answers.
        drop(state);
        let mut kept = Vec::new();
        for Waiting(mut wait, gone, finish) in round {
            match gone().map(Err).or_else(|| wait.checked()) {
                Some(answer) => finish(answer),
                None => kept.push(Waiting(wait, gone, finish)),
            }
        }
        state = lock_or_recover(&shared.state);
        if state.closed {
            drop(state);
            end_all(kept);
            state = lock_or_recover(&shared.state);
        } else {
            state.waiting.extend(kept);
        }
    }
    state.running = false;
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Waits {
        fn waiter_running(&self) -> bool {
            lock_or_recover(&self.0.state).running
        }
    }
    use serde_json::json;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    /// Done once `done` is set; at the deadline answers "late".
    struct Flag(Arc<AtomicBool>);

    impl Awaited for Flag {
        fn check(&mut self) -> Option<Outcome> {
            self.0.load(Ordering::SeqCst).then(|| Ok(json!("done")))
        }
        fn at_deadline(&mut self) -> Outcome {
            Ok(json!("late"))
        }
    }

    /// Adds a wait of agent `node` of `project`.
    fn add(
        waits: &Waits,
        (project, node): (&str, &str),
        flag: &Arc<AtomicBool>,
        after: Duration,
    ) -> mpsc::Receiver<Outcome> {
        let (answer, answered) = mpsc::channel();
        let slot = waits.reserve(project, node).unwrap();
        let wait = Wait {
            slot,
            deadline: Instant::now() + after,
            awaited: Box::new(Flag(flag.clone())),
        };
        let finish = Box::new(move |outcome| answer.send(outcome).unwrap());
        waits.add(wait, Box::new(|| None), finish);
        answered
    }

    const LONG: Duration = Duration::from_secs(600);
    const ANSWER: Duration = Duration::from_secs(10);

    fn wait_until(done: impl Fn() -> bool) {
        let deadline = Instant::now() + ANSWER;
        while !done() {
            assert!(Instant::now() < deadline, "timed out");
            thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_wait_is_answered_when_its_check_says_so_after_a_wake() {
        let waits = Waits::default();
        let flag = Arc::new(AtomicBool::new(false));
        let answered = add(&waits, ("p", "a"), &flag, LONG);
        assert!(answered.recv_timeout(TICK * 3).is_err(), "answered early");
        flag.store(true, Ordering::SeqCst);
        waits.waker().wake();
        assert_eq!(answered.recv_timeout(ANSWER).unwrap(), Ok(json!("done")));
        wait_until(|| waits.waiting() == 0 && !waits.waiter_running());
    }

    #[test]
    fn a_wait_gets_its_deadline_answer_and_the_waiter_exits() {
        let waits = Waits::default();
        let flag = Arc::new(AtomicBool::new(false));
        let answered = add(&waits, ("p", "a"), &flag, Duration::from_millis(50));
        assert_eq!(answered.recv_timeout(ANSWER).unwrap(), Ok(json!("late")));
        wait_until(|| !waits.waiter_running());
    }

    #[test]
    fn the_bounds_refuse_one_more_and_free_places_when_waits_end() {
        let waits = Waits::default();
        let flag = Arc::new(AtomicBool::new(false));
        // Four agents fill the project, each its share.
        let answers: Vec<_> = (0..WAITS_PER_PROJECT)
            .map(|i| add(&waits, ("p", ["a", "b", "c", "d"][i % 4]), &flag, LONG))
            .collect();
        let refused = waits.reserve("p", "e").err().unwrap();
        assert!(
            refused.contains(&format!("at most {WAITS_PER_PROJECT}")),
            "{refused}"
        );
        // Other projects still have places, up to the bound in all.
        let mut others = Vec::new();
        for i in WAITS_PER_PROJECT..WAITS_MAX {
            let agent = format!("a{}", i % 16);
            others.push(waits.reserve(&format!("q{}", i % 8), &agent).unwrap());
        }
        assert!(
            waits.reserve("r", "a").is_err(),
            "one past the bound in all"
        );
        // One waiter thread for all of them.
        assert!(waits.waiter_running());
        drop(others);
        flag.store(true, Ordering::SeqCst);
        waits.waker().wake();
        for answered in answers {
            assert_eq!(answered.recv_timeout(ANSWER).unwrap(), Ok(json!("done")));
        }
        wait_until(|| waits.waiting() == 0);
        assert!(waits.reserve("p", "e").is_ok());
    }

    #[test]
    fn one_agent_holds_at_most_its_share_and_others_still_wait() {
        let waits = Waits::default();
        let hoarded: Vec<_> = (0..WAITS_PER_AGENT)
            .map(|_| waits.reserve("p", "hoarder").unwrap())
            .collect();
        let refused = waits.reserve("p", "hoarder").err().unwrap();
        assert!(
            refused.starts_with(&format!("This agent has {WAITS_PER_AGENT} calls waiting")),
            "{refused}"
        );
        // The same node id in another project is another agent.
        assert!(waits.reserve("q", "hoarder").is_ok());
        let other = waits.reserve("p", "other");
        assert!(other.is_ok(), "another agent still waits");
        drop(hoarded);
        assert!(waits.reserve("p", "hoarder").is_ok(), "places come back");
    }

    #[test]
    fn many_waits_use_one_thread() {
        let before = threads();
        let waits = Waits::default();
        let flag = Arc::new(AtomicBool::new(false));
        let answers: Vec<_> = (0..WAITS_PER_PROJECT)
            .map(|i| add(&waits, (&format!("p{i}"), "a"), &flag, LONG))
            .collect();
        let during = threads();
        flag.store(true, Ordering::SeqCst);
        waits.waker().wake();
        for answered in answers {
            answered.recv_timeout(ANSWER).unwrap().unwrap();
        }
        // Other tests run beside this one: allow them a few threads, never one per wait.
        assert!(
            during < before + 8,
            "{before} threads before, {during} with 32 waits"
        );
    }

    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").map_or(0, |tasks| tasks.count())
    }

    #[test]
    fn close_and_a_gone_caller_end_waits_with_a_clear_answer() {
        let waits = Waits::default();
        let flag = Arc::new(AtomicBool::new(false));
        let (answer, answered) = mpsc::channel();
        let wait = Wait {
            slot: waits.reserve("p", "a").unwrap(),
            deadline: Instant::now() + LONG,
            awaited: Box::new(Flag(flag.clone())),
        };
        let gone = Arc::new(AtomicBool::new(false));
        let is_gone = gone.clone();
        let why = Box::new(move || {
            is_gone
                .load(Ordering::SeqCst)
                .then(|| "Session revoked".to_string())
        });
        waits.add(
            wait,
            why,
            Box::new(move |outcome| answer.send(outcome).unwrap()),
        );
        gone.store(true, Ordering::SeqCst);
        waits.waker().wake();
        assert_eq!(
            answered.recv_timeout(ANSWER).unwrap(),
            Err("Session revoked".into())
        );

        let closing = add(&waits, ("p", "a"), &flag, LONG);
        waits.close();
        let ended = closing.recv_timeout(ANSWER).unwrap().unwrap_err();
        assert!(ended.contains("shutting down"), "{ended}");
        assert!(waits.reserve("p", "a").is_err(), "no new waits after close");
        wait_until(|| waits.waiting() == 0);
    }

    #[test]
    fn a_panicking_check_still_answers() {
        struct Panics;
        impl Awaited for Panics {
            fn check(&mut self) -> Option<Outcome> {
                panic!("check")
            }
            fn at_deadline(&mut self) -> Outcome {
                Ok(Value::Null)
            }
        }
        let waits = Waits::default();
        let wait = Wait {
            slot: waits.reserve("p", "a").unwrap(),
            deadline: Instant::now() + LONG,
            awaited: Box::new(Panics),
        };
        let (answer, answered) = mpsc::channel();
        waits.add(
            wait,
            Box::new(|| None),
            Box::new(move |o| answer.send(o).unwrap()),
        );
        assert!(answered.recv_timeout(ANSWER).unwrap().is_err());
        wait_until(|| !waits.waiter_running());
    }
}
