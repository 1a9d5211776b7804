//! Synthetic: a file in the layout `perf mem record` writes on an Intel machine with PEBS load
//! latency (`PERF_SAMPLE_WEIGHT_STRUCT`, `DATA_SRC`, `PHYS_ADDR`, two events told apart by their
//! ids), written by this test, decoded by numalens and by the installed `perf script`. It checks
//! the decoding against an independent decoder; it is not a hardware validation.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use numalens_format::{DataSource, Object, Profile, SampleKind};
use numalens_import::write::*;
use numalens_import::{ImportOptions, import};

const PID: u32 = 4242;
const HEAP: u64 = 0x7f00_0000_0000;
const BLOCK: u64 = 128 << 20;

/// `perf_mem_data_src` values as Intel's PEBS decoding fills them, with what perf prints for them.
const SOURCES: [(u64, &str); 10] = [
    (0x6810_0142, "L1 hit"),       // load, L1 hit
    (0x6810_0242, "LFB"),          // load, line fill buffer hit
    (0x6810_0842, "L3 hit"),       // load, L3 hit
    (0x6810_1042, "Local RAM"),    // load, local RAM hit
    (0x6810_2042, "Remote RAM"),   // load, remote RAM (1 hop) hit
    (0x6880_8042, "Remote Cache"), // load, remote cache (1 hop) hit, HITM
    (0x6800_0144, "L1 hit"),       // store, L1 hit
    // The level-number encoding (AMD, Arm, recent Intel): RAM, remote; RAM, local; L2, local.
    (
        0x2 | 0x2 << 5 | 0x1 << 19 | 0xd << 33 | 1 << 37,
        "num RAM remote",
    ),
    (0x2 | 0x2 << 5 | 0x1 << 19 | 0xd << 33, "num RAM"),
    (0x2 | 0x2 << 5 | 0x1 << 19 | 0x2 << 33, "num L2"),
];

fn write_file(path: &Path) -> usize {
    let mut w = PerfDataWriter::new();
    let loads = w.event(mem_loads_event(4000, vec![101]));
    let stores = w.event(EventAttr {
        name: "cpu/mem-stores/P".into(),
        config: 0x82d0,
        ..mem_loads_event(4000, vec![102])
    });
    two_node_sections(&mut w, BLOCK);
    w.comm(PID, PID, "pebs-prog", 1_000);
    w.mmap2(PID, HEAP, 64 << 20, 0, 3, 0x22, "//anon", 2_000);
    let n = 3_000;
    for i in 0..n as u64 {
        let (data_src, _) = SOURCES[i as usize % SOURCES.len()];
        let store = data_src & 0x04 != 0;
        w.sample(
            if store { stores } else { loads },
            &SampleFields {
                ip: 0x40_1000 + (i % 13) * 4,
                pid: PID,
                tid: PID + (i % 3) as u32,
                time: 10_000_000 + i * 1_000,
                addr: HEAP + (i * 4096 * 7) % (64 << 20),
                id: if store { 102 } else { 101 },
                cpu: (i % 4) as u32,
                period: 4000,
                weight: weight_struct(30 + (i % 500) as u32, 7 + (i % 11) as u16, 0),
                data_src,
                // Alternately in a block of node 0 and one of node 1.
                phys_addr: (1 + (i % 2) * 8) * BLOCK + (i % 1000) * 4096,
                ..SampleFields::default()
            },
        );
    }
    w.write_to(path).unwrap();
    n
}

#[test]
fn pebs_samples_decode_as_perf_script_decodes_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pebs.data");
    let n = write_file(&data);
    let profile = dir.path().join("pebs.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    assert_eq!(
        (imported.accesses, imported.truncated, imported.nodes),
        (n as u64, 0, 2)
    );

    // perf prints: tid time addr data_src (hex, then decoded between bars) weight ins_lat
    // phys_addr.
    let lines = common::perf_script(&data, "tid,time,addr,weight,data_src,phys_addr,ins_lat");
    assert_eq!(lines.len(), n);
    let ours: BTreeMap<(u32, u64), numalens_format::Sample> = common::samples(&profile)
        .into_iter()
        .map(|s| ((s.tid, s.time_ns), s))
        .collect();
    assert_eq!(ours.len(), n);
    for line in &lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        let tid: u32 = f[0].parse().unwrap();
        let time = common::script_time_ns(f[1]);
        let i = (time - 10_000_000) / 1_000;
        let s = &ours[&(tid, time)];
        assert_eq!(s.address, u64::from_str_radix(f[2], 16).unwrap(), "{line}");
        assert_eq!(
            u64::from_str_radix(f[3], 16).unwrap(),
            SOURCES[i as usize % SOURCES.len()].0
        );
        let decoded = &line[line.find('|').expect("perf decodes the data source")..];
        check_source(s, decoded, line);
        let [weight, ins_lat, phys] = f[f.len() - 3..] else {
            unreachable!()
        };
        assert_eq!(s.latency, Some(weight.parse().unwrap()), "{line}");
        assert_eq!(ins_lat.parse::<u64>().unwrap(), 7 + i % 11, "{line}");
        let phys = u64::from_str_radix(phys, 16).unwrap();
        assert_eq!(s.node, Some((phys / BLOCK >= 8) as u32), "{line}");
        assert_eq!(s.weight, 4000);
    }
    // Every sample is inside the one mapping, which is an object.
    let p = Profile::open(&profile).unwrap();
    let objects = p.read_all::<Object>().unwrap();
    let heap = objects
        .iter()
        .find(|o| o.start == HEAP)
        .expect("the mapping is an object");
    assert!(ours.values().all(|s| s.object_id == Some(heap.object_id)));
    assert_eq!(p.meta().backend.name, "pmu");
    let topology = p.meta().topology.clone().expect("the recording's machine");
    assert_eq!(topology.node_ids(), vec![0, 1]);
    assert_eq!(topology.nodes[1].cpus, vec![2, 3]);
}

/// numalens' label and kind against perf's own decoding of the same data source.
fn check_source(s: &numalens_format::Sample, decoded: &str, line: &str) {
    let kind = if decoded.contains("OP STORE") {
        SampleKind::Store
    } else {
        assert!(decoded.contains("OP LOAD"), "{line}");
        SampleKind::Load
    };
    assert_eq!(s.kind, kind, "{line}");
    // The level field of perf's decoding: `|LVL L3 hit|`, `|LVL Remote RAM (1 hop) hit|`, …
    let level = decoded
        .split('|')
        .find_map(|f| f.strip_prefix("LVL "))
        .expect("perf decodes a level");
    let source = if level.contains("Remote Cache") {
        DataSource::RemoteCache
    } else if level.contains("Remote RAM") || (level.contains("RAM") && level.contains("Remote")) {
        DataSource::RemoteDram
    } else if level.contains("RAM hit") {
        DataSource::LocalDram
    } else if level.starts_with("L3 hit") {
        DataSource::L3
    } else if level.starts_with("L2 hit") {
        DataSource::L2
    } else if level.starts_with("L1 hit") || level.contains("LFB") {
        DataSource::L1
    } else {
        panic!("a data source this test does not write: {line}")
    };
    assert_eq!(s.data_source, source, "{line}");
}

#[test]
fn perf_reads_the_written_memory_topology() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pebs.data");
    write_file(&data);
    let args = ["report", "--header-only", "-I", "-i"].map(std::ffi::OsStr::new);
    let text = common::perf(args.into_iter().chain([data.as_os_str()]));
    assert!(text.contains("memory nodes (nr 2"), "{text}");
    assert!(text.contains("node1 meminfo"), "{text}");
}
