//! Marathe, Thakkar & Mueller's feedback-directed placement. Eq. 1 (uniform latency): a page
//! goes to the node that accessed it most. Eq. 2 (hop-sensitive): to the node k minimising
//! Σ_l rw_l · Lat[l → k], the latency from CPU node l to memory node k. Ties: lower cost, then
//! more local samples, then the lower node id (the paper leaves ties open). Pages without
//! accesses keep their first-touch node, as the paper leaves them to the program.

use crate::layout::{Schedule, SpillOrder};
use crate::machine::Machine;

use super::Input;

pub(super) fn schedule(input: &Input, hop: bool) -> Schedule {
    let mut layout = super::first_touch::layout(input);
    let n = input.machine.node_count();
    let mut per_node = vec![0u64; n];
    for (p, page) in input.accesses.pages.iter().enumerate() {
        per_node.iter_mut().for_each(|v| *v = 0);
        for u in &page.users {
            let c = input.threads[u.thread as usize];
            per_node[c] = per_node[c].saturating_add(u.total());
        }
        if per_node.iter().all(|v| *v == 0) {
            continue;
        }
        let node = if hop {
            marathe_hop_node(input.machine, &per_node)
        } else {
            marathe_uniform_node(input.machine, &per_node)
        };
        if let Some(node) = node {
            layout.page_node[p] = node;
        }
    }
    Schedule::fitted(layout, input.accesses, input.machine, SpillOrder::Coldest)
}

/// Eq. 1: the memory node (position) with the most accesses from its own CPUs; ties to the
/// lower id. `None` when no node with memory accessed the page.
pub fn marathe_uniform_node(machine: &Machine, accesses_by_node: &[u64]) -> Option<usize> {
    (0..machine.node_count())
        .filter(|&m| machine.memory_bytes[m] != Some(0) && accesses_by_node[m] > 0)
        .max_by_key(|&m| (accesses_by_node[m], std::cmp::Reverse(m)))
        .or_else(|| marathe_hop_node(machine, accesses_by_node))
}

/// Eq. 2: the memory node (position) with the lowest Σ_l accesses_l × latency[l][k]; ties by
/// cost, then local accesses, then lower id.
pub fn marathe_hop_node(machine: &Machine, accesses_by_node: &[u64]) -> Option<usize> {
    // Only the nodes that accessed the page count: a page has few users, a machine may have
    // many nodes.
    let users: Vec<(usize, f64)> = accesses_by_node
        .iter()
        .enumerate()
        .filter(|(_, a)| **a > 0)
        .map(|(l, &a)| (l, a as f64))
        .collect();
    let cost = |k: usize| -> f64 {
        users
            .iter()
            .map(|&(l, a)| a * machine.latency_ns[l][k])
            .sum()
    };
    let memory = (0..machine.node_count()).filter(|&m| machine.memory_bytes[m] != Some(0));
    memory.min_by(|&a, &b| {
        cost(a)
            .total_cmp(&cost(b))
            .then(accesses_by_node[b].cmp(&accesses_by_node[a]))
            .then(a.cmp(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_topology::presets::preset;

    fn opteron() -> Machine {
        Machine::from_topology(&preset("opteron-4n-marathe").unwrap())
    }

    /// The seed's worked examples on the measured Opteron matrix (Marathe et al., Table 2).
    #[test]
    fn eq2_worked_examples() {
        let m = opteron();
        for (rw, eq2, eq1) in [
            ([0, 10, 0, 0], 1, 1),
            ([1, 5, 0, 5], 0, 1),
            ([0, 5, 0, 5], 3, 1),
            ([100, 0, 100, 0], 2, 0),
            ([10, 0, 9, 0], 0, 0),
        ] {
            assert_eq!(marathe_hop_node(&m, &rw), Some(eq2), "Eq. 2 on {rw:?}");
            assert_eq!(marathe_uniform_node(&m, &rw), Some(eq1), "Eq. 1 on {rw:?}");
        }
    }

    #[test]
    fn eq2_reduces_to_eq1_when_remote_latency_is_uniform() {
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        for rw in [[3, 1, 0, 2], [0, 0, 7, 1], [5, 5, 1, 0]] {
            assert_eq!(
                marathe_hop_node(&m, &rw),
                marathe_uniform_node(&m, &rw),
                "{rw:?}"
            );
        }
    }
}
