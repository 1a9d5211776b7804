//! The `faults` backend: the perf software event `page-faults` with period 1, sampled with the
//! faulting address, thread, time, CPU and instruction address, inherited by every thread and
//! child of the profiled program (the rings: `sampler.rs`).

use std::collections::BTreeMap;
use std::io;

use numalens_assemble::raw::{Fault, PerfEvent, SamplerInfo};
use perf_event_open_sys::bindings::{self as sys, perf_event_attr};

use crate::records::{Fields, Trailer, decode_task};
use crate::sampler::{EventRings, RingReader, Sampler, SamplerError, task_tree_attr};

/// Sample fields requested, in the order the kernel writes them.
const SAMPLE_TYPE: u64 = (sys::PERF_SAMPLE_IP
    | sys::PERF_SAMPLE_TID
    | sys::PERF_SAMPLE_TIME
    | sys::PERF_SAMPLE_ADDR
    | sys::PERF_SAMPLE_CPU) as u64;

/// The MMU page size of the faulting address when the fault is taken (Linux 5.11+): 0 for a
/// page that is not mapped (a first touch), the real size (4 KiB, 2 MiB) for a present page (a
/// NUMA-balancing hinting fault on a THP is a 2 MiB fault).
const SAMPLE_PAGE_SIZE: u64 = sys::PERF_SAMPLE_DATA_PAGE_SIZE as u64;

/// Bytes of a sample record without and with the page size.
const SAMPLE_BYTES: usize = 48;
const SAMPLE_WITH_PAGE_SIZE_BYTES: usize = 56;

/// What the kernel may be asked for, newest first: the open falls back step by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    pub kernel: bool,
    pub page_sizes: bool,
    pub lost_counted: bool,
}

/// Page-fault attribute: disabled until the target execs, inherited by its threads and children.
pub fn fault_attr(exclude_kernel: bool, page_sizes: bool) -> perf_event_attr {
    let mut attr = task_tree_attr(exclude_kernel);
    attr.type_ = sys::PERF_TYPE_SOFTWARE;
    attr.config = sys::PERF_COUNT_SW_PAGE_FAULTS as u64;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.sample_type = SAMPLE_TYPE | if page_sizes { SAMPLE_PAGE_SIZE } else { 0 };
    attr
}

impl Sampler {
    /// The `faults` backend: page-fault sampling of `pid` (which has not exec'd yet) on every
    /// CPU in `cpus`.
    pub fn faults(pid: i32, cpus: &[u32], ring_pages: usize) -> Result<Sampler, SamplerError> {
        let mut want = Features {
            kernel: true,
            page_sizes: true,
            lost_counted: true,
        };
        loop {
            match open_faults(pid, cpus, ring_pages, want) {
                Err(refusal) if step_back(&mut want, &refusal.error) => {}
                other => return other.map_err(|r| r.error),
            }
        }
    }
}

/// One step back from what the page-fault event asked for, after the kernel refused it with
/// `error`: false when there is none left.
pub(crate) fn step_back(want: &mut Features, error: &SamplerError) -> bool {
    match error {
        SamplerError::Denied(_) if want.kernel => want.kernel = false,
        // Kernels before 6.0 reject the lost count, and before 5.11 the page-size field.
        SamplerError::Other { source, .. } if source.raw_os_error() == Some(libc::EINVAL) => {
            if want.lost_counted {
                want.lost_counted = false
            } else if want.page_sizes {
                want.page_sizes = false
            } else {
                return false;
            }
        }
        _ => return false,
    }
    true
}

/// The page-fault event on `cpus`, as `want` asks (also beside the `pmu` backend's events).
pub(crate) fn fault_rings(cpus: &[u32], want: Features) -> EventRings<'_> {
    let mut attr = fault_attr(!want.kernel, want.page_sizes);
    if want.lost_counted {
        attr.read_format = sys::PERF_FORMAT_LOST as u64;
    }
    EventRings {
        name: "page-faults",
        attr,
        leader: None,
        cpus,
        reader: RingReader::Faults,
    }
}

fn open_faults(
    pid: i32,
    cpus: &[u32],
    ring_pages: usize,
    want: Features,
) -> Result<Sampler, crate::sampler::Refusal> {
    let event = fault_rings(cpus, want);
    let info = SamplerInfo {
        cpus: Vec::new(),
        ring_pages,
        kernel_faults: want.kernel,
        page_sizes: want.page_sizes,
        lost_counted: want.lost_counted,
        settings: BTreeMap::new(),
    };
    Sampler::open_events(pid, &[event], ring_pages, info)
}

/// Decodes one record of a page-fault ring (header included); `None` for kinds we do not use
/// or malformed ones.
pub fn decode(bytes: &[u8]) -> Option<PerfEvent> {
    let mut f = Fields::after_header(bytes);
    match crate::records::kind(bytes)? {
        sys::PERF_RECORD_SAMPLE => {
            let ip = f.u64()?;
            let (pid, tid) = f.u32_pair()?;
            let time_ns = f.u64()?;
            let address = f.u64()?;
            let (cpu, _) = f.u32_pair()?;
            // The record's length says whether the page size was requested.
            let mapped_page_size = match bytes.len() {
                SAMPLE_WITH_PAGE_SIZE_BYTES => f.u64()? as u32,
                SAMPLE_BYTES => 0,
                _ => return None,
            };
            Some(PerfEvent::Fault(Fault {
                pid,
                tid,
                time_ns,
                address,
                cpu,
                mapped_page_size,
                ip,
            }))
        }
        _ => decode_task(bytes, Trailer::of(SAMPLE_TYPE)),
    }
}

/// Online CPUs of this machine.
pub fn online_cpus() -> io::Result<Vec<u32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    numalens_topology::cpulist::parse_cpulist(&text)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
