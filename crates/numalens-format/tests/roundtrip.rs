//! Every table written by the writer reads back equal; random sample tables round-trip.

mod common;

use numalens_format::synth::{SynthConfig, SynthSamples};
use numalens_format::*;
use proptest::prelude::*;

/// The writer groups samples by thread within a batch; per-thread order is what it keeps.
fn by_thread(mut samples: Vec<Sample>) -> Vec<Sample> {
    samples.sort_by_key(|s| (s.pid, s.tid));
    samples
}

#[test]
fn all_tables_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.numalens");
    let mut writer = ProfileWriter::create(&path, common::meta()).unwrap();
    let thread = Thread {
        pid: 7,
        tid: 8,
        logical_id: 1,
        name: Some("worker".into()),
        start_routine: Some(0x401000),
        create_ns: 5,
        exit_ns: None,
        parent_tid: Some(7),
    };
    let frame = SiteFrame {
        site_key: 0xfeed,
        depth: 0,
        module: "/usr/bin/app".into(),
        offset: 0x1234,
        function: Some("main".into()),
        file: None,
        line: Some(42),
    };
    let object = Object {
        object_id: 3,
        pid: 7,
        kind: ObjectKind::Static,
        name: "grid".into(),
        start: 0x600000,
        size: 1 << 20,
        alloc_ns: 0,
        free_ns: Some(99),
        alloc_tid: None,
        site_key: Some(0xfeed),
    };
    let stat = PageStat {
        pid: 7,
        tid: 8,
        page: 0x600000,
        reads: 10,
        writes: 2,
        first_access_ns: 6,
        object_id: Some(3),
    };
    let migration = Migration {
        time_ns: 1000,
        pid: 7,
        start: 0x600000,
        len: 4096,
        from_node: Some(0),
        to_node: 3,
        policy: "carrefour".into(),
        reason: "majority node 3".into(),
        result: "ok".into(),
    };
    let samples: Vec<Sample> = SynthSamples::new(SynthConfig::default())
        .take(200_000)
        .collect();
    writer.push_thread(thread.clone()).unwrap();
    writer.push_site_frame(frame.clone()).unwrap();
    writer.push_object(object.clone()).unwrap();
    writer.push_page_stat(stat.clone()).unwrap();
    writer.push_migration(migration.clone()).unwrap();
    for s in &samples {
        writer.push_sample(s.clone()).unwrap();
    }
    let written = writer.finish(common::complete()).unwrap();

    let profile = Profile::open(&path).unwrap();
    assert_eq!(profile.meta(), &written);
    assert_eq!(profile.meta().tables["samples"].rows, 200_000);
    assert_eq!(profile.read_all::<Thread>().unwrap(), vec![thread]);
    assert_eq!(profile.read_all::<SiteFrame>().unwrap(), vec![frame]);
    assert_eq!(profile.read_all::<Object>().unwrap(), vec![object]);
    assert_eq!(profile.read_all::<PageStat>().unwrap(), vec![stat]);
    assert_eq!(profile.read_all::<Migration>().unwrap(), vec![migration]);
    assert_eq!(
        by_thread(profile.read_all::<Sample>().unwrap()),
        by_thread(samples)
    );
}

#[test]
fn projected_parallel_read_sees_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.numalens");
    let n = ROW_GROUP_ROWS + 12_345; // two row groups
    let samples: Vec<Sample> = SynthSamples::new(SynthConfig::default()).take(n).collect();
    common::write_samples(&path, &samples);
    let profile = Profile::open(&path).unwrap();
    assert_eq!(profile.table_shape::<Sample>().unwrap(), (n as u64, 2));
    let rows = std::sync::atomic::AtomicUsize::new(0);
    profile
        .for_each_batch_parallel::<Sample, _>(&["time_ns", "kind"], 2, |batch| {
            assert_eq!(batch.num_columns(), 2);
            rows.fetch_add(batch.num_rows(), std::sync::atomic::Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    assert_eq!(rows.into_inner(), n);
    // Every row came back, across the two row groups the encoder made.
    assert_eq!(
        by_thread(profile.read_all::<Sample>().unwrap()),
        by_thread(samples)
    );
}

/// The codec of every compressed column chunk of `table` in the profile at `dir`.
fn codecs(dir: &std::path::Path, table: &str) -> std::collections::BTreeSet<String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = std::fs::File::open(dir.join(format!("{table}.parquet"))).unwrap();
    let reader = SerializedFileReader::new(file).unwrap();
    let meta = reader.metadata();
    (0..meta.num_row_groups())
        .flat_map(|g| meta.row_group(g).columns().to_vec())
        .map(|c| format!("{:?}", c.compression()))
        .filter(|c| c != "UNCOMPRESSED")
        .collect()
}

#[test]
fn small_tables_use_lz4_and_large_ones_zstd() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.numalens");
    let samples: Vec<Sample> = SynthSamples::new(SynthConfig::default())
        .take(70_000)
        .collect();
    common::write_samples(&small, &samples[..1000]);
    assert_eq!(codecs(&small, "samples"), ["LZ4_RAW".to_string()].into());
    // One row short of a full write batch is still small; a full batch is large.
    let edge = dir.path().join("edge.numalens");
    common::write_samples(&edge, &samples[..16_383]);
    assert_eq!(codecs(&edge, "samples"), ["LZ4_RAW".to_string()].into());
    let full = dir.path().join("full.numalens");
    common::write_samples(&full, &samples[..16_384]);
    assert!(
        codecs(&full, "samples")
            .iter()
            .all(|c| c.starts_with("ZSTD"))
    );
    // A table with no rows is small too, and still a valid file.
    assert_eq!(codecs(&small, "threads"), Default::default());
    assert_eq!(
        Profile::open(&small)
            .unwrap()
            .table_shape::<Thread>()
            .unwrap()
            .0,
        0
    );
    let large = dir.path().join("large.numalens");
    common::write_samples(&large, &samples);
    let zstd = codecs(&large, "samples");
    assert!(
        zstd.len() == 1 && zstd.iter().all(|c| c.starts_with("ZSTD")),
        "{zstd:?}"
    );
    let profile = Profile::open(&large).unwrap();
    assert_eq!(
        by_thread(profile.read_all::<Sample>().unwrap()),
        by_thread(samples)
    );
}

#[test]
fn unknown_projected_column_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.numalens");
    common::write_samples(&path, &[]);
    let profile = Profile::open(&path).unwrap();
    let err = profile
        .batches::<Sample>(Some(&["adress"]), None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no column `adress`") && err.contains("address"),
        "{err}"
    );
}

fn arb_sample() -> impl Strategy<Value = Sample> {
    let kinds = prop::sample::select(vec![
        SampleKind::Load,
        SampleKind::Store,
        SampleKind::FirstTouch,
        SampleKind::Hint,
    ]);
    let sources = prop::sample::select(vec![
        DataSource::Unknown,
        DataSource::L3,
        DataSource::RemoteDram,
    ]);
    (
        (
            any::<u64>(),
            1..5u32,
            1..9u32,
            any::<Option<u32>>(),
            any::<u64>(),
        ),
        (
            kinds,
            any::<u32>(),
            any::<Option<u64>>(),
            any::<Option<u32>>(),
        ),
        (
            sources,
            any::<Option<u32>>(),
            any::<Option<u64>>(),
            any::<Option<u32>>(),
            prop::option::of(prop::sample::select(vec![
                Snoop::Hitm,
                Snoop::Hit,
                Snoop::Forward,
            ])),
        ),
    )
        .prop_map(
            |(
                (time_ns, pid, tid, cpu, address),
                (kind, weight, object_id, node),
                (data_source, latency, ip, page_size, snoop),
            )| Sample {
                time_ns,
                pid,
                tid,
                cpu,
                address,
                kind,
                weight,
                object_id,
                node,
                data_source,
                latency,
                ip,
                page_size,
                snoop,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_sample_tables_round_trip(samples in prop::collection::vec(arb_sample(), 0..3000)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.numalens");
        common::write_samples(&path, &samples);
        let back = Profile::open(&path).unwrap().read_all::<Sample>().unwrap();
        prop_assert_eq!(by_thread(back), by_thread(samples));
    }
}
