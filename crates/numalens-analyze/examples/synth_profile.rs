//! Writes a synthetic profile for benchmarks: `synth_profile DIR [SAMPLES]` (default 10 M), or
//! `synth_profile DIR --page-stats PAGES` for exact counts.
//!
//! Samples come from the format's generator (8 threads streaming through private blocks with a
//! shared hot region), with the threads and objects they refer to. With `--page-stats`, each of
//! 8 threads gets exact counts on `PAGES / 8` pages of its own block and on every page of a
//! 16 MiB shared region, and no samples.

use std::path::Path;

use numalens_format::synth::{BASE_ADDRESS, SynthConfig, write_example_profile};
use numalens_format::{
    Backend, Clock, Completeness, Host, Meta, Object, ObjectKind, PageStat, ProfileWriter,
    ProgramExit, Thread,
};

fn meta() -> Meta {
    Meta::new(
        vec!["synth_profile".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "bench".into(),
            kernel: "-".into(),
            arch: std::env::consts::ARCH.into(),
        },
        Clock {
            name: "synthetic".into(),
            origin_ns: 0,
        },
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: synth_profile DIR [SAMPLES | --page-stats PAGES]");
        std::process::exit(2);
    };
    let result = if args.get(2).map(String::as_str) == Some("--page-stats") {
        let pages = args
            .get(3)
            .map_or(1 << 20, |n| n.parse().expect("PAGES is a number"));
        page_stats_profile(Path::new(dir), pages)
    } else {
        let samples = args
            .get(2)
            .map_or(10_000_000, |n| n.parse().expect("SAMPLES is a number"));
        write_example_profile(Path::new(dir), SynthConfig::default(), samples, meta()).map(|_| ())
    };
    if let Err(e) = result {
        eprintln!("synth_profile: {e}");
        std::process::exit(1);
    }
}

fn page_stats_profile(dir: &Path, pages: u64) -> numalens_format::Result<()> {
    const THREADS: u32 = 8;
    const PID: u32 = 4242;
    let shared = 16 << 20;
    let per_thread = pages / THREADS as u64;
    let block = per_thread * 4096;
    let mut w = ProfileWriter::create(dir, meta())?;
    let object = |id: u64, name: String, start: u64, size: u64| Object {
        object_id: id,
        pid: PID,
        kind: ObjectKind::Heap,
        name,
        start,
        size,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: Some(PID),
        site_key: None,
    };
    w.push_object(object(0, "shared".into(), BASE_ADDRESS, shared))?;
    for t in 0..THREADS {
        w.push_thread(Thread {
            pid: PID,
            tid: PID + t,
            logical_id: t,
            name: Some(format!("worker-{t}")),
            start_routine: None,
            create_ns: 0,
            exit_ns: None,
            parent_tid: (t > 0).then_some(PID),
        })?;
        let start = BASE_ADDRESS + shared + t as u64 * block;
        w.push_object(object(1 + t as u64, format!("block[{t}]"), start, block))?;
    }
    for t in 0..THREADS {
        let stat = |page: u64, object: u64, n: u64| PageStat {
            pid: PID,
            tid: PID + t,
            page,
            reads: 3 * n,
            writes: n,
            first_access_ns: page % 1_000_000,
            object_id: Some(object),
        };
        for p in 0..shared / 4096 {
            w.push_page_stat(stat(BASE_ADDRESS + p * 4096, 0, 16 + t as u64))?;
        }
        let start = BASE_ADDRESS + shared + t as u64 * block;
        for p in 0..per_thread {
            w.push_page_stat(stat(start + p * 4096, 1 + t as u64, 256))?;
        }
    }
    w.finish(Completeness {
        complete: true,
        exit: Some(ProgramExit {
            code: Some(0),
            signal: None,
        }),
        reasons: vec![],
    })?;
    Ok(())
}
