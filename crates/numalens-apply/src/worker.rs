//! Page moves on a thread of their own: a `move_pages` of pages that running threads use waits
//! for every CPU of the process to drop its mappings, which can take long, and the recorder's
//! loop (draining the sampling rings, scanning pages) must not wait with it. Jobs are made in
//! the order they are sent, one after the other; the sender says how many may wait at once
//! (the online engine keeps the next small job waiting behind the one being made, so that the
//! mover never idles until the recorder's loop comes round; a plan's timed moves send one at a
//! time).

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::JoinHandle;

use crate::migrate::{MigrateOptions, Migrator, Outcome, Request};

/// One epoch's moves of one process.
pub struct Job {
    pub pid: u32,
    pub epoch: u64,
    pub requests: Vec<Request>,
    pub policy: String,
    pub reason: String,
    pub time_ns: u64,
}

pub struct MoveWorker {
    jobs: Option<Sender<Vec<Job>>>,
    outcomes: Receiver<Vec<Outcome>>,
    thread: Option<JoinHandle<()>>,
    /// Sends whose outcomes have not come back.
    in_flight: usize,
}

impl MoveWorker {
    pub fn start(options: MigrateOptions, page_size: u64) -> MoveWorker {
        let (jobs, inbox) = channel::<Vec<Job>>();
        let (outbox, outcomes) = channel();
        let thread = std::thread::Builder::new()
            .name("numalens-mover".into())
            .spawn(move || {
                let mut migrator = Migrator::new(options, page_size);
                for batch in inbox {
                    let done = batch
                        .iter()
                        .map(|j| {
                            let label = (j.policy.as_str(), j.reason.as_str());
                            migrator.migrate(j.pid, j.epoch, &j.requests, label, j.time_ns)
                        })
                        .collect();
                    if outbox.send(done).is_err() {
                        break;
                    }
                }
            })
            .expect("a thread can be started");
        MoveWorker {
            jobs: Some(jobs),
            outcomes,
            thread: Some(thread),
            in_flight: 0,
        }
    }

    /// Whether moves sent are still being made.
    pub fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Sends not done yet: the one being made and those waiting behind it.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub fn send(&mut self, jobs: Vec<Job>) {
        if let Some(tx) = &self.jobs
            && tx.send(jobs).is_ok()
        {
            self.in_flight += 1;
        }
    }

    /// The outcomes of the sends done since the last poll.
    pub fn poll(&mut self) -> Vec<Outcome> {
        let mut done = Vec::new();
        loop {
            match self.outcomes.try_recv() {
                Ok(mut outcomes) => {
                    self.in_flight -= 1;
                    done.append(&mut outcomes);
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return done,
            }
        }
    }

    /// Waits for every send in flight and stops the thread.
    pub fn finish(&mut self) -> Vec<Outcome> {
        self.jobs = None;
        let mut done = Vec::new();
        while self.in_flight > 0 {
            match self.outcomes.recv() {
                Ok(mut outcomes) => done.append(&mut outcomes),
                Err(_) => break,
            }
            self.in_flight -= 1;
        }
        self.in_flight = 0;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        done
    }
}

impl Drop for MoveWorker {
    fn drop(&mut self) {
        self.finish();
    }
}
