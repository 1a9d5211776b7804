//! Small profiles with exactly known accesses, one per placement pattern of docs/FINDINGS.md,
//! written with the format's own writer: `fixture_profiles DIR` writes `DIR/<name>.numalens` for
//! each. The analysis tests build them too (this file is included there) and
//! `tests/fixtures/` holds a committed copy for the JSON snapshots.
//!
//! Four threads (logical 0-3, tid 1000 + i), 4 KiB pages, exact `page_stats` counts unless a
//! scenario says otherwise.

use std::path::Path;

use numalens_format::{
    Backend, Clock, Completeness, DataSource, Host, Meta, Object, ObjectKind, PageStat,
    ProfileWriter, ProgramExit, Sample, SampleKind, SiteFrame, Thread,
};

pub const PID: u32 = 1000;
pub const PAGE: u64 = 4096;
pub const THREADS: u32 = 4;
const BASE: u64 = 0x10_0000;

/// A profile being described.
#[derive(Default)]
pub struct Scenario {
    pub objects: Vec<Object>,
    pub stats: Vec<PageStat>,
    pub samples: Vec<Sample>,
    /// The backend's settings the profile records (`sample_every`, ...).
    pub settings: std::collections::BTreeMap<String, serde_json::Value>,
    /// Frames of the objects' allocation sites.
    pub sites: Vec<SiteFrame>,
}

impl Scenario {
    /// A heap object of `pages` pages (or `bytes` when given), allocated by thread 0; returns
    /// its first address.
    pub fn object(&mut self, name: &str, size: u64) -> u64 {
        let start = self
            .objects
            .last()
            .map_or(BASE, |o| (o.start + o.size).next_multiple_of(PAGE) + PAGE);
        self.objects.push(Object {
            object_id: self.objects.len() as u64,
            pid: PID,
            kind: ObjectKind::Heap,
            name: name.into(),
            start,
            size,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: Some(PID),
            site_key: None,
        });
        start
    }

    /// Exact counts of logical thread `t` on the page at `address`.
    pub fn count(&mut self, t: u32, address: u64, reads: u64, writes: u64, first_ns: u64) {
        let object = self
            .objects
            .iter()
            .find(|o| o.start <= address && address < o.start + o.size.max(1))
            .map(|o| o.object_id);
        self.stats.push(PageStat {
            pid: PID,
            tid: PID + t,
            page: address / PAGE * PAGE,
            reads,
            writes,
            first_access_ns: first_ns,
            object_id: object,
        });
    }

    /// One sample of logical thread `t`.
    pub fn sample(&mut self, t: u32, time_ns: u64, address: u64, store: bool, weight: u32) {
        let object = self
            .objects
            .iter()
            .find(|o| o.start <= address && address < o.start + o.size.max(1))
            .map(|o| o.object_id);
        self.samples.push(Sample {
            time_ns,
            pid: PID,
            tid: PID + t,
            cpu: None,
            address,
            kind: if store {
                SampleKind::Store
            } else {
                SampleKind::Load
            },
            weight,
            object_id: object,
            node: None,
            data_source: DataSource::Unknown,
            latency: None,
            ip: None,
            page_size: Some(PAGE as u32),
            snoop: None,
        });
    }

    /// The analysis of this profile (written to a temporary directory), with default options.
    pub fn analyzed(self) -> numalens_analyze::model::ReportModel {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.numalens");
        self.write(&path).unwrap();
        let profile = numalens_format::Profile::open(&path).unwrap();
        numalens_analyze::analyze(&profile, &numalens_analyze::Options::default()).unwrap()
    }

    pub fn write(mut self, dir: &Path) -> numalens_format::Result<()> {
        let mut meta = Meta::new(
            vec!["./fixture".into()],
            Backend {
                name: "inst".into(),
                settings: std::mem::take(&mut self.settings),
            },
            Host {
                hostname: "fixture".into(),
                kernel: "6.1.0".into(),
                arch: "x86_64".into(),
            },
            Clock {
                name: "CLOCK_MONOTONIC".into(),
                origin_ns: 0,
            },
        );
        meta.start_unix_ns = 1_700_000_000_000_000_000;
        let mut w = ProfileWriter::create(dir, meta)?;
        for t in 0..THREADS {
            w.push_thread(Thread {
                pid: PID,
                tid: PID + t,
                logical_id: t,
                name: Some(format!("t{t}")),
                start_routine: None,
                create_ns: t as u64,
                exit_ns: None,
                parent_tid: (t > 0).then_some(PID),
            })?;
        }
        for o in self.objects.drain(..) {
            w.push_object(o)?;
        }
        for f in self.sites.drain(..) {
            w.push_site_frame(f)?;
        }
        self.samples.sort_by_key(|s| (s.tid, s.time_ns));
        for s in self.samples {
            w.push_sample(s)?;
        }
        for s in self.stats {
            w.push_page_stat(s)?;
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
}

/// Pages of an object of `pages` pages.
fn pages(start: u64, n: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..n).map(move |p| (p, start + p * PAGE))
}

/// The block owner of page `p` of `n` pages.
fn owner(p: u64, n: u64) -> u32 {
    (p * THREADS as u64 / n) as u32
}

/// Arrays initialised by the threads that use them: no finding.
pub fn private_blocks() -> Scenario {
    let mut s = Scenario::default();
    let a = s.object("a", 64 * PAGE);
    for (p, at) in pages(a, 64) {
        s.count(owner(p, 64), at, 2048, 1024, 10 + p);
    }
    s
}

/// Thread 0 initialises every page, each thread then works on its block.
pub fn master_init() -> Scenario {
    let mut s = Scenario::default();
    let grid = s.object("grid", 64 * PAGE);
    for (p, at) in pages(grid, 64) {
        let t = owner(p, 64);
        if t == 0 {
            s.count(0, at, 2560, 2560, p);
        } else {
            s.count(0, at, 0, 512, p);
            s.count(t, at, 2560, 2048, 1000 + p);
        }
    }
    s
}

/// Thread 0 fills it, every thread reads all of it.
pub fn shared_readonly() -> Scenario {
    let mut s = Scenario::default();
    let db = s.object("db", 32 * PAGE);
    for (p, at) in pages(db, 32) {
        s.count(0, at, 1024, 512, p);
        for t in 1..THREADS {
            s.count(t, at, 1024, 0, 1000 + p);
        }
    }
    s
}

/// Every thread reads and writes every page, evenly.
pub fn shared_rw() -> Scenario {
    let mut s = Scenario::default();
    let points = s.object("points", 32 * PAGE);
    for (p, at) in pages(points, 32) {
        for t in 0..THREADS {
            s.count(t, at, 1152, 1024, 100 * t as u64 + p);
        }
    }
    s
}

/// A band of pages in the middle is used by every thread many times; the rest by its owner.
pub fn hotspot() -> Scenario {
    let mut s = Scenario::default();
    let buff = s.object("key_buff1", 64 * PAGE);
    for (p, at) in pages(buff, 64) {
        let t = owner(p, 64);
        if (24..40).contains(&p) {
            for u in 0..THREADS {
                let init = if u == t { 512 } else { 0 };
                s.count(
                    u,
                    at,
                    4000 + init,
                    4000 + init,
                    if u == t { p } else { 1000 + p },
                );
            }
        } else {
            s.count(t, at, 512, 512, p);
        }
    }
    s
}

/// Each thread its rows (one page each); the first and last row of a block are read by the
/// neighbouring thread.
pub fn stencil() -> Scenario {
    stencil_with_edge_reads(2048)
}

/// `stencil()` whose neighbours read each edge page `reads` times.
pub fn stencil_with_edge_reads(reads: u64) -> Scenario {
    let mut s = Scenario::default();
    let u = s.object("u", 64 * PAGE);
    for (p, at) in pages(u, 64) {
        let t = owner(p, 64);
        s.count(t, at, 6144, 2560, p);
        let block = p % 16;
        if block == 0 && t > 0 {
            s.count(t - 1, at, reads, 0, 1000 + p);
        }
        if block == 15 && t + 1 < THREADS {
            s.count(t + 1, at, reads, 0, 1000 + p);
        }
    }
    s
}

/// Block b to thread b, then block b to thread b - 1 (mod 4), equally long.
pub fn phases() -> Scenario {
    let mut s = Scenario::default();
    let field = s.object("field", 64 * PAGE);
    for (p, at) in pages(field, 64) {
        let t = owner(p, 64);
        let next = (t + THREADS - 1) % THREADS;
        s.count(t, at, 2304, 2304, p);
        s.count(next, at, 2048, 2048, 1_000_000 + p);
    }
    s
}

/// One counter per thread in one page, each written a million times.
pub fn false_sharing() -> Scenario {
    let mut s = Scenario::default();
    let counters = s.object("counters", PAGE);
    for t in 0..THREADS {
        s.count(t, counters, 1 << 20, 1 << 20, t as u64);
    }
    s
}

/// An array of `pages` pages that thread 0 touches first and every thread then uses in its
/// block, allocated at `site`: (function, file, line).
pub fn master_initialised(s: &mut Scenario, name: &str, pages: u64, site: (&str, &str, u32)) {
    let start = s.object(name, pages * PAGE);
    let key = 0x5000 + s.objects.len() as u64;
    s.objects.last_mut().unwrap().site_key = Some(key);
    s.sites.push(SiteFrame {
        site_key: key,
        depth: 0,
        module: "/opt/lulesh/lulesh2.0".into(),
        offset: 0x4000 + u64::from(site.2),
        function: Some(site.0.into()),
        file: Some(site.1.into()),
        line: Some(site.2),
    });
    for p in 0..pages {
        let at = start + p * PAGE;
        let t = (p * u64::from(THREADS) / pages) as u32;
        s.count(0, at, 0, 512, p);
        if t != 0 {
            s.count(t, at, 2560, 2048, 1000 + p);
        }
    }
}

/// Six such arrays allocated one after another in one function, as LULESH's
/// `Domain::AllocateNodePersistent(int)` does (lulesh.h:166-172), and a larger one of another
/// function.
pub fn allocated_in_one_function() -> Scenario {
    let mut s = Scenario::default();
    let allocator = "Domain::AllocateNodePersistent(int)";
    for (i, line) in [166, 167, 168, 170, 171, 172].into_iter().enumerate() {
        let name = format!("m_{}", ["x", "y", "z", "xd", "yd", "zd"][i]);
        master_initialised(
            &mut s,
            &name,
            16 + 4 * i as u64,
            (allocator, "lulesh.h", line),
        );
    }
    let other = ("Domain::Domain(int)", "lulesh.cc", 2700);
    master_initialised(&mut s, "m_elemMass", 120, other);
    s
}

/// Thread 0 allocates 256-byte records for all threads in turn; each thread uses its own.
pub fn many_small() -> Scenario {
    let mut s = Scenario::default();
    let first = BASE;
    for r in 0..256u64 {
        s.objects.push(Object {
            object_id: r,
            pid: PID,
            kind: ObjectKind::Heap,
            name: "record (many.c:12)".into(),
            start: first + 256 * r,
            size: 256,
            alloc_ns: r,
            free_ns: None,
            alloc_tid: Some(PID),
            site_key: Some(0x5eed),
        });
    }
    for p in 0..16u64 {
        let at = first + p * PAGE;
        s.count(0, at, 0, 512, p);
        for t in 1..THREADS {
            s.count(t, at, 640, 496, 1000 + p);
        }
    }
    s
}

/// Every scenario by name.
pub fn all() -> Vec<(&'static str, Scenario)> {
    vec![
        ("private-blocks", private_blocks()),
        ("master-init", master_init()),
        ("shared-readonly", shared_readonly()),
        ("shared-rw", shared_rw()),
        ("hotspot", hotspot()),
        ("stencil", stencil()),
        ("phases", phases()),
        ("false-sharing", false_sharing()),
        ("many-small", many_small()),
    ]
}

#[allow(dead_code)]
fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: fixture_profiles DIR");
        std::process::exit(2);
    };
    for (name, scenario) in all() {
        let path = Path::new(&dir).join(format!("{name}.numalens"));
        let _ = std::fs::remove_dir_all(&path);
        if let Err(e) = scenario.write(&path) {
            eprintln!("fixture_profiles: {e}");
            std::process::exit(1);
        }
    }
}
