//! The live `pmu` backend: the precise memory events of `pmu_events.rs` opened per CPU for the
//! program's task tree like the page faults of the `faults` backend (same rings, same launch,
//! same spill), their samples read by the decoder `numalens import` uses for perf.data files.
//! The page faults are sampled beside them for the first touches.
//!
//! Requested per sample: IP, TID, TIME, ADDR, CPU, IDENTIFIER, DATA_SRC, WEIGHT_STRUCT and
//! PHYS_ADDR (and RAW for AMD IBS, whose registers say what the other fields may not). The
//! kernel refuses some of these on some kernels and machines: the open falls back one step at a
//! time (kernel-mode samples, the physical address — which needs CAP_PERFMON —, the lost count,
//! the weight structure for the older single weight, the precision) and the profile's backend
//! settings say what was kept.
//!
//! [`STAND_IN_VAR`] substitutes the software event `page-faults` for the hardware event, with
//! the same sample fields (the kernel fills the data source with "not available" and the
//! weight with 0 for a software event): everything but the attribute — rings, inheritance,
//! decoding, spill, recovery, assembly — then runs for real on a machine without a PMU. It is
//! for tests; a profile recorded so names the stand-in as its event.

use std::collections::BTreeMap;
use std::sync::Arc;

use numalens_assemble::perf_sample::access::{self, EventMeaning};
use numalens_assemble::perf_sample::physical::PhysicalNodes;
use numalens_assemble::perf_sample::sample::{self, Layout};
use numalens_assemble::raw::{PerfEvent, SamplerInfo};
use numalens_format::SampleKind;
use perf_event_open_sys::bindings::{self as sys, perf_event_attr};

use crate::pmu_events::LiveEvent;
use crate::records::{Trailer, decode_task};
use crate::sampler::{EventRings, RingReader, Sampler, SamplerError, task_tree_attr};

/// `NUMALENS_PMU_STAND_IN=page-faults`: record `--backend pmu` with the software page-fault
/// event in place of the hardware one (tests on machines without a PMU). `--backend auto` never
/// takes it: it records with what the machine has.
pub const STAND_IN_VAR: &str = "NUMALENS_PMU_STAND_IN";

/// The one value [`STAND_IN_VAR`] takes.
pub const STAND_IN_VALUE: &str = "page-faults";

/// Whether [`STAND_IN_VAR`] asks for the stand-in (unset or empty: no); any other value than
/// [`STAND_IN_VALUE`] is an error that names it.
pub fn stand_in_requested() -> Result<bool, String> {
    match std::env::var_os(STAND_IN_VAR) {
        None => Ok(false),
        Some(v) if v.is_empty() => Ok(false),
        Some(v) if v == STAND_IN_VALUE => Ok(true),
        Some(v) => Err(format!(
            "{STAND_IN_VAR}={}: the only value it takes is `{STAND_IN_VALUE}` (a test stand-in \
             for a precise memory event, with --backend pmu); unset it to record with this \
             machine's PMU",
            v.to_string_lossy()
        )),
    }
}

/// The stand-in for a precise memory event, with `period` (default 1: every page fault).
pub fn stand_in(period: Option<u64>) -> LiveEvent {
    LiveEvent {
        name: "page-faults (stand-in for a precise memory event)".into(),
        perf_type: sys::PERF_TYPE_SOFTWARE,
        config: [sys::PERF_COUNT_SW_PAGE_FAULTS as u64, 0, 0],
        leader_config: None,
        precise_ip: 0,
        raw: false,
        cpus: None,
        meaning: EventMeaning {
            ibs: false,
            default_kind: SampleKind::Load,
            fixed_period: period.unwrap_or(1),
        },
    }
}

/// Why `--backend pmu` cannot record on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoLiveEvent {
    /// No precise memory event at all.
    #[error(transparent)]
    Missing(#[from] crate::pmu::NoPreciseEvent),
    /// One that the live sampler does not drive (Arm SPE), or a period it does not take.
    #[error("{0}")]
    NotDriven(String),
    /// [`STAND_IN_VAR`] has a value it does not take.
    #[error("{0}")]
    BadStandIn(String),
}

/// The events `--backend pmu` opens on this machine: the stand-in when [`STAND_IN_VAR`] asks
/// for it, else the precise memory events of its PMU ([`choose_hardware`]).
pub fn choose(period: Option<u64>) -> Result<Vec<LiveEvent>, NoLiveEvent> {
    if stand_in_requested().map_err(NoLiveEvent::BadStandIn)? {
        return Ok(vec![stand_in(period)]);
    }
    choose_hardware(period)
}

/// The precise memory events of this machine's PMU, with `period` (or their default) and the
/// default load-latency threshold, whatever [`STAND_IN_VAR`] says.
pub fn choose_hardware(period: Option<u64>) -> Result<Vec<LiveEvent>, NoLiveEvent> {
    let found = crate::pmu::host()?;
    let devices = std::path::Path::new(crate::pmu::DEVICES);
    crate::pmu_events::live_events(&found, devices, period, crate::pmu_events::DEFAULT_LDLAT)
        .map_err(NoLiveEvent::NotDriven)
}

/// How a precise ring's records are read.
pub struct PreciseReader {
    layout: Layout,
    meaning: EventMeaning,
    physical: Arc<PhysicalNodes>,
    trailer: Trailer,
}

impl PreciseReader {
    /// A sample as an access, other records as the faults backend reads them.
    pub fn decode(&self, bytes: &[u8]) -> Option<PerfEvent> {
        if crate::records::kind(bytes)? != sys::PERF_RECORD_SAMPLE {
            return decode_task(bytes, self.trailer);
        }
        let s = sample::decode(bytes.get(8..)?, false, &self.layout).ok()?;
        access::access(&self.meaning, &s, false, &self.physical).map(PerfEvent::Access)
    }
}

/// What the open asks of the kernel; each refusal takes one step back.
#[derive(Debug, Clone, Copy)]
struct Features {
    kernel: bool,
    phys_addr: bool,
    lost_counted: bool,
    weight_struct: bool,
    /// Lowered from the event's own precision when the PMU does not offer it.
    precise_cut: u8,
}

impl Sampler {
    /// The `pmu` backend: `events` for `pid` (which has not exec'd yet), each on its CPUs or
    /// on `cpus`.
    pub fn precise(
        pid: i32,
        cpus: &[u32],
        ring_pages: usize,
        events: &[LiveEvent],
    ) -> Result<Sampler, SamplerError> {
        let physical = Arc::new(PhysicalNodes::host());
        let mut want = Features {
            kernel: true,
            phys_addr: true,
            lost_counted: true,
            weight_struct: true,
            precise_cut: 0,
        };
        let most_precise = events.iter().map(|e| e.precise_ip).max().unwrap_or(0);
        loop {
            let err = match open_precise(pid, cpus, ring_pages, events, want, &physical) {
                Ok(sampler) => return Ok(sampler),
                Err(e) => e,
            };
            match &err {
                SamplerError::Denied(_) if want.kernel => want.kernel = false,
                SamplerError::Denied(_) if want.phys_addr => want.phys_addr = false,
                e if e.is_invalid() && want.lost_counted => want.lost_counted = false,
                e if e.is_invalid() && want.weight_struct => want.weight_struct = false,
                e if e.is_invalid() && want.phys_addr => want.phys_addr = false,
                e if e.is_invalid() && want.precise_cut + 1 < most_precise => want.precise_cut += 1,
                _ => return Err(err),
            }
        }
    }
}

fn open_precise(
    pid: i32,
    cpus: &[u32],
    ring_pages: usize,
    events: &[LiveEvent],
    want: Features,
    physical: &Arc<PhysicalNodes>,
) -> Result<Sampler, SamplerError> {
    let attrs: Vec<perf_event_attr> = events.iter().map(|e| precise_attr(e, want)).collect();
    let mut rings: Vec<EventRings<'_>> = events
        .iter()
        .zip(&attrs)
        .map(|(e, attr)| EventRings {
            name: &e.name,
            attr: *attr,
            leader: e
                .leader_config
                .map(|config| leader_attr(e.perf_type, config, want)),
            cpus: e.cpus.as_deref().unwrap_or(cpus),
            reader: RingReader::Precise(Arc::new(PreciseReader {
                layout: Layout {
                    sample_type: attr.sample_type,
                    ..Layout::default()
                },
                meaning: e.meaning,
                physical: Arc::clone(physical),
                trailer: Trailer::of(attr.sample_type),
            })),
        })
        .collect();
    // First touches place pages, which no load or store sample says: the page faults are
    // sampled beside them, as with `--backend faults`. Their page sizes come with Linux 5.11,
    // the lost count with 6.0: a kernel that counts losses has both.
    rings.push(crate::faults::fault_rings(
        cpus,
        crate::faults::Features {
            kernel: want.kernel,
            page_sizes: want.lost_counted,
            lost_counted: want.lost_counted,
        },
    ));
    let info = SamplerInfo {
        cpus: Vec::new(),
        ring_pages,
        kernel_faults: want.kernel,
        page_sizes: want.lost_counted,
        lost_counted: want.lost_counted,
        settings: settings(events, &attrs, want, physical),
    };
    Sampler::open_events(pid, &rings, ring_pages, info)
}

/// The sample fields asked for with `want`.
fn sample_type(event: &LiveEvent, want: Features) -> u64 {
    let mut t = sample::IP
        | sample::TID
        | sample::TIME
        | sample::ADDR
        | sample::CPU
        | sample::IDENTIFIER
        | sample::DATA_SRC;
    t |= if want.weight_struct {
        sample::WEIGHT_STRUCT
    } else {
        sample::WEIGHT
    };
    if want.phys_addr {
        t |= sample::PHYS_ADDR;
    }
    if event.raw {
        t |= sample::RAW;
    }
    t
}

/// The attribute of `event`, for the program's task tree.
fn precise_attr(event: &LiveEvent, want: Features) -> perf_event_attr {
    let mut attr = task_tree_attr(!want.kernel);
    // The page-fault event opened beside it writes the task and mapping records: each event
    // asking for them too would write every fork, exit and mapping once more.
    attr.set_comm(0);
    attr.set_task(0);
    attr.set_mmap(0);
    attr.set_mmap2(0);
    attr.set_mmap_data(0);
    attr.type_ = event.perf_type;
    attr.config = event.config[0];
    attr.__bindgen_anon_3.config1 = event.config[1];
    attr.__bindgen_anon_4.config2 = event.config[2];
    attr.__bindgen_anon_1.sample_period = event.meaning.fixed_period;
    attr.sample_type = sample_type(event, want);
    if want.lost_counted {
        attr.read_format = sys::PERF_FORMAT_LOST as u64;
    }
    attr.set_precise_ip(u64::from(event.precise_ip.saturating_sub(want.precise_cut)));
    attr
}

/// The counting event that leads a precise event's group: it follows the task tree like its
/// member, on its clock, but takes no samples and writes no records.
fn leader_attr(perf_type: u32, config: [u64; 3], want: Features) -> perf_event_attr {
    // SAFETY: perf_event_attr is plain data; all-zero is its documented empty state.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = perf_type;
    attr.config = config[0];
    attr.__bindgen_anon_3.config1 = config[1];
    attr.__bindgen_anon_4.config2 = config[2];
    attr.set_disabled(1);
    attr.set_enable_on_exec(1);
    attr.set_inherit(1);
    attr.set_exclude_kernel(u64::from(!want.kernel));
    attr.set_exclude_hv(1);
    // The kernel refuses a group whose events are on different clocks.
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr
}

/// The backend settings of the profile: what was opened and what the kernel accepted.
fn settings(
    events: &[LiveEvent],
    attrs: &[perf_event_attr],
    want: Features,
    physical: &PhysicalNodes,
) -> BTreeMap<String, serde_json::Value> {
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    let periods: Vec<u64> = events.iter().map(|e| e.meaning.fixed_period).collect();
    let precise: Vec<u64> = attrs.iter().map(|a| a.precise_ip()).collect();
    let mut s = BTreeMap::new();
    s.insert("event".into(), names.join(" ").into());
    s.insert("sample_period".into(), periods.into());
    s.insert("precise_ip".into(), precise.into());
    let weight = if want.weight_struct {
        "weight_struct"
    } else {
        "weight"
    };
    s.insert("latency_field".into(), weight.into());
    s.insert("physical_addresses".into(), want.phys_addr.into());
    s.insert(
        "nodes_from_memory_blocks".into(),
        (!physical.is_empty()).into(),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ibs() -> LiveEvent {
        LiveEvent {
            name: "ibs_op//".into(),
            perf_type: 11,
            config: [1 << 16, 0, 0],
            leader_config: None,
            precise_ip: 0,
            raw: true,
            cpus: None,
            meaning: EventMeaning {
                ibs: true,
                default_kind: SampleKind::Load,
                fixed_period: 65_536,
            },
        }
    }

    const ALL: Features = Features {
        kernel: true,
        phys_addr: true,
        lost_counted: true,
        weight_struct: true,
        precise_cut: 0,
    };

    #[test]
    fn the_attribute_asks_for_every_field_of_a_memory_sample_and_steps_back() {
        let mut intel = ibs();
        (intel.raw, intel.precise_ip, intel.perf_type) = (false, 2, 4);
        intel.config = [0x1cd, 30, 0];
        let attr = precise_attr(&intel, ALL);
        let wanted = sample::IP
            | sample::TID
            | sample::TIME
            | sample::ADDR
            | sample::CPU
            | sample::IDENTIFIER
            | sample::DATA_SRC
            | sample::WEIGHT_STRUCT
            | sample::PHYS_ADDR;
        assert_eq!(attr.sample_type, wanted);
        assert_eq!((attr.type_, attr.config), (4, 0x1cd));
        // SAFETY: reading the union member this attribute was built with.
        assert_eq!(unsafe { attr.__bindgen_anon_3.config1 }, 30);
        assert_eq!(attr.precise_ip(), 2);
        assert_eq!(attr.inherit(), 1);
        assert_eq!(attr.enable_on_exec(), 1);
        assert_eq!(attr.exclude_kernel(), 0);
        assert_eq!(attr.read_format, sys::PERF_FORMAT_LOST as u64);
        // SAFETY: as above.
        assert_eq!(unsafe { attr.__bindgen_anon_1.sample_period }, 65_536);

        let older = Features {
            kernel: false,
            phys_addr: false,
            lost_counted: false,
            weight_struct: false,
            precise_cut: 1,
        };
        let attr = precise_attr(&intel, older);
        assert_eq!(
            attr.sample_type,
            wanted & !(sample::WEIGHT_STRUCT | sample::PHYS_ADDR) | sample::WEIGHT
        );
        assert_eq!(
            (attr.precise_ip(), attr.exclude_kernel(), attr.read_format),
            (1, 1, 0)
        );

        // IBS: its registers come as raw data, without a precision level.
        let attr = precise_attr(&ibs(), ALL);
        assert_eq!(attr.sample_type, wanted | sample::RAW);
        assert_eq!(
            (attr.type_, attr.config, attr.precise_ip()),
            (11, 1 << 16, 0)
        );
    }

    #[test]
    fn an_ibs_sample_from_a_ring_becomes_an_access_with_its_registers() {
        use numalens_assemble::perf_sample::ibs;
        use numalens_format::DataSource;
        let attr = precise_attr(&ibs(), ALL);
        let reader = PreciseReader {
            layout: Layout {
                sample_type: attr.sample_type,
                ..Layout::default()
            },
            meaning: ibs().meaning,
            physical: Arc::new(PhysicalNodes::from_runs(
                1 << 27,
                vec![(0, 4, 0), (4, 4, 1)],
            )),
            trailer: Trailer::of(attr.sample_type),
        };
        // A load that missed to remote DRAM, as the kernel lays the record out.
        let regs = [
            0,
            0x40_1000,
            0,
            ibs::op_data2(3, true),
            ibs::op_data3(false, true, 250),
            0x7f00_0040,
            5 << 27,
        ];
        let raw = ibs::raw(0, &regs);
        let mut body: Vec<u8> = Vec::new();
        body.extend(99u64.to_le_bytes()); // identifier, first of all
        body.extend(0x40_1000u64.to_le_bytes()); // ip
        body.extend((7u64 | 8 << 32).to_le_bytes()); // pid, tid
        body.extend(1234u64.to_le_bytes()); // time
        body.extend(0u64.to_le_bytes()); // addr: IBS leaves it to the registers
        body.extend(1u64.to_le_bytes()); // cpu, reserved
        body.extend((raw.len() as u32).to_le_bytes());
        body.extend(&raw);
        body.extend(0u64.to_le_bytes()); // weight
        body.extend(0u64.to_le_bytes()); // data source
        body.extend(0u64.to_le_bytes()); // physical address
        let mut record = sys::PERF_RECORD_SAMPLE.to_le_bytes().to_vec();
        record.extend(0u16.to_le_bytes());
        record.extend(((body.len() + 8) as u16).to_le_bytes());
        record.extend(body);
        let Some(PerfEvent::Access(a)) = reader.decode(&record) else {
            panic!("not an access")
        };
        assert_eq!((a.pid, a.tid, a.time_ns, a.cpu), (7, 8, 1234, Some(1)));
        assert_eq!((a.address, a.kind), (0x7f00_0040, SampleKind::Load));
        assert_eq!((a.latency, a.node, a.weight), (Some(250), Some(1), 65_536));
        // The kernel's own data source says nothing (kernels before 6.1): the registers tell.
        assert_eq!(a.data_source, DataSource::RemoteDram);
    }
}
