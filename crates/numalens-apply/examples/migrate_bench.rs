//! Pages per second of the engine's batched `move_pages` against one page per call, side by
//! side in one run: MIB MiB of this process's own pages are moved from one node to the other
//! one page per call, then in calls of 16, 64, 256, 1,024 (the engine's first jobs) and 4,096
//! pages, each way once per round, REPEAT rounds. Needs two nodes with memory (run it in a
//! test-bed guest: bench/migrate). Prints one table row per way and round, then each batch's
//! mean rate against one page per call.
//!
//!     migrate_bench [MIB] [REPEAT]

use std::time::Instant;

use numalens_apply::migrate::{MigrateOptions, Migrator, Request};

const PAGE: u64 = 4096;
/// Pages per call of each way (each asks where the pages are first, in the same batch size).
const BATCHES: [usize; 6] = [1, 16, 64, 256, 1024, 4096];

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let mib = args.first().copied().unwrap_or(64);
    let repeat = args.get(1).copied().unwrap_or(3);
    let nodes = memory_nodes();
    let [a, b] = nodes[..] else {
        eprintln!("migrate_bench: needs exactly two nodes with memory, found {nodes:?}");
        std::process::exit(2);
    };
    let pages = (mib << 20) / PAGE;
    let memory = vec![1u8; (pages * PAGE) as usize + PAGE as usize];
    let base = (memory.as_ptr() as u64).div_ceil(PAGE) * PAGE;
    let addresses: Vec<u64> = (0..pages).map(|p| base + p * PAGE).collect();
    let pid = std::process::id();
    // Every page on node A first (untimed); then each way moves them all to the other node.
    let mut at = a;
    move_all(&addresses, at, 1024);
    println!("pages per call  pages   seconds  pages/s     syscalls");
    let mut rates = Vec::new();
    for _ in 0..repeat {
        for batch in BATCHES {
            let to = if at == a { b } else { a };
            at = to;
            let mut m = Migrator::new(
                MigrateOptions {
                    rate_limit_mb_per_s: 0.0,
                    batch_pages: batch,
                    ..MigrateOptions::default()
                },
                PAGE,
            );
            let requests: Vec<Request> = addresses.iter().map(|x| (*x, to)).collect();
            let started = Instant::now();
            let out = m.migrate(pid, 0, &requests, ("bench", "bench"), 0);
            let seconds = started.elapsed().as_secs_f64();
            let rate = out.moved as f64 / seconds;
            println!(
                "{batch:>14}  {:>6}  {seconds:>7.3}  {rate:>10.0}  {:>8}",
                out.moved, out.syscalls
            );
            if let Some(e) = out.call_error {
                eprintln!("migrate_bench: {e}");
            }
            rates.push((batch, rate));
        }
    }
    let mean = |b: usize| {
        let r: Vec<f64> = rates
            .iter()
            .filter(|(x, _)| *x == b)
            .map(|(_, r)| *r)
            .collect();
        r.iter().sum::<f64>() / r.len().max(1) as f64
    };
    let one = mean(1).max(1e-9);
    let side: Vec<String> = BATCHES[1..]
        .iter()
        .map(|b| format!("{b}: {:.1}x", mean(*b) / one))
        .collect();
    println!(
        "pages/s against one page per call ({} MiB, {} rounds): {}",
        mib,
        repeat,
        side.join(", ")
    );
    std::hint::black_box(&memory);
}

fn move_all(addresses: &[u64], to: u32, batch: usize) {
    let mut m = Migrator::new(
        MigrateOptions {
            rate_limit_mb_per_s: 0.0,
            batch_pages: batch,
            movers: 1,
            ..MigrateOptions::default()
        },
        PAGE,
    );
    let requests: Vec<Request> = addresses.iter().map(|x| (*x, to)).collect();
    m.migrate(std::process::id(), 0, &requests, ("bench", "setup"), 0);
}

fn memory_nodes() -> Vec<u32> {
    let mut nodes: Vec<u32> = std::fs::read_dir("/sys/devices/system/node")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .filter(|n| {
            std::fs::read_to_string(format!("/sys/devices/system/node/node{n}/meminfo"))
                .is_ok_and(|m| !m.contains("MemTotal:        0 kB"))
        })
        .collect();
    nodes.sort_unstable();
    nodes
}
