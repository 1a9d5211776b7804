//! Scenario `run-plan`: `record_probe first-touch` run under an interleave plan made from an
//! earlier run of itself. Natively each thread's block lands on its own node; under the plan
//! the runtime `mbind`s both arrays with `MPOL_INTERLEAVE` (the heap one at allocation, the
//! static one before `main`), so their pages must be spread page by page over every node.

use super::pages::{PageAnswer, exit_nodes};
use super::probe::{Array, ProbeOutput};
use super::recorded::Recorded;
use super::{Check, profile_complete};

/// Every check of the scenario, in a stable order.
pub fn checks(r: &Recorded, p: &ProbeOutput, nodes: usize) -> Vec<Check> {
    let mut out = vec![profile_complete(r)];
    for array in [Array::Heap, Array::Static] {
        let blocks: Vec<_> = p.blocks.iter().filter(|b| b.array == array).collect();
        let (Some(first), Some(last)) = (
            blocks.iter().map(|b| b.start).min(),
            blocks.iter().map(|b| b.end()).max(),
        ) else {
            out.push(Check::new(
                format!("{array}-interleaved"),
                false,
                "the probe printed no such blocks",
            ));
            continue;
        };
        let answers = exit_nodes(&r.page_runs, first, last - first, r.page_size);
        out.push(interleaved(&array.to_string(), &answers, nodes));
    }
    out
}

/// Every node holds about its share of the pages, and neighbouring pages are on different
/// nodes: what `MPOL_INTERLEAVE` does, and what first touch by blocks never does.
fn interleaved(array: &str, answers: &[PageAnswer], nodes: usize) -> Check {
    let on: Vec<u32> = answers
        .iter()
        .filter_map(|a| match a {
            PageAnswer::Node(n) => Some(*n),
            _ => None,
        })
        .collect();
    let mut per_node = vec![0usize; nodes];
    for n in &on {
        if let Some(c) = per_node.get_mut(*n as usize) {
            *c += 1;
        }
    }
    let changes = on.windows(2).filter(|w| w[0] != w[1]).count();
    let share_ok = !on.is_empty()
        && per_node
            .iter()
            .all(|c| (*c as f64) > 0.8 * on.len() as f64 / nodes as f64);
    let alternating = on.len() > 1 && changes as f64 >= 0.9 * (on.len() - 1) as f64;
    Check::new(
        format!("{array}-interleaved"),
        share_ok && alternating && on.len() * 10 >= answers.len() * 9,
        format!(
            "{} of {} pages on a node, per node {per_node:?}, {changes} node changes between \
             neighbours",
            on.len(),
            answers.len()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_passes_and_blocks_do_not() {
        let rr: Vec<PageAnswer> = (0..64).map(|i| PageAnswer::Node(i % 4)).collect();
        assert!(interleaved("heap", &rr, 4).ok);
        let blocks: Vec<PageAnswer> = (0..64).map(|i| PageAnswer::Node(i / 16)).collect();
        assert!(!interleaved("heap", &blocks, 4).ok);
        let missing: Vec<PageAnswer> = (0..64).map(|_| PageAnswer::NotQueried).collect();
        assert!(!interleaved("heap", &missing, 4).ok);
    }
}
