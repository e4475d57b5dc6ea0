//! Per-project queues: each project with work waiting has one worker thread that owns
//! an `mpsc` queue and runs that project's operations one at a time, in arrival order.
//!
//! A worker whose queue is empty waits up to [`LINGER`] for more before it exits, so a
//! project served one request at a time keeps one thread instead of starting one per
//! request. At most [`MAX_LINGERING`] workers wait at once; the others exit as soon as
//! their queue is empty, so live workers never outnumber the projects that have work queued
//! right now plus [`MAX_LINGERING`] (10,000 projects touched in turn leave no threads
//! behind). Exiting is race-free: senders send while holding the `workers` lock, and a
//! worker only decides to exit, and removes its sender, under that same lock after finding
//! its queue empty. Nothing here knows what an operation does: the worker runs the [`Work`]
//! the server queued.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::base::lock_or_recover;

/// How long an idle worker waits for more work before its thread exits.
pub const LINGER: Duration = Duration::from_secs(5);

/// How many idle workers may linger at once.
pub const MAX_LINGERING: usize = 8;

/// A unit of work queued behind a project.
pub type Work = Box<dyn FnOnce() + Send>;

/// The queues of all projects.
#[derive(Default)]
pub struct ProjectQueues {
    workers: Arc<Mutex<HashMap<String, Sender<Work>>>>,
    /// Workers waiting in [`linger`] right now.
    lingering: Arc<AtomicUsize>,
}

impl ProjectQueues {
    /// Queues `work` behind `project_id`'s earlier work. Fails only when no worker thread
    /// can be started.
    pub fn push(&self, project_id: &str, work: Work) -> Result<(), String> {
        let mut workers = lock_or_recover(&self.workers);
        let work = match workers.get(project_id) {
            Some(queue) => match queue.send(work) {
                Ok(()) => return Ok(()),
                // Its worker died (a panic outside `catch_unwind`): start a new one.
                Err(returned) => returned.0,
            },
            None => work,
        };
        let (queue, receiver) = channel();
        let _ = queue.send(work);
        let project = project_id.to_string();
        let registry = Arc::clone(&self.workers);
        let lingering = Arc::clone(&self.lingering);
        thread::Builder::new()
            .name("agent-tools-project".into())
            .spawn(move || run_worker(&project, &receiver, &registry, &lingering))
            .map_err(|e| format!("Could not start a project worker ({e}); try again"))?;
        workers.insert(project_id.to_string(), queue);
        Ok(())
    }

    /// How many projects have a worker right now.
    pub fn active(&self) -> usize {
        lock_or_recover(&self.workers).len()
    }
}

fn run_worker(
    project: &str,
    receiver: &Receiver<Work>,
    registry: &Mutex<HashMap<String, Sender<Work>>>,
    lingering: &AtomicUsize,
) {
    loop {
        let work = receiver
            .try_recv()
            .ok()
            .or_else(|| linger(receiver, lingering));
        // Nothing came: exit, unless work arrived before we took the lock senders hold.
        let work = work.or_else(|| {
            let mut workers = lock_or_recover(registry);
            let last = receiver.try_recv().ok();
            if last.is_none() {
                workers.remove(project);
            }
            last
        });
        let Some(work) = work else { return };
        // A panicking operation must not take the rest of the queue with it (the server's
        // work also catches its own panics, so that its caller still gets an answer).
        let _ = catch_unwind(AssertUnwindSafe(work));
    }
}

/// Waits up to [`LINGER`] for more work (without the `workers` lock, so senders are not
/// held up), unless [`MAX_LINGERING`] workers already wait.
fn linger(receiver: &Receiver<Work>, lingering: &AtomicUsize) -> Option<Work> {
    let work = if lingering.fetch_add(1, Ordering::SeqCst) < MAX_LINGERING {
        receiver.recv_timeout(LINGER).ok()
    } else {
        None
    };
    lingering.fetch_sub(1, Ordering::SeqCst);
    work
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Instant;

    #[test]
    fn runs_a_projects_work_in_order_and_then_exits() {
        let queues = ProjectQueues::default();
        let (done, results) = mpsc::channel();
        let (release, gate) = mpsc::channel::<()>();
        queues
            .push(
                "a",
                Box::new(move || {
                    let _ = gate.recv();
                }),
            )
            .unwrap();
        for i in 0..5 {
            let done = done.clone();
            queues
                .push("a", Box::new(move || done.send(i).unwrap()))
                .unwrap();
        }
        assert_eq!(queues.active(), 1);
        release.send(()).unwrap();
        let got: Vec<i32> = (0..5)
            .map(|_| results.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        wait_until(|| queues.active() == 0);
    }

    #[test]
    fn a_panic_does_not_stop_the_queue() {
        let queues = ProjectQueues::default();
        let (done, result) = mpsc::channel();
        queues.push("a", Box::new(|| panic!("boom"))).unwrap();
        queues
            .push("a", Box::new(move || done.send(1).unwrap()))
            .unwrap();
        assert_eq!(result.recv_timeout(Duration::from_secs(5)).unwrap(), 1);
    }

    #[test]
    fn an_idle_worker_lingers_and_serves_the_next_request() {
        let queues = ProjectQueues::default();
        let (done, ran_on) = mpsc::channel();
        let mut threads = Vec::new();
        for _ in 0..2 {
            let done = done.clone();
            let work = Box::new(move || done.send(thread::current().id()).unwrap());
            queues.push("a", work).unwrap();
            threads.push(ran_on.recv_timeout(Duration::from_secs(5)).unwrap());
            // Let the worker find its queue empty and start lingering.
            thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(threads[0], threads[1], "the lingering worker ran both");
        assert_eq!(queues.active(), 1);
        wait_until(|| queues.active() == 0);
    }

    #[test]
    fn many_projects_in_turn_leave_only_a_few_lingering_workers() {
        let queues = ProjectQueues::default();
        let mut most_workers = 0;
        for i in 0..10_000 {
            let (done, finished) = mpsc::channel();
            queues
                .push(&format!("p{i}"), Box::new(move || done.send(()).unwrap()))
                .unwrap();
            finished.recv_timeout(Duration::from_secs(5)).unwrap();
            most_workers = most_workers.max(queues.active());
        }
        // Bounded, far below the 10,000 projects: the lingering ones, and on a busy machine
        // those that found their queue empty but have not yet run to remove themselves.
        assert!(
            most_workers <= 8 * MAX_LINGERING,
            "{most_workers} workers alive at once"
        );
        wait_until(|| queues.active() == 0);
    }

    fn wait_until(done: impl Fn() -> bool) {
        let deadline = Instant::now() + LINGER + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "timed out");
            thread::sleep(Duration::from_millis(1));
        }
    }
}
