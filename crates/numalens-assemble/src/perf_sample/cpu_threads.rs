//! Which thread ran on each CPU when, from the kernel's context-switch records
//! (`PERF_RECORD_SWITCH`, `PERF_RECORD_SWITCH_CPU_WIDE`): Arm SPE's packets name no thread a
//! recorder can trust, and the stretch of AUX buffer the kernel closes is not always one
//! thread's (sibling threads of one program can be switched without the event being stopped).
//! A record's time then says whose it is.

use ahash::AHashMap;

/// A stretch of time a thread ran on a CPU; `to_ns` is `u64::MAX` while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    from_ns: u64,
    to_ns: u64,
    pid: u32,
    tid: u32,
}

/// The threads of each CPU over time.
#[derive(Debug, Clone, Default)]
pub struct CpuThreads {
    by_cpu: AHashMap<u32, Vec<Run>>,
}

impl CpuThreads {
    pub fn is_empty(&self) -> bool {
        self.by_cpu.is_empty()
    }

    /// Thread `tid` of `pid` started running on `cpu` at `time_ns`.
    pub fn switch_in(&mut self, cpu: u32, time_ns: u64, (pid, tid): (u32, u32)) {
        let runs = self.by_cpu.entry(cpu).or_default();
        close_open_run(runs, time_ns);
        let run = Run {
            from_ns: time_ns,
            to_ns: u64::MAX,
            pid,
            tid,
        };
        // Records of one CPU come in time order; a damaged file's are put in place.
        let at = runs.partition_point(|r| r.from_ns <= time_ns);
        runs.insert(at, run);
    }

    /// Thread `tid` of `pid` stopped running on `cpu` at `time_ns`. Without its switch in (it
    /// was running when the recording began), it ran since the CPU's previous run ended.
    pub fn switch_out(&mut self, cpu: u32, time_ns: u64, (pid, tid): (u32, u32)) {
        let runs = self.by_cpu.entry(cpu).or_default();
        if let Some(last) = runs.last_mut()
            && last.to_ns == u64::MAX
            && last.tid == tid
            && last.from_ns <= time_ns
        {
            last.to_ns = time_ns;
            return;
        }
        close_open_run(runs, time_ns);
        let from_ns = runs.last().map_or(0, |r| r.to_ns.min(time_ns));
        let at = runs.partition_point(|r| r.from_ns <= from_ns);
        runs.insert(
            at,
            Run {
                from_ns,
                to_ns: time_ns,
                pid,
                tid,
            },
        );
    }

    /// The process and thread that ran on `cpu` at `time_ns`, if the records say.
    pub fn at(&self, cpu: u32, time_ns: u64) -> Option<(u32, u32)> {
        let runs = self.by_cpu.get(&cpu)?;
        let i = runs.partition_point(|r| r.from_ns <= time_ns);
        let run = runs.get(i.checked_sub(1)?)?;
        (time_ns < run.to_ns).then_some((run.pid, run.tid))
    }

    /// Forgets the runs that ended before `time_ns` (a live reader's memory stays bounded).
    pub fn forget_before(&mut self, time_ns: u64) {
        for runs in self.by_cpu.values_mut() {
            let keep_from = runs.partition_point(|r| r.to_ns < time_ns);
            runs.drain(..keep_from.min(runs.len().saturating_sub(1)));
        }
    }
}

/// A run still open when another starts ended then (its switch out was lost).
fn close_open_run(runs: &mut [Run], time_ns: u64) {
    if let Some(last) = runs.last_mut()
        && last.to_ns == u64::MAX
    {
        last.to_ns = time_ns.max(last.from_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_the_thread_running_then() {
        let mut t = CpuThreads::default();
        // Thread 11 runs on CPU 0 from before the recording until 100, thread 12 from 150 to
        // 300, thread 11 again from 300; CPU 1 has thread 13 from 50.
        t.switch_out(0, 100, (10, 11));
        t.switch_in(0, 150, (10, 12));
        t.switch_out(0, 300, (10, 12));
        t.switch_in(0, 300, (10, 11));
        t.switch_in(1, 50, (10, 13));
        assert_eq!(t.at(0, 0), Some((10, 11)));
        assert_eq!(t.at(0, 99), Some((10, 11)));
        assert_eq!(t.at(0, 120), None, "no thread of the program ran");
        assert_eq!(t.at(0, 150), Some((10, 12)));
        assert_eq!(t.at(0, 299), Some((10, 12)));
        assert_eq!(t.at(0, 300), Some((10, 11)));
        assert_eq!(t.at(0, 10_000), Some((10, 11)));
        assert_eq!(t.at(1, 49), None);
        assert_eq!(t.at(1, 60), Some((10, 13)));
        assert_eq!(t.at(2, 60), None);
        t.forget_before(200);
        assert_eq!(t.at(0, 250), Some((10, 12)));
        assert_eq!(t.at(0, 50), None, "forgotten");
        assert_eq!(t.at(1, 60), Some((10, 13)), "a run still going is kept");
    }

    #[test]
    fn a_lost_switch_out_ends_the_run_at_the_next_switch_in() {
        let mut t = CpuThreads::default();
        t.switch_in(0, 10, (1, 2));
        t.switch_in(0, 20, (1, 3));
        assert_eq!(t.at(0, 15), Some((1, 2)));
        assert_eq!(t.at(0, 25), Some((1, 3)));
        // A switch out of another thread than the one running: the running one ended then.
        t.switch_out(0, 40, (1, 4));
        assert_eq!(t.at(0, 30), Some((1, 3)));
        assert_eq!(
            t.at(0, 39),
            Some((1, 3)),
            "the earlier run wins until it ended"
        );
    }
}
