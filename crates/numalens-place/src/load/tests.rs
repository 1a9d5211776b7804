use numalens_format::synth::example_meta;
use numalens_format::{
    Completeness, DataSource, Profile, ProfileWriter, Sample, SampleKind, Thread,
};

use super::{LoadOptions, load};
use crate::accesses::{Accesses, CountSource};

const PID: u32 = 500;
const PAGE: u64 = 4096;
const BASE: u64 = 0x10_0000_0000;

fn sample(time_ns: u64, tid: u32, page: u64, kind: SampleKind, weight: u32) -> Sample {
    Sample {
        time_ns,
        pid: PID,
        tid,
        cpu: None,
        address: BASE + page * PAGE + 64,
        kind,
        weight,
        object_id: None,
        node: Some(tid - PID),
        data_source: DataSource::Unknown,
        latency: None,
        ip: None,
        page_size: Some(PAGE as u32),
        snoop: None,
    }
}

/// A profile of two threads: thread 0 first-touches four pages, thread 1 reads two of them
/// (when `loads`, as load samples of weight 100).
fn write_profile(dir: &std::path::Path, loads: bool) -> Profile {
    let mut meta = example_meta("stripes", "monotonic");
    meta.page_size = PAGE;
    let mut w = ProfileWriter::create(dir, meta).unwrap();
    for t in 0..2 {
        w.push_thread(Thread {
            pid: PID,
            tid: PID + t,
            logical_id: t,
            name: None,
            start_routine: None,
            create_ns: 0,
            exit_ns: None,
            parent_tid: None,
        })
        .unwrap();
    }
    for page in 0..4 {
        w.push_sample(sample(1_000 + page, PID, page, SampleKind::FirstTouch, 1))
            .unwrap();
    }
    // A copy-on-write fault and a hint: faults too, not accesses beside loads.
    w.push_sample(sample(2_000, PID + 1, 3, SampleKind::Fault, 1))
        .unwrap();
    w.push_sample(sample(2_100, PID + 1, 2, SampleKind::Hint, 1))
        .unwrap();
    if loads {
        for page in 0..2 {
            w.push_sample(sample(3_000 + page, PID + 1, page, SampleKind::Load, 100))
                .unwrap();
        }
    }
    finished(w, dir)
}

/// The profile `w` wrote into `dir`, finished as a complete recording.
fn finished(w: ProfileWriter, dir: &std::path::Path) -> Profile {
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    })
    .unwrap();
    Profile::open(dir).unwrap()
}

/// (page number, logical thread, reads, writes, other) of every cell, whatever the window.
fn cells(a: &Accesses) -> Vec<(u64, u32, u64, u64, u64)> {
    let mut all: Vec<_> = a
        .windows
        .cells
        .iter()
        .flatten()
        .map(|c| {
            let page = a.pages[c.page as usize].number - BASE / PAGE;
            let thread = a.threads[c.thread as usize].logical_id;
            (page, thread, c.reads, c.writes, c.other)
        })
        .collect();
    all.sort();
    all
}

#[test]
fn beside_load_samples_faults_are_not_accesses_but_still_say_who_placed_each_page() {
    let dir = tempfile::tempdir().unwrap();
    let a = load(&write_profile(dir.path(), true), &LoadOptions::default()).unwrap();
    assert_eq!(a.source, CountSource::Sampled);
    assert_eq!(cells(&a), vec![(0, 1, 100, 0, 0), (1, 1, 100, 0, 0)]);
    assert_eq!(a.total(), 200);
    // All four pages stay, placed by thread 0, on the node its fault saw.
    assert_eq!(a.pages.len(), 4);
    for p in &a.pages {
        let toucher = p.first_toucher.map(|t| a.threads[t as usize].logical_id);
        assert_eq!(toucher, Some(0), "page {}", p.number);
        assert_eq!(p.recorded_node, Some(0));
    }
    assert_eq!(a.sample_period, 100);
}

#[test]
fn a_profile_of_faults_alone_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let a = load(&write_profile(dir.path(), false), &LoadOptions::default()).unwrap();
    assert_eq!(a.source, CountSource::Sampled);
    assert_eq!(
        cells(&a),
        vec![
            (0, 0, 0, 0, 1),
            (1, 0, 0, 0, 1),
            (2, 0, 0, 0, 1),
            (2, 1, 0, 0, 1),
            (3, 0, 0, 0, 1),
            (3, 1, 0, 0, 1),
        ]
    );
}

#[test]
fn a_large_page_belongs_to_the_object_of_its_earliest_exact_row_whatever_the_rows_order() {
    const HUGE: u64 = 2 << 20;
    let dir = tempfile::tempdir().unwrap();
    let mut meta = example_meta("huge", "monotonic");
    meta.page_size = HUGE;
    let mut w = ProfileWriter::create(dir.path(), meta).unwrap();
    for id in [1, 2] {
        w.push_object(numalens_format::Object {
            object_id: id,
            pid: PID,
            kind: numalens_format::ObjectKind::Heap,
            name: format!("o{id}"),
            start: BASE + (id - 1) * 4096,
            size: 4096,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: Some(PID),
            site_key: None,
        })
        .unwrap();
    }
    // Two 4 KiB pages of one huge page: the later first access written first.
    for (sub, first, object) in [(1, 500, 2), (0, 100, 1)] {
        w.push_page_stat(numalens_format::PageStat {
            pid: PID,
            tid: PID,
            page: BASE + sub * 4096,
            reads: 10,
            writes: 0,
            first_access_ns: first,
            object_id: Some(object),
        })
        .unwrap();
    }
    let a = load(&finished(w, dir.path()), &LoadOptions::default()).unwrap();
    assert_eq!(a.pages.len(), 1);
    let object = a.pages[0].object.map(|o| a.objects[o as usize].id);
    assert_eq!(object, Some(1));
    assert_eq!(a.pages[0].first_ns, 100);
}
