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

/// Page ranges of this many pages the refinement moves as one.
const CHUNK_PAGES: usize = 16;

/// Placements the refinement simulates at most.
const REFINE_BUDGET: usize = 512;

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
        let mut layouts = vec![start.final_layout()];
        let kmaf = super::kmaf::map_threads(a, input.machine, input.threads, &input.params.kmaf);
        if kmaf != layouts[0].thread_node {
            let mut other = layouts[0].clone();
            other.thread_node = kmaf;
            layouts.push(other);
        }
        let merged = super::per_object::coarse(input);
        let searched = merged.as_ref().map_or(*input, |a| Input {
            accesses: a,
            ..*input
        });
        let (found, _, n) = super::per_object::search(&searched, layouts);
        evaluated += n;
        let (refined, m) = refine_chunks(&searched, found.initial);
        evaluated += m;
        consider(
            &mut best,
            Schedule::fixed(refined),
            "object and page-range search",
        );
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

/// Beyond what a per-object rule can say: the hottest runs of 16 pages of one object, each
/// tried on every memory node, kept when the modelled time falls.
fn refine_chunks(input: &Input, mut layout: Layout) -> (Layout, u64) {
    let a = input.accesses;
    let memory = input.machine.memory_nodes();
    let mut chunks: Vec<(u64, Vec<usize>)> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let flush = |current: &mut Vec<usize>, chunks: &mut Vec<(u64, Vec<usize>)>| {
        if !current.is_empty() {
            let heat = current
                .iter()
                .fold(0u64, |s, &p| s.saturating_add(a.pages[p].total()));
            chunks.push((heat, std::mem::take(current)));
        }
    };
    for p in 0..a.pages.len() {
        let same = current.last().is_some_and(|&q| {
            a.pages[q].object == a.pages[p].object && a.pages[q].number + 1 == a.pages[p].number
        });
        if !same || current.len() == CHUNK_PAGES {
            flush(&mut current, &mut chunks);
        }
        current.push(p);
    }
    flush(&mut current, &mut chunks);
    chunks.sort_by_key(|c| (std::cmp::Reverse(c.0), c.1[0]));
    let tries = REFINE_BUDGET / memory.len().max(1);
    let mut evaluated = 0;
    for (_, pages) in chunks.into_iter().take(tries) {
        let ids: Vec<u32> = pages.iter().map(|&p| p as u32).collect();
        let split = crate::sim::Split::new(a, input.machine, &layout, &input.params.model, &ids);
        let mut time = split.time_s(&layout);
        for &node in &memory {
            if pages.iter().all(|&p| layout.page_node[p] == node) {
                continue;
            }
            let mut option = layout.clone();
            for &p in &pages {
                option.page_node[p] = node;
            }
            let t = split.time_s(&option);
            evaluated += 1;
            if t < time {
                time = t;
                layout = option;
            }
        }
    }
    (layout, evaluated)
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
    use crate::accesses::Page;
    use crate::fixture::{self, cell, exact};
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
                        window.push(cell(p, t, reads, writes));
                    }
                }
            }
        }
        exact(
            fixture::threads(1, 0, 4),
            Vec::new(),
            list,
            1_000_000,
            cells,
        )
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
