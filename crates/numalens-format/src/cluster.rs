//! Orders a write batch so that rows of the same thread sit together.
//!
//! Samples arrive in time order with threads interleaved at random, which makes per-thread
//! columns (tid, cpu, node, object, ip) and address deltas look like noise to column encoders.
//! Grouping a batch by thread, keeping time order inside each group, turns them into long runs and
//! small deltas. A counting sort keeps this linear: programs have few threads per batch.

use crate::table::Row;

/// Above this many distinct keys in one batch, fall back to a comparison sort.
const MAX_BUCKETS: usize = 4096;

/// The rows of `batch` grouped by [`Row::cluster_key`], stable within a group; keys are ordered
/// by first appearance. Rows without keys keep their order.
pub fn clustered<R: Row>(batch: &[R]) -> Vec<&R> {
    if batch.first().and_then(Row::cluster_key).is_none() {
        return batch.iter().collect();
    }
    match bucket_of_each_row(batch) {
        Some((buckets, counts)) => scatter(batch, &buckets, &counts),
        None => {
            let mut rows: Vec<&R> = batch.iter().collect();
            rows.sort_by_key(|r| r.cluster_key());
            rows
        }
    }
}

/// Bucket index of each row and the size of each bucket, or `None` if there are too many keys.
fn bucket_of_each_row<R: Row>(batch: &[R]) -> Option<(Vec<u32>, Vec<usize>)> {
    let mut keys: Vec<Option<u64>> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    let mut buckets = Vec::with_capacity(batch.len());
    let mut last = (None, 0usize);
    for row in batch {
        let key = row.cluster_key();
        let bucket = if key == last.0 && !keys.is_empty() {
            last.1
        } else {
            let found = keys.iter().position(|k| *k == key);
            let bucket = found.unwrap_or_else(|| {
                keys.push(key);
                counts.push(0);
                keys.len() - 1
            });
            if keys.len() > MAX_BUCKETS {
                return None;
            }
            last = (key, bucket);
            bucket
        };
        counts[bucket] += 1;
        buckets.push(bucket as u32);
    }
    Some((buckets, counts))
}

fn scatter<'a, R>(batch: &'a [R], buckets: &[u32], counts: &[usize]) -> Vec<&'a R> {
    let mut next = Vec::with_capacity(counts.len());
    let mut start = 0;
    for count in counts {
        next.push(start);
        start += count;
    }
    let mut order: Vec<Option<&R>> = vec![None; batch.len()];
    for (row, bucket) in batch.iter().zip(buckets) {
        let slot = &mut next[*bucket as usize];
        order[*slot] = Some(row);
        *slot += 1;
    }
    order
        .into_iter()
        .map(|r| r.expect("every slot filled"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{SynthConfig, SynthSamples};
    use crate::tables::Sample;

    #[test]
    fn groups_by_thread_and_keeps_time_order_within_a_thread() {
        let batch: Vec<Sample> = SynthSamples::new(SynthConfig::default())
            .take(5000)
            .collect();
        let order = clustered(&batch);
        assert_eq!(order.len(), batch.len());
        let mut seen_tids = Vec::new();
        for pair in order.windows(2) {
            if pair[0].tid == pair[1].tid {
                assert!(pair[0].time_ns <= pair[1].time_ns);
            } else {
                assert!(
                    !seen_tids.contains(&pair[1].tid),
                    "thread {} split",
                    pair[1].tid
                );
                seen_tids.push(pair[0].tid);
            }
        }
        let mut sorted: Vec<u64> = order.iter().map(|s| s.time_ns).collect();
        sorted.sort_unstable();
        let original: Vec<u64> = batch.iter().map(|s| s.time_ns).collect();
        assert_eq!(sorted, original, "a permutation of the batch");
    }
}
