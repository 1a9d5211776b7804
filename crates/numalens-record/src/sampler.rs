//! The sampler of a program's task tree: one perf event per CPU (and per event, for the `pmu`
//! backend's loads and stores), inherited by every thread and child of the program, each with
//! its ring. The kernel does not allow mapping an inherited per-task event that is not bound to
//! a CPU, hence a ring per CPU. What is opened comes from the backend (`faults.rs`, `pmu_live.rs`);
//! waiting, draining, the loss count and the end of the program are the same for all.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use numalens_assemble::raw::{PerfEvent, SamplerInfo};
use perf_event_open_sys::bindings::perf_event_attr;

use crate::perf::{PerfRing, enable_event, open_event, read_lost};
use crate::pmu_live::PreciseReader;
use crate::spe_live::SpeReader;

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
    #[error("{}", crate::permission::denied(.0, crate::permission::paranoid()))]
    Denied(io::Error),
    #[error("this kernel does not support the {event} event ({source})")]
    Unsupported { event: String, source: io::Error },
    #[error("setting up {event} sampling on CPU {cpu} failed: {source}")]
    Other {
        event: String,
        cpu: u32,
        source: io::Error,
    },
}

/// A refusal of one event of a set: its position in the set, and why.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub event: usize,
    pub error: SamplerError,
}

impl SamplerError {
    /// True when the kernel rejected the attributes themselves (a field it does not know or a
    /// value the PMU does not take): a simpler request may pass.
    pub fn is_invalid(&self) -> bool {
        matches!(self, SamplerError::Other { source, .. }
            if matches!(source.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)))
    }
}

/// What every sampler's event shares: disabled until the target execs, inherited by its threads
/// and children, with the task and mapping records the assembly needs, on the runtime's clock,
/// waking the recorder every 64 KiB (a quarter of a smaller ring: `perf::wakeup_bytes`). The
/// backend sets the event, its period and sample fields.
pub fn task_tree_attr(exclude_kernel: bool) -> perf_event_attr {
    // SAFETY: perf_event_attr is plain data; all-zero is its documented empty state.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.set_disabled(1);
    attr.set_enable_on_exec(1);
    attr.set_inherit(1);
    attr.set_exclude_kernel(u64::from(exclude_kernel));
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

/// How a ring's sample records are read.
#[derive(Clone)]
pub(crate) enum RingReader {
    /// The `faults` backend's fixed layout.
    Faults,
    /// A precise memory event's samples, through the shared sample decoder.
    Precise(Arc<PreciseReader>),
    /// Arm SPE: packets in the AUX area, announced by the ring's AUX records.
    Spe(Arc<SpeReader>),
}

/// One event to open on some CPUs.
pub(crate) struct EventRings<'a> {
    /// As `perf` would name it, for messages.
    pub name: &'a str,
    pub attr: perf_event_attr,
    /// An event that must lead the group `attr` is opened in, on each CPU: it only counts
    /// (Intel's `mem-loads-aux`, without which newer parts refuse `mem-loads`).
    pub leader: Option<perf_event_attr>,
    pub cpus: &'a [u32],
    pub reader: RingReader,
}

impl EventRings<'_> {
    /// The event writes an AUX area beside its ring.
    fn has_aux(&self) -> bool {
        matches!(self.reader, RingReader::Spe(_))
    }
}

/// Pages of the ring of an event that writes an AUX area: it carries only the announcements of
/// chunks and the threads' switches (about 200 bytes a switch: out, in, a chunk, a restart;
/// 256 KiB hold 1 300 switches a drain), and the pages asked for go to the area.
const AUX_EVENT_RING_PAGES: usize = 64;

/// The sampler of one task tree.
pub struct Sampler {
    rings: Vec<(PerfRing, RingReader)>,
    /// Times an SPE event's AUX area filled (the kernel stopped the event until it was enabled
    /// again), and chunks with colliding samples.
    spe_truncated: u64,
    spe_collisions: u64,
    /// The counting leaders of grouped events, kept open as long as their members.
    leaders: Vec<OwnedFd>,
    pub info: SamplerInfo,
}

impl Sampler {
    /// Opens every event of `events` for `pid` on its CPUs, with `ring_pages` (a power of two)
    /// per ring, halved while the kernel's mlock limit refuses more. `info` is completed with
    /// the CPUs and the pages each ring got. A refusal names the event the kernel refused.
    pub(crate) fn open_events(
        pid: i32,
        events: &[EventRings<'_>],
        ring_pages: usize,
        mut info: SamplerInfo,
    ) -> Result<Sampler, Refusal> {
        let mut rings = Vec::new();
        let mut leaders = Vec::new();
        let mut pages = ring_pages;
        let mut cpus = Vec::new();
        for (position, event) in events.iter().enumerate() {
            let refused = |error| Refusal {
                event: position,
                error,
            };
            for &cpu in event.cpus {
                let leader = match &event.leader {
                    Some(attr) => Some(
                        open_event(attr, pid, cpu as i32, None)
                            .map_err(|e| refused(classify(e, event.name, cpu)))?,
                    ),
                    None => None,
                };
                let ring = loop {
                    let ring_pages = if event.has_aux() {
                        pages.min(AUX_EVENT_RING_PAGES)
                    } else {
                        pages
                    };
                    let at = (pid, cpu as i32);
                    match PerfRing::open(&event.attr, at, leader.as_ref(), ring_pages) {
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
                let mut ring = ring.map_err(|e| refused(classify(e, event.name, cpu)))?;
                if event.has_aux() {
                    map_aux(&mut ring, pages).map_err(|e| refused(classify(e, event.name, cpu)))?;
                }
                rings.push((ring, event.reader.clone()));
                leaders.extend(leader);
                cpus.push(cpu);
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        info.cpus = cpus;
        info.ring_pages = pages;
        Ok(Sampler {
            rings,
            spe_truncated: 0,
            spe_collisions: 0,
            leaders,
            info,
        })
    }

    /// Waits until a ring has data or `timeout_ms` passes. True when every task of the program
    /// has exited: no ring will get another record (the kernel reports a hang-up once an event
    /// and all its inherited copies are gone).
    pub fn wait(&self, timeout_ms: i32) -> bool {
        poll_all_hung_up(self.rings.iter().map(|(r, _)| r.raw_fd()), timeout_ms)
    }

    /// What the recorder's loop asks while another thread drains the rings: the same events,
    /// through descriptors of their own.
    pub fn watch(&self) -> io::Result<SamplerWatch> {
        let events = self
            .rings
            .iter()
            .map(|(r, _)| r.fd().try_clone())
            .collect::<io::Result<_>>()?;
        Ok(SamplerWatch {
            events,
            lost_counted: self.info.lost_counted,
        })
    }

    /// Starts sampling now: for a process that is already running (an event opened for a
    /// program about to start is enabled by its exec).
    pub fn enable(&self) -> io::Result<()> {
        self.leaders.iter().try_for_each(enable_event)?;
        self.rings.iter().try_for_each(|(r, _)| r.enable())
    }

    /// True when every task of the program has exited (the rings' hang-up), without waiting.
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
                    .map(|(r, _)| r.read_lost())
                    .sum::<io::Result<u64>>()
            })
            .and_then(Result::ok);
        LostCount {
            counted,
            rings_filled: self.rings.iter().any(|(r, _)| r.was_filled()),
        }
    }

    /// How often an SPE event's AUX area filled: samples were lost each time until the
    /// recorder emptied it and enabled the event again.
    pub fn spe_truncated(&self) -> u64 {
        self.spe_truncated
    }

    /// SPE chunks in which samples collided (the interval is short for the hardware).
    pub fn spe_collisions(&self) -> u64 {
        self.spe_collisions
    }

    /// Decodes and hands out every record now in the rings.
    pub fn drain(&mut self, mut sink: impl FnMut(PerfEvent)) -> usize {
        let mut count = 0;
        for (ring, reader) in &mut self.rings {
            if let RingReader::Spe(spe) = reader {
                let drained = spe.drain(ring, &mut sink);
                if drained.truncated > 0 {
                    // The kernel stopped the event when the area filled; the space is free
                    // again: enabling the event enables every thread's copy of it.
                    let _ = ring.enable();
                    self.spe_truncated += drained.truncated;
                }
                self.spe_collisions += drained.collisions;
                count += drained.records;
                continue;
            }
            count += ring.drain(|bytes| {
                let event = match reader {
                    RingReader::Faults => crate::faults::decode(bytes),
                    RingReader::Precise(p) => p.decode(bytes),
                    RingReader::Spe(_) => None,
                };
                if let Some(event) = event {
                    sink(event);
                }
            });
        }
        count
    }
}

/// Maps the AUX area of `ring` with as many pages as its ring has, halved while the kernel's
/// mlock limit refuses more (the area counts against it as the ring does).
fn map_aux(ring: &mut PerfRing, ring_pages: usize) -> io::Result<()> {
    let mut pages = ring_pages.max(2);
    loop {
        match ring.map_aux(pages) {
            // SPE needs two pages at least.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && pages > 2 => pages /= 2,
            other => return other,
        }
    }
}

/// The sampler's events seen from beside the thread that drains their rings: whether the program
/// has ended, and the kernel's lost count so far.
pub struct SamplerWatch {
    events: Vec<OwnedFd>,
    lost_counted: bool,
}

impl SamplerWatch {
    /// True when every task of the program has exited, without waiting (`Sampler::ended`).
    pub fn ended(&self) -> bool {
        poll_all_hung_up(self.events.iter().map(|e| e.as_raw_fd()), 0)
    }

    /// The records the kernel dropped so far, when it counts them (Linux 6.0+).
    pub fn lost_counted(&self) -> Option<u64> {
        self.lost_counted
            .then(|| self.events.iter().map(read_lost).sum::<io::Result<u64>>())
            .and_then(Result::ok)
    }
}

/// Waits until one of `events` has data or `timeout_ms` passes; true when all of them hung up.
fn poll_all_hung_up(events: impl Iterator<Item = RawFd>, timeout_ms: i32) -> bool {
    let mut fds: Vec<libc::pollfd> = events
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: fds is a valid array of pollfd of the given length.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    fds.iter().all(|f| f.revents & libc::POLLHUP != 0)
}

fn classify(e: io::Error, event: &str, cpu: u32) -> SamplerError {
    let event = event.to_string();
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => SamplerError::Denied(e),
        Some(libc::ENOENT) | Some(libc::ENOSYS) => SamplerError::Unsupported { event, source: e },
        _ => SamplerError::Other {
            event,
            cpu,
            source: e,
        },
    }
}
