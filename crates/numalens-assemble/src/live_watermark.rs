//! How far the sampled stream can be attributed while the program runs, from what the
//! runtime's event logs hold so far (docs/RECORD.md, "Assembling the sampled stream live").
//!
//! Each thread appends its records to its own buffer and the runtime writes a buffer out as
//! one chunk of its oldest unwritten records, so a log holds a prefix of every thread's
//! records. A thread's records are in time order, so those still in its buffer are no older
//! than the last one of it in the log. A thread that is not in any log yet was announced by its
//! creator (`THREAD_CREATE`, written before `pthread_create`) at a time no later than its first
//! record: while only the announcement is logged, its time stands for the new thread; before
//! it is logged, the creator's last logged time is older than it. A forked process starts at
//! a `FORK` its parent logs. The main thread is the exception: nobody announced it, and an
//! idle main thread's buffer reaches the log only at a flush mark, another thread's large
//! allocation or the process's end, after workers that exited (the stored recordings show it).
//! Until a process's main thread has a record in the log, nothing can be attributed. Otherwise,
//! below the minimum every allocation and free of a tracked object is in the logs: a sample
//! older than it has the tracked object the after-the-run assembly gives it.

use std::collections::{HashMap, HashSet};

use numalens_preload::events::{Event, TimedEvent};

/// The per-thread times the logs were written up to, as read live.
#[derive(Debug, Default)]
pub struct FlushWatermark {
    /// (pid, tid) → the time of its last logged record, `None` once it has ended.
    threads: HashMap<(u32, u32), Option<u64>>,
    /// Processes whose main thread (tid = pid) has no record in the log yet.
    without_main: HashSet<u32>,
    /// (pid, logical id) → the time its creator announced it, until it starts in the log.
    announced: HashMap<(u32, i64), u64>,
    /// (pid, logical id) → the time of its `THREAD_START`, to tell an announcement read after
    /// the start (another log order) from a later thread given the same id (after an exec).
    started: HashMap<(u32, i64), u64>,
}

impl FlushWatermark {
    /// Takes a log found in the events directory: its process's main thread may have records
    /// in its buffer from the process's start on, before any of them is in the log.
    pub fn process_seen(&mut self, pid: u32) {
        if !self.threads.contains_key(&(pid, pid)) {
            self.without_main.insert(pid);
        }
    }

    /// Takes the next record of process `pid`'s log (in log order).
    pub fn observe(&mut self, pid: u32, record: &TimedEvent) {
        if record.tid == pid {
            self.without_main.remove(&pid);
        } else if !self.threads.contains_key(&(pid, pid)) {
            self.without_main.insert(pid);
        }
        self.follow_creation(pid, record);
        let ended = match record.event {
            // The child's log may not be listed yet; its main thread's records start at the
            // fork, which may be older than the parent's next logged record.
            Event::Fork { child_pid } => {
                self.process_seen(child_pid);
                false
            }
            // The thread wrote its buffer out after this record: nothing of it is left.
            Event::ThreadExit { .. } => true,
            // Every buffer of the process was written before its last record.
            Event::End | Event::Daemon => {
                self.threads
                    .iter_mut()
                    .filter(|((p, _), _)| *p == pid)
                    .for_each(|(_, t)| *t = None);
                self.announced.retain(|(p, _), _| *p != pid);
                true
            }
            // A record of a thread after its end (a sampling thread's flush mark before the
            // runtime stopped, or a thread or process given the same id later) counts as live
            // again: it can only hold the watermark back, which the end of the recording lifts.
            _ => false,
        };
        let last = self.threads.entry((pid, record.tid)).or_insert(None);
        *last = match *last {
            _ if ended => None,
            None => Some(record.time_ns),
            Some(t) => Some(t.max(record.time_ns)),
        };
    }

    /// Announcements of new threads: each holds the watermark at its time until the thread's
    /// `THREAD_START` (its first record) is logged, or its creation failed.
    fn follow_creation(&mut self, pid: u32, record: &TimedEvent) {
        let t = record.time_ns;
        match record.event {
            Event::ThreadCreate {
                logical_id,
                error: 0,
            } => {
                let key = (pid, logical_id);
                if self.started.get(&key).is_none_or(|start| *start < t) {
                    self.announced.insert(key, t);
                }
            }
            Event::ThreadCreate { logical_id, .. } => {
                self.announced.remove(&(pid, logical_id));
            }
            Event::ThreadStart { logical_id, .. } => {
                let key = (pid, logical_id);
                self.started.insert(key, t);
                if self.announced.get(&key).is_some_and(|at| *at <= t) {
                    self.announced.remove(&key);
                }
            }
            // The image's threads that had not started never will; the new image's are
            // announced after the exec.
            Event::Exec { .. } => self.announced.retain(|(p, _), at| *p != pid || *at > t),
            _ => {}
        }
    }

    /// Samples strictly older than this have every tracked object's allocation and free
    /// logged; `None` while no thread is known and `Some(0)` while a known process's main
    /// thread is not (nothing can be attributed yet);
    /// `Some(u64::MAX)` once every known thread has ended.
    pub fn watermark(&self) -> Option<u64> {
        if self.threads.is_empty() {
            return None;
        }
        if !self.without_main.is_empty() {
            // The main thread's buffered records go back to its process's start.
            return Some(0);
        }
        // A record still buffered may carry its thread's last logged time: strictly below.
        let logged = self.threads.values().flatten().copied();
        Some(
            logged
                .chain(self.announced.values().copied())
                .min()
                .unwrap_or(u64::MAX),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(tid: u32, time_ns: u64, event: Event) -> TimedEvent {
        TimedEvent {
            tid,
            time_ns,
            event,
        }
    }

    fn free(tid: u32, time_ns: u64) -> TimedEvent {
        at(tid, time_ns, Event::Free { address: 0x1000 })
    }

    /// The watermark after `records` (process, record) in this order.
    fn after(records: &[(u32, TimedEvent)]) -> FlushWatermark {
        let mut w = FlushWatermark::default();
        records.iter().for_each(|(pid, r)| w.observe(*pid, r));
        w
    }

    #[test]
    fn the_thread_logged_least_recently_holds_the_watermark() {
        assert_eq!(
            FlushWatermark::default().watermark(),
            None,
            "no log read yet"
        );
        let mut w = after(&[(10, free(10, 100)), (10, free(11, 40)), (10, free(10, 300))]);
        assert_eq!(w.watermark(), Some(40));
        w.observe(10, &free(11, 250));
        assert_eq!(w.watermark(), Some(250));
        // Another process's threads count as much as this one's.
        w.observe(20, &free(20, 90));
        assert_eq!(w.watermark(), Some(90));
    }

    #[test]
    fn nothing_passes_until_the_main_thread_is_logged() {
        let exit = at(11, 450, Event::ThreadExit { logical_id: 1 });
        let mut w = after(&[(10, free(11, 400)), (10, exit)]);
        assert_eq!(
            w.watermark(),
            Some(0),
            "the main thread's records may be older"
        );
        w.observe(10, &free(10, 100));
        assert_eq!(w.watermark(), Some(100));
    }

    #[test]
    fn a_fork_holds_it_until_the_child_logs_its_main_thread() {
        let fork = at(10, 110, Event::Fork { child_pid: 30 });
        let mut w = after(&[(10, free(10, 100)), (10, fork), (10, free(10, 900))]);
        assert_eq!(w.watermark(), Some(0), "the child's log is not listed yet");
        w.observe(30, &free(30, 150));
        assert_eq!(w.watermark(), Some(150));
    }

    #[test]
    fn an_ended_thread_no_longer_holds_it() {
        let exit = at(11, 60, Event::ThreadExit { logical_id: 1 });
        let mut w = after(&[(10, free(10, 500)), (10, free(11, 50)), (10, exit)]);
        assert_eq!(w.watermark(), Some(500));
        // A record of the thread after its exit (a thread given its id later) revives it.
        w.observe(10, &free(11, 70));
        assert_eq!(w.watermark(), Some(70));
    }

    fn create(tid: u32, time_ns: u64, logical_id: i64, error: i32) -> TimedEvent {
        at(tid, time_ns, Event::ThreadCreate { logical_id, error })
    }

    fn start(tid: u32, time_ns: u64, logical_id: i64) -> TimedEvent {
        let event = Event::ThreadStart {
            logical_id,
            start_routine: 0,
            parent_tid: 10,
            stack_low: 0,
            stack_size: 0,
            parent_logical_id: 0,
        };
        at(tid, time_ns, event)
    }

    #[test]
    fn an_announced_thread_holds_it_until_it_starts_in_the_log() {
        let mut w = after(&[(10, free(10, 100)), (10, create(10, 120, 1, 0))]);
        w.observe(10, &at(10, 900, Event::FlushMark));
        assert_eq!(
            w.watermark(),
            Some(120),
            "thread 1 may hold records from 120 on"
        );
        w.observe(10, &start(11, 130, 1));
        assert_eq!(w.watermark(), Some(130));
        // Its start read before the announcement (another log order) does not hold it again.
        let mut w = after(&[(10, free(10, 100)), (10, start(11, 130, 1))]);
        w.observe(10, &create(10, 120, 1, 0));
        w.observe(10, &free(11, 800));
        w.observe(10, &at(10, 900, Event::FlushMark));
        assert_eq!(w.watermark(), Some(800));
    }

    #[test]
    fn a_failed_creation_or_an_exec_drops_the_announcement() {
        let mut w = after(&[(10, create(10, 120, 1, 0)), (10, free(10, 500))]);
        assert_eq!(w.watermark(), Some(120));
        w.observe(10, &create(10, 125, 1, 11));
        assert_eq!(w.watermark(), Some(500));
        w.observe(10, &create(10, 600, 2, 0));
        let exec = Event::Exec {
            exec_count: 1,
            path: "/bin/true".into(),
        };
        w.observe(10, &at(10, 700, exec));
        w.observe(10, &free(10, 800));
        assert_eq!(
            w.watermark(),
            Some(800),
            "thread 2 never starts after the exec"
        );
    }

    #[test]
    fn a_process_end_ends_all_its_threads() {
        let end = at(10, 600, Event::End);
        let mut w = after(&[
            (10, free(10, 500)),
            (10, free(11, 50)),
            (20, free(20, 80)),
            (10, end),
        ]);
        assert_eq!(w.watermark(), Some(80), "the other process still runs");
        w.observe(20, &at(20, 700, Event::End));
        assert_eq!(w.watermark(), Some(u64::MAX));
        // A thread first logged after the end holds it back rather than let anything pass.
        w.observe(20, &at(21, 710, Event::FlushMark));
        assert_eq!(w.watermark(), Some(710));
    }
}
