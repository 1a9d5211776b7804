//! The what-if simulator: replays a run's accesses, window by window, against a schedule on a
//! machine, and models the memory time it would take (docs/SIMULATOR.md).
//!
//! Per window, each thread's accesses cost their loaded latency divided by the memory-level
//! parallelism a core sustains; each controller and link moves 64-byte lines at its bandwidth.
//! The window takes the longest of: the slowest node's threads (CPUs shared when there are more
//! threads than CPUs), the busiest controller, the busiest link. Loaded latency grows with a
//! controller's or link's utilisation (an M/D/1 queue, capped at 4× as measured on Opteron
//! machines under congestion), and utilisation depends on the window's time: the fixed point is
//! found by bisection. Page moves cost a fixed stall per page plus their bytes on both
//! controllers and the links between.

use serde::Serialize;

use crate::accesses::{Accesses, Cell};
use crate::layout::{Move, MoveKind, Schedule};
use crate::machine::Machine;

/// The model's parameters, with the values the seeds' measurements give.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Model {
    /// Misses a core keeps in flight: about 10 lets one core saturate a local controller of
    /// the thesis' machine B, as it measured.
    pub memory_parallelism: f64,
    /// Bytes a read moves (one cache line).
    pub line_bytes: f64,
    /// Bytes a write moves: the line read for ownership and written back.
    pub write_bytes: f64,
    /// Loaded latency at most this many times the unloaded one (~300 → ~1200 cycles on the
    /// thesis' Opteron machines under congestion).
    pub max_queueing_factor: f64,
    /// Stall per migrated page in ns (Carrefour's ~5200 cycles at 2.5 GHz).
    pub migration_stall_ns: f64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            memory_parallelism: 10.0,
            line_bytes: 64.0,
            write_bytes: 128.0,
            max_queueing_factor: 4.0,
            migration_stall_ns: 2080.0,
        }
    }
}

/// What a schedule gives on a machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Accesses served by the accessing thread's own node, over all accesses.
    pub local_access_ratio: Option<f64>,
    /// Standard deviation of the controllers' loads over their mean (nodes with memory).
    pub imbalance: Option<f64>,
    /// Busiest link's utilisation, at the window where it peaks (0–1).
    pub max_link_utilisation: f64,
    /// Mean loaded latency of an access, ns.
    pub mean_latency_ns: Option<f64>,
    /// Modelled memory time of the run, seconds.
    pub modelled_time_s: f64,
    pub pages_migrated: u64,
    /// Of `modelled_time_s`, what migrating cost.
    pub migration_time_s: f64,
    /// Accesses per memory node (by node position).
    pub node_accesses: Vec<u64>,
    /// `traffic[c][m]`: accesses from CPU node `c` to memory node `m`.
    pub traffic: Vec<Vec<u64>>,
    /// What limited the run most: `latency`, `controller N` or `link A-B`, by modelled time.
    pub bound_by: String,
}

/// Replays `accesses` under `schedule` on `machine`.
pub fn simulate(
    accesses: &Accesses,
    machine: &Machine,
    schedule: &Schedule,
    model: &Model,
) -> Outcome {
    let mut state = State::new(accesses, machine, schedule);
    let windows = accesses.windows.cells.len().max(1);
    let mut totals = Totals::new(machine);
    for w in 0..windows {
        let cells = accesses.windows.cells.get(w).map_or(&[][..], |c| &c[..]);
        let moves = if w == 0 {
            &[][..]
        } else {
            for m in schedule.thread_moves.get(w - 1).into_iter().flatten() {
                if let Some(t) = state.threads.get_mut(m.thread as usize) {
                    *t = m.to;
                }
            }
            schedule.moves.get(w - 1).map_or(&[][..], |m| &m[..])
        };
        let demand = state.window_demand(cells, moves, model);
        let solved = solve(&demand, machine, model);
        totals.add(&demand, &solved);
    }
    totals.outcome(machine)
}

/// The placement as it evolves.
struct State<'a> {
    accesses: &'a Accesses,
    machine: &'a Machine,
    threads: Vec<usize>,
    pages: Vec<usize>,
    replicated: Vec<bool>,
}

/// One window's demand, before time is known.
#[derive(Clone)]
struct Demand {
    /// One row per thread active in the window: sparse, so that a machine with many nodes or a
    /// run with many threads costs what its accesses cost.
    rows: Vec<Row>,
    /// Row of each thread, `NO_ROW` when it made no access.
    row_of: Vec<u32>,
    controller_bytes: Vec<f64>,
    link_bytes: Vec<f64>,
    migrated: u64,
}

const NO_ROW: u32 = u32::MAX;

/// One thread's accesses in a window.
#[derive(Clone)]
struct Row {
    /// Node position the thread runs on.
    node: usize,
    /// (memory node position, accesses, bytes).
    entries: Vec<(usize, f64, f64)>,
}

impl<'a> State<'a> {
    fn new(accesses: &'a Accesses, machine: &'a Machine, schedule: &Schedule) -> Self {
        let mut replicated = schedule.initial.replicated.clone();
        replicated.resize(accesses.pages.len(), false);
        State {
            accesses,
            machine,
            threads: schedule.initial.thread_node.clone(),
            pages: schedule.initial.page_node.clone(),
            replicated,
        }
    }

    /// The window's demand: the moves decided at the end of the previous window first (their
    /// copies), then the window's accesses under the placement they give.
    fn window_demand(&mut self, cells: &[Cell], moves: &[Move], model: &Model) -> Demand {
        let mut d = Demand::empty(self.machine, self.accesses.threads.len());
        let page_bytes = self.accesses.page_size as f64;
        for m in moves {
            let page = m.page as usize;
            let from = self.pages[page];
            let copies: Vec<usize> = match m.kind {
                MoveKind::Migrate if from == m.to => continue,
                MoveKind::Migrate => vec![m.to],
                MoveKind::Replicate if self.replicated[page] => continue,
                MoveKind::Replicate => {
                    self.replicated[page] = true;
                    self.machine
                        .memory_nodes()
                        .into_iter()
                        .filter(|&n| n != from)
                        .collect()
                }
            };
            d.migrated += 1;
            self.pages[page] = if m.kind == MoveKind::Migrate {
                m.to
            } else {
                from
            };
            for to in copies {
                d.controller_bytes[from] += page_bytes;
                d.controller_bytes[to] += page_bytes;
                for &l in &self.machine.routes[from][to] {
                    d.link_bytes[l] += page_bytes;
                }
            }
        }
        let machine = self.machine;
        let (threads, pages) = (&self.threads, &self.pages);
        let replicated = &mut self.replicated;
        add_cells(
            &mut d,
            machine,
            threads,
            pages,
            cells,
            model,
            |p, written| {
                let was = replicated[p];
                replicated[p] &= !written;
                was
            },
        );
        d.finish(self.machine);
        d
    }
}

/// Adds `cells` to `d` under a placement; `replica(p, written)` says whether page p is
/// replicated, and a write clears that (the copies collapse into the home).
fn add_cells<'c>(
    d: &mut Demand,
    machine: &Machine,
    threads: &[usize],
    pages: &[usize],
    cells: impl IntoIterator<Item = &'c Cell>,
    model: &Model,
    mut replica: impl FnMut(usize, bool) -> bool,
) {
    for cell in cells {
        let t = cell.thread as usize;
        let Some(&c) = threads.get(t) else {
            continue;
        };
        let page = cell.page as usize;
        let reads = (cell.reads.saturating_add(cell.other)) as f64;
        let writes = cell.writes as f64;
        let replicated = replica(page, writes > 0.0);
        let home = pages[page];
        let read_to = if replicated && writes == 0.0 && machine.memory_bytes[c] != Some(0) {
            c
        } else {
            home
        };
        d.add(t, c, read_to, reads, reads * model.line_bytes);
        d.add(t, c, home, writes, writes * model.write_bytes);
    }
}

/// A static placement's demand with one set of pages left out, kept so that placements that
/// differ only on those pages are simulated at the cost of their own accesses: what a search
/// trying options for one object at a time needs.
pub(crate) struct Split<'a> {
    machine: &'a Machine,
    model: &'a Model,
    /// Windows with cells of the pages left out: the rest's demand, and those cells.
    base: Vec<Demand>,
    cells: Vec<Vec<Cell>>,
    /// Modelled ns of the windows without such cells: the same for every trial.
    fixed_ns: f64,
    left_out: Vec<u32>,
}

impl<'a> Split<'a> {
    /// `layout` for every page but `left_out` (sorted page indices).
    pub(crate) fn new(
        accesses: &'a Accesses,
        machine: &'a Machine,
        layout: &crate::layout::Layout,
        model: &'a Model,
        left_out: &[u32],
    ) -> Split<'a> {
        let mut replicated = layout.replicated.clone();
        replicated.resize(accesses.pages.len(), false);
        // One bit per page: the rest's cells are read in place, never copied.
        let mut out_bits = vec![0u64; accesses.pages.len().div_ceil(64)];
        for &p in left_out {
            out_bits[p as usize / 64] |= 1 << (p % 64);
        }
        let out = |p: u32| out_bits[p as usize / 64] & (1 << (p % 64)) != 0;
        let mut base = Vec::new();
        let mut cells = Vec::new();
        let mut fixed_ns = 0.0;
        for window in &accesses.windows.cells {
            let mine: Vec<Cell> = window.iter().filter(|c| out(c.page)).copied().collect();
            let mut d = Demand::empty(machine, accesses.threads.len());
            let r = &mut replicated;
            add_cells(
                &mut d,
                machine,
                &layout.thread_node,
                &layout.page_node,
                window.iter().filter(|c| !out(c.page)),
                model,
                |p, w| {
                    let was = r[p];
                    r[p] &= !w;
                    was
                },
            );
            if mine.is_empty() {
                d.finish(machine);
                fixed_ns += solve(&d, machine, model).time_ns;
            } else {
                base.push(d);
                cells.push(mine);
            }
        }
        Split {
            machine,
            model,
            base,
            cells,
            fixed_ns,
            left_out: left_out.to_vec(),
        }
    }

    /// The left-out pages' cells: what one [`Split::time_s`] replays.
    pub(crate) fn cells(&self) -> usize {
        self.cells.iter().map(Vec::len).sum()
    }

    /// Modelled time (s) with the left-out pages placed as `layout` says (the rest as given to
    /// [`Split::new`]; the thread mapping must be the same).
    pub(crate) fn time_s(&self, layout: &crate::layout::Layout) -> f64 {
        // Replication flags of the left-out pages only (a write ends a page's copies for the
        // rest of the run): a copy of every page's flag per trial would cost more than the trial.
        let mut replicated: Vec<bool> = self
            .left_out
            .iter()
            .map(|&p| layout.is_replicated(p as usize))
            .collect();
        let any_replicated = replicated.iter().any(|&r| r);
        let left_out = &self.left_out;
        let mut total = self.fixed_ns;
        for (base, cells) in self.base.iter().zip(&self.cells) {
            let mut d = base.clone();
            add_cells(
                &mut d,
                self.machine,
                &layout.thread_node,
                &layout.page_node,
                cells,
                self.model,
                |p, w| {
                    if !any_replicated {
                        return false;
                    }
                    let Ok(i) = left_out.binary_search(&(p as u32)) else {
                        return false;
                    };
                    let was = replicated[i];
                    replicated[i] &= !w;
                    was
                },
            );
            d.finish(self.machine);
            total += solve(&d, self.machine, self.model).time_ns;
        }
        total / 1e9
    }
}

impl Demand {
    fn empty(machine: &Machine, threads: usize) -> Demand {
        Demand {
            rows: Vec::new(),
            row_of: vec![NO_ROW; threads],
            controller_bytes: vec![0.0; machine.node_count()],
            link_bytes: vec![0.0; machine.links.len()],
            migrated: 0,
        }
    }

    fn add(&mut self, t: usize, c: usize, m: usize, count: f64, bytes: f64) {
        if count <= 0.0 {
            return;
        }
        if self.row_of[t] == NO_ROW {
            self.row_of[t] = self.rows.len() as u32;
            self.rows.push(Row {
                node: c,
                entries: Vec::new(),
            });
        }
        let row = &mut self.rows[self.row_of[t] as usize];
        // Bytes reach controllers and links once per (thread, node) in `finish`, not per cell.
        match row.entries.iter_mut().find(|e| e.0 == m) {
            Some(e) => {
                e.1 += count;
                e.2 += bytes;
            }
            None => row.entries.push((m, count, bytes)),
        }
    }

    /// Puts every row's bytes on its controllers and links.
    fn finish(&mut self, machine: &Machine) {
        for row in &self.rows {
            for &(m, _, bytes) in &row.entries {
                self.controller_bytes[m] += bytes;
                for &l in &machine.routes[row.node][m] {
                    self.link_bytes[l] += bytes;
                }
            }
        }
    }
}

/// One window, solved.
struct Solved {
    time_ns: f64,
    /// Σ accesses × loaded latency.
    latency_sum: f64,
    link_utilisation: f64,
    bound: Bound,
    migration_ns: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Latency,
    Controller(usize),
    Link(usize),
}

/// M/D/1 waiting time in service times, capped.
fn queueing(utilisation: f64, cap: f64) -> f64 {
    let u = utilisation.clamp(0.0, 0.999);
    (1.0 + u / (2.0 * (1.0 - u))).min(cap)
}

/// The window's time: the fixed point of time → utilisations → loaded latencies → time.
fn solve(d: &Demand, machine: &Machine, model: &Model) -> Solved {
    if d.rows.is_empty() && d.migrated == 0 {
        return Solved {
            time_ns: 0.0,
            latency_sum: 0.0,
            link_utilisation: 0.0,
            bound: Bound::Latency,
            migration_ns: 0.0,
        };
    }
    let n = machine.node_count();
    let mut bw_time = 0.0f64;
    let mut bound = Bound::Latency;
    for m in 0..n {
        let t = d.controller_bytes[m] / machine.controller_bytes_per_ns[m];
        if t > bw_time {
            bw_time = t;
            bound = Bound::Controller(m);
        }
    }
    for (l, link) in machine.links.iter().enumerate() {
        let t = d.link_bytes[l] / link.bytes_per_ns;
        if t > bw_time {
            bw_time = t;
            bound = Bound::Link(l);
        }
    }
    let migration_ns = d.migrated as f64 * model.migration_stall_ns / d.rows.len().max(1) as f64;
    let latency_at = |time: f64| latency_time(d, machine, model, time);
    // g(T) = max(latency-bound time at T, bandwidth time) falls as T grows (lower utilisation,
    // shorter queues), so its fixed point lies between these two and bisection finds it, to a
    // millionth: enough for any comparison, and a search simulates thousands of windows.
    let mut low = bw_time.max(latency_at(f64::INFINITY).0);
    let mut high = low.max(latency_at(low).0);
    for _ in 0..40 {
        if high - low <= 1e-6 * high {
            break;
        }
        let mid = 0.5 * (low + high);
        if latency_at(mid).0.max(bw_time) > mid {
            low = mid;
        } else {
            high = mid;
        }
    }
    let time = high;
    let (lat, latency_sum) = latency_at(time);
    if lat >= bw_time {
        bound = Bound::Latency;
    }
    let link_utilisation = machine
        .links
        .iter()
        .enumerate()
        .map(|(l, link)| d.link_bytes[l] / (link.bytes_per_ns * time.max(f64::MIN_POSITIVE)))
        .fold(0.0, f64::max)
        .min(1.0);
    Solved {
        time_ns: time + migration_ns,
        latency_sum,
        link_utilisation,
        bound,
        migration_ns,
    }
}

/// (Latency-bound time of the slowest node, Σ accesses × loaded latency) at window time `time`.
fn latency_time(d: &Demand, machine: &Machine, model: &Model, time: f64) -> (f64, f64) {
    let n = machine.node_count();
    let cap = model.max_queueing_factor;
    let utilisation = |bytes: f64, per_ns: f64| {
        if time > 0.0 {
            bytes / (per_ns * time)
        } else {
            0.0
        }
    };
    let controller: Vec<f64> = (0..n)
        .map(|m| {
            let u = utilisation(d.controller_bytes[m], machine.controller_bytes_per_ns[m]);
            queueing(u, cap)
        })
        .collect();
    let link: Vec<f64> = machine
        .links
        .iter()
        .enumerate()
        .map(|(l, lm)| queueing(utilisation(d.link_bytes[l], lm.bytes_per_ns), cap))
        .collect();
    let factor = |c: usize, m: usize| {
        machine.routes[c][m]
            .iter()
            .map(|&l| link[l])
            .fold(controller[m], f64::max)
    };
    let mut per_node_sum = vec![0.0; n];
    let mut per_node_max = vec![0.0f64; n];
    let mut latency_sum = 0.0;
    for row in &d.rows {
        let c = row.node;
        let mut busy = 0.0;
        for &(m, count, _) in &row.entries {
            let l = machine.latency_ns[c][m] * factor(c, m);
            latency_sum += count * l;
            busy += count * l;
        }
        let busy = busy / model.memory_parallelism;
        per_node_sum[c] += busy;
        per_node_max[c] = per_node_max[c].max(busy);
    }
    let slowest = (0..n)
        .map(|c| per_node_max[c].max(per_node_sum[c] / machine.cpus[c].max(1) as f64))
        .fold(0.0, f64::max);
    (slowest, latency_sum)
}

/// Sums over windows.
struct Totals {
    local: f64,
    all: f64,
    latency_sum: f64,
    time_ns: f64,
    migration_ns: f64,
    link_utilisation: f64,
    node_accesses: Vec<f64>,
    traffic: Vec<Vec<f64>>,
    /// Modelled time per limit.
    bound_time: Vec<(Bound, f64)>,
    migrated: u64,
}

impl Totals {
    fn new(machine: &Machine) -> Self {
        let n = machine.node_count();
        Totals {
            local: 0.0,
            all: 0.0,
            latency_sum: 0.0,
            time_ns: 0.0,
            migration_ns: 0.0,
            link_utilisation: 0.0,
            node_accesses: vec![0.0; n],
            traffic: vec![vec![0.0; n]; n],
            bound_time: Vec::new(),
            migrated: 0,
        }
    }

    fn add(&mut self, d: &Demand, s: &Solved) {
        for row in &d.rows {
            let c = row.node;
            for &(m, count, _) in &row.entries {
                self.traffic[c][m] += count;
                self.node_accesses[m] += count;
                self.all += count;
                if c == m {
                    self.local += count;
                }
            }
        }
        self.latency_sum += s.latency_sum;
        self.time_ns += s.time_ns;
        self.migration_ns += s.migration_ns;
        self.migrated += d.migrated;
        self.link_utilisation = self.link_utilisation.max(s.link_utilisation);
        match self.bound_time.iter_mut().find(|(b, _)| *b == s.bound) {
            Some((_, t)) => *t += s.time_ns,
            None => self.bound_time.push((s.bound, s.time_ns)),
        }
    }

    fn outcome(self, machine: &Machine) -> Outcome {
        let memory = machine.memory_nodes();
        let loads: Vec<f64> = memory.iter().map(|&m| self.node_accesses[m]).collect();
        let imbalance = relative_stddev(&loads);
        let bound = self
            .bound_time
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or(Bound::Latency, |b| b.0);
        Outcome {
            local_access_ratio: (self.all > 0.0).then(|| self.local / self.all),
            imbalance,
            max_link_utilisation: self.link_utilisation,
            mean_latency_ns: (self.all > 0.0).then(|| self.latency_sum / self.all),
            modelled_time_s: self.time_ns / 1e9,
            pages_migrated: self.migrated,
            migration_time_s: self.migration_ns / 1e9,
            node_accesses: self.node_accesses.iter().map(|v| *v as u64).collect(),
            traffic: self
                .traffic
                .iter()
                .map(|r| r.iter().map(|v| *v as u64).collect())
                .collect(),
            bound_by: match bound {
                Bound::Latency => "latency".to_string(),
                Bound::Controller(m) => format!("controller {}", machine.nodes[m]),
                Bound::Link(l) => format!("link {}-{}", machine.links[l].a, machine.links[l].b),
            },
        }
    }
}

/// Standard deviation over the mean; `None` without load.
pub fn relative_stddev(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
    Some(var.sqrt() / mean)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::accesses::Page;
    use crate::fixture::{self, cell, exact};
    use crate::layout::Layout;
    use numalens_topology::presets::preset;

    pub(crate) fn machine(name: &str) -> Machine {
        Machine::from_topology(&preset(name).unwrap())
    }

    /// `threads` threads, each reading `per_thread` times each of its own `pages` pages.
    pub(crate) fn private_pages(threads: u32, pages: u64, per_thread: u64) -> Accesses {
        let mut cells = Vec::new();
        let mut list = Vec::new();
        for t in 0..threads {
            for i in 0..pages {
                let page = (t as u64 * pages + i) as u32;
                list.push(Page {
                    pid: 1,
                    number: page as u64,
                    first_toucher: Some(t),
                    ..Page::default()
                });
                cells.push(cell(page, t, per_thread, 0));
            }
        }
        exact(
            fixture::threads(1, 100, threads),
            Vec::new(),
            list,
            1_000_000_000,
            vec![cells],
        )
    }

    fn run(
        a: &Accesses,
        m: &Machine,
        threads: Vec<usize>,
        pages: Vec<usize>,
        model: &Model,
    ) -> Outcome {
        let s = Schedule::fixed(Layout {
            thread_node: threads,
            page_node: pages,
            replicated: Vec::new(),
        });
        simulate(a, m, &s, model)
    }

    #[test]
    fn a_remote_access_costs_under_1_4_times_a_local_one_on_the_thesis_machines() {
        // One thread, pointer chasing (one miss in flight): the latency alone.
        let chase = Model {
            memory_parallelism: 1.0,
            ..Model::default()
        };
        for name in ["machine-a", "machine-b", "machine-c"] {
            let m = machine(name);
            let a = private_pages(1, 64, 1000);
            let local = run(&a, &m, vec![0], vec![0; 64], &chase);
            let near = (1..m.node_count())
                .min_by(|&x, &y| m.latency_ns[0][x].total_cmp(&m.latency_ns[0][y]))
                .unwrap();
            let remote = run(&a, &m, vec![0], vec![near; 64], &chase);
            let ratio = remote.modelled_time_s / local.modelled_time_s;
            assert!(ratio > 1.05 && ratio < 1.6, "{name}: remote/local {ratio}");
            assert_eq!(local.local_access_ratio, Some(1.0));
            assert_eq!(remote.local_access_ratio, Some(0.0));
        }
    }

    #[test]
    fn machine_b_remote_access_costs_72_cycles_more_unloaded() {
        let chase = Model {
            memory_parallelism: 1.0,
            ..Model::default()
        };
        let m = machine("machine-b");
        let a = private_pages(1, 8, 10);
        let local = run(&a, &m, vec![0], vec![0; 8], &chase);
        let remote = run(&a, &m, vec![0], vec![1; 8], &chase);
        let extra = remote.mean_latency_ns.unwrap() - local.mean_latency_ns.unwrap();
        // 72 cycles at 1.7 GHz, plus a little queueing of one miss at a time.
        let cycles = extra * 1.7;
        assert!((72.0..80.0).contains(&cycles), "{cycles} cycles");
    }

    #[test]
    fn one_core_saturates_a_machine_b_controller() {
        // The thesis: on machine B one core saturates a local memory controller.
        let m = machine("machine-b");
        let a = private_pages(1, 64, 1000);
        let local = run(&a, &m, vec![0], vec![0; 64], &Model::default());
        let spread = run(
            &a,
            &m,
            vec![0],
            (0..64).map(|p| p % 4).collect(),
            &Model::default(),
        );
        assert!(
            local.modelled_time_s > spread.modelled_time_s,
            "{local:?} vs {spread:?}"
        );
        assert_eq!(local.bound_by, "latency");
    }

    #[test]
    fn contention_on_one_controller_costs_more_than_remote_latency() {
        // All threads' memory on one node vs spread: the contention experiment of the thesis.
        let m = machine("machine-b");
        let a = private_pages(24, 16, 1000);
        let threads: Vec<usize> = (0..24).map(|t| t / 6).collect();
        let one_node = run(&a, &m, threads.clone(), vec![0; 24 * 16], &Model::default());
        let spread: Vec<usize> = (0..24 * 16).map(|p| p % 4).collect();
        let balanced = run(&a, &m, threads.clone(), spread, &Model::default());
        let contention = one_node.modelled_time_s / balanced.modelled_time_s;
        assert!(contention > 2.0, "contention penalty {contention}");
        assert!(one_node.imbalance.unwrap() > 1.5);
        assert!(balanced.imbalance.unwrap() < 0.01);
        assert_eq!(one_node.bound_by, "controller 0");
        let local: Vec<usize> = (0..24 * 16).map(|p| threads[p / 16]).collect();
        let best = run(&a, &m, threads, local, &Model::default());
        assert!(best.modelled_time_s < balanced.modelled_time_s);
    }

    #[test]
    fn one_node_machine_gives_the_same_time_whatever_the_page_placement() {
        let mut t = preset("machine-b").unwrap();
        t.nodes.truncate(1);
        t.cpus.retain(|c| c.node == 0);
        t.links.clear();
        t.routes.clear();
        t.distances = None;
        if let Some(l) = &mut t.latency {
            l.values = vec![vec![l.values[0][0]]];
            l.entry_provenance = None;
        }
        let m = Machine::from_topology(&t);
        let a = private_pages(4, 8, 100);
        let o = run(&a, &m, vec![0; 4], vec![0; 32], &Model::default());
        assert_eq!(o.local_access_ratio, Some(1.0));
        assert_eq!(o.node_accesses, vec![3200]);
    }

    #[test]
    fn migrations_cost_time_and_land_in_later_windows() {
        let m = machine("machine-b");
        // Enough accesses after the move to pay for it.
        let mut a = private_pages(1, 4, 100_000);
        let cells = a.windows.cells[0].clone();
        a.windows.cells = vec![cells.clone(), cells];
        let stay = Schedule::fixed(Layout {
            thread_node: vec![0],
            page_node: vec![1; 4],
            replicated: Vec::new(),
        });
        let mut moved = stay.clone();
        moved.moves = vec![(0..4).map(|p| Move::migrate(p, 0)).collect(), Vec::new()];
        let s = simulate(&a, &m, &stay, &Model::default());
        let t = simulate(&a, &m, &moved, &Model::default());
        assert_eq!(t.pages_migrated, 4);
        assert!(t.migration_time_s > 0.0);
        assert_eq!(t.local_access_ratio, Some(0.5));
        assert!(t.modelled_time_s < s.modelled_time_s);
    }

    #[test]
    fn replicas_serve_reads_locally_and_collapse_on_a_write() {
        let m = machine("machine-b");
        let mut a = private_pages(2, 1, 100);
        // Both threads read page 0; page 1 unused.
        for c in &mut a.windows.cells[0] {
            c.page = 0;
        }
        let mut s = Schedule::fixed(Layout {
            thread_node: vec![0, 1],
            page_node: vec![0, 0],
            replicated: vec![true, false],
        });
        let o = simulate(&a, &m, &s, &Model::default());
        assert_eq!(o.local_access_ratio, Some(1.0));
        a.windows.cells[0][0].writes = 1;
        s.initial.replicated = vec![true, false];
        let o = simulate(&a, &m, &s, &Model::default());
        assert!(o.local_access_ratio.unwrap() < 0.6);
    }

    #[test]
    fn a_split_simulation_gives_the_whole_one() {
        let m = machine("machine-c");
        let mut a = private_pages(8, 16, 300);
        for (i, c) in a.windows.cells[0].iter_mut().enumerate() {
            c.writes = (i % 5 == 0) as u64 * 40;
            c.thread = (i % 8) as u32;
        }
        let second = a.windows.cells[0].clone();
        a.windows.cells.push(second);
        let layout = Layout {
            thread_node: (0..8).collect(),
            page_node: (0..128).map(|p| (p * 3) % 8).collect(),
            replicated: (0..128).map(|p| p % 7 == 0).collect(),
        };
        let whole = simulate(&a, &m, &Schedule::fixed(layout.clone()), &Model::default());
        let left_out: Vec<u32> = (0..128).filter(|p| p % 3 == 0).collect();
        let model = Model::default();
        let split = Split::new(&a, &m, &layout, &model, &left_out);
        let t = split.time_s(&layout);
        assert!(
            (t / whole.modelled_time_s - 1.0).abs() < 1e-9,
            "{t} vs {whole:?}"
        );
        // A change to the left-out pages only: the same as simulating it whole.
        let mut other = layout.clone();
        for &p in &left_out {
            other.page_node[p as usize] = 0;
        }
        let whole = simulate(&a, &m, &Schedule::fixed(other.clone()), &model).modelled_time_s;
        assert!((split.time_s(&other) / whole - 1.0).abs() < 1e-5);
    }

    #[test]
    fn results_are_the_same_run_after_run() {
        let m = machine("machine-c");
        let a = private_pages(8, 32, 50);
        let pages: Vec<usize> = (0..256).map(|p| (p * 7) % 8).collect();
        let threads: Vec<usize> = (0..8).collect();
        let first = run(&a, &m, threads.clone(), pages.clone(), &Model::default());
        for _ in 0..3 {
            assert_eq!(
                run(&a, &m, threads.clone(), pages.clone(), &Model::default()),
                first
            );
        }
    }
}
