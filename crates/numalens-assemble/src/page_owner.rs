//! Which object a page of exact counts belongs to: the one holding most of its bytes when a
//! thread first accessed it.

use std::collections::BTreeMap;

use numalens_format::ObjectKind;
use numalens_inst::files::PAGE_SHIFT;

use crate::attribute::{Locator, ObjectSpec};
use crate::attribute_index::Span;

/// Points of a page probed to find the objects holding it at its first access.
const PAGE_PROBES: u64 = 16;

/// Tracked objects starting in a span looked at before the span is given up for a search of
/// each of its pages.
const SPAN_STARTS: usize = 64;

/// Spans of addresses remembered at once (one per thread sweeping its own part of an array is
/// the common case).
const SPANS: usize = 32;

/// Page owners for queries in time order.
pub struct PageOwners<'a> {
    objects: &'a [ObjectSpec],
    locator: Locator<'a>,
    placed: BTreeMap<(u32, u64), Vec<usize>>,
    /// The epoch (`Locator::epoch`) the spans and owners below were found in.
    epoch: usize,
    /// Spans of a process in which every page has the span's winner for owner: one object (or
    /// none) wins every address and no other tracked object starts there.
    spans: Vec<(u32, Span)>,
    next_span: usize,
    /// A page's owner, by (pid, page), for pages outside such spans: the same for every thread
    /// whose first access came in the same epoch (the threads of a parallel loop share pages).
    owners: ahash::AHashMap<(u32, u64), (usize, Option<usize>)>,
    /// Pages answered from a span, so tests can tell they exercised it.
    #[cfg(test)]
    from_spans: u64,
    /// Objects looked at by the spans' checks, so tests can bound it.
    #[cfg(test)]
    span_starts_seen: std::cell::Cell<u64>,
}

impl<'a> PageOwners<'a> {
    pub fn new(objects: &'a [ObjectSpec]) -> Self {
        PageOwners {
            objects,
            locator: Locator::new(objects),
            placed: tracked_starts(objects),
            epoch: 0,
            spans: Vec::with_capacity(SPANS),
            next_span: 0,
            owners: ahash::AHashMap::new(),
            #[cfg(test)]
            from_spans: 0,
            #[cfg(test)]
            span_starts_seen: std::cell::Cell::new(0),
        }
    }

    /// Positions of the rows whose first accesses are `first_ns`, in the order to ask for their
    /// owners: by epoch (the objects live at a first access are those of its epoch, the same
    /// for each of its rows), rows of one epoch in their order. Sorting rows by time cost more
    /// than all the rest of their attribution.
    pub fn epoch_order(&self, first_ns: impl Iterator<Item = u64>) -> Vec<usize> {
        let mut epochs = Vec::with_capacity(first_ns.size_hint().0);
        let (mut from, mut to, mut epoch) = (u64::MAX, 0, 0);
        for t in first_ns {
            // Rows of a thread come mostly in time order: most stay in the epoch of the one before.
            if !(from <= t && t < to) {
                epoch = self.locator.epoch_at(t);
                (from, to) = self.locator.epoch_times(epoch);
            }
            epochs.push(epoch);
        }
        // Epochs 0 to `epochs()`, each bucket starting where the one before ends.
        let mut starts = vec![0usize; self.locator.epochs() + 2];
        for &e in &epochs {
            starts[e + 1] += 1;
        }
        for e in 1..starts.len() {
            starts[e] += starts[e - 1];
        }
        let mut order = vec![0; epochs.len()];
        for (row, e) in epochs.into_iter().enumerate() {
            order[starts[e]] = row;
            starts[e] += 1;
        }
        order
    }

    /// The owner of `page` of process `pid` at `first_ns`, whose epoch must not go backwards from
    /// one call to the next.
    pub fn owner(&mut self, pid: u32, page: u64, first_ns: u64) -> Option<usize> {
        self.locator.advance_to(first_ns);
        if self.locator.epoch() != self.epoch {
            self.epoch = self.locator.epoch();
            self.spans.clear();
        }
        let end = page + (1 << PAGE_SHIFT);
        let inside = |(p, s): &&(u32, Span)| *p == pid && s.from <= page && end <= s.to;
        if let Some((_, span)) = self.spans.iter().find(inside) {
            #[cfg(test)]
            {
                self.from_spans += 1;
            }
            return span.winner;
        }
        if let Some(&(at, owner)) = self.owners.get(&(pid, page))
            && at == self.epoch
        {
            return owner;
        }
        if let Some(span) = self.locator.span(pid, page)
            && span.from <= page
            && end <= span.to
            && self.only_winner_starts(pid, &span, first_ns)
        {
            self.remember(pid, span);
            return span.winner;
        }
        let owner = page_owner(
            &mut self.locator,
            &self.placed,
            self.objects,
            (pid, page),
            first_ns,
        );
        self.owners.insert((pid, page), (self.epoch, owner));
        owner
    }

    /// Whether no tracked object of `pid` but the span's winner starts in the span and is not
    /// freed by `first_ns`. Only the first [`SPAN_STARTS`] objects starting there are looked at
    /// (beyond them: no, and each page is searched): a buffer freed and allocated again at one
    /// address thousands of times, inside a span whose pages come one epoch each, made this
    /// check cost the square of their number.
    fn only_winner_starts(&self, pid: u32, span: &Span, first_ns: u64) -> bool {
        let not_freed = |id: usize| self.objects[id].free_ns.is_none_or(|f| f > first_ns);
        let mut starting = self
            .placed
            .range((pid, span.from)..(pid, span.to))
            .flat_map(|(_, ids)| ids.iter().copied());
        for _ in 0..SPAN_STARTS {
            #[cfg(test)]
            self.span_starts_seen.set(self.span_starts_seen.get() + 1);
            match starting.next() {
                None => return true,
                Some(id) if Some(id) != span.winner && not_freed(id) => return false,
                Some(_) => {}
            }
        }
        starting.next().is_none()
    }

    fn remember(&mut self, pid: u32, span: Span) {
        if self.spans.len() < SPANS {
            self.spans.push((pid, span));
        } else {
            self.spans[self.next_span] = (pid, span);
            self.next_span = (self.next_span + 1) % SPANS;
        }
    }
}

/// Tracked objects by (pid, start).
fn tracked_starts(objects: &[ObjectSpec]) -> BTreeMap<(u32, u64), Vec<usize>> {
    let mut starts: BTreeMap<(u32, u64), Vec<usize>> = BTreeMap::new();
    for (id, o) in objects.iter().enumerate().filter(|(_, o)| o.tracked) {
        starts.entry((o.pid, o.start)).or_default().push(id);
    }
    starts
}

/// The object holding most of the page's bytes. Candidates are the objects found at evenly
/// spread probe points at the page's first access, and the tracked objects starting in the page
/// that were not freed before it: a page filled by small allocations over time gets its first
/// access before most of them exist. When the bytes no tracked object covers outnumber the
/// tracked ones, a heap page goes to the heap outside tracked objects: the allocations below
/// `--min-object` live there, and a 4 KiB buffer that only grazes a page of a program's hot small
/// tables must not take their counts. Otherwise the tracked object (allocation, static, stack,
/// TLS) holding most of it wins. Any other mapping loses to a tracked
/// object: what lies beyond a large allocation in its mapping is slack or unrelated, and the
/// allocation's last bytes are what such a page's accesses reach. Ties go to a tracked object,
/// then to the earliest allocated.
fn page_owner(
    locator: &mut Locator<'_>,
    placed: &BTreeMap<(u32, u64), Vec<usize>>,
    objects: &[ObjectSpec],
    (pid, page): (u32, u64),
    first_ns: u64,
) -> Option<usize> {
    let size = 1u64 << PAGE_SHIFT;
    let end = page + size;
    let step = size / PAGE_PROBES;
    // The first and last bytes too: an object may only graze the page.
    let probes = (0..PAGE_PROBES)
        .map(|i| page + i * step + step / 2)
        .chain([page, end - 1]);
    let mut candidates: Vec<usize> = probes.filter_map(|a| locator.find(pid, a)).collect();
    let live = |id: &usize| objects[*id].free_ns.is_none_or(|f| f > first_ns);
    candidates.extend(
        placed
            .range((pid, page)..(pid, end))
            .flat_map(|(_, ids)| ids.iter().copied())
            .filter(live),
    );
    candidates.sort_unstable();
    candidates.dedup();
    // The part of the page an object covers.
    let extent = |o: &ObjectSpec| (page.max(o.start), end.min(o.start.saturating_add(o.size)));
    let overlap = |o: &ObjectSpec| {
        let (from, to) = extent(o);
        to.saturating_sub(from)
    };
    let tracked = candidates
        .iter()
        .map(|id| &objects[*id])
        .filter(|o| o.tracked);
    let tracked_bytes = union_length(tracked.map(extent).collect());
    let untracked_bytes = size.saturating_sub(tracked_bytes);
    // Tracked data as a whole against the heap's untracked rest: a page of many small tracked
    // records is theirs even though each holds less of it than the gaps between them.
    let heap_holds_most = untracked_bytes > tracked_bytes;
    let rank = |o: &ObjectSpec| match (o.tracked, o.kind) {
        (true, _) => (!heap_holds_most, overlap(o)),
        (false, ObjectKind::Heap) => (heap_holds_most, untracked_bytes.min(overlap(o))),
        (false, _) => (false, 0),
    };
    candidates.into_iter().max_by_key(|id| {
        let o = &objects[*id];
        (
            rank(o),
            o.tracked,
            std::cmp::Reverse(o.alloc_ns),
            std::cmp::Reverse(*id),
        )
    })
}

/// The bytes the ranges `[from, to)` cover together: an address freed and allocated again
/// counts once.
fn union_length(mut ranges: Vec<(u64, u64)>) -> u64 {
    ranges.sort_unstable();
    let (mut length, mut covered_to) = (0, 0);
    for (from, to) in ranges {
        length += to.saturating_sub(from.max(covered_to));
        covered_to = covered_to.max(to);
    }
    length
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: ObjectKind, start: u64, size: u64, tracked: bool) -> ObjectSpec {
        ObjectSpec {
            pid: 1,
            kind,
            name: format!("{start:#x}"),
            start,
            size,
            alloc_ns: 10,
            free_ns: None,
            alloc_tid: Some(1),
            site_key: None,
            tracked,
        }
    }

    fn owner(objects: &[ObjectSpec], page: u64) -> Option<usize> {
        let mut locator = Locator::new(objects);
        locator.advance_to(1_000);
        page_owner(
            &mut locator,
            &tracked_starts(objects),
            objects,
            (1, page),
            1_000,
        )
    }

    #[test]
    fn the_small_allocations_region_keeps_the_pages_a_tracked_buffer_only_grazes() {
        // The heap (its small allocations untracked) with a 4 KiB buffer at +0x3c0: the buffer
        // holds 3,136 bytes of the first page and 960 of the second.
        let objects = [
            object(ObjectKind::Heap, 0x10000, 0x21000, false),
            object(ObjectKind::Heap, 0x103c0, 0x1000, true),
        ];
        assert_eq!(owner(&objects, 0x10000), Some(1));
        assert_eq!(owner(&objects, 0x11000), Some(0));
        assert_eq!(owner(&objects, 0x12000), Some(0));
    }

    #[test]
    fn a_page_of_small_tracked_records_is_theirs_not_the_gaps_between_them() {
        // Twelve 256-byte records, 320 bytes apart: 3,072 bytes tracked, 1,024 in the gaps.
        let mut objects = vec![object(ObjectKind::Heap, 0x10000, 0x21000, false)];
        objects.extend((0..12).map(|i| object(ObjectKind::Heap, 0x11000 + 320 * i, 256, true)));
        assert!(owner(&objects, 0x11000).is_some_and(|o| objects[o].tracked));
    }

    #[test]
    fn an_address_allocated_again_counts_its_bytes_once() {
        // A 1 KiB buffer freed and allocated again at one address five times, in a heap page
        // whose other 3 KiB are small untracked allocations.
        let mut objects = vec![object(ObjectKind::Heap, 0x10000, 0x21000, false)];
        for i in 0..5 {
            let mut o = object(ObjectKind::Heap, 0x11000, 0x400, true);
            (o.alloc_ns, o.free_ns) = (2_000 + 10 * i, Some(2_005 + 10 * i));
            objects.push(o);
        }
        assert_eq!(owner(&objects, 0x11000), Some(0));
    }

    #[test]
    fn a_large_allocations_last_bytes_keep_their_page_in_a_wider_mapping() {
        // 16 bytes of header, 0x4000 bytes of data ending 16 bytes into a page, and other
        // mappings merged after it into one.
        let objects = [
            object(ObjectKind::Mmap, 0x100000, 0x9000, false),
            object(ObjectKind::Heap, 0x100010, 0x4000, true),
        ];
        assert_eq!(owner(&objects, 0x100000), Some(1));
        assert_eq!(owner(&objects, 0x104000), Some(1));
        assert_eq!(owner(&objects, 0x105000), Some(0));
    }

    #[test]
    fn page_owners_answer_as_the_search_of_each_page_does() {
        use crate::attribute_index::tests::Rng;
        const BASE: u64 = 0x40_0000;
        const PAGES: u64 = 48;
        let kinds = [ObjectKind::Heap, ObjectKind::Mmap, ObjectKind::Static];
        let mut from_spans = 0;
        for seed in 1..=200u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut objects: Vec<ObjectSpec> = Vec::new();
            for _ in 0..1 + rng.below(24) {
                let aligned = rng.chance(50);
                let start = BASE + rng.below(PAGES * 4096);
                let start = if aligned { start & !0xfff } else { start };
                let size = match rng.below(20) {
                    0 => 0,
                    1..=9 => (1 + rng.below(20)) * 4096,
                    _ => 16 + rng.below(6000),
                };
                let mut o = object(kinds[rng.below(3) as usize], start, size, rng.chance(70));
                o.pid = 1 + rng.below(3) as u32;
                // A buffer freed and allocated again at one address.
                if let Some(before) = objects.last().filter(|_| rng.chance(20)) {
                    (o.pid, o.start, o.size) = (before.pid, before.start, before.size);
                }
                o.alloc_ns = if rng.chance(40) { 0 } else { rng.below(1_000) };
                o.free_ns = match rng.below(10) {
                    0 => Some(o.alloc_ns),
                    1..=3 => Some(o.alloc_ns + 1 + rng.below(1_000)),
                    _ => None,
                };
                objects.push(o);
            }
            let mut rows = Vec::new();
            for pid in 1..=2u32 {
                for tid in 1..=3u32 {
                    for p in 0..PAGES + 4 {
                        if rng.chance(60) {
                            let first_ns = rng.below(2_100);
                            rows.push(((pid, tid, BASE + p * 4096), first_ns));
                        }
                    }
                }
            }
            let placed = tracked_starts(&objects);
            let mut owners = PageOwners::new(&objects);
            let mut times = Vec::new();
            let order = owners.epoch_order(rows.iter().map(|(_, t)| *t));
            let mut each_once = order.clone();
            each_once.sort_unstable();
            assert!(each_once.iter().copied().eq(0..rows.len()), "seed {seed}");
            for row in order {
                let ((pid, _, page), first_ns) = rows[row];
                assert!(
                    times
                        .last()
                        .is_none_or(|&(e, _)| e <= owners.locator.epoch_at(first_ns))
                );
                times.push((owners.locator.epoch_at(first_ns), row));
                let mut locator = Locator::new(&objects);
                locator.advance_to(first_ns);
                let searched = page_owner(&mut locator, &placed, &objects, (pid, page), first_ns);
                assert_eq!(
                    owners.owner(pid, page, first_ns),
                    searched,
                    "seed {seed}: page {page:#x} of {pid} at {first_ns} ns"
                );
            }
            from_spans += owners.from_spans;
        }
        assert!(from_spans > 1_000, "spans answered {from_spans} pages");
    }

    #[test]
    fn a_buffer_allocated_again_and_again_is_not_looked_at_again_for_every_page() {
        // A large untracked region (an arena), a tracked buffer freed and allocated again at
        // one address K times, and a page of the region first accessed after each free.
        const K: u64 = 2_000;
        let arena = 0x1000_0000;
        let mut objects = vec![object(ObjectKind::Heap, arena, 1 << 30, false)];
        for i in 0..K {
            let mut o = object(ObjectKind::Heap, arena + 0x10_0000, 0x1_0000, true);
            (o.alloc_ns, o.free_ns) = (100 + 3 * i, Some(101 + 3 * i));
            objects.push(o);
        }
        let placed = tracked_starts(&objects);
        let mut owners = PageOwners::new(&objects);
        let rows: Vec<(u64, u64)> = (0..K)
            .map(|i| (arena + 0x200_0000 + i * 4096, 102 + 3 * i))
            .collect();
        for row in owners.epoch_order(rows.iter().map(|r| r.1)) {
            let (page, first_ns) = rows[row];
            let mut locator = Locator::new(&objects);
            locator.advance_to(first_ns);
            let searched = page_owner(&mut locator, &placed, &objects, (1, page), first_ns);
            assert_eq!(owners.owner(1, page, first_ns), searched);
        }
        // Without a bound each page's check looks at every earlier buffer: K²/2 in all.
        let seen = owners.span_starts_seen.get();
        assert!(seen <= 100 * K, "{seen} objects looked at");
    }
}
