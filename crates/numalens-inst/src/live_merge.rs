//! The sampled stream in one time order while the program runs, up to a watermark
//! (`numalens_assemble::live_watermark`): each thread's samples are queued as they are read
//! from its growing file, and those older than the watermark leave the queues merged in time
//! order. The files are read after the watermark was taken from the logs, each listed anew: a
//! thread's samples older than its last logged record were finished before that record was
//! written (one thread, one clock), so they are read by then, and a thread with no record yet
//! starts after the watermark. Nothing older than a release can come later, and the queues hold
//! only what is newer than the watermark: about 100 ms of samples per thread with the runtime's
//! flush marks, never the run's.

use std::collections::BTreeMap;
use std::path::Path;

use crate::files::InstSample;
use crate::sample_files::merge_by_time;
use crate::tail::SamplesTail;

/// Samples read and not released yet, per (pid, tid).
#[derive(Debug, Default)]
pub struct LiveMerge {
    tail: SamplesTail,
    queues: BTreeMap<(u32, u32), Vec<InstSample>>,
}

impl LiveMerge {
    /// Queues what the `.samples` files in `dir` gained since the last call; to be called after
    /// the watermark the next release uses was taken.
    pub fn read(&mut self, dir: &Path) {
        let mut touched = Vec::new();
        for s in self.tail.read_new_listed(dir) {
            let queue = self.queues.entry((s.pid, s.tid)).or_default();
            queue.push(s);
            touched.push((s.pid, s.tid));
        }
        touched.dedup();
        for key in touched {
            // Two files of one thread (a reused tid, another copy of the runtime) come one after
            // the other: a stable sort keeps each file's order.
            let queue = self.queues.get_mut(&key).expect("queued above");
            if !queue.is_sorted_by_key(|s| s.time_ns) {
                queue.sort_by_key(|s| s.time_ns);
            }
        }
    }

    /// The queued samples strictly older than `watermark`, in time order.
    pub fn release_below(&mut self, watermark: u64) -> Vec<InstSample> {
        let ready: Vec<Vec<InstSample>> = self
            .queues
            .values_mut()
            .map(|q| {
                let n = q.partition_point(|s| s.time_ns < watermark);
                q.drain(..n).collect()
            })
            .collect();
        self.queues.retain(|_, q| !q.is_empty());
        merge_by_time(ready)
    }

    /// Samples read and not released.
    pub fn held(&self) -> usize {
        self.queues.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::read_inst_dir;
    use crate::tail::tests::{header, record};

    /// Appends samples at `times` to thread `tid`'s file.
    fn append(dir: &Path, tid: u32, times: &[u64]) {
        let path = dir.join(format!("inst-7-{tid}-1-0.samples"));
        let mut bytes = std::fs::read(&path).unwrap_or_else(|_| header(7, tid));
        times
            .iter()
            .for_each(|t| bytes.extend(record(*t, 0x1000 + t, true)));
        std::fs::write(&path, bytes).unwrap();
    }

    /// Samples appended at one step: (thread, times).
    type Appended = &'static [(u32, &'static [u64])];

    fn key(s: &InstSample) -> (u64, u32, u64) {
        (s.time_ns, s.tid, s.address)
    }

    #[test]
    fn releases_add_up_to_the_after_the_run_merge_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut live = LiveMerge::default();
        let mut released = Vec::new();
        // (thread, new samples) per step, then the watermark the logs allow after it.
        let steps: [(Appended, u64); 3] = [
            (&[(8, &[10, 20, 30]), (9, &[15, 25])], 22),
            (&[(8, &[40, 50]), (10, &[35, 45])], 45),
            (&[(9, &[60]), (10, &[55, 70])], u64::MAX),
        ];
        for (appended, watermark) in steps {
            for (tid, times) in appended {
                append(dir.path(), *tid, times);
            }
            live.read(dir.path());
            let out = live.release_below(watermark);
            assert!(out.is_sorted_by_key(|s| s.time_ns), "{out:?}");
            assert!(out.iter().all(|s| s.time_ns < watermark));
            assert!(
                released.last().is_none_or(|l: &InstSample| out
                    .first()
                    .is_none_or(|f| f.time_ns >= l.time_ns))
            );
            released.extend(out);
        }
        assert_eq!(live.held(), 0);
        let mut after = read_inst_dir(dir.path()).samples;
        assert_eq!(after.len(), 12);
        after.sort_by_key(key);
        let mut live_sorted = released.clone();
        live_sorted.sort_by_key(key);
        assert_eq!(live_sorted, after);
    }

    #[test]
    fn samples_at_or_above_the_watermark_wait() {
        let dir = tempfile::tempdir().unwrap();
        append(dir.path(), 8, &[10, 20, 30]);
        let mut live = LiveMerge::default();
        live.read(dir.path());
        let out: Vec<u64> = live.release_below(20).iter().map(|s| s.time_ns).collect();
        assert_eq!(out, vec![10]);
        assert_eq!(live.held(), 2);
    }
}
