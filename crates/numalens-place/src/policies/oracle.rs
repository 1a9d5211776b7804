//! The oracle: the best placement the model finds knowing every access of the run.
//!
//! Small runs (at most [`EXHAUSTIVE_LIMIT`] page placements to try) are searched exhaustively
//! for the default thread mapping: the oracle is then the model's optimum among static page
//! placements. Otherwise it starts from the best schedule of every other policy and searches
//! object by object (hottest first) among: each node, interleave, Eq. 2 per page, replication
//! of read-only pages, keeping a change only when the simulated time falls; both the default
//! and kMAF's thread mappings are tried. It is never worse than any other policy, by
//! construction, and [`lower_bound_s`] bounds how far from the optimum it can be.

use serde::Serialize;

use crate::accesses::Accesses;
use crate::error::PlaceError;
use crate::layout::{Layout, Schedule};
use crate::machine::Machine;
use crate::sim::{Model, simulate};

use super::{Input, Policy};

/// Exhaustive search when nodes^pages is at most this…
pub const EXHAUSTIVE_LIMIT: u64 = 65_536;

/// …and nodes^pages × windows at most this (each placement is simulated over every window).
const EXHAUSTIVE_WORK: u64 = 1 << 20;

/// Objects searched one by one, the hottest first.
const SEARCHED_OBJECTS: usize = 32;

/// How the oracle's answer was found and how close to optimal it is known to be.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct OracleReport {
    /// `exhaustive` or `search`.
    pub method: String,
    /// Placements simulated.
    pub evaluated: u64,
    /// No placement can take less than this (s).
    pub lower_bound_s: f64,
    /// Where the chosen schedule came from: a policy, the exhaustive search or the search.
    pub started_from: String,
}

pub(super) fn schedule(input: &Input) -> Result<(Schedule, OracleReport), PlaceError> {
    let mut candidates = Vec::new();
    for policy in Policy::all() {
        if policy != Policy::Oracle {
            candidates.push((policy.name().to_string(), super::run(policy, input)?));
        }
    }
    with_candidates(input, candidates)
}

/// The oracle, given every other policy's schedule (so that it is never worse than any).
pub fn with_candidates(
    input: &Input,
    candidates: Vec<(String, Schedule)>,
) -> Result<(Schedule, OracleReport), PlaceError> {
    let model = &input.params.model;
    let a = input.accesses;
    let memory = input.machine.memory_nodes();
    let bound = lower_bound_s(a, input.machine, model);
    let mut best: Option<(Schedule, f64, String)> = None;
    let mut evaluated = 0;
    let consider = |best: &mut Option<(Schedule, f64, String)>, s: Schedule, from: &str| {
        let time = simulate(a, input.machine, &s, model).modelled_time_s;
        if best.as_ref().is_none_or(|b| time < b.1) {
            *best = Some((s, time, from.to_string()));
        }
    };
    for (name, s) in candidates {
        consider(&mut best, s, &name);
        evaluated += 1;
    }
    let small = (memory.len() as u64)
        .checked_pow(a.pages.len() as u32)
        .is_some_and(|space| {
            let windows = a.windows.cells.len().max(1) as u64;
            space <= EXHAUSTIVE_LIMIT && space.saturating_mul(windows) <= EXHAUSTIVE_WORK
        });
    let method = if small {
        let (s, n) = exhaustive(input, &memory);
        evaluated += n;
        consider(&mut best, s, "every static page placement");
        "exhaustive"
    } else {
        let start = best.as_ref().ok_or(PlaceError::NoAccesses)?.0.clone();
        let (s, _, n) = search(input, &start);
        evaluated += n;
        consider(&mut best, s, "object-by-object search");
        "search"
    };
    let (chosen, _, from) = best.ok_or(PlaceError::NoAccesses)?;
    let report = OracleReport {
        method: method.into(),
        evaluated,
        lower_bound_s: bound,
        started_from: from,
    };
    Ok((with_note(chosen, &report), report))
}

fn with_note(mut s: Schedule, r: &OracleReport) -> Schedule {
    s.notes.push(format!(
        "{}: {} placements tried, best from {}; no placement can take less than {:.3e} s",
        r.method, r.evaluated, r.started_from, r.lower_bound_s
    ));
    s
}

/// Every assignment of the pages to memory nodes, under the default thread mapping.
fn exhaustive(input: &Input, memory: &[usize]) -> (Schedule, u64) {
    let pages = input.accesses.pages.len();
    let mut digits = vec![0usize; pages];
    let mut best: Option<(Schedule, f64)> = None;
    let mut evaluated = 0;
    loop {
        let layout = Layout {
            thread_node: input.threads.to_vec(),
            page_node: digits.iter().map(|&d| memory[d]).collect(),
            replicated: Vec::new(),
        };
        let s = Schedule::fixed(layout);
        let time = simulate(input.accesses, input.machine, &s, &input.params.model).modelled_time_s;
        evaluated += 1;
        if best.as_ref().is_none_or(|b| time < b.1) {
            best = Some((s, time));
        }
        // Next assignment, counting in base |memory|.
        let mut i = 0;
        while i < pages {
            digits[i] += 1;
            if digits[i] < memory.len() {
                break;
            }
            digits[i] = 0;
            i += 1;
        }
        if i == pages {
            break;
        }
    }
    (
        best.map(|b| b.0).expect("one assignment at least"),
        evaluated,
    )
}

/// Object-by-object search from `start`'s final layout, under the start's thread mapping and
/// kMAF's. Returns the best schedule, its time and the placements simulated.
fn search(input: &Input, start: &Schedule) -> (Schedule, f64, u64) {
    let a = input.accesses;
    let model = &input.params.model;
    let mappings = thread_mappings(input, start);
    let mut evaluated = 0;
    let mut best: Option<(Schedule, f64)> = None;
    for threads in mappings {
        let mut layout = start.final_layout();
        layout.thread_node = threads;
        let mut time = time_of(a, input.machine, &layout, model);
        evaluated += 1;
        for object in hottest_objects(a) {
            for option in options(input, &layout, object) {
                let t = time_of(a, input.machine, &option, model);
                evaluated += 1;
                if t < time {
                    time = t;
                    layout = option;
                }
            }
        }
        if best.as_ref().is_none_or(|b| time < b.1) {
            best = Some((Schedule::fixed(layout), time));
        }
    }
    let (s, t) = best.expect("one mapping at least");
    (s, t, evaluated)
}

fn time_of(a: &Accesses, machine: &Machine, layout: &Layout, model: &Model) -> f64 {
    simulate(a, machine, &Schedule::fixed(layout.clone()), model).modelled_time_s
}

fn thread_mappings(input: &Input, start: &Schedule) -> Vec<Vec<usize>> {
    let mut out = vec![start.initial.thread_node.clone()];
    let kmaf = super::kmaf::map_threads(
        input.accesses,
        input.machine,
        input.threads,
        &input.params.kmaf,
    );
    for m in [input.threads.to_vec(), kmaf] {
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

/// Object indices by accesses, hottest first; pages without an object count as one more.
fn hottest_objects(a: &Accesses) -> Vec<Option<u32>> {
    let mut by_object: std::collections::HashMap<Option<u32>, u64> = Default::default();
    for p in &a.pages {
        let n = by_object.entry(p.object).or_default();
        *n = n.saturating_add(p.total());
    }
    let mut list: Vec<(Option<u32>, u64)> = by_object.into_iter().filter(|o| o.1 > 0).collect();
    list.sort_by_key(|&(o, n)| (std::cmp::Reverse(n), o));
    list.into_iter()
        .take(SEARCHED_OBJECTS)
        .map(|o| o.0)
        .collect()
}

/// The layouts to try for one object's pages.
fn options(input: &Input, layout: &Layout, object: Option<u32>) -> Vec<Layout> {
    let a = input.accesses;
    let m = input.machine;
    let pages: Vec<usize> = (0..a.pages.len())
        .filter(|&p| a.pages[p].object == object)
        .collect();
    let memory = m.memory_nodes();
    let mut out = Vec::new();
    let with = |f: &dyn Fn(usize) -> usize| {
        let mut l = layout.clone();
        for &p in &pages {
            l.page_node[p] = f(p);
        }
        l
    };
    for &node in &memory {
        out.push(with(&|_| node));
    }
    out.push(with(&|p| {
        memory[(a.pages[p].number % memory.len() as u64) as usize]
    }));
    out.push(with(&|p| {
        let mut per_node = vec![0u64; m.node_count()];
        for u in &a.pages[p].users {
            let n = &mut per_node[layout.thread_node[u.thread as usize]];
            *n = n.saturating_add(u.total());
        }
        super::marathe_hop_node(m, &per_node).unwrap_or(layout.page_node[p])
    }));
    let read_only = pages.iter().all(|&p| a.pages[p].writes() == 0);
    if read_only && memory.len() > 1 {
        let mut l = layout.clone();
        l.replicated.resize(a.pages.len(), false);
        for &p in &pages {
            l.replicated[p] = true;
        }
        out.push(l);
    }
    out
}

/// No placement of the run's accesses can take less: per window, the larger of (a) every
/// thread's accesses at the lowest unloaded latency its node has to any memory node, its node's
/// CPUs shared, and (b) every byte spread over all controllers at once.
pub fn lower_bound_s(a: &Accesses, machine: &Machine, model: &Model) -> f64 {
    let memory = machine.memory_nodes();
    let total_bw: f64 = memory
        .iter()
        .map(|&m| machine.controller_bytes_per_ns[m])
        .sum();
    let best_latency = |c: usize| {
        memory
            .iter()
            .map(|&m| machine.latency_ns[c][m])
            .fold(f64::INFINITY, f64::min)
    };
    let cpu_nodes = machine.cpu_nodes();
    let mut total = 0.0;
    for cells in &a.windows.cells {
        let mut per_thread = vec![0.0f64; a.threads.len()];
        let mut bytes = 0.0;
        for c in cells {
            per_thread[c.thread as usize] += c.total() as f64;
            bytes +=
                (c.reads + c.other) as f64 * model.line_bytes + c.writes as f64 * model.write_bytes;
        }
        // The fastest any thread can be: on the node with the lowest local latency, alone.
        let fastest = cpu_nodes
            .iter()
            .map(|&c| best_latency(c))
            .fold(f64::INFINITY, f64::min);
        let cpus: usize = cpu_nodes.iter().map(|&c| machine.cpus[c]).sum();
        let work: f64 = per_thread.iter().sum::<f64>() * fastest / model.memory_parallelism;
        let slowest_thread =
            per_thread.iter().copied().fold(0.0, f64::max) * fastest / model.memory_parallelism;
        let latency = slowest_thread.max(work / cpus.max(1) as f64);
        total += latency.max(bytes / total_bw);
    }
    total / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Cell, CountSource, Page, ThreadInfo, Windows};
    use crate::layout::spread_threads;
    use crate::policies::Params;
    use numalens_topology::presets::preset;

    /// A small run from a seed: `pages` pages, 4 threads, 2 windows, pseudo-random counts.
    fn small(seed: u64, pages: u32) -> Accesses {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let list = (0..pages)
            .map(|p| Page {
                pid: 1,
                number: p as u64,
                first_toucher: Some((next() % 4) as u32),
                ..Page::default()
            })
            .collect();
        let mut cells = vec![Vec::new(), Vec::new()];
        for window in &mut cells {
            for p in 0..pages {
                for t in 0..4 {
                    if next() % 3 == 0 {
                        let reads = next() % 100_000;
                        let writes = next() % 30_000;
                        window.push(Cell {
                            page: p,
                            thread: t,
                            reads,
                            writes,
                            other: 0,
                        });
                    }
                }
            }
        }
        let threads = (0..4)
            .map(|t| ThreadInfo {
                pid: 1,
                tid: t,
                logical_id: t,
                name: None,
            })
            .collect();
        let windows = Windows {
            start_ns: 0,
            length_ns: 1_000_000,
            cells,
        };
        Accesses::from_cells(4096, CountSource::Exact, threads, Vec::new(), list, windows)
    }

    fn every_policy(a: &Accesses, m: &Machine) -> (Vec<(Policy, f64)>, Schedule, OracleReport) {
        let params = Params::default();
        let (threads, _) = spread_threads(a, m, params.spread);
        let input = Input {
            accesses: a,
            machine: m,
            threads: &threads,
            params: &params,
        };
        let times = Policy::all()
            .into_iter()
            .filter(|p| *p != Policy::Oracle)
            .map(|p| {
                let s = super::super::run(p, &input).unwrap();
                (p, simulate(a, m, &s, &params.model).modelled_time_s)
            })
            .collect();
        let (s, r) = schedule(&input).unwrap();
        (times, s, r)
    }

    #[test]
    fn small_cases_are_searched_exhaustively_and_match_brute_force() {
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        let model = Model::default();
        for seed in 0..4 {
            let a = small(seed, 5);
            let (times, s, report) = every_policy(&a, &m);
            assert_eq!(report.method, "exhaustive");
            let oracle = simulate(&a, &m, &s, &model).modelled_time_s;
            for (p, t) in &times {
                assert!(oracle <= t + 1e-15, "{p:?}: {t} < oracle {oracle}");
            }
            // Brute force over every static placement, here rather than in the oracle.
            let mut best = f64::INFINITY;
            for code in 0..4u32.pow(5) {
                let page_node = (0..5).map(|i| (code / 4u32.pow(i) % 4) as usize).collect();
                let l = Layout {
                    thread_node: vec![0, 1, 2, 3],
                    page_node,
                    replicated: Vec::new(),
                };
                best = best.min(simulate(&a, &m, &Schedule::fixed(l), &model).modelled_time_s);
            }
            assert!(
                oracle <= best + 1e-15,
                "seed {seed}: oracle {oracle} vs best {best}"
            );
            assert!(report.lower_bound_s <= oracle, "{report:?}");
        }
    }

    #[test]
    fn larger_cases_are_never_worse_than_a_policy_and_above_the_bound() {
        let m = Machine::from_topology(&preset("machine-c").unwrap());
        let model = Model::default();
        for seed in 0..3 {
            let a = small(seed, 64);
            let (times, s, report) = every_policy(&a, &m);
            assert_eq!(report.method, "search");
            let oracle = simulate(&a, &m, &s, &model).modelled_time_s;
            for (p, t) in &times {
                assert!(oracle <= t + 1e-15, "{p:?}");
            }
            assert!(report.lower_bound_s <= oracle && report.lower_bound_s > 0.0);
        }
    }
}
