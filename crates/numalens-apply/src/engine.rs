//! The online engine of `numalens run --policy`: while the program runs, the samples of each
//! epoch become a window of the run's accesses, and the policy's own code (the stepper that
//! `simulate` and `plan` run window by window, `numalens_place::policies::Stepper`) takes that
//! window and gives the moves it makes at its end; they are carried out for real with batched
//! `move_pages` ([`crate::migrate`]). Deciding costs one window's work, and what is kept between
//! epochs is the policy's state per page plus the page indices ([`PageTable`]), not the run's
//! history. Moves the movers have not taken yet wait in a backlog (the latest destination of a
//! page wins), so busy movers delay a decision, never lose it; the movers drain it in jobs,
//! each mover its own, the pages most used in the window that decided them first, one job
//! always waiting for the first mover free ([`Engine::feed_mover`]); a job is sized so that
//! its call takes about a target time (`job_size.rs`), and what a job could not move for a
//! reason that passes (the rate limit, a busy page) waits in the backlog again. What the kernel did
//! differently (a refused move) is seen through the mover, which asks where each page is before
//! moving it.
//!
//! Signals: the `inst` sampled stream (a program built with `numalens cc`: every Nth access of
//! each thread, read live from the hooks' files); page-fault samples (first touches; the
//! kernel's NUMA hinting faults when its balancing is on); and soft-dirty write faults: each
//! epoch the engine clears the soft-dirty bits of the program's pages (`/proc/PID/clear_refs`),
//! so that the next write of each page takes a fault, sampled with its thread and address. That
//! needs neither a rebuild nor a PMU. With `--backend pmu`, the PMU's load and store samples
//! (weighted by their period). Where each thread runs is read from `/proc` each epoch (the CPU
//! it last ran on), and from each fault's and PMU sample's CPU.

use std::collections::{BTreeMap, HashMap};

use numalens_assemble::raw::{Access as MemorySample, Fault};
use numalens_format::{Migration, SampleKind};
use numalens_inst::files::InstSample;
use numalens_inst::tail::SamplesTail;
use numalens_place::accesses::{Cell, ThreadInfo};
use numalens_place::layout::MoveKind;
use numalens_place::policies::{StepInput, Stepper};
use numalens_place::{Machine, Params, Policy};
use numalens_record::record::{LiveHook, LiveView};

use crate::job_size::JobSize;
use crate::migrate::{MigrateOptions, Outcome};
use crate::page_moves::PageMoves;
use crate::page_table::PageTable;
use crate::worker::{Done, Job, MoveWorker};

/// SPM's observation live when not set: one second of epochs.
const SPM_OBSERVE_NS: u64 = 1_000_000_000;

/// A backlog larger than this many jobs is taken in this many (each split into calls of the
/// job size): each take reads the backlog's bytes twice, which a backlog of millions of pages
/// must not do per job.
const MOST_JOBS_PER_BACKLOG: usize = 16;
/// Jobs sent and waiting for a mover, beyond one being made by each: the first mover free
/// takes the next job at once, and the backlog keeps the rest, where a later decision may still
/// change them.
const JOBS_WAITING: usize = 1;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub policy: Policy,
    pub epoch_ns: u64,
    pub params: Params,
    pub migrate: MigrateOptions,
    /// Clear soft-dirty bits each epoch, so that writes are sampled (see the module docs).
    pub soft_dirty: bool,
    /// The nice value the engine's thread (the recorder's loop, which decides and feeds the
    /// movers) takes at its first turn; `None`: left as it is.
    pub nice: Option<i32>,
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
    /// Pages no longer mapped when their move came (the program freed them since the decision):
    /// not moved.
    pub unmapped: u64,
    pub deferred: u64,
    pub frozen: u64,
    pub failed: BTreeMap<String, u64>,
    /// Whole calls the kernel refused (the process ended, not ours to move), by message.
    pub call_errors: BTreeMap<String, u64>,
    pub replications_skipped: u64,
    /// Moves decided and still waiting for the mover when the program ended.
    pub unmade: u64,
    /// Moves put back in the backlog after a job (deferred by the rate limit, refused for a
    /// reason that passes).
    pub retried: u64,
    /// Moving `move_pages` calls, their time in all, and the job sizes used (smallest, largest).
    pub move_calls: u64,
    pub move_call_ns: u64,
    pub job_pages: (usize, usize),
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
    /// What the engine keeps between epochs at its largest (page indices, the policy's state
    /// per page, the backlog), from its tables' capacities.
    pub peak_state_bytes: u64,
    /// The per-epoch sample table at its largest (proportional to one epoch's samples).
    pub peak_epoch_bytes: u64,
    /// Each epoch's end: when, how many page moves the policy decided, and what the engine's
    /// turn cost (for the run's summary: when the policy decided, against when moves landed).
    pub timeline: Vec<EpochNote>,
    /// The longest wall time between two turns of the engine (the recorder's loop), and when
    /// it ended (seconds after the start): the engine neither decides nor feeds the movers
    /// meanwhile.
    pub longest_pause_ns: u64,
    pub longest_pause_end_s: f64,
    /// The longest of the engine's own turns (reading signals, deciding, feeding the movers).
    pub longest_turn_ns: u64,
    /// The nice value asked for the engine's thread and the kernel's answer (`Err`: why not).
    pub nice: Option<(i32, Result<(), String>)>,
    /// Clearing the soft-dirty bits: wall time in all and at most.
    pub clear_refs_ns: u64,
    pub clear_refs_most_ns: u64,
}

/// One epoch's end, for the run's summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct EpochNote {
    /// Seconds after the profile's clock origin (as the moves' rows and the page scans).
    pub at_s: f64,
    /// Page moves the policy decided at this epoch.
    pub decided: u64,
    /// Moves waiting in the backlog after deciding.
    pub waiting: u64,
    /// Wall time of clearing the soft-dirty bits and of deciding at this epoch (ns).
    pub clear_refs_ns: u64,
    pub decide_ns: u64,
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

    /// What the engine keeps per tracked page, at its largest, in bytes.
    pub fn bytes_per_page(&self) -> f64 {
        self.peak_state_bytes as f64 / self.pages_tracked.max(1) as f64
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
    pages: PageTable,
    stepper: Stepper,
    /// Page moves decided and not handed to the mover yet, and the ping-pong guard.
    moves: PageMoves,
    /// This epoch's accesses per (pid, tid, page number): one hash per sample; pages and
    /// threads get their indices when the epoch closes.
    current: ahash::AHashMap<(u32, u32, u64), Pending>,
    start_ns: Option<u64>,
    epoch_start_ns: u64,
    /// When the engine last took a turn.
    last_turn_ns: u64,
    /// The profile's clock origin (monotonic ns).
    origin_ns: u64,
    mover: MoveWorker,
    job_size: JobSize,
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
        let mut opts = opts;
        if opts.params.spm.observe_windows == 0 {
            opts.params.spm.observe_windows =
                SPM_OBSERVE_NS.div_ceil(opts.epoch_ns.max(1)).max(1) as usize;
        }
        let stepper = Stepper::new(opts.policy, &machine, &opts.params, page_size, None)
            .expect("the engine runs online policies only");
        let mover = MoveWorker::start(opts.migrate.clone(), page_size);
        let moves = PageMoves::new(opts.migrate.ping_pong_moves, opts.migrate.ping_pong_epochs);
        Engine {
            opts,
            machine,
            cpu_node,
            node_cpus,
            page_size,
            threads: Vec::new(),
            tid_index: ahash::AHashMap::new(),
            thread_node: Vec::new(),
            pages: PageTable::default(),
            stepper,
            moves,
            current: ahash::AHashMap::new(),
            start_ns: None,
            epoch_start_ns: 0,
            last_turn_ns: 0,
            origin_ns: 0,
            mover,
            job_size: JobSize::default(),
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

    /// A load or store sample of the `pmu` backend: an access of its thread, weighted by the
    /// period, whose CPU says where the thread runs.
    fn ingest_memory_sample(&mut self, a: &MemorySample) {
        let thread = self.thread(a.pid, a.tid);
        if let Some(node) = a.cpu.and_then(|c| self.cpu_node.get(&c)) {
            self.thread_node[thread as usize] = *node;
        }
        let weight = u64::from(a.weight.max(1));
        let access = match a.kind {
            SampleKind::Store => Access::Write(weight),
            _ => Access::Read(weight),
        };
        self.count(a.pid, a.tid, a.address, a.time_ns, access);
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
    /// indices in the order of their first access and are given to the policy placed where
    /// their first toucher runs (first touch).
    /// The window's page numbers come with it, by page index, for the policy to read.
    fn close_window(&mut self) -> (Vec<Cell>, Vec<(u32, u64)>) {
        let mut pending: Vec<((u32, u32, u64), Pending)> = self.current.drain().collect();
        self.current.shrink_to(pending.len() / 2);
        pending.sort_unstable_by_key(|(key, p)| (p.first_ns, *key));
        let mut cells = Vec::with_capacity(pending.len());
        let mut numbers = Vec::with_capacity(pending.len());
        let mut new_pages = Vec::new();
        for ((pid, tid, number), p) in pending {
            let thread = self.thread(pid, tid);
            let (page, new) = self.pages.index(pid, number);
            if new {
                new_pages.push(self.thread_node[thread as usize]);
            }
            numbers.push((page, number));
            cells.push(Cell {
                page,
                thread,
                reads: p.reads,
                writes: p.writes,
                other: p.faults,
            });
        }
        self.stepper.add_pages(&new_pages);
        cells.sort_unstable_by_key(|c| (c.page, c.thread));
        numbers.sort_unstable();
        numbers.dedup();
        (cells, numbers)
    }

    /// Where each thread runs now: the CPU it last ran on (`/proc/PID/task/TID/stat`, field 39).
    fn locate_threads(&mut self) {
        for i in 0..self.threads.len() {
            self.locate_thread(i);
        }
    }

    fn locate_thread(&mut self, i: usize) {
        let t = &self.threads[i];
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/task/{}/stat", t.pid, t.tid))
        else {
            return;
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
            // Where it runs now: the pages it touches first this epoch are placed there.
            self.locate_thread(index as usize);
        }
        index
    }

    /// Closes the epoch's window, decides, and moves; the rows of what was done.
    fn epoch(&mut self, live: &std::collections::BTreeSet<u32>, now_ns: u64) -> Vec<Migration> {
        self.locate_threads();
        let (cells, numbers) = self.close_window();
        self.stats.epochs += 1;
        self.stats.pages_tracked = self.pages.len() as u64;
        self.moves.prune(self.stats.epochs);
        let cleared = std::time::Instant::now();
        self.clear_soft_dirty(live);
        let clear_refs_ns = cleared.elapsed().as_nanos() as u64;
        self.stats.clear_refs_ns += clear_refs_ns;
        self.stats.clear_refs_most_ns = self.stats.clear_refs_most_ns.max(clear_refs_ns);
        let mut note = EpochNote {
            at_s: now_ns.saturating_sub(self.origin_ns) as f64 / 1e9,
            clear_refs_ns,
            ..EpochNote::default()
        };
        if !self.pages.is_empty() {
            let started = std::time::Instant::now();
            note.decided = self.decide(&cells, &numbers);
            note.decide_ns = started.elapsed().as_nanos() as u64;
            self.stats.decide_ns += note.decide_ns;
        }
        note.waiting = self.moves.waiting() as u64;
        self.stats.timeline.push(note);
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

    /// The policy's step on the epoch's window: its thread moves made at once, its page moves
    /// added to the backlog; how many page moves it decided.
    fn decide(&mut self, cells: &[Cell], numbers: &[(u32, u64)]) -> u64 {
        let table = &self.pages;
        // The policy asks for the numbers of the window's pages only.
        let page_number = |p: u32| {
            numbers
                .binary_search_by_key(&p, |n| n.0)
                .map_or(0, |i| numbers[i].1)
        };
        let step = self.stepper.step(
            &StepInput {
                machine: &self.machine,
                params: &self.opts.params,
                threads: &self.thread_node,
                pages: table.len(),
                page_number: &page_number,
                page_size: self.page_size,
                window_ns: self.opts.epoch_ns,
                sample_period: 1,
                last: false,
            },
            cells,
        );
        for t in step.thread_moves {
            self.move_thread(t.thread, t.to);
        }
        self.moves.grow_to(self.pages.len());
        // The window's accesses of a page: cells are in page order.
        let accesses = |page: u32| {
            let from = cells.partition_point(|c| c.page < page);
            cells[from..]
                .iter()
                .take_while(|c| c.page == page)
                .map(Cell::total)
                .sum::<u64>()
        };
        let mut decided = 0;
        for m in step.moves {
            if m.kind == MoveKind::Replicate {
                // User space cannot replicate transparently: the page stays where it is.
                self.stats.replications_skipped += 1;
                continue;
            }
            self.moves.request(m.page, m.to, accesses(m.page));
            decided += 1;
        }
        decided
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

    /// Hands the movers the backlog's most used pages, a job at a time, whenever fewer than
    /// one per mover and [`JOBS_WAITING`] more are sent and not done (each tick, not only at
    /// epochs): no mover waits for the next epoch, and a page decided again while it waits in
    /// the backlog goes where its latest decision says. A job is what the rate limit's budget
    /// allows now, at most the job size: with the budget spent, the moves wait in the backlog.
    fn feed_mover(&mut self, now_ns: u64, origin_ns: u64) {
        let most_in_flight = self.mover.movers() + JOBS_WAITING;
        while self.moves.waiting() > 0 && self.mover.in_flight() < most_in_flight {
            let size = self.job_size.pages();
            let allowed = self.mover.budget().pages_now(self.page_size);
            if allowed < size.min(crate::job_size::MIN_PAGES) {
                break;
            }
            let most = size
                .max(self.moves.waiting().div_ceil(MOST_JOBS_PER_BACKLOG))
                .min(allowed);
            self.send_job(most, size, now_ns, origin_ns);
        }
    }

    fn send_job(&mut self, most: usize, call_pages: usize, now_ns: u64, origin_ns: u64) {
        let mut per_pid: BTreeMap<u32, Vec<(u64, u32, u8)>> = BTreeMap::new();
        let (moves, frozen) = self.moves.take_first_levels(most, self.stats.epochs);
        self.stats.frozen += frozen;
        let pages: Vec<u32> = moves.iter().map(|m| m.0).collect();
        for (key, (_, to, level)) in self.pages.keys(&pages).into_iter().zip(moves) {
            // Every index came from the table: a missing one would be a bug, never a move.
            let Some((pid, number)) = key else {
                debug_assert!(false, "a page index the table does not know");
                continue;
            };
            per_pid.entry(pid).or_default().push((
                number * self.page_size,
                self.machine.nodes[to],
                level,
            ));
        }
        let reason = format!("{} at epoch {}", self.opts.policy.name(), self.stats.epochs);
        if per_pid.is_empty() {
            return;
        }
        let jobs = per_pid
            .into_iter()
            .map(|(pid, mut requests)| {
                requests.sort_unstable();
                Job {
                    pid,
                    epoch: self.stats.epochs,
                    levels: requests.iter().map(|r| r.2).collect(),
                    requests: requests.iter().map(|r| (r.0, r.1)).collect(),
                    batch_pages: call_pages,
                    policy: self.opts.policy.name().to_string(),
                    reason: reason.clone(),
                    time_ns: now_ns.saturating_sub(origin_ns),
                    handed: std::time::Instant::now(),
                }
            })
            .collect();
        self.mover.send(jobs);
    }

    /// A move taken and not made waits in the backlog again (unless the page was decided
    /// again meanwhile).
    fn requeue(&mut self, pid: u32, requests: &[((u64, u32), u8)]) {
        for &((address, node), level) in requests {
            let page = self.pages.get(pid, address / self.page_size);
            let to = self.machine.nodes.iter().position(|n| *n == node);
            if let (Some(page), Some(to)) = (page, to) {
                self.moves.retry(page, to, level);
                self.stats.retried += 1;
            }
        }
    }

    /// The rows of the moves the movers have finished; what they could not move waits again.
    fn collect(&mut self, now_ns: u64, done: Vec<Done>) -> Vec<Migration> {
        let mut rows = Vec::new();
        for Done {
            outcome: mut o,
            requeue,
        } in done
        {
            self.tally(&o, now_ns);
            self.guard_moved(&o);
            self.requeue(o.pid, &requeue);
            for &(pages, ns) in &o.move_calls {
                self.job_size.observe(pages, ns);
            }
            rows.append(&mut o.rows);
        }
        rows
    }

    /// The pages the kernel moved, for the ping-pong guard (at the epoch they were asked at).
    fn guard_moved(&mut self, o: &Outcome) {
        for r in o.rows.iter().filter(|r| r.result == "ok") {
            let first = r.start / self.page_size;
            for number in first..first + r.len / self.page_size {
                if let Some(page) = self.pages.get(r.pid, number) {
                    self.moves.moved(page, o.epoch);
                }
            }
        }
    }

    fn tally(&mut self, o: &Outcome, now_ns: u64) {
        self.stats.requested += o.requested;
        self.stats.moved += o.moved;
        self.stats.already_in_place += o.already_in_place;
        self.stats.unmapped += o.unmapped;
        self.stats.deferred += o.deferred;
        for (e, n) in &o.failed {
            *self.stats.failed.entry(e.clone()).or_default() += n;
        }
        if let Some(e) = &o.call_error {
            *self.stats.call_errors.entry(e.clone()).or_default() += 1;
        }
        self.stats.move_calls += o.move_calls.len() as u64;
        self.stats.move_call_ns += o.move_calls.iter().map(|c| c.1).sum::<u64>();
        self.stats.job_pages = self.job_size.range;
        if o.moved > 0 {
            let start = self.start_ns.unwrap_or(now_ns);
            self.stats.last_move_s = Some(now_ns.saturating_sub(start) as f64 / 1e9);
        }
    }
}

impl LiveHook for Engine {
    fn tick(&mut self, view: LiveView<'_>) -> Vec<Migration> {
        let cpu = thread_cpu_ns();
        let wall = std::time::Instant::now();
        let now = view.now_ns;
        let done = self.mover.poll();
        let mut rows = self.collect(now, done);
        let origin = view.origin_ns;
        rows.extend(self.turn(view));
        self.feed_mover(now, origin);
        self.stats.cpu_ns += thread_cpu_ns().saturating_sub(cpu);
        let turn_ns = wall.elapsed().as_nanos() as u64;
        self.stats.longest_turn_ns = self.stats.longest_turn_ns.max(turn_ns);
        self.stats.peak_state_bytes = self.stats.peak_state_bytes.max(self.state_bytes());
        self.stats.peak_epoch_bytes = self.stats.peak_epoch_bytes.max(self.epoch_bytes());
        rows
    }

    fn finish(&mut self, now_ns: u64) -> Vec<Migration> {
        let done = self.mover.finish();
        let rows = self.collect(now_ns, done);
        // Moves still waiting for the movers when the program ended (with those the last jobs
        // put back) are not made: counted.
        self.stats.unmade += self.moves.waiting() as u64;
        rows
    }
}

impl Engine {
    /// What the engine keeps between epochs, by capacity: page indices, the policy's state,
    /// the backlog and the ping-pong guard.
    pub fn state_bytes(&self) -> u64 {
        (self.pages.memory_bytes() + self.stepper.memory_bytes() + self.moves.memory_bytes()) as u64
    }

    /// The current epoch's samples, by capacity: proportional to the distinct (thread, page)
    /// pairs one epoch sees, not to the pages tracked.
    pub fn epoch_bytes(&self) -> u64 {
        (self.current.capacity() * (std::mem::size_of::<((u32, u32, u64), Pending)>() + 1)) as u64
    }

    fn turn(&mut self, view: LiveView<'_>) -> Vec<Migration> {
        if self.start_ns.is_none() {
            self.start_ns = Some(view.now_ns);
            self.epoch_start_ns = view.now_ns;
            self.last_turn_ns = view.now_ns;
            self.origin_ns = view.origin_ns;
            self.clear_soft_dirty(view.live);
            if let Some(nice) = self.opts.nice {
                let answer = crate::threads::set_nice(0, nice).map(|_| ());
                self.stats.nice = Some((nice, answer.map_err(|e| e.to_string())));
            }
        }
        let pause = view.now_ns.saturating_sub(self.last_turn_ns);
        if pause > self.stats.longest_pause_ns {
            self.stats.longest_pause_ns = pause;
            self.stats.longest_pause_end_s =
                view.now_ns.saturating_sub(self.origin_ns) as f64 / 1e9;
        }
        self.last_turn_ns = view.now_ns;
        self.stats.wall_ns = view
            .now_ns
            .saturating_sub(self.start_ns.unwrap_or(view.now_ns));
        for f in view.faults {
            self.ingest_fault(f);
        }
        for a in view.accesses {
            self.ingest_memory_sample(a);
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
        self.epoch(view.live, view.now_ns)
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
