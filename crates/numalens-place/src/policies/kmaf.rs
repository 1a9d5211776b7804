//! kMAF (Diener et al., TPDS'16): thread mapping over the communication matrix, then data
//! mapping page by page from its NUMA vector (accesses per node).
//!
//! Data mapping follows the paper's normative equations (Eqs. 3–8): exclusivity = max / sum;
//! above `min_locality` (80 %) the page goes to its main node if max > 2·max2 + 1 (Eq. 5, the
//! migration filter, so that each reversal needs about twice the evidence); below
//! `balance_factor / N` (1.5 / N) it is interleaved by page number if sum > N; otherwise it
//! stays. The paper's Table 2 illustrates Eq. 5 alone and disagrees with the full equations
//! (its step c has an exclusivity of exactly 80 %, which Eq. 4 rejects): [`locality_move`] is
//! Eq. 5 alone, as the table shows it; [`kmaf_decide`] is the normative rule the policy uses.
//!
//! Thread mapping is EagerMap-like greedy grouping: as many groups as nodes with CPUs, sized by
//! their CPUs; each group seeded with the lowest-numbered free thread, then grown with the free
//! thread that communicates most with the group; groups then go to nodes so that groups that
//! communicate sit close (by latency).

use serde::{Deserialize, Serialize};

use crate::accesses::Accesses;
use crate::layout::{Schedule, SpillOrder};
use crate::machine::Machine;

use super::Input;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KmafParams {
    /// Exclusivity above which the locality policy applies (kMAF Table 3: 80 %).
    pub min_locality: f64,
    /// Balance applies below this / N (kMAF Table 3: 1.5 / N).
    pub balance_factor: f64,
    /// Map threads by their communication.
    pub map_threads: bool,
    /// The prototype maps threads only once at least 4 are active.
    pub min_threads_to_map: usize,
    /// Online kMAF divides every NUMA vector by 2^this at each window's end, before the
    /// window's accesses count, as Linux's NUMA balancing halves its fault statistics at each
    /// scan: a page first used from one node and then from another moves within a few windows
    /// of the change instead of waiting until the new node's accesses outweigh all the old
    /// ones four to one. 0 keeps the counts of the whole run (the paper leaves ageing open).
    #[serde(default = "default_age_shift")]
    pub age_shift: u32,
}

fn default_age_shift() -> u32 {
    1
}

impl Default for KmafParams {
    fn default() -> Self {
        KmafParams {
            min_locality: 0.80,
            balance_factor: 1.5,
            map_threads: true,
            min_threads_to_map: 4,
            age_shift: default_age_shift(),
        }
    }
}

/// What kMAF does with one page (node positions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KmafDecision {
    None,
    Locality(usize),
    Balance(usize),
}

/// (position of the largest entry, largest, second largest, sum); ties to the lower position.
fn top_two(nv: &[u64]) -> (usize, u64, u64, u64) {
    let mut best = (0, 0u64);
    let mut second = 0u64;
    let mut sum = 0u64;
    for (i, &v) in nv.iter().enumerate() {
        sum = sum.saturating_add(v);
        if v > best.1 {
            second = best.1;
            best = (i, v);
        } else if v > second {
            second = v;
        }
    }
    (best.0, best.1, second, sum)
}

/// kMAF's locality rule (Eqs. 4 and 5): the largest share `max` of `sum` is exclusive enough
/// (> `min_locality`) and more than twice the second plus one. The report's dominant user of a
/// page is this rule applied to threads instead of nodes.
pub fn dominates(max: u64, max2: u64, sum: u64, min_locality: f64) -> bool {
    max as f64 > min_locality * sum as f64 && max > max2.saturating_mul(2).saturating_add(1)
}

/// Eq. 5 and 6 alone: the node the page should move to, if it should move.
pub fn locality_move(nv: &[u64], current: usize) -> Option<usize> {
    let (at, max, max2, _) = top_two(nv);
    (max > max2.saturating_mul(2).saturating_add(1) && at != current).then_some(at)
}

/// The normative decision (Eqs. 3–8) for a page with NUMA vector `nv` (by node position).
pub fn kmaf_decide(
    nv: &[u64],
    page_number: u64,
    memory_nodes: &[usize],
    params: &KmafParams,
) -> KmafDecision {
    let (at, max, max2, sum) = top_two(nv);
    let n = memory_nodes.len().max(1);
    if sum == 0 {
        return KmafDecision::None;
    }
    let exclusivity = max as f64 / sum as f64;
    if exclusivity > params.min_locality {
        if dominates(max, max2, sum, params.min_locality) && memory_nodes.contains(&at) {
            return KmafDecision::Locality(at);
        }
        return KmafDecision::None;
    }
    if exclusivity < params.balance_factor / n as f64 && sum > n as u64 {
        return KmafDecision::Balance(memory_nodes[(page_number % n as u64) as usize]);
    }
    KmafDecision::None
}

/// The thread mapping (node position per thread).
pub fn map_threads(
    accesses: &Accesses,
    machine: &Machine,
    default: &[usize],
    params: &KmafParams,
) -> Vec<usize> {
    let t = accesses.threads.len();
    if !params.map_threads || t < params.min_threads_to_map.max(2) {
        return default.to_vec();
    }
    map_by_communication(&communication(accesses), machine, default, params)
}

/// The thread mapping the communication matrix `comm` (threads × threads) calls for: greedy
/// groups sized by each node's CPUs, placed so that groups that talk most sit nearest.
pub(super) fn map_by_communication(
    comm: &[Vec<u64>],
    machine: &Machine,
    default: &[usize],
    params: &KmafParams,
) -> Vec<usize> {
    let Some((groups, nodes)) = communication_groups(comm, machine, params) else {
        return default.to_vec();
    };
    let placed = place_groups(comm, &groups, &nodes, machine);
    let mut out = default.to_vec();
    for (g, members) in groups.iter().enumerate() {
        for &m in members {
            out[m] = placed[g];
        }
    }
    out
}

/// kMAF's greedy groups of communicating threads, each with the node it was sized for (its
/// CPUs' share of the threads); None when there is nothing to map.
pub(super) fn communication_groups(
    comm: &[Vec<u64>],
    machine: &Machine,
    params: &KmafParams,
) -> Option<(Vec<Vec<usize>>, Vec<usize>)> {
    let t = comm.len();
    let nodes = machine.cpu_nodes();
    if !params.map_threads || t < params.min_threads_to_map.max(2) || nodes.len() < 2 {
        return None;
    }
    if comm.iter().all(|row| row.iter().all(|v| *v == 0)) {
        return None;
    }
    let sizes = group_sizes(t, &nodes, machine);
    // Nodes whose share rounds to no thread get no group: the search below is cubic in groups.
    let (nodes, sizes): (Vec<usize>, Vec<usize>) =
        nodes.into_iter().zip(sizes).filter(|(_, s)| *s > 0).unzip();
    Some((greedy_groups(comm, &sizes), nodes))
}

/// Threads sharing a page communicate by the smaller of their counts on it (kMAF/SPCD).
fn communication(a: &Accesses) -> Vec<Vec<u64>> {
    let t = a.threads.len();
    let mut comm = vec![vec![0u64; t]; t];
    for page in a.pages.iter().filter(|p| p.users.len() > 1) {
        let users: Vec<(u32, u64)> = page.users.iter().map(|u| (u.thread, u.total())).collect();
        add_sharing(&mut comm, &users);
    }
    comm
}

/// Adds the communication of the threads sharing one page, given as (thread, accesses): each
/// pair by the smaller of their counts.
pub(super) fn add_sharing(comm: &mut [Vec<u64>], users: &[(u32, u64)]) {
    for (i, &(x, cx)) in users.iter().enumerate() {
        for &(y, cy) in &users[i + 1..] {
            let (a, b) = (x as usize, y as usize);
            comm[a][b] = comm[a][b].saturating_add(cx.min(cy));
            comm[b][a] = comm[b][a].saturating_add(cx.min(cy));
        }
    }
}

/// Group sizes in proportion to each node's CPUs, summing to the thread count.
fn group_sizes(threads: usize, nodes: &[usize], machine: &Machine) -> Vec<usize> {
    let cpus: usize = nodes.iter().map(|&n| machine.cpus[n]).sum::<usize>().max(1);
    let mut sizes: Vec<usize> = nodes
        .iter()
        .map(|&n| threads * machine.cpus[n] / cpus)
        .collect();
    let mut left = threads - sizes.iter().sum::<usize>();
    let mut i = 0;
    let count = sizes.len();
    while left > 0 {
        sizes[i % count] += 1;
        left -= 1;
        i += 1;
    }
    sizes
}

fn greedy_groups(comm: &[Vec<u64>], sizes: &[usize]) -> Vec<Vec<usize>> {
    let mut free: Vec<bool> = vec![true; comm.len()];
    let mut groups = Vec::new();
    for &size in sizes {
        let mut group: Vec<usize> = Vec::new();
        while group.len() < size {
            let next = if group.is_empty() {
                free.iter().position(|f| *f)
            } else {
                (0..comm.len()).filter(|&c| free[c]).max_by_key(|&c| {
                    let with: u64 = group
                        .iter()
                        .fold(0u64, |s, &g| s.saturating_add(comm[c][g]));
                    (with, std::cmp::Reverse(c))
                })
            };
            let Some(next) = next else { break };
            free[next] = false;
            group.push(next);
        }
        groups.push(group);
    }
    groups
}

/// Node (position) of each group: the most communicating group first on the first node, then
/// each next group (the one talking most with those placed) on the free node nearest to them.
fn place_groups(
    comm: &[Vec<u64>],
    groups: &[Vec<usize>],
    nodes: &[usize],
    machine: &Machine,
) -> Vec<usize> {
    let g = groups.len();
    let between = |a: usize, b: usize| -> u64 {
        groups[a].iter().fold(0u64, |s, &x| {
            groups[b]
                .iter()
                .fold(s, |s, &y| s.saturating_add(comm[x][y]))
        })
    };
    let talk: Vec<Vec<u64>> = (0..g)
        .map(|a| {
            (0..g)
                .map(|b| if a == b { 0 } else { between(a, b) })
                .collect()
        })
        .collect();
    let mut placed: Vec<Option<usize>> = vec![None; g];
    let mut free_nodes: Vec<usize> = nodes.to_vec();
    // Groups keep the size of the node they were sized for: a group may only take a node with
    // at least as many CPUs as its own node had.
    let first = (0..g)
        .max_by_key(|&a| {
            (
                saturating_sum(talk[a].iter().copied()),
                std::cmp::Reverse(a),
            )
        })
        .unwrap_or(0);
    let mut order = vec![first];
    while order.len() < g {
        let next = (0..g)
            .filter(|a| !order.contains(a))
            .max_by_key(|&a| {
                let with = saturating_sum(order.iter().map(|&p| talk[a][p]));
                (with, std::cmp::Reverse(a))
            })
            .unwrap_or(0);
        order.push(next);
    }
    for &a in &order {
        let fits = |n: &usize| machine.cpus[*n] >= machine.cpus[nodes[a]];
        let cost = |n: usize| -> f64 {
            (0..g)
                .filter_map(|b| placed[b].map(|pn| talk[a][b] as f64 * machine.latency_ns[n][pn]))
                .sum()
        };
        let pick = free_nodes
            .iter()
            .copied()
            .filter(fits)
            .min_by(|&x, &y| cost(x).total_cmp(&cost(y)).then(x.cmp(&y)))
            .or_else(|| free_nodes.first().copied())
            .unwrap_or(nodes[a]);
        free_nodes.retain(|&n| n != pick);
        placed[a] = Some(pick);
    }
    placed.into_iter().map(|p| p.unwrap_or(nodes[0])).collect()
}

/// NUMA vector of page `p` under thread mapping `threads`.
fn numa_vector(a: &Accesses, machine: &Machine, threads: &[usize], p: usize) -> Vec<u64> {
    let mut nv = vec![0u64; machine.node_count()];
    for u in &a.pages[p].users {
        let n = &mut nv[threads[u.thread as usize]];
        *n = n.saturating_add(u.total());
    }
    nv
}

pub(super) fn schedule(input: &Input) -> Schedule {
    let threads = map_threads(
        input.accesses,
        input.machine,
        input.threads,
        &input.params.kmaf,
    );
    let mapped = Input {
        threads: &threads,
        ..*input
    };
    let mut layout = super::first_touch::layout(&mapped);
    let memory = input.machine.memory_nodes();
    for p in 0..input.accesses.pages.len() {
        let nv = numa_vector(input.accesses, input.machine, &threads, p);
        let number = input.accesses.pages[p].number;
        match kmaf_decide(&nv, number, &memory, &input.params.kmaf) {
            KmafDecision::Locality(n) | KmafDecision::Balance(n) => layout.page_node[p] = n,
            KmafDecision::None => {}
        }
    }
    let mut s = Schedule::fitted(layout, input.accesses, input.machine, SpillOrder::Coldest);
    if threads != input.threads {
        let moved = threads
            .iter()
            .zip(input.threads)
            .filter(|(a, b)| a != b)
            .count();
        s.notes.push(format!(
            "threads mapped by communication: {moved} moved from the default spread"
        ));
    }
    s
}

/// Communication sums saturate: counts from a damaged or hostile profile can be near `u64::MAX`.
fn saturating_sum(values: impl Iterator<Item = u64>) -> u64 {
    values.fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Cell, Page};
    use crate::fixture::{self, exact};
    use crate::layout::spread_threads;
    use crate::policies::Params;
    use numalens_topology::presets::preset;

    #[test]
    fn table_2_sequence_through_eq_5() {
        // Page first touched from node 0.
        assert_eq!(locality_move(&[1, 0], 0), None); // a) allocated on N0, no move
        assert_eq!(locality_move(&[1, 1], 0), None); // b) 1 > 3 is false
        assert_eq!(locality_move(&[1, 4], 0), Some(1)); // c) 4 > 3: migrate to N1
        assert_eq!(locality_move(&[10, 4], 1), Some(0)); // d) 10 > 9: back to N0
        assert_eq!(locality_move(&[9, 4], 1), None); // 9 > 9 is false
    }

    #[test]
    fn balance_thresholds_are_1_5_over_n() {
        let p = KmafParams::default();
        for (n, threshold) in [(2usize, 0.75), (4, 0.375), (8, 0.1875)] {
            let memory: Vec<usize> = (0..n).collect();
            // Exclusivity just below the threshold, sum > N.
            let mut nv = vec![0u64; n];
            let sum = 10_000u64;
            let max = (threshold * sum as f64) as u64 - 10;
            nv[0] = max;
            let rest = sum - max;
            nv[1..].fill(rest / (n as u64 - 1));
            assert_eq!(
                kmaf_decide(&nv, 13, &memory, &p),
                KmafDecision::Balance(13 % n),
                "N={n}"
            );
            // Just above (and below min_locality): none.
            let max = (threshold * sum as f64) as u64 + 10;
            nv[0] = max;
            nv[1..].fill((sum - max) / (n as u64 - 1));
            assert_eq!(
                kmaf_decide(&nv, 13, &memory, &p),
                KmafDecision::None,
                "N={n}"
            );
            // A uniform page with sum <= N: none.
            assert_eq!(
                kmaf_decide(&vec![1; n], 13, &memory, &p),
                KmafDecision::None
            );
        }
    }

    #[test]
    fn locality_gate_is_strictly_above_80_percent() {
        let p = KmafParams::default();
        let memory = [0, 1];
        assert_eq!(kmaf_decide(&[2, 8], 0, &memory, &p), KmafDecision::None);
        assert_eq!(
            kmaf_decide(&[2, 9], 0, &memory, &p),
            KmafDecision::Locality(1)
        );
        // Above 80 % but max not above 2·max2 + 1.
        assert_eq!(
            kmaf_decide(&[1, 5], 0, &memory, &p),
            KmafDecision::Locality(1)
        );
        let looser = KmafParams {
            min_locality: 0.7,
            ..p
        };
        assert_eq!(
            kmaf_decide(&[1, 3], 0, &memory, &looser),
            KmafDecision::None
        );
    }

    fn accesses(pages: Vec<Page>, cells: Vec<Cell>, n: u32) -> Accesses {
        let threads = fixture::threads(1, 10, n);
        exact(threads, Vec::new(), pages, 1_000_000_000, vec![cells])
    }

    fn cell(page: u32, thread: u32, reads: u64) -> Cell {
        fixture::cell(page, thread, reads, 0)
    }

    #[test]
    fn communicating_pairs_share_a_node() {
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        let mut pages = Vec::new();
        let mut cells = Vec::new();
        for (i, (x, y)) in [(0, 4), (1, 5), (2, 6), (3, 7)].into_iter().enumerate() {
            for k in 0..4u32 {
                let page = i as u32 * 4 + k;
                pages.push(Page {
                    pid: 1,
                    number: page as u64,
                    first_toucher: Some(x),
                    ..Page::default()
                });
                cells.push(cell(page, x, 1000));
                cells.push(cell(page, y, 1000));
            }
        }
        let a = accesses(pages, cells, 8);
        let (default, _) = spread_threads(&a, &m, Default::default());
        let mapped = map_threads(&a, &m, &default, &KmafParams::default());
        for (x, y) in [(0, 4), (1, 5), (2, 6), (3, 7)] {
            assert_eq!(mapped[x], mapped[y], "{mapped:?}");
        }
        assert_eq!(
            map_threads(&a, &m, &default, &KmafParams::default()),
            mapped
        );
    }

    #[test]
    fn pages_go_to_their_user_and_shared_ones_are_balanced() {
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        let mut pages = Vec::new();
        let mut cells = Vec::new();
        // Pages 0-3: touched by thread 0, used by thread t = page.
        for p in 0..4u32 {
            pages.push(Page {
                pid: 1,
                number: p as u64,
                first_toucher: Some(0),
                ..Page::default()
            });
            cells.push(cell(p, 0, 1));
            if p > 0 {
                cells.push(cell(p, p, 100));
            }
        }
        // Page 4 (number 6): every thread alike.
        pages.push(Page {
            pid: 1,
            number: 6,
            first_toucher: Some(0),
            ..Page::default()
        });
        for t in 0..4 {
            cells.push(cell(4, t, 100));
        }
        let a = accesses(pages, cells, 4);
        let params = Params {
            kmaf: KmafParams {
                map_threads: false,
                ..KmafParams::default()
            },
            ..Params::default()
        };
        let (threads, _) = spread_threads(&a, &m, params.spread);
        let input = Input {
            accesses: &a,
            machine: &m,
            threads: &threads,
            params: &params,
        };
        let s = schedule(&input);
        assert_eq!(&s.initial.page_node[1..4], &threads[1..4]);
        assert_eq!(s.initial.page_node[4], 6 % 4);
        let online = super::super::kmaf_online::schedule(&input);
        assert_eq!(online.moves[0].len(), 4);
        assert_eq!(online.final_layout().page_node, s.initial.page_node);
    }
}
