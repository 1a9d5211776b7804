//! SPM (Ortiz-Yepes, TUM 2015): observe for a while, then move every sampled page to the node
//! that accessed it most, once. The observation is the run's first `observe_windows` windows
//! (SPM observed 45 s); a page goes to its majority node when that node has more than
//! `threshold` samples (SPM_SIG_THRESH). SPM sent a page with no node above the threshold to
//! node 0 (its search started at 0); such pages stay where they are here. A recording is often
//! much shorter than the runs SPM observed, so by default the observation is the first quarter
//! of the run's windows.

use serde::{Deserialize, Serialize};

use crate::accesses::Cell;
use crate::layout::{Move, Schedule};

use super::Input;
use super::compact::{NodeCounts, PageNodes};
use super::online::{Step, StepInput};

/// The defaults: a quarter of the run observed, no threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SpmParams {
    /// Windows observed before the one migration round; 0: a quarter of the run's windows.
    pub observe_windows: usize,
    /// Samples the majority node must have more than.
    pub threshold: u64,
}

pub(super) fn schedule(input: &Input) -> Schedule {
    let base = super::first_touch::schedule(input);
    if input.accesses.windows.cells.is_empty() {
        return base;
    }
    super::online::run_batch(super::Policy::Spm, input, base)
}

/// SPM's state: samples per page and node during the observation (compact: one word a page
/// seen from one node, a row for a page seen from several), then nothing.
pub struct Online {
    /// The window whose end brings the round (0-based).
    round_at: usize,
    windows: usize,
    /// Where each page was placed, kept until the round.
    initial: PageNodes,
    /// Samples per page and node position, until the round (created at the first step, when
    /// the nodes are known).
    seen: Option<NodeCounts>,
}

impl Online {
    /// The observation: `observe_windows`, else (0) a quarter of a run of known length, else one
    /// window; never beyond the run's end.
    pub(super) fn new(p: &SpmParams, total_windows: Option<usize>) -> Online {
        let observe = match (p.observe_windows, total_windows) {
            (0, Some(total)) => total.div_ceil(4),
            (0, None) => 1,
            (n, _) => n,
        };
        let observe = total_windows.map_or(observe, |t| observe.min(t));
        Online {
            round_at: observe.max(1) - 1,
            windows: 0,
            initial: PageNodes::default(),
            seen: None,
        }
    }

    pub(super) fn add_pages(&mut self, initial_nodes: &[usize]) {
        if self.windows <= self.round_at {
            self.initial.extend(initial_nodes);
        }
    }

    pub(super) fn step(&mut self, input: &StepInput, cells: &[Cell]) -> Step {
        let w = self.windows;
        self.windows += 1;
        if w > self.round_at {
            return Step::default();
        }
        let n = input.machine.node_count();
        let seen = self.seen.get_or_insert_with(|| NodeCounts::new(n));
        seen.grow_to(self.initial.len());
        let period = input.sample_period.max(1);
        for c in cells {
            let node = input.threads[c.thread as usize];
            seen.add(c.page, node, c.total().div_ceil(period));
        }
        if w < self.round_at {
            return Step::default();
        }
        let Some(seen) = self.seen.take() else {
            return Step::default();
        };
        let memory = input.machine.memory_nodes();
        let mut moves = Vec::new();
        let mut row = vec![0u64; n];
        for page in 0..self.initial.len() as u32 {
            seen.counts(page, &mut row);
            let best = memory
                .iter()
                .copied()
                .max_by_key(|&m| (row[m], std::cmp::Reverse(m)));
            let Some(dest) = best.filter(|&m| row[m] > input.params.spm.threshold) else {
                continue;
            };
            if self.initial.get(page) != dest {
                moves.push(Move::migrate(page, dest));
            }
        }
        self.initial = PageNodes::default();
        Step {
            moves,
            thread_moves: Vec::new(),
        }
    }

    pub(super) fn notes(&self) -> Vec<String> {
        vec![if self.windows > self.round_at {
            format!(
                "one migration round after {} window(s) of observation",
                self.round_at + 1
            )
        } else {
            format!(
                "observing: the round comes after {} window(s), {} seen",
                self.round_at + 1,
                self.windows
            )
        }]
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.initial.memory_bytes() + self.seen.as_ref().map_or(0, NodeCounts::memory_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Accesses, Cell, CountSource, Windows};
    use crate::fixture::{self, pages_placed_by};
    use crate::machine::Machine;
    use crate::policies::Params;
    use numalens_topology::presets::preset;

    fn c(page: u32, thread: u32, reads: u64) -> Cell {
        Cell {
            page,
            thread,
            reads,
            writes: 0,
            other: 0,
        }
    }

    fn run(cells: Vec<Vec<Cell>>, params: Params) -> Schedule {
        let windows = Windows {
            start_ns: 0,
            length_ns: 1000,
            cells,
        };
        let (threads, pages) = (fixture::threads(1, 0, 2), pages_placed_by(3, 0));
        let a = Accesses::from_cells(
            4096,
            CountSource::Sampled,
            threads,
            Vec::new(),
            pages,
            windows,
        );
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        schedule(&Input {
            accesses: &a,
            machine: &m,
            threads: &[0, 1],
            params: &params,
        })
    }

    #[test]
    fn majority_node_after_the_observation() {
        let w0 = vec![c(0, 1, 3), c(0, 0, 1), c(1, 0, 5), c(2, 1, 1)];
        let w1 = vec![c(1, 1, 50)];
        let mut p = Params::default();
        p.spm.observe_windows = 1;
        let s = run(vec![w0.clone(), w1.clone()], p.clone());
        // Page 0: node 1 has 3 of 4; page 1 stays (node 0 is its majority in window 0); page 2
        // has one sample on node 1. Decided at the end of window 0 only.
        assert_eq!(s.moves[0], vec![Move::migrate(0, 1), Move::migrate(2, 1)]);
        assert!(s.moves[1].is_empty());
        // With a threshold of 1 sample, page 2 stays where it is (not sent to node 0).
        p.spm.threshold = 1;
        let s = run(vec![w0.clone(), w1.clone()], p.clone());
        assert_eq!(s.moves[0], vec![Move::migrate(0, 1)]);
        // Observing both windows: page 1 goes to node 1 at the end of window 1.
        p.spm.observe_windows = 2;
        let s = run(vec![w0.clone(), w1.clone()], p);
        assert!(s.moves[0].is_empty());
        assert_eq!(s.moves[1], vec![Move::migrate(0, 1), Move::migrate(1, 1)]);
        // By default a quarter of the windows: one of two.
        let s = run(vec![w0, w1], Params::default());
        assert_eq!(s.moves[0].len(), 2);
    }
}
