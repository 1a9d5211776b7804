//! Synthetic: a file in the layout `perf record -e ibs_op//` writes on an AMD machine (raw IBS
//! op registers, no data address or source fields), written by this test, decoded by numalens
//! and by the installed perf (`perf report -D` decodes IBS registers itself). It checks the
//! decoding against an independent decoder; it is not a hardware validation.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

use numalens_format::{DataSource, SampleKind};
use numalens_import::ibs;
use numalens_import::sample::*;
use numalens_import::write::*;
use numalens_import::{ImportOptions, import};

const PID: u32 = 5151;
const IBS_OP_TYPE: u32 = 11;
const HEAP: u64 = 0x7e00_0000_0000;

/// (store, missed, DataSrc, remote) of the ops written, in turn.
const OPS: [(bool, bool, u64, bool); 6] = [
    (false, false, 0, false), // load, L1 hit
    (false, true, 0, false),  // load, served by L2
    (false, true, 2, false),  // load, local node cache
    (false, true, 3, false),  // load, local DRAM
    (false, true, 3, true),   // load, remote DRAM
    (true, false, 0, false),  // store, L1 hit
];

fn header_string(v: &mut Vec<u8>, s: &str) {
    let mut text = s.as_bytes().to_vec();
    text.resize((s.len() + 1).div_ceil(64) * 64, 0);
    v.extend((text.len() as u32).to_le_bytes());
    v.extend(text);
}

fn write_file(path: &Path, n: u64) {
    let mut w = PerfDataWriter::new();
    let ops = w.event(EventAttr {
        name: "ibs_op//".into(),
        type_: IBS_OP_TYPE,
        sample_period: 100_000,
        sample_type: IP | TID | TIME | CPU | PERIOD | RAW,
        flags: FLAG_SAMPLE_ID_ALL | FLAG_MMAP2,
        ..EventAttr::default()
    });
    let mut pmus = 2u32.to_le_bytes().to_vec();
    for (t, name) in [(4u32, "cpu"), (IBS_OP_TYPE, "ibs_op")] {
        pmus.extend(t.to_le_bytes());
        header_string(&mut pmus, name);
    }
    w.feature(16, pmus); // HEADER_PMU_MAPPINGS
    let mut cpuid = Vec::new();
    header_string(&mut cpuid, "AuthenticAMD,25,1,1");
    w.feature(9, cpuid); // HEADER_CPUID
    w.comm(PID, PID, "ibs-prog", 0);
    w.mmap2(PID, HEAP, 16 << 20, 0, 3, 0x22, "//anon", 0);
    for i in 0..n {
        let (store, missed, src, remote) = OPS[(i % OPS.len() as u64) as usize];
        let latency = if missed { 40 + (i % 300) as u16 } else { 0 };
        let regs = [
            0x6_fffe,           // IbsOpCtl: MaxCnt, IbsOpEn (bit 17), IbsOpVal (bit 18)
            0x40_2000 + i % 64, // IbsOpRip
            0,                  // IbsOpData
            ibs::op_data2(src, remote),
            ibs::op_data3(store, missed, latency),
            HEAP + i * 128,          // IbsDcLinAd
            0x1_0000_0000 + i * 128, // IbsDcPhysAd
        ];
        w.sample(
            ops,
            &SampleFields {
                ip: 0x40_2000 + i % 64,
                pid: PID,
                tid: PID,
                time: 5_000 + i * 10,
                cpu: 0,
                period: 100_000,
                raw: ibs::raw(0, &regs),
                ..SampleFields::default()
            },
        );
    }
    w.write_to(path).unwrap();
}

/// What perf's IBS decoder printed for one sample.
#[derive(Debug, Default)]
struct PerfIbs {
    fields: BTreeMap<String, String>,
    data_src: Option<u64>,
    remote: bool,
    lin_ad: Option<u64>,
}

/// `perf report -D`: each sample's decoded IBS registers come before its PERF_RECORD_SAMPLE
/// line, which carries its time.
fn perf_decoding(file: &Path) -> BTreeMap<u64, PerfIbs> {
    let dump = common::perf([
        OsStr::new("report"),
        OsStr::new("-D"),
        OsStr::new("-i"),
        file.as_os_str(),
    ]);
    let mut decoded = BTreeMap::new();
    let mut pending = PerfIbs::default();
    for line in dump.lines() {
        if line.starts_with("ibs_op_data3:") {
            // `Name value` pairs after the register's hex value.
            let words: Vec<&str> = line.split_whitespace().skip(2).collect();
            for pair in words.chunks(2) {
                if let [k, v] = pair {
                    pending.fields.insert(k.to_string(), v.to_string());
                }
            }
        } else if line.starts_with("ibs_op_data2:") {
            pending.remote = line.contains("RmtNode 1");
            pending.data_src = line
                .split("DataSrc ")
                .nth(1)
                .and_then(|d| d.split('=').next())
                .and_then(|d| d.parse().ok());
        } else if let Some(hex) = line.strip_prefix("IbsDCLinAd:") {
            pending.lin_ad = Some(u64::from_str_radix(hex.trim(), 16).unwrap());
        } else if line.contains("PERF_RECORD_SAMPLE") {
            let time: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
            decoded.insert(time, std::mem::take(&mut pending));
        }
    }
    decoded
}

#[test]
fn ibs_op_registers_decode_as_perf_decodes_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("ibs.data");
    let n = 600;
    write_file(&data, n);
    let profile = dir.path().join("ibs.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    assert_eq!(imported.accesses, n);
    let ours: BTreeMap<u64, numalens_format::Sample> = common::samples(&profile)
        .into_iter()
        .map(|s| (s.time_ns, s))
        .collect();
    let theirs = perf_decoding(&data);
    assert_eq!(theirs.len(), n as usize, "perf decoded every sample");
    for (time, p) in &theirs {
        let s = &ours[time];
        let flag = |name: &str| p.fields.get(name).map(String::as_str) == Some("1");
        assert_eq!(Some(s.address), p.lin_ad, "at {time}: {p:?}");
        let kind = if flag("StOp") {
            SampleKind::Store
        } else {
            SampleKind::Load
        };
        assert_eq!(s.kind, kind, "at {time}: {p:?}");
        let latency: u32 = p.fields["DcMissLat"].parse().unwrap();
        let missed_load = flag("DcMiss") && kind == SampleKind::Load;
        assert_eq!(
            s.latency,
            (missed_load && latency > 0).then_some(latency),
            "at {time}"
        );
        let source = match (flag("DcMiss"), kind, p.data_src, p.remote) {
            (false, ..) => DataSource::L1,
            (true, SampleKind::Store, ..) => DataSource::Unknown,
            (true, _, None, _) => DataSource::L2,
            (true, _, Some(2), false) => DataSource::L3,
            (true, _, Some(3), false) => DataSource::LocalDram,
            (true, _, Some(3), true) => DataSource::RemoteDram,
            other => panic!("a case this test does not write: {other:?}"),
        };
        assert_eq!(s.data_source, source, "at {time}: {p:?}");
    }
    let kinds: std::collections::BTreeSet<&str> = ours
        .values()
        .map(|s| numalens_format::Label::label(s.data_source))
        .collect();
    // L1 (loads and stores), L2, local node cache, local and remote DRAM.
    assert_eq!(kinds.len(), 5, "every source written was read: {kinds:?}");
}
