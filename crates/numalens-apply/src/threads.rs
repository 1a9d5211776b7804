//! Threads moved to a node's CPUs (`sched_setaffinity`), by the engine (online kMAF) and checked
//! before `--pid` touches another process.

/// Restricts thread `tid` to `cpus`. Moving another user's thread needs `CAP_SYS_NICE`.
pub fn pin(tid: u32, cpus: &[u32]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays inside it (checked bound).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let mut any = false;
    for &cpu in cpus {
        if (cpu as usize) < libc::CPU_SETSIZE as usize {
            unsafe { libc::CPU_SET(cpu as usize, &mut set) };
            any = true;
        }
    }
    if !any {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: set is a valid cpu_set_t of the size given.
    let r = unsafe {
        libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the nice value of thread `tid` (0: the calling thread); the one it had before. A
/// value below the thread's needs `CAP_SYS_NICE`.
pub fn set_nice(tid: u32, nice: i32) -> std::io::Result<i32> {
    let who = tid as libc::id_t;
    // getpriority answers -1 for nice -1 too: errno tells the two apart.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: plain system calls on a thread id.
    let before = unsafe { libc::getpriority(libc::PRIO_PROCESS, who) };
    if before == -1 && std::io::Error::last_os_error().raw_os_error() != Some(0) {
        return Err(std::io::Error::last_os_error());
    }
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, who, nice) } == 0 {
        Ok(before)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_s_nice_value_is_set_and_threads_it_starts_inherit_it() {
        // On a thread of its own, so that the test's other threads keep theirs.
        let (asked, mine, other) = std::thread::spawn(|| {
            let tid = unsafe { libc::gettid() } as u32;
            let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            // A higher nice value (a lower priority) needs no privilege.
            let before = set_nice(0, (now + 5).min(19)).unwrap();
            assert_eq!(before, now);
            let mine = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
            let other = std::thread::spawn(|| unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) })
                .join()
                .unwrap();
            ((now + 5).min(19), mine, other)
        })
        .join()
        .unwrap();
        // This thread's is what was asked; a thread started since inherits it.
        assert_eq!((mine, other), (asked, asked));
        assert!(set_nice(u32::MAX / 2, 0).is_err(), "no such thread");
    }

    #[test]
    fn this_thread_is_pinned_and_a_bad_set_is_an_error() {
        let tid = unsafe { libc::gettid() } as u32;
        let all = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let cpus: Vec<u32> = (0..all).collect();
        pin(tid, &cpus).unwrap();
        assert!(pin(tid, &[]).is_err());
        assert!(pin(u32::MAX / 2, &cpus).is_err(), "no such thread");
    }
}
