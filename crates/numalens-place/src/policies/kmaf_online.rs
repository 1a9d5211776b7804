//! kMAF online: at the end of every window, each page seen so far is placed by the kMAF rules
//! (locality, balance) on its NUMA vector, and threads are remapped by the communication seen
//! so far (kMAF's greedy groups, each group placed where its data is) when what that saves on
//! communication is at least `REMAP_GAIN` of the latency of every access so far: below it,
//! threads with private data would chase crumbs of sharing away from their pages. After a
//! remap the NUMA vectors start over: they counted nodes the threads have left.

use crate::accesses::Cell;
use crate::layout::{Move, Schedule, ThreadMove};

use super::Input;
use super::kmaf::{KmafDecision, add_sharing, communication_groups, kmaf_decide};

/// What a remap must save on communication, as a share of the latency of the accesses seen so
/// far: below it, a thread move buys less than the cache it leaves behind.
const REMAP_GAIN: f64 = 0.05;

pub(super) fn schedule(input: &Input) -> Schedule {
    let base = super::first_touch::schedule(input);
    let a = input.accesses;
    let m = input.machine;
    let memory = m.memory_nodes();
    let n = m.node_count();
    let mut pages = base.initial.page_node.clone();
    let mut threads = base.initial.thread_node.clone();
    // NUMA vectors of the pages seen so far, n counters each, in one flat array.
    let mut slot_of: Vec<u32> = vec![u32::MAX; a.pages.len()];
    let mut nv: Vec<u64> = Vec::new();
    let mut comm = vec![vec![0u64; a.threads.len()]; a.threads.len()];
    // Accesses of each thread to pages on each node, as they were placed when accessed.
    let mut to_node = vec![vec![0u64; n]; a.threads.len()];
    let windows = a.windows.cells.len();
    let mut moves = vec![Vec::new(); windows];
    let mut thread_moves = vec![Vec::new(); windows];
    let mut remaps = 0;
    for (w, cells) in a.windows.cells.iter().enumerate() {
        let mut touched: Vec<u32> = Vec::new();
        for c in cells {
            let page = c.page as usize;
            if slot_of[page] == u32::MAX {
                slot_of[page] = (nv.len() / n) as u32;
                nv.resize(nv.len() + n, 0);
            }
            let at = slot_of[page] as usize * n + threads[c.thread as usize];
            nv[at] = nv[at].saturating_add(c.total());
            let seen = &mut to_node[c.thread as usize][pages[page]];
            *seen = seen.saturating_add(c.total());
            if touched.last() != Some(&c.page) {
                touched.push(c.page);
            }
        }
        for page in touched {
            let number = a.pages[page as usize].number;
            let at = slot_of[page as usize] as usize * n;
            let target = match kmaf_decide(&nv[at..at + n], number, &memory, &input.params.kmaf) {
                KmafDecision::Locality(t) | KmafDecision::Balance(t) => t,
                KmafDecision::None => continue,
            };
            if pages[page as usize] != target {
                pages[page as usize] = target;
                moves[w].push(Move::migrate(page, target));
            }
        }
        add_communication(&mut comm, cells);
        if w + 1 == windows {
            break; // a remap at the run's end changes nothing
        }
        let mapped = map_to_data(&comm, &to_node, &threads, input);
        // Communication must be worth it: what the remap saves on it, a share of the latency
        // of every access so far (threads with private data would otherwise chase crumbs).
        let saved = communication_cost(&comm, &threads, m) - communication_cost(&comm, &mapped, m);
        if saved > access_latency(&to_node, &threads, m) * REMAP_GAIN {
            for (t, (&from, &to)) in threads.iter().zip(&mapped).enumerate() {
                if from != to {
                    thread_moves[w].push(ThreadMove {
                        thread: t as u32,
                        to,
                    });
                }
            }
            threads = mapped;
            slot_of.fill(u32::MAX);
            nv.clear();
            remaps += 1;
        }
    }
    let mut s = Schedule {
        moves,
        thread_moves,
        ..base
    };
    let moved: usize = s.thread_moves.iter().map(Vec::len).sum();
    s.notes.push(if remaps == 0 {
        "threads stay on the default spread: no remap by communication paid".to_string()
    } else {
        let times = if remaps == 1 {
            "once".to_string()
        } else {
            format!("{remaps} times")
        };
        format!("threads remapped by communication {times} ({moved} thread moves)")
    });
    s
}

/// kMAF's groups of communicating threads, each group on the node that holds most of what its
/// members accessed so far (groups with most accesses choose first, among nodes with at least
/// the CPUs the group was sized for): online, the pages are already somewhere.
fn map_to_data(
    comm: &[Vec<u64>],
    to_node: &[Vec<u64>],
    threads: &[usize],
    input: &Input,
) -> Vec<usize> {
    let m = input.machine;
    let Some((groups, sized_for)) = communication_groups(comm, m, &input.params.kmaf) else {
        return threads.to_vec();
    };
    let on = |g: usize, node: usize| -> u64 {
        groups[g]
            .iter()
            .fold(0u64, |s, &t| s.saturating_add(to_node[t][node]))
    };
    let total = |g: usize| (0..m.node_count()).fold(0u64, |s, n| s.saturating_add(on(g, n)));
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| (std::cmp::Reverse(total(g)), g));
    let mut free = sized_for.clone();
    let mut out = threads.to_vec();
    for g in order {
        let fits = |n: &usize| m.cpus[*n] >= m.cpus[sized_for[g]];
        let pick = free
            .iter()
            .copied()
            .filter(fits)
            .max_by_key(|&n| (on(g, n), std::cmp::Reverse(n)))
            .or_else(|| free.first().copied());
        let Some(pick) = pick else { break };
        free.retain(|&n| n != pick);
        for &t in &groups[g] {
            out[t] = pick;
        }
    }
    out
}

/// What a thread mapping costs the communication: Σ over pairs of what they share × the
/// latency between their nodes.
fn communication_cost(comm: &[Vec<u64>], threads: &[usize], m: &crate::machine::Machine) -> f64 {
    let mut cost = 0.0;
    for (i, row) in comm.iter().enumerate() {
        for (j, &c) in row.iter().enumerate().skip(i + 1) {
            if c > 0 {
                cost += c as f64 * m.latency_ns[threads[i]][threads[j]];
            }
        }
    }
    cost
}

/// Σ accesses × latency from each thread's node (under `threads`) to where the pages were.
fn access_latency(to_node: &[Vec<u64>], threads: &[usize], m: &crate::machine::Machine) -> f64 {
    to_node
        .iter()
        .zip(threads)
        .map(|(row, &t)| {
            row.iter()
                .enumerate()
                .map(|(node, &c)| c as f64 * m.latency_ns[t][node])
                .sum::<f64>()
        })
        .sum()
}

/// Adds a window's communication: threads sharing a page, by the smaller of their counts on it
/// (cells are sorted by page, then thread).
fn add_communication(comm: &mut [Vec<u64>], cells: &[Cell]) {
    let mut users: Vec<(u32, u64)> = Vec::new();
    for same_page in cells.chunk_by(|x, y| x.page == y.page) {
        users.clear();
        users.extend(same_page.iter().map(|c| (c.thread, c.total())));
        add_sharing(comm, &users);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accesses::{Accesses, CountSource, Page, ThreadInfo, Windows};
    use crate::layout::spread_threads;
    use crate::policies::Params;
    use crate::sim::{simulate, tests::machine};

    /// 8 threads; threads k and k + 4 share page k (and only it) in each of three windows.
    fn pairs_apart() -> Accesses {
        let pages = (0..4)
            .map(|p| Page {
                pid: 1,
                number: p,
                first_toucher: Some(p as u32),
                ..Page::default()
            })
            .collect();
        let window: Vec<Cell> = (0..4u32)
            .flat_map(|k| {
                [k, k + 4].map(|thread| Cell {
                    page: k,
                    thread,
                    reads: 100_000,
                    writes: 100_000,
                    other: 0,
                })
            })
            .collect();
        let threads = (0..8)
            .map(|t| ThreadInfo {
                pid: 1,
                tid: 100 + t,
                logical_id: t,
                name: None,
            })
            .collect();
        let windows = Windows {
            start_ns: 0,
            length_ns: 1_000_000,
            cells: vec![window; 3],
        };
        Accesses::from_cells(
            4096,
            CountSource::Exact,
            threads,
            Vec::new(),
            pages,
            windows,
        )
    }

    #[test]
    fn threads_that_share_are_brought_together_once_and_their_pages_follow() {
        let a = pairs_apart();
        let m = machine("machine-b");
        let params = Params::default();
        let (threads, _) = spread_threads(&a, &m, params.spread);
        // The default spread puts threads k and k + 4 on different nodes.
        assert!((0..4).all(|k| threads[k] != threads[k + 4]), "{threads:?}");
        let input = Input {
            accesses: &a,
            machine: &m,
            threads: &threads,
            params: &params,
        };
        let s = schedule(&input);
        assert!(!s.thread_moves[0].is_empty(), "{:?}", s.notes);
        assert!(s.thread_moves[1..].iter().all(Vec::is_empty), "one remap");
        let end = s.final_layout();
        for k in 0..4 {
            assert_eq!(end.thread_node[k], end.thread_node[k + 4], "{end:?}");
        }
        let first_touch = super::super::run(crate::policies::Policy::FirstTouch, &input).unwrap();
        let time = |s: &Schedule| simulate(&a, &m, s, &params.model).modelled_time_s;
        assert!(
            time(&s) < time(&first_touch),
            "{} vs {}",
            time(&s),
            time(&first_touch)
        );
    }
}
