//! What a finding's fix would give: the first-touch placement with the fix applied to one
//! object (or the threads mapped anew), simulated against first touch. The report quotes it in
//! every finding whose fix is a placement ("interleaving `hist` is predicted to cut modelled
//! memory time by 23 % on machine-b").

use serde::{Deserialize, Serialize};

use crate::accesses::Accesses;
use crate::layout::{Layout, Move, MoveKind, Schedule, spread_threads};
use crate::machine::Machine;
use crate::policies::{self, Input, Params, Policy};
use crate::sim::simulate;

/// A fix the simulator can model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    /// Each page of the object on the node that uses it most (a parallel first touch, or an
    /// allocation in the using thread).
    Local,
    /// The object's pages interleaved over the nodes with memory.
    Interleave,
    /// A copy of the object per node.
    Replicate,
    /// Threads mapped by their communication (kMAF's mapping).
    CoLocateThreads,
    /// The object's pages moved, at the end of every window, to the node that uses them most in
    /// the next one (the program migrating at its phase boundaries).
    MigrateBetweenPhases,
}

impl Fix {
    /// The fix of a finding's advice (docs/FINDINGS.md), when it is a placement.
    pub fn of_advice(advice: &str) -> Option<Fix> {
        Some(match advice {
            "parallel-first-touch" | "allocate-in-thread" => Fix::Local,
            "interleave" | "cyclic-split-schedule" => Fix::Interleave,
            "replicate" => Fix::Replicate,
            "co-locate-threads" => Fix::CoLocateThreads,
            "migrate-between-phases" => Fix::MigrateBetweenPhases,
            _ => return None,
        })
    }

    /// How the report says it was modelled.
    pub fn modelled_as(self) -> &'static str {
        match self {
            Fix::Local => "placing each of its pages on the node that uses it most",
            Fix::Interleave => "interleaving its pages over every node",
            Fix::Replicate => "giving every node a copy of it once it is no longer written",
            Fix::CoLocateThreads => "mapping threads by their communication",
            Fix::MigrateBetweenPhases => "moving its pages to their next users at every window",
        }
    }
}

/// The fix's predicted effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub machine: String,
    /// How the fix was modelled.
    pub modelled_as: String,
    pub first_touch_s: f64,
    pub fixed_s: f64,
    /// Relative change of the modelled memory time (negative: faster).
    pub change: f64,
}

/// Predicts `fix` applied to the objects with ids `objects` (all pages for thread mapping).
pub fn predict(
    accesses: &Accesses,
    machine: &Machine,
    params: &Params,
    fix: Fix,
    objects: &[u64],
) -> Option<Prediction> {
    if !accesses.has_counts() || machine.memory_nodes().is_empty() {
        return None;
    }
    let (threads, _) = spread_threads(accesses, machine, params.spread);
    let input = Input {
        accesses,
        machine,
        threads: &threads,
        params,
    };
    let base = policies::run(Policy::FirstTouch, &input).ok()?;
    let mine: Vec<usize> = (0..accesses.pages.len())
        .filter(|&p| {
            accesses.pages[p]
                .object
                .is_some_and(|o| objects.contains(&accesses.objects[o as usize].id))
        })
        .collect();
    if mine.is_empty() && fix != Fix::CoLocateThreads {
        return None;
    }
    let fixed = apply(&input, &base.initial, fix, &mine);
    let first_touch_s = simulate(accesses, machine, &base, &params.model).modelled_time_s;
    let fixed_s = simulate(accesses, machine, &fixed, &params.model).modelled_time_s;
    (first_touch_s > 0.0).then(|| Prediction {
        machine: machine.name.clone(),
        modelled_as: fix.modelled_as().to_string(),
        first_touch_s,
        fixed_s,
        change: fixed_s / first_touch_s - 1.0,
    })
}

fn apply(input: &Input, base: &Layout, fix: Fix, pages: &[usize]) -> Schedule {
    let a = input.accesses;
    let m = input.machine;
    let memory = m.memory_nodes();
    let mut layout = base.clone();
    match fix {
        Fix::Local => {
            for &p in pages {
                if let Some(n) = main_node(input, &layout.thread_node, p) {
                    layout.page_node[p] = n;
                }
            }
        }
        Fix::Interleave => {
            for &p in pages {
                layout.page_node[p] = memory[(a.pages[p].number % memory.len() as u64) as usize];
            }
        }
        Fix::Replicate => return replicate_after_last_write(input, layout, pages),
        Fix::CoLocateThreads => {
            let threads = policies::map_threads(a, m, input.threads, &input.params.kmaf);
            let moved = Input {
                threads: &threads,
                ..*input
            };
            let ft = policies::run(Policy::FirstTouch, &moved);
            return ft.unwrap_or_else(|_| Schedule::fixed(layout));
        }
        Fix::MigrateBetweenPhases => return phase_moves(input, layout, pages),
    }
    Schedule::fixed(layout)
}

/// The memory node with the lowest Σ accesses × latency for page `p` (Marathe's Eq. 2).
fn main_node(input: &Input, threads: &[usize], p: usize) -> Option<usize> {
    let mut per_node = vec![0u64; input.machine.node_count()];
    for u in &input.accesses.pages[p].users {
        let n = &mut per_node[threads[u.thread as usize]];
        *n = n.saturating_add(u.total());
    }
    policies::marathe_hop_node(input.machine, &per_node)
}

/// At the end of each window, each page moves to the node that accesses it most in the next.
/// The advice is a copy per node after initialisation: each page is copied at the end of the
/// window of its last write (from the start when nothing writes it; never when the last window
/// still does), the copies' cost counted as the simulator counts moves. Replicas from the start
/// would collapse at the initialisation's first write and predict nothing.
fn replicate_after_last_write(input: &Input, mut layout: Layout, pages: &[usize]) -> Schedule {
    let windows = &input.accesses.windows.cells;
    let mut last_write: std::collections::HashMap<u32, usize> =
        pages.iter().map(|&p| (p as u32, usize::MAX)).collect();
    for (w, cells) in windows.iter().enumerate() {
        for c in cells {
            if c.writes > 0
                && let Some(last) = last_write.get_mut(&c.page)
            {
                *last = w;
            }
        }
    }
    layout.replicated.resize(layout.page_node.len(), false);
    let mut moves = vec![Vec::new(); windows.len()];
    for (&page, &w) in &last_write {
        let to = layout.page_node[page as usize];
        if w == usize::MAX {
            layout.replicated[page as usize] = true;
        } else if w + 1 < windows.len() {
            moves[w].push(Move {
                page,
                to,
                kind: MoveKind::Replicate,
            });
        }
    }
    for m in &mut moves {
        m.sort_by_key(|m| m.page);
    }
    Schedule {
        moves,
        ..Schedule::fixed(layout)
    }
}

fn phase_moves(input: &Input, layout: Layout, pages: &[usize]) -> Schedule {
    let a = input.accesses;
    let windows = &a.windows.cells;
    let wanted: std::collections::HashSet<u32> = pages.iter().map(|&p| p as u32).collect();
    let mut current = layout.page_node.clone();
    let mut moves = vec![Vec::new(); windows.len()];
    for w in 0..windows.len().saturating_sub(1) {
        let mut per_page: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
        for c in &windows[w + 1] {
            if wanted.contains(&c.page) {
                let row = per_page
                    .entry(c.page)
                    .or_insert_with(|| vec![0; input.machine.node_count()]);
                let n = &mut row[layout.thread_node[c.thread as usize]];
                *n = n.saturating_add(c.total());
            }
        }
        for (page, row) in per_page {
            if let Some(n) = policies::marathe_uniform_node(input.machine, &row)
                && current[page as usize] != n
            {
                current[page as usize] = n;
                moves[w].push(Move::migrate(page, n));
            }
        }
    }
    Schedule {
        moves,
        ..Schedule::fixed(layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::ObjectInfo;
    use crate::fixture::{self, cell, exact, pages_placed_by};
    use crate::sim::tests::machine;

    /// A table of 16 pages written by thread 0 in the first window, then read by both threads
    /// (on two nodes) for four more.
    fn written_then_read() -> Accesses {
        let object = ObjectInfo {
            id: 9,
            pid: 1,
            kind: "heap".into(),
            name: "table".into(),
            start: 0,
            size: 16 * 4096,
            site_key: Some(1),
            frames: Vec::new(),
            module: None,
            alloc_thread: Some(0),
        };
        let mut pages = pages_placed_by(16, 0);
        pages.iter_mut().for_each(|p| p.object = Some(0));
        let mut cells = vec![(0..16).map(|p| cell(p, 0, 0, 10_000)).collect::<Vec<_>>()];
        for _ in 0..4 {
            cells.push(
                (0..16)
                    .flat_map(|p| [cell(p, 0, 500_000, 0), cell(p, 1, 500_000, 0)])
                    .collect(),
            );
        }
        let threads = fixture::threads(1, 10, 2);
        exact(threads, vec![object], pages, 10_000_000, cells)
    }

    #[test]
    fn a_copy_per_node_after_initialisation_is_predicted_to_help() {
        let a = written_then_read();
        let p = predict(
            &a,
            &machine("machine-b"),
            &Params::default(),
            Fix::Replicate,
            &[9],
        )
        .unwrap();
        // Thread 1's reads, half of all, become local once the writes are over.
        assert!(p.change < -0.05, "{p:?}");
    }
}
