//! Handler threads: an idle one is reused, else a new one is started; each exits after
//! [`HANDLER_IDLE`](super::HANDLER_IDLE) without work.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use crate::server::lock_or_recover;

pub(super) type Job = Box<dyn FnOnce() + Send>;
/// The idle handlers: each one's thread id and the sender of its next job.
pub(super) type IdleList = Mutex<Vec<(ThreadId, Sender<Job>)>>;

pub(super) struct Handlers {
    /// How long an idle handler waits for a job before it exits.
    idle_for: Duration,
    /// `run` pops a handler to send it a job; one that times out leaves only after taking
    /// itself out of this list, so a job is never sent to a handler that is leaving.
    idle: Arc<IdleList>,
}

impl Handlers {
    /// No handler yet; each will exit after `idle_for` without work.
    pub(super) fn new(idle_for: Duration) -> Handlers {
        Handlers {
            idle_for,
            idle: Arc::default(),
        }
    }

    /// Runs `job` on an idle handler or a new one; false when no thread could be started
    /// (the job, with any request it holds, is then dropped here).
    pub(super) fn run(&self, mut job: Job) -> bool {
        loop {
            let next = lock_or_recover(&self.idle).pop();
            let Some((_, handler)) = next else { break };
            match handler.send(job) {
                Ok(()) => return true,
                // Only if that handler died; try the next one.
                Err(returned) => job = returned.0,
            }
        }
        let (idle, idle_for) = (self.idle.clone(), self.idle_for);
        // If it cannot start, the job is dropped with its request: tiny_http answers 500.
        thread::Builder::new()
            .name("agent-tools-http".into())
            .spawn(move || handler_loop(job, &idle, idle_for))
            .inspect_err(|e| eprintln!("agent-tools: could not start a handler thread: {e}"))
            .is_ok()
    }

    /// Lets every idle handler exit now.
    pub(super) fn release_idle(&self) {
        lock_or_recover(&self.idle).clear();
    }
}

pub(super) fn handler_loop(mut job: Job, idle: &IdleList, idle_for: Duration) {
    let me = thread::current().id();
    loop {
        job();
        let (sender, jobs) = channel();
        lock_or_recover(idle).push((me, sender));
        job = match jobs.recv_timeout(idle_for) {
            Ok(next) => next,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let mut listed = lock_or_recover(idle);
                if let Some(at) = listed.iter().position(|(id, _)| *id == me) {
                    listed.swap_remove(at);
                    return;
                }
                drop(listed);
                // `run` popped us just now and is sending a job (or `release_idle`
                // dropped our sender): wait for it.
                let Ok(next) = jobs.recv() else { return };
                next
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::mpsc;
    use std::time::Instant;

    #[test]
    fn an_idle_handler_is_reused() {
        let pool = Handlers::new(Duration::from_secs(5));
        let (done, ran) = mpsc::channel();
        let mut threads = HashSet::new();
        for _ in 0..200 {
            let done = done.clone();
            pool.run(Box::new(move || done.send(thread::current().id()).unwrap()));
            threads.insert(ran.recv_timeout(Duration::from_secs(5)).unwrap());
            // The job has run; wait until its handler has listed itself idle again, so
            // the next job must go to it rather than to a new thread.
            let deadline = Instant::now() + Duration::from_secs(5);
            while lock_or_recover(&pool.idle).is_empty() {
                assert!(Instant::now() < deadline, "the handler never became idle");
                thread::yield_now();
            }
        }
        assert_eq!(threads.len(), 1, "{} threads for 200 jobs", threads.len());
        pool.release_idle();
    }

    #[test]
    fn no_job_is_lost_to_a_handler_that_is_leaving() {
        // Jobs arrive around the moment idle handlers time out, again and again.
        let pool = Handlers::new(Duration::from_micros(300));
        let (done, ran) = mpsc::channel();
        for i in 0..2000u32 {
            let done = done.clone();
            pool.run(Box::new(move || done.send(i).unwrap()));
            ran.recv_timeout(Duration::from_secs(5))
                .expect("every job runs");
            thread::sleep(Duration::from_micros(u64::from(i % 7) * 100));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !lock_or_recover(&pool.idle).is_empty() {
            assert!(Instant::now() < deadline, "idle handlers never left");
            thread::sleep(Duration::from_millis(1));
        }
    }
}
