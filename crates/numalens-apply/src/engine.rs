//! The online engine of `numalens run --policy`: while the program runs, the samples of each
//! epoch become a window of the run's accesses, the policy's own code (the one `simulate` and
//! `plan` run) decides on everything seen so far, and the moves it makes at the end of the
//! latest window are carried out for real with batched `move_pages` ([`Mover`]).
//!
//! The online policies are causal and deterministic: given the same windows they decide the
//! same moves, and a move at the end of window w depends on windows ≤ w only. So deciding on
//! the whole history at each epoch and taking the last window's moves is the policy run live;
//! pages get indices in order of first sight so earlier windows never change. What the kernel
//! did differently (a refused move) is seen through the mover, which asks where each page is
//! before moving it.
//!
//! Signals: the `inst` sampled stream (a program built with `numalens cc`: every Nth access of
//! each thread, read live from the hooks' files); page-fault samples (first touches; the
//! kernel's NUMA hinting faults when its balancing is on); and soft-dirty write faults: each
//! epoch the engine clears the soft-dirty bits of the program's pages (`/proc/PID/clear_refs`),
//! so that the next write of each page takes a fault, sampled with its thread and address. That
//! needs neither a rebuild nor a PMU. Where each thread runs is read from `/proc` each epoch
//! (the CPU it last ran on).

use std::collections::{BTreeMap, HashMap};

use numalens_format::Migration;
use numalens_place::accesses::{Cell, Page, ThreadInfo, Windows};
use numalens_place::layout::MoveKind;
use numalens_place::policies::{self, Input};
use numalens_place::{Accesses, CountSource, Machine, Params, Policy};
use numalens_record::faults::Fault;
use numalens_record::inst::files::InstSample;
use numalens_record::inst::tail::SamplesTail;
use numalens_record::record::{LiveHook, LiveView};

use crate::migrate::{MigrateOptions, Outcome};
use crate::worker::{Job, MoveWorker};

/// Epochs kept apart in the history the policies decide on.
const MAX_WINDOWS_KEPT: usize = 128;

/// Two windows' cells as one (sorted by page and thread, counts added).
fn merge_cells(mut a: Vec<Cell>, b: Vec<Cell>) -> Vec<Cell> {
    a.extend(b);
    a.sort_unstable_by_key(|c| (c.page, c.thread));
    numalens_place::accesses::merge_equal_cells(&mut a);
    a
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub policy: Policy,
    pub epoch_ns: u64,
    pub params: Params,
    pub migrate: MigrateOptions,
    /// Clear soft-dirty bits each epoch, so that writes are sampled (see the module docs).
    pub soft_dirty: bool,
}

/// What the engine did, for the run's summary.
#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    pub epochs: u64,
    pub samples: u64,
    pub pages_tracked: u64,
    pub requested: u64,
    pub moved: u64,
    pub already_in_place: u64,
    pub deferred: u64,
    pub frozen: u64,
    pub failed: BTreeMap<String, u64>,
    /// Whole calls the kernel refused (the process ended, not ours to move), by message.
    pub call_errors: BTreeMap<String, u64>,
    pub replications_skipped: u64,
    pub thread_moves: u64,
    pub thread_moves_failed: u64,
    /// The first epoch (seconds after the start) from which no more pages were moved.
    pub last_move_s: Option<f64>,
    pub decide_ns: u64,
    /// CPU time of the engine's own work (reading signals, deciding, moving), on the
    /// recorder's thread.
    pub cpu_ns: u64,
    /// Wall time from the first call to the last.
    pub wall_ns: u64,
    /// The engine's memory at its largest, from its tables' capacities.
    pub peak_bytes: u64,
}

impl EngineStats {
    /// The engine's CPU as a share of one core over the run.
    pub fn cpu_share(&self) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            self.cpu_ns as f64 / self.wall_ns as f64
        }
    }

    /// Peak memory per tracked page, in bytes.
    pub fn bytes_per_page(&self) -> f64 {
        self.peak_bytes as f64 / self.pages_tracked.max(1) as f64
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct Engine {
    opts: EngineOptions,
    machine: Machine,
    cpu_node: HashMap<u32, usize>,
    /// CPUs per node position, for moving threads.
    node_cpus: Vec<Vec<u32>>,
    page_size: u64,
    threads: Vec<ThreadInfo>,
    tid_index: ahash::AHashMap<(u32, u32), u32>,
    thread_node: Vec<usize>,
    pages: Vec<Page>,
    page_index: ahash::AHashMap<(u32, u64), u32>,
    windows: Vec<Vec<Cell>>,
    /// This epoch's accesses per (pid, tid, page number): one hash per sample; pages and
    /// threads get their indices when the epoch closes.
    current: ahash::AHashMap<(u32, u32, u64), Pending>,
    start_ns: Option<u64>,
    epoch_start_ns: u64,
    mover: MoveWorker,
    inst: SamplesTail,
    pub stats: EngineStats,
}

/// One (thread, page)'s accesses within the current epoch.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    reads: u64,
    writes: u64,
    faults: u64,
    first_ns: u64,
}

/// How an access is counted in its window's cell.
#[derive(Clone, Copy)]
enum Access {
    Read(u64),
    Write(u64),
    /// A fault: a first touch, a hinting fault, a soft-dirty write fault.
    Fault,
}

impl Engine {
    pub fn new(
        opts: EngineOptions,
        machine: Machine,
        topology: &numalens_topology::Topology,
    ) -> Engine {
        let position = |node: u32| machine.nodes.iter().position(|n| *n == node);
        let cpu_node = topology
            .nodes
            .iter()
            .flat_map(|n| n.cpus.iter().map(move |c| (*c, n.id)))
            .filter_map(|(c, n)| Some((c, position(n)?)))
            .collect();
        let node_cpus = machine
            .nodes
            .iter()
            .map(|id| {
                topology
                    .nodes
                    .iter()
                    .filter(|n| n.id == *id)
                    .flat_map(|n| n.cpus.clone())
                    .collect()
            })
            .collect();
        let page_size = numalens_record::perf::page_size() as u64;
        let mover = MoveWorker::start(opts.migrate.clone(), page_size);
        Engine {
            opts,
            machine,
            cpu_node,
            node_cpus,
            page_size,
            threads: Vec::new(),
            tid_index: ahash::AHashMap::new(),
            thread_node: Vec::new(),
            pages: Vec::new(),
            page_index: ahash::AHashMap::new(),
            windows: Vec::new(),
            current: ahash::AHashMap::new(),
            start_ns: None,
            epoch_start_ns: 0,
            mover,
            inst: SamplesTail::default(),
            stats: EngineStats::default(),
        }
    }

    fn ingest_fault(&mut self, f: &Fault) {
        let thread = self.thread(f.pid, f.tid);
        if let Some(node) = self.cpu_node.get(&f.cpu) {
            self.thread_node[thread as usize] = *node;
        }
        self.count(f.pid, f.tid, f.address, f.time_ns, Access::Fault);
    }

    fn ingest_sample(&mut self, s: &InstSample) {
        let weight = u64::from(s.weight.max(1));
        let access = if s.is_write {
            Access::Write(weight)
        } else {
            Access::Read(weight)
        };
        self.count(s.pid, s.tid, s.address, s.time_ns, access);
    }

    fn count(&mut self, pid: u32, tid: u32, address: u64, time_ns: u64, access: Access) {
        let cell = self
            .current
            .entry((pid, tid, address / self.page_size))
            .or_insert(Pending {
                first_ns: time_ns,
                ..Pending::default()
            });
        match access {
            Access::Read(n) => cell.reads += n,
            Access::Write(n) => cell.writes += n,
            Access::Fault => cell.faults += 1,
        }
        cell.first_ns = cell.first_ns.min(time_ns);
        self.stats.samples += 1;
    }

    /// The epoch's accesses as a window of cells; pages seen for the first time get the next
    /// indices in the order of their first access, their first toucher its thread.
    fn close_window(&mut self) -> Vec<Cell> {
        let mut pending: Vec<((u32, u32, u64), Pending)> = self.current.drain().collect();
        pending.sort_unstable_by_key(|(key, p)| (p.first_ns, *key));
        let mut cells = Vec::with_capacity(pending.len());
        for ((pid, tid, number), p) in pending {
            let thread = self.thread(pid, tid);
            let next = self.pages.len() as u32;
            let page = *self.page_index.entry((pid, number)).or_insert(next);
            if page == next {
                self.pages.push(Page {
                    pid,
                    number,
                    first_toucher: Some(thread),
                    first_ns: p.first_ns,
                    ..Page::default()
                });
            }
            cells.push(Cell {
                page,
                thread,
                reads: p.reads,
                writes: p.writes,
                other: p.faults,
            });
        }
        cells.sort_unstable_by_key(|c| (c.page, c.thread));
        cells
    }

    /// Where each thread runs now: the CPU it last ran on (`/proc/PID/task/TID/stat`, field 39).
    fn locate_threads(&mut self) {
        for (i, t) in self.threads.iter().enumerate() {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/task/{}/stat", t.pid, t.tid))
            else {
                continue;
            };
            // The command name (field 2) may hold spaces: count fields after its ')'.
            let cpu = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(36))
                .and_then(|c| c.parse::<u32>().ok());
            if let Some(node) = cpu.and_then(|c| self.cpu_node.get(&c)) {
                self.thread_node[i] = *node;
            }
        }
    }

    fn thread(&mut self, pid: u32, tid: u32) -> u32 {
        let next = self.threads.len() as u32;
        let index = *self.tid_index.entry((pid, tid)).or_insert(next);
        if index == next {
            let logical_id = self.threads.iter().filter(|t| t.pid == pid).count() as u32;
            self.threads.push(ThreadInfo {
                pid,
                tid,
                logical_id,
                name: None,
            });
            self.thread_node.push(0);
        }
        index
    }

    /// Closes the epoch's window, decides, and moves; the rows of what was done.
    fn epoch(
        &mut self,
        now_ns: u64,
        origin_ns: u64,
        live: &std::collections::BTreeSet<u32>,
    ) -> Vec<Migration> {
        let cells = self.close_window();
        self.windows.push(cells);
        if self.windows.len() > MAX_WINDOWS_KEPT {
            // A long run (a server under --pid) keeps its recent epochs apart and merges the
            // oldest two: deciding stays bounded, at the price of a coarser distant past.
            let oldest = self.windows.remove(0);
            self.windows[0] = merge_cells(oldest, std::mem::take(&mut self.windows[0]));
        }
        self.stats.epochs += 1;
        self.stats.pages_tracked = self.pages.len() as u64;
        self.clear_soft_dirty(live);
        if self.pages.is_empty() {
            return Vec::new();
        }
        self.locate_threads();
        let started = std::time::Instant::now();
        let moves = self.decide();
        self.stats.decide_ns += started.elapsed().as_nanos() as u64;
        self.carry_out(moves, now_ns, origin_ns);
        Vec::new()
    }
}

/// Whether this kernel tracks soft-dirty bits (`CONFIG_MEM_SOFT_DIRTY`): a page this process
/// has just written must show bit 55 in its pagemap entry.
pub fn soft_dirty_supported() -> bool {
    let page = Box::new([1u8; 8192]);
    let address = std::hint::black_box(page.as_ptr()) as u64 + 4096;
    let page_size = numalens_record::perf::page_size() as u64;
    let Ok(mut f) = std::fs::File::open("/proc/self/pagemap") else {
        return false;
    };
    use std::io::{Read, Seek, SeekFrom};
    let mut entry = [0u8; 8];
    let ok = f.seek(SeekFrom::Start(address / page_size * 8)).is_ok()
        && f.read_exact(&mut entry).is_ok();
    ok && u64::from_le_bytes(entry) >> 55 & 1 == 1
}

impl Engine {
    fn clear_soft_dirty(&self, live: &std::collections::BTreeSet<u32>) {
        if self.opts.soft_dirty {
            for pid in live {
                // Writing 4 clears the soft-dirty bits: the next write to each page faults.
                let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "4");
            }
        }
    }

    /// The policy on everything seen so far: its page moves at the end of the latest window.
    fn decide(&mut self) -> Vec<(u32, u64, u32)> {
        // SPM's one round comes after its whole observation (the policy, run on a shorter
        // recorded run, would shorten the observation to the run instead).
        if self.opts.policy == Policy::Spm
            && self.windows.len() < self.opts.params.spm.observe_windows
        {
            return Vec::new();
        }
        let accesses = Accesses::from_cells(
            self.page_size,
            CountSource::Sampled,
            self.threads.clone(),
            Vec::new(),
            self.pages.clone(),
            Windows {
                start_ns: self.start_ns.unwrap_or(0),
                length_ns: self.opts.epoch_ns,
                cells: self.windows.clone(),
            },
        );
        let input = Input {
            accesses: &accesses,
            machine: &self.machine,
            threads: &self.thread_node,
            params: &self.opts.params,
        };
        let Ok(schedule) = policies::run(self.opts.policy, &input) else {
            return Vec::new();
        };
        let last = self.windows.len() - 1;
        for t in schedule.thread_moves.get(last).into_iter().flatten() {
            self.move_thread(t.thread, t.to);
        }
        let mut out = Vec::new();
        for m in schedule.moves.get(last).into_iter().flatten() {
            if m.kind == MoveKind::Replicate {
                // User space cannot replicate transparently: the page stays where it is.
                self.stats.replications_skipped += 1;
                continue;
            }
            let page = &self.pages[m.page as usize];
            out.push((
                page.pid,
                page.number * self.page_size,
                self.machine.nodes[m.to],
            ));
        }
        out
    }

    fn move_thread(&mut self, thread: u32, to: usize) {
        let tid = self.threads[thread as usize].tid;
        let ok = crate::threads::pin(tid, &self.node_cpus[to]).is_ok();
        if ok {
            self.thread_node[thread as usize] = to;
            self.stats.thread_moves += 1;
        } else {
            self.stats.thread_moves_failed += 1;
        }
    }

    /// Hands the moves to the mover thread; skipped (and counted as deferred) while the last
    /// epoch's are still being made.
    fn carry_out(&mut self, moves: Vec<(u32, u64, u32)>, now_ns: u64, origin_ns: u64) {
        if moves.is_empty() {
            return;
        }
        if self.mover.busy() {
            self.stats.deferred += moves.len() as u64;
            return;
        }
        let mut per_pid: BTreeMap<u32, Vec<(u64, u32)>> = BTreeMap::new();
        for (pid, address, node) in moves {
            per_pid.entry(pid).or_default().push((address, node));
        }
        let reason = format!("{} at epoch {}", self.opts.policy.name(), self.stats.epochs);
        let jobs = per_pid
            .into_iter()
            .map(|(pid, requests)| Job {
                pid,
                epoch: self.stats.epochs,
                requests,
                policy: self.opts.policy.name().to_string(),
                reason: reason.clone(),
                time_ns: now_ns.saturating_sub(origin_ns),
            })
            .collect();
        self.mover.send(jobs);
    }

    /// The rows of the moves the mover thread has finished.
    fn collect(&mut self, now_ns: u64, outcomes: Vec<Outcome>) -> Vec<Migration> {
        let mut rows = Vec::new();
        for mut o in outcomes {
            self.tally(&o, now_ns);
            rows.append(&mut o.rows);
        }
        rows
    }

    fn tally(&mut self, o: &Outcome, now_ns: u64) {
        self.stats.requested += o.requested;
        self.stats.moved += o.moved;
        self.stats.already_in_place += o.already_in_place;
        self.stats.deferred += o.deferred;
        self.stats.frozen += o.frozen;
        for (e, n) in &o.failed {
            *self.stats.failed.entry(e.clone()).or_default() += n;
        }
        if let Some(e) = &o.call_error {
            *self.stats.call_errors.entry(e.clone()).or_default() += 1;
        }
        if o.moved > 0 {
            let start = self.start_ns.unwrap_or(now_ns);
            self.stats.last_move_s = Some(now_ns.saturating_sub(start) as f64 / 1e9);
        }
    }
}

impl LiveHook for Engine {
    fn tick(&mut self, view: LiveView<'_>) -> Vec<Migration> {
        let cpu = thread_cpu_ns();
        let now = view.now_ns;
        let done = self.mover.poll();
        let mut rows = self.collect(now, done);
        rows.extend(self.turn(view));
        self.stats.cpu_ns += thread_cpu_ns().saturating_sub(cpu);
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.memory_bytes());
        rows
    }

    fn finish(&mut self, now_ns: u64) -> Vec<Migration> {
        let done = self.mover.finish();
        self.collect(now_ns, done)
    }
}

impl Engine {
    /// What the engine's tables hold now, by capacity.
    pub fn memory_bytes(&self) -> u64 {
        use std::mem::size_of;
        let users: usize = self
            .pages
            .iter()
            .map(|p| p.users.capacity() * size_of::<numalens_place::accesses::Use>())
            .sum();
        let cells: usize = self
            .windows
            .iter()
            .map(|w| w.capacity() * size_of::<Cell>())
            .sum();
        let bytes = self.pages.capacity() * size_of::<Page>()
            + users
            + self.page_index.capacity() * (size_of::<((u32, u64), u32)>() + 1)
            + self.windows.capacity() * size_of::<Vec<Cell>>()
            + cells
            + self.current.capacity() * (size_of::<((u32, u32, u64), Pending)>() + 1)
            + self.mover.guard_bytes;
        bytes as u64
    }

    fn turn(&mut self, view: LiveView<'_>) -> Vec<Migration> {
        if self.start_ns.is_none() {
            self.start_ns = Some(view.now_ns);
            self.epoch_start_ns = view.now_ns;
            self.clear_soft_dirty(view.live);
        }
        self.stats.wall_ns = view
            .now_ns
            .saturating_sub(self.start_ns.unwrap_or(view.now_ns));
        for f in view.faults {
            self.ingest_fault(f);
        }
        if let Some(dir) = view.inst_dir {
            for s in self.inst.read_new(dir) {
                self.ingest_sample(&s);
            }
        }
        if view.now_ns < self.epoch_start_ns + self.opts.epoch_ns {
            return Vec::new();
        }
        self.epoch_start_ns = view.now_ns;
        self.epoch(view.now_ns, view.origin_ns, view.live)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A 4-node machine whose nodes have CPUs 0-5, 6-11, …: a fault's CPU says its node.
    fn engine(policy: Policy) -> (Engine, Vec<u32>) {
        let mut params = Params::default();
        params.spm.observe_windows = 3;
        let topology = numalens_topology::presets::preset("machine-b").unwrap();
        let first_cpus = topology.nodes.iter().map(|n| n.cpus[0]).collect();
        let machine = Machine::from_topology(&topology);
        let opts = EngineOptions {
            policy,
            epoch_ns: 1_000_000,
            params,
            migrate: MigrateOptions::default(),
            soft_dirty: false,
        };
        (Engine::new(opts, machine, &topology), first_cpus)
    }

    fn fault(tid: u32, cpu: u32, address: u64, time_ns: u64) -> Fault {
        Fault {
            // A pid with no such process: the mover's moves fail without touching anything.
            pid: u32::MAX / 2,
            tid,
            time_ns,
            address,
            cpu,
            mapped_page_size: 0,
            ip: 0,
        }
    }

    fn tick(e: &mut Engine, now_ns: u64, faults: &[Fault]) -> Vec<Migration> {
        let live = BTreeSet::new();
        e.tick(LiveView {
            now_ns,
            origin_ns: 0,
            live: &live,
            faults,
            inst_dir: None,
        })
    }

    #[test]
    fn pages_used_from_another_node_are_sent_there_by_the_policy() {
        let (mut e, cpus) = engine(Policy::Spm);
        // Thread 1 on node 0 touches 64 pages first; thread 2 on node 3 then uses them, over
        // and over, for several epochs.
        let mut now = 0;
        let first: Vec<Fault> = (0..64).map(|p| fault(1, cpus[0], p * 4096, 1)).collect();
        tick(&mut e, now, &first);
        for epoch in 0..6u64 {
            now += 1_000_000;
            let uses: Vec<Fault> = (0..64)
                .flat_map(|p| (0..4).map(move |_| p))
                .map(|p| fault(2, cpus[3], p * 4096, now))
                .collect();
            tick(&mut e, now + epoch, &uses);
        }
        e.finish(now + 10_000_000);
        assert!(e.stats.epochs >= 5, "{:?}", e.stats);
        assert!(
            e.stats.requested >= 64,
            "the policy asked to move the pages: {:?}",
            e.stats
        );
        // The process does not exist: the mover said so instead of moving anything.
        assert_eq!(e.stats.moved, 0);
        assert_eq!(e.stats.pages_tracked, 64);
    }

    #[test]
    fn a_long_run_keeps_a_bounded_history() {
        let (mut e, cpus) = engine(Policy::Carrefour);
        for epoch in 0..(MAX_WINDOWS_KEPT as u64 + 10) {
            let now = epoch * 1_000_000;
            tick(&mut e, now, &[fault(1, cpus[0], 0x1000 * (epoch % 3), now)]);
        }
        assert_eq!(e.windows.len(), MAX_WINDOWS_KEPT);
        let merged: u64 = e.windows[0].iter().map(|c| c.total()).sum();
        assert!(merged >= 2, "the oldest epochs are merged, not dropped");
    }

    #[test]
    fn nothing_is_decided_before_an_epoch_has_passed() {
        let (mut e, cpus) = engine(Policy::Carrefour);
        let rows = tick(&mut e, 0, &[fault(1, cpus[0], 0x1000, 0)]);
        assert!(rows.is_empty());
        assert_eq!(e.stats.epochs, 0);
        tick(&mut e, 2_000_000, &[]);
        assert_eq!(e.stats.epochs, 1);
    }
}
