//! Page moves on a thread of their own: a `move_pages` of pages that running threads use waits
//! for every CPU of the process to drop its mappings, which can take long, and the recorder's
//! loop (draining the sampling rings, scanning pages) must not wait with it. One job at a time:
//! while one is in flight the engine sends none (its pages would be asked for again anyway).

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
    in_flight: bool,
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
            in_flight: false,
        }
    }

    /// Whether the last epoch's moves are still being made.
    pub fn busy(&self) -> bool {
        self.in_flight
    }

    pub fn send(&mut self, jobs: Vec<Job>) {
        if let Some(tx) = &self.jobs
            && tx.send(jobs).is_ok()
        {
            self.in_flight = true;
        }
    }

    /// The outcome of the job in flight, if it is done.
    pub fn poll(&mut self) -> Vec<Outcome> {
        match self.outcomes.try_recv() {
            Ok(done) => {
                self.in_flight = false;
                done
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => Vec::new(),
        }
    }

    /// Waits for the job in flight and stops the thread.
    pub fn finish(&mut self) -> Vec<Outcome> {
        self.jobs = None;
        let mut done = Vec::new();
        if self.in_flight
            && let Ok(outcomes) = self.outcomes.recv()
        {
            done = outcomes;
        }
        self.in_flight = false;
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
