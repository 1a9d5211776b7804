//! Linux's default: each page on the node of the thread that touched it first, threads spread
//! as the default mapping says. A node that fills gives its latest-touched pages to the nearest
//! node with room, as the kernel's fallback does.

use crate::layout::{Layout, Schedule, SpillOrder};

use super::Input;

pub(super) fn schedule(input: &Input) -> Schedule {
    Schedule::fitted(
        layout(input),
        input.accesses,
        input.machine,
        SpillOrder::LatestTouched,
    )
}

/// The first-touch layout before capacity: pages without a known toucher go to the first
/// memory node.
pub(crate) fn layout(input: &Input) -> Layout {
    let memory = input.machine.memory_nodes();
    let home = |thread_node: usize| {
        if memory.contains(&thread_node) {
            thread_node
        } else {
            input.machine.fallback_order(thread_node)[0]
        }
    };
    let page_node = input
        .accesses
        .pages
        .iter()
        .map(|p| match p.first_toucher {
            Some(t) => home(input.threads[t as usize]),
            None => memory[0],
        })
        .collect();
    Layout {
        thread_node: input.threads.to_vec(),
        page_node,
        replicated: Vec::new(),
    }
}
