//! Pages per second of the engine's batched `move_pages` against one page per call, side by
//! side in one run: MIB MiB of this process's own pages are moved from node A to node B in
//! batches, then back one page per call, REPEAT times. Needs two nodes with memory (run it in a
//! test-bed guest: bench/migrate). Prints one table row per way.
//!
//!     migrate_bench [MIB] [REPEAT]

use std::time::Instant;

use numalens_apply::migrate::{DEFAULT_MOVERS, MigrateOptions, Migrator, Request};

const PAGE: u64 = 4096;

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
    println!("way              batch  movers  pages   seconds  pages/s     syscalls");
    let mut rates = Vec::new();
    for _ in 0..repeat {
        let ways = [
            ("batched", 1024usize, 1usize),
            ("one-per-call", 1, 1),
            ("batched, movers", 1024, DEFAULT_MOVERS),
        ];
        for (label, batch, movers) in ways {
            let to = if at == a { b } else { a };
            at = to;
            let mut m = Migrator::new(
                MigrateOptions {
                    rate_limit_mb_per_s: 0.0,
                    batch_pages: batch,
                    movers,
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
                "{label:<16} {batch:>5}  {movers:>6}  {:>6}  {seconds:>7.3}  {rate:>10.0}  {:>8}",
                out.moved, out.syscalls
            );
            if let Some(e) = out.call_error {
                eprintln!("migrate_bench: {e}");
            }
            rates.push((label, rate));
        }
    }
    let mean = |l: &str| {
        let r: Vec<f64> = rates
            .iter()
            .filter(|(x, _)| *x == l)
            .map(|(_, r)| *r)
            .collect();
        r.iter().sum::<f64>() / r.len().max(1) as f64
    };
    println!(
        "batched / one-per-call: {:.1}x; {DEFAULT_MOVERS} movers / one: {:.1}x ({} MiB, {} rounds)",
        mean("batched") / mean("one-per-call").max(1e-9),
        mean("batched, movers") / mean("batched").max(1e-9),
        mib,
        repeat
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
