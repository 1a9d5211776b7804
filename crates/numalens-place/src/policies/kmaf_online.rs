//! kMAF online: at the end of every window, the NUMA vectors age (each count divided by
//! 2^`age_shift`), the window's accesses add to them, and each page the window accessed is
//! placed by the kMAF rules (locality, balance) on its NUMA vector. Threads are remapped by
//! the communication seen so far (kMAF's greedy groups, each group placed where its data is)
//! when what that saves on communication is at least `REMAP_GAIN` of the latency of every
//! access so far: below it, threads with private data would chase crumbs of sharing away from
//! their pages. After a remap the NUMA vectors start over: they counted nodes the threads have
//! left.

use crate::accesses::Cell;
use crate::layout::{Move, Schedule, ThreadMove};

use super::Input;
use super::compact::{NodeCounts, PageNodes};
use super::kmaf::{KmafDecision, add_sharing, communication_groups, kmaf_decide};
use super::online::{Step, StepInput};

/// What a remap must save on communication, as a share of the latency of the accesses seen so
/// far: below it, a thread move buys less than the cache it leaves behind.
const REMAP_GAIN: f64 = 0.05;

pub(super) fn schedule(input: &Input) -> Schedule {
    let base = super::first_touch::schedule(input);
    super::online::run_batch(super::Policy::KmafOnline, input, base)
}

/// Online kMAF's state: where pages and threads are, the NUMA vectors of the pages seen since
/// the last remap (compact: one word a page used from one node, a row for a shared page), and
/// the communication and accesses so far.
#[derive(Default)]
pub struct Online {
    pages: PageNodes,
    /// The policy's own thread mapping: where each thread runs (threads seen later join where
    /// they run), until a remap places them all.
    threads: Vec<usize>,
    /// The threads are where the last remap put them (else they follow where they run).
    remapped: bool,
    /// NUMA vectors since the last remap (created at the first step, when the nodes are known).
    nv: Option<NodeCounts>,
    comm: Vec<Vec<u64>>,
    /// Accesses of each thread to pages on each node, as they were placed when accessed.
    to_node: Vec<Vec<u64>>,
    remaps: usize,
    thread_moves: usize,
}

impl Online {
    pub(super) fn add_pages(&mut self, initial_nodes: &[usize]) {
        self.pages.extend(initial_nodes);
    }

    /// Threads seen for the first time join the mapping where they run.
    fn add_threads(&mut self, input: &StepInput) {
        let n = input.machine.node_count();
        let known = self.threads.len();
        if input.threads.len() <= known {
            return;
        }
        self.threads.extend_from_slice(&input.threads[known..]);
        let count = self.threads.len();
        for row in &mut self.comm {
            row.resize(count, 0);
        }
        self.comm.resize_with(count, || vec![0; count]);
        self.to_node.resize_with(count, || vec![0; n]);
    }

    pub(super) fn step(&mut self, input: &StepInput, cells: &[Cell]) -> Step {
        self.add_threads(input);
        if !self.remapped {
            // Live, the scheduler moves threads that no remap pinned: count where they are.
            let known = self.threads.len();
            self.threads.copy_from_slice(&input.threads[..known]);
        }
        let n = input.machine.node_count();
        let memory = input.machine.memory_nodes();
        let nv = self.nv.get_or_insert_with(|| NodeCounts::new(n));
        nv.age(input.params.kmaf.age_shift);
        nv.grow_to(self.pages.len());
        let mut touched: Vec<u32> = Vec::new();
        for c in cells {
            nv.add(c.page, self.threads[c.thread as usize], c.total());
            let seen = &mut self.to_node[c.thread as usize][self.pages.get(c.page)];
            *seen = seen.saturating_add(c.total());
            if touched.last() != Some(&c.page) {
                touched.push(c.page);
            }
        }
        let mut step = Step::default();
        let mut row = vec![0u64; n];
        for page in touched {
            nv.counts(page, &mut row);
            let number = (input.page_number)(page);
            let decision = kmaf_decide(&row, number, &memory, &input.params.kmaf);
            let target = match decision {
                KmafDecision::Locality(t) | KmafDecision::Balance(t) => t,
                KmafDecision::None => continue,
            };
            if self.pages.get(page) != target {
                self.pages.set(page, target);
                step.moves.push(Move::migrate(page, target));
            }
        }
        add_communication(&mut self.comm, cells);
        if !input.last {
            // A remap at the run's end changes nothing.
            step.thread_moves = self.remap(input);
        }
        step
    }

    /// kMAF's groups placed by their data, when the communication they save is worth it: a
    /// share of the latency of every access so far (threads with private data would otherwise
    /// chase crumbs). After a remap the NUMA vectors start over.
    fn remap(&mut self, input: &StepInput) -> Vec<ThreadMove> {
        let m = input.machine;
        let mapped = map_to_data(&self.comm, &self.to_node, &self.threads, input);
        let saved = communication_cost(&self.comm, &self.threads, m)
            - communication_cost(&self.comm, &mapped, m);
        if saved <= access_latency(&self.to_node, &self.threads, m) * REMAP_GAIN {
            return Vec::new();
        }
        let moves: Vec<ThreadMove> = self
            .threads
            .iter()
            .zip(&mapped)
            .enumerate()
            .filter(|(_, (from, to))| from != to)
            .map(|(t, (_, &to))| ThreadMove {
                thread: t as u32,
                to,
            })
            .collect();
        self.threads = mapped;
        self.remapped = true;
        if let Some(nv) = &mut self.nv {
            nv.clear();
        }
        self.remaps += 1;
        self.thread_moves += moves.len();
        moves
    }

    pub(super) fn notes(&self) -> Vec<String> {
        vec![if self.remaps == 0 {
            "threads stay on the default spread: no remap by communication paid".to_string()
        } else {
            let times = if self.remaps == 1 {
                "once".to_string()
            } else {
                format!("{} times", self.remaps)
            };
            format!(
                "threads remapped by communication {times} ({} thread moves)",
                self.thread_moves
            )
        }]
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let square: usize = self.comm.iter().map(|r| r.capacity() * 8).sum();
        let rows: usize = self.to_node.iter().map(|r| r.capacity() * 8).sum();
        self.pages.memory_bytes()
            + self.nv.as_ref().map_or(0, NodeCounts::memory_bytes)
            + square
            + rows
    }
}

/// kMAF's groups of communicating threads, each group on the node that holds most of what its
/// members accessed so far (groups with most accesses choose first, among nodes with at least
/// the CPUs the group was sized for): online, the pages are already somewhere.
fn map_to_data(
    comm: &[Vec<u64>],
    to_node: &[Vec<u64>],
    threads: &[usize],
    input: &StepInput,
) -> Vec<usize> {
    let m = input.machine;
    let Some((groups, sized_for)) = communication_groups(comm, m, &input.params.kmaf) else {
        return threads.to_vec();
    };
    let on = |g: usize, node: usize| -> u64 {
        groups[g]
            .iter()
            .fold(0u64, |s, &t| s.saturating_add(to_node[t][node]))
    };
    let total = |g: usize| (0..m.node_count()).fold(0u64, |s, n| s.saturating_add(on(g, n)));
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| (std::cmp::Reverse(total(g)), g));
    let mut free = sized_for.clone();
    let mut out = threads.to_vec();
    for g in order {
        let fits = |n: &usize| m.cpus[*n] >= m.cpus[sized_for[g]];
        let pick = free
            .iter()
            .copied()
            .filter(fits)
            .max_by_key(|&n| (on(g, n), std::cmp::Reverse(n)))
            .or_else(|| free.first().copied());
        let Some(pick) = pick else { break };
        free.retain(|&n| n != pick);
        for &t in &groups[g] {
            out[t] = pick;
        }
    }
    out
}

/// What a thread mapping costs the communication: Σ over pairs of what they share × the
/// latency between their nodes.
fn communication_cost(comm: &[Vec<u64>], threads: &[usize], m: &crate::machine::Machine) -> f64 {
    let mut cost = 0.0;
    for (i, row) in comm.iter().enumerate() {
        for (j, &c) in row.iter().enumerate().skip(i + 1) {
            if c > 0 {
                cost += c as f64 * m.latency_ns[threads[i]][threads[j]];
            }
        }
    }
    cost
}

/// Σ accesses × latency from each thread's node (under `threads`) to where the pages were.
fn access_latency(to_node: &[Vec<u64>], threads: &[usize], m: &crate::machine::Machine) -> f64 {
    to_node
        .iter()
        .zip(threads)
        .map(|(row, &t)| {
            row.iter()
                .enumerate()
                .map(|(node, &c)| c as f64 * m.latency_ns[t][node])
                .sum::<f64>()
        })
        .sum()
}

/// Adds a window's communication: threads sharing a page, by the smaller of their counts on it
/// (cells are sorted by page, then thread).
fn add_communication(comm: &mut [Vec<u64>], cells: &[Cell]) {
    let mut users: Vec<(u32, u64)> = Vec::new();
    for same_page in cells.chunk_by(|x, y| x.page == y.page) {
        users.clear();
        users.extend(same_page.iter().map(|c| (c.thread, c.total())));
        add_sharing(comm, &users);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Accesses, Page};
    use crate::fixture::{self, cell, exact};
    use crate::layout::spread_threads;
    use crate::policies::Params;
    use crate::sim::{simulate, tests::machine};

    /// 8 threads; threads k and k + 4 share page k (and only it) in each of three windows.
    fn pairs_apart() -> Accesses {
        let pages = (0..4)
            .map(|p| Page {
                pid: 1,
                number: p,
                first_toucher: Some(p as u32),
                ..Page::default()
            })
            .collect();
        let window: Vec<Cell> = (0..4u32)
            .flat_map(|k| [k, k + 4].map(|thread| cell(k, thread, 100_000, 100_000)))
            .collect();
        exact(
            fixture::threads(1, 100, 8),
            Vec::new(),
            pages,
            1_000_000,
            vec![window; 3],
        )
    }

    #[test]
    fn threads_that_share_are_brought_together_once_and_their_pages_follow() {
        let a = pairs_apart();
        let m = machine("machine-b");
        let params = Params::default();
        let (threads, _) = spread_threads(&a, &m, params.spread);
        // The default spread puts threads k and k + 4 on different nodes.
        assert!((0..4).all(|k| threads[k] != threads[k + 4]), "{threads:?}");
        let input = Input {
            accesses: &a,
            machine: &m,
            threads: &threads,
            params: &params,
        };
        let s = schedule(&input);
        assert!(!s.thread_moves[0].is_empty(), "{:?}", s.notes);
        assert!(s.thread_moves[1..].iter().all(Vec::is_empty), "one remap");
        let end = s.final_layout();
        for k in 0..4 {
            assert_eq!(end.thread_node[k], end.thread_node[k + 4], "{end:?}");
        }
        let first_touch = super::super::run(crate::policies::Policy::FirstTouch, &input).unwrap();
        let time = |s: &Schedule| simulate(&a, &m, s, &params.model).modelled_time_s;
        assert!(
            time(&s) < time(&first_touch),
            "{} vs {}",
            time(&s),
            time(&first_touch)
        );
    }
}
