//! Times `attribute::Locator` on synthetic recordings shaped like real ones: long-lived heap
//! objects inside fallback mappings, static arrays, stacks with TLS inside, and short-lived
//! allocations that reuse addresses, with time-ordered lookups that mostly stay on one object for a
//! while. Prints the time and a checksum of the answers, so two builds can be compared on both.
//!
//! `cargo run --release -p numalens-assemble --example attribute_bench -- [SCENARIO] [SAMPLES]`
//! with SCENARIO one of `steady`, `churn`, `bursts`, `all` (default).

use std::time::Instant;

use numalens_assemble::attribute::{Locator, ObjectSpec};
use numalens_format::ObjectKind;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn spec(pid: u32, start: u64, size: u64, alloc_ns: u64, free_ns: Option<u64>) -> ObjectSpec {
    ObjectSpec {
        pid,
        kind: ObjectKind::Heap,
        name: String::new(),
        start,
        size,
        alloc_ns,
        free_ns,
        alloc_tid: None,
        site_key: None,
        tracked: true,
    }
}

struct Scenario {
    objects: Vec<ObjectSpec>,
    /// (time, pid, address), time-ordered.
    lookups: Vec<(u64, u32, u64)>,
}

const HEAP: u64 = 0x5555_0000_0000;
const STATICS: u64 = 0x4000_0000;
const STACKS: u64 = 0x7f00_0000_0000;

/// `long_lived` heap objects allocated at the start, `short_lived` ones allocated and freed
/// throughout (each reusing a slot of a free list, so addresses are reused), `samples` lookups.
/// `burst` short-lived objects come and go together between two groups of lookups.
fn scenario(long_lived: usize, short_lived: usize, burst: usize, samples: usize) -> Scenario {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut objects = Vec::new();
    let end_ns = 1_000_000_000u64;
    for pid in [100u32, 101] {
        let mut fallback = spec(pid, HEAP - (1 << 30), 1 << 40, 0, None);
        fallback.tracked = false;
        objects.push(fallback);
        let mut fallback = spec(pid, STACKS - (1 << 30), 1 << 33, 0, None);
        fallback.tracked = false;
        objects.push(fallback);
        for i in 0..8u64 {
            objects.push(spec(pid, STATICS + i * (64 << 20), 48 << 20, 0, None));
        }
        for t in 0..8u64 {
            let stack = STACKS + t * (16 << 20);
            objects.push(spec(pid, stack, 8 << 20, 1 + t, Some(end_ns - t)));
            objects.push(spec(
                pid,
                stack + (8 << 20) - 8192,
                4096,
                1 + t,
                Some(end_ns - t),
            ));
        }
    }
    // Long-lived heap objects of pid 100, laid out one after another.
    let mut cursor = HEAP;
    for _ in 0..long_lived {
        let size = 32 << rng.below(11);
        objects.push(spec(100, cursor, size, 10 + rng.below(1000), None));
        cursor += size + 64;
    }
    // Short-lived ones at the end of the heap, in slots that are reused.
    let slots = 4096u64;
    let slot_base = cursor + (1 << 20);
    let mut t = 2000u64;
    let step = (end_ns - 4000) / (short_lived.max(1) as u64 / burst.max(1) as u64 + 1);
    let mut made = 0;
    while made < short_lived {
        let n = burst.min(short_lived - made);
        for k in 0..n {
            let slot = rng.below(slots);
            let size = 16 + rng.below(2048);
            let alloc = t + k as u64;
            let life = 1 + rng.below(step * 4);
            objects.push(spec(
                100,
                slot_base + slot * 4096,
                size,
                alloc,
                Some(alloc + life),
            ));
        }
        made += n;
        t += step;
    }
    // Lookups: runs of accesses to one place, mostly heap objects of pid 100.
    let heap_objects: Vec<usize> = (0..objects.len())
        .filter(|&i| objects[i].pid == 100 && objects[i].tracked && objects[i].start >= HEAP)
        .collect();
    let mut lookups = Vec::with_capacity(samples);
    let mut time = 5000u64;
    let dt = (end_ns - 10_000) / samples.max(1) as u64;
    while lookups.len() < samples {
        let run = 1 + rng.below(32) as usize;
        let pick = rng.below(100);
        let (pid, base, span) = if pick < 70 {
            let o = &objects[heap_objects[rng.below(heap_objects.len() as u64) as usize]];
            (100, o.start, o.size)
        } else if pick < 85 {
            (
                100 + rng.below(2) as u32,
                STATICS + rng.below(8) * (64 << 20),
                48 << 20,
            )
        } else if pick < 95 {
            let t = rng.below(8);
            (100, STACKS + t * (16 << 20) + (7 << 20), 1 << 20)
        } else {
            (101, HEAP + rng.below(1 << 30), 4096)
        };
        let at = base + rng.below(span);
        for k in 0..run.min(samples - lookups.len()) {
            time += dt;
            lookups.push((time, pid, at.wrapping_add(8 * k as u64)));
        }
    }
    Scenario { objects, lookups }
}

fn run(name: &str, s: &Scenario) {
    let start = Instant::now();
    let mut locator = Locator::new(&s.objects);
    let mut checksum = 0u64;
    let mut found = 0u64;
    for &(time, pid, address) in &s.lookups {
        locator.advance_to(time);
        if let Some(id) = locator.find(pid, address) {
            checksum = checksum.wrapping_mul(31).wrapping_add(id as u64 + 1);
            found += 1;
        } else {
            checksum = checksum.wrapping_mul(31);
        }
    }
    let elapsed = start.elapsed();
    println!(
        "{name:8} objects {:>9} lookups {:>9} found {:>9} checksum {checksum:016x} time {:>8.3} s ({:.1} ns/lookup)",
        s.objects.len(),
        s.lookups.len(),
        found,
        elapsed.as_secs_f64(),
        elapsed.as_nanos() as f64 / s.lookups.len().max(1) as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("all", String::as_str);
    let samples: usize = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000_000);
    if matches!(which, "steady" | "all") {
        run("steady", &scenario(100_000, 10_000, 1, samples));
    }
    if matches!(which, "churn" | "all") {
        // An object event for about every ten lookups.
        run("churn", &scenario(100_000, samples / 10, 1, samples));
    }
    if matches!(which, "bursts" | "all") {
        // Thousands of short-lived objects come and go between two groups of lookups.
        run("bursts", &scenario(100_000, samples / 4, 5_000, samples));
    }
}
