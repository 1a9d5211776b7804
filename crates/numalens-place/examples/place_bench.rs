//! Benchmark of planning and simulation: `bench/place` prints a table.
//!
//! Each measurement runs in a child process of its own so that its peak memory is its own:
//! - plan: each policy on PAGES pages used by 64 threads (each page private to one thread, one
//!   in eight shared with a neighbour), 32 windows, on machine-c;
//! - simulate: the same accesses under each policy's schedule, in cells (one thread's accesses
//!   to one page in one window, what samples are aggregated into) per second;
//! - load: a synthetic profile's samples into windows, with the same pages and 1× / 10× the
//!   samples: memory must not follow the samples.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use numalens_format::synth::{SynthConfig, SynthSamples};
use numalens_format::{Backend, Clock, Completeness, Host, Meta, Profile, ProfileWriter};
use numalens_place::accesses::{Cell, Page, ThreadInfo, Windows};
use numalens_place::layout::spread_threads;
use numalens_place::load::{LoadOptions, load};
use numalens_place::policies::{self, Input};
use numalens_place::{Accesses, CountSource, Machine, Params, Policy, simulate};

const THREADS: u32 = 64;
const WINDOWS: usize = 32;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("plan") => child_plan(args[2].parse().unwrap(), &args[3]),
        Some("write") => child_write(args[2].parse().unwrap(), Path::new(&args[3])),
        Some("load") => child_load(Path::new(&args[2])),
        other => {
            let pages = other.map_or(10_000_000, |n| n.parse().expect("PAGES is a number"));
            run_all(pages);
        }
    }
}

fn run_all(pages: u64) {
    println!(
        "numalens placement benchmark: {pages} pages, {THREADS} threads, {WINDOWS} windows, machine-c"
    );
    println!(
        "{:<34} {:>10} {:>12} {:>16} {:>12}",
        "policy", "plan s", "simulate s", "cells/s", "peak RSS MiB"
    );
    for policy in Policy::all() {
        let pages = if policy == Policy::Oracle {
            pages / 10
        } else {
            pages
        };
        let out = child("plan", &[pages.to_string(), policy.name().to_string()]);
        let f: Vec<f64> = out.split_whitespace().map(|v| v.parse().unwrap()).collect();
        let name = if policy == Policy::Oracle {
            format!("oracle ({pages} pages)")
        } else {
            policy.name().to_string()
        };
        println!(
            "{:<34} {:>10.2} {:>12.2} {:>16.3e} {:>12.0}",
            name, f[0], f[1], f[2], f[3]
        );
    }
    let dir = std::env::temp_dir().join(format!("numalens-place-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!("\nload (same pages, more samples: memory must not follow the samples)");
    println!(
        "{:<34} {:>10} {:>16} {:>12}",
        "samples", "load s", "samples/s", "peak RSS MiB"
    );
    for n in [2_000_000u64, 20_000_000] {
        let path = dir.join(format!("p{n}.numalens"));
        child("write", &[n.to_string(), path.display().to_string()]);
        let out = child("load", &[path.display().to_string()]);
        let f: Vec<f64> = out.split_whitespace().map(|v| v.parse().unwrap()).collect();
        println!(
            "{:<34} {:>10.2} {:>16.3e} {:>12.0}",
            n,
            f[0],
            n as f64 / f[0],
            f[1]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn child(mode: &str, args: &[String]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(mode)
        .args(args)
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "{mode} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Pages in runs of 4096 per thread; every eighth page also used by the next thread; each page
/// active in one window (a sweep of the thread's block over the run).
fn synthetic(pages: u64) -> Accesses {
    let per_thread = pages / THREADS as u64;
    let mut list = Vec::with_capacity(pages as usize);
    let mut cells = vec![Vec::new(); WINDOWS];
    for p in 0..pages {
        let owner = ((p / 4096) % THREADS as u64) as u32;
        let window = ((p % per_thread.max(1)) * WINDOWS as u64 / per_thread.max(1)) as usize;
        list.push(Page {
            pid: 1,
            number: p,
            first_toucher: Some(if p % 3 == 0 { 0 } else { owner }),
            first_ns: p,
            ..Page::default()
        });
        let w = window.min(WINDOWS - 1);
        cells[w].push(Cell {
            page: p as u32,
            thread: owner,
            reads: 40,
            writes: 10,
            other: 0,
        });
        if p % 8 == 0 {
            let other = (owner + 1) % THREADS;
            cells[w].push(Cell {
                page: p as u32,
                thread: other,
                reads: 20,
                writes: 0,
                other: 0,
            });
        }
    }
    let threads = (0..THREADS)
        .map(|t| ThreadInfo {
            pid: 1,
            tid: 1000 + t,
            logical_id: t,
            name: None,
        })
        .collect();
    let windows = Windows {
        start_ns: 0,
        length_ns: 100_000_000,
        cells,
    };
    Accesses::from_cells(4096, CountSource::Exact, threads, Vec::new(), list, windows)
}

fn child_plan(pages: u64, policy: &str) {
    let accesses = synthetic(pages);
    let machine = Machine::from_topology(&numalens_topology::presets::preset("machine-c").unwrap());
    let params = Params::default();
    let (threads, _) = spread_threads(&accesses, &machine, params.spread);
    let input = Input {
        accesses: &accesses,
        machine: &machine,
        threads: &threads,
        params: &params,
    };
    let policy = Policy::from_name(policy).unwrap();
    let start = Instant::now();
    let schedule = policies::run(policy, &input).unwrap();
    let plan_s = start.elapsed().as_secs_f64();
    let cells: usize = accesses.windows.cells.iter().map(Vec::len).sum();
    let start = Instant::now();
    let outcome = simulate(&accesses, &machine, &schedule, &params.model);
    let sim_s = start.elapsed().as_secs_f64();
    std::hint::black_box(outcome);
    println!(
        "{plan_s} {sim_s} {} {}",
        cells as f64 / sim_s,
        peak_rss_mib()
    );
}

fn child_write(n: u64, dir: &Path) {
    let meta = Meta::new(
        vec!["place_bench".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "bench".into(),
            kernel: String::new(),
            arch: std::env::consts::ARCH.into(),
        },
        Clock {
            name: "synthetic".into(),
            origin_ns: 0,
        },
    );
    let mut writer = ProfileWriter::create(dir, meta).unwrap();
    let config = SynthConfig {
        block_bytes: 8 << 20,
        shared_bytes: 2 << 20,
        ..SynthConfig::default()
    };
    for s in SynthSamples::new(config).take(n as usize) {
        writer.push_sample(s).unwrap();
    }
    writer
        .finish(Completeness {
            complete: true,
            exit: None,
            reasons: vec![],
        })
        .unwrap();
}

fn child_load(dir: &Path) {
    let profile = Profile::open(dir).unwrap();
    let start = Instant::now();
    let a = load(&profile, &LoadOptions::default()).unwrap();
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(a);
    println!("{secs} {}", peak_rss_mib());
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}
