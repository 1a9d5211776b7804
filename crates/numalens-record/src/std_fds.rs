//! Standard descriptors the recorder was started without. Rust's start-up opens `/dev/null` on
//! any of descriptors 0–2 that is closed, and a program started from the recorder would inherit
//! those: `cat <&-` would read an empty file instead of failing. A binary that records registers
//! [`note_closed_standard_fds`] to run before that start-up (an `.init_array` entry), and the
//! program's child process closes the same descriptors again just before exec.

use std::sync::atomic::{AtomicU8, Ordering};

/// Bit `fd` is set when standard descriptor `fd` was closed when the process started.
static CLOSED_AT_START: AtomicU8 = AtomicU8::new(0);

/// Notes which of descriptors 0–2 are closed. Meant to run before `main` (see the module's
/// comment); calls only `fcntl`, so it needs nothing of Rust's start-up.
pub extern "C" fn note_closed_standard_fds() {
    let mut closed = 0u8;
    for fd in 0..3 {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            closed |= 1 << fd;
        }
    }
    CLOSED_AT_START.store(closed, Ordering::Relaxed);
}

/// Closes again, in a child about to exec, the standard descriptors the recorder started
/// without. Async-signal-safe: one atomic load and `close`.
pub(crate) fn close_in_child() {
    let closed = CLOSED_AT_START.load(Ordering::Relaxed);
    for fd in 0..3 {
        if closed & (1 << fd) != 0 {
            // SAFETY: closing a descriptor that Rust's start-up opened on /dev/null in our place.
            unsafe { libc::close(fd) };
        }
    }
}
