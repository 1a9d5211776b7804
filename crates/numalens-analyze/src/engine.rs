//! From the merged per-page counters to per-object aggregates, placement totals and the
//! communication matrix. Pure arithmetic over what the passes counted.

use std::collections::HashMap;

use numalens_format::Object;

use crate::access::SaturatingSum;
use crate::access::{AccessTally, NO_OBJECT, PageAcc, PageKey};
use crate::classify::{CLASSES, Class, LineEvidence, PageView, THRESHOLDS, line_evidence, view};
use crate::pages::PageMap;
use crate::placement::Placement;

/// What the engine needs besides the counters.
pub(crate) struct Context<'a> {
    pub objects: &'a [Object],
    pub page_size: u64,
    pub placement: &'a Placement,
    pub page_map: &'a PageMap,
    /// By dense thread id.
    pub logical: &'a [Option<u32>],
    pub pids: &'a [u32],
    pub block_size: u64,
}

/// [reads, writes, other].
pub(crate) type Rw = [u64; 3];

fn add_rw(into: &mut Rw, u: &crate::access::User) {
    add(&mut into[0], u.reads);
    add(&mut into[1], u.writes);
    add(&mut into[2], u.other);
}

/// Adds a count; counts from a damaged profile can reach u64's end, and sums stop there.
pub(crate) fn add(into: &mut u64, count: u64) {
    *into = into.saturating_add(count);
}

pub(crate) fn total(rw: &Rw) -> u64 {
    rw.iter().saturating_sum()
}

/// Everything counted for one object.
#[derive(Debug, Default)]
pub(crate) struct ObjAgg {
    pub rw: Rw,
    /// Samples behind its accesses, effective (`stats::effective_samples`; 0 for exact counts),
    /// once aggregated; the sum of their weights' squares before.
    pub samples: u64,
    /// Samples behind its accesses, as they were drawn (0 for exact counts).
    pub raw_samples: u64,
    /// Pages with accesses.
    pub pages: u64,
    /// Pages whose first toucher is known: with samples, also those a first-touch fault placed
    /// that no load or store sample hit.
    pub touched_pages: u64,
    /// (pages, accesses) per class, in [`CLASSES`] order.
    pub classes: [(u64, u64); 5],
    pub users: HashMap<u32, Rw>,
    /// (thread, page node) → accesses.
    pub cells: HashMap<(u32, Option<u32>), Rw>,
    /// First toucher → pages (of `touched_pages`).
    pub touchers: HashMap<u32, u64>,
    pub mismatched: Part,
    pub wide_shared: Part,
    pub neighbour: Part,
    /// Concurrently shared pages whose users are not just two logical neighbours, and not wide.
    pub other_shared: Part,
    /// Sampled writes on lines whose writers alternated in time, and their pages.
    pub false_shared_writes: u64,
    pub false_shared: Part,
    /// Exact writes on pages several threads hammer, with no sample times to confirm, and
    /// their pages.
    pub candidate_writes: u64,
    /// Store samples on its candidate pages (none without store samples).
    pub candidate_store_samples: u64,
    pub candidate: Part,
    pub migratory: Part,
    /// Thread pairs (a < b) → communication on its pages (the smaller of their two counts).
    pub pairs: HashMap<(u32, u32), u64>,
    /// Accesses on its pages with two or more users: what the communication is measured on.
    pub communicating: u64,
    /// Shared pages with exactly two users and no dominant one: (earlier user, its first
    /// access, later user, its first access, accesses).
    pub handovers: Vec<Handover>,
    /// Communication between logical neighbours, between other pairs, and the neighbour pairs
    /// that communicate.
    pub neighbour_comm: u64,
    pub other_comm: u64,
    pub neighbour_pairs: usize,
    pub local: u64,
    pub remote: u64,
    /// Positions in the page list of its pages.
    pub page_list: Vec<u32>,
}

/// A page two threads share: who came first, when each came, its accesses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handover {
    pub earlier: u32,
    pub earlier_ns: u64,
    pub later: u32,
    pub later_ns: u64,
    pub accesses: u64,
}

/// Pages of one kind within an object: how many, their accesses, the remote ones.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Part {
    pub pages: u64,
    pub accesses: u64,
    pub remote: u64,
}

impl Part {
    fn add(&mut self, accesses: u64, remote: u64) {
        self.pages += 1;
        add(&mut self.accesses, accesses);
        add(&mut self.remote, remote);
    }
}

/// Results over all pages.
pub(crate) struct Aggregates {
    pub objects: Vec<ObjAgg>,
    /// By dense thread id.
    pub threads: Vec<ThreadAgg>,
    pub rw: Rw,
    pub pages: u64,
    /// Per page (same order as the page list): its view and node.
    pub views: Vec<(PageView, Option<u32>)>,
    /// Node → (accesses served, pages).
    pub node_load: HashMap<u32, (u64, u64)>,
    /// (thread node, page node) → accesses.
    pub traffic: HashMap<(u32, u32), u64>,
    pub unknown: u64,
    /// Dense thread pairs (a < b) → communication.
    pub communication: HashMap<(u32, u32), u64>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct ThreadAgg {
    pub rw: Rw,
    pub local: u64,
    pub remote: u64,
}

/// Aggregates `pages` (the access source); `sampled` supplies written lines for false sharing.
pub(crate) fn aggregate(
    ctx: &Context,
    pages: &[(PageKey, PageAcc)],
    exact: bool,
    sampled: &AccessTally,
    threads: usize,
) -> Aggregates {
    let fs = false_sharing_by_page(sampled);
    let running = crate::phases::Running::of(sampled);
    let ranges = ObjectRanges::new(ctx.objects);
    let active = active_threads(pages, ctx.pids);
    let mut a = Aggregates {
        objects: (0..ctx.objects.len()).map(|_| ObjAgg::default()).collect(),
        threads: vec![ThreadAgg::default(); threads],
        rw: [0; 3],
        pages: 0,
        views: Vec::with_capacity(pages.len()),
        node_load: HashMap::new(),
        traffic: HashMap::new(),
        unknown: 0,
        communication: HashMap::new(),
    };
    let mut blocks: HashMap<(u32, u64), Vec<(u32, u64)>> = HashMap::new();
    for (i, (key, page)) in pages.iter().enumerate() {
        let address = key.1 * ctx.page_size;
        let mut v = view(
            page,
            exact,
            fs.get(key).copied().unwrap_or_default(),
            ctx.page_size,
            &running,
        );
        let touch_node = page.touch.and_then(|t| t.node);
        let node =
            ctx.placement
                .page_node(ctx.page_map, key.0, address, touch_node, v.first_toucher);
        let object = match page.object {
            NO_OBJECT => ranges.find(key.0, address),
            o => Some(o),
        };
        let mut page_remote = 0;
        for u in page.users.iter().filter(|u| u.accesses() > 0) {
            add_rw(&mut a.rw, u);
            add_rw(&mut a.threads[u.thread as usize].rw, u);
            let thread_node = ctx.placement.thread_node[u.thread as usize];
            match (thread_node, node) {
                (Some(t), Some(p)) => {
                    add(a.traffic.entry((t, p)).or_default(), u.accesses());
                    add(&mut a.node_load.entry(p).or_default().0, u.accesses());
                    if t == p {
                        add(&mut a.threads[u.thread as usize].local, u.accesses());
                    } else {
                        add(&mut a.threads[u.thread as usize].remote, u.accesses());
                        add(&mut page_remote, u.accesses());
                    }
                }
                _ => add(&mut a.unknown, u.accesses()),
            }
            if let Some(o) = object {
                let agg = &mut a.objects[o as usize];
                add_rw(&mut agg.rw, u);
                add(&mut agg.samples, u.weight_sq);
                add(&mut agg.raw_samples, u.samples);
                add_rw(agg.users.entry(u.thread).or_default(), u);
                add_rw(agg.cells.entry((u.thread, node)).or_default(), u);
            }
        }
        if v.accesses > 0 {
            a.pages += 1;
            if let Some(p) = node {
                a.node_load.entry(p).or_default().1 += 1;
            }
        }
        if ctx.block_size <= ctx.page_size {
            if page.users.len() > 1 {
                let users: Vec<(u32, u64)> = page
                    .users
                    .iter()
                    .map(|u| (u.thread, u.accesses()))
                    .collect();
                communicate(&mut a.communication, &users);
            }
        } else {
            let entry = blocks.entry((key.0, address / ctx.block_size)).or_default();
            for u in &page.users {
                match entry.iter_mut().find(|(t, _)| *t == u.thread) {
                    Some((_, n)) => add(n, u.accesses()),
                    None => entry.push((u.thread, u.accesses())),
                }
            }
        }
        if let Some(o) = object {
            let agg = &mut a.objects[o as usize];
            agg.page_list.push(i as u32);
            let users: Vec<(u32, u64)> = page
                .users
                .iter()
                .map(|u| (u.thread, u.accesses()))
                .collect();
            communicate(&mut agg.pairs, &users);
            if users.iter().filter(|(_, n)| *n > 0).count() > 1 {
                add(&mut agg.communicating, v.accesses);
            }
            if v.dominant.is_none() && v.users.len() == 2 {
                agg.handovers.extend(handover(page, &v));
            }
            add_page(
                agg,
                &v,
                page_remote,
                active.get(&key.0).copied().unwrap_or(0),
                ctx,
            );
        }
        v.remote = page_remote;
        a.views.push((v, node));
    }
    for users in blocks.values() {
        communicate(&mut a.communication, users);
    }
    for agg in &mut a.objects {
        agg.samples = crate::stats::effective_samples(total(&agg.rw), agg.samples);
        for (&(x, y), &n) in &agg.pairs {
            if adjacent(ctx.pids, ctx.logical, x, y) {
                add(&mut agg.neighbour_comm, n);
                agg.neighbour_pairs += 1;
            } else {
                add(&mut agg.other_comm, n);
            }
        }
        agg.local = agg
            .cells
            .iter()
            .filter(|((t, n), _)| n.is_some() && ctx.placement.thread_node[*t as usize] == *n)
            .map(|(_, rw)| total(rw))
            .saturating_sum();
        let known: u64 = agg
            .cells
            .iter()
            .filter(|((_, n), _)| n.is_some())
            .map(|(_, rw)| total(rw))
            .saturating_sum();
        agg.remote = known - agg.local;
    }
    a
}

/// Adds one page's verdict to its object.
fn add_page(agg: &mut ObjAgg, v: &PageView, remote: u64, active: usize, ctx: &Context) {
    // The fault says who placed the page whether or not a sample hit it (docs/FINDINGS.md,
    // "First toucher").
    if let Some(t) = v.first_toucher {
        *agg.touchers.entry(t).or_default() += 1;
        agg.touched_pages += 1;
    }
    if v.accesses == 0 {
        return;
    }
    agg.pages += 1;
    let class = CLASSES.iter().position(|c| *c == v.class).unwrap_or(0);
    agg.classes[class].0 += 1;
    add(&mut agg.classes[class].1, v.accesses);
    if let (Some(d), Some(t)) = (v.dominant, v.first_toucher)
        && d != t
    {
        agg.mismatched.add(v.accesses, remote);
    }
    match v.class {
        Class::SharedReadOnly | Class::SharedReadWrite => {
            let wide = v.users.len() >= 2 && 2 * v.users.len() >= active;
            if wide {
                agg.wide_shared.add(v.accesses, remote);
            } else if v.users.len() == 2 && neighbours(ctx, v.users[0], v.users[1]) {
                agg.neighbour.add(v.accesses, remote);
            } else {
                agg.other_shared.add(v.accesses, remote);
            }
        }
        Class::FalseSharing if v.false_shared_writes > 0 => {
            add(&mut agg.false_shared_writes, v.false_shared_writes);
            agg.false_shared.add(v.accesses, remote);
        }
        Class::FalseSharing => {
            add(&mut agg.candidate_writes, v.candidate_writes);
            add(&mut agg.candidate_store_samples, v.candidate_store_samples);
            agg.candidate.add(v.accesses, remote);
        }
        Class::Migratory => agg.migratory.add(v.accesses, remote),
        Class::Private => {}
    }
}

fn handover(page: &PageAcc, v: &PageView) -> Option<Handover> {
    let first = |t: u32| {
        page.users
            .iter()
            .find(|u| u.thread == t)
            .map(|u| u.first_ns)
    };
    let (a, b) = (v.users[0], v.users[1]);
    let (na, nb) = (first(a)?, first(b)?);
    let ((earlier, earlier_ns), (later, later_ns)) = if (na, a) <= (nb, b) {
        ((a, na), (b, nb))
    } else {
        ((b, nb), (a, na))
    };
    Some(Handover {
        earlier,
        earlier_ns,
        later,
        later_ns,
        accesses: v.accesses,
    })
}

/// Two threads of one process with consecutive logical ids.
pub(crate) fn neighbours(ctx: &Context, a: u32, b: u32) -> bool {
    adjacent(ctx.pids, ctx.logical, a, b)
}

/// Two threads (dense ids) of one process with consecutive logical ids.
pub(crate) fn adjacent(pids: &[u32], logical: &[Option<u32>], a: u32, b: u32) -> bool {
    let (a, b) = (a as usize, b as usize);
    pids[a] == pids[b]
        && matches!((logical[a], logical[b]), (Some(x), Some(y)) if x.abs_diff(y) == 1)
}

/// Accesses on two-user pages whose users moved: every thread that came later to some of them
/// came there only after its first access to every page it came to first (phases, seen through
/// first-access times alone). Zero unless at least two threads moved.
pub(crate) fn handover_accesses(handovers: &[Handover]) -> u64 {
    let mut earlier_max: HashMap<u32, u64> = HashMap::new();
    let mut later_min: HashMap<u32, u64> = HashMap::new();
    for h in handovers {
        let e = earlier_max.entry(h.earlier).or_insert(h.earlier_ns);
        *e = (*e).max(h.earlier_ns);
        let l = later_min.entry(h.later).or_insert(h.later_ns);
        *l = (*l).min(h.later_ns);
    }
    let moved: Vec<u32> = later_min
        .iter()
        .filter(|(t, l)| earlier_max.get(t).is_some_and(|e| e < *l))
        .map(|(t, _)| *t)
        .collect();
    let consistent = later_min.keys().all(|t| moved.contains(t));
    if moved.len() < 2 || !consistent {
        return 0;
    }
    handovers.iter().map(|h| h.accesses).saturating_sum()
}

/// Threads with accesses, per process.
fn active_threads(pages: &[(PageKey, PageAcc)], pids: &[u32]) -> HashMap<u32, usize> {
    let mut seen = vec![false; pids.len()];
    for (_, page) in pages {
        for u in page.users.iter().filter(|u| u.accesses() > 0) {
            seen[u.thread as usize] = true;
        }
    }
    let mut active = HashMap::new();
    for (t, _) in seen.iter().enumerate().filter(|(_, s)| **s) {
        *active.entry(pids[t]).or_default() += 1;
    }
    active
}

/// kMAF/SPCD: each pair of threads on a block communicates by the smaller of their counts.
fn communicate(matrix: &mut HashMap<(u32, u32), u64>, users: &[(u32, u64)]) {
    for (i, &(a, na)) in users.iter().enumerate() {
        for &(b, nb) in &users[i + 1..] {
            let n = na.min(nb);
            if n > 0 {
                add(matrix.entry((a.min(b), a.max(b))).or_default(), n);
            }
        }
    }
}

fn false_sharing_by_page(sampled: &AccessTally) -> HashMap<PageKey, LineEvidence> {
    sampled
        .pages
        .iter()
        .filter_map(|(key, page)| {
            let e = line_evidence(page);
            // Pages with store samples only on their own lines still say how many there were.
            (e.shared_line_writes > 0 || e.store_samples > 0).then_some((*key, e))
        })
        .collect()
}

/// Object positions by address, per process, for pages that came without an object.
///
/// Objects may nest and crowd (a heap arena and the blocks inside it, thousands of small blocks
/// on one page), so no fixed number of neighbours is enough to look at. `find` reads the answer
/// from intervals worked out once; `overlapping` searches by size class, which bounds how far
/// below a range an overlapping object can start.
pub(crate) struct ObjectRanges {
    by_pid: HashMap<u32, PidRanges>,
}

/// One process's objects.
#[derive(Default)]
struct PidRanges {
    /// Non-overlapping, sorted `(start, end, object)`: the object `find` answers for every
    /// address in `[start, end)`.
    winners: Vec<(u64, u64, u32)>,
    /// By size class k (size in [2^k, 2^(k+1)), empty objects in class 0), `(start, end,
    /// object)` sorted.
    classes: Vec<Vec<(u64, u64, u32)>>,
}

/// An object's size class: sizes in [2^k, 2^(k+1)) are class k; 0 and 1 are class 0.
fn size_class(size: u64) -> usize {
    (63 - (size | 1).leading_zeros()) as usize
}

/// How far below an address an object of class `k` can start and still reach it: less than
/// 2^(k+1) bytes.
fn class_reach(k: usize) -> u64 {
    1u64.checked_shl(k as u32 + 1).unwrap_or(u64::MAX)
}

impl ObjectRanges {
    pub(crate) fn new(objects: &[Object]) -> Self {
        Self::from_ranges(
            objects
                .iter()
                .enumerate()
                .map(|(i, o)| (o.pid, o.start, o.size, i as u32)),
        )
    }

    /// From `(pid, start, size, object)`.
    fn from_ranges(ranges: impl IntoIterator<Item = (u32, u64, u64, u32)>) -> Self {
        let mut lists: HashMap<u32, Vec<(u64, u64, u32)>> = HashMap::new();
        for (pid, start, size, i) in ranges {
            lists
                .entry(pid)
                .or_default()
                .push((start, start.saturating_add(size), i));
        }
        let by_pid = lists
            .into_iter()
            .map(|(pid, mut list)| {
                list.sort_unstable();
                let mut classes: Vec<Vec<(u64, u64, u32)>> = Vec::new();
                for &(start, end, i) in &list {
                    let k = size_class(end - start);
                    if classes.len() <= k {
                        classes.resize_with(k + 1, Vec::new);
                    }
                    classes[k].push((start, end, i));
                }
                let winners = winners(&list);
                (pid, PidRanges { winners, classes })
            })
            .collect();
        ObjectRanges { by_pid }
    }

    /// The object containing `address` (the latest starting one when several do; of those, the
    /// one ending last, then the last listed).
    pub(crate) fn find(&self, pid: u32, address: u64) -> Option<u32> {
        let winners = &self.by_pid.get(&pid)?.winners;
        let after = winners.partition_point(|(start, _, _)| *start <= address);
        let &(_, end, i) = winners[..after].last()?;
        (address < end).then_some(i)
    }

    /// Objects overlapping `[lo, hi)`, latest starting first (in `find`'s order of preference).
    pub(crate) fn overlapping(&self, pid: u32, lo: u64, hi: u64) -> Vec<u32> {
        let Some(ranges) = self.by_pid.get(&pid) else {
            return Vec::new();
        };
        let mut found: Vec<(u64, u64, u32)> = Vec::new();
        for (k, class) in ranges.classes.iter().enumerate() {
            // An object of this class ending after `lo` starts less than its reach below `lo`.
            let from = lo.saturating_sub(class_reach(k));
            let first = class.partition_point(|(start, _, _)| *start < from);
            found.extend(
                class[first..]
                    .iter()
                    .take_while(|(start, _, _)| *start < hi)
                    .filter(|(_, end, _)| *end > lo),
            );
        }
        found.sort_unstable_by(|a, b| b.cmp(a));
        found.into_iter().map(|(_, _, i)| i).collect()
    }
}

/// For objects sorted by `(start, end, object)`, the sorted non-overlapping intervals over which
/// one object is the greatest `(start, end, object)` among those containing the address, with
/// that object. A sweep over the objects' boundaries with the containing objects in an ordered
/// set.
fn winners(sorted: &[(u64, u64, u32)]) -> Vec<(u64, u64, u32)> {
    let mut bounds: Vec<u64> = sorted.iter().flat_map(|&(s, e, _)| [s, e]).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut ends: Vec<(u64, u64, u64, u32)> =
        sorted.iter().map(|&(s, e, i)| (e, s, e, i)).collect();
    ends.sort_unstable();
    let (mut next_start, mut next_end) = (0, 0);
    let mut live = std::collections::BTreeSet::new();
    let mut out: Vec<(u64, u64, u32)> = Vec::new();
    for pair in bounds.windows(2) {
        let (at, to) = (pair[0], pair[1]);
        while next_end < ends.len() && ends[next_end].0 <= at {
            let (_, s, e, i) = ends[next_end];
            live.remove(&(s, e, i));
            next_end += 1;
        }
        while next_start < sorted.len() && sorted[next_start].0 <= at {
            let o = sorted[next_start];
            if o.1 > at {
                live.insert(o);
            }
            next_start += 1;
        }
        let Some(&(_, _, i)) = live.last() else {
            continue;
        };
        match out.last_mut() {
            Some(last) if last.1 == at && last.2 == i => last.1 = to,
            _ => out.push((at, to, i)),
        }
    }
    out
}

/// Whether the object's accessed pages have a hot band: stddev/mean of accesses per page.
///
/// From samples, part of that spread is the sampling's own: a page that λ samples fall on in
/// the mean gets λ ± √λ of them even when every page is accessed alike, a CV of 1/√λ (0.5 at
/// four samples a page, the hotspot threshold). That part of the variance, 1/λ in CV², is taken
/// out, so that what remains is the spread of the accesses themselves.
pub(crate) fn page_cv(agg: &ObjAgg, views: &[(PageView, Option<u32>)]) -> f64 {
    let counts: Vec<f64> = agg
        .page_list
        .iter()
        .map(|&i| views[i as usize].0.accesses as f64)
        .filter(|n| *n > 0.0)
        .collect();
    let raw = cv(&counts);
    if agg.samples == 0 || counts.is_empty() {
        return raw;
    }
    let per_page = agg.samples as f64 / counts.len() as f64;
    (raw * raw - 1.0 / per_page).max(0.0).sqrt()
}

/// Coefficient of variation; 0 for fewer than two values.
pub(crate) fn cv(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
    var.sqrt() / mean
}

pub(crate) const fn thresholds() -> crate::model::Thresholds {
    THRESHOLDS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator, so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    type Ranges = Vec<(u32, u64, u64, u32)>;

    fn brute_find(ranges: &Ranges, pid: u32, address: u64) -> Option<u32> {
        ranges
            .iter()
            .filter(|&&(p, s, n, _)| p == pid && s <= address && address < s.saturating_add(n))
            .map(|&(_, s, n, i)| (s, s.saturating_add(n), i))
            .max()
            .map(|(_, _, i)| i)
    }

    fn brute_overlapping(ranges: &Ranges, pid: u32, lo: u64, hi: u64) -> Vec<u32> {
        let mut found: Vec<(u64, u64, u32)> = ranges
            .iter()
            .map(|&(p, s, n, i)| (p, s, s.saturating_add(n), i))
            .filter(|&(p, s, e, _)| p == pid && e > lo && s < hi)
            .map(|(_, s, e, i)| (s, e, i))
            .collect();
        found.sort_unstable_by(|a, b| b.cmp(a));
        found.into_iter().map(|(_, _, i)| i).collect()
    }

    #[test]
    fn an_arena_behind_a_crowd_of_its_blocks_is_still_found() {
        // One arena, then 100 freed-and-listed 16-byte blocks inside it, all below the address:
        // more candidates start below the address than any fixed window looks at.
        let mut ranges: Ranges = vec![(1, 0x10000, 0x10000, 0)];
        for b in 0..100u32 {
            ranges.push((1, 0x10000 + 16 * u64::from(b), 16, b + 1));
        }
        let index = ObjectRanges::from_ranges(ranges.clone());
        for address in [0x10000, 0x10008, 0x10000 + 16 * 100, 0x1ffff] {
            assert_eq!(
                index.find(1, address),
                brute_find(&ranges, 1, address),
                "{address:#x}"
            );
        }
        assert_eq!(index.find(1, 0x1ffff), Some(0));
        assert_eq!(index.find(1, 0x20000), None);
        assert_eq!(index.find(2, 0x10000), None);
    }

    #[test]
    fn a_page_with_more_objects_than_a_window_overlaps_them_all() {
        // 300 8-byte objects on one 4 KiB page inside a 1 MiB mapping that starts below it.
        let mut ranges: Ranges = vec![(1, 0, 1 << 20, 0)];
        for b in 0..300u32 {
            ranges.push((1, 0x8000 + 8 * u64::from(b), 8, b + 1));
        }
        let index = ObjectRanges::from_ranges(ranges.clone());
        let all = index.overlapping(1, 0x8000, 0x9000);
        assert_eq!(all.len(), 301);
        assert_eq!(all, brute_overlapping(&ranges, 1, 0x8000, 0x9000));
        assert_eq!(
            all.last(),
            Some(&0),
            "the mapping, starting first, comes last"
        );
    }

    #[test]
    fn deeply_nested_objects_are_found() {
        // 200 objects each inside the last, the innermost too small to hold the addresses asked.
        let ranges: Ranges = (0..200u32)
            .map(|d| (7, 1000 + u64::from(d), 10_000 - 2 * u64::from(d), d))
            .collect();
        let index = ObjectRanges::from_ranges(ranges.clone());
        for address in [
            999, 1000, 1100, 1199, 1200, 5000, 10_799, 10_800, 10_999, 11_000,
        ] {
            assert_eq!(
                index.find(7, address),
                brute_find(&ranges, 7, address),
                "{address}"
            );
            let lo = address.saturating_sub(50);
            assert_eq!(
                index.overlapping(7, lo, address + 1),
                brute_overlapping(&ranges, 7, lo, address + 1),
                "{address}"
            );
        }
    }

    #[test]
    fn lookups_agree_with_a_search_of_every_object() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..40 {
            let count = 1 + rng.below(600);
            let span = 1 + rng.below(1 << (4 + round % 20));
            let ranges: Ranges = (0..count as u32)
                .map(|i| {
                    let size = match rng.below(10) {
                        0 => 0,
                        1 => rng.below(span * 4) + span,
                        2 if round % 7 == 0 => u64::MAX - rng.below(3),
                        _ => rng.below(64) + 1,
                    };
                    let start = if rng.below(50) == 0 {
                        u64::MAX - rng.below(100)
                    } else {
                        rng.below(span)
                    };
                    (rng.below(2) as u32, start, size, i)
                })
                .collect();
            let index = ObjectRanges::from_ranges(ranges.clone());
            for _ in 0..300 {
                let pid = rng.below(3) as u32;
                let address = if rng.below(20) == 0 {
                    u64::MAX - rng.below(200)
                } else {
                    rng.below(span + 128)
                };
                assert_eq!(
                    index.find(pid, address),
                    brute_find(&ranges, pid, address),
                    "round {round}, pid {pid}, {address}"
                );
                let hi = address.saturating_add(1 + rng.below(64));
                assert_eq!(
                    index.overlapping(pid, address, hi),
                    brute_overlapping(&ranges, pid, address, hi),
                    "round {round}, pid {pid}, [{address}, {hi})"
                );
            }
        }
    }
}
