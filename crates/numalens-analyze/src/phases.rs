//! Phases seen in the samples' times: the regions of an object (or the whole object) whose owner
//! thread changes while the other users run on.

use std::collections::HashMap;

use crate::access::{AccessTally, SaturatingSum};
use crate::classify::THRESHOLDS;
use crate::engine::add;
use crate::stats::fewer_runs_than_chance;
use crate::timeline::BUCKETS;

/// Per object position: (thread → timeline) summed over its regions, and the accesses of
/// regions whose owner changed between phases.
pub(crate) struct Times {
    pub by_object: HashMap<u32, HashMap<u32, Vec<u64>>>,
    pub phase: HashMap<u32, u64>,
}

/// One thread's timeline in one region.
type Row<'a> = (u32, &'a [u64]);

/// When each thread was running: its samples per time bucket, over every object.
pub(crate) struct Running {
    width: u64,
    by_thread: HashMap<u32, Vec<u64>>,
}

impl Running {
    pub(crate) fn of(sampled: &AccessTally) -> Self {
        let mut by_thread: HashMap<u32, Vec<u64>> = HashMap::new();
        for (row, &(_, _, thread)) in sampled.region_keys.iter().enumerate() {
            let line = by_thread.entry(thread).or_insert_with(|| vec![0; BUCKETS]);
            for (a, b) in line.iter_mut().zip(sampled.timelines.row(row)) {
                add(a, *b);
            }
        }
        Running {
            width: sampled.timelines.width().max(1),
            by_thread,
        }
    }

    /// Threads running in the buckets given, buckets `width` ns wide.
    #[cfg(test)]
    pub(crate) fn in_buckets(width: u64, threads: &[(u32, std::ops::Range<usize>)]) -> Self {
        let line = |r: &std::ops::Range<usize>| -> Vec<u64> {
            (0..BUCKETS).map(|b| u64::from(r.contains(&b))).collect()
        };
        Running {
            width,
            by_thread: threads.iter().map(|(t, r)| (*t, line(r))).collect(),
        }
    }

    /// Whether `thread` has samples in bucket `b`.
    fn in_bucket(&self, thread: u32, b: usize) -> bool {
        self.by_thread.get(&thread).is_some_and(|r| r[b] > 0)
    }

    /// Whether `thread` has samples in a bucket lying wholly within `[from_ns, to_ns]`. Buckets
    /// cut by either end are left out: a thread that starts as another stops shares the bucket
    /// of the switch without having run beside it.
    pub(crate) fn ran_within(&self, thread: u32, from_ns: u64, to_ns: u64) -> bool {
        let first = from_ns.div_ceil(self.width) as usize;
        let end = ((to_ns.saturating_add(1) / self.width) as usize).min(BUCKETS);
        (first..end.max(first)).any(|b| self.in_bucket(thread, b))
    }
}

pub(crate) fn times(sampled: &AccessTally) -> Times {
    let mut by_object: HashMap<u32, HashMap<u32, Vec<u64>>> = HashMap::new();
    let mut regions: HashMap<(u32, u16), Vec<Row>> = HashMap::new();
    let running = Running::of(sampled);
    for (row, &(object, region, thread)) in sampled.region_keys.iter().enumerate() {
        let values = sampled.timelines.row(row);
        let line = by_object
            .entry(object)
            .or_default()
            .entry(thread)
            .or_insert_with(|| vec![0; BUCKETS]);
        for (a, b) in line.iter_mut().zip(values) {
            add(a, *b);
        }
        regions
            .entry((object, region))
            .or_default()
            .push((thread, values));
    }
    let mut phase: HashMap<u32, u64> = HashMap::new();
    for ((object, _), rows) in regions {
        if let Some(n) = changed_owner(&rows, &running) {
            add(phase.entry(object).or_default(), n);
        }
    }
    // The whole object too: a thread that sweeps all of it in each of its phases passes through
    // each region only briefly, once a phase, as threads sharing it at once do; what sets it
    // apart is that no other thread uses the object meanwhile.
    for (object, lines) in &by_object {
        let rows: Vec<Row> = lines.iter().map(|(t, v)| (*t, v.as_slice())).collect();
        if let Some(n) = changed_owner(&rows, &running) {
            let p = phase.entry(*object).or_default();
            *p = (*p).max(n);
        }
    }
    Times { by_object, phase }
}

/// The region's accesses when it went from one owner to another: two or more threads each own
/// (more than the exclusivity share of) buckets holding a fifth of its accesses, and their
/// buckets come in longer stretches of one owner than chance would order them in (fewer runs,
/// `stats::fewer_runs_than_chance`): one owner for a while, then another, once or again and
/// again.
///
/// A bucket has an owner only when another user of the region was running then (it has samples
/// anywhere in that bucket) and left the region to it. Threads that take turns on the cores
/// (more threads than cores, or a busy machine) each have buckets to themselves; that they use
/// a region alone while the others are not running says nothing of who uses it. And threads
/// that stream over a whole object at once pass through each region in turns, owner after
/// owner: their buckets interleave as if at random, which is sharing, not a phase.
fn changed_owner(rows: &[Row], running: &Running) -> Option<u64> {
    let all: u64 = rows
        .iter()
        .map(|(_, v)| v.iter().saturating_sum())
        .saturating_sum();
    let owners: Vec<Option<u32>> = (0..BUCKETS).map(|b| owner(rows, running, b)).collect();
    let mut owned: HashMap<u32, u64> = HashMap::new();
    for (b, o) in owners.iter().enumerate() {
        if let Some(t) = o {
            let sum = rows.iter().map(|(_, v)| v[b]).saturating_sum();
            add(owned.entry(*t).or_default(), sum);
        }
    }
    let major: Vec<u32> = owned
        .iter()
        .filter(|(_, n)| **n as f64 >= 0.2 * all as f64)
        .map(|(t, _)| *t)
        .collect();
    if major.len() < 2 {
        return None;
    }
    // The major owners' buckets in time order, as runs of one owner.
    let mut runs: Vec<(u32, u64)> = Vec::new();
    for t in owners.iter().flatten().filter(|t| major.contains(t)) {
        match runs.last_mut() {
            Some((last, n)) if last == t => *n += 1,
            _ => runs.push((*t, 1)),
        }
    }
    let counts: Vec<u64> = major
        .iter()
        .map(|t| runs.iter().filter(|(o, _)| o == t).map(|(_, n)| *n).sum())
        .collect();
    fewer_runs_than_chance(&counts, runs.len() as u64).then_some(all)
}

/// The thread owning bucket `b` of a region: it made more than the exclusivity share of the
/// region's accesses in it while another of the region's users was running.
fn owner(rows: &[Row], running: &Running, b: usize) -> Option<u32> {
    let sum: u64 = rows.iter().map(|(_, v)| v[b]).saturating_sum();
    let (t, top) = rows
        .iter()
        .map(|(t, v)| (*t, v[b]))
        .max_by_key(|(_, n)| *n)?;
    let others_ran = rows
        .iter()
        .any(|(u, _)| *u != t && running.in_bucket(*u, b));
    (sum > 0 && top as f64 > THRESHOLDS.exclusivity * sum as f64 && others_ran).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timelines of a region: thread → buckets with accesses (10 each).
    fn rows(of: &[(u32, &[usize])]) -> Vec<(u32, Vec<u64>)> {
        of.iter()
            .map(|(t, buckets)| {
                let mut v = vec![0; BUCKETS];
                buckets.iter().for_each(|b| v[*b] = 10);
                (*t, v)
            })
            .collect()
    }

    fn judge(region: &[(u32, Vec<u64>)], running: &[(u32, std::ops::Range<usize>)]) -> bool {
        let running = Running::in_buckets(1, running);
        let rows: Vec<Row> = region.iter().map(|(t, v)| (*t, v.as_slice())).collect();
        changed_owner(&rows, &running).is_some()
    }

    #[test]
    fn an_owner_that_hands_over_for_good_is_a_phase() {
        let both = [(0, 0..BUCKETS), (1, 0..BUCKETS)];
        let handed = rows(&[(0, &[2, 5, 8, 11, 14]), (1, &[30, 33, 36, 39, 42])]);
        assert!(judge(&handed, &both));
        // The same buckets while the other thread was not running: taking turns on a core.
        let turns = [(0, 0..20), (1, 30..50)];
        assert!(!judge(&handed, &turns));
        // Owners passing through in turns and coming back: sharing, not a phase.
        let passes = rows(&[(0, &[2, 8, 14, 30, 36]), (1, &[5, 11, 33, 39, 42])]);
        assert!(!judge(&passes, &both));
        // Phases again and again, each long: one owner for three buckets, then the other.
        let again: Vec<usize> = (0..60).filter(|b| b % 6 < 3).collect();
        let other: Vec<usize> = (0..60).filter(|b| b % 6 >= 3).collect();
        assert!(judge(&rows(&[(0, &again), (1, &other)]), &both));
        // Two buckets each: any two threads would come one after the other a third of the time.
        let few = rows(&[(0, &[2, 5]), (1, &[30, 33])]);
        assert!(!judge(&few, &both));
    }

    #[test]
    fn a_thread_ran_within_a_span_only_in_buckets_wholly_inside_it() {
        let running = Running::in_buckets(10, &[(0, 3..4)]);
        assert!(running.ran_within(0, 30, 40));
        assert!(running.ran_within(0, 25, 45));
        assert!(!running.ran_within(0, 31, 45), "bucket 3 cut by the start");
        assert!(running.ran_within(0, 20, 39));
        assert!(!running.ran_within(0, 20, 38), "bucket 3 cut by the end");
        assert!(!running.ran_within(1, 0, 640));
        assert!(!running.ran_within(0, u64::MAX - 5, u64::MAX));
    }
}
