//! perf_event_open ring buffers: open a software event for a task on one CPU, map its ring, and
//! hand out the raw records the kernel wrote.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering, fence};

use perf_event_open_sys::bindings::{self as sys, perf_event_attr, perf_event_mmap_page};

use crate::aux::AuxArea;

/// Room in bytes below which a ring counts as full: a sample (up to 56 bytes) and a LOST record
/// with its sample_id (40 bytes) no longer fit.
const FULL_MARGIN: u64 = 128;

/// One perf event with its mapped ring buffer.
pub struct PerfRing {
    fd: OwnedFd,
    base: *mut u8,
    mmap_len: usize,
    data_offset: usize,
    data_size: usize,
    /// Reassembly space for records that wrap around the end of the ring.
    scratch: Vec<u8>,
    /// Set once a drain found the ring with no room left for another record: the kernel may
    /// have dropped records since, whether or not a `PERF_RECORD_LOST` told of them.
    filled: bool,
    /// The event's AUX area, for events that write there (Arm SPE).
    aux: Option<AuxArea>,
}

// The ring is only touched through &mut self; the raw pointer does not alias any Rust data.
unsafe impl Send for PerfRing {}

impl PerfRing {
    /// Opens `attr` for task `pid` on `cpu`, in the group of `leader` if given, and maps
    /// `data_pages` (a power of two) of ring.
    pub fn open(
        attr: &perf_event_attr,
        (pid, cpu): (i32, i32),
        leader: Option<&OwnedFd>,
        data_pages: usize,
    ) -> io::Result<Self> {
        let page = page_size();
        let mut attr = *attr;
        if attr.watermark() != 0 {
            // SAFETY: with `watermark` set, the union holds wakeup_watermark.
            let wanted = unsafe { attr.__bindgen_anon_2.wakeup_watermark };
            attr.__bindgen_anon_2.wakeup_watermark = wakeup_bytes(wanted, page * data_pages);
        }
        let fd = open_event(&attr, pid, cpu, leader)?;
        let mmap_len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd read-write with the documented 1 + 2^n pages layout.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mmap_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let header = base as *const perf_event_mmap_page;
        // SAFETY: the first page of the mapping is the kernel's perf_event_mmap_page.
        let (offset, size) = unsafe { ((*header).data_offset, (*header).data_size) };
        let (data_offset, data_size) = if size == 0 {
            (page, page * data_pages) // kernels before 4.1 leave these fields zero
        } else {
            (offset as usize, size as usize)
        };
        Ok(PerfRing {
            fd,
            base: base as *mut u8,
            mmap_len,
            data_offset,
            data_size,
            scratch: Vec::new(),
            filled: false,
            aux: None,
        })
    }

    /// Maps `pages` (a power of two) of AUX area after the ring.
    pub fn map_aux(&mut self, pages: usize) -> io::Result<()> {
        let header = self.base as *mut perf_event_mmap_page;
        // SAFETY: base is this event's ring mapping, unmapped only after the area (drop).
        let area = unsafe { AuxArea::map(self.fd.as_raw_fd(), header, self.mmap_len, pages)? };
        self.aux = Some(area);
        Ok(())
    }

    pub fn aux_mut(&mut self) -> Option<&mut AuxArea> {
        self.aux.as_mut()
    }

    /// Notes that records were dropped (an AUX area that filled).
    pub fn mark_filled(&mut self) {
        self.filled = true;
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Enables the event now (for events opened disabled without enable_on_exec).
    pub fn enable(&self) -> io::Result<()> {
        enable_event(&self.fd)
    }

    /// The number of records the kernel could not write into this ring: [`read_lost`].
    pub fn read_lost(&self) -> io::Result<u64> {
        read_lost(&self.fd)
    }

    /// True once a drain found the ring full (see `filled`).
    pub fn was_filled(&self) -> bool {
        self.filled
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        let header = self.base as *mut perf_event_mmap_page;
        // SAFETY: data_head and data_tail are naturally aligned u64 fields shared with the kernel;
        // atomics give the acquire/release ordering the perf ABI asks for.
        unsafe {
            (
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*header).data_head)),
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*header).data_tail)),
            )
        }
    }

    /// Calls `each` with every complete record (header included) now in the ring, then frees
    /// their space for the kernel. Returns the number of records.
    pub fn drain(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        let (head, tail) = self.head_tail();
        let head_now = head.load(Ordering::Acquire);
        let mut pos = tail.load(Ordering::Relaxed);
        // Less room than a sample and the LOST record the kernel writes before it: the next
        // record could not be written.
        self.filled |= head_now.saturating_sub(pos) + FULL_MARGIN >= self.data_size as u64;
        let mut count = 0;
        while pos + 8 <= head_now {
            let size = self.read_u16_at(pos + 6) as u64;
            if size < 8 || pos + size > head_now {
                break;
            }
            let record = self.record_at(pos, size as usize);
            // SAFETY: record points into the mapping or into scratch, valid for this call.
            each(unsafe { &*record });
            pos += size;
            count += 1;
        }
        fence(Ordering::Release);
        self.head_tail().1.store(pos, Ordering::Release);
        count
    }

    fn data(&self) -> *const u8 {
        // SAFETY: data_offset lies within the mapping.
        unsafe { self.base.add(self.data_offset) }
    }

    fn read_u16_at(&self, pos: u64) -> u16 {
        let mut bytes = [0u8; 2];
        for (i, b) in bytes.iter_mut().enumerate() {
            let at = (pos as usize + i) % self.data_size;
            // SAFETY: at < data_size.
            *b = unsafe { *self.data().add(at) };
        }
        u16::from_le_bytes(bytes)
    }

    /// The record at `pos`, contiguous: in place, or copied when it wraps.
    fn record_at(&mut self, pos: u64, size: usize) -> *const [u8] {
        let start = pos as usize % self.data_size;
        if start + size <= self.data_size {
            // SAFETY: the whole record lies within the data area.
            return std::ptr::slice_from_raw_parts(unsafe { self.data().add(start) }, size);
        }
        let first = self.data_size - start;
        self.scratch.clear();
        // SAFETY: both pieces lie within the data area.
        unsafe {
            self.scratch
                .extend_from_slice(std::slice::from_raw_parts(self.data().add(start), first));
            self.scratch
                .extend_from_slice(std::slice::from_raw_parts(self.data(), size - first));
        }
        self.scratch.as_slice()
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // Unmapped in the reverse order of mapping: the area was mapped after the ring.
        self.aux = None;
        // SAFETY: unmapping exactly what open() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.mmap_len) };
    }
}

/// The number of records the kernel could not write into an event's ring (for the event and its
/// inherited copies), read with `read(2)` from an event opened with `PERF_FORMAT_LOST` as its
/// only read format (Linux 6.0+): `{ value, lost }`.
pub fn read_lost(fd: &OwnedFd) -> io::Result<u64> {
    let mut values = [0u64; 2];
    let want = std::mem::size_of_val(&values);
    // SAFETY: reading at most `want` bytes into a local array from a perf fd we own.
    let n = unsafe { libc::read(fd.as_raw_fd(), values.as_mut_ptr().cast(), want) };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize == want => Ok(values[1]),
        n => Err(io::Error::other(format!(
            "read {n} bytes of the event's count, not {want}"
        ))),
    }
}

/// The bytes a ring of `ring_bytes` holds when the kernel wakes its reader: `wanted`, but at
/// most a quarter of the ring. With a watermark as large as the ring (64 KiB is all of a 16-page
/// ring, which the mlock limit may leave), the reader would be woken only once nothing more fits,
/// and the kernel would drop records from then until the reader's next timeout: a ring must wake
/// its reader while three quarters of it are still free.
pub fn wakeup_bytes(wanted: u32, ring_bytes: usize) -> u32 {
    let quarter = u32::try_from(ring_bytes / 4).unwrap_or(u32::MAX);
    wanted.min(quarter).max(1)
}

/// Opens `attr` for task `pid` on `cpu`, in the group of `leader` if given, without a ring (a
/// group leader that only counts).
pub fn open_event(
    attr: &perf_event_attr,
    pid: i32,
    cpu: i32,
    leader: Option<&OwnedFd>,
) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    let flags = sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong;
    let group = leader.map_or(-1, |l| l.as_raw_fd());
    // SAFETY: attr is a fully initialised perf_event_attr of the size we declare.
    let fd = unsafe { perf_event_open_sys::perf_event_open(&mut attr, pid, cpu, group, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Enables a perf event now.
pub fn enable_event(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: an ioctl on a perf fd we own.
    let r = unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page-fault ring of 16 pages (what the mlock limit may leave) on this thread: the
    /// recorder's 64 KiB watermark is the whole ring, yet the kernel must say the ring is
    /// readable while most of it is still free.
    #[test]
    fn a_small_ring_wakes_its_reader_before_it_is_full() {
        let pages = 16;
        let mut attr = crate::faults::fault_attr(true, false);
        attr.set_disabled(0);
        attr.set_enable_on_exec(0);
        attr.set_inherit(0);
        let mut ring = match PerfRing::open(&attr, (0, -1), None, pages) {
            Ok(ring) => ring,
            Err(e) => {
                eprintln!("skipped: page-fault sampling is not allowed here ({e})");
                return;
            }
        };
        let ring_bytes = pages * page_size();
        let most = ring_bytes / 48; // samples of at least 48 bytes fill the ring by then
        let block = vec![0u8; (most + 1) * page_size()];
        // The allocation is not touched yet: each write below is one first touch, one sample.
        let mut touched = 0;
        while touched < most && !readable(&ring) {
            // SAFETY: within the block; volatile so that every page is written.
            unsafe {
                std::ptr::write_volatile(block.as_ptr().add(touched * page_size()) as *mut u8, 1)
            };
            touched += 1;
        }
        let mut held = 0;
        ring.drain(|r| held += r.len());
        assert!(
            readable_at(held, ring_bytes),
            "{touched} faults, {held} bytes in a ring of {ring_bytes} when it was readable"
        );
    }

    /// Woken with at least three quarters of the ring free (and a little more for the record
    /// that crossed the watermark and the task records the test thread may add).
    fn readable_at(held: usize, ring_bytes: usize) -> bool {
        held > 0 && held <= ring_bytes / 4 + 256
    }

    fn readable(ring: &PerfRing) -> bool {
        let mut fd = libc::pollfd {
            fd: ring.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut fd, 1, 0) };
        fd.revents & libc::POLLIN != 0
    }

    #[test]
    fn the_wakeup_is_the_wanted_one_in_a_large_ring() {
        assert_eq!(wakeup_bytes(64 * 1024, 256 * 4096), 64 * 1024);
        assert_eq!(wakeup_bytes(64 * 1024, 16 * 4096), 16 * 1024);
        assert_eq!(wakeup_bytes(64 * 1024, 1), 1);
    }
}
