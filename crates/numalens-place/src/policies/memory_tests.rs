//! What each online policy keeps per page, measured on its structures (`memory_bytes`, by
//! capacity) after every window of a run with many pages on 4- and 8-node machines: the online
//! engine keeps it for every page it tracks (docs/PLACEMENT.md, "Cost").

use crate::accesses::Cell;
use crate::machine::Machine;
use crate::policies::{Params, Policy, StepInput, Stepper};
use numalens_topology::presets::preset;

const PAGES: u32 = 65_536;
const THREADS: u32 = 16;
const WINDOWS: usize = 4;

/// Each page used by its owner (the same each window), and every `shared_every`-th page also
/// by four other threads, one per node; counts large enough that shared pages' rows outgrow
/// 16 bits.
fn window(shared_every: u32) -> Vec<Cell> {
    let mut cells = Vec::new();
    for page in 0..PAGES {
        let owner = (page / 64) % THREADS;
        let mut users = vec![owner];
        if page % shared_every == 0 {
            users.extend((0..4).map(|node| (owner + 1 + node) % THREADS));
        }
        users.sort_unstable();
        users.dedup();
        for thread in users {
            cells.push(Cell {
                page,
                thread,
                reads: 3 + u64::from(page % 7) * 20_000,
                writes: u64::from(page % 3),
                other: 0,
            });
        }
    }
    cells
}

/// The largest state of `policy` over the run, in bytes a page, and the moves it made.
fn peak_bytes_per_page(policy: Policy, m: &Machine, shared_every: u32) -> (f64, usize) {
    let mut params = Params::default();
    params.spm.observe_windows = 3;
    params.carrefour.maptu_min = 0.0;
    let mut stepper = Stepper::new(policy, m, &params, 4096, None).unwrap();
    // Threads over the nodes with CPUs; every page first placed away from its owner.
    let cpu_nodes = m.cpu_nodes();
    let threads: Vec<usize> = (0..THREADS as usize)
        .map(|t| cpu_nodes[t % cpu_nodes.len()])
        .collect();
    let initial: Vec<usize> = (0..PAGES as usize)
        .map(|p| (threads[p / 64 % THREADS as usize] + 1) % m.node_count())
        .collect();
    // Half the pages first seen in the first window, the rest in the second, as live.
    let half = PAGES as usize / 2;
    let number = |p: u32| u64::from(p);
    let (mut peak, mut moves) = (0usize, 0usize);
    for w in 0..WINDOWS {
        let mut cells = window(shared_every);
        if w == 0 {
            stepper.add_pages(&initial[..half]);
            cells.retain(|c| (c.page as usize) < half);
        } else if w == 1 {
            stepper.add_pages(&initial[half..]);
        }
        let step = stepper.step(
            &StepInput {
                machine: m,
                params: &params,
                threads: &threads,
                pages: if w == 0 { half } else { PAGES as usize },
                page_number: &number,
                page_size: 4096,
                window_ns: 1_000_000,
                sample_period: 1,
                last: w + 1 == WINDOWS,
            },
            &cells,
        );
        moves += step.moves.len();
        peak = peak.max(stepper.memory_bytes());
    }
    (peak as f64 / f64::from(PAGES), moves)
}

/// A preset machine; for tiering, nodes 2 and 3 without CPUs (the slow tier).
fn machine(name: &str, policy: Policy) -> Machine {
    let mut m = Machine::from_topology(&preset(name).unwrap());
    if policy == Policy::Tiering {
        m.cpus[2] = 0;
        m.cpus[3] = 0;
        m.memory_bytes[0] = Some(u64::from(PAGES) / 8 * 4096);
        m.memory_bytes[1] = Some(u64::from(PAGES) / 8 * 4096);
    }
    m
}

#[test]
fn every_online_policy_keeps_at_most_16_bytes_a_page_on_four_and_eight_nodes() {
    let policies = [
        Policy::Carrefour,
        Policy::KmafOnline,
        Policy::Spm,
        Policy::Tiering,
    ];
    // One page in eight shared by every node, and every page shared (the worst case).
    for (name, shared_every, policy) in ["machine-b", "machine-c"]
        .into_iter()
        .flat_map(|name| [8, 1].map(|shared| (name, shared)))
        .flat_map(|(name, shared)| policies.map(|p| (name, shared, p)))
    {
        let m = machine(name, policy);
        let (bytes, moves) = peak_bytes_per_page(policy, &m, shared_every);
        // With every page shared by five nodes of eight, kMAF rightly finds no rule to apply.
        if shared_every > 1 {
            assert!(
                moves > 0,
                "{policy:?} decided nothing: nothing was exercised"
            );
        }
        assert!(
            bytes <= 16.0,
            "{policy:?} on {name}: {bytes:.2} bytes a page, 1 page in {shared_every} shared"
        );
        eprintln!("{policy:?} on {name}, 1 in {shared_every} shared: {bytes:.2} bytes a page");
    }
}
