//! Arm SPE recordings (`perf record -e arm_spe_0//`): the samples are not sample records but
//! the SPE packets of the AUX buffer, which perf copies into `PERF_RECORD_AUXTRACE` records. The
//! `PERF_RECORD_AUXTRACE_INFO` record names the SPE PMU's type, `PERF_RECORD_TIME_CONV` how the
//! generic timer's counts in the packets become perf's time, and `HEADER_CPUID` the CPU (whose
//! data source packet's encoding depends on it).

use ahash::AHashMap;
use linux_perf_data::UserRecordType;
use linux_perf_data::linux_perf_event_reader::{RawData, RawEventRecord, RecordType};
use numalens_assemble::perf_sample::bytes::Bytes;
use numalens_assemble::perf_sample::cpu_threads::CpuThreads;
use numalens_assemble::perf_sample::physical::PhysicalNodes;
use numalens_assemble::perf_sample::spe::{self, Records, SpeRecord, TimeConv};
use numalens_assemble::perf_sample::spe_access::{self, SpeMeaning, SpeOrigin};
use numalens_assemble::raw::Access;

/// The CPU, time and task (pid, tid) of a kernel record's `sample_id`.
fn task_on_cpu(record: &RawEventRecord<'_>) -> Option<(u32, Option<u64>, (u32, u32))> {
    let common = record.common_data().ok()?;
    let id = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok());
    Some((
        common.cpu?,
        common.timestamp,
        (id(common.pid)?, id(common.tid)?),
    ))
}

/// `PERF_RECORD_MISC_SWITCH_OUT`.
const MISC_SWITCH_OUT: u16 = 1 << 13;

/// At most this many samples wait for their stretch's AUX record (a file that lost them would
/// otherwise hold every sample): past it, a sample's thread is unknown.
const MAX_DEFERRED: usize = 1 << 20;

/// How long the threads' runs of each CPU are remembered after the latest record.
const RUNS_KEPT_NS: u64 = 10_000_000_000;

/// `perf_record_auxtrace_info.type` of Arm SPE.
const AUXTRACE_ARM_SPE: u32 = 4;
/// `PERF_RECORD_AUXTRACE`'s fields before its data: size, offset, reference, idx, tid, cpu.
const AUXTRACE_FIELDS: usize = 40;

/// What is known of the recording's SPE data, from the records read so far.
#[derive(Debug, Clone, Default)]
pub struct SpeReading {
    /// The SPE PMU's type on the recording machine (from AUXTRACE_INFO).
    pub pmu_type: Option<u32>,
    time: Option<TimeConv>,
    neoverse: bool,
    /// The SPE event's sampling interval (operations a sample stands for).
    interval: u64,
    /// Bytes of the AUX data that were not packets.
    pub bad_bytes: u64,
    /// The latest record's time so far.
    latest_ns: Option<u64>,
    /// Samples whose stretch's AUX record had not been read yet (CPU, byte of the buffer),
    /// when they are held for it ([`SpeReading::defer_unknown_threads`]).
    deferred: Option<Vec<(u32, u64, SpeSample)>>,
    /// The threads of the buffers' stretches (`PERF_RECORD_AUX`), for recordings without
    /// switch records.
    pub owners: AuxOwners,
    /// Which thread ran on each CPU when, from the switch records.
    threads: CpuThreads,
    /// The switch records' times are on the clock the timer counts are converted to (perf's
    /// own, not one given with `perf record -k`).
    pub switch_times_comparable: bool,
}

/// Which thread each stretch of a CPU's AUX buffer was written for, from the kernel's
/// `PERF_RECORD_AUX` records: the event follows tasks and closes a stretch whenever its task is
/// switched out, and the record carries that task's pid and tid. A per-CPU recording's AUXTRACE
/// records name no thread, and the hardware writes context packets only for privileged users on
/// kernels that keep the thread id in `CONTEXTIDR_EL1`: without these stretches every sample of
/// such a recording would be one unknown thread's.
#[derive(Debug, Clone, Default)]
pub struct AuxOwners {
    /// Per CPU: (first byte, end, pid, tid), by first byte.
    by_cpu: AHashMap<u32, Vec<(u64, u64, u32, u32)>>,
}

impl AuxOwners {
    /// A `PERF_RECORD_AUX` record: `size` bytes at `offset` of `cpu`'s buffer for `pid`/`tid`.
    pub fn add(&mut self, cpu: u32, (offset, size): (u64, u64), (pid, tid): (u32, u32)) {
        if size > 0 {
            let list = self.by_cpu.entry(cpu).or_default();
            list.push((offset, offset.saturating_add(size), pid, tid));
        }
    }

    /// Takes a kernel `PERF_RECORD_AUX` record: its stretch of buffer and the task it was
    /// written for.
    pub fn add_record(&mut self, record: &RawEventRecord<'_>, big_endian: bool) {
        if record.record_type != RecordType::AUX {
            return;
        }
        let body = record.data.as_slice();
        let mut b = Bytes::new(&body, big_endian);
        if let (Ok(offset), Ok(size), Some((cpu, _, task))) =
            (b.u64(), b.u64(), task_on_cpu(record))
        {
            self.add(cpu, (offset, size), task);
        }
    }

    /// Sorts what was added (each CPU's records come in order; this keeps a damaged file's
    /// order from mattering).
    pub fn finish(&mut self) {
        for list in self.by_cpu.values_mut() {
            list.sort_unstable();
        }
    }

    /// The process and thread the byte at `position` of `cpu`'s buffer was written for.
    pub fn owner(&self, cpu: u32, position: u64) -> Option<(u32, u32)> {
        let list = self.by_cpu.get(&cpu)?;
        let i = list.partition_point(|&(start, ..)| start <= position);
        let &(_, end, pid, tid) = list.get(i.checked_sub(1)?)?;
        (position < end).then_some((pid, tid))
    }
}

/// An SPE record of a load or store, with what the AUXTRACE record says of where it was taken.
#[derive(Debug, Clone)]
pub struct SpeSample {
    pub record: SpeRecord,
    /// Thread id: the context packet's, else the AUXTRACE record's (per-thread recording), else
    /// the kernel's AUX record's for the stretch of buffer it came from.
    pub tid: Option<u32>,
    /// The process, when the AUX record named it.
    pub pid: Option<u32>,
    pub cpu: Option<u32>,
    pub time_ns: u64,
}

impl SpeReading {
    /// `cpuid` is `HEADER_CPUID` (on Arm the MIDR in hex).
    pub fn new(cpuid: &str) -> Self {
        let midr = u64::from_str_radix(cpuid.trim().trim_start_matches("0x"), 16).unwrap_or(0);
        SpeReading {
            neoverse: spe::neoverse_data_source(midr),
            interval: 1,
            ..SpeReading::default()
        }
    }

    /// Holds the samples of a thread not known yet until [`SpeReading::finish_deferred`] (a
    /// pass that reads the file in its order, where a stretch's AUX record may come after its
    /// data).
    pub fn defer_unknown_threads(&mut self) {
        self.deferred = Some(Vec::new());
    }

    /// The held samples, with the threads the AUX records read since give them.
    pub fn finish_deferred(&mut self, sink: &mut dyn FnMut(&SpeReading, SpeSample)) {
        self.owners.finish();
        for (cpu, at, mut sample) in self.deferred.take().unwrap_or_default() {
            if let Some((pid, tid)) = self.owners.owner(cpu, at) {
                (sample.pid, sample.tid) = (Some(pid), Some(tid));
            }
            sink(self, sample);
        }
    }

    /// Takes a kernel record: a context switch (`PERF_RECORD_SWITCH`, or `_CPU_WIDE` of a
    /// system-wide recording) says which thread runs on its CPU from its time.
    pub fn kernel_record(&mut self, record: &RawEventRecord<'_>) {
        if !matches!(
            record.record_type,
            RecordType::SWITCH | RecordType::SWITCH_CPU_WIDE
        ) {
            return;
        }
        let Some((cpu, Some(time), task)) = task_on_cpu(record) else {
            return;
        };
        if record.misc & MISC_SWITCH_OUT != 0 {
            self.threads.switch_out(cpu, time, task);
        } else {
            self.threads.switch_in(cpu, time, task);
        }
    }

    /// Takes a record perf wrote (not the kernel): the AUX data's description, time conversion,
    /// or the data itself, whose load and store records go to `sink`. `interval_of` gives the
    /// sampling interval of the event of a PMU type.
    pub fn user_record(
        &mut self,
        kind: UserRecordType,
        data: RawData<'_>,
        big_endian: bool,
        interval_of: &dyn Fn(u32) -> Option<u64>,
        sink: &mut dyn FnMut(&SpeReading, SpeSample),
    ) {
        if kind == UserRecordType::PERF_AUXTRACE_INFO {
            let body = data.as_slice();
            let mut b = Bytes::new(&body, big_endian);
            if let (Ok(AUXTRACE_ARM_SPE), Ok(_), Ok(pmu)) = (b.u32(), b.u32(), b.u64()) {
                let pmu = u32::try_from(pmu).ok();
                self.pmu_type = pmu;
                self.interval = pmu.and_then(interval_of).unwrap_or(1).max(1);
            }
        } else if kind == UserRecordType::PERF_TIME_CONV {
            let body = data.as_slice();
            self.time = TimeConv::parse(&mut Bytes::new(&body, big_endian));
        } else if kind == UserRecordType::PERF_AUXTRACE && self.pmu_type.is_some() {
            let body = data.as_slice();
            self.auxtrace(&body, big_endian, sink);
        }
    }

    fn auxtrace(
        &mut self,
        body: &[u8],
        big_endian: bool,
        sink: &mut dyn FnMut(&SpeReading, SpeSample),
    ) {
        let mut b = Bytes::new(body, big_endian);
        let (Ok(size), Ok(offset), Ok(_reference), Ok(_idx), Ok(tid), Ok(cpu)) =
            (b.u64(), b.u64(), b.u64(), b.u32(), b.u32(), b.u32())
        else {
            return;
        };
        let data = body.get(AUXTRACE_FIELDS..).unwrap_or_default();
        let data = &data[..data.len().min(usize::try_from(size).unwrap_or(usize::MAX))];
        // -1: per-CPU recording (no thread), or per-thread recording (no CPU).
        let known = |v: u32| (v != u32::MAX).then_some(v);
        let mut records = Records::new(data);
        while let Some(record) = records.next() {
            if !spe_access::is_access(&record) {
                continue;
            }
            let count = record.timestamp.unwrap_or(0);
            let time_ns = self.time.map_or(count, |t| t.perf_time(count));
            // The record's last byte: within the stretch that held it.
            let at = offset.wrapping_add(records.position().saturating_sub(1) as u64);
            let timed = self.time.is_some() && record.timestamp.is_some();
            let owner = known(cpu).and_then(|c| self.thread_at(c, timed.then_some(time_ns), at));
            let sample = SpeSample {
                tid: record.context.or(known(tid)).or(owner.map(|o| o.1)),
                pid: owner.map(|o| o.0),
                cpu: known(cpu),
                time_ns,
                record,
            };
            // perf reads a CPU's ring before its AUX buffer, so a stretch closed in between is
            // copied before its AUX record: in a pass in file order, its samples wait for it.
            if let (None, Some(deferred), Some(c)) =
                (sample.tid, self.deferred.as_mut(), known(cpu))
                && deferred.len() < MAX_DEFERRED
            {
                deferred.push((c, at, sample));
                continue;
            }
            sink(self, sample);
        }
        self.bad_bytes += records.bad;
        if let Some(latest) = self.latest_ns {
            self.threads
                .forget_before(latest.saturating_sub(RUNS_KEPT_NS));
        }
    }

    /// Who ran on `cpu` at `time_ns` (perf's time of the record, when it has one and the
    /// file converts it), by the switch records; where they cannot say, the task of the AUX
    /// record whose stretch holds byte `at` of the CPU's buffer (the kernel closes a stretch at
    /// a switch, though not between sibling threads whose contexts it swaps).
    fn thread_at(&mut self, cpu: u32, time_ns: Option<u64>, at: u64) -> Option<(u32, u32)> {
        let by_switches = time_ns
            .filter(|_| self.switch_times_comparable)
            .and_then(|t| {
                self.latest_ns = Some(self.latest_ns.unwrap_or(0).max(t));
                // The idle task is no thread of a program.
                self.threads.at(cpu, t).filter(|&(_, tid)| tid != 0)
            });
        by_switches.or_else(|| self.owners.owner(cpu, at))
    }

    /// The access an SPE sample stands for; `pid_of` gives a thread's process.
    pub fn access(
        &self,
        s: &SpeSample,
        pid_of: &AHashMap<u32, u32>,
        physical: &PhysicalNodes,
    ) -> Option<Access> {
        let tid = s.tid.unwrap_or(0);
        let origin = SpeOrigin {
            pid: pid_of.get(&tid).copied().or(s.pid).unwrap_or(tid),
            tid,
            cpu: s.cpu,
            time_ns: s.time_ns,
        };
        let meaning = SpeMeaning {
            interval: self.interval,
            neoverse: self.neoverse,
        };
        spe_access::access(&s.record, origin, meaning, physical)
    }
}

/// Accesses from several CPUs' AUX buffers interleave in time: they are held in a window of
/// this many and handed on in time order (the buffers of one round overlap; those of rounds
/// further apart do not), so memory stays bounded whatever the file's length.
const REORDER_WINDOW: usize = 1 << 16;

/// Puts SPE accesses back in time order within [`REORDER_WINDOW`].
#[derive(Default)]
pub struct Reorder {
    held: Vec<Access>,
}

impl Reorder {
    pub fn push(&mut self, a: Access, sink: &mut dyn FnMut(Access)) {
        self.held.push(a);
        if self.held.len() >= 2 * REORDER_WINDOW {
            self.held.sort_by_key(|a| a.time_ns);
            self.held.drain(..REORDER_WINDOW).for_each(&mut *sink);
        }
    }

    pub fn finish(mut self, sink: &mut dyn FnMut(Access)) {
        self.held.sort_by_key(|a| a.time_ns);
        self.held.drain(..).for_each(sink);
    }
}
