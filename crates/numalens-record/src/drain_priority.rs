//! The drain thread's place in the scheduler. A ring's watermark wakes the thread, but on a busy
//! machine the woken thread may wait hundreds of milliseconds for a CPU while the program's
//! threads and everything else beside it run; the kernel drops the records that no longer fit
//! meanwhile. Two requests shorten that wait, each kept only if the kernel grants it:
//! - a shorter time slice (`sched_setattr` with `sched_runtime`, Linux 6.12+, allowed to any
//!   user): the scheduler then lets the woken thread preempt a thread with a longer slice at
//!   once, without giving it a larger share of the CPU;
//! - a lower nice value (with `CAP_SYS_NICE`, or an `RLIMIT_NICE` that allows it): a larger
//!   share when it runs, and earlier turns. The thread needs a few per cent of one CPU at most
//!   (it only copies what the rings hold), so the program loses next to nothing to it.

/// The slice asked for: the shortest the kernel takes.
const SLICE_NS: u64 = 100_000;

/// How many nice steps above the recorder's own the thread asks for.
const NICE_BOOST: i32 = 10;

/// What the kernel granted the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Granted {
    /// The nice value it runs at.
    pub nice: i32,
    /// Whether it is the recorder's own nice value lowered.
    pub boosted: bool,
    /// Whether the short slice was asked for and the request taken (kernels before 6.12 have no
    /// such slice: whether they ignore the field or refuse the request, the fallback covers it).
    pub short_slice: bool,
}

impl Granted {
    /// For the profile's backend settings.
    pub fn describe(&self) -> String {
        let slice = if self.short_slice {
            format!(", {} µs slice", SLICE_NS / 1000)
        } else {
            String::new()
        };
        let raised = if self.boosted { "" } else { " (not raised)" };
        format!("nice {}{raised}{slice}", self.nice)
    }
}

/// Asks for the shorter slice and the lower nice value for the calling thread, and falls back
/// step by step to what the kernel allows.
pub(crate) fn raise() -> Granted {
    let own = own_nice();
    let boosted = (own - NICE_BOOST).max(-20);
    for (nice, slice) in [(boosted, SLICE_NS), (own, SLICE_NS), (boosted, 0)] {
        if set_fair(nice, slice) {
            return Granted {
                nice,
                boosted: nice < own,
                short_slice: slice != 0,
            };
        }
    }
    Granted {
        nice: own,
        boosted: false,
        short_slice: false,
    }
}

/// The calling thread's nice value.
fn own_nice() -> i32 {
    // SAFETY: getpriority has no memory preconditions; `who` 0 is the calling thread. -1 is
    // also a valid nice value, so errno is cleared first and looked at after.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        if nice == -1 && *libc::__errno_location() != 0 {
            0
        } else {
            nice
        }
    }
}

/// `SCHED_OTHER` at `nice`, with a slice of `slice_ns` (0: the kernel's default) for the calling
/// thread. Whether the kernel took it.
fn set_fair(nice: i32, slice_ns: u64) -> bool {
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: slice_ns,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: `attr` is a complete sched_attr of the size it declares; pid 0 is this thread.
    unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &attr as *const libc::sched_attr,
            0,
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own (the settings stay with it): whatever the kernel granted, the
    /// thread runs at the nice value said, never above the one it had.
    #[test]
    fn the_granted_nice_value_is_the_one_the_thread_runs_at() {
        let (before, granted, after) = std::thread::spawn(|| {
            let before = own_nice();
            let granted = raise();
            (before, granted, own_nice())
        })
        .join()
        .unwrap();
        assert_eq!(granted.nice, after, "{granted:?}");
        assert!(after <= before, "{before} → {after}");
        assert_eq!(granted.boosted, after < before);
    }
}
