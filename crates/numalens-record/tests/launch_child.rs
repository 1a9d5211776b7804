//! Between fork and exec the child of a multithreaded recorder may call only async-signal-safe
//! functions: another thread may have held the allocator's lock at the fork, and the child would
//! wait for it forever. This test binary's allocator reports every allocation made in a process
//! other than the test's own, through a pipe the child inherits, and the launch is made to take
//! the child's error path (a sampler that cannot open).

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::OsString;
use std::sync::atomic::{AtomicI32, Ordering};

use numalens_record::launch::{LaunchError, LaunchSpec, launch};

/// The test's process, and the write end of the pipe that hears of allocations elsewhere.
static PARENT: AtomicI32 = AtomicI32::new(0);
static REPORT_FD: AtomicI32 = AtomicI32::new(-1);

struct Watching;

// SAFETY: every call is passed on to the system allocator.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        report_if_forked();
        // SAFETY: the caller's layout, as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's pointer and layout, as given.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        report_if_forked();
        // SAFETY: the caller's pointer, layout and size, as given.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Watching = Watching;

/// One byte down the pipe when this is not the test's process: only getpid and write, which
/// allocate nothing themselves.
fn report_if_forked() {
    let parent = PARENT.load(Ordering::Relaxed);
    let fd = REPORT_FD.load(Ordering::Relaxed);
    // SAFETY: getpid has no preconditions; fd is the pipe's write end while it is set.
    unsafe {
        if parent != 0 && fd >= 0 && libc::getpid() != parent {
            libc::write(fd, b"a".as_ptr().cast(), 1);
        }
    }
}

#[test]
fn the_child_s_error_path_allocates_nothing() {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: getpid has no preconditions.
    PARENT.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    REPORT_FD.store(fds[1], Ordering::Relaxed);
    // No such CPU: the sampler cannot open, and the child is told not to go on.
    let spec = LaunchSpec {
        program: OsString::from("/bin/true"),
        args: Vec::new(),
        env: Vec::new(),
        sample_cpus: Some(vec![1 << 20]),
        precise: None,
        ring_pages: 8,
    };
    let result = launch(&spec);
    REPORT_FD.store(-1, Ordering::Relaxed);
    // SAFETY: our own write end, no longer used; the child's copy closed when it exited.
    unsafe { libc::close(fds[1]) };
    assert!(
        matches!(result, Err(LaunchError::Sampler(_))),
        "{:?}",
        result.err()
    );
    let mut reports = [0u8; 64];
    // SAFETY: reading into a local buffer from our own read end; every write end is closed.
    let n = unsafe { libc::read(fds[0], reports.as_mut_ptr().cast(), reports.len()) };
    // SAFETY: our own read end.
    unsafe { libc::close(fds[0]) };
    assert_eq!(n, 0, "the child allocated between fork and exec");
}
