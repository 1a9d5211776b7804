//! Objects allocated at one site are one group of the model: 40 buffers from one call site,
//! first touched by four threads, beside a static and a buffer of another site.

#[allow(dead_code)] // only its meta.json is used here, not the fixture
mod common;

use numalens_analyze::{Options, analyze};
use numalens_format::{
    Completeness, DataSource, Object, ObjectKind, Profile, ProfileWriter, Sample, SampleKind,
    SiteFrame, Thread,
};

const PID: u32 = 7;
const BUFFERS: u64 = 40;
const BUFFER: u64 = 0x2000;
const SLAB_SITE: u64 = 0x51ab;
const OTHER_SITE: u64 = 0x07e4;

fn object(object_id: u64, kind: ObjectKind, start: u64, size: u64, site: u64) -> Object {
    Object {
        object_id,
        pid: PID,
        kind,
        name: format!("site{site:x}"),
        start,
        size,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: Some(PID),
        site_key: Some(site),
    }
}

fn sample(tid: u32, address: u64, kind: SampleKind, object_id: u64) -> Sample {
    Sample {
        time_ns: address & 0xfff_ffff,
        pid: PID,
        tid,
        cpu: None,
        address,
        kind,
        weight: 1,
        object_id: Some(object_id),
        node: None,
        data_source: DataSource::Unknown,
        latency: None,
        ip: None,
        page_size: None,
        snoop: None,
    }
}

fn write(dir: &std::path::Path) {
    let mut w = ProfileWriter::create(dir, common::faults_meta(&["./server"])).unwrap();
    for t in 0..4 {
        w.push_thread(Thread {
            pid: PID,
            tid: PID + t,
            logical_id: t,
            name: None,
            start_routine: None,
            create_ns: t as u64,
            exit_ns: None,
            parent_tid: None,
        })
        .unwrap();
    }
    let slab = |i: u64| 0x100_0000 + i * BUFFER;
    for i in 0..BUFFERS {
        w.push_object(object(i, ObjectKind::Heap, slab(i), BUFFER, SLAB_SITE))
            .unwrap();
    }
    w.push_object(object(
        100,
        ObjectKind::Heap,
        0x900_0000,
        0x10000,
        OTHER_SITE,
    ))
    .unwrap();
    // A static carries its definition as its site; it stays alone whatever the key.
    w.push_object(object(
        101,
        ObjectKind::Static,
        0x60_0000,
        0x1000,
        SLAB_SITE,
    ))
    .unwrap();
    w.push_site_frame(SiteFrame {
        site_key: SLAB_SITE,
        depth: 0,
        module: "/usr/bin/server".into(),
        offset: 0x11d1d,
        function: None,
        file: None,
        line: None,
    })
    .unwrap();
    for i in 0..BUFFERS {
        let tid = PID + (i % 4) as u32;
        w.push_sample(sample(tid, slab(i), SampleKind::FirstTouch, i))
            .unwrap();
        for n in 0..(1 + i % 3) {
            w.push_sample(sample(tid, slab(i) + 64 * n, SampleKind::Load, i))
                .unwrap();
        }
    }
    for n in 0..200 {
        w.push_sample(sample(PID, 0x900_0000 + 8 * n, SampleKind::Store, 100))
            .unwrap();
    }
    w.push_sample(sample(PID, 0x60_0000, SampleKind::Load, 101))
        .unwrap();
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    })
    .unwrap();
}

#[test]
fn forty_buffers_of_one_site_are_one_group_with_forty_members() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.numalens");
    write(&path);
    let model = analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap();
    // The per-object list is as before: the top 20 objects.
    assert_eq!(model.objects.len(), 20);
    assert_eq!(model.totals.objects_ranked, 42);
    assert_eq!(model.groups.len(), 3, "{:#?}", model.groups);
    let other = &model.groups[0];
    assert_eq!((other.instances, other.members.as_slice()), (1, &[100][..]));
    assert_eq!(other.accesses, 200);
    let slabs = &model.groups[1];
    assert_eq!(slabs.instances, BUFFERS);
    assert_eq!(slabs.size, BUFFERS * BUFFER);
    assert_eq!(slabs.members.len(), 40);
    // 1, 2 or 3 loads each (their first touches say who placed them, and are no accesses
    // beside load samples): 14 × 1 + 13 × 2 + 13 × 3.
    assert_eq!(slabs.accesses, 14 + 26 + 39);
    assert_eq!(slabs.site.as_ref().unwrap().location.offset, 0x11d1d);
    let spread: Vec<(usize, u64)> = slabs
        .first_touchers
        .iter()
        .map(|c| (c.thread, c.instances))
        .collect();
    assert_eq!(spread, [(0, 10), (1, 10), (2, 10), (3, 10)]);
    // Members best first, and the largest described one by one.
    let first = &slabs.largest[0];
    assert_eq!(first.accesses, 3);
    assert_eq!(slabs.largest.len(), 8);
    let statics = &model.groups[2];
    assert_eq!((statics.kind.as_str(), statics.instances), ("static", 1));
    let json = serde_json::to_value(&model).unwrap();
    assert_eq!(json["groups"][1]["members"].as_array().unwrap().len(), 40);
    assert_eq!(json["objects"].as_array().unwrap().len(), 20);
}
