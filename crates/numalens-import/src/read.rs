//! Reading a perf.data file into what the assembly takes: page-fault samples, sampled loads and
//! stores with their data source, and the task and mapping records.

use std::io::{BufReader, Seek};

use linux_perf_data::linux_perf_event_reader::{
    AttrFlags, EventRecord, PerfEventType, RawData, RawEventRecord, RecordType, SamplingPolicy,
    SoftwareCounterType,
};
use linux_perf_data::{Endianness, Feature, PerfFile, PerfFileReader, PerfFileRecord};
use numalens_assemble::raw::{Access, Fault, PerfEvent, UNKNOWN_CPU};
use numalens_format::SampleKind;

use numalens_assemble::perf_sample::access::{self, EventMeaning};
use numalens_assemble::perf_sample::bytes::{Bytes, Truncated};
use numalens_assemble::perf_sample::sample::{self, Layout, Sample};

use crate::aux_spe::{AuxOwners, Reorder, SpeReading, SpeSample};
pub use crate::first_pass::AccessStats;
use crate::first_pass::SpeThreads;
use crate::fixed::{FixedLayout, Head};
use crate::layout_check;
use crate::machine::{self, PhysicalNodes, RecordedNode};
use crate::records::{self, Order, Rec};
use crate::{EventSummary, ImportError};

/// `HEADER_MEM_TOPOLOGY` (feature 22; the reader names it `SAMPLE_TOPOLOGY`).
const MEM_TOPOLOGY: Feature = Feature::SAMPLE_TOPOLOGY;

/// What the file holds, decoded.
#[derive(Default)]
pub struct Decoded {
    pub faults: Vec<Fault>,
    /// The memory samples are not held (the second pass streams them): what the first pass saw
    /// of them.
    pub accesses: AccessStats,
    pub tasks: Vec<PerfEvent>,
    pub lost: u64,
    pub command: Vec<String>,
    pub hostname: String,
    pub os_release: String,
    pub arch: String,
    pub nodes: Vec<RecordedNode>,
    /// Wall-clock ns at the samples' clock's zero, when the file says (`HEADER_CLOCK_DATA`).
    pub wall_minus_clock_ns: Option<i128>,
    pub events: Vec<EventSummary>,
    /// Records that ended before a field they announce, or that are impossible (a mapping past
    /// the end of the address space): skipped.
    pub truncated: u64,
    /// Page-fault samples that stand for more than one fault (perf's default is 4000 samples a
    /// second, not every fault).
    pub sampled_faults: u64,
    /// The build id of each file the recording names, by path (`HEADER_BUILD_ID`).
    pub build_ids: std::collections::HashMap<String, Vec<u8>>,
    /// The process of each thread the task records name (SPE samples carry only the thread).
    pub pids: ahash::AHashMap<u32, u32>,
    /// The threads of the SPE buffers' stretches, from the kernel's AUX records.
    pub aux_owners: AuxOwners,
}

/// The software counters of page faults: every fault, or the minor or the major ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FaultCounter {
    All,
    Minor,
    Major,
}

/// How the samples of one event are read.
struct EventReading {
    layout: Layout,
    faults: bool,
    /// Which software fault counter, for a page-fault event.
    fault_counter: Option<FaultCounter>,
    /// Which faults it sees: user, kernel, hypervisor (bits 0–2), and how finely it samples
    /// them (its period; a frequency ranks after every period).
    fault_scope: (u8, u64),
    /// A page-fault event whose faults another event of the file already counts
    /// ([`same_faults`]): its samples are counted, not kept.
    counted_elsewhere: bool,
    meaning: EventMeaning,
    /// The type of a PMU the kernel numbered at boot (IBS, SPE, …).
    dynamic_type: Option<u32>,
    /// Where its samples' fields lie, when the layout has no field of variable size.
    fixed: Option<FixedLayout>,
}

fn event_reading(
    attr: &linux_perf_data::linux_perf_event_reader::PerfEventAttr,
    name: &str,
    ibs_op_type: Option<u32>,
) -> EventReading {
    let ibs = matches!(attr.type_, PerfEventType::DynamicPmu(t, ..) if Some(t) == ibs_op_type);
    let fault_counter = match attr.type_ {
        PerfEventType::Software(SoftwareCounterType::PageFaults) => Some(FaultCounter::All),
        PerfEventType::Software(SoftwareCounterType::PageFaultsMin) => Some(FaultCounter::Minor),
        PerfEventType::Software(SoftwareCounterType::PageFaultsMaj) => Some(FaultCounter::Major),
        _ => None,
    };
    let faults = fault_counter.is_some();
    let default_kind = if name.contains("store") {
        SampleKind::Store
    } else {
        SampleKind::Load
    };
    let fixed_period = match attr.sampling_policy {
        SamplingPolicy::Period(p) => p.get(),
        _ => 1,
    };
    let seen = |flag: AttrFlags| !attr.flags.contains(flag);
    let fault_scope = (
        u8::from(seen(AttrFlags::EXCLUDE_USER))
            | u8::from(seen(AttrFlags::EXCLUDE_KERNEL)) << 1
            | u8::from(seen(AttrFlags::EXCLUDE_HV)) << 2,
        match attr.sampling_policy {
            SamplingPolicy::Period(p) => p.get(),
            _ => u64::MAX,
        },
    );
    let layout = Layout {
        sample_type: attr.sample_format.bits(),
        read_format: attr.read_format.bits(),
        branch_sample_type: attr.branch_sample_format.bits(),
        sample_regs_user: attr.sample_regs_user,
        sample_regs_intr: attr.sample_regs_intr,
    };
    EventReading {
        fixed: FixedLayout::new(&layout),
        layout,
        faults,
        fault_counter,
        fault_scope,
        counted_elsewhere: false,
        meaning: EventMeaning {
            ibs,
            default_kind,
            fixed_period,
        },
        dynamic_type: match attr.type_ {
            PerfEventType::DynamicPmu(t, ..) => Some(t),
            _ => None,
        },
    }
}

/// Marks the page-fault events whose faults another event already counts. The kernel counts a
/// fault in `page-faults` and again in `minor-faults` or `major-faults`, each as a sample of its
/// own (a few microseconds apart: not one sample twice), so `perf record -e page-faults -e
/// minor-faults` holds every minor fault twice. Events are taken finest sampling first, then
/// the widest view (user, kernel, hypervisor), then `page-faults` before its parts; one is kept
/// unless a kept one counts some of the same faults: the same counter or `page-faults` against
/// a part, and a view in common. `page-faults:u` and `page-faults:k` are both kept (they see
/// different faults); of `page-faults` every 1,000 and `minor-faults` every fault, the complete
/// minor faults are kept; `minor-faults` and `major-faults` never count the same fault.
fn same_faults(events: &mut [EventReading]) {
    let mut order: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].fault_counter.is_some())
        .collect();
    order.sort_by_key(|&i| {
        let e = &events[i];
        let (view, period) = e.fault_scope;
        let part = e.fault_counter != Some(FaultCounter::All);
        (period, std::cmp::Reverse(view.count_ones()), part)
    });
    let mut kept: Vec<(FaultCounter, u8)> = Vec::new();
    for i in order {
        let e = &mut events[i];
        let Some(counter) = e.fault_counter else {
            continue;
        };
        let view = e.fault_scope.0;
        let overlaps = |&(c, v): &(FaultCounter, u8)| {
            let counters = c == counter || c == FaultCounter::All || counter == FaultCounter::All;
            counters && v & view != 0
        };
        e.counted_elsewhere = kept.iter().any(overlaps);
        if !e.counted_elsewhere {
            kept.push((counter, view));
        }
    }
}

/// What the records of a file are read with.
struct Reading {
    big_endian: bool,
    events: Vec<EventReading>,
    physical: PhysicalNodes,
    /// `HEADER_CPUID`.
    cpuid: String,
    /// The events were recorded on a clock of their own (`perf record -k`), not perf's.
    own_clock: bool,
}

impl Reading {
    /// The reading of the SPE records of this file.
    fn spe(&self) -> SpeReading {
        let mut spe = SpeReading::new(&self.cpuid);
        // SPE's timer counts become perf's clock (TIME_CONV): another clock's switch times
        // cannot be compared with them.
        spe.switch_times_comparable = !self.own_clock;
        spe
    }
}

impl Reading {
    /// The index of the event of the PMU type `pmu`.
    fn event_of_pmu(&self, pmu: u32) -> Option<usize> {
        self.events.iter().position(|e| e.dynamic_type == Some(pmu))
    }

    /// The SPE records of a record perf wrote (an AUXTRACE record's data) to `sink`.
    fn spe_records(
        &self,
        spe: &mut SpeReading,
        record: &linux_perf_data::RawUserRecord<'_>,
        sink: &mut dyn FnMut(&SpeReading, SpeSample),
    ) {
        let interval = |pmu: u32| {
            self.event_of_pmu(pmu)
                .map(|e| self.events[e].meaning.fixed_period)
        };
        spe.user_record(
            record.record_type,
            record.data,
            self.big_endian,
            &interval,
            sink,
        );
    }
}

/// The first pass: the header, the task and mapping records, the page faults, and what the
/// memory samples are (not the samples themselves).
pub fn read_file(file: std::fs::File) -> Result<Decoded, ImportError> {
    // A second descriptor for the mapped reading (out of descriptors: say so, not "damaged").
    let own = Some(file.try_clone().map_err(ImportError::Read)?);
    let PerfFileReader {
        mut perf_file,
        record_iter,
    } = PerfFileReader::parse_file(BufReader::with_capacity(1 << 20, file))?;
    let reading = reading(&perf_file)?;
    let mut d = header(&perf_file, reading.big_endian)?;
    d.events = perf_file
        .event_attributes()
        .iter()
        .zip(&reading.events)
        .map(|(a, r)| EventSummary {
            name: a
                .name
                .clone()
                .unwrap_or_else(|| format!("{:?}", a.attr.type_)),
            faults: r.faults,
            counted_elsewhere: r.counted_elsewhere,
            samples: 0,
            with_address: 0,
        })
        .collect();
    let mut body = Vec::new();
    let mut spe = reading.spe();
    spe.defer_unknown_threads();
    let mut spe_threads = SpeThreads::default();
    // Read in the file's order: what is kept is put in time order after.
    let order = Order::File;
    each_record((own, order), &mut perf_file, record_iter, &mut |record| {
        let (attr_index, data) = match record {
            Rec::Sample(attr_index, data) => (attr_index, data),
            Rec::Event(record) => {
                spe.owners.add_record(&record, reading.big_endian);
                spe.kernel_record(&record);
                return take_task(&mut d, &record, reading.big_endian);
            }
            Rec::User(user) => {
                reading.spe_records(&mut spe, &user, &mut |_, s| spe_threads.add(&s));
                return Ok(());
            }
        };
        let Some(r) = reading.events.get(attr_index) else {
            return Ok(());
        };
        // A memory sample is only counted here: its thread, time and address are enough.
        if let (Some(fixed), RawData::Single(bytes), false, false) =
            (&r.fixed, data, r.faults, r.meaning.ibs)
        {
            match fixed.head(bytes, reading.big_endian) {
                Ok(head) => count_access(&mut d, attr_index, head),
                Err(_) => d.truncated += 1,
            }
            return Ok(());
        }
        match sample_body(data, &mut body, reading.big_endian, r) {
            Ok(s) => count_sample(&mut d, (attr_index, r), &s, reading.big_endian),
            Err(_) => d.truncated += 1,
        }
        Ok(())
    })?;
    spe.finish_deferred(&mut |_, s| spe_threads.add(&s));
    d.accesses.settle();
    // perf's order of records of one time is the file's: a stable sort keeps it.
    d.tasks.sort_by_key(task_time);
    d.faults.sort_by_key(|f| f.time_ns);
    d.pids = processes(&d.tasks);
    if let Some(e) = spe.pmu_type.and_then(|t| reading.event_of_pmu(t)) {
        d.events[e].samples += spe_threads.count;
        d.events[e].with_address += spe_threads.count;
    }
    spe_threads.into_stats(&mut d.accesses, &d.pids);
    d.truncated += u64::from(spe.bad_bytes > 0);
    d.aux_owners = spe.owners;
    Ok(d)
}

/// When a task or mapping record happened.
fn task_time(t: &PerfEvent) -> u64 {
    match t {
        PerfEvent::Comm { time_ns, .. }
        | PerfEvent::Fork { time_ns, .. }
        | PerfEvent::Exit { time_ns, .. }
        | PerfEvent::Mmap { time_ns, .. } => *time_ns,
        PerfEvent::Fault(f) => f.time_ns,
        PerfEvent::Access(a) => a.time_ns,
        PerfEvent::Lost { .. } => 0,
    }
}

/// The process of each thread, from the task records.
fn processes(tasks: &[PerfEvent]) -> ahash::AHashMap<u32, u32> {
    tasks
        .iter()
        .filter_map(|t| match t {
            PerfEvent::Fork { pid, tid, .. } | PerfEvent::Comm { pid, tid, .. } => {
                Some((*tid, *pid))
            }
            _ => None,
        })
        .collect()
}

/// The second pass: every memory sample with a data address, in time order, to `sink`.
pub fn stream_accesses(
    file: std::fs::File,
    (pids, owners): (&ahash::AHashMap<u32, u32>, AuxOwners),
    sink: &mut dyn FnMut(Access),
) -> Result<(), ImportError> {
    // A second descriptor for the mapped reading (out of descriptors: say so, not "damaged").
    let own = Some(file.try_clone().map_err(ImportError::Read)?);
    let PerfFileReader {
        mut perf_file,
        record_iter,
    } = PerfFileReader::parse_file(BufReader::with_capacity(1 << 20, file))?;
    let reading = reading(&perf_file)?;
    let mut body = Vec::new();
    let mut spe = reading.spe();
    spe.owners = owners;
    let mut reorder = Reorder::default();
    let order = Order::Time;
    each_record((own, order), &mut perf_file, record_iter, &mut |record| {
        let (attr_index, data) = match record {
            Rec::Sample(attr_index, data) => (attr_index, data),
            Rec::Event(record) => {
                spe.kernel_record(&record);
                return Ok(());
            }
            Rec::User(user) => {
                reading.spe_records(&mut spe, &user, &mut |spe, s| {
                    if let Some(a) = spe.access(&s, pids, &reading.physical) {
                        reorder.push(a, sink)
                    }
                });
                return Ok(());
            }
        };
        let Some(r) = reading.events.get(attr_index) else {
            return Ok(());
        };
        if r.faults {
            return Ok(());
        }
        if let Ok(s) = sample_body(data, &mut body, reading.big_endian, r)
            && let Some(a) = access_of(r, &s, &reading)
        {
            sink(a);
        }
        Ok(())
    })?;
    reorder.finish(sink);
    Ok(())
}

/// Every record of the data section in time order: read from the mapped section by numalens' own
/// round reader, or by the `linux-perf-data` crate's iterator for compressed files (or when the
/// file cannot be mapped).
fn each_record(
    (own, order): (Option<std::fs::File>, Order),
    perf_file: &mut PerfFile,
    mut record_iter: linux_perf_data::PerfRecordIter<BufReader<std::fs::File>>,
    each: &mut dyn FnMut(Rec<'_>) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let compressed = perf_file
        .feature_section_data(Feature::COMPRESSED)
        .is_some();
    let Some(mut file) = own else {
        return Err(ImportError::Damaged("its data section is unreadable"));
    };
    let big_endian = perf_file.endian() == Endianness::BigEndian;
    let section = records::data_section(&file, big_endian)?;
    if !compressed && let Some(data) = records::map_data(&file, section) {
        // The round reader refuses a record that leaves the section itself.
        return records::for_each(&data, perf_file, order, each);
    }
    // The crate's iterator sizes buffers by the records' sizes: they are checked first, and the
    // position the iterator reads from (the clone shares it) is put back.
    let unread = |_| ImportError::Damaged("its data section is unreadable");
    let position = file.stream_position().map_err(unread)?;
    layout_check::check_records(&mut file, section, big_endian).map_err(ImportError::Damaged)?;
    file.seek(std::io::SeekFrom::Start(position))
        .map_err(unread)?;
    while let Some(record) = record_iter.next_record(perf_file)? {
        each(match record {
            PerfFileRecord::EventRecord { attr_index, record }
                if record.record_type == RecordType::SAMPLE =>
            {
                Rec::Sample(attr_index, record.data)
            }
            PerfFileRecord::EventRecord { record, .. } => Rec::Event(record),
            PerfFileRecord::UserRecord(user) => Rec::User(user),
        })?;
    }
    Ok(())
}

fn reading(perf_file: &PerfFile) -> Result<Reading, ImportError> {
    let big_endian = perf_file.endian() == Endianness::BigEndian;
    let physical = match perf_file.feature_section_data(MEM_TOPOLOGY) {
        Some(section) => machine::parse_mem_topology(section, big_endian)
            .map_err(|_| ImportError::Header("MEM_TOPOLOGY"))?,
        None => PhysicalNodes::default(),
    };
    // The IBS op PMU's type on the recording machine, from the file's PMU list.
    let ibs_op_type = pmu_type(perf_file, "ibs_op", big_endian);
    let mut events: Vec<EventReading> = perf_file
        .event_attributes()
        .iter()
        .map(|a| event_reading(&a.attr, a.name.as_deref().unwrap_or(""), ibs_op_type))
        .collect();
    same_faults(&mut events);
    let own_clock = perf_file
        .event_attributes()
        .iter()
        .any(|a| a.attr.flags.contains(AttrFlags::USE_CLOCKID));
    let cpuid = Bytes::new(
        perf_file
            .feature_section_data(Feature::CPUID)
            .unwrap_or_default(),
        big_endian,
    )
    .header_string()
    .unwrap_or_default();
    Ok(Reading {
        big_endian,
        events,
        physical,
        cpuid,
        own_clock,
    })
}

/// What the header says of the recording and its machine. The feature sections are read here
/// rather than by the reader's own getters, which size buffers by the lengths the file gives.
fn header(perf_file: &PerfFile, big_endian: bool) -> Result<Decoded, ImportError> {
    let section = |f: Feature| perf_file.feature_section_data(f).unwrap_or_default();
    let text = |f: Feature| {
        Bytes::new(section(f), big_endian)
            .header_string()
            .unwrap_or_default()
    };
    let mut d = Decoded {
        build_ids: build_ids(section(Feature::BUILD_ID), big_endian),
        command: strings(section(Feature::CMDLINE), big_endian),
        hostname: text(Feature::HOSTNAME),
        os_release: text(Feature::OSRELEASE),
        arch: text(Feature::ARCH),
        ..Decoded::default()
    };
    if let Some(section) = perf_file.feature_section_data(Feature::NUMA_TOPOLOGY) {
        d.nodes = machine::parse_numa_topology(section, big_endian)
            .map_err(|_| ImportError::Header("NUMA_TOPOLOGY"))?;
    }
    // HEADER_CLOCK_DATA: version, clock id, then the wall clock and that clock at one instant.
    let mut clock = Bytes::new(section(Feature::CLOCK_DATA), big_endian);
    if let (Ok(_), Ok(_), Ok(wall), Ok(at)) = (clock.u32(), clock.u32(), clock.u64(), clock.u64()) {
        d.wall_minus_clock_ns = Some(i128::from(wall) - i128::from(at));
    }
    Ok(d)
}

/// `HEADER_BUILD_ID`: records of a header, a pid, 24 bytes of build id (its length in the 21st
/// when the header's misc says so, else 20) and the file's NUL-terminated path.
fn build_ids(section: &[u8], big_endian: bool) -> std::collections::HashMap<String, Vec<u8>> {
    const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
    let mut ids = std::collections::HashMap::new();
    let mut b = Bytes::new(section, big_endian);
    while let (Ok(_kind), Ok(misc), Ok(size)) = (b.u32(), b.u16(), b.u16()) {
        let Ok(body) = b.take(usize::from(size).saturating_sub(8)) else {
            break;
        };
        if body.len() < 28 {
            continue;
        }
        let id = &body[4..28];
        let len = if misc & MISC_BUILD_ID_SIZE != 0 {
            usize::from(id[20]).min(20)
        } else {
            20
        };
        let path = &body[28..];
        let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
        ids.insert(
            String::from_utf8_lossy(&path[..end]).into_owned(),
            id[..len].to_vec(),
        );
    }
    ids
}

/// A count, then that many `perf_header_string`s (`HEADER_CMDLINE`).
fn strings(section: &[u8], big_endian: bool) -> Vec<String> {
    let mut b = Bytes::new(section, big_endian);
    let count = b.u32().unwrap_or(0);
    (0..count).map_while(|_| b.header_string().ok()).collect()
}

/// The type of the PMU named `name` in `HEADER_PMU_MAPPINGS` (a count, then a type and a name
/// each).
fn pmu_type(perf_file: &PerfFile, name: &str, big_endian: bool) -> Option<u32> {
    let mut b = Bytes::new(
        perf_file.feature_section_data(Feature::PMU_MAPPINGS)?,
        big_endian,
    );
    let count = b.u32().ok()?;
    (0..count)
        .map_while(|_| Some((b.u32().ok()?, b.header_string().ok()?)))
        .find(|(_, n)| n == name)
        .map(|(t, _)| t)
}

/// A sample record's body, decoded where the reader holds it (copied only when the record is
/// split across the reader's buffers).
fn sample_body<'b>(
    data: RawData<'b>,
    body: &'b mut Vec<u8>,
    big_endian: bool,
    r: &EventReading,
) -> Result<Sample<'b>, Truncated> {
    if let (RawData::Single(bytes), Some(fixed)) = (data, &r.fixed) {
        return fixed.decode(bytes, big_endian);
    }
    let bytes: &'b [u8] = match data {
        RawData::Single(bytes) => bytes,
        split => {
            body.clear();
            body.resize(split.len(), 0);
            let mut data = split;
            data.read_exact(body).map_err(|_| Truncated)?;
            body
        }
    };
    sample::decode(bytes, big_endian, &r.layout)
}

/// The first pass's view of a memory sample of a fixed layout: counted.
fn count_access(d: &mut Decoded, event: usize, head: Head) {
    let summary = &mut d.events[event];
    summary.samples += 1;
    // As `access::data_address` takes it for an event that is not IBS.
    if head.addr.is_some_and(|a| a != 0) {
        summary.with_address += 1;
        d.accesses.add(head.pid, head.tid, head.time);
    }
}

/// The first pass's view of a sample: page faults are kept, memory samples counted.
fn count_sample(
    d: &mut Decoded,
    (event, r): (usize, &EventReading),
    s: &Sample<'_>,
    big_endian: bool,
) {
    let summary = &mut d.events[event];
    summary.samples += 1;
    let Some((address, _)) = access::data_address(&r.meaning, s, big_endian) else {
        return;
    };
    summary.with_address += 1;
    let (pid, tid, time_ns) = (s.pid.unwrap_or(0), s.tid.unwrap_or(0), s.time.unwrap_or(0));
    if !r.faults {
        d.accesses.add(pid, tid, time_ns);
        return;
    }
    if r.counted_elsewhere {
        return;
    }
    if s.period.unwrap_or(r.meaning.fixed_period) > 1 {
        d.sampled_faults += 1;
    }
    d.faults.push(Fault {
        pid,
        tid,
        time_ns,
        address,
        cpu: s.cpu.unwrap_or(UNKNOWN_CPU),
        mapped_page_size: s
            .data_page_size
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
        ip: s.ip.unwrap_or(0),
    });
}

/// A memory sample as an access, when it has a data address.
fn access_of(r: &EventReading, s: &Sample<'_>, reading: &Reading) -> Option<Access> {
    access::access(&r.meaning, s, reading.big_endian, &reading.physical)
}

/// Whether an MMAP2 record with a build id gives it a length over the 20 bytes it has room for
/// (pid, tid, address, length and offset come first: 32 bytes).
fn bad_build_id(record: &RawEventRecord<'_>) -> bool {
    const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
    record.record_type == RecordType::MMAP2
        && record.misc & MISC_MMAP_BUILD_ID != 0
        && record.data.as_slice().get(32).is_some_and(|&len| len > 20)
}

/// Task, mapping and loss records, as the live sampler decodes them.
fn take_task(
    d: &mut Decoded,
    record: &RawEventRecord<'_>,
    big_endian: bool,
) -> Result<(), ImportError> {
    let time_ns = record.timestamp().unwrap_or(0);
    let text = |raw: linux_perf_data::linux_perf_event_reader::RawData<'_>| {
        String::from_utf8_lossy(&raw.as_slice()).into_owned()
    };
    // A task or mapping record cut short is skipped like a cut sample, not the whole file; so
    // is an MMAP2 whose build id claims more than 20 bytes, which the reader would panic on.
    if bad_build_id(record) {
        d.truncated += 1;
        return Ok(());
    }
    let Ok(parsed) = record.parse() else {
        d.truncated += 1;
        return Ok(());
    };
    let event = match parsed {
        EventRecord::Comm(c) => PerfEvent::Comm {
            pid: c.pid as u32,
            tid: c.tid as u32,
            name: text(c.name),
            exec: c.is_execve,
            time_ns,
        },
        EventRecord::Fork(f) => PerfEvent::Fork {
            pid: f.pid as u32,
            ppid: f.ppid as u32,
            tid: f.tid as u32,
            ptid: f.ptid as u32,
            time_ns,
        },
        EventRecord::Exit(e) => PerfEvent::Exit {
            pid: e.pid as u32,
            tid: e.tid as u32,
            time_ns,
        },
        EventRecord::Mmap2(m) => PerfEvent::Mmap {
            pid: m.pid as u32,
            tid: m.tid as u32,
            start: m.address,
            len: m.length,
            pgoff: m.page_offset,
            prot: m.protection,
            flags: m.flags,
            path: text(m.path),
            time_ns,
        },
        EventRecord::Mmap(m) => PerfEvent::Mmap {
            pid: m.pid as u32,
            tid: m.tid as u32,
            start: m.address,
            len: m.length,
            pgoff: m.page_offset,
            // MMAP (without the 2) tells only whether the mapping is executable.
            prot: if m.is_executable { 0x5 } else { 0x3 },
            flags: 0,
            path: text(m.path),
            time_ns,
        },
        EventRecord::Lost(l) => {
            d.lost = d.lost.saturating_add(l.count);
            return Ok(());
        }
        _ => {
            if record.record_type == RecordType::LOST_SAMPLES {
                let body = record.data.as_slice();
                let lost = Bytes::new(&body, big_endian).u64().unwrap_or(0);
                d.lost = d.lost.saturating_add(lost);
            }
            return Ok(());
        }
    };
    if let PerfEvent::Mmap {
        start, len, pgoff, ..
    } = &event
        && (start.checked_add(*len).is_none() || pgoff.checked_add(*len).is_none())
    {
        // A mapping past the end of the address space: a damaged record.
        d.truncated += 1;
        return Ok(());
    }
    d.tasks.push(event);
    Ok(())
}
