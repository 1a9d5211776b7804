//! The local access ratio and the nodes' loads of exact counts, each count spread over time as
//! its samples say and judged where its thread and its page were then (the estimator of the
//! module documentation of [`crate::placement`]).

use std::collections::{BTreeMap, HashMap};

use super::observed::{AccessSample, ExactCount, Observed};

/// Pages per block for a pair without samples: the thread's samples on the block's other pages
/// say when it worked there.
pub const BLOCK_PAGES: u64 = 16;

/// Instants evaluated per pair at most (evenly chosen among its samples).
pub const MAX_POINTS: usize = 64;

/// An interval of the run between two scans.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Accesses judged in it and the local ones among them.
    pub judged: f64,
    pub local: f64,
}

impl Window {
    pub fn lar(&self) -> Option<f64> {
        (self.judged > 0.0).then(|| self.local / self.judged)
    }
}

/// The exact counts judged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Locality {
    /// Every exact access.
    pub accesses: u64,
    /// Accesses whose thread node and page node were known, and the local ones among them.
    pub judged: f64,
    pub local: f64,
    /// Accesses each node served (those whose page node was known).
    pub served: BTreeMap<u32, f64>,
    /// Between consecutive scans (the first from the run's start, the last to its end).
    pub windows: Vec<Window>,
}

impl Locality {
    pub fn lar(&self) -> Option<f64> {
        (self.judged > 0.0).then(|| self.local / self.judged)
    }

    pub fn judged_share(&self) -> f64 {
        if self.accesses == 0 {
            return 1.0;
        }
        self.judged / self.accesses as f64
    }

    /// Standard deviation over mean of the accesses each of `nodes` served.
    pub fn imbalance(&self, nodes: &[u32]) -> Option<f64> {
        let loads: Vec<f64> = nodes
            .iter()
            .map(|n| self.served.get(n).copied().unwrap_or(0.0))
            .collect();
        let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
        if mean <= 0.0 {
            return None;
        }
        let var = loads.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / loads.len() as f64;
        Some(var.sqrt() / mean)
    }
}

/// Samples by pair, by (thread, block) and by thread, each in time order.
struct Index<'a> {
    samples: &'a [AccessSample],
    pair: HashMap<(u32, u32, u64), Vec<u32>>,
    block: HashMap<(u32, u32, u64), Vec<u32>>,
    thread: HashMap<(u32, u32), Vec<u32>>,
}

impl<'a> Index<'a> {
    fn new(samples: &'a [AccessSample]) -> Index<'a> {
        let mut order: Vec<u32> = (0..samples.len() as u32).collect();
        order.sort_by_key(|i| {
            let s = &samples[*i as usize];
            (s.pid, s.tid, s.time_ns)
        });
        let mut index = Index {
            samples,
            pair: HashMap::new(),
            block: HashMap::new(),
            thread: HashMap::new(),
        };
        for i in order {
            let s = &samples[i as usize];
            index
                .pair
                .entry((s.pid, s.tid, s.page))
                .or_default()
                .push(i);
            index
                .block
                .entry((s.pid, s.tid, s.page / BLOCK_PAGES))
                .or_default()
                .push(i);
            index.thread.entry((s.pid, s.tid)).or_default().push(i);
        }
        index
    }

    /// The instants (time, weight) a count of `c` of this kind (`write`) is spread over.
    fn points(&self, c: &ExactCount, write: bool) -> Vec<(u64, f64)> {
        let from = |list: &[u32], after: u64, kind: Option<bool>| -> Vec<(u64, f64)> {
            let start = list.partition_point(|i| self.samples[*i as usize].time_ns < after);
            let chosen: Vec<&AccessSample> = list[start..]
                .iter()
                .map(|i| &self.samples[*i as usize])
                .filter(|s| kind.is_none_or(|w| s.write == w))
                .collect();
            spaced(&chosen, MAX_POINTS)
                .into_iter()
                .map(|s| (s.time_ns, f64::from(s.weight)))
                .collect()
        };
        let empty = Vec::new();
        let pair = self.pair.get(&(c.pid, c.tid, c.page)).unwrap_or(&empty);
        for points in [from(pair, 0, Some(write)), from(pair, 0, None)] {
            if !points.is_empty() {
                return points;
            }
        }
        let block = self
            .block
            .get(&(c.pid, c.tid, c.page / BLOCK_PAGES))
            .unwrap_or(&empty);
        let thread = self.thread.get(&(c.pid, c.tid)).unwrap_or(&empty);
        for points in [
            from(block, c.first_ns, None),
            from(thread, c.first_ns, None),
        ] {
            if !points.is_empty() {
                return points;
            }
        }
        vec![(c.first_ns, 1.0)]
    }
}

/// At most `max` of `items`, evenly spaced (all of them when there are no more).
fn spaced<T: Copy>(items: &[T], max: usize) -> Vec<T> {
    if items.len() <= max {
        return items.to_vec();
    }
    (0..max).map(|k| items[k * items.len() / max]).collect()
}

/// Judges every exact count of `counts` (see the module documentation).
pub fn measure(observed: &Observed, samples: &[AccessSample], counts: &[ExactCount]) -> Locality {
    let index = Index::new(samples);
    let mut bounds: Vec<u64> = observed
        .scans
        .iter()
        .copied()
        .filter(|t| *t > observed.start_ns && *t <= observed.end_ns)
        .collect();
    bounds.insert(0, observed.start_ns);
    bounds.push(observed.end_ns.max(observed.start_ns) + 1);
    let mut windows: Vec<Window> = bounds
        .windows(2)
        .map(|b| Window {
            start_ns: b[0],
            end_ns: b[1],
            judged: 0.0,
            local: 0.0,
        })
        .collect();
    let mut out = Locality::default();
    for c in counts {
        out.accesses = out
            .accesses
            .saturating_add(c.reads.saturating_add(c.writes));
        for (n, write) in [(c.reads, false), (c.writes, true)] {
            if n == 0 {
                continue;
            }
            let points = index.points(c, write);
            let sum: f64 = points.iter().map(|(_, w)| w).sum();
            for (t, w) in points {
                let share = n as f64 * w / sum;
                let Some(page_node) = observed.page_node(c.pid, c.page, t) else {
                    continue;
                };
                *out.served.entry(page_node).or_default() += share;
                let Some(thread_node) = observed.thread_node(c.pid, c.tid, t) else {
                    continue;
                };
                let local = if thread_node == page_node { share } else { 0.0 };
                out.judged += share;
                out.local += local;
                let k = bounds.partition_point(|b| *b <= t).saturating_sub(1);
                let last = windows.len().saturating_sub(1);
                if let Some(window) = windows.get_mut(k.min(last)) {
                    window.judged += share;
                    window.local += local;
                }
            }
        }
    }
    out.windows = windows;
    out
}

/// Seconds from `start_ns` to the scan after which the windowed LAR stays within 5 %
/// (relative) of its final level; `None` without windows to judge.
pub fn time_to_good(windows: &[Window], start_ns: u64) -> Option<f64> {
    let mut sizes: Vec<f64> = windows
        .iter()
        .map(|w| w.judged)
        .filter(|j| *j > 0.0)
        .collect();
    if sizes.is_empty() {
        return None;
    }
    sizes.sort_by(f64::total_cmp);
    let median = sizes[sizes.len() / 2];
    let valid: Vec<&Window> = windows
        .iter()
        .filter(|w| w.judged >= median / 5.0 && w.judged > 0.0)
        .collect();
    let tail = &valid[valid.len() - valid.len().div_ceil(4)..];
    let judged: f64 = tail.iter().map(|w| w.judged).sum();
    let final_lar = tail.iter().map(|w| w.local).sum::<f64>() / judged;
    let off = |w: &&Window| {
        w.lar()
            .is_some_and(|l| (l - final_lar).abs() > 0.05 * final_lar)
    };
    let good_from = match valid.iter().rposition(off) {
        Some(i) => valid[i].end_ns,
        None => valid[0].start_ns,
    };
    Some(good_from.saturating_sub(start_ns) as f64 / 1e9)
}
