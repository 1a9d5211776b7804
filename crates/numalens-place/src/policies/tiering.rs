//! Memory tiers (machines with memory-only nodes, such as a CXL expander): the fast tier is
//! the memory of the nodes with CPUs, the slow tier the memory-only nodes. Pages start where
//! first touch puts them (the fast tier until it is full, then the slow one); at the end of
//! every window each page's hotness decays and adds the window's accesses, the hottest
//! slow-tier pages are promoted to the fast node nearest their users while it has room, and
//! when it is full a promotion swaps with the coldest fast-tier page if it is `hysteresis`
//! times hotter (a demotion to the nearest slow node). At most `max_moves_per_window` moves a
//! window: migration bandwidth is finite.

use serde::{Deserialize, Serialize};

use crate::accesses::Cell;
use crate::layout::{Move, Schedule};
use crate::machine::Machine;

use super::Input;
use super::compact::PageNodes;
use super::online::{Step, StepInput, grow_lean};
use super::tier_users::Users;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TieringParams {
    /// Hotness kept from one window to the next.
    pub decay: f64,
    /// A slow-tier page displaces a fast-tier one only when this many times hotter.
    pub hysteresis: f64,
    /// Page moves per window at most.
    pub max_moves_per_window: usize,
}

impl Default for TieringParams {
    fn default() -> Self {
        TieringParams {
            decay: 0.5,
            hysteresis: 2.0,
            max_moves_per_window: 65_536,
        }
    }
}

pub(super) fn schedule(input: &Input) -> Schedule {
    let mut base = super::first_touch::schedule(input);
    if Online::new(input.machine, input.accesses.page_size).off() {
        base.notes.extend(Online::new(input.machine, 1).notes());
        return base;
    }
    super::online::run_batch(super::Policy::Tiering, input, base)
}

/// The tiers' state: where each page is (a byte), its decayed hotness (an `f32`), where its
/// users are ([`Users`], kept only when there is more than one fast node to choose from), and
/// the nodes' fill.
pub struct Online {
    node: PageNodes,
    hot: Vec<f32>,
    users: Option<Users>,
    used: Vec<u64>,
    capacity: Vec<Option<u64>>,
    fast: Vec<usize>,
    slow: Vec<usize>,
    promoted: u64,
    demoted: u64,
}

impl Online {
    pub(super) fn new(m: &Machine, page_size: u64) -> Online {
        let memory = m.memory_nodes();
        let fast: Vec<usize> = memory.iter().copied().filter(|&n| m.cpus[n] > 0).collect();
        let slow: Vec<usize> = memory.iter().copied().filter(|&n| m.cpus[n] == 0).collect();
        let choice = fast.len() > 1 && !slow.is_empty();
        Online {
            node: PageNodes::default(),
            hot: Vec::new(),
            users: choice.then(|| Users::new(m.node_count(), &m.cpu_nodes())),
            used: vec![0; m.node_count()],
            capacity: m.capacity_pages(page_size),
            slow,
            fast,
            promoted: 0,
            demoted: 0,
        }
    }

    /// Without both tiers there is nothing to do: first touch.
    fn off(&self) -> bool {
        self.slow.is_empty() || self.fast.is_empty()
    }

    pub(super) fn add_pages(&mut self, initial_nodes: &[usize]) {
        for &n in initial_nodes {
            self.used[n] += 1;
        }
        self.node.extend(initial_nodes);
    }

    pub(super) fn step(&mut self, input: &StepInput, cells: &[Cell]) -> Step {
        if self.off() {
            return Step::default();
        }
        self.age(input, cells);
        let (fast, slow) = (
            std::mem::take(&mut self.fast),
            std::mem::take(&mut self.slow),
        );
        let (moves, p, d) = self.rebalance(input, &fast, &slow);
        (self.fast, self.slow) = (fast, slow);
        self.promoted += p;
        self.demoted += d;
        Step {
            moves,
            thread_moves: Vec::new(),
        }
    }

    pub(super) fn notes(&self) -> Vec<String> {
        vec![if self.off() {
            "no memory-only node: tiering is first-touch".to_string()
        } else {
            format!("{} promotions, {} demotions", self.promoted, self.demoted)
        }]
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.node.memory_bytes()
            + self.hot.capacity() * size_of::<f32>()
            + self.users.as_ref().map_or(0, Users::memory_bytes)
    }

    fn age(&mut self, input: &StepInput, cells: &[Cell]) {
        let decay = input.params.tiering.decay as f32;
        self.hot.iter_mut().for_each(|h| *h *= decay);
        let pages = self.node.len();
        grow_lean(&mut self.hot, pages, 0.0);
        if let Some(users) = &mut self.users {
            users.grow_to(pages);
        }
        for c in cells {
            let hot = &mut self.hot[c.page as usize];
            if let Some(users) = &mut self.users {
                let node = input.threads[c.thread as usize];
                users.add(c.page, node, c.total() as f64, f64::from(*hot));
            }
            *hot += c.total() as f32;
        }
    }

    fn has_room(&self, n: usize) -> bool {
        self.capacity[n].is_none_or(|c| self.used[n] < c)
    }

    /// The fast node (position) with the lowest latency-weighted cost for `page`'s users.
    fn nearest(&self, input: &StepInput, page: u32, among: &[usize]) -> usize {
        let Some(users) = &self.users else {
            return among[0];
        };
        let mut row = vec![0.0; input.machine.node_count()];
        users.shares(page, &mut row);
        let cost = |m: usize| -> f64 {
            row.iter()
                .enumerate()
                .map(|(c, v)| v * input.machine.latency_ns[c][m])
                .sum()
        };
        among
            .iter()
            .copied()
            .min_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(a.cmp(&b)))
            .unwrap_or(among[0])
    }

    fn shift(&mut self, page: u32, to: usize, out: &mut Vec<Move>) {
        let from = self.node.get(page);
        self.used[from] -= 1;
        self.used[to] += 1;
        self.node.set(page, to);
        out.push(Move::migrate(page, to));
    }

    /// Promotions (with demotions to make room) for this window: (moves, promoted, demoted).
    fn rebalance(
        &mut self,
        input: &StepInput,
        fast: &[usize],
        slow: &[usize],
    ) -> (Vec<Move>, u64, u64) {
        let p = &input.params.tiering;
        // The hotness is read, never written, while pages move.
        let hot = std::mem::take(&mut self.hot);
        let heat = |page: &u32| f64::from(hot.get(*page as usize).copied().unwrap_or(0.0));
        let mut candidates: Vec<u32> = (0..hot.len() as u32)
            .filter(|pg| heat(pg) > 0.0 && slow.contains(&self.node.get(*pg)))
            .collect();
        candidates.sort_by(|a, b| heat(b).total_cmp(&heat(a)).then(a.cmp(b)));
        let mut residents: Vec<u32> = (0..self.node.len() as u32)
            .filter(|pg| fast.contains(&self.node.get(*pg)))
            .collect();
        residents.sort_by(|a, b| heat(a).total_cmp(&heat(b)).then(a.cmp(b)));
        let mut coldest = residents.into_iter();
        let mut out = Vec::new();
        let (mut promoted, mut demoted) = (0, 0);
        for page in candidates {
            if out.len() + 2 > p.max_moves_per_window {
                break;
            }
            let to = self.nearest(input, page, fast);
            if !self.has_room(to) {
                let Some(victim) = coldest.find(|v| self.node.get(*v) == to) else {
                    continue;
                };
                if heat(&page) < p.hysteresis * heat(&victim) {
                    break;
                }
                let down = slow
                    .iter()
                    .copied()
                    .filter(|&s| self.has_room(s))
                    .min_by(|&a, &b| {
                        input.machine.latency_ns[to][a]
                            .total_cmp(&input.machine.latency_ns[to][b])
                            .then(a.cmp(&b))
                    });
                let Some(down) = down else { break };
                self.shift(victim, down, &mut out);
                demoted += 1;
            }
            self.shift(page, to, &mut out);
            promoted += 1;
        }
        self.hot = hot;
        (out, promoted, demoted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Accesses, Cell, CountSource, Page, ThreadInfo, Windows};
    use crate::machine::Machine;
    use crate::policies::Params;
    use crate::sim::{Model, simulate};
    use numalens_topology::presets::preset;

    fn c(page: u32, reads: u64) -> Cell {
        Cell {
            page,
            thread: 0,
            reads,
            writes: 0,
            other: 0,
        }
    }

    /// 8 pages, the fast node holds 4; pages 0-3 touched first (fast), 4-7 spill to CXL.
    fn run(machine: &Machine, cells: Vec<Vec<Cell>>) -> (Accesses, Schedule) {
        let pages = (0..8)
            .map(|p| Page {
                pid: 1,
                number: p,
                first_toucher: Some(0),
                first_ns: p,
                ..Page::default()
            })
            .collect();
        let threads = vec![ThreadInfo {
            pid: 1,
            tid: 1,
            logical_id: 0,
            name: None,
        }];
        let windows = Windows {
            start_ns: 0,
            length_ns: 1_000_000,
            cells,
        };
        let a = Accesses::from_cells(
            4096,
            CountSource::Exact,
            threads,
            Vec::new(),
            pages,
            windows,
        );
        let params = Params::default();
        let s = schedule(&Input {
            accesses: &a,
            machine,
            threads: &[0],
            params: &params,
        });
        (a, s)
    }

    fn cxl() -> Machine {
        let mut m = Machine::from_topology(&preset("cxl-tier").unwrap());
        m.memory_bytes[0] = Some(4 * 4096);
        m
    }

    #[test]
    fn hot_slow_pages_are_promoted_and_cold_ones_demoted_within_capacity() {
        let m = cxl();
        // Window 0: touch everything a little; then pages 4-7 become hot, 0-3 go cold.
        let w0: Vec<Cell> = (0..8).map(|p| c(p, 10)).collect();
        let hot: Vec<Cell> = (4..8).map(|p| c(p, 10_000)).collect();
        let (a, s) = run(&m, vec![w0, hot.clone(), hot.clone(), hot]);
        assert_eq!(&s.initial.page_node[..4], &[0, 0, 0, 0]);
        assert_eq!(&s.initial.page_node[4..], &[1, 1, 1, 1]);
        let end = s.final_layout();
        assert_eq!(&end.page_node[4..], &[0, 0, 0, 0], "{:?}", s.moves);
        assert_eq!(&end.page_node[..4], &[1, 1, 1, 1]);
        // Capacity holds after every window.
        let mut node = s.initial.page_node.clone();
        for w in &s.moves {
            for mv in w {
                node[mv.page as usize] = mv.to;
            }
            assert!(node.iter().filter(|n| **n == 0).count() <= 4);
        }
        let params = Params::default();
        let ft = crate::policies::run(
            crate::policies::Policy::FirstTouch,
            &Input {
                accesses: &a,
                machine: &m,
                threads: &[0],
                params: &params,
            },
        )
        .unwrap();
        let model = Model::default();
        assert!(
            simulate(&a, &m, &s, &model).modelled_time_s
                < simulate(&a, &m, &ft, &model).modelled_time_s
        );
    }

    #[test]
    fn no_moves_without_a_memory_only_node() {
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        let (_, s) = run(&m, vec![(0..8).map(|p| c(p, 10)).collect()]);
        assert!(s.moves.is_empty());
        assert!(s.notes[0].contains("no memory-only node"));
    }
}
