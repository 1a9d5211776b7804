//! A plan's timed moves (`migrate_at`), made while `numalens run --plan` runs the program. The
//! plan of an online policy starts where first touch puts pages and then moves pages and
//! threads when the policy did; a plan run makes those moves at their times, counted as the
//! plan counts them, from the run's first recorded access: here its first page-fault sample.
//!
//! An object rule's moves name page offsets inside the object. They are resolved against each
//! instance the rule matched in this run, found by the runtime's records as they reach its
//! logs (it writes them out as soon as it has applied a rule): the allocation an object's
//! `PLACE` record follows, or a static object's `PLACE` record itself. The pages are moved by
//! the engine's mover ([`crate::worker`]: batched `move_pages`, on a thread of its own), each
//! page with the kernel's answer in a `migrations` row. A thread's moves are
//! `sched_setaffinity` of the thread its rule placed at its start (that `PLACE` record's
//! thread). An instance freed before a move's time is left alone.

use std::collections::{BTreeMap, HashMap};

use numalens_format::Migration;
use numalens_place::plan::{Action, Plan};
use numalens_preload::events::{Event, TimedEvent};
use numalens_preload::events_tail::EventTail;
use numalens_record::record::{LiveHook, LiveView};

use crate::migrate::MigrateOptions;
use crate::rules::NodeMap;
use crate::worker::{Done, Job, MoveWorker};

/// The `policy` of the `migrations` rows of timed moves.
pub const TIMED_POLICY: &str = "plan-migrate-at";

/// One `migrate_at` entry of an object rule.
struct PageMove {
    time_ns: u64,
    rule: usize,
    entry: usize,
    /// This machine's node.
    node: u32,
    offsets: Vec<u64>,
    /// Instances (indices) it was made on.
    done: Vec<usize>,
}

/// One `migrate_at` entry of a thread rule.
struct ThreadMove {
    time_ns: u64,
    rule: usize,
    node: u32,
    done: bool,
}

/// An object a rule matched in this run.
struct Instance {
    rule: usize,
    pid: u32,
    /// Its first page's address.
    base: u64,
    /// Its end (0: not known, a static object).
    end: u64,
    /// The address its allocation returned (0 for a static object), which a free names.
    allocated: u64,
    freed: bool,
}

/// What the timed moves did, for the run's summary.
#[derive(Debug, Clone, Default)]
pub struct TimedStats {
    /// Object moves made on at least one instance, of all object moves.
    pub object_moves_made: usize,
    pub object_moves: usize,
    pub pages_requested: u64,
    /// Pages the kernel put on their node (those already there included).
    pub pages_placed: u64,
    pub already_in_place: u64,
    pub refused: BTreeMap<String, u64>,
    pub call_errors: BTreeMap<String, u64>,
    pub thread_moves: u64,
    pub thread_moves_failed: u64,
    /// Thread moves whose thread never started or was never placed by its rule.
    pub thread_moves_unmade: u64,
    pub thread_moves_total: usize,
    /// Advisory replications, not made (user space cannot replicate pages transparently).
    pub replications_skipped: usize,
}

pub struct TimedMoves {
    page_size: u64,
    pages: Vec<PageMove>,
    threads: Vec<ThreadMove>,
    /// The first page of each `ranges` rule's first range: a static object's first `PLACE`
    /// record is that range's.
    first_range: HashMap<usize, u64>,
    tail: EventTail,
    /// Per (pid, tid): the allocation a following `PLACE` record is about.
    last_alloc: HashMap<(u32, u32), (u64, u64)>,
    instances: Vec<Instance>,
    /// Per thread rule: the thread (tid) it placed.
    placed_threads: HashMap<usize, u32>,
    /// CPUs per node id of this machine.
    node_cpus: HashMap<u32, Vec<u32>>,
    mover: MoveWorker,
    /// The run's first page-fault sample (monotonic ns): the moves' times count from it.
    start_ns: Option<u64>,
    pub stats: TimedStats,
}

impl TimedMoves {
    /// The timed moves of `plan` (node ids mapped to this machine by `nodes`); `None` when it
    /// has none.
    pub fn new(
        plan: &Plan,
        nodes: &NodeMap,
        host: &numalens_topology::Topology,
    ) -> Option<TimedMoves> {
        let at = |s: f64| (s.max(0.0) * 1e9) as u64;
        let mut stats = TimedStats::default();
        let mut pages = Vec::new();
        let mut first_range = HashMap::new();
        for (rule, r) in plan.objects.iter().enumerate() {
            if let Action::Ranges(ranges) = &r.action {
                first_range.insert(rule, ranges.first().map_or(0, |x| x.pages[0]));
            }
            for (entry, m) in r.migrate_at.iter().enumerate() {
                if m.replicate {
                    stats.replications_skipped += 1;
                    continue;
                }
                pages.push(PageMove {
                    time_ns: at(m.time_s),
                    rule,
                    entry,
                    node: nodes.get(m.node),
                    offsets: m.pages.clone(),
                    done: Vec::new(),
                });
            }
        }
        // Only the first process's threads are placed by a plan run.
        let mut threads: Vec<ThreadMove> = (plan.threads.iter().enumerate())
            .filter(|(_, t)| t.process == 0)
            .flat_map(|(rule, t)| {
                t.migrate_at.iter().map(move |m| ThreadMove {
                    time_ns: at(m.time_s),
                    rule,
                    node: nodes.get(m.node),
                    done: false,
                })
            })
            .collect();
        if pages.is_empty() && threads.is_empty() {
            return None;
        }
        pages.sort_by_key(|m| m.time_ns);
        threads.sort_by_key(|m| m.time_ns);
        stats.object_moves = pages.len();
        stats.thread_moves_total = threads.len();
        let options = MigrateOptions {
            // The plan's moves are what the policy did: no budget (and the mover has no
            // guard: the engine's is its own), and every page named asked of the kernel, so
            // that each has its answer.
            rate_limit_mb_per_s: 0.0,
            move_in_place: true,
            // One job at a time, in the plan's order: one mover.
            movers: 1,
            ..MigrateOptions::default()
        };
        let page_size = numalens_record::perf::page_size() as u64;
        Some(TimedMoves {
            page_size,
            pages,
            threads,
            first_range,
            tail: EventTail::default(),
            last_alloc: HashMap::new(),
            instances: Vec::new(),
            placed_threads: HashMap::new(),
            node_cpus: host.nodes.iter().map(|n| (n.id, n.cpus.clone())).collect(),
            mover: MoveWorker::start(options, page_size),
            start_ns: None,
            stats,
        })
    }

    /// The runtime's new records: allocations, frees, and the rules it applied.
    fn read_events(&mut self, dir: &std::path::Path) {
        for (pid, e) in self.tail.read_new(dir) {
            self.event(pid, e);
        }
    }

    fn event(&mut self, pid: u32, e: TimedEvent) {
        match e.event {
            Event::Alloc { address, size, .. } => {
                self.last_alloc.insert((pid, e.tid), (address, size));
            }
            Event::Realloc {
                address,
                size,
                old_address,
                ..
            } => {
                self.freed(pid, |i| i.allocated != 0 && i.allocated == old_address);
                self.last_alloc.insert((pid, e.tid), (address, size));
            }
            Event::Mmap {
                address, length, ..
            } => {
                self.last_alloc.insert((pid, e.tid), (address, length));
            }
            Event::Free { address } => {
                self.freed(pid, |i| i.allocated != 0 && i.allocated == address);
            }
            Event::Munmap { address, length } => {
                let end = address.saturating_add(length);
                self.freed(pid, |i| i.base >= address && i.base < end);
            }
            Event::Place {
                address,
                rule,
                what,
                ..
            } => self.placed(pid, e.tid, address, rule as usize, what),
            _ => {}
        }
    }

    fn freed(&mut self, pid: u32, is: impl Fn(&Instance) -> bool) {
        for i in self.instances.iter_mut().filter(|i| i.pid == pid) {
            i.freed |= is(i);
        }
    }

    /// A rule the runtime applied: an instance of an object rule, or a thread rule's thread.
    fn placed(&mut self, pid: u32, tid: u32, address: u64, rule: usize, what: u8) {
        let mask = !(self.page_size - 1);
        let timed = |rule: usize| self.pages.iter().any(|m| m.rule == rule);
        if what != 2 && !timed(rule) {
            // Only the objects of rules with timed moves are followed.
            return;
        }
        let (base, end, allocated) = match what {
            0 => {
                let Some(&(at, size)) = self.last_alloc.get(&(pid, tid)) else {
                    return;
                };
                (at & mask, at.saturating_add(size), at)
            }
            1 => {
                let first = self.first_range.get(&rule).copied().unwrap_or(0);
                let base = address.saturating_sub(first.saturating_mul(self.page_size));
                (base & mask, 0, 0)
            }
            _ => {
                self.placed_threads.insert(rule, tid);
                return;
            }
        };
        // A `ranges` rule writes a record per range: one instance (of a static object, one a
        // process, the first record being its first range's).
        let known = self.instances.iter().any(|i| {
            i.rule == rule && i.pid == pid && !i.freed && i.allocated == allocated && {
                allocated == 0 || i.base == base
            }
        });
        if !known {
            self.instances.push(Instance {
                rule,
                pid,
                base,
                end,
                allocated,
                freed: false,
            });
        }
    }

    /// The page moves due by `elapsed_ns` on instances they were not made on yet, as the
    /// mover's jobs (in time order: a page's latest move wins).
    fn due_jobs(&mut self, elapsed_ns: u64, now_ns: u64, origin_ns: u64) -> Vec<Job> {
        let mut jobs = Vec::new();
        let page_size = self.page_size;
        for m in self
            .pages
            .iter_mut()
            .take_while(|m| m.time_ns <= elapsed_ns)
        {
            for (index, i) in self.instances.iter().enumerate() {
                if i.rule != m.rule || i.freed || m.done.contains(&index) {
                    continue;
                }
                m.done.push(index);
                let requests: Vec<(u64, u32)> = m
                    .offsets
                    .iter()
                    .map(|o| i.base.saturating_add(o.saturating_mul(page_size)))
                    .filter(|&a| i.end == 0 || a < i.end)
                    .map(|a| (a, m.node))
                    .collect();
                jobs.push(Job {
                    pid: i.pid,
                    epoch: 0,
                    requests,
                    levels: Vec::new(),
                    batch_pages: 0,
                    policy: TIMED_POLICY.into(),
                    reason: format!(
                        "objects[{}] migrate_at[{}] at {:.2} s",
                        m.rule,
                        m.entry,
                        m.time_ns as f64 / 1e9
                    ),
                    time_ns: now_ns.saturating_sub(origin_ns),
                    handed: std::time::Instant::now(),
                });
            }
        }
        jobs
    }

    /// Thread moves due by `elapsed_ns` whose thread its rule has placed.
    fn move_threads(&mut self, elapsed_ns: u64) {
        for m in self
            .threads
            .iter_mut()
            .take_while(|m| m.time_ns <= elapsed_ns)
        {
            let Some(&tid) = self.placed_threads.get(&m.rule) else {
                continue;
            };
            if m.done {
                continue;
            }
            m.done = true;
            let cpus = self.node_cpus.get(&m.node).cloned().unwrap_or_default();
            match crate::threads::pin(tid, &cpus) {
                Ok(()) => self.stats.thread_moves += 1,
                Err(_) => self.stats.thread_moves_failed += 1,
            }
        }
    }

    fn tally(&mut self, done: Vec<Done>) -> Vec<Migration> {
        let mut rows = Vec::new();
        for mut o in done.into_iter().map(|d| d.outcome) {
            let s = &mut self.stats;
            s.pages_requested += o.requested;
            s.pages_placed += o.moved;
            s.already_in_place += o.already_in_place;
            for (e, n) in &o.failed {
                *s.refused.entry(e.clone()).or_default() += n;
            }
            if let Some(e) = &o.call_error {
                *s.call_errors.entry(e.clone()).or_default() += 1;
            }
            rows.append(&mut o.rows);
        }
        rows
    }
}

impl LiveHook for TimedMoves {
    fn tick(&mut self, view: LiveView<'_>) -> Vec<Migration> {
        let rows = {
            let done = self.mover.poll();
            self.tally(done)
        };
        if let Some(dir) = view.events_dir {
            self.read_events(dir);
        }
        // Faults come in time order: the first one seen is the run's first.
        if self.start_ns.is_none() {
            self.start_ns = view.faults.first().map(|f| f.time_ns);
        }
        let Some(start) = self.start_ns else {
            return rows;
        };
        let elapsed = view.now_ns.saturating_sub(start);
        self.move_threads(elapsed);
        if !self.mover.busy() {
            let jobs = self.due_jobs(elapsed, view.now_ns, view.origin_ns);
            if !jobs.is_empty() {
                self.mover.send(jobs);
            }
        }
        rows
    }

    fn finish(&mut self, _now_ns: u64) -> Vec<Migration> {
        let done = self.mover.finish();
        let rows = self.tally(done);
        let s = &mut self.stats;
        s.object_moves_made = self.pages.iter().filter(|m| !m.done.is_empty()).count();
        s.thread_moves_unmade = self.threads.iter().filter(|m| !m.done).count() as u64;
        rows
    }
}

#[cfg(test)]
#[path = "timed_tests.rs"]
mod tests;
