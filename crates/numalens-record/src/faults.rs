//! The `faults` backend: the perf software event `page-faults` with period 1, sampled with the
//! faulting address, thread, time, CPU and instruction address, inherited by every thread and
//! child of the profiled program. One ring per online CPU, because the kernel does not allow
//! mapping an inherited per-task event that is not bound to a CPU.

use std::io;

use numalens_assemble::raw::{Fault, PerfEvent, SamplerInfo};
use perf_event_open_sys::bindings::{self as sys, perf_event_attr};

use crate::perf::PerfRing;

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

/// What the kernel says about the records it could not write into the rings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LostCount {
    /// Records dropped, as counted by the kernel on the events (`None` before Linux 6.0).
    pub counted: Option<u64>,
    /// True when a ring was found full at a drain: records may have been dropped after that.
    pub rings_filled: bool,
}

/// Why the sampler could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SamplerError {
    #[error(
        "perf_event_open was denied ({0}); allow it with `sysctl kernel.perf_event_paranoid=1` (or \
         lower), or give numalens the CAP_PERFMON capability, or record allocations only with \
         `--backend none`"
    )]
    Denied(io::Error),
    #[error("this kernel does not support the software page-fault event ({0})")]
    Unsupported(io::Error),
    #[error("setting up page-fault sampling on CPU {cpu} failed: {source}")]
    Other { cpu: u32, source: io::Error },
}

/// What the kernel may be asked for, newest first: the open falls back step by step.
#[derive(Debug, Clone, Copy)]
struct Features {
    kernel: bool,
    page_sizes: bool,
    lost_counted: bool,
}

/// Page-fault attribute: disabled until the target execs, inherited by its threads and children.
pub fn fault_attr(exclude_kernel: bool, page_sizes: bool) -> perf_event_attr {
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = sys::PERF_TYPE_SOFTWARE;
    attr.config = sys::PERF_COUNT_SW_PAGE_FAULTS as u64;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.sample_type = SAMPLE_TYPE | if page_sizes { SAMPLE_PAGE_SIZE } else { 0 };
    attr.set_disabled(1);
    attr.set_enable_on_exec(1);
    attr.set_inherit(1);
    attr.set_exclude_kernel(exclude_kernel as u64);
    attr.set_exclude_hv(1);
    attr.set_comm(1);
    attr.set_task(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_mmap_data(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.set_watermark(1);
    attr.__bindgen_anon_2.wakeup_watermark = 64 * 1024;
    attr
}

/// Page-fault sampling of one task tree: a ring per CPU.
pub struct FaultSampler {
    rings: Vec<PerfRing>,
    pub info: SamplerInfo,
}

impl FaultSampler {
    /// Opens the event for `pid` (which has not exec'd yet) on every CPU in `cpus`.
    pub fn open(pid: i32, cpus: &[u32], ring_pages: usize) -> Result<Self, SamplerError> {
        let mut want = Features {
            kernel: true,
            page_sizes: true,
            lost_counted: true,
        };
        loop {
            match Self::open_with(pid, cpus, ring_pages, want) {
                Err(SamplerError::Denied(_)) if want.kernel => want.kernel = false,
                // Kernels before 6.0 reject the lost count, and before 5.11 the page-size field.
                Err(SamplerError::Other { source, .. })
                    if source.raw_os_error() == Some(libc::EINVAL)
                        && (want.lost_counted || want.page_sizes) =>
                {
                    if want.lost_counted {
                        want.lost_counted = false
                    } else {
                        want.page_sizes = false
                    }
                }
                other => return other,
            }
        }
    }

    fn open_with(
        pid: i32,
        cpus: &[u32],
        ring_pages: usize,
        want: Features,
    ) -> Result<Self, SamplerError> {
        let mut attr = fault_attr(!want.kernel, want.page_sizes);
        if want.lost_counted {
            attr.read_format = sys::PERF_FORMAT_LOST as u64;
        }
        let mut rings = Vec::with_capacity(cpus.len());
        let mut pages = ring_pages;
        for &cpu in cpus {
            let ring = loop {
                match PerfRing::open(&attr, pid, cpu as i32, pages) {
                    // Rings count against perf_event_mlock_kb; shrink before giving up.
                    Err(e)
                        if e.raw_os_error() == Some(libc::EPERM)
                            && pages > 8
                            && !rings.is_empty() =>
                    {
                        pages /= 2
                    }
                    other => break other,
                }
            };
            rings.push(ring.map_err(|e| classify(e, cpu))?);
        }
        let info = SamplerInfo {
            cpus: cpus.to_vec(),
            ring_pages: pages,
            kernel_faults: want.kernel,
            page_sizes: want.page_sizes,
            lost_counted: want.lost_counted,
        };
        Ok(FaultSampler { rings, info })
    }

    /// Waits until a ring has data or `timeout_ms` passes. True when every task of the program
    /// has exited: no ring will get another record (the kernel reports a hang-up once an event
    /// and all its inherited copies are gone).
    pub fn wait(&self, timeout_ms: i32) -> bool {
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of pollfd of the given length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        fds.iter().all(|f| f.revents & libc::POLLHUP != 0)
    }

    /// True when every task of the program has exited (the rings' hang-up), without waiting.
    /// Starts sampling now: for a process that is already running (an event opened for a
    /// program about to start is enabled by its exec).
    pub fn enable(&self) -> io::Result<()> {
        self.rings.iter().try_for_each(|r| r.enable())
    }

    pub fn ended(&self) -> bool {
        self.wait(0)
    }

    /// The records the kernel dropped so far. A `PERF_RECORD_LOST` record is written only when
    /// the next record fits after it, so the loss of a ring that is still full when the program
    /// ends is never told that way; the count on the events is exact, and is read here (after
    /// the program's end it is final).
    pub fn lost(&self) -> LostCount {
        let counted = self
            .info
            .lost_counted
            .then(|| {
                self.rings
                    .iter()
                    .map(|r| r.read_lost())
                    .sum::<io::Result<u64>>()
            })
            .and_then(Result::ok);
        LostCount {
            counted,
            rings_filled: self.rings.iter().any(|r| r.was_filled()),
        }
    }

    /// Decodes and hands out every record now in the rings.
    pub fn drain(&mut self, mut sink: impl FnMut(PerfEvent)) -> usize {
        let mut count = 0;
        for ring in &mut self.rings {
            count += ring.drain(|bytes| {
                if let Some(event) = decode(bytes) {
                    sink(event);
                }
            });
        }
        count
    }
}

fn classify(e: io::Error, cpu: u32) -> SamplerError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => SamplerError::Denied(e),
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
            SamplerError::Unsupported(e)
        }
        _ => SamplerError::Other { cpu, source: e },
    }
}

/// Little-endian field reader over one record.
struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    fn u64(&mut self) -> Option<u64> {
        let v = self.bytes.get(self.at..self.at + 8)?;
        self.at += 8;
        Some(u64::from_le_bytes(v.try_into().ok()?))
    }
    fn u32_pair(&mut self) -> Option<(u32, u32)> {
        let v = self.u64()?;
        Some((v as u32, (v >> 32) as u32))
    }
    /// A NUL-padded string occupying the record up to the trailing sample_id fields.
    fn string(&mut self, trailer: usize) -> Option<String> {
        let end = self.bytes.len().checked_sub(trailer)?;
        let raw = self.bytes.get(self.at..end)?;
        self.at = end;
        let len = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        Some(String::from_utf8_lossy(&raw[..len]).into_owned())
    }
}

/// Bytes of the sample_id trailer of non-sample records: tid, time, cpu.
const SAMPLE_ID_BYTES: usize = 24;

/// Decodes one record (header included); `None` for kinds we do not use or malformed ones.
pub fn decode(bytes: &[u8]) -> Option<PerfEvent> {
    let kind = u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?);
    let misc = u16::from_le_bytes(bytes.get(4..6)?.try_into().ok()?);
    let mut f = Fields { bytes, at: 8 };
    match kind {
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
        sys::PERF_RECORD_LOST => {
            let _id = f.u64()?;
            Some(PerfEvent::Lost { count: f.u64()? })
        }
        sys::PERF_RECORD_COMM => {
            let (pid, tid) = f.u32_pair()?;
            let name = f.string(SAMPLE_ID_BYTES)?;
            let time_ns = trailer_time(bytes)?;
            let exec = misc & sys::PERF_RECORD_MISC_COMM_EXEC as u16 != 0;
            Some(PerfEvent::Comm {
                pid,
                tid,
                name,
                exec,
                time_ns,
            })
        }
        sys::PERF_RECORD_FORK | sys::PERF_RECORD_EXIT => {
            let (pid, ppid) = f.u32_pair()?;
            let (tid, ptid) = f.u32_pair()?;
            let time_ns = f.u64()?;
            Some(if kind == sys::PERF_RECORD_FORK {
                PerfEvent::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time_ns,
                }
            } else {
                PerfEvent::Exit { pid, tid, time_ns }
            })
        }
        sys::PERF_RECORD_MMAP2 => {
            let (pid, tid) = f.u32_pair()?;
            let (start, len, pgoff) = (f.u64()?, f.u64()?, f.u64()?);
            f.at += 16; // maj, min, ino (or build id)
            f.at += 8; // ino_generation
            let (prot, flags) = f.u32_pair()?;
            let path = f.string(SAMPLE_ID_BYTES)?;
            let time_ns = trailer_time(bytes)?;
            Some(PerfEvent::Mmap {
                pid,
                tid,
                start,
                len,
                pgoff,
                prot,
                flags,
                path,
                time_ns,
            })
        }
        _ => None,
    }
}

/// Time from the sample_id trailer (tid, time, cpu) of a non-sample record.
fn trailer_time(bytes: &[u8]) -> Option<u64> {
    let at = bytes.len().checked_sub(16)?;
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Online CPUs of this machine.
pub fn online_cpus() -> io::Result<Vec<u32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    numalens_topology::cpulist::parse_cpulist(&text)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
