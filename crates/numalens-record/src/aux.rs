//! The AUX area of a perf event (Arm SPE writes its packets there, not into the ring): mapped
//! after the event's ring at the offset the ring's first page names, read in the chunks that
//! `PERF_RECORD_AUX` records announce in the ring, and given back to the kernel by moving
//! `aux_tail`. Without that move the area fills and the kernel truncates what follows.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use numalens_assemble::perf_sample::spe::TimeConv;
use perf_event_open_sys::bindings::{self as sys, perf_event_mmap_page};

use crate::records::Fields;

/// `capabilities` bits of the ring's first page.
const CAP_USER_TIME_ZERO: u64 = 1 << 4;
const CAP_USER_TIME_SHORT: u64 = 1 << 5;

/// The AUX area of one event.
pub struct AuxArea {
    /// The first page of the event's ring, which holds `aux_tail`.
    header: *mut perf_event_mmap_page,
    base: *mut u8,
    size: usize,
    /// Unmapped on drop (false for memory a test owns).
    mapped: bool,
    /// Reassembly space for a chunk that wraps around the end of the area.
    scratch: Vec<u8>,
}

// The area is only read through &mut self; the raw pointers alias no Rust data.
unsafe impl Send for AuxArea {}

impl AuxArea {
    /// Maps `pages` (a power of two) of AUX area for the event `fd`, whose ring of
    /// `ring_len` bytes (first page included) is mapped at `header`, right after the ring.
    ///
    /// # Safety
    /// `header` must be the first page of `fd`'s ring mapping, mapped for as long as the area.
    pub unsafe fn map(
        fd: RawFd,
        header: *mut perf_event_mmap_page,
        ring_len: usize,
        pages: usize,
    ) -> io::Result<AuxArea> {
        let size = pages * crate::perf::page_size();
        // SAFETY: header is the first page of fd's ring (the caller's promise); the kernel
        // reads these two fields when the area is mapped.
        unsafe {
            (*header).aux_offset = ring_len as u64;
            (*header).aux_size = size as u64;
        }
        // SAFETY: mapping the perf fd at the offset and size just written into its first page,
        // as the perf ABI asks; read-write so that the kernel waits for aux_tail.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                ring_len as libc::off_t,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(AuxArea {
            header,
            base: base.cast(),
            size,
            mapped: true,
            scratch: Vec::new(),
        })
    }

    /// An area over memory the caller owns and keeps alive and unmoved as long as the area:
    /// `header` a ring's first page, `base` the `size` bytes of the area.
    ///
    /// # Safety
    /// Both pointers must be valid for reads and writes for the area's lifetime.
    pub unsafe fn over(header: *mut perf_event_mmap_page, base: *mut u8, size: usize) -> Self {
        AuxArea {
            header,
            base,
            size,
            mapped: false,
            scratch: Vec::new(),
        }
    }

    /// The bytes of the chunk at `offset` (a position that grows without wrapping, as the
    /// kernel gives it) of `size` bytes, contiguous: in place, or copied when it wraps. A size
    /// larger than the area (a damaged record) is cut to the area.
    pub fn chunk(&mut self, offset: u64, size: u64) -> &[u8] {
        let size = (size as usize).min(self.size);
        if self.size == 0 || size == 0 {
            return &[];
        }
        let start = (offset % self.size as u64) as usize;
        let first = size.min(self.size - start);
        // SAFETY: both pieces lie within the area, which the kernel does not write again until
        // aux_tail passes them.
        unsafe {
            let head = std::slice::from_raw_parts(self.base.add(start), first);
            if first == size {
                return head;
            }
            self.scratch.clear();
            self.scratch.extend_from_slice(head);
            self.scratch
                .extend_from_slice(std::slice::from_raw_parts(self.base, size - first));
        }
        &self.scratch
    }

    /// Gives the area up to `end` (an offset as in [`chunk`](Self::chunk)) back to the kernel.
    pub fn release(&self, end: u64) {
        // SAFETY: aux_tail is a naturally aligned u64 of the shared first page; the release
        // store orders our reads of the data before the kernel may overwrite it.
        let tail = unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.header).aux_tail)) };
        if end > tail.load(Ordering::Relaxed) {
            tail.store(end, Ordering::Release);
        }
    }

    /// Where the kernel has released up to (tests).
    pub fn tail(&self) -> u64 {
        // SAFETY: as in release.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.header).aux_tail)) }
            .load(Ordering::Acquire)
    }

    /// How the hardware's timer counts in the area become the kernel's `perf_clock` time
    /// (arm64: `sched_clock`), when the kernel says (`cap_user_time_zero`). The fields are read
    /// under the page's sequence count, as the kernel may be updating them.
    pub fn time_conv(&self) -> Option<TimeConv> {
        let h = self.header;
        loop {
            // SAFETY: volatile reads of plain fields of the shared first page, which stays
            // mapped as long as the area; the sequence count says whether they were consistent.
            let (seq, caps, conv) = unsafe {
                let seq = std::ptr::read_volatile(std::ptr::addr_of!((*h).lock));
                fence(Ordering::Acquire);
                let caps =
                    std::ptr::read_volatile(std::ptr::addr_of!((*h).__bindgen_anon_1)).capabilities;
                let conv = TimeConv {
                    shift: std::ptr::read_volatile(std::ptr::addr_of!((*h).time_shift)),
                    mult: u64::from(std::ptr::read_volatile(std::ptr::addr_of!((*h).time_mult))),
                    zero: std::ptr::read_volatile(std::ptr::addr_of!((*h).time_zero)),
                    cycles: std::ptr::read_volatile(std::ptr::addr_of!((*h).time_cycles)),
                    mask: std::ptr::read_volatile(std::ptr::addr_of!((*h).time_mask)),
                    short: caps & CAP_USER_TIME_SHORT != 0,
                };
                fence(Ordering::Acquire);
                (seq, caps, conv)
            };
            // SAFETY: as above.
            let again = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*h).lock)) };
            if again == seq && seq % 2 == 0 {
                return (caps & CAP_USER_TIME_ZERO != 0).then_some(conv);
            }
            std::hint::spin_loop();
        }
    }
}

impl Drop for AuxArea {
    fn drop(&mut self) {
        if self.mapped {
            // SAFETY: unmapping exactly what map() mapped.
            unsafe { libc::munmap(self.base.cast(), self.size) };
        }
    }
}

/// A `PERF_RECORD_AUX` record: the kernel wrote `size` bytes at `offset` of the AUX area for
/// thread `tid` (the task that was running: a per-task event's area is closed at each switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuxChunk {
    pub offset: u64,
    pub size: u64,
    pub flags: u64,
    pub pid: u32,
    pub tid: u32,
    /// When the chunk was closed, on the event's clock.
    pub time_ns: u64,
    pub cpu: u32,
}

impl AuxChunk {
    /// The area filled and the kernel dropped data after this chunk.
    pub fn truncated(&self) -> bool {
        self.flags & u64::from(sys::PERF_AUX_FLAG_TRUNCATED) != 0
    }

    /// Reads a `PERF_RECORD_AUX` record (header included) of an event whose `sample_id` holds
    /// TID, TIME, CPU and IDENTIFIER, in that order; `None` for another record or a short one.
    pub fn parse(bytes: &[u8]) -> Option<AuxChunk> {
        if crate::records::kind(bytes)? != sys::PERF_RECORD_AUX {
            return None;
        }
        let mut f = Fields::after_header(bytes);
        let (offset, size, flags) = (f.u64()?, f.u64()?, f.u64()?);
        let (pid, tid) = f.u32_pair()?;
        let time_ns = f.u64()?;
        let (cpu, _) = f.u32_pair()?;
        Some(AuxChunk {
            offset,
            size,
            flags,
            pid,
            tid,
            time_ns,
            cpu,
        })
    }
}

/// A ring's first page and an AUX area in plain memory, for tests of what reads them.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;

    pub(crate) struct FakeAux {
        pub page: Box<perf_event_mmap_page>,
        pub area: Vec<u8>,
    }

    impl FakeAux {
        pub fn new(size: usize) -> Self {
            // SAFETY: all-zero is the page's state before the kernel fills it.
            let page = Box::new(unsafe { std::mem::zeroed::<perf_event_mmap_page>() });
            FakeAux {
                page,
                area: vec![0; size],
            }
        }

        pub fn area(&mut self) -> AuxArea {
            let size = self.area.len();
            // SAFETY: both live as long as self, which the tests keep beside the area.
            unsafe { AuxArea::over(&mut *self.page, self.area.as_mut_ptr(), size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeAux;
    use super::*;

    #[test]
    fn a_chunk_that_wraps_comes_out_whole_and_release_moves_the_tail() {
        let mut fake = FakeAux::new(16);
        for (i, b) in fake.area.iter_mut().enumerate() {
            *b = i as u8;
        }
        let mut area = fake.area();
        // Offsets grow past the area's size: the 3rd lap, byte 12.
        assert_eq!(area.chunk(32 + 12, 8), [12, 13, 14, 15, 0, 1, 2, 3]);
        assert_eq!(area.chunk(32 + 2, 3), [2, 3, 4]);
        assert_eq!(area.chunk(5, 100).len(), 16, "cut to the area");
        area.release(52);
        area.release(40);
        assert_eq!(area.tail(), 52, "the tail never moves back");
    }

    #[test]
    fn an_aux_record_reads_with_its_thread_and_time() {
        let mut bytes = sys::PERF_RECORD_AUX.to_le_bytes().to_vec();
        bytes.extend(0u16.to_le_bytes());
        bytes.extend(64u16.to_le_bytes());
        for word in [4096u64, 1024, 1, 7 | 9 << 32, 123_456, 3, 77] {
            bytes.extend(word.to_le_bytes());
        }
        let c = AuxChunk::parse(&bytes).unwrap();
        assert_eq!((c.offset, c.size, c.pid, c.tid), (4096, 1024, 7, 9));
        assert_eq!((c.time_ns, c.cpu), (123_456, 3));
        assert!(c.truncated());
        assert_eq!(AuxChunk::parse(&bytes[..40]), None);
    }

    #[test]
    fn the_time_conversion_is_taken_only_when_the_kernel_gives_it() {
        let mut fake = FakeAux::new(8);
        fake.page.time_shift = 3;
        fake.page.time_mult = 5;
        fake.page.time_zero = 1000;
        assert_eq!(fake.area().time_conv(), None);
        fake.page.__bindgen_anon_1.capabilities = CAP_USER_TIME_ZERO;
        let conv = fake.area().time_conv().unwrap();
        assert_eq!((conv.shift, conv.mult, conv.zero), (3, 5, 1000));
        assert!(!conv.short);
    }
}

/// The mapping protocol against the running kernel: no event this machine has writes an AUX
/// area, but the kernel checks the offset and size the first page names before it asks the
/// event, so a page-fault event's refusal says which check failed.
#[cfg(test)]
mod kernel_tests {
    use crate::perf::PerfRing;
    use crate::sampler::task_tree_attr;
    use perf_event_open_sys::bindings as sys;

    #[test]
    fn the_kernel_takes_the_areas_offset_and_size_and_then_asks_the_event() {
        let mut attr = task_tree_attr(true);
        attr.set_inherit(0);
        attr.set_enable_on_exec(0);
        attr.type_ = sys::PERF_TYPE_SOFTWARE;
        attr.config = sys::PERF_COUNT_SW_PAGE_FAULTS as u64;
        attr.__bindgen_anon_1.sample_period = 1;
        attr.sample_type = crate::pmu_live::SPE_SAMPLE_TYPE;
        let mut ring = match PerfRing::open(&attr, (0, -1), None, 8) {
            Ok(ring) => ring,
            Err(e) => {
                eprintln!("skipped: the kernel refuses a page-fault event here ({e})");
                return;
            }
        };
        // Past the kernel's checks of offset, size and power of two, a software event has no
        // AUX area to give (EOPNOTSUPP; older kernels said ENOTSUPP, 524); a wrong offset
        // or size would be EINVAL.
        let e = ring.map_aux(4).unwrap_err();
        if e.raw_os_error() == Some(libc::EPERM) {
            eprintln!("skipped: the mlock limit refuses even 4 pages of AUX area here ({e})");
            return;
        }
        assert!(
            matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | 524)),
            "{e}"
        );
        let e = ring.map_aux(3).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(libc::EINVAL),
            "not a power of two: {e}"
        );
    }
}
