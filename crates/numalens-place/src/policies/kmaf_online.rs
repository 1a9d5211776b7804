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
    /// Pages moved with their neighbours (`fill_gaps`).
    filled: usize,
}

/// A page a window moved by kMAF's locality rule.
struct LocalityMove {
    number: u64,
    page: u32,
    from: usize,
    to: usize,
}

/// The pages of the window's gaps, moved with their neighbours: between two pages of one
/// process at most `gap` pages apart that the window moved by locality from one node to one
/// node, each page known but not touched in the window that is still on that first node goes
/// where they went. `touched` is sorted; `moves` is sorted here by page number.
fn fill_gaps(
    pages: &mut PageNodes,
    moves: &mut [LocalityMove],
    touched: &[u32],
    gap: u32,
    input: &StepInput,
) -> Vec<Move> {
    let mut filled = Vec::new();
    if gap == 0 {
        return filled;
    }
    moves.sort_unstable_by_key(|m| (m.number, m.page));
    for (i, low) in moves.iter().enumerate() {
        let reach = low.number.saturating_add(u64::from(gap) + 1);
        // The next move of the same process (numbers alone may name pages of two).
        let next = moves[i + 1..]
            .iter()
            .take_while(|m| m.number <= reach)
            .find(|m| (input.page_at)(low.page, m.number) == Some(m.page));
        let Some(high) = next else { continue };
        if (low.from, low.to) != (high.from, high.to) {
            continue;
        }
        for number in low.number + 1..high.number {
            let Some(page) = (input.page_at)(low.page, number) else {
                continue;
            };
            if touched.binary_search(&page).is_err() && pages.get(page) == low.from {
                pages.set(page, low.to);
                filled.push(Move::migrate(page, low.to));
            }
        }
    }
    filled
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
        let mut by_locality: Vec<LocalityMove> = Vec::new();
        for &page in &touched {
            nv.counts(page, &mut row);
            let number = (input.page_number)(page);
            let decision = kmaf_decide(&row, number, &memory, &input.params.kmaf);
            let target = match decision {
                KmafDecision::Locality(t) | KmafDecision::Balance(t) => t,
                KmafDecision::None => continue,
            };
            let from = self.pages.get(page);
            if from != target {
                self.pages.set(page, target);
                step.moves.push(Move::migrate(page, target));
                if matches!(decision, KmafDecision::Locality(_)) {
                    by_locality.push(LocalityMove {
                        number,
                        page,
                        from,
                        to: target,
                    });
                }
            }
        }
        let gap = input.params.kmaf.fill_gap_pages;
        let filled = fill_gaps(&mut self.pages, &mut by_locality, &touched, gap, input);
        if !filled.is_empty() {
            self.filled += filled.len();
            step.moves.extend(filled);
            step.moves.sort_unstable_by_key(|m| m.page);
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
        let mut notes = self.remap_notes();
        if self.filled > 0 {
            notes.push(format!(
                "{} pages moved with their sampled neighbours (kmaf.fill_gap_pages)",
                self.filled
            ));
        }
        notes
    }

    fn remap_notes(&self) -> Vec<String> {
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
    use crate::accesses::{Accesses, Cell, Page};
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

    /// Pages of process 1 numbered 1000.. then process 2's with the same numbers, first touched
    /// by thread 0 (thread 1 for those in `on_node_1`); window 0: thread 0 touches the others
    /// of process 1; window 1: thread 2 uses the pages of process 1 in `sampled` a lot and those
    /// in `barely` a little, and process 2's page 1001 (1001 in what the tests compare).
    fn sparse(count: u64, sampled: &[u64], barely: &[u64], on_node_1: &[u64]) -> Accesses {
        let page = |pid: u32, number: u64| Page {
            pid,
            number: 1000 + number,
            first_toucher: Some(u32::from(on_node_1.contains(&number) && pid == 1)),
            ..Page::default()
        };
        let pages: Vec<Page> = (0..count)
            .map(|n| page(1, n))
            .chain((0..count).map(|n| page(2, n)))
            .collect();
        let init = (0..count)
            .filter(|n| !on_node_1.contains(n))
            .map(|n| cell(n as u32, 0, 0, 100))
            .collect();
        let mut used: Vec<Cell> = sampled
            .iter()
            .map(|&n| cell(n as u32, 2, 1000, 0))
            .chain(barely.iter().map(|&n| cell(n as u32, 2, 1, 0)))
            .collect();
        used.push(cell(count as u32 + 1, 2, 1000, 0));
        exact(
            fixture::threads(1, 100, 4),
            Vec::new(),
            pages,
            1_000_000,
            vec![init, used],
        )
    }

    fn moved_in_window_1(a: &Accesses, fill_gap_pages: u32) -> Vec<u64> {
        let m = machine("machine-b");
        let mut params = Params::default();
        params.kmaf.fill_gap_pages = fill_gap_pages;
        let threads = [0, 1, 2, 3];
        let input = Input {
            accesses: a,
            machine: &m,
            threads: &threads,
            params: &params,
        };
        let s = schedule(&input);
        assert!(s.moves[0].is_empty(), "{:?}", s.moves[0]);
        assert!(s.moves[1].iter().all(|m| m.to == 2), "{:?}", s.moves[1]);
        s.moves[1]
            .iter()
            .map(|m| &a.pages[m.page as usize])
            // Process 2's pages from 1000 on.
            .map(|p| p.number - 1000 + 1000 * u64::from(p.pid - 1))
            .collect()
    }

    #[test]
    fn a_range_sampled_every_third_page_moves_whole_in_the_window_that_shows_its_user() {
        let sampled: Vec<u64> = (0..64).step_by(3).collect();
        let a = sparse(64, &sampled, &[], &[]);
        let mut only_sampled = sampled.clone();
        only_sampled.push(1001); // process 2's page, its own sample.
        assert_eq!(moved_in_window_1(&a, 0), only_sampled);
        let mut all: Vec<u64> = (0..=63).collect();
        all.push(1001);
        let mut moved = moved_in_window_1(&a, 4);
        moved.sort_unstable();
        assert_eq!(moved, all);
    }

    #[test]
    fn only_untouched_pages_of_the_first_node_between_close_neighbours_are_filled() {
        // Gaps: 1–2 holds a page the window barely touched (1: kMAF's own call, no move) and one
        // on node 1 (2); 5–9 is wider than 4 pages; 11 is filled; 13–14 are the last sampled
        // page's right side, never filled. Process 2's pages 1010–1012 share the numbers of
        // the gap 11 and are left alone.
        let a = sparse(16, &[0, 3, 4, 10, 12], &[1], &[2]);
        let mut moved = moved_in_window_1(&a, 4);
        moved.sort_unstable();
        assert_eq!(moved, vec![0, 3, 4, 10, 11, 12, 1001]);
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
