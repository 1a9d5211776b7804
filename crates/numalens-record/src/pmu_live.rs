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
use crate::sampler::{EventRings, Refusal, RingReader, Sampler, SamplerError, task_tree_attr};
use crate::spe_live::SpeReader;
use numalens_assemble::perf_sample::spe_access::SpeMeaning;

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
        spe: None,
    }
}

/// Why `--backend pmu` cannot record on this machine.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoLiveEvent {
    /// No precise memory event at all.
    #[error(transparent)]
    Missing(#[from] crate::pmu::NoPreciseEvent),
    /// A period or configuration the machine's event does not take.
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

/// What the open asks of the kernel for one event; each refusal of that event takes one step
/// back for it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Features {
    kernel: bool,
    phys_addr: bool,
    /// The physical address was refused for want of privilege (not by a kernel without it).
    phys_addr_denied: bool,
    lost_counted: bool,
    weight_struct: bool,
    /// Lowered from the event's own precision when the PMU does not offer it.
    precise_cut: u8,
    /// Arm SPE's filters keeping loads and stores only (dropped when the PMU refuses them: the
    /// decoder skips other operations).
    spe_filters: bool,
}

impl Features {
    const ALL: Features = Features {
        kernel: true,
        phys_addr: true,
        phys_addr_denied: false,
        lost_counted: true,
        weight_struct: true,
        precise_cut: 0,
        spe_filters: true,
    };

    /// One step back after the kernel refused this event with `error`, whose precision is
    /// `precise_ip`: false when there is none left. Kernel-mode samples and physical addresses
    /// need the same privilege (`permission.rs`); a field the kernel or the PMU does not take is
    /// dropped newest first, then the precision, down to 1. An SPE event (`spe`) has no weight
    /// or precision to drop, but filters.
    fn step_back(&mut self, error: &SamplerError, precise_ip: u8, spe: bool) -> bool {
        let denied = matches!(error, SamplerError::Denied(_));
        let invalid = error.is_invalid();
        if denied && spe && self.phys_addr {
            // SPE's physical addresses need CAP_PERFMON whatever perf_event_paranoid says: they
            // go first, so that kernel-mode samples are not given up for them.
            (self.phys_addr, self.phys_addr_denied) = (false, true);
        } else if denied && self.kernel {
            self.kernel = false;
        } else if denied && self.phys_addr {
            (self.phys_addr, self.phys_addr_denied) = (false, true);
        } else if invalid && self.lost_counted {
            self.lost_counted = false;
        } else if invalid && spe && self.spe_filters {
            self.spe_filters = false;
        } else if invalid && !spe && self.weight_struct {
            self.weight_struct = false;
        } else if invalid && self.phys_addr {
            self.phys_addr = false;
        } else if invalid && self.precise_cut + 1 < precise_ip {
            self.precise_cut += 1;
        } else {
            return false;
        }
        true
    }
}

/// What every event of a `pmu` sampler asks for: each precise event's own, then the page
/// faults' beside them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    events: Vec<Features>,
    faults: crate::faults::Features,
}

impl Wanted {
    fn all(events: usize) -> Wanted {
        Wanted {
            events: vec![Features::ALL; events],
            faults: crate::faults::Features {
                kernel: true,
                page_sizes: true,
                lost_counted: true,
            },
        }
    }

    /// One step back for the event the kernel refused (in a group or a set of events, that
    /// event alone: another may take what it does not): false when it has none left.
    fn step_back(&mut self, events: &[LiveEvent], refusal: &Refusal) -> bool {
        match self.events.get_mut(refusal.event) {
            Some(want) => {
                let event = &events[refusal.event];
                want.step_back(&refusal.error, event.precise_ip, event.spe.is_some())
            }
            // Past the precise events: the page faults opened beside them.
            None => crate::faults::step_back(&mut self.faults, &refusal.error),
        }
    }
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
        let mut want = Wanted::all(events.len());
        loop {
            let refusal = match open_precise(pid, cpus, ring_pages, events, &want, &physical) {
                Ok(sampler) => return Ok(sampler),
                Err(refusal) => refusal,
            };
            if !want.step_back(events, &refusal) {
                return Err(refusal.error);
            }
        }
    }
}

fn open_precise(
    pid: i32,
    cpus: &[u32],
    ring_pages: usize,
    events: &[LiveEvent],
    want: &Wanted,
    physical: &Arc<PhysicalNodes>,
) -> Result<Sampler, Refusal> {
    let attrs: Vec<perf_event_attr> = events
        .iter()
        .zip(&want.events)
        .map(|(e, w)| precise_attr(e, *w))
        .collect();
    let mut rings: Vec<EventRings<'_>> = events
        .iter()
        .zip(&attrs)
        .zip(&want.events)
        .map(|((e, attr), w)| EventRings {
            name: &e.name,
            attr: *attr,
            leader: e
                .leader_config
                .map(|config| leader_attr(e.perf_type, config, *w)),
            cpus: e.cpus.as_deref().unwrap_or(cpus),
            reader: ring_reader(e, attr, physical),
        })
        .collect();
    // First touches place pages, which no load or store sample says: the page faults are
    // sampled beside them, as with `--backend faults`.
    rings.push(crate::faults::fault_rings(cpus, want.faults));
    let every = |f: fn(&Features) -> bool| want.events.iter().all(f);
    let info = SamplerInfo {
        cpus: Vec::new(),
        ring_pages,
        kernel_faults: want.faults.kernel && every(|w| w.kernel),
        page_sizes: want.faults.page_sizes,
        // The loss is read from every ring, so only when each counts it.
        lost_counted: want.faults.lost_counted && every(|w| w.lost_counted),
        settings: settings(events, &attrs, &want.events, physical),
    };
    Sampler::open_events(pid, &rings, ring_pages, info)
}

/// How the rings of `event`, opened with `attr`, are read.
fn ring_reader(
    event: &LiveEvent,
    attr: &perf_event_attr,
    physical: &Arc<PhysicalNodes>,
) -> RingReader {
    let physical = Arc::clone(physical);
    let trailer = Trailer::of(attr.sample_type);
    match event.spe {
        Some(spe) => {
            let meaning = SpeMeaning {
                interval: event.meaning.fixed_period,
                neoverse: spe.neoverse,
            };
            RingReader::Spe(Arc::new(SpeReader::new(meaning, physical, trailer)))
        }
        None => RingReader::Precise(Arc::new(PreciseReader {
            layout: Layout {
                sample_type: attr.sample_type,
                ..Layout::default()
            },
            meaning: event.meaning,
            physical,
            trailer,
        })),
    }
}

/// What the `sample_id` of an SPE event's records holds (it takes no samples: its packets go to
/// the AUX area, announced by AUX records carrying these).
pub const SPE_SAMPLE_TYPE: u64 = sample::TID | sample::TIME | sample::CPU | sample::IDENTIFIER;

/// The sample fields asked for with `want`.
fn sample_type(event: &LiveEvent, want: Features) -> u64 {
    if event.spe.is_some() {
        return SPE_SAMPLE_TYPE;
    }
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
    let config = configuration(event, want);
    attr.type_ = event.perf_type;
    attr.config = config[0];
    attr.__bindgen_anon_3.config1 = config[1];
    attr.__bindgen_anon_4.config2 = config[2];
    attr.__bindgen_anon_1.sample_period = event.meaning.fixed_period;
    attr.sample_type = sample_type(event, want);
    if want.lost_counted {
        attr.read_format = sys::PERF_FORMAT_LOST as u64;
    }
    attr.set_precise_ip(u64::from(event.precise_ip.saturating_sub(want.precise_cut)));
    // SPE's records are told apart by the threads' switches (`spe_live.rs`).
    attr.set_context_switch(u64::from(event.spe.is_some()));
    attr
}

/// The event's configuration words without what `want` dropped (SPE's physical addresses and
/// filters are configuration terms, not sample fields).
fn configuration(event: &LiveEvent, want: Features) -> [u64; 3] {
    let mut config = event.config;
    if let Some(spe) = event.spe {
        for (word, i) in config.iter_mut().zip(0..) {
            if !want.phys_addr {
                *word &= !spe.physical_bits[i];
            }
            if !want.spe_filters {
                *word &= !spe.filter_bits[i];
            }
        }
    }
    config
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

/// The backend settings of the profile: what was opened and what the kernel accepted (a
/// field is kept when every event kept it; a latency field that differs is listed per event).
fn settings(
    events: &[LiveEvent],
    attrs: &[perf_event_attr],
    want: &[Features],
    physical: &PhysicalNodes,
) -> BTreeMap<String, serde_json::Value> {
    let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
    let periods: Vec<u64> = events.iter().map(|e| e.meaning.fixed_period).collect();
    let precise: Vec<u64> = attrs.iter().map(|a| a.precise_ip()).collect();
    let mut s = BTreeMap::new();
    s.insert("event".into(), names.join(" ").into());
    s.insert("sample_period".into(), periods.into());
    s.insert("precise_ip".into(), precise.into());
    let weights: Vec<&str> = want
        .iter()
        .zip(events)
        .map(|(w, e)| {
            if e.spe.is_some() {
                "spe_total_latency"
            } else if w.weight_struct {
                "weight_struct"
            } else {
                "weight"
            }
        })
        .collect();
    let latency_field = match weights.split_first() {
        Some((first, rest)) if rest.iter().all(|w| w == first) => (*first).into(),
        _ => weights.into(),
    };
    s.insert("latency_field".into(), latency_field);
    s.insert(
        "physical_addresses".into(),
        want.iter().all(|w| w.phys_addr).into(),
    );
    if want.iter().any(|w| w.phys_addr_denied) {
        s.insert("physical_addresses_denied".into(), true.into());
    }
    let spe: Vec<&Features> = want
        .iter()
        .zip(events)
        .filter(|(_, e)| e.spe.is_some())
        .map(|(w, _)| w)
        .collect();
    if !spe.is_empty() {
        s.insert(
            "spe_type_filter".into(),
            spe.iter().all(|w| w.spe_filters).into(),
        );
    }
    s.insert(
        "nodes_from_memory_blocks".into(),
        (!physical.is_empty()).into(),
    );
    s
}

#[cfg(test)]
#[path = "pmu_live_tests.rs"]
mod tests;
