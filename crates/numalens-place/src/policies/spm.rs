//! SPM (Ortiz-Yepes, TUM 2015): observe for a while, then move every sampled page to the node
//! that accessed it most, once. The observation is the run's first `observe_windows` windows
//! (SPM observed 45 s); a page goes to its majority node when that node has more than
//! `threshold` samples (SPM_SIG_THRESH). SPM sent a page with no node above the threshold to
//! node 0 (its search started at 0); such pages stay where they are here. A recording is often
//! much shorter than the runs SPM observed, so by default the observation is the first quarter
//! of the run's windows.

use serde::{Deserialize, Serialize};

use crate::layout::{Move, Schedule};

use super::Input;

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
    let a = input.accesses;
    let windows = a.windows.cells.len();
    let mut moves = vec![Vec::new(); windows];
    if windows == 0 {
        return base;
    }
    let observe = match input.params.spm.observe_windows {
        0 => windows.div_ceil(4),
        n => n,
    };
    let last = observe.clamp(1, windows) - 1;
    let n = input.machine.node_count();
    let memory = input.machine.memory_nodes();
    let period = a.sample_period.max(1);
    let mut seen: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for cells in &a.windows.cells[..=last] {
        for c in cells {
            let row = seen.entry(c.page).or_insert_with(|| vec![0; n]);
            let slot = &mut row[input.threads[c.thread as usize]];
            *slot = slot.saturating_add(c.total().div_ceil(period));
        }
    }
    for (page, row) in seen {
        let best = memory
            .iter()
            .copied()
            .max_by_key(|&m| (row[m], std::cmp::Reverse(m)));
        let Some(dest) = best.filter(|&m| row[m] > input.params.spm.threshold) else {
            continue;
        };
        if base.initial.page_node[page as usize] != dest {
            moves[last].push(Move::migrate(page, dest));
        }
    }
    let mut s = Schedule { moves, ..base };
    s.notes.push(format!(
        "one migration round after {} window(s) of observation",
        last + 1
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Accesses, Cell, CountSource, Page, ThreadInfo, Windows};
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
        let pages = (0..3)
            .map(|p| Page {
                pid: 1,
                number: p,
                first_toucher: Some(0),
                ..Page::default()
            })
            .collect();
        let threads = (0..2)
            .map(|t| ThreadInfo {
                pid: 1,
                tid: t,
                logical_id: t,
                name: None,
            })
            .collect();
        let windows = Windows {
            start_ns: 0,
            length_ns: 1000,
            cells,
        };
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
