//! Synthetic: a file in the layout `perf record -e arm_spe_0/ts_enable=1,pa_enable=1/` writes on
//! an Arm Neoverse N1 machine (AUXTRACE_INFO, TIME_CONV, AUX records and AUXTRACE records whose
//! data is a stream of SPE packets, per CPU), written by this test, decoded by numalens and by
//! the installed perf, whose Arm SPE decoder synthesises samples from the same packets
//! (`perf script --itrace=Ma`). It checks the decoding against an independent decoder; it is
//! not a hardware validation.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

use numalens_format::{DataSource, Label, SampleKind};
use numalens_import::sample::*;
use numalens_import::spe::{self, encode};
use numalens_import::write::*;
use numalens_import::{ImportOptions, import};

const PID: u32 = 6161;
const WORKER: u32 = 6162;
const SPE_TYPE: u32 = 8;
const HEAP: u64 = 0xffff_8000_0000;
const BLOCK: u64 = 1 << 27;
/// The generic timer at 25 MHz: 40 ns a count (mult / 2^shift), from 1 s of perf time.
const SHIFT: u64 = 10;
const MULT: u64 = 40 << 10;
const ZERO: u64 = 1_000_000_000;
const INTERVAL: u64 = 1024;

/// (op subclass or branch, events, data source) of the records written, in turn.
const OPS: [(Option<u8>, u64, u16); 9] = [
    (Some(0x0), spe::EVENT_L1D_ACCESS, 0x0), // load, L1
    (Some(0x0), 0x0c, 0x8),                  // load, L2
    (Some(0x0), 0x10c, 0xb),                 // load, system cache
    (Some(0x0), 0x30c, 0xe),                 // load, DRAM
    (Some(0x0), 0x70c, 0xe),                 // load, DRAM of another chip
    (Some(0x0), 0x70c, 0xd),                 // load, another chip
    (Some(0x1), spe::EVENT_L1D_ACCESS, 0x0), // store
    (Some(0x5), 0x0c, 0x0),                  // SIMD store
    (None, 0x2, 0x0),                        // branch: no data access
];

/// The packets of record `i`: one sampled operation, with a context packet naming its thread
/// when `context`.
fn record(out: &mut Vec<u8>, i: u64, context: bool) {
    let (op, events, source) = OPS[(i % OPS.len() as u64) as usize];
    encode::address(out, spe::ADDRESS_PC, 0x40_1000 + 4 * (i % 32));
    match op {
        Some(sub) => encode::op_type(out, spe::OP_CLASS_LOAD_STORE, sub),
        None => encode::op_type(out, 2, 0),
    }
    encode::events(out, events as u16 | 0x2); // retired
    encode::counter(out, 1, 3); // issue latency
    encode::counter(out, spe::COUNTER_TOTAL_LATENCY, 5 + (i % 400) as u16);
    if op.is_some() {
        // A tag in the top byte, which is not part of the address.
        encode::address(
            out,
            spe::ADDRESS_DATA_VIRTUAL,
            0x2a << 56 | (HEAP + i * 192),
        );
        encode::address(
            out,
            spe::ADDRESS_DATA_PHYSICAL,
            (i % 16) * BLOCK + (i + 1) * 64,
        );
        encode::data_source(out, source);
    }
    if context {
        encode::context(out, if i.is_multiple_of(3) { WORKER } else { PID });
    }
    encode::timestamp(out, 1_000 + i * 7);
}

/// How a file says which thread each record is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Threads {
    /// Context packets.
    Context,
    /// No context packets: each read-out holds two stretches that the kernel's AUX records give
    /// to two threads in turn, as when the event follows its task from one thread to the other.
    AuxStretches,
    /// As `AuxStretches`, with each read-out's AUX records after its data, as perf writes them
    /// when the kernel closed the stretches between its reading of the ring and of the buffer.
    AuxStretchesLate,
    /// No context packets: context-switch records (a system-wide recording), while the AUX
    /// records name whatever task ran when the buffer was closed.
    Switches,
}

/// The perf time of record `i`.
fn time_of(i: u64) -> u64 {
    ZERO + (1_000 + i * 7) * 40
}

/// Two CPUs' AUX buffers, read out `rounds` times with `per` records each: the records of the
/// two CPUs interleave in time. Without context packets, the thread of each record's time is
/// returned.
fn write_file(path: &Path, rounds: u64, per: u64, threads: Threads) -> (u64, BTreeMap<u64, u32>) {
    let context = threads == Threads::Context;
    let mut w = PerfDataWriter::new();
    w.event(EventAttr {
        name: "arm_spe_0/ts_enable=1,pa_enable=1/".into(),
        type_: SPE_TYPE,
        config: 0b11, // ts_enable, pa_enable
        sample_period: INTERVAL,
        sample_type: IP | TID | TIME | CPU | IDENTIFIER | PHYS_ADDR,
        flags: FLAG_SAMPLE_ID_ALL | FLAG_MMAP2,
        ids: vec![41, 42],
        ..EventAttr::default()
    });
    let mut pmus = 2u32.to_le_bytes().to_vec();
    for (t, name) in [(1u32, "software"), (SPE_TYPE, "arm_spe_0")] {
        pmus.extend(t.to_le_bytes());
        put_string(&mut pmus, name);
    }
    w.feature(FEATURE_PMU_MAPPINGS, pmus);
    let mut cpuid = Vec::new();
    put_string(&mut cpuid, "0x00000000410fd0c0"); // Neoverse N1
    w.feature(FEATURE_CPUID, cpuid);
    two_node_sections(&mut w, BLOCK);
    w.time_conv(SHIFT, MULT, ZERO, None);
    w.auxtrace_info_spe(SPE_TYPE, true);
    w.comm(PID, PID, "spe-prog", ZERO);
    w.comm(PID, WORKER, "spe-worker", ZERO);
    w.mmap2(PID, HEAP, 64 << 20, 0, 3, 0x22, "//anon", ZERO);
    w.finished_round();
    let mut offsets = [0u64; 2];
    let mut n = 0;
    let mut expected = BTreeMap::new();
    for round in 0..rounds {
        for cpu in 0..2u32 {
            let mut data = Vec::new();
            let turn = if (round + u64::from(cpu)).is_multiple_of(2) {
                [PID, WORKER]
            } else {
                [WORKER, PID]
            };
            let mut first_stretch = 0;
            for k in 0..per {
                // CPU 0 takes the even records, CPU 1 the odd: each buffer is in time order,
                // the two overlap.
                let i = (round * per + k) * 2 + u64::from(cpu);
                if k == per / 2 {
                    first_stretch = data.len() as u64;
                }
                if threads == Threads::Switches && (k == 0 || k == per / 2) {
                    // The thread of this half comes in just before its first record.
                    let (at, half) = ((time_of(i) - 20, cpu), usize::from(k > 0));
                    if k > 0 {
                        w.switch_cpu_wide(true, (PID, turn[0]), (PID, turn[1]), at);
                    }
                    w.switch_cpu_wide(false, (PID, turn[half]), (0, 0), at);
                }
                record(&mut data, i, context);
                let thread = turn[usize::from(k >= per / 2)];
                if !context && OPS[(i % OPS.len() as u64) as usize].0.is_some() {
                    expected.insert(time_of(i), thread);
                }
                n += 1;
            }
            encode::pad_to_8(&mut data);
            let at = offsets[cpu as usize];
            let time = ZERO + (round + 1) * per * 2 * 7 * 40;
            let stretches = matches!(threads, Threads::AuxStretches | Threads::AuxStretchesLate);
            let late = threads == Threads::AuxStretchesLate;
            if late {
                w.auxtrace(&data, at, cpu, u32::MAX, cpu);
            }
            if !stretches {
                w.aux((at, data.len() as u64, 0), (PID, PID, time), cpu);
            } else {
                w.aux((at, first_stretch, 0), (PID, turn[0], time), cpu);
                let rest = data.len() as u64 - first_stretch;
                w.aux((at + first_stretch, rest, 0), (PID, turn[1], time), cpu);
            }
            if !late {
                w.auxtrace(&data, at, cpu, u32::MAX, cpu);
            }
            offsets[cpu as usize] += data.len() as u64;
        }
        w.finished_round();
    }
    w.write_to(path).unwrap();
    (n, expected)
}

/// What perf's SPE decoder made of one record.
#[derive(Debug, Default, Clone)]
struct PerfSpe {
    tid: u32,
    addr: u64,
    phys: u64,
    latency: u32,
    data_src: String,
    remote: bool,
}

/// `perf script --itrace=Ma`: a `memory` event for each load or store record and a
/// `remote-access` event for each with the remote-access event bit, keyed by time.
fn perf_decoding(file: &Path) -> BTreeMap<u64, PerfSpe> {
    let out = common::perf([
        OsStr::new("script"),
        OsStr::new("--itrace=Ma"),
        OsStr::new("--ns"),
        OsStr::new("-F"),
        OsStr::new("hw:event,tid,time,addr,phys_addr,weight,data_src"),
        OsStr::new("-i"),
        file.as_os_str(),
    ]);
    let mut decoded: BTreeMap<u64, PerfSpe> = BTreeMap::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(time_at) = words
            .iter()
            .position(|w| w.ends_with(':') && w.contains('.'))
        else {
            continue;
        };
        let time = common::script_time_ns(words[time_at]);
        let entry = decoded.entry(time).or_default();
        entry.tid = words[0].parse().unwrap();
        let event = words[time_at + 1].trim_end_matches(':');
        if event == "remote-access" {
            entry.remote = true;
            continue;
        }
        assert_eq!(event, "memory", "{line}");
        let rest = &words[time_at + 2..];
        // The address, the data source (its value, then `|OP LOAD|LVL …|…`), the weight and
        // the physical address.
        let n = rest.len();
        entry.addr = u64::from_str_radix(rest[0], 16).unwrap();
        entry.data_src = rest[1..n - 2].join(" ");
        entry.latency = rest[n - 2].parse().unwrap();
        entry.phys = u64::from_str_radix(rest[n - 1], 16).unwrap();
    }
    decoded
}

/// The label perf's data source stands for, with the remote-access event's bit.
fn label_of(p: &PerfSpe) -> DataSource {
    let s = &p.data_src;
    if s.contains("OP STORE") {
        DataSource::Unknown
    } else if s.contains("LVL Remote") {
        // Another chip: perf 6.1 prints "Remote N/A" (any cache, remote), later ones "Remote
        // Any cache".
        DataSource::RemoteCache
    } else if s.contains("Local RAM") && p.remote {
        DataSource::RemoteDram
    } else if s.contains("Local RAM") {
        DataSource::LocalDram
    } else if s.contains("L3") {
        DataSource::L3
    } else if s.contains("L2") {
        DataSource::L2
    } else if s.contains("L1") {
        DataSource::L1
    } else {
        panic!("a data source this test does not write: {s}")
    }
}

#[test]
fn spe_packets_decode_as_perf_decodes_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("spe.data");
    let (records, _) = write_file(&data, 6, 50, Threads::Context);
    let profile = dir.path().join("spe.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    let loads_stores = records - records / OPS.len() as u64;
    assert_eq!(imported.accesses, loads_stores, "{imported:?}");
    let ours = common::samples(&profile);
    // The profile holds each thread's samples together, in the order they were handed on.
    for tid in [PID, WORKER] {
        let times: Vec<u64> = ours
            .iter()
            .filter(|s| s.tid == tid)
            .map(|s| s.time_ns)
            .collect();
        assert!(
            times.windows(2).all(|w| w[0] < w[1]),
            "the two CPUs' buffers were merged in time order"
        );
    }
    let ours: BTreeMap<u64, numalens_format::Sample> =
        ours.into_iter().map(|s| (s.time_ns, s)).collect();
    let theirs = perf_decoding(&data);
    assert_eq!(
        theirs.len() as u64,
        loads_stores,
        "perf decoded every record"
    );
    for (time, p) in &theirs {
        let s = ours
            .get(time)
            .unwrap_or_else(|| panic!("no sample at {time}: {p:?}"));
        assert_eq!(s.address, p.addr, "at {time}: {p:?}");
        assert_eq!(s.tid, p.tid, "at {time}: {p:?}");
        assert_eq!(s.pid, PID, "the worker thread belongs to the process");
        assert_eq!(s.latency, Some(p.latency), "at {time}: {p:?}");
        let kind = if p.data_src.contains("OP STORE") {
            SampleKind::Store
        } else {
            SampleKind::Load
        };
        assert_eq!(s.kind, kind, "at {time}: {p:?}");
        assert_eq!(s.data_source, label_of(p), "at {time}: {p:?}");
        assert_eq!(s.node, Some(u32::from(p.phys / BLOCK >= 8)), "at {time}");
        assert_eq!(s.weight, INTERVAL as u32);
    }
    let kinds: std::collections::BTreeSet<&str> =
        ours.values().map(|s| s.data_source.label()).collect();
    // L1, L2, system cache, local and remote DRAM, another chip, stores.
    assert_eq!(kinds.len(), 7, "every source written was read: {kinds:?}");
}

/// Imports a file written with `threads` and checks every sample's thread and process.
fn threads_are_told(threads: Threads) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("spe.data");
    let (_, expected) = write_file(&data, 4, 40, threads);
    let profile = dir.path().join("spe.numalens");
    import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    let ours = common::samples(&profile);
    assert_eq!(ours.len(), expected.len());
    for s in &ours {
        let want = expected.get(&s.time_ns).unwrap_or_else(|| panic!("{s:?}"));
        assert_eq!((s.tid, s.pid), (*want, PID), "at {}", s.time_ns);
    }
    let workers = ours.iter().filter(|s| s.tid == WORKER).count();
    assert!(
        workers > 0 && workers < ours.len(),
        "both threads have samples"
    );
    let table = numalens_format::Profile::open(&profile)
        .unwrap()
        .read_all::<numalens_format::Thread>()
        .unwrap();
    let tids: std::collections::BTreeSet<u32> = table.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [PID, WORKER].into(), "the thread table: {table:?}");
}

#[test]
fn without_context_packets_each_sample_is_the_thread_of_its_stretch_of_buffer() {
    threads_are_told(Threads::AuxStretches);
}

#[test]
fn a_stretchs_aux_record_after_its_data_still_gives_its_thread() {
    threads_are_told(Threads::AuxStretchesLate);
}

#[test]
fn with_switch_records_each_sample_is_the_thread_running_at_its_time() {
    threads_are_told(Threads::Switches);
}
