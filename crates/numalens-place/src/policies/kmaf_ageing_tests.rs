//! Online kMAF's ageing of its NUMA vectors on the 4-node machine-b model: a page that one
//! thread initialised and another then uses follows its user within a few windows, and a page
//! two nodes share is not moved back and forth.

use crate::accesses::{Accesses, Cell};
use crate::fixture::{cell, exact, pages_placed_by, threads};
use crate::layout::{Schedule, spread_threads};
use crate::policies::{Input, Params, Policy, run};
use crate::sim::tests::machine;

/// Four threads (one per node of machine-b under the default spread); pages first touched by
/// thread 0; `windows[w]` lists (page, thread, accesses) of window w.
fn accesses(pages: u32, windows: &[Vec<(u32, u32, u64)>]) -> Accesses {
    let cells = windows
        .iter()
        .map(|w| {
            let mut cells: Vec<Cell> = w
                .iter()
                .map(|&(page, thread, reads)| cell(page, thread, reads, 0))
                .collect();
            cells.sort_by_key(|c| (c.page, c.thread));
            cells
        })
        .collect();
    exact(
        threads(1, 100, 4),
        Vec::new(),
        pages_placed_by(pages, 0),
        200_000_000,
        cells,
    )
}

/// Online kMAF with `age_shift` (threads not remapped: the data mapping alone), and the thread
/// nodes of the default spread.
fn online_kmaf(a: &Accesses, age_shift: u32) -> (Schedule, Vec<usize>) {
    let m = machine("machine-b");
    let mut params = Params::default();
    params.kmaf.map_threads = false;
    params.kmaf.age_shift = age_shift;
    let (threads, _) = spread_threads(a, &m, params.spread);
    let input = Input {
        accesses: a,
        machine: &m,
        threads: &threads,
        params: &params,
    };
    (run(Policy::KmafOnline, &input).unwrap(), threads)
}

/// (window, node) of each move of `page`.
fn moves_of(s: &Schedule, page: u32) -> Vec<(usize, usize)> {
    s.moves
        .iter()
        .enumerate()
        .flat_map(|(w, moves)| {
            moves
                .iter()
                .filter(|m| m.page == page)
                .map(move |m| (w, m.to))
        })
        .collect()
}

#[test]
fn a_page_initialised_by_one_thread_follows_its_later_user_within_three_windows() {
    // Window 0: thread 0 initialises page 0 (1,000 accesses); windows 1-10: thread 2 uses it
    // (400 a window). Without ageing thread 2's accesses never exceed 80 % of the total; with
    // the default halving, the vector at window 3 is (125, 700): 85 %.
    let mut windows = vec![vec![(0, 0, 1_000)]];
    windows.extend((1..=10).map(|_| vec![(0, 2, 400)]));
    let a = accesses(1, &windows);
    assert_eq!(Params::default().kmaf.age_shift, 1, "the default halves");
    let (aged, threads) = online_kmaf(&a, 1);
    assert_eq!((threads[0], threads[2]), (0, 2), "{threads:?}");
    assert_eq!(
        moves_of(&aged, 0),
        [(3, 2)],
        "moved once, to thread 2's node"
    );
    let (kept, _) = online_kmaf(&a, 0);
    assert_eq!(moves_of(&kept, 0), [], "without ageing the page stays");
}

#[test]
fn a_page_two_nodes_share_in_turn_is_not_moved_back_and_forth() {
    // Page 0 is used by threads 0 and 2 in every window, each by 90 % in turn; page 1 by all
    // four threads alike, page 2 by thread 1 only.
    let windows: Vec<Vec<(u32, u32, u64)>> = (0..12)
        .map(|w| {
            let (a, b) = if w % 2 == 0 { (900, 100) } else { (100, 900) };
            let mut cells = vec![(0, 0, a), (0, 2, b), (2, 1, 500)];
            cells.extend((0..4).map(|t| (1, t, 250)));
            cells
        })
        .collect();
    let a = accesses(3, &windows);
    let (aged, threads) = online_kmaf(&a, 1);
    assert_eq!(moves_of(&aged, 0), [], "shared in turn: stays");
    // Balanced once (page number 1 on node 1), then left there.
    assert_eq!(moves_of(&aged, 1), [(0, 1)]);
    assert_eq!(moves_of(&aged, 2), [(0, threads[1])]);
    // Ageing by 8 a window forgets too fast: the same page moves at every window.
    let (forgetful, _) = online_kmaf(&a, 3);
    assert!(moves_of(&forgetful, 0).len() >= 10, "{forgetful:?}");
}
