//! What the first pass keeps of the memory samples: how many, their first and last times, the
//! process of the first, and each thread's first sample — in whatever order they come.

use crate::aux_spe::SpeSample;

/// What the first pass saw of the memory samples.
#[derive(Default)]
pub struct AccessStats {
    pub count: u64,
    /// Time of the first and the last.
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// The process of the first.
    pub first_pid: Option<u32>,
    /// Each thread's first memory sample.
    pub threads: ahash::AHashMap<(u32, u32), u64>,
    /// The threads of the latest samples and their first times, before they go to `threads`:
    /// one slot per thread id's low bits, so that a few threads' samples, however interleaved,
    /// cost no hash lookup each.
    recent: Vec<Option<((u32, u32), u64)>>,
}

/// Slots of [`AccessStats::recent`].
const RECENT_THREADS: usize = 64;

impl AccessStats {
    /// Adds a sample, in whatever order they come.
    pub fn add(&mut self, pid: u32, tid: u32, time_ns: u64) {
        self.count += 1;
        if self.first_ns.is_none_or(|f| time_ns < f) {
            self.first_pid = Some(pid);
            self.first_ns = Some(time_ns);
        }
        self.last_ns = self.last_ns.max(time_ns);
        if self.recent.is_empty() {
            self.recent = vec![None; RECENT_THREADS];
        }
        let slot = &mut self.recent[tid as usize % RECENT_THREADS];
        match slot {
            Some((thread, first)) if *thread == (pid, tid) => *first = (*first).min(time_ns),
            _ => {
                if let Some((thread, first)) = slot.replace(((pid, tid), time_ns)) {
                    Self::keep_first(&mut self.threads, thread, first);
                }
            }
        }
    }

    fn keep_first(threads: &mut ahash::AHashMap<(u32, u32), u64>, thread: (u32, u32), t: u64) {
        let first = threads.entry(thread).or_insert(t);
        *first = (*first).min(t);
    }

    /// Moves the recent threads into `threads`, once every sample was added.
    pub fn settle(&mut self) {
        for (thread, first) in self.recent.drain(..).flatten() {
            Self::keep_first(&mut self.threads, thread, first);
        }
    }
}

/// What the first pass saw of the SPE samples, by thread (their processes are known once every
/// task record is read).
#[derive(Default)]
pub struct SpeThreads {
    pub count: u64,
    first: Option<(u64, u32)>,
    last_ns: u64,
    threads: ahash::AHashMap<u32, u64>,
}

impl SpeThreads {
    pub fn add(&mut self, s: &SpeSample) {
        let tid = s.tid.unwrap_or(0);
        self.count += 1;
        if self.first.is_none_or(|(t, _)| s.time_ns < t) {
            self.first = Some((s.time_ns, tid));
        }
        self.last_ns = self.last_ns.max(s.time_ns);
        let t = self.threads.entry(tid).or_insert(s.time_ns);
        *t = (*t).min(s.time_ns);
    }

    pub fn into_stats(self, stats: &mut AccessStats, pids: &ahash::AHashMap<u32, u32>) {
        let Some((first_ns, first_tid)) = self.first else {
            return;
        };
        let pid = |tid: u32| pids.get(&tid).copied().unwrap_or(tid);
        stats.count += self.count;
        stats.first_ns = Some(stats.first_ns.map_or(first_ns, |f| f.min(first_ns)));
        stats.last_ns = stats.last_ns.max(self.last_ns);
        stats.first_pid = stats.first_pid.or(Some(pid(first_tid)));
        for (tid, time) in self.threads {
            let t = stats.threads.entry((pid(tid), tid)).or_insert(time);
            *t = (*t).min(time);
        }
    }
}
