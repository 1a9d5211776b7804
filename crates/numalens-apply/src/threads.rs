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

#[cfg(test)]
mod tests {
    use super::*;

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
