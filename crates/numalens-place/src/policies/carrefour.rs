//! Carrefour (Dashti et al., ASPLOS'13; Lepers thesis ch. 7), one round per window.
//!
//! Global gates from the window's accesses under the current placement: on only when memory
//! accesses per µs reach `maptu_min` (50 on machine A, scaled by this machine's total
//! controller bandwidth); replication when ≤ 25 % of memory is in use and reads are ≥ 90 %;
//! interleaving when controller imbalance > 35 % and the local access ratio < 100 %; migration
//! when the local access ratio < 80 %. Then per page seen in the window with ≥ 2 samples (the
//! 30,000 hottest at most): several nodes and no write → replicate; several nodes → move to the
//! least loaded node if less loaded than its own; one node → migrate there. A page that comes
//! back to a node it left is frozen (ping-pong guard), and a replica later written is never
//! replicated again. Interleaving's random choice in the original is made deterministic: the
//! least loaded node this round.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::accesses::Cell;
use crate::layout::{Move, MoveKind, Schedule};
use crate::machine::Machine;

use super::Input;
use super::compact::PageNodes;
use super::online::{NODES_IN_A_WORD, Step, StepInput, compact_node, node_bit, reserve_lean};

/// Machine A's total controller bandwidth (4 × 7.58 GB/s), the machine `maptu_min` was set on.
const MACHINE_A_GBPS: f64 = 4.0 * 7.58;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CarrefourParams {
    /// DRAM accesses per µs below which Carrefour stays off (carrefour-runtime `MAPTU_MIN`).
    pub maptu_min: f64,
    /// Scale `maptu_min` by this machine's controller bandwidth over machine A's: the threshold
    /// was a statement about machine A's controllers.
    pub scale_maptu_to_machine: bool,
    /// Controller imbalance above which interleaving is on (`MIN_IMBALANCE` 35 %).
    pub min_imbalance: f64,
    /// Local access ratio below which migration is on (`MAX_LOCALITY_MIGRATION` 80 %).
    pub max_locality_for_migration: f64,
    /// Read ratio at or above which replication is on (`MRR_MIN` 90 %).
    pub min_read_ratio: f64,
    /// Share of memory in use at or below which replication is on (`MEMORY_USAGE_MAX` 25 %).
    pub max_memory_use_for_replication: f64,
    /// Samples a page needs in a round (thesis: two samples proved enough).
    pub min_samples: u64,
    /// Pages tracked per round (thesis Table 7.3: 30K).
    pub max_pages_per_round: usize,
    /// Freeze a page that migrates back to a node it left.
    pub ping_pong_guard: bool,
}

impl Default for CarrefourParams {
    fn default() -> Self {
        CarrefourParams {
            maptu_min: 50.0,
            scale_maptu_to_machine: true,
            min_imbalance: 0.35,
            max_locality_for_migration: 0.80,
            min_read_ratio: 0.90,
            max_memory_use_for_replication: 0.25,
            min_samples: 2,
            max_pages_per_round: 30_000,
            ping_pong_guard: true,
        }
    }
}

/// Which techniques a round enables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Gates {
    pub enabled: bool,
    pub replicate: bool,
    pub interleave: bool,
    pub migrate: bool,
}

/// The window's global metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Metrics {
    pub maptu: f64,
    pub lar: f64,
    pub imbalance: f64,
    pub read_ratio: f64,
    pub memory_use: f64,
}

pub(crate) fn gates(m: &Metrics, p: &CarrefourParams, machine: &Machine) -> Gates {
    let threshold = if p.scale_maptu_to_machine {
        let gbps: f64 = machine
            .memory_nodes()
            .iter()
            .map(|&n| machine.controller_bytes_per_ns[n])
            .sum();
        p.maptu_min * gbps / MACHINE_A_GBPS
    } else {
        p.maptu_min
    };
    if m.maptu < threshold {
        return Gates::default();
    }
    let g = Gates {
        enabled: true,
        replicate: m.memory_use <= p.max_memory_use_for_replication
            && m.read_ratio >= p.min_read_ratio,
        interleave: m.imbalance > p.min_imbalance && m.lar < 1.0,
        migrate: m.lar < p.max_locality_for_migration,
    };
    Gates {
        enabled: g.replicate || g.interleave || g.migrate,
        ..g
    }
}

/// Per page of the round: accesses per node (position), writes.
struct PageRound {
    nodes: Vec<u64>,
    writes: u64,
    total: u64,
}

/// Carrefour's state between rounds: where each page is (a byte) and which nodes it left (the
/// ping-pong guard, a word), 5 bytes a page; the sets hold the few pages they name.
#[derive(Default)]
pub struct Online {
    current: PageNodes,
    /// Nodes each page left, one bit a node below `NODES_IN_A_WORD`; on larger machines the
    /// farther nodes a page left are kept in `left_far`.
    left: Vec<u32>,
    left_far: HashMap<u32, Vec<u16>>,
    frozen: HashSet<u32>,
    replicated: HashSet<u32>,
    never_replicate: HashSet<u32>,
    windows: usize,
    /// Windows with the policy on, replication, interleaving, migration.
    counts: [usize; 4],
}

pub(super) fn schedule(input: &Input) -> Schedule {
    let base = super::first_touch::schedule(input);
    super::online::run_batch(super::Policy::Carrefour, input, base)
}

impl Online {
    pub(super) fn add_pages(&mut self, initial_nodes: &[usize]) {
        reserve_lean(&mut self.left, initial_nodes.len());
        self.current.extend(initial_nodes);
        self.left.resize(self.current.len(), 0);
    }

    pub(super) fn step(&mut self, input: &StepInput, cells: &[Cell]) -> Step {
        self.windows += 1;
        let metrics = metrics(input, cells, &self.current);
        let g = gates(&metrics, &input.params.carrefour, input.machine);
        for (i, on) in [g.enabled, g.replicate, g.interleave, g.migrate]
            .iter()
            .enumerate()
        {
            self.counts[i] += usize::from(*on);
        }
        Step {
            moves: if g.enabled {
                self.round(input, cells, &g)
            } else {
                Vec::new()
            },
            thread_moves: Vec::new(),
        }
    }

    pub(super) fn notes(&self) -> Vec<String> {
        let c = &self.counts;
        vec![format!(
            "on in {} of {} windows (replication {}, interleaving {}, migration {}); {} pages frozen by the ping-pong guard",
            c[0],
            self.windows,
            c[1],
            c[2],
            c[3],
            self.frozen.len()
        )]
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let set = |s: &HashSet<u32>| s.capacity() * (size_of::<u32>() + 1);
        self.current.memory_bytes()
            + self.left.capacity() * size_of::<u32>()
            + set(&self.frozen)
            + set(&self.replicated)
            + set(&self.never_replicate)
            + self
                .left_far
                .values()
                .map(|v| v.capacity() * 2 + size_of::<(u32, Vec<u16>)>())
                .sum::<usize>()
    }

    fn home(&self, page: u32) -> usize {
        self.current.get(page)
    }

    fn has_left(&self, page: u32, node: usize) -> bool {
        if node < NODES_IN_A_WORD {
            self.left[page as usize] & node_bit(node) != 0
        } else {
            self.left_far
                .get(&page)
                .is_some_and(|far| far.contains(&compact_node(node)))
        }
    }

    fn note_left(&mut self, page: u32, node: usize) {
        if node < NODES_IN_A_WORD {
            self.left[page as usize] |= node_bit(node);
        } else {
            let far = self.left_far.entry(page).or_default();
            if !far.contains(&compact_node(node)) {
                far.push(compact_node(node));
            }
        }
    }
}

fn metrics(input: &StepInput, cells: &[Cell], current: &PageNodes) -> Metrics {
    let machine = input.machine;
    let mut load = vec![0f64; machine.node_count()];
    let (mut local, mut all, mut reads, mut writes) = (0f64, 0f64, 0f64, 0f64);
    for c in cells {
        let n = c.total() as f64;
        let home = current.get(c.page);
        load[home] += n;
        all += n;
        if input.threads[c.thread as usize] == home {
            local += n;
        }
        reads += c.reads as f64;
        writes += c.writes as f64;
    }
    let memory: Vec<f64> = machine.memory_nodes().iter().map(|&m| load[m]).collect();
    let total_memory: u64 = machine.memory_bytes.iter().map(|m| m.unwrap_or(0)).sum();
    let used = input.pages as f64 * input.page_size as f64;
    Metrics {
        maptu: all / (input.window_ns.max(1) as f64 / 1000.0),
        lar: if all > 0.0 { local / all } else { 1.0 },
        imbalance: crate::sim::relative_stddev(&memory).unwrap_or(0.0),
        read_ratio: if reads + writes > 0.0 {
            reads / (reads + writes)
        } else {
            0.0
        },
        memory_use: if total_memory > 0 {
            used / total_memory as f64
        } else {
            0.0
        },
    }
}

impl Online {
    /// One round of per-page decisions.
    fn round(&mut self, input: &StepInput, cells: &[Cell], g: &Gates) -> Vec<Move> {
        let machine = input.machine;
        let p = &input.params.carrefour;
        let mut pages: HashMap<u32, PageRound> = HashMap::new();
        for c in cells {
            let r = pages.entry(c.page).or_insert_with(|| PageRound {
                nodes: vec![0; machine.node_count()],
                writes: 0,
                total: 0,
            });
            let n = &mut r.nodes[input.threads[c.thread as usize]];
            *n = n.saturating_add(c.total());
            r.writes = r.writes.saturating_add(c.writes);
            r.total = r.total.saturating_add(c.total());
        }
        let mut hot: Vec<(u32, PageRound)> = pages.into_iter().collect();
        hot.sort_by_key(|(page, r)| (std::cmp::Reverse(r.total), *page));
        hot.truncate(p.max_pages_per_round);
        let mut load = vec![0u64; machine.node_count()];
        for (page, r) in &hot {
            let l = &mut load[self.home(*page)];
            *l = l.saturating_add(r.total);
        }
        let period = input.sample_period.max(1);
        let memory = machine.memory_nodes();
        let mut out = Vec::new();
        for (page, r) in hot {
            if r.writes > 0 && self.replicated.remove(&page) {
                self.never_replicate.insert(page);
            }
            if r.total.div_ceil(period) < p.min_samples || self.frozen.contains(&page) {
                continue;
            }
            let seen: Vec<usize> = (0..r.nodes.len()).filter(|&n| r.nodes[n] > 0).collect();
            let here = self.home(page);
            if g.replicate
                && seen.len() > 1
                && r.writes == 0
                && !self.never_replicate.contains(&page)
            {
                if self.replicated.insert(page) {
                    out.push(Move {
                        page,
                        to: here,
                        kind: MoveKind::Replicate,
                    });
                }
                continue;
            }
            let to = if g.interleave && seen.len() > 1 {
                let least = memory.iter().copied().min_by_key(|&n| (load[n], n));
                match least {
                    Some(n) if load[n] < load[here] => n,
                    _ => continue,
                }
            } else if g.migrate && seen.len() == 1 && memory.contains(&seen[0]) {
                seen[0]
            } else {
                continue;
            };
            if to == here {
                continue;
            }
            // Counts from a damaged profile can reach u64's end: the loads saturate.
            load[here] = load[here].saturating_sub(r.total);
            load[to] = load[to].saturating_add(r.total);
            if p.ping_pong_guard && self.has_left(page, to) {
                self.frozen.insert(page);
            }
            self.note_left(page, here);
            self.current.set(page, to);
            self.replicated.remove(&page);
            out.push(Move::migrate(page, to));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::Accesses;
    use crate::fixture::{self, cell as c, exact, pages_placed_by};
    use crate::policies::Params;
    use crate::sim::{Model, simulate};
    use numalens_topology::presets::preset;

    fn machine() -> Machine {
        Machine::from_topology(&preset("machine-a").unwrap())
    }

    fn metrics(maptu: f64, lar: f64, imbalance: f64, rr: f64, use_: f64) -> Metrics {
        Metrics {
            maptu,
            lar,
            imbalance,
            read_ratio: rr,
            memory_use: use_,
        }
    }

    #[test]
    fn the_nodes_a_page_left_are_exact_on_machines_of_any_size() {
        let mut st = Online::default();
        st.add_pages(&[0, 0]);
        for node in [3, 31, 32, 40, 63, 64, 200] {
            assert!(!st.has_left(0, node));
            st.note_left(0, node);
            assert!(st.has_left(0, node), "node {node}");
        }
        for node in [0, 30, 33, 41, 65, 199] {
            assert!(!st.has_left(0, node), "node {node}");
        }
        assert!(!st.has_left(1, 40), "another page");
    }

    #[test]
    fn each_gate_switches_at_its_threshold() {
        let m = machine();
        let p = CarrefourParams::default();
        // machine-a is the reference machine: the threshold is 50/µs.
        assert!(!gates(&metrics(49.9, 0.5, 0.5, 0.5, 0.5), &p, &m).enabled);
        assert!(gates(&metrics(50.1, 0.5, 0.5, 0.5, 0.5), &p, &m).enabled);
        let on = |lar, imb, rr, mem| gates(&metrics(100.0, lar, imb, rr, mem), &p, &m);
        assert!(!on(0.9, 0.34, 0.5, 0.5).interleave);
        assert!(on(0.9, 0.36, 0.5, 0.5).interleave);
        assert!(!on(1.0, 0.36, 0.5, 0.5).interleave);
        assert!(on(0.79, 0.0, 0.5, 0.5).migrate);
        assert!(!on(0.81, 0.0, 0.5, 0.5).migrate);
        assert!(!on(0.9, 0.0, 0.89, 0.2).replicate);
        assert!(on(0.9, 0.0, 0.91, 0.24).replicate);
        assert!(!on(0.9, 0.0, 0.91, 0.26).replicate);
        // Nothing on: Carrefour off for the round.
        assert!(!on(0.9, 0.0, 0.5, 0.5).enabled);
        // Twice machine A's bandwidth: twice the threshold.
        let mut big = m.clone();
        big.controller_bytes_per_ns
            .iter_mut()
            .for_each(|b| *b *= 2.0);
        assert!(!gates(&metrics(99.0, 0.5, 0.5, 0.5, 0.5), &p, &big).enabled);
    }

    /// 4 threads on machine-a's 4 nodes; pages touched by thread 0 (node 0).
    fn run(cells: Vec<Vec<Cell>>, pages: u32, length_ns: u64) -> (Accesses, Schedule) {
        let list = pages_placed_by(pages, 0);
        let a = exact(
            fixture::threads(1, 10, 4),
            Vec::new(),
            list,
            length_ns,
            cells,
        );
        let m = machine();
        let params = Params::default();
        let input = Input {
            accesses: &a,
            machine: &m,
            threads: &[0, 1, 2, 3],
            params: &params,
        };
        let s = schedule(&input);
        (a, s)
    }

    #[test]
    fn per_page_decisions() {
        // 1 ms windows, ~10^6 accesses: well above 50/µs. Page 0: only thread 1 → migrate to 1.
        // Page 1: threads 1 and 2 read it → replicate (reads dominate: 0 writes anywhere but
        // page 2, whose writes keep the read ratio above 90 %). Page 2: written by 2 and 3.
        // Page 3: a single access → left alone.
        let w = vec![
            c(0, 1, 400_000, 0),
            c(1, 1, 300_000, 0),
            c(1, 2, 300_000, 0),
            c(2, 2, 20_000, 10_000),
            c(2, 3, 20_000, 10_000),
            c(3, 3, 1, 0),
        ];
        let (_, s) = run(vec![w], 4, 1_000_000);
        let moves = &s.moves[0];
        assert!(moves.contains(&Move::migrate(0, 1)), "{moves:?}");
        assert!(
            moves.contains(&Move {
                page: 1,
                to: 0,
                kind: MoveKind::Replicate
            }),
            "{moves:?}"
        );
        assert!(!moves.iter().any(|m| m.page == 3), "{moves:?}");
    }

    #[test]
    fn shared_written_pages_go_to_the_less_loaded_node() {
        // Replication off (many writes): interleaving moves page 1 off the loaded node 0.
        let w = vec![
            c(0, 0, 500_000, 500_000),
            c(1, 1, 200_000, 200_000),
            c(1, 2, 200_000, 200_000),
        ];
        let (_, s) = run(vec![w], 2, 1_000_000);
        let m: Vec<&Move> = s.moves[0].iter().filter(|m| m.page == 1).collect();
        assert_eq!(m.len(), 1, "{:?}", s.moves);
        assert_ne!(m[0].to, 0);
    }

    #[test]
    fn ping_pong_freezes_a_page() {
        let win = |t: u32| vec![c(0, t, 1_000_000, 0)];
        let (_, s) = run(vec![win(1), win(2), win(1), win(2), win(1)], 1, 1_000_000);
        let total: usize = s.moves.iter().map(Vec::len).sum();
        // 0 → 1, 1 → 2, 2 → 1 (back: frozen), then nothing.
        assert_eq!(total, 3, "{:?}", s.moves);
    }

    #[test]
    fn too_few_accesses_keep_carrefour_off() {
        let (_, s) = run(vec![vec![c(0, 1, 1000, 0)]], 1, 1_000_000_000);
        assert!(s.moves.iter().all(Vec::is_empty));
        assert!(s.notes[0].starts_with("on in 0 of 1"), "{:?}", s.notes);
    }

    #[test]
    fn migrating_remote_pages_raises_locality() {
        let w: Vec<Cell> = (0..64).map(|p| c(p, 1 + p % 3, 100_000, 0)).collect();
        let (a, s) = run(vec![w.clone(), w], 64, 1_000_000);
        let m = machine();
        let ft = crate::policies::run(
            crate::policies::Policy::FirstTouch,
            &Input {
                accesses: &a,
                machine: &m,
                threads: &[0, 1, 2, 3],
                params: &Params::default(),
            },
        )
        .unwrap();
        let before = simulate(&a, &m, &ft, &Model::default());
        let after = simulate(&a, &m, &s, &Model::default());
        assert!(after.local_access_ratio > before.local_access_ratio);
        assert!(after.modelled_time_s < before.modelled_time_s);
    }
}
