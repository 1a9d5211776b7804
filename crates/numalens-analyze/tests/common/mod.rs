//! A small profile with known objects, threads, samples and page placement, written with the
//! format's own writer. `tests/model.rs` spells out what the report must say about it.

use std::path::Path;
use std::sync::Arc;

use arrow_array::types::UInt8Type;
use arrow_array::{ArrayRef, DictionaryArray, RecordBatch, UInt32Array, UInt64Array};
use numalens_format::{
    Backend, Clock, Completeness, Host, Meta, Object, ObjectKind, PageNodes, ProfileWriter,
    ProgramExit, Row, Sample, SiteFrame, Thread,
};

pub const PID: u32 = 100;
pub const GRID: u64 = 0x10000;
pub const TABLE: u64 = 0x40000;
pub const SMALL: u64 = 0x90000;
pub const SITE: u64 = 0xabc;
/// A thread that samples name but the threads table does not have.
pub const STRAY_TID: u32 = 999;

/// The meta.json of a `faults` recording of `command` on a plain x86-64 host.
pub fn faults_meta(command: &[&str]) -> Meta {
    Meta::new(
        command.iter().map(|a| a.to_string()).collect(),
        Backend {
            name: "faults".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "box".into(),
            kernel: "6.1.0".into(),
            arch: "x86_64".into(),
        },
        Clock {
            name: "CLOCK_MONOTONIC".into(),
            origin_ns: 0,
        },
    )
}

/// Writes the fixture profile into `dir`.
pub fn write_fixture(dir: &Path) {
    let mut meta = faults_meta(&["./app", "--size", "8"]);
    meta.backend.settings = [("sample_period".to_string(), 1.into())].into();
    meta.start_unix_ns = 1_700_000_000_000_000_000;
    meta.lost_samples = 3;
    let mut w = ProfileWriter::create(dir, meta).unwrap();
    for row in threads() {
        w.push_thread(row).unwrap();
    }
    for row in objects() {
        w.push_object(row).unwrap();
    }
    for row in site_frames() {
        w.push_site_frame(row).unwrap();
    }
    for row in samples() {
        w.push_sample(row).unwrap();
    }
    for row in page_nodes() {
        w.push_page_nodes(row).unwrap();
    }
    w.finish(Completeness {
        complete: true,
        exit: Some(ProgramExit {
            code: Some(0),
            signal: None,
        }),
        reasons: vec![],
    })
    .unwrap();
}

fn threads() -> Vec<Thread> {
    (0..3)
        .map(|t| Thread {
            pid: PID,
            tid: PID + t,
            logical_id: t,
            name: Some(if t == 0 { "app" } else { "worker" }.into()),
            start_routine: (t > 0).then_some(0x401000),
            create_ns: 10 * t as u64,
            exit_ns: (t > 0).then_some(900),
            parent_tid: (t > 0).then_some(PID),
        })
        .collect()
}

fn object(id: u64, kind: ObjectKind, name: &str, start: u64, size: u64) -> Object {
    Object {
        object_id: id,
        pid: PID,
        kind,
        name: name.into(),
        start,
        size,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: None,
        site_key: None,
    }
}

fn objects() -> Vec<Object> {
    let grid = Object {
        alloc_tid: Some(PID),
        alloc_ns: 5,
        site_key: Some(SITE),
        ..object(0, ObjectKind::Heap, "grid (main.c:10)", GRID, 0x8000)
    };
    vec![
        grid,
        object(1, ObjectKind::Static, "table", TABLE, 0x2000),
        object(2, ObjectKind::Stack, "stack[T1]", 0x80000, 0x4000),
        object(3, ObjectKind::Heap, "small", SMALL, 64),
    ]
}

fn site_frames() -> Vec<SiteFrame> {
    let frame = |depth, module: &str, function: Option<&str>, at: Option<(&str, u32)>| SiteFrame {
        site_key: SITE,
        depth,
        module: module.into(),
        offset: 0x100 * (depth as u64 + 1),
        function: function.map(Into::into),
        file: at.map(|(f, _)| f.into()),
        line: at.map(|(_, l)| l),
    };
    vec![
        frame(2, "/app", Some("main"), Some(("main.c", 10))),
        frame(0, "/lib/libc.so.6", None, None),
        frame(1, "/app", Some("make_grid"), Some(("grid.c", 42))),
    ]
}

/// One sample, decoded from a one-row batch by the format's own reader, so that the fixture
/// only names the columns it cares about (later minor versions add optional ones).
fn sample(
    tid: u32,
    kind: &str,
    address: u64,
    object: Option<u64>,
    node: Option<u32>,
    weight: u32,
) -> Sample {
    let u32s = |v: Option<u32>| Arc::new(UInt32Array::from(vec![v])) as ArrayRef;
    let u64s = |v: Option<u64>| Arc::new(UInt64Array::from(vec![v])) as ArrayRef;
    let label = |v: &str| Arc::new(DictionaryArray::<UInt8Type>::from_iter([v])) as ArrayRef;
    let batch = RecordBatch::try_from_iter([
        ("time_ns", u64s(Some(address & 0xffff))),
        ("pid", u32s(Some(PID))),
        ("tid", u32s(Some(tid))),
        ("cpu", u32s(None)),
        ("address", u64s(Some(address))),
        ("kind", label(kind)),
        ("weight", u32s(Some(weight))),
        ("object_id", u64s(object)),
        ("node", u32s(node)),
        ("data_source", label("unknown")),
        ("latency", u32s(None)),
        ("ip", u64s(None)),
    ])
    .unwrap();
    Sample::from_batch(&batch, Path::new("fixture"))
        .unwrap()
        .remove(0)
}

fn samples() -> Vec<Sample> {
    let (t0, t1, t2) = (PID, PID + 1, PID + 2);
    let mut rows = Vec::new();
    for page in 0..8u64 {
        let (tid, node) = if page < 4 { (t1, 0) } else { (t2, 1) };
        rows.push(sample(
            tid,
            "first-touch",
            GRID + page * 4096,
            Some(0),
            Some(node),
            1,
        ));
    }
    for page in 0..2u64 {
        rows.push(sample(
            t0,
            "first-touch",
            TABLE + page * 4096,
            Some(1),
            Some(0),
            1,
        ));
    }
    for i in 0..3 {
        rows.push(sample(t0, "load", GRID + 64 * i, Some(0), Some(0), 100));
    }
    for i in 0..2 {
        rows.push(sample(
            t2,
            "store",
            GRID + 0x4000 + 64 * i,
            Some(0),
            Some(1),
            100,
        ));
    }
    rows.push(sample(t1, "fault", 0x700000, None, None, 1));
    rows.push(sample(STRAY_TID, "load", TABLE + 8, Some(1), Some(0), 1));
    rows
}

fn page_run(time_ns: u64, start: u64, pages: u64, node: Option<u32>, status: &str) -> PageNodes {
    PageNodes {
        time_ns,
        pid: PID,
        start,
        pages,
        page_size: 4096,
        node,
        status: status.into(),
        source: if time_ns < 20 { "scan" } else { "exit" }.into(),
    }
}

fn page_nodes() -> Vec<PageNodes> {
    vec![
        // The exit query moves the second half of the grid to node 1 after the scan.
        page_run(20, GRID, 4, Some(0), ""),
        page_run(21, GRID + 0x4000, 4, Some(1), ""),
        page_run(10, GRID, 8, Some(0), ""),
        page_run(22, TABLE, 1, Some(0), ""),
        page_run(22, TABLE + 0x1000, 1, None, "untouched"),
        page_run(23, SMALL, 1, Some(1), ""),
        page_run(24, 0x100000, 3, None, "EFAULT"),
    ]
}
