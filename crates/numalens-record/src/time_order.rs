//! Page-fault samples put in time order while the program runs.
//!
//! Each CPU's ring holds its samples in time order, but the recorder drains the rings one after
//! the other, so the samples arrive as interleaved runs. Sorting a million of them after the
//! program ends took 40–50 ms of the time the user waits for the profile. Here each CPU's samples
//! wait in their own queue, and after every drain the samples older than a short lag (by then
//! every sample of that time is in its ring) are merged into one ordered list. At the end the
//! rest is merged the same way.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use numalens_assemble::raw::Fault;

/// Samples this much older than the drain are surely in their rings already: a sample is written
/// within microseconds of its time stamp, with preemption off.
pub const SETTLE_LAG_NS: u64 = 50_000_000;

#[derive(Default)]
pub struct FaultsInOrder {
    ordered: Vec<Fault>,
    /// Samples not merged yet, per CPU.
    pending: Vec<VecDeque<Fault>>,
    pending_count: usize,
}

impl FaultsInOrder {
    pub fn push(&mut self, fault: Fault) {
        let cpu = fault.cpu as usize;
        if self.pending.len() <= cpu {
            self.pending.resize_with(cpu + 1, VecDeque::new);
        }
        self.pending[cpu].push_back(fault);
        self.pending_count += 1;
    }

    /// The samples already in time order, from the `from`-th on (what a live reader has not
    /// seen yet).
    pub fn ordered_since(&self, from: usize) -> &[Fault] {
        self.ordered.get(from..).unwrap_or(&[])
    }

    pub fn len(&self) -> usize {
        self.ordered.len() + self.pending_count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves every pending sample older than `before_ns` into the ordered list. Equal times keep
    /// the order of their CPUs' numbers.
    pub fn settle(&mut self, before_ns: u64) {
        let mut fronts: BinaryHeap<Reverse<(u64, usize)>> = self
            .pending
            .iter()
            .enumerate()
            .filter_map(|(cpu, q)| q.front().map(|f| Reverse((f.time_ns, cpu))))
            .filter(|Reverse((time, _))| *time < before_ns)
            .collect();
        while let Some(Reverse((_, cpu))) = fronts.pop() {
            let queue = &mut self.pending[cpu];
            let fault = queue.pop_front().expect("a front was seen");
            self.ordered.push(fault);
            self.pending_count -= 1;
            if let Some(next) = queue.front()
                && next.time_ns < before_ns
            {
                fronts.push(Reverse((next.time_ns, cpu)));
            }
        }
    }

    /// Every sample, in time order as far as each CPU's samples were.
    pub fn into_ordered(mut self) -> Vec<Fault> {
        self.settle(u64::MAX);
        self.ordered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(cpu: u32, time_ns: u64) -> Fault {
        Fault {
            pid: 1,
            tid: cpu + 10,
            time_ns,
            address: time_ns * 4096,
            cpu,
            mapped_page_size: 0,
            ip: 0,
        }
    }

    /// Runs from three CPUs arriving drain by drain come out in the order a stable sort by time
    /// gives, whether they were settled along the way or only at the end.
    #[test]
    fn interleaved_runs_come_out_as_a_stable_sort_by_time() {
        let mut all = Vec::new();
        let mut state = 12345u64;
        let mut clocks = [0u64; 3];
        // Where each CPU's clock stood after each sample: later samples are not older.
        let mut safe_before = Vec::new();
        for _ in 0..3000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let cpu = (state >> 60) as usize % 3;
            clocks[cpu] += (state >> 50) % 4; // steps of 0 make equal times on one CPU
            all.push(fault(cpu as u32, clocks[cpu]));
            safe_before.push(*clocks.iter().min().expect("three clocks"));
        }
        let mut expected = all.clone();
        expected.sort_by_key(|f| (f.time_ns, f.cpu));

        let mut settled = FaultsInOrder::default();
        let mut at_end = FaultsInOrder::default();
        for (i, f) in all.iter().enumerate() {
            settled.push(*f);
            at_end.push(*f);
            if i % 97 == 0 {
                settled.settle(safe_before[i]);
            }
        }
        assert_eq!(settled.len(), all.len());
        assert_eq!(settled.into_ordered(), expected);
        assert_eq!(at_end.into_ordered(), expected);
    }
}
