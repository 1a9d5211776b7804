//! Page moves on threads of their own: a `move_pages` of pages that running threads use waits
//! for every CPU of the process to drop its mappings, which can take long, and the recorder's
//! loop (draining the sampling rings, scanning pages) must not wait with it. Each mover thread
//! takes the next job sent as soon as it has finished its own, so that with several movers
//! several jobs are made at once, each one call after the other; the sender says how many may
//! wait at once (the online engine keeps one job waiting for the first mover free; a plan's
//! timed moves send one at a time). The movers share one rate-limit budget.

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::migrate::{Again, Budget, MigrateOptions, Migrator, Outcome, Request};

/// One epoch's moves of one process.
pub struct Job {
    pub pid: u32,
    pub epoch: u64,
    pub requests: Vec<Request>,
    /// Each request's priority in the engine's backlog (empty: requests not tried again).
    pub levels: Vec<u8>,
    /// Pages per `move_pages` call (0: the options' batch).
    pub batch_pages: usize,
    pub policy: String,
    pub reason: String,
    /// When the job was handed over, since the clock origin, and as an instant: the mover
    /// adds the time it waited, so that rows say when the moves were made.
    pub time_ns: u64,
    pub handed: std::time::Instant,
}

/// What a send came to: each job's outcome, and the requests to put back in the backlog with
/// their priority.
pub struct Done {
    pub outcome: Outcome,
    pub requeue: Vec<(Request, u8)>,
}

pub struct MoveWorker {
    jobs: Option<Sender<Vec<Job>>>,
    outcomes: Receiver<Vec<Done>>,
    threads: Vec<JoinHandle<()>>,
    budget: Arc<Budget>,
    /// Sends whose outcomes have not come back.
    in_flight: usize,
}

impl MoveWorker {
    /// `options.movers` mover threads (at least one).
    pub fn start(options: MigrateOptions, page_size: u64) -> MoveWorker {
        let (jobs, inbox) = channel::<Vec<Job>>();
        let inbox = Arc::new(Mutex::new(inbox));
        let (outbox, outcomes) = channel();
        let budget = Arc::new(Budget::new(options.rate_limit_mb_per_s));
        let threads = (0..options.movers.max(1))
            .map(|i| {
                let inbox = Arc::clone(&inbox);
                let outbox = outbox.clone();
                let migrator = Migrator::sharing(options.clone(), page_size, Arc::clone(&budget));
                let (batch, nice) = (options.batch_pages, options.mover_nice);
                std::thread::Builder::new()
                    .name(format!("numalens-mover{i}"))
                    .spawn(move || {
                        // Refused (no CAP_SYS_NICE), the mover runs at the engine's priority.
                        if let Some(n) = nice {
                            let _ = crate::threads::set_nice(0, n);
                        }
                        run_mover(migrator, batch, &inbox, &outbox)
                    })
                    .expect("a thread can be started")
            })
            .collect();
        MoveWorker {
            jobs: Some(jobs),
            outcomes,
            threads,
            budget,
            in_flight: 0,
        }
    }

    /// The rate limit's budget, shared by the movers.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Mover threads.
    pub fn movers(&self) -> usize {
        self.threads.len()
    }

    /// Whether moves sent are still being made.
    pub fn busy(&self) -> bool {
        self.in_flight > 0
    }

    /// Sends not done yet: those being made and those waiting for a mover.
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

    /// What the sends done since the last poll came to.
    pub fn poll(&mut self) -> Vec<Done> {
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

    /// Waits for every send in flight and stops the threads.
    pub fn finish(&mut self) -> Vec<Done> {
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
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        done
    }
}

/// One mover: the next send whenever it is free, until the sender is gone.
fn run_mover(
    mut migrator: Migrator,
    default_batch: usize,
    inbox: &Mutex<Receiver<Vec<Job>>>,
    outbox: &Sender<Vec<Done>>,
) {
    loop {
        // The lock is held while waiting for a send only: the job is made without it.
        let next = inbox.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(batch) = next else { return };
        let done = batch
            .iter()
            .map(|j| {
                migrator.set_batch_pages(if j.batch_pages > 0 {
                    j.batch_pages
                } else {
                    default_batch
                });
                let label = (j.policy.as_str(), j.reason.as_str());
                let now_ns = j.time_ns + j.handed.elapsed().as_nanos() as u64;
                let outcome = migrator.migrate(j.pid, j.epoch, &j.requests, label, now_ns);
                let requeue = requeue(&outcome.again, &j.requests, &j.levels);
                Done { outcome, requeue }
            })
            .collect();
        if outbox.send(done).is_err() {
            return;
        }
    }
}

/// The requests to put back in the backlog: a deferred one at its priority, one refused for a
/// reason that passes one priority lower, so that a page refused again and again is given up
/// (one of priority 0, which the deciding window did not see, is not tried again).
pub fn requeue(
    again: &[(usize, Again)],
    requests: &[Request],
    levels: &[u8],
) -> Vec<(Request, u8)> {
    again
        .iter()
        .filter_map(|&(i, why)| {
            let level = *levels.get(i)?;
            let level = match why {
                Again::Deferred => level,
                Again::Transient => level.checked_sub(1)?,
            };
            Some((requests[i], level))
        })
        .collect()
}

impl Drop for MoveWorker {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nice values of this process's threads named `name` (`/proc/self/task/*/stat`,
    /// field 19): other tests run movers of the same name at once.
    fn nice_of(name: &str) -> Vec<i32> {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Vec::new();
        };
        tasks
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name)
            })
            .filter_map(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
                let (_, rest) = stat.rsplit_once(')')?;
                rest.split_whitespace().nth(16)?.parse().ok()
            })
            .collect()
    }

    #[test]
    fn movers_take_the_nice_value_they_are_given() {
        // A higher nice value than this thread's needs no privilege.
        let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let asked = (now + 2).min(19);
        let mut worker = MoveWorker::start(
            MigrateOptions {
                movers: 1,
                mover_nice: Some(asked),
                ..MigrateOptions::default()
            },
            4096,
        );
        let mut seen = None;
        for _ in 0..200 {
            seen = nice_of("numalens-mover0").into_iter().find(|n| *n == asked);
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        worker.finish();
        assert_eq!(seen, Some(asked));
    }

    #[test]
    fn a_page_refused_again_and_again_loses_its_priority_then_is_given_up() {
        let requests = [(0x1000, 1), (0x2000, 2), (0x3000, 3), (0x4000, 0)];
        let levels = [5, 1, 0, 9];
        let again = [
            (0, Again::Transient),
            (1, Again::Transient),
            (2, Again::Deferred),
        ];
        assert_eq!(
            requeue(&again, &requests, &levels),
            [((0x1000, 1), 4), ((0x2000, 2), 0), ((0x3000, 3), 0)]
        );
        // Priority 0 refused: given up. Without priorities (a plan's moves): none requeued.
        assert!(requeue(&[(2, Again::Transient)], &requests, &levels).is_empty());
        assert!(requeue(&again, &requests, &[]).is_empty());
    }
}
