//! From the merged per-page counters to per-object aggregates, placement totals and the
//! communication matrix. Pure arithmetic over what the passes counted.

use std::collections::HashMap;

use numalens_format::Object;

use crate::access::SaturatingSum;
use crate::access::{AccessTally, NO_OBJECT, PageAcc, PageKey};
use crate::classify::{CLASSES, Class, PageView, THRESHOLDS, false_shared_writes, view};
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
    pub pages: u64,
    /// (pages, accesses) per class, in [`CLASSES`] order.
    pub classes: [(u64, u64); 5],
    pub users: HashMap<u32, Rw>,
    /// (thread, page node) → accesses.
    pub cells: HashMap<(u32, Option<u32>), Rw>,
    /// First toucher → pages.
    pub touchers: HashMap<u32, u64>,
    pub mismatched: Part,
    pub wide_shared: Part,
    pub neighbour: Part,
    /// Concurrently shared pages whose users are not just two logical neighbours, and not wide.
    pub other_shared: Part,
    pub false_shared_writes: u64,
    pub false_shared: Part,
    pub migratory: Part,
    /// Thread pairs (a < b) → communication on its pages (the smaller of their two counts).
    pub pairs: HashMap<(u32, u32), u64>,
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
            fs.get(key).copied().unwrap_or(0),
            ctx.page_size,
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
    if v.accesses == 0 {
        return;
    }
    agg.pages += 1;
    let class = CLASSES.iter().position(|c| *c == v.class).unwrap_or(0);
    agg.classes[class].0 += 1;
    add(&mut agg.classes[class].1, v.accesses);
    if let Some(t) = v.first_toucher {
        *agg.touchers.entry(t).or_default() += 1;
    }
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
        Class::FalseSharing => {
            add(&mut agg.false_shared_writes, v.false_shared_writes);
            agg.false_shared.add(v.accesses, remote);
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

fn false_sharing_by_page(sampled: &AccessTally) -> HashMap<PageKey, u64> {
    sampled
        .pages
        .iter()
        .filter_map(|(key, page)| {
            let w = false_shared_writes(page);
            (w > 0).then_some((*key, w))
        })
        .collect()
}

/// Object positions by address, per process, for pages that came without an object.
pub(crate) struct ObjectRanges {
    by_pid: HashMap<u32, Vec<(u64, u64, u32)>>,
}

impl ObjectRanges {
    pub(crate) fn new(objects: &[Object]) -> Self {
        let mut by_pid: HashMap<u32, Vec<(u64, u64, u32)>> = HashMap::new();
        for (i, o) in objects.iter().enumerate() {
            let end = o.start.saturating_add(o.size);
            by_pid
                .entry(o.pid)
                .or_default()
                .push((o.start, end, i as u32));
        }
        for list in by_pid.values_mut() {
            list.sort_unstable();
        }
        ObjectRanges { by_pid }
    }

    /// The object containing `address` (the latest starting one when several do).
    pub(crate) fn find(&self, pid: u32, address: u64) -> Option<u32> {
        let list = self.by_pid.get(&pid)?;
        let after = list.partition_point(|(start, _, _)| *start <= address);
        list[..after]
            .iter()
            .rev()
            .take(64)
            .find(|(_, end, _)| *end > address)
            .map(|(_, _, i)| *i)
    }

    /// Objects overlapping `[lo, hi)`.
    pub(crate) fn overlapping(&self, pid: u32, lo: u64, hi: u64) -> Vec<u32> {
        let Some(list) = self.by_pid.get(&pid) else {
            return Vec::new();
        };
        let after = list.partition_point(|(start, _, _)| *start < hi);
        list[..after]
            .iter()
            .rev()
            .take(256)
            .filter(|(start, end, _)| *end > lo && *start < hi)
            .map(|(_, _, i)| *i)
            .collect()
    }
}

/// Whether the object's accessed pages have a hot band: stddev/mean of accesses per page.
pub(crate) fn page_cv(agg: &ObjAgg, views: &[(PageView, Option<u32>)]) -> f64 {
    let counts: Vec<f64> = agg
        .page_list
        .iter()
        .map(|&i| views[i as usize].0.accesses as f64)
        .filter(|n| *n > 0.0)
        .collect();
    cv(&counts)
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
