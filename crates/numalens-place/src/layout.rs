//! Where threads run and pages live: a static layout, and a schedule of page moves at window
//! ends for the policies that react while the program runs. Node positions index
//! [`Machine::nodes`].

use crate::accesses::Accesses;
use crate::machine::Machine;

/// Threads on nodes and pages on nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Node position per thread.
    pub thread_node: Vec<usize>,
    /// Node position per page (its home).
    pub page_node: Vec<usize>,
    /// Pages whose reads each node serves from a copy of its own (replication; writes go home).
    /// Empty: none.
    pub replicated: Vec<bool>,
}

impl Layout {
    pub fn is_replicated(&self, page: usize) -> bool {
        self.replicated.get(page).copied().unwrap_or(false)
    }
}

/// A page move decided at the end of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub page: u32,
    /// Node position (the home; for a replication, where writes keep going).
    pub to: usize,
    pub kind: MoveKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveKind {
    /// The page moves to `to`.
    Migrate,
    /// Every node with memory gets a read-only copy; a write collapses the copies back into the
    /// home (the simulator does that at the first window with a write to the page).
    Replicate,
}

impl Move {
    pub fn migrate(page: u32, to: usize) -> Move {
        Move {
            page,
            to,
            kind: MoveKind::Migrate,
        }
    }
}

/// A thread moved to another node at the end of a window (online kMAF's thread mapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadMove {
    pub thread: u32,
    /// Node position.
    pub to: usize,
}

/// What a policy gives: a layout at start, then moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub initial: Layout,
    /// `moves[w]` happen at the end of window `w` (empty for offline policies).
    pub moves: Vec<Vec<Move>>,
    /// `thread_moves[w]` happen at the end of window `w`, with `moves[w]`.
    pub thread_moves: Vec<Vec<ThreadMove>>,
    /// Pages that did not fit on the node the policy chose and went elsewhere.
    pub spilled_pages: u64,
    /// What the policy did, in words (gates taken, fallbacks, capacity).
    pub notes: Vec<String>,
}

impl Schedule {
    pub fn fixed(initial: Layout) -> Schedule {
        Schedule {
            initial,
            moves: Vec::new(),
            thread_moves: Vec::new(),
            spilled_pages: 0,
            notes: Vec::new(),
        }
    }

    /// `layout` with the capacity rule applied (pages over a node's memory spill in `order`).
    pub fn fitted(
        mut layout: Layout,
        accesses: &Accesses,
        machine: &Machine,
        order: SpillOrder,
    ) -> Schedule {
        let spilled = fit_capacity(&mut layout, accesses, machine, order);
        Schedule {
            spilled_pages: spilled,
            ..Schedule::fixed(layout)
        }
    }

    pub fn pages_moved(&self) -> u64 {
        self.moves.iter().map(|m| m.len() as u64).sum()
    }

    /// The placement after every move.
    pub fn final_layout(&self) -> Layout {
        let mut layout = self.initial.clone();
        layout.replicated.resize(layout.page_node.len(), false);
        for window in &self.moves {
            for m in window {
                layout.page_node[m.page as usize] = m.to;
                if m.kind == MoveKind::Replicate {
                    layout.replicated[m.page as usize] = true;
                }
            }
        }
        for m in self.thread_moves.iter().flatten() {
            layout.thread_node[m.thread as usize] = m.to;
        }
        layout
    }
}

/// How the default thread mapping fills nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadSpread {
    /// Each process's threads spread evenly over the nodes with CPUs in creation order
    /// (logical id i of T on node i·N/T): what an OpenMP `spread` binding gives.
    #[default]
    Even,
    /// N threads on each node before the next one (`close` binding), round-robin when there are
    /// more threads than N × nodes.
    PerNode(usize),
}

/// The default thread mapping, with a note when the machine has fewer CPUs than threads.
pub fn spread_threads(
    accesses: &Accesses,
    machine: &Machine,
    spread: ThreadSpread,
) -> (Vec<usize>, Vec<String>) {
    let mut nodes = machine.cpu_nodes();
    if nodes.is_empty() {
        nodes = (0..machine.node_count()).collect();
    }
    let mut out = vec![nodes[0]; accesses.threads.len()];
    let mut notes = Vec::new();
    for pid in accesses.pids() {
        let mut mine: Vec<usize> = (0..accesses.threads.len())
            .filter(|&t| accesses.threads[t].pid == pid)
            .collect();
        mine.sort_by_key(|&t| (accesses.threads[t].logical_id, accesses.threads[t].tid));
        let count = mine.len();
        for (rank, &t) in mine.iter().enumerate() {
            let slot = match spread {
                ThreadSpread::Even => rank * nodes.len() / count.max(1),
                ThreadSpread::PerNode(n) => (rank / n.max(1)) % nodes.len(),
            };
            out[t] = nodes[slot];
        }
    }
    let cpus: usize = nodes.iter().map(|&n| machine.cpus[n]).sum();
    if accesses.threads.len() > cpus {
        notes.push(format!(
            "{} threads on {} CPUs: threads share CPUs (each node's CPUs run its threads in turn)",
            accesses.threads.len(),
            cpus
        ));
    }
    (out, notes)
}

/// Which pages leave an over-full node first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillOrder {
    /// The last touched: what Linux does when a node fills under first touch.
    LatestTouched,
    /// The least accessed: what a policy that knows the counts would give up first.
    Coldest,
}

/// Moves pages off nodes whose memory they exceed, to the nearest memory node with room
/// (replicas count on every node). Returns the pages moved.
pub fn fit_capacity(
    layout: &mut Layout,
    accesses: &Accesses,
    machine: &Machine,
    order: SpillOrder,
) -> u64 {
    let capacity = machine.capacity_pages(accesses.page_size);
    let mut used = vec![0u64; machine.node_count()];
    let replicas: u64 = layout.replicated.iter().filter(|r| **r).count() as u64;
    for (p, &n) in layout.page_node.iter().enumerate() {
        if !layout.is_replicated(p) {
            used[n] += 1;
        }
    }
    for n in machine.memory_nodes() {
        used[n] += replicas;
    }
    let over: Vec<usize> = (0..used.len())
        .filter(|&n| capacity[n].is_some_and(|c| used[n] > c))
        .collect();
    let mut moved = 0;
    for n in over {
        let mut pages: Vec<usize> = (0..layout.page_node.len())
            .filter(|&p| layout.page_node[p] == n && !layout.is_replicated(p))
            .collect();
        match order {
            SpillOrder::LatestTouched => {
                pages.sort_by_key(|&p| std::cmp::Reverse(accesses.pages[p].first_ns))
            }
            SpillOrder::Coldest => pages.sort_by_key(|&p| accesses.pages[p].total()),
        }
        let fallback = machine.fallback_order(n);
        let mut pages = pages.into_iter();
        while capacity[n].is_some_and(|c| used[n] > c) {
            let Some(p) = pages.next() else { break };
            let Some(&to) = fallback
                .iter()
                .find(|&&m| m != n && capacity[m].is_none_or(|c| used[m] < c))
            else {
                break;
            };
            layout.page_node[p] = to;
            used[n] -= 1;
            used[to] += 1;
            moved += 1;
        }
    }
    moved
}
