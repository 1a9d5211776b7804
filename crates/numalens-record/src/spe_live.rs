//! Arm SPE recorded live: the event's packets come in its AUX area (`aux.rs`), in chunks that
//! `PERF_RECORD_AUX` records of its ring announce, each with the pid, tid, CPU and time of the
//! task running when the kernel closed it (at a switch, or when the area's watermark
//! interrupted). The packets are decoded by the reader `numalens import` uses for SPE
//! recordings.
//!
//! The thread: a chunk is not always one thread's. Sibling threads of the program share an
//! equivalent set of events, and the kernel switches between them without stopping the event
//! (it swaps their contexts), so no chunk closes there. The event therefore also asks for the
//! context-switch records (`PERF_RECORD_SWITCH`), written before that swap, and a record is the
//! thread's that ran on the chunk's CPU at the record's time (`CpuThreads`); the chunk's thread
//! is the answer only where the switches do not say. Context packets are not used: the hardware
//! writes them only for privileged users on kernels that keep the thread id in
//! `CONTEXTIDR_EL1`, and with the ids of the first pid namespace, not the recorder's.
//!
//! Times: each record ends with the generic timer's count; the ring's first page says how counts
//! become the kernel's `perf_clock` (`sched_clock` on arm64), not the `CLOCK_MONOTONIC` of every
//! other record. A chunk closes after its last record was written, so its close time minus its
//! last record's `perf_clock` time is never less than the offset between the two clocks; the
//! least such bound over the chunks of the last [`OFFSET_WINDOW_NS`] is taken (a chunk closed
//! late, after a system call or a wait, only raises its own bound), which also follows a slow
//! drift between the clocks. A record without a count, or a kernel that gives no conversion,
//! gets its chunk's close time; no record is placed after its chunk's close.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use numalens_assemble::perf_sample::cpu_threads::CpuThreads;
use numalens_assemble::perf_sample::physical::PhysicalNodes;
use numalens_assemble::perf_sample::spe::{Records, SpeRecord, TimeConv};
use numalens_assemble::perf_sample::spe_access::{self, SpeMeaning, SpeOrigin};
use numalens_assemble::raw::PerfEvent;
use perf_event_open_sys::bindings as sys;

use crate::aux::{AuxArea, AuxChunk};
use crate::perf::PerfRing;
use crate::records::{Fields, Trailer, decode_task};

/// How far back the chunks bounding the clocks' offset are remembered.
pub const OFFSET_WINDOW_NS: u64 = 2_000_000_000;

/// How long the threads' runs of each CPU are remembered after the latest chunk closed.
const RUNS_KEPT_NS: u64 = 10_000_000_000;

/// How an SPE event's ring and AUX area are read.
pub struct SpeReader {
    pub meaning: SpeMeaning,
    pub physical: Arc<PhysicalNodes>,
    pub trailer: Trailer,
    /// What the rings have said so far (every CPU's ring is drained by the same reader).
    state: Mutex<SpeState>,
}

#[derive(Default)]
struct SpeState {
    threads: CpuThreads,
    offset: OffsetWindow,
}

/// What reading one ring's new chunks gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpeDrained {
    pub records: usize,
    /// Chunks after which the area had filled: the kernel dropped packets and stopped the
    /// event until it is enabled again.
    pub truncated: u64,
    /// Chunks in which a sample was dropped because the previous one was still being taken
    /// (the interval is too short for the hardware).
    pub collisions: u64,
    /// Bytes that were not packets.
    pub bad_bytes: u64,
}

impl SpeReader {
    pub fn new(meaning: SpeMeaning, physical: Arc<PhysicalNodes>, trailer: Trailer) -> Self {
        SpeReader {
            meaning,
            physical,
            trailer,
            state: Mutex::default(),
        }
    }

    /// Reads every record now in `ring` and the AUX chunks they announce, hands out their
    /// accesses and the other records, and gives the chunks' space back to the kernel.
    pub fn drain(&self, ring: &mut PerfRing, sink: &mut dyn FnMut(PerfEvent)) -> SpeDrained {
        let mut chunks = Vec::new();
        let mut drained = SpeDrained {
            records: ring.drain(|bytes| self.take_record(bytes, &mut chunks, sink)),
            ..SpeDrained::default()
        };
        if let Some(aux) = ring.aux_mut() {
            self.read_chunks(aux, &chunks, &mut drained, sink);
        }
        drained
    }

    /// One record of the ring: a chunk to read, a context switch, or another record.
    pub fn take_record(
        &self,
        bytes: &[u8],
        chunks: &mut Vec<AuxChunk>,
        sink: &mut dyn FnMut(PerfEvent),
    ) {
        if let Some(chunk) = AuxChunk::parse(bytes) {
            chunks.push(chunk);
        } else if crate::records::kind(bytes) == Some(sys::PERF_RECORD_SWITCH) {
            if let Some((out, cpu, time_ns, task)) = switch(bytes) {
                let threads = &mut self.state.lock().unwrap_or_else(|e| e.into_inner()).threads;
                if out {
                    threads.switch_out(cpu, time_ns, task);
                } else {
                    threads.switch_in(cpu, time_ns, task);
                }
            }
        } else if let Some(event) = decode_task(bytes, self.trailer) {
            sink(event);
        }
    }

    /// Decodes `chunks` of `aux` in order and releases each.
    pub fn read_chunks(
        &self,
        aux: &mut AuxArea,
        chunks: &[AuxChunk],
        drained: &mut SpeDrained,
        sink: &mut dyn FnMut(PerfEvent),
    ) {
        let conv = aux.time_conv();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut records = Vec::new();
        let mut latest_close = 0;
        for chunk in chunks {
            records.clear();
            let partial = chunk.flags & u64::from(sys::PERF_AUX_FLAG_PARTIAL) != 0;
            let mut reading = Records::new(aux.chunk(chunk.offset, chunk.size));
            let mut last_is_access = false;
            for record in reading.by_ref() {
                last_is_access = spe_access::is_access(&record);
                if last_is_access {
                    records.push(record);
                }
            }
            drained.bad_bytes += reading.bad;
            if partial && last_is_access {
                // The hardware says the chunk's last record is incomplete.
                records.pop();
            }
            let clock = ChunkClock::new(chunk, &records, conv, &mut state.offset);
            self.emit(chunk, &records, &clock, &state.threads, sink);
            aux.release(chunk.offset.saturating_add(chunk.size));
            // A thread scheduled in while the area is still full adds an empty truncated chunk:
            // only the fill that cut data off counts.
            drained.truncated += u64::from(chunk.truncated() && chunk.size > 0);
            drained.collisions +=
                u64::from(chunk.flags & u64::from(sys::PERF_AUX_FLAG_COLLISION) != 0);
            latest_close = latest_close.max(chunk.time_ns);
        }
        state
            .threads
            .forget_before(latest_close.saturating_sub(RUNS_KEPT_NS));
    }

    fn emit(
        &self,
        chunk: &AuxChunk,
        records: &[SpeRecord],
        clock: &ChunkClock,
        threads: &CpuThreads,
        sink: &mut dyn FnMut(PerfEvent),
    ) {
        for r in records {
            let time_ns = clock.time(r.timestamp);
            let (pid, tid) = threads
                .at(chunk.cpu, time_ns)
                .unwrap_or((chunk.pid, chunk.tid));
            let origin = SpeOrigin {
                pid,
                tid,
                cpu: Some(chunk.cpu),
                time_ns,
            };
            if let Some(a) = spe_access::access(r, origin, self.meaning, &self.physical) {
                sink(PerfEvent::Access(a));
            }
        }
    }
}

/// A `PERF_RECORD_SWITCH` of an event whose `sample_id` holds TID, TIME, CPU and IDENTIFIER:
/// whether the task switched out, its CPU, the time and the task.
fn switch(bytes: &[u8]) -> Option<(bool, u32, u64, (u32, u32))> {
    let misc = u16::from_le_bytes(bytes.get(4..6)?.try_into().ok()?);
    let out = u32::from(misc) & sys::PERF_RECORD_MISC_SWITCH_OUT != 0;
    let mut f = Fields::after_header(bytes);
    let task = f.u32_pair()?;
    let time_ns = f.u64()?;
    let (cpu, _) = f.u32_pair()?;
    Some((out, cpu, time_ns, task))
}

/// `CLOCK_MONOTONIC − perf_clock` as the chunks bound it (see the module's comment): the least
/// bound of the chunks closed in the last [`OFFSET_WINDOW_NS`], kept as a sliding minimum.
#[derive(Default)]
struct OffsetWindow {
    /// (close time, bound), bounds increasing from front to back.
    bounds: VecDeque<(u64, i128)>,
}

impl OffsetWindow {
    /// Takes the bound of a chunk closed at `close_ns` and returns the offset to use.
    fn observe(&mut self, close_ns: u64, bound: i128) -> i128 {
        while self.bounds.back().is_some_and(|&(_, b)| b >= bound) {
            self.bounds.pop_back();
        }
        self.bounds.push_back((close_ns, bound));
        while self.bounds.len() > 1
            && self
                .bounds
                .front()
                .is_some_and(|&(at, _)| at.saturating_add(OFFSET_WINDOW_NS) < close_ns)
        {
            self.bounds.pop_front();
        }
        self.bounds.front().map_or(bound, |&(_, b)| b)
    }
}

/// The `CLOCK_MONOTONIC` time of a chunk's timer counts.
struct ChunkClock {
    conv: Option<TimeConv>,
    offset: i128,
    close_ns: u64,
}

impl ChunkClock {
    fn new(
        chunk: &AuxChunk,
        records: &[SpeRecord],
        conv: Option<TimeConv>,
        window: &mut OffsetWindow,
    ) -> Self {
        let last = records.iter().rev().find_map(|r| r.timestamp);
        let offset = match (conv, last) {
            (Some(c), Some(count)) => {
                let bound = i128::from(chunk.time_ns) - i128::from(c.perf_time(count));
                window.observe(chunk.time_ns, bound)
            }
            _ => 0,
        };
        ChunkClock {
            conv: conv.filter(|_| last.is_some()),
            offset,
            close_ns: chunk.time_ns,
        }
    }

    fn time(&self, count: Option<u64>) -> u64 {
        match (self.conv, count) {
            (Some(c), Some(count)) => {
                let t = i128::from(c.perf_time(count)) + self.offset;
                // Never after the chunk closed (a count that wrapped or a damaged packet).
                t.clamp(0, i128::from(self.close_ns)) as u64
            }
            _ => self.close_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aux::fake::FakeAux;
    use numalens_assemble::perf_sample::spe::{self, encode};
    use numalens_format::{DataSource, SampleKind};

    /// One SPE record as the hardware lays it out, 64-byte aligned with padding.
    fn record(out: &mut Vec<u8>, store: bool, address: u64, physical: u64, count: u64) {
        let start = out.len();
        encode::address(out, spe::ADDRESS_PC, 0x40_1000);
        encode::op_type(out, spe::OP_CLASS_LOAD_STORE, u8::from(store));
        encode::events(
            out,
            (spe::EVENT_L1D_ACCESS
                | spe::EVENT_L1D_REFILL
                | spe::EVENT_LLC_ACCESS
                | spe::EVENT_LLC_MISS
                | spe::EVENT_REMOTE_ACCESS) as u16,
        );
        encode::counter(out, spe::COUNTER_TOTAL_LATENCY, 410);
        encode::address(out, spe::ADDRESS_DATA_VIRTUAL, address);
        encode::address(out, spe::ADDRESS_DATA_PHYSICAL, physical);
        encode::timestamp(out, count);
        while out.len() - start < 64 {
            out.push(0);
        }
    }

    /// The kernel's conversion in the first page: 2 ns a count from perf_clock 10 000.
    fn give_conversion(fake: &mut FakeAux) {
        fake.page.time_shift = 1;
        fake.page.time_mult = 4;
        fake.page.time_zero = 10_000;
        fake.page.__bindgen_anon_1.capabilities = 1 << 4;
    }

    fn reader() -> SpeReader {
        let meaning = SpeMeaning {
            interval: 65_536,
            neoverse: false,
        };
        // Blocks of 128 MiB: 0–3 on node 0, 4–7 on node 1.
        let physical = PhysicalNodes::from_runs(1 << 27, vec![(0, 4, 0), (4, 4, 1)]);
        let trailer = Trailer::of(crate::pmu_live::SPE_SAMPLE_TYPE);
        SpeReader::new(meaning, Arc::new(physical), trailer)
    }

    #[test]
    fn chunks_of_an_area_become_their_threads_accesses_with_times_on_the_recording_clock() {
        // An area of 512 bytes: a chunk of two records, then a chunk of two that wraps around
        // the area's end.
        let mut fake = FakeAux::new(512);
        let mut first = Vec::new();
        record(&mut first, false, 0x7f00_0000_1000, 5 << 27, 1_000);
        record(&mut first, true, 0x7f00_0000_2040, 1 << 27, 1_100);
        fake.area[256..384].copy_from_slice(&first);
        let mut second = Vec::new();
        record(&mut second, false, 0x7f00_0000_3000, 6 << 27, 2_000);
        // Another operation (a branch) is not an access.
        encode::op_type(&mut second, 2, 0);
        encode::timestamp(&mut second, 2_050);
        record(&mut second, true, 0x7f00_0000_4000, 2 << 27, 2_100);
        second.resize(192, 0);
        fake.area[384..512].copy_from_slice(&second[..128]);
        fake.area[..64].copy_from_slice(&second[128..]);
        give_conversion(&mut fake);
        let mut area = fake.area();
        // perf_clock of count 1 100 is 12 200; the first chunk closed at monotonic 500 300: the
        // clocks are at most 488 100 apart. The second closed well after its last record (its
        // thread waited in the kernel): its own bound, 585 800, is larger, and the least one
        // places its records.
        let chunk = |offset, size, tid, time_ns, flags| AuxChunk {
            offset,
            size,
            flags,
            pid: 40,
            tid,
            time_ns,
            cpu: 1,
        };
        let chunks = [
            chunk(256, 128, 41, 500_300, 0),
            chunk(384, 192, 42, 600_000, 1 | 8),
        ];
        let mut got = Vec::new();
        let mut drained = SpeDrained::default();
        reader().read_chunks(&mut area, &chunks, &mut drained, &mut |e| got.push(e));
        let got: Vec<_> = got
            .into_iter()
            .map(|e| match e {
                PerfEvent::Access(a) => a,
                other => panic!("{other:?}"),
            })
            .collect();
        let seen: Vec<(u32, u64, SampleKind, Option<u32>, u64)> = got
            .iter()
            .map(|a| (a.tid, a.address, a.kind, a.node, a.time_ns))
            .collect();
        assert_eq!(
            seen,
            [
                (41, 0x7f00_0000_1000, SampleKind::Load, Some(1), 500_100),
                (41, 0x7f00_0000_2040, SampleKind::Store, Some(0), 500_300),
                (42, 0x7f00_0000_3000, SampleKind::Load, Some(1), 502_100),
                (42, 0x7f00_0000_4000, SampleKind::Store, Some(0), 502_300),
            ]
        );
        let a = &got[0];
        assert_eq!(
            (a.pid, a.cpu, a.weight, a.latency),
            (40, Some(1), 65_536, Some(410))
        );
        assert_eq!(a.data_source, DataSource::RemoteDram);
        assert_eq!(area.tail(), 384 + 192, "both chunks given back");
        assert_eq!(
            drained.truncated, 1,
            "the second chunk says the area filled"
        );
        assert_eq!(drained.collisions, 1);
        assert_eq!(drained.bad_bytes, 0);
    }

    #[test]
    fn without_a_conversion_records_take_their_chunks_close_time() {
        let mut fake = FakeAux::new(128);
        let mut bytes = Vec::new();
        record(&mut bytes, false, 0x1000, 0, 5);
        record(&mut bytes, false, 0x2000, 0, 9);
        fake.area.copy_from_slice(&bytes);
        let mut area = fake.area();
        let chunk = AuxChunk {
            offset: 0,
            size: 128,
            flags: 0,
            pid: 1,
            tid: 2,
            time_ns: 777,
            cpu: 0,
        };
        let mut times = Vec::new();
        let mut drained = SpeDrained::default();
        reader().read_chunks(&mut area, &[chunk], &mut drained, &mut |e| {
            if let PerfEvent::Access(a) = e {
                times.push(a.time_ns)
            }
        });
        assert_eq!(times, [777, 777]);
        assert_eq!(drained.truncated, 0);
    }

    /// A `PERF_RECORD_SWITCH` as the kernel writes it for the SPE event's sample_id.
    fn switch_record(out: bool, (pid, tid): (u32, u32), time_ns: u64, cpu: u32) -> Vec<u8> {
        let misc = if out {
            sys::PERF_RECORD_MISC_SWITCH_OUT
        } else {
            0
        };
        let mut bytes = sys::PERF_RECORD_SWITCH.to_le_bytes().to_vec();
        bytes.extend((misc as u16).to_le_bytes());
        bytes.extend(40u16.to_le_bytes());
        for word in [
            u64::from(pid) | u64::from(tid) << 32,
            time_ns,
            u64::from(cpu),
            99,
        ] {
            bytes.extend(word.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn a_chunk_spanning_a_switch_between_sibling_threads_is_split_by_the_switches() {
        // The kernel switched CPU 1 from thread 41 to thread 42 without stopping the event
        // (their contexts were swapped): one chunk, closed for 42, holds both threads' records.
        let mut fake = FakeAux::new(256);
        let mut bytes = Vec::new();
        for (i, count) in [1_000, 1_100, 1_200, 1_300].into_iter().enumerate() {
            record(&mut bytes, false, 0x1000 * (i as u64 + 1), 0, count);
        }
        fake.area.copy_from_slice(&bytes);
        give_conversion(&mut fake);
        let mut area = fake.area();
        let reader = reader();
        let mut chunks = Vec::new();
        let mut other = Vec::new();
        for record in [
            switch_record(false, (40, 41), 599_000, 1),
            switch_record(true, (40, 41), 599_700, 1),
            switch_record(false, (40, 42), 599_700, 1),
            // Another CPU's switches say nothing of CPU 1.
            switch_record(false, (40, 43), 599_500, 2),
        ] {
            reader.take_record(&record, &mut chunks, &mut |e| other.push(e));
        }
        assert!(chunks.is_empty() && other.is_empty());
        let chunk = AuxChunk {
            offset: 0,
            size: 256,
            flags: 0,
            pid: 40,
            tid: 42,
            time_ns: 600_000,
            cpu: 1,
        };
        let mut got = Vec::new();
        let mut drained = SpeDrained::default();
        reader.read_chunks(&mut area, &[chunk], &mut drained, &mut |e| {
            if let PerfEvent::Access(a) = e {
                got.push((a.tid, a.time_ns))
            }
        });
        // Counts 1 000–1 300 are perf_clock 12 000–12 600, monotonic 599 400–600 000.
        assert_eq!(
            got,
            [(41, 599_400), (41, 599_600), (42, 599_800), (42, 600_000)]
        );
    }

    #[test]
    fn the_clocks_offset_is_the_least_bound_of_the_recent_chunks() {
        let mut w = OffsetWindow::default();
        let s = 1_000_000_000;
        assert_eq!(w.observe(0, 100), 100);
        assert_eq!(w.observe(s, 150), 100, "a chunk closed late");
        assert_eq!(w.observe(s + 1, 90), 90);
        // Past the window, an older least bound no longer holds (the clocks drift).
        assert_eq!(w.observe(2 * s + 2, 95), 90);
        assert_eq!(w.observe(3 * s + 2, 97), 95);
        assert_eq!(w.observe(6 * s, 120), 120);
    }
}
