//! Orders a write batch so that rows of the same thread sit together.
//!
//! Samples arrive in time order with threads interleaved at random, which makes per-thread
//! columns (tid, cpu, node, object, ip) and address deltas look like noise to column encoders.
//! Grouping a batch by thread, keeping time order inside each group, turns them into long runs and
//! small deltas. A counting sort keeps this linear: programs have few threads per batch.

/// Above this many distinct keys in one batch, fall back to a comparison sort.
const MAX_BUCKETS: usize = 4096;

/// The order of a batch's rows grouped by their keys ([`crate::table::Row::cluster_key`]),
/// stable within a group; keys are ordered by first appearance. Rows without keys keep their
/// order.
pub fn cluster_order(keys: &[Option<u64>]) -> Vec<u32> {
    if keys.first().copied().flatten().is_none() {
        return (0..keys.len() as u32).collect();
    }
    match bucket_of_each_row(keys) {
        Some((buckets, counts)) => scatter(&buckets, &counts),
        None => {
            let mut order: Vec<u32> = (0..keys.len() as u32).collect();
            order.sort_by_key(|&i| keys[i as usize]);
            order
        }
    }
}

/// Bucket index of each row and the size of each bucket, or `None` if there are too many keys.
fn bucket_of_each_row(row_keys: &[Option<u64>]) -> Option<(Vec<u32>, Vec<usize>)> {
    let mut keys: Vec<Option<u64>> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    let mut buckets = Vec::with_capacity(row_keys.len());
    let mut last = (None, 0usize);
    for &key in row_keys {
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

/// Row indices placed bucket by bucket, each bucket's rows in their order.
fn scatter(buckets: &[u32], counts: &[usize]) -> Vec<u32> {
    let mut next = Vec::with_capacity(counts.len());
    let mut start = 0;
    for count in counts {
        next.push(start);
        start += count;
    }
    let mut order = vec![0u32; buckets.len()];
    for (row, bucket) in buckets.iter().enumerate() {
        let slot = &mut next[*bucket as usize];
        order[*slot] = row as u32;
        *slot += 1;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{SynthConfig, SynthSamples};
    use crate::table::Row;
    use crate::tables::Sample;

    #[test]
    fn groups_by_thread_and_keeps_time_order_within_a_thread() {
        let batch: Vec<Sample> = SynthSamples::new(SynthConfig::default())
            .take(5000)
            .collect();
        let keys: Vec<Option<u64>> = batch.iter().map(Row::cluster_key).collect();
        let order: Vec<&Sample> = cluster_order(&keys)
            .into_iter()
            .map(|i| &batch[i as usize])
            .collect();
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

#[cfg(test)]
mod order_tests {
    use super::cluster_order;

    #[test]
    fn rows_without_keys_keep_their_order() {
        assert_eq!(cluster_order(&[None, None, None]), vec![0, 1, 2]);
        assert_eq!(cluster_order(&[]), Vec::<u32>::new());
    }

    #[test]
    fn keys_are_grouped_in_order_of_first_appearance() {
        let keys = [Some(7), Some(3), Some(7), Some(9), Some(3)];
        assert_eq!(cluster_order(&keys), vec![0, 2, 1, 4, 3]);
    }

    #[test]
    fn too_many_keys_fall_back_to_a_sort_by_key() {
        let keys: Vec<Option<u64>> = (0..10_000u64).map(|i| Some((i * 7919) % 5000)).collect();
        let order = cluster_order(&keys);
        let sorted: Vec<u64> = order.iter().map(|&i| keys[i as usize].unwrap()).collect();
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]));
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..10_000).collect::<Vec<u32>>());
    }
}
