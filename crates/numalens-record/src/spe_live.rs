//! Arm SPE recorded live: the event's packets come in its AUX area (`aux.rs`), in chunks that
//! `PERF_RECORD_AUX` records of its ring announce. Each chunk is one thread's: the event follows
//! the program's tasks, and the kernel closes the area's chunk whenever the task is switched
//! out or the area's watermark interrupts it, writing the record with the running task's pid,
//! tid, CPU and time. The packets are decoded by the reader `numalens import` uses for SPE
//! recordings.
//!
//! The thread is the chunk's, not a context packet's: the hardware writes context packets only
//! for privileged users on kernels that keep the thread id in `CONTEXTIDR_EL1`, and then with
//! the id of the kernel's first pid namespace, which is not the recorder's in a container.
//!
//! Times: each record ends with the generic timer's count; the ring's first page says how counts
//! become the kernel's `perf_clock` (`sched_clock` on arm64), not the `CLOCK_MONOTONIC` of every
//! other record. The two clocks differ by an offset: each chunk's is taken as the one that puts
//! its last record at the chunk's close, whose time is on `CLOCK_MONOTONIC` (the records of a
//! chunk are microseconds apart at the default interval, and the chunk closes when the last was
//! written or when the task stops running). A record without a count, or a kernel that gives no
//! conversion, gets the chunk's close time.

use std::sync::Arc;

use numalens_assemble::perf_sample::physical::PhysicalNodes;
use numalens_assemble::perf_sample::spe::{Records, SpeRecord, TimeConv};
use numalens_assemble::perf_sample::spe_access::{self, SpeMeaning, SpeOrigin};
use numalens_assemble::raw::PerfEvent;

use crate::aux::{AuxArea, AuxChunk};
use crate::perf::PerfRing;
use crate::records::{Trailer, decode_task};

/// How an SPE event's ring and AUX area are read.
pub struct SpeReader {
    pub meaning: SpeMeaning,
    pub physical: Arc<PhysicalNodes>,
    pub trailer: Trailer,
}

/// What reading one ring's new chunks gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpeDrained {
    pub records: usize,
    /// The area had filled: the kernel dropped packets after a chunk.
    pub truncated: bool,
    /// Bytes that were not packets.
    pub bad_bytes: u64,
}

impl SpeReader {
    /// Reads every record now in `ring` and the AUX chunks they announce, hands out their
    /// accesses and the other records, and gives the chunks' space back to the kernel.
    pub fn drain(&self, ring: &mut PerfRing, sink: &mut dyn FnMut(PerfEvent)) -> SpeDrained {
        let mut chunks = Vec::new();
        let mut drained = SpeDrained {
            records: ring.drain(|bytes| match AuxChunk::parse(bytes) {
                Some(chunk) => chunks.push(chunk),
                None => decode_task(bytes, self.trailer)
                    .into_iter()
                    .for_each(&mut *sink),
            }),
            ..SpeDrained::default()
        };
        if let Some(aux) = ring.aux_mut() {
            self.read_chunks(aux, &chunks, &mut drained, sink);
        }
        drained
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
        let mut records = Vec::new();
        for chunk in chunks {
            records.clear();
            let mut reading = Records::new(aux.chunk(chunk.offset, chunk.size));
            records.extend(reading.by_ref().filter(spe_access::is_access));
            drained.bad_bytes += reading.bad;
            self.emit(chunk, &records, conv, sink);
            aux.release(chunk.offset.saturating_add(chunk.size));
            drained.truncated |= chunk.truncated();
        }
    }

    fn emit(
        &self,
        chunk: &AuxChunk,
        records: &[SpeRecord],
        conv: Option<TimeConv>,
        sink: &mut dyn FnMut(PerfEvent),
    ) {
        let clock = ChunkClock::new(chunk, records, conv);
        for r in records {
            let origin = SpeOrigin {
                pid: chunk.pid,
                tid: chunk.tid,
                cpu: Some(chunk.cpu),
                time_ns: clock.time(r.timestamp),
            };
            if let Some(a) = spe_access::access(r, origin, self.meaning, &self.physical) {
                sink(PerfEvent::Access(a));
            }
        }
    }
}

/// The `CLOCK_MONOTONIC` time of a chunk's timer counts (see the module's comment).
struct ChunkClock {
    conv: Option<TimeConv>,
    /// `CLOCK_MONOTONIC` minus `perf_clock`, in ns.
    offset: i128,
    close_ns: u64,
}

impl ChunkClock {
    fn new(chunk: &AuxChunk, records: &[SpeRecord], conv: Option<TimeConv>) -> Self {
        let last = records.iter().rev().find_map(|r| r.timestamp);
        let offset = match (conv, last) {
            (Some(c), Some(count)) => i128::from(chunk.time_ns) - i128::from(c.perf_time(count)),
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

    fn reader() -> SpeReader {
        SpeReader {
            meaning: SpeMeaning {
                interval: 65_536,
                neoverse: false,
            },
            // Blocks of 128 MiB: 0–3 on node 0, 4–7 on node 1.
            physical: Arc::new(PhysicalNodes::from_runs(
                1 << 27,
                vec![(0, 4, 0), (4, 4, 1)],
            )),
            trailer: Trailer::of(crate::pmu_live::SPE_SAMPLE_TYPE),
        }
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
        // The kernel's conversion: 2 ns a count from perf_clock 10 000.
        fake.page.time_shift = 1;
        fake.page.time_mult = 4;
        fake.page.time_zero = 10_000;
        fake.page.__bindgen_anon_1.capabilities = 1 << 4;
        let mut area = fake.area();
        // perf_clock of count 1 100 is 12 200; the chunk closed at monotonic 500 300: the
        // clocks are 488 100 apart.
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
            chunk(384, 192, 42, 600_000, 1),
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
                (42, 0x7f00_0000_3000, SampleKind::Load, Some(1), 599_800),
                (42, 0x7f00_0000_4000, SampleKind::Store, Some(0), 600_000),
            ]
        );
        let a = &got[0];
        assert_eq!(
            (a.pid, a.cpu, a.weight, a.latency),
            (40, Some(1), 65_536, Some(410))
        );
        assert_eq!(a.data_source, DataSource::RemoteDram);
        assert_eq!(area.tail(), 384 + 192, "both chunks given back");
        assert!(drained.truncated, "the second chunk says the area filled");
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
        assert!(!drained.truncated);
    }
}
