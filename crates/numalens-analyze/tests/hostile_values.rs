//! A profile whose tables hold values no recording makes (sizes and counts at the ends of their
//! types, addresses at the top of the address space, ids far beyond the rows): the analysis
//! reads it without panicking and without allocating in proportion to those numbers.

#[allow(dead_code)] // only its meta.json is used here, not the fixture
mod common;

use std::path::Path;

use numalens_analyze::{Options, WhatIf, analyze};
use numalens_format::{
    Completeness, DataSource, Meta, Object, ObjectKind, PageNodes, PageStat, Profile,
    ProfileWriter, Sample, SampleKind, Thread,
};

const PID: u32 = 7;

fn meta() -> Meta {
    common::faults_meta(&["./hostile"])
}

fn object(object_id: u64, start: u64, size: u64) -> Object {
    Object {
        object_id,
        pid: PID,
        kind: ObjectKind::Heap,
        name: format!("o{object_id}"),
        start,
        size,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: None,
        site_key: None,
    }
}

fn sample(tid: u32, address: u64, kind: SampleKind, object_id: Option<u64>) -> Sample {
    Sample {
        time_ns: u64::MAX,
        pid: PID,
        tid,
        cpu: Some(u32::MAX),
        address,
        kind,
        weight: u32::MAX,
        object_id,
        node: Some(u32::MAX),
        data_source: DataSource::Unknown,
        latency: Some(u32::MAX),
        ip: Some(u64::MAX),
        page_size: Some(u32::MAX),
        snoop: None,
    }
}

/// Finishes the profile as a complete recording.
fn finish(w: ProfileWriter) {
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    })
    .unwrap();
}

/// The what-if machine the analysis places threads and pages on: four nodes.
fn machine_a() -> WhatIf {
    WhatIf {
        name: "machine-a".into(),
        topology: numalens_topology::presets::preset("machine-a").unwrap(),
    }
}

fn write(dir: &Path) {
    let mut w = ProfileWriter::create(dir, meta()).unwrap();
    for (tid, logical_id) in [(1, 0), (2, u32::MAX)] {
        w.push_thread(Thread {
            pid: PID,
            tid,
            logical_id,
            name: None,
            start_routine: None,
            create_ns: u64::MAX,
            exit_ns: Some(0),
            parent_tid: Some(u32::MAX),
        })
        .unwrap();
    }
    let top = u64::MAX - 4095;
    for o in [
        object(0, top, u64::MAX),
        object(u64::MAX, 0, u64::MAX),
        object(5, 1 << 46, 1 << 46),
    ] {
        w.push_object(o).unwrap();
    }
    for kind in [SampleKind::FirstTouch, SampleKind::Load, SampleKind::Store] {
        for (tid, address, object_id) in [
            (1, u64::MAX, Some(0)),
            (2, top, Some(u64::MAX)),
            (1, 1 << 46, Some(5)),
            (3, (1 << 47) - 1, Some(5)),
            (1, 0, Some(12345)),
        ] {
            w.push_sample(sample(tid, address, kind, object_id))
                .unwrap();
        }
    }
    for tid in [1, 1, 2] {
        w.push_page_stat(PageStat {
            pid: PID,
            tid,
            page: top,
            reads: u64::MAX,
            writes: u64::MAX,
            first_access_ns: u64::MAX,
            object_id: Some(u64::MAX),
        })
        .unwrap();
    }
    for (start, pages, page_size) in [
        (0, u64::MAX, 4096),
        (top, 2, 4096),
        (1 << 46, 1, u64::MAX),
        (1 << 46, 1 << 40, 1 << 30),
    ] {
        w.push_page_nodes(PageNodes {
            time_ns: 0,
            pid: PID,
            start,
            pages,
            page_size,
            node: Some(u32::MAX),
            status: String::new(),
            source: "scan".into(),
        })
        .unwrap();
    }
    finish(w);
}

#[test]
fn extreme_values_are_analysed_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.numalens");
    write(&path);
    let profile = Profile::open(&path).unwrap();
    for options in [
        Options::default(),
        Options {
            thread: Some(u32::MAX),
            block_size: Some(1 << 30),
            ..Options::default()
        },
        Options {
            what_if: Some(machine_a()),
            ..Options::default()
        },
    ] {
        analyze(&profile, &options).unwrap();
    }
}

/// Found by the `profile_analyze` fuzz target: exact counts (all zero) of a thread that the
/// threads table does not have, and no other thread, put the placement report out of bounds.
#[test]
fn zero_counts_of_an_unknown_thread_and_no_threads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z.numalens");
    let mut w = ProfileWriter::create(&path, meta()).unwrap();
    w.push_page_stat(PageStat {
        pid: 0,
        tid: 0,
        page: 0,
        reads: 0,
        writes: 0,
        first_access_ns: 0,
        object_id: None,
    })
    .unwrap();
    finish(w);
    let profile = Profile::open(&path).unwrap();
    for block_size in [None, Some(2_546_034_989_334_855_680)] {
        let options = Options {
            block_size,
            ..Options::default()
        };
        analyze(&profile, &options).unwrap();
    }
}

/// Found by the `profile_analyze` fuzz target: page-node runs whose bytes on one node add up past
/// u64 (runs of many huge pages in several processes).
#[test]
fn page_runs_whose_bytes_add_up_past_u64() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.numalens");
    let mut w = ProfileWriter::create(&path, meta()).unwrap();
    for pid in [1, 2, 3] {
        w.push_page_nodes(PageNodes {
            time_ns: 0,
            pid,
            start: 0,
            pages: 1 << 51,
            page_size: 4096,
            node: Some(0),
            status: String::new(),
            source: "scan".into(),
        })
        .unwrap();
    }
    finish(w);
    analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap();
}

/// Found by the `profile_analyze` fuzz target: a thread whose local and remote accesses are each
/// near u64::MAX (exact counts of two pages, one first touched by another thread on another node
/// of the what-if machine).
#[test]
fn a_threads_local_and_remote_counts_add_up_past_u64() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.numalens");
    let mut w = ProfileWriter::create(&path, meta()).unwrap();
    for (tid, logical_id) in [(1, 0), (2, 1)] {
        w.push_thread(Thread {
            pid: PID,
            tid,
            logical_id,
            name: None,
            start_routine: None,
            create_ns: 0,
            exit_ns: None,
            parent_tid: None,
        })
        .unwrap();
    }
    // Page 0 first touched by thread 1, page 1 by thread 2; thread 1 reads both without end.
    for (tid, page, first_access_ns) in [(1, 0, 10), (2, 4096, 1), (1, 4096, 20)] {
        w.push_page_stat(PageStat {
            pid: PID,
            tid,
            page,
            reads: u64::MAX,
            writes: 0,
            first_access_ns,
            object_id: None,
        })
        .unwrap();
    }
    finish(w);
    let options = Options {
        what_if: Some(machine_a()),
        ..Options::default()
    };
    analyze(&Profile::open(&path).unwrap(), &options).unwrap();
}
