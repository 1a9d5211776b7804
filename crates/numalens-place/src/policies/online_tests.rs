//! The online engine feeds a stepper pages as it first sees them; a batch run gives them all
//! before the first window. Both must decide the same moves.

use crate::accesses::{Accesses, Cell, Page};
use crate::fixture::{self, exact};
use crate::layout::{Move, ThreadMove};
use crate::machine::Machine;
use crate::policies::{Input, Params, Policy, Step, StepInput, Stepper, run};
use numalens_topology::presets::preset;

const THREADS: u32 = 8;
const PAGES: u32 = 400;
const WINDOWS: usize = 12;

/// A run whose page indices follow first sight: threads own blocks of pages, a shared range
/// is used by all, and ownership shifts halfway (pseudo-random counts, fixed seed).
fn run_windows() -> (Vec<Vec<Cell>>, Vec<Page>) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut windows = Vec::new();
    let mut first: Vec<Option<u32>> = vec![None; PAGES as usize];
    for w in 0..WINDOWS {
        let mut cells = Vec::new();
        let seen_up_to = PAGES * (w as u32 + 1) / WINDOWS as u32;
        for page in 0..seen_up_to {
            let owner = (page * THREADS / PAGES + u32::from(w >= WINDOWS / 2)) % THREADS;
            let users: Vec<u32> = if page % 10 == 0 {
                (0..THREADS).collect()
            } else {
                vec![owner]
            };
            for thread in users {
                // Pages are indexed in order of first sight: the owner touches every page of
                // its range each window, the others now and then.
                if thread != owner && next() % 4 == 0 {
                    continue;
                }
                first[page as usize].get_or_insert(thread);
                cells.push(Cell {
                    page,
                    thread,
                    reads: next() % 40,
                    writes: next() % 3,
                    other: 0,
                });
            }
        }
        windows.push(cells);
    }
    let pages = (0..PAGES)
        .map(|p| Page {
            pid: 1,
            number: 1000 + u64::from(p),
            first_toucher: first[p as usize],
            ..Page::default()
        })
        .collect();
    (windows, pages)
}

fn incremental(
    policy: Policy,
    a: &Accesses,
    m: &Machine,
    threads: &[usize],
    params: &Params,
) -> Vec<Step> {
    let mut stepper = Stepper::new(policy, m, params, a.page_size, None).unwrap();
    let page_number = |p: u32| a.pages[p as usize].number;
    let mut known = 0usize;
    let mut out = Vec::new();
    for cells in &a.windows.cells {
        // Pages first seen in this window, in index order, placed by their first toucher.
        let upto = cells
            .iter()
            .map(|c| c.page as usize + 1)
            .max()
            .unwrap_or(0)
            .max(known);
        let initial: Vec<usize> = a.pages[known..upto]
            .iter()
            .map(|p| threads[p.first_toucher.unwrap() as usize])
            .collect();
        stepper.add_pages(&initial);
        known = upto;
        out.push(stepper.step(
            &StepInput {
                machine: m,
                params,
                threads,
                pages: known,
                page_number: &page_number,
                page_size: a.page_size,
                window_ns: a.windows.length_ns,
                sample_period: a.sample_period,
                last: false,
            },
            cells,
        ));
    }
    out
}

#[test]
fn pages_given_as_they_appear_are_decided_as_in_a_batch_run() {
    let (cells, pages) = run_windows();
    let a = exact(
        fixture::threads(1, 100, THREADS),
        Vec::new(),
        pages,
        1_000,
        cells,
    );
    let m = Machine::from_topology(&preset("machine-b").unwrap());
    let threads: Vec<usize> = (0..THREADS as usize).map(|t| t % 4).collect();
    let mut params = Params::default();
    params.spm.observe_windows = 3;
    params.carrefour.maptu_min = 0.0;
    for policy in [
        Policy::Carrefour,
        Policy::KmafOnline,
        Policy::Spm,
        Policy::Tiering,
    ] {
        let batch = run(
            policy,
            &Input {
                accesses: &a,
                machine: &m,
                threads: &threads,
                params: &params,
            },
        )
        .unwrap();
        let steps = incremental(policy, &a, &m, &threads, &params);
        let moved: usize = steps.iter().map(|s| s.moves.len()).sum();
        if policy != Policy::Tiering {
            assert!(
                moved > 0,
                "{policy:?} decided nothing: the test would prove nothing"
            );
        }
        for (w, step) in steps.iter().enumerate() {
            let none: Vec<Move> = Vec::new();
            assert_eq!(
                &step.moves,
                batch.moves.get(w).unwrap_or(&none),
                "{policy:?}, window {w}"
            );
            // A batch run makes no remap after its last window.
            if w + 1 < WINDOWS {
                let none: Vec<ThreadMove> = Vec::new();
                assert_eq!(
                    &step.thread_moves,
                    batch.thread_moves.get(w).unwrap_or(&none),
                    "{policy:?}, window {w}"
                );
            }
        }
    }
}
