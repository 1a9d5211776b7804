//! Profiles written with the format's writer whose samples carry data sources, latencies and
//! snoop results: the recorded clock converts measured cycles for the comparison with the
//! model, and the measured findings keep to their documented minimum.

#[allow(dead_code)] // only its meta.json is used here, not the fixture
mod common;

use std::path::Path;

use numalens_analyze::{Options, ReportModel, analyze};
use numalens_format::{
    Completeness, DataSource, Object, ObjectKind, Profile, ProfileWriter, Sample, SampleKind,
    Snoop, Thread,
};

const PID: u32 = 7;

/// Machine A of the Lepers thesis as the recorded machine: 4 nodes, a published 2.5 GHz clock.
fn machine() -> numalens_topology::Topology {
    numalens_topology::presets::preset("machine-a").unwrap()
}

fn load(i: u64, node: u32, source: DataSource, latency: Option<u32>) -> Sample {
    Sample {
        time_ns: 1_000 + i * 1_000,
        pid: PID,
        tid: PID,
        cpu: Some(machine().nodes[0].cpus[0]),
        address: 0x10_0000 + i * 64,
        kind: SampleKind::Load,
        weight: 1000,
        object_id: Some(0),
        node: Some(node),
        data_source: source,
        latency,
        ip: Some(0x401000),
        page_size: Some(4096),
        snoop: Some(Snoop::Miss),
    }
}

/// A `pmu` profile on machine A with these samples of one thread on one heap object.
fn profile(dir: &Path, samples: impl IntoIterator<Item = Sample>) -> ReportModel {
    profile_with(dir, &[(0, "table", 0x10_0000)], samples)
}

/// The same with these heap objects of 1 MiB, `(id, name, start)`, listed in this order.
fn profile_with(
    dir: &Path,
    objects: &[(u64, &str, u64)],
    samples: impl IntoIterator<Item = Sample>,
) -> ReportModel {
    let mut meta = common::faults_meta(&["./measured"]);
    meta.backend.name = "pmu".into();
    meta.topology = Some(machine());
    let mut w = ProfileWriter::create(dir, meta).unwrap();
    w.push_thread(Thread {
        pid: PID,
        tid: PID,
        logical_id: 0,
        name: None,
        start_routine: None,
        create_ns: 0,
        exit_ns: None,
        parent_tid: None,
    })
    .unwrap();
    for &(object_id, name, start) in objects {
        w.push_object(Object {
            object_id,
            pid: PID,
            kind: ObjectKind::Heap,
            name: name.into(),
            start,
            size: 1 << 20,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: Some(PID),
            site_key: None,
        })
        .unwrap();
    }
    for s in samples {
        w.push_sample(s).unwrap();
    }
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    })
    .unwrap();
    analyze(&Profile::open(dir).unwrap(), &Options::default()).unwrap()
}

fn remote_samples(n: u64) -> Vec<Sample> {
    (0..n)
        .map(|i| load(i, 1, DataSource::RemoteDram, Some(500)))
        .collect()
}

fn measured(m: &ReportModel) -> Vec<&str> {
    m.findings
        .iter()
        .filter(|f| f.is_measured())
        .map(|f| f.id.as_str())
        .collect()
}

#[test]
fn the_recorded_clock_converts_measured_cycles_beside_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut samples = remote_samples(60);
    samples.extend((60..100).map(|i| load(i, 0, DataSource::LocalDram, Some(250))));
    let m = profile(&dir.path().join("p.numalens"), samples);
    let d = m.data_sources.as_ref().expect("pmu samples with sources");
    let model = numalens_place::Machine::from_topology(&machine()).latency_ns;
    let pair = |memory: u32| {
        d.node_pairs
            .iter()
            .find(|p| p.memory_node == memory)
            .unwrap()
    };
    assert_eq!(pair(1).mean_cycles, 500);
    assert_eq!(pair(1).measured_ns, Some(500.0 / 2.5));
    assert_eq!(pair(1).modelled_ns, Some(model[0][1]));
    assert_eq!(pair(0).modelled_ns, Some(model[0][0]));
    assert_eq!(pair(1).modelled_cycles, Some(model[0][1] * 2.5));
    assert_eq!(d.model.clock_ghz, Some(2.5));
    assert!(d.model.units.contains("2.5 GHz"), "{}", d.model.units);
    assert_eq!(d.model.topology, "machine-a");
    // Snoop results without a HITM: counted, and nothing to share.
    assert_eq!(d.totals.snoop_samples, 100);
    assert_eq!(d.totals.hitm(), 0);
    assert_eq!(measured(&m), vec!["measured-remote"]);
}

#[test]
fn the_remote_finding_needs_its_minimum_of_samples() {
    let dir = tempfile::tempdir().unwrap();
    let below = profile(&dir.path().join("below.numalens"), remote_samples(29));
    assert!(measured(&below).is_empty(), "{:?}", measured(&below));
    let at = profile(&dir.path().join("at.numalens"), remote_samples(30));
    assert_eq!(measured(&at), vec!["measured-remote"]);
    // What it rests on: the 30 samples with a source beyond the caches, the minimum they
    // passed, and the remote share's lower bound.
    let f = at.findings.iter().find(|f| f.is_measured()).unwrap();
    let b = f.basis.as_ref().unwrap();
    assert_eq!(b.data[0].kind, "data-source-samples");
    assert_eq!((b.data[0].count, b.data[0].unit.as_str()), (30, "samples"));
    let test = |m: &str| b.tests.iter().find(|t| t.measure == m).unwrap();
    let minimum = test("samples_beyond_caches");
    assert_eq!((minimum.value, minimum.threshold), (30.0, 30.0));
    let share = test("measured_remote_share");
    assert_eq!(
        (share.value, share.threshold, share.samples),
        (1.0, 0.2, Some(30))
    );
    assert!(share.lower_bound.unwrap() >= 0.2);
    assert_eq!(b.confidence, Some(0.95));
    let words = f.rests_on.as_deref().unwrap();
    assert!(words.starts_with("measured data sources"), "{words}");
    assert!(
        words.contains("30 samples with a measured data source"),
        "{words}"
    );
}

#[test]
fn samples_without_sources_give_no_section_and_no_measured_finding() {
    let dir = tempfile::tempdir().unwrap();
    let samples = (0..200).map(|i| Sample {
        latency: None,
        snoop: None,
        ..load(i, 1, DataSource::Unknown, None)
    });
    let m = profile(&dir.path().join("p.numalens"), samples);
    assert!(m.data_sources.is_none());
    assert!(measured(&m).is_empty());
    assert!(m.findings.iter().all(|f| !f.is_measured()));
}

#[test]
fn cache_hits_stay_out_of_the_node_pairs_and_hitm_needs_a_known_source() {
    let dir = tempfile::tempdir().unwrap();
    let mut samples = remote_samples(40);
    // L2 hits of node 1's pages, fast: beside the model's memory latency they would pull the
    // pair's mean down.
    samples.extend((40..80).map(|i| load(i, 1, DataSource::L2, Some(12))));
    // HITM loads whose source the hardware did not give: neither local nor remote.
    samples.extend((80..100).map(|i| Sample {
        snoop: Some(Snoop::Hitm),
        ..load(i, 1, DataSource::Unknown, None)
    }));
    let m = profile(&dir.path().join("p.numalens"), samples);
    let d = m.data_sources.as_ref().expect("pmu samples with sources");
    let pair = d.node_pairs.iter().find(|p| p.memory_node == 1).unwrap();
    assert_eq!((pair.samples, pair.mean_cycles), (40, 500));
    assert_eq!(d.totals.hitm(), 0);
}

#[test]
fn a_measured_finding_names_its_object_by_id_not_by_row() {
    let dir = tempfile::tempdir().unwrap();
    let samples = remote_samples(40).into_iter().map(|s| Sample {
        object_id: Some(1),
        address: s.address + (8 << 20),
        ..s
    });
    let objects = [(1, "counters", 0x90_0000), (0, "decoy", 0x10_0000)];
    let m = profile_with(&dir.path().join("p.numalens"), &objects, samples);
    let f = m
        .findings
        .iter()
        .find(|f| f.id == "measured-remote")
        .unwrap();
    assert_eq!((f.object.id, f.object.name.as_str()), (1, "counters"));
    // Its advice is listed with its object and the object's site group, as the others are.
    let o = m.objects.iter().find(|o| o.id == 1).unwrap();
    assert_eq!(o.access.as_ref().unwrap().advice, ["place-near-users"]);
    let g = m.groups.iter().find(|g| g.members.contains(&1));
    let g = g.unwrap_or_else(|| panic!("{:#?}", m.groups));
    assert_eq!(g.advice, ["place-near-users"]);
    let listing = m.groups.iter().filter(|g| !g.advice.is_empty()).count();
    assert_eq!(listing, 1, "{:#?}", m.groups);
}

#[test]
fn hitm_samples_at_the_end_of_time_are_matched_without_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let end = u64::MAX - 1_000;
    let store = Sample {
        time_ns: end - 500,
        tid: PID + 1,
        kind: SampleKind::Store,
        ..load(0, 0, DataSource::L1, None)
    };
    let hitms = (0..12).map(|i| Sample {
        time_ns: end + i,
        snoop: Some(Snoop::Hitm),
        ..load(0, 0, DataSource::L3, Some(90))
    });
    let m = profile(
        &dir.path().join("p.numalens"),
        [store].into_iter().chain(hitms),
    );
    let f = m
        .findings
        .iter()
        .find(|f| f.id.starts_with("hitm-"))
        .unwrap_or_else(|| panic!("{:?}", measured(&m)));
    // Twelve HITM samples after another thread's store to the same word: true sharing, on
    // the minimum of ten.
    assert_eq!(f.id, "hitm-true-sharing");
    let b = f.basis.as_ref().unwrap();
    assert_eq!(
        (b.data[0].kind.as_str(), b.data[0].count),
        ("hitm-samples", 12)
    );
    let matched = &b.tests[0];
    assert_eq!(matched.measure, "hitm_samples_after_other_writer");
    assert_eq!((matched.value, matched.threshold), (12.0, 10.0));
    // All twelve on the same word: its lower bound (75%) passes, not the point share alone.
    let same = &b.tests[1];
    assert_eq!(
        (same.measure.as_str(), same.passes.as_str(), same.threshold),
        ("same_word_share", "at-least", 0.5)
    );
    assert!(same.lower_bound.is_some_and(|l| l > 0.5), "{same:?}");
    assert!(f.rests_on.as_deref().unwrap().contains("12 HITM samples"));
}

/// The analysis of another thread's store to a line followed by HITM loads at `addresses`.
fn hitms_after_a_store(addresses: impl Iterator<Item = u64>) -> ReportModel {
    let dir = tempfile::tempdir().unwrap();
    let store = Sample {
        time_ns: 500,
        tid: PID + 1,
        kind: SampleKind::Store,
        ..load(0, 0, DataSource::L1, None)
    };
    let hitms = addresses.enumerate().map(|(i, address)| Sample {
        time_ns: 1_000 + i as u64,
        address,
        snoop: Some(Snoop::Hitm),
        ..load(0, 0, DataSource::L3, Some(90))
    });
    profile(
        &dir.path().join("p.numalens"),
        [store].into_iter().chain(hitms),
    )
}

#[test]
fn hitm_samples_split_between_words_decide_nothing() {
    // Ten HITM samples after another thread's store to the line, five on the stored word and
    // five on another: the samples cannot tell false sharing from true, so neither is said.
    let m = hitms_after_a_store((0..10).map(|i| 0x10_0000 + 8 * (i % 2)));
    let hitm = |m: &ReportModel| m.findings.iter().any(|f| f.id.starts_with("hitm-"));
    assert!(!hitm(&m), "{:?}", measured(&m));
    // Twenty-four on another word: false sharing on the bound.
    let m = hitms_after_a_store(std::iter::repeat_n(0x10_0008, 24));
    assert!(
        m.findings.iter().any(|f| f.id == "hitm-false-sharing"),
        "{:?}",
        measured(&m)
    );
}
