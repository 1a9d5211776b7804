//! The live objects of each process, and which of them answers for an address.
//!
//! Between two object events (an allocation or a free) the set of live objects is fixed, so the
//! answer for every address can be laid out once as a flat sorted list of non-overlapping
//! intervals, each with the object that wins there, and a lookup is a binary search. Rebuilding
//! that list on every event would cost more than the lookups it saves in programs that allocate
//! and free millions of times between two samples, so the list is rebuilt lazily and only when
//! the lookups it would have served cheaply have paid for it (a rent-or-buy rule). Until then,
//! the list built last stays in use beside the changes made since:
//!
//! - an object allocated since is kept on a short list and compared with the list's answer;
//! - an object freed since only matters where it was the answer; there the object that came
//!   second when the list was built answers, and if it is freed too, the exact search over all
//!   live objects (by size class) does.
//!
//! The winner at an address is the live object containing it with the smallest [`rank`]: tracked
//! objects before fallback ones, then the smallest, then the lowest start, then the earliest
//! allocated (the order in which they became live).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use crate::attribute::ObjectSpec;

/// Fallback, size, start, allocation time, id: the order in which objects containing an address
/// win it (smallest first).
type Rank = (bool, u64, u64, u64, usize);

fn rank(objects: &[ObjectSpec], id: usize) -> Rank {
    let o = &objects[id];
    (!o.tracked, o.size, o.start, o.alloc_ns, id)
}

fn contains(o: &ObjectSpec, address: u64) -> bool {
    o.start <= address && address < o.start.saturating_add(o.size)
}

fn size_class(size: u64) -> usize {
    63 - size.max(1).leading_zeros() as usize
}

/// Per object: not live (or live only in a process's exact search), live and in its process's
/// interval list, freed after that list was built, or allocated after it (its position in the
/// short list).
const OUT: u32 = u32::MAX;
const IN_LIST: u32 = u32::MAX - 1;
const GONE: u32 = u32::MAX - 2;

/// Cost estimates, in about nanoseconds, of the lookups served without an up-to-date list and of
/// a rebuild: they only decide when rebuilding pays.
const EXACT_SEARCH_COST: u64 = 300;
const SHORT_LIST_ITEM_COST: u64 = 2;
const BUILD_COST_PER_OBJECT: u64 = 250;
const BUILD_COST_FIXED: u64 = 2_000;
/// Beyond this many objects allocated since the last build, a lookup uses the exact search
/// rather than scanning them all.
const SHORT_LIST_MAX: usize = 32;

/// The live objects of all processes.
pub(crate) struct LiveIndex<'a> {
    objects: &'a [ObjectSpec],
    processes: Vec<Process>,
    slot_of: HashMap<u32, usize>,
    /// The process of the last lookup, and its slot: lookups come in runs of one process.
    last: Option<(u32, usize)>,
    /// Per object: [`OUT`], [`IN_LIST`], [`GONE`] or its position in its process's `added`.
    state: Vec<u32>,
    /// Per object, set while a rebuild sweeps past its end (reset before the rebuild returns).
    closed: Vec<bool>,
    /// How often each way of answering was taken, so tests can tell they exercised all of them.
    #[cfg(test)]
    stats: Stats,
}

#[cfg(test)]
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    unbuilt: u64,
    freed_winner: u64,
    many_added: u64,
    short_list: u64,
    clean: u64,
    rebuilds: u64,
}

/// One process's live objects.
#[derive(Default)]
struct Process {
    /// All live objects by size class and start. An object of size class k (size in
    /// [2^k, 2^(k+1))) can contain an address only if it starts less than 2^(k+1) below it, so an
    /// exact search scans a bounded window in each class, for any nesting.
    classes: Vec<BTreeMap<u64, Vec<usize>>>,
    live: usize,
    /// The interval list: `starts[i]` is where interval i starts, `ends[i]` how it ends and who
    /// wins there.
    starts: Vec<u64>,
    ends: Vec<Interval>,
    built: bool,
    /// Live objects allocated since the list was built.
    added: Vec<usize>,
    /// Objects of the list freed since it was built.
    gone: usize,
    /// Estimated cost paid since the list was built because it was not up to date.
    extra: u64,
    /// The interval of the last answer: consecutive lookups mostly stay in one.
    last_interval: usize,
}

/// The end of an interval, its winner, and the object that wins there when the winner is freed
/// ([`NONE`] if no other object covers the interval): freeing an object nested in a bigger one
/// (a block in an arena, an allocation in a mapping) uncovers the bigger one, without a search.
#[derive(Clone, Copy)]
struct Interval {
    end: u64,
    winner: usize,
    runner_up: usize,
}

const NONE: usize = usize::MAX;

/// Who wins an interval of the list among its objects still live: its winner, else the object
/// that came second there (none if there was none); `None` when both are freed, and what lay
/// under them is not in the list.
fn live_winner(state: &[u32], interval: Interval) -> Option<Option<usize>> {
    if state[interval.winner] != GONE {
        Some(Some(interval.winner))
    } else if interval.runner_up == NONE {
        Some(None)
    } else if state[interval.runner_up] != GONE {
        Some(Some(interval.runner_up))
    } else {
        None
    }
}

/// Addresses `[from, to)` of a process, where one object wins every address (or none does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub from: u64,
    pub to: u64,
    pub winner: Option<usize>,
}

impl<'a> LiveIndex<'a> {
    pub(crate) fn new(objects: &'a [ObjectSpec]) -> Self {
        LiveIndex {
            objects,
            processes: Vec::new(),
            slot_of: HashMap::new(),
            last: None,
            state: vec![OUT; objects.len()],
            closed: vec![false; objects.len()],
            #[cfg(test)]
            stats: Stats::default(),
        }
    }

    fn slot(&mut self, pid: u32) -> usize {
        if let Some((p, slot)) = self.last
            && p == pid
        {
            return slot;
        }
        let next = self.processes.len();
        let slot = *self.slot_of.entry(pid).or_insert(next);
        if slot == next {
            self.processes.push(Process::default());
        }
        self.last = Some((pid, slot));
        slot
    }

    /// Object `id` becomes live.
    pub(crate) fn insert(&mut self, id: usize) {
        let o = &self.objects[id];
        let slot = self.slot(o.pid);
        let p = &mut self.processes[slot];
        let class = size_class(o.size);
        if p.classes.len() <= class {
            p.classes.resize_with(class + 1, BTreeMap::new);
        }
        p.classes[class].entry(o.start).or_default().push(id);
        p.live += 1;
        self.state[id] = p.added.len() as u32;
        p.added.push(id);
    }

    /// Object `id` is freed (nothing happens if it is not live).
    pub(crate) fn remove(&mut self, id: usize) {
        let o = &self.objects[id];
        let slot = self.slot(o.pid);
        let p = &mut self.processes[slot];
        let Some(ids) = p
            .classes
            .get_mut(size_class(o.size))
            .and_then(|map| map.get_mut(&o.start))
        else {
            return;
        };
        let Some(at) = ids.iter().position(|i| *i == id) else {
            return;
        };
        // Kept in insertion order: the exact search does not depend on it, but it costs nothing.
        ids.remove(at);
        if ids.is_empty() {
            p.classes[size_class(o.size)].remove(&o.start);
        }
        p.live -= 1;
        match self.state[id] {
            IN_LIST => {
                self.state[id] = GONE;
                p.gone += 1;
            }
            OUT | GONE => {}
            pos => {
                let pos = pos as usize;
                p.added.swap_remove(pos);
                if let Some(&moved) = p.added.get(pos) {
                    self.state[moved] = pos as u32;
                }
                self.state[id] = OUT;
            }
        }
    }

    /// The live object of process `pid` that wins `address`.
    pub(crate) fn find(&mut self, pid: u32, address: u64) -> Option<usize> {
        let slot = match self.last {
            Some((p, slot)) if p == pid => slot,
            _ => {
                let slot = *self.slot_of.get(&pid)?;
                self.last = Some((pid, slot));
                slot
            }
        };
        let objects = self.objects;
        let p = &mut self.processes[slot];
        if !p.built {
            #[cfg(test)]
            {
                self.stats.unbuilt += 1;
            }
            p.extra += EXACT_SEARCH_COST;
            let found = p.exact(address, objects);
            self.maybe_rebuild(slot);
            return found;
        }
        // The winner among the objects of the list that are still live, if the list knows it.
        let listed = match p.listed(address) {
            None => Some(None),
            Some(i) => live_winner(&self.state, i),
        };
        let found = if let Some(listed) = listed {
            if p.added.is_empty() {
                #[cfg(test)]
                {
                    self.stats.clean += 1;
                }
                return listed;
            } else if p.added.len() > SHORT_LIST_MAX {
                #[cfg(test)]
                {
                    self.stats.many_added += 1;
                }
                p.extra += EXACT_SEARCH_COST;
                p.exact(address, objects)
            } else {
                #[cfg(test)]
                {
                    self.stats.short_list += 1;
                }
                p.extra += SHORT_LIST_ITEM_COST * p.added.len() as u64;
                let mut best = listed;
                for &id in &p.added {
                    if contains(&objects[id], address)
                        && best.is_none_or(|b| rank(objects, id) < rank(objects, b))
                    {
                        best = Some(id);
                    }
                }
                best
            }
        } else {
            // The winner and the runner-up are both freed: what lay under them is not in the list.
            #[cfg(test)]
            {
                self.stats.freed_winner += 1;
            }
            p.extra += EXACT_SEARCH_COST;
            p.exact(address, objects)
        };
        self.maybe_rebuild(slot);
        found
    }

    /// The winner at `address` of process `pid` and the addresses around it where the same
    /// object (or none) wins, when the interval list, up to date, says so at once; `None` when it
    /// cannot tell cheaply (then [`find`](Self::find) per address decides).
    pub(crate) fn span(&mut self, pid: u32, address: u64) -> Option<Span> {
        let Some(&slot) = self.slot_of.get(&pid) else {
            return Some(Span {
                from: 0,
                to: u64::MAX,
                winner: None,
            });
        };
        let p = &mut self.processes[slot];
        if !p.built || !p.added.is_empty() {
            return None;
        }
        let Some(interval) = p.listed(address) else {
            // In a gap: no object there from the end of the interval before to the next start.
            let next = p.starts.partition_point(|&s| s <= address);
            return Some(Span {
                from: next.checked_sub(1).map_or(0, |i| p.ends[i].end),
                to: p.starts.get(next).copied().unwrap_or(u64::MAX),
                winner: None,
            });
        };
        let winner = live_winner(&self.state, interval)?;
        Some(Span {
            from: p.starts[p.last_interval],
            to: interval.end,
            winner,
        })
    }

    fn maybe_rebuild(&mut self, slot: usize) {
        let p = &self.processes[slot];
        if p.extra >= BUILD_COST_FIXED + BUILD_COST_PER_OBJECT * p.live as u64 {
            self.rebuild(slot);
        }
    }

    /// Lays out the winners of process `slot`'s live objects as intervals: a sweep over the
    /// objects' starts and ends in address order, with the objects covering the current address
    /// in a heap by rank (objects whose end is passed leave it lazily, when they reach its top).
    fn rebuild(&mut self, slot: usize) {
        #[cfg(test)]
        {
            self.stats.rebuilds += 1;
        }
        let objects = self.objects;
        let p = &mut self.processes[slot];
        let mut opens: Vec<(u64, usize)> = Vec::with_capacity(p.live);
        for map in &p.classes {
            for ids in map.values() {
                for &id in ids {
                    self.state[id] = IN_LIST;
                    if objects[id].size > 0 {
                        opens.push((objects[id].start, id));
                    }
                }
            }
        }
        let mut closes: Vec<(u64, usize)> = opens
            .iter()
            .map(|&(start, id)| (start.saturating_add(objects[id].size), id))
            .collect();
        opens.sort_unstable();
        closes.sort_unstable();
        p.starts.clear();
        p.ends.clear();
        let mut covering: BinaryHeap<Reverse<(Rank, usize)>> = BinaryHeap::new();
        let (mut i, mut j) = (0, 0);
        while j < closes.len() {
            let at = match opens.get(i) {
                Some(&(start, _)) => start.min(closes[j].0),
                None => closes[j].0,
            };
            while j < closes.len() && closes[j].0 == at {
                self.closed[closes[j].1] = true;
                j += 1;
            }
            while i < opens.len() && opens[i].0 == at {
                let id = opens[i].1;
                covering.push(Reverse((rank(objects, id), id)));
                i += 1;
            }
            while let Some(Reverse((_, id))) = covering.peek() {
                if !self.closed[*id] {
                    break;
                }
                self.closed[*id] = false;
                covering.pop();
            }
            let Some(winner) = covering.pop() else {
                continue;
            };
            while let Some(Reverse((_, id))) = covering.peek() {
                if !self.closed[*id] {
                    break;
                }
                self.closed[*id] = false;
                covering.pop();
            }
            let runner_up = covering.peek().map_or(NONE, |Reverse((_, id))| *id);
            let winner = {
                let id = winner.0.1;
                covering.push(winner);
                id
            };
            // The heap is not empty, so some object still ends after `at`.
            let next = match opens.get(i) {
                Some(&(start, _)) => start.min(closes[j].0),
                None => closes[j].0,
            };
            match p.ends.last_mut() {
                Some(last)
                    if last.end == at && last.winner == winner && last.runner_up == runner_up =>
                {
                    last.end = next
                }
                _ => {
                    p.starts.push(at);
                    p.ends.push(Interval {
                        end: next,
                        winner,
                        runner_up,
                    });
                }
            }
        }
        debug_assert!(covering.is_empty());
        p.built = true;
        p.added.clear();
        p.gone = 0;
        p.extra = 0;
        p.last_interval = 0;
    }
}

impl Process {
    /// The interval of the list holding `address`.
    fn listed(&mut self, address: u64) -> Option<Interval> {
        let i = match self.starts.get(self.last_interval) {
            Some(&start) if start <= address && address < self.ends[self.last_interval].end => {
                self.last_interval
            }
            _ => {
                let i = self
                    .starts
                    .partition_point(|&s| s <= address)
                    .checked_sub(1)?;
                if address >= self.ends[i].end {
                    return None;
                }
                self.last_interval = i;
                i
            }
        };
        Some(self.ends[i])
    }

    /// The winner at `address` among all live objects, by search.
    fn exact(&self, address: u64, objects: &[ObjectSpec]) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (class, map) in self.classes.iter().enumerate() {
            if map.is_empty() {
                continue;
            }
            let window = 1u64.checked_shl(class as u32 + 1).unwrap_or(u64::MAX);
            for (_, ids) in map.range(address.saturating_sub(window)..=address) {
                for &id in ids {
                    if contains(&objects[id], address)
                        && best.is_none_or(|b| rank(objects, id) < rank(objects, b))
                    {
                        best = Some(id);
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
#[path = "attribute_index_tests.rs"]
pub(crate) mod tests;
