//! Interleave: pages round-robin over the nodes with memory by virtual page number (what
//! `MPOL_INTERLEAVE` gives for a whole mapping), and the bandwidth-weighted variant of
//! `MPOL_WEIGHTED_INTERLEAVE`: node i takes w_i consecutive pages of every Σw, w_i its
//! controller bandwidth over the smallest one, rounded (1–255, the kernel's range).

use crate::layout::{Layout, Schedule, SpillOrder};
use crate::machine::Machine;

use super::Input;

pub(super) fn schedule(input: &Input, weighted: bool) -> Schedule {
    let nodes = input.machine.memory_nodes();
    let weights = if weighted {
        weighted_interleave_weights(input.machine)
    } else {
        vec![1; nodes.len()]
    };
    let cycle = expand(&nodes, &weights);
    let page_node = input
        .accesses
        .pages
        .iter()
        .map(|p| cycle[(p.number % cycle.len() as u64) as usize])
        .collect();
    let layout = Layout {
        thread_node: input.threads.to_vec(),
        page_node,
        replicated: Vec::new(),
    };
    let mut s = Schedule::fitted(layout, input.accesses, input.machine, SpillOrder::Coldest);
    if weighted {
        let ids: Vec<String> = nodes
            .iter()
            .zip(&weights)
            .map(|(&n, w)| format!("node {}: {w}", input.machine.nodes[n]))
            .collect();
        s.notes.push(format!("weights {}", ids.join(", ")));
    }
    s
}

/// The memory nodes (positions) of an interleave over all of them, in order.
pub fn interleave_nodes(machine: &Machine) -> Vec<usize> {
    machine.memory_nodes()
}

/// Weights of the memory nodes (in [`Machine::memory_nodes`] order) by controller bandwidth.
pub fn weighted_interleave_weights(machine: &Machine) -> Vec<u32> {
    let nodes = machine.memory_nodes();
    let bw: Vec<f64> = nodes
        .iter()
        .map(|&n| machine.controller_bytes_per_ns[n])
        .collect();
    let min = bw.iter().copied().fold(f64::INFINITY, f64::min);
    bw.iter()
        .map(|b| (b / min).round().clamp(1.0, 255.0) as u32)
        .collect()
}

/// One cycle of the interleave: node i repeated w_i times.
fn expand(nodes: &[usize], weights: &[u32]) -> Vec<usize> {
    nodes
        .iter()
        .zip(weights)
        .flat_map(|(&n, &w)| std::iter::repeat_n(n, w as usize))
        .collect()
}
