//! The `inst` backend's files in a profile: exact counts become `page_stats` rows, sampled
//! accesses become `load`/`store` samples, each attributed to the object that held its address.

use std::collections::BTreeMap;

use numalens_format::{DataSource, ObjectKind, PageStat, ProfileWriter, Sample, SampleKind};
use numalens_inst::files::{InstData, InstSample, PAGE_SHIFT, PageCount};

use crate::attribute::{Locator, ObjectSpec};

/// Points of a page probed to find the objects holding it at its first access.
const PAGE_PROBES: u64 = 16;

/// What the instrumentation contributed, for the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct InstCounts {
    pub page_rows: u64,
    pub samples: u64,
    pub accesses: u64,
}

/// The code address of an access sample.
pub fn sample_ip(s: &InstSample) -> u64 {
    code_address(s.ip)
}

/// The code address of a sample whose hook returned to `return_ip`.
pub fn code_address(return_ip: u64) -> u64 {
    // The hook returns to the instruction after its call; one byte back is inside the call that
    // precedes the access, so the line found is the access's.
    return_ip.saturating_sub(1)
}

/// Writes `data` into the profile.
pub fn write_inst(
    writer: &mut ProfileWriter,
    data: &InstData,
    objects: &[ObjectSpec],
    origin: u64,
) -> numalens_format::Result<InstCounts> {
    let mut counts = InstCounts::default();
    // Copied out of the map before sorting: read in time order through references, the map's
    // entries were a cache miss each. Keys are distinct: an unstable sort gives the same order.
    let mut pages: Vec<((u32, u32, u64), PageCount)> =
        data.pages.iter().map(|(k, c)| (*k, *c)).collect();
    pages.sort_unstable_by_key(|((pid, tid, page), c)| (c.first_ns, *pid, *tid, *page));
    let mut locator = Locator::new(objects);
    let placed = tracked_starts(objects);
    // A page's owner for each thread that touched it: the same while no allocation or free came
    // between their first accesses (the threads of a parallel loop share most pages).
    let mut owners: ahash::AHashMap<(u32, u64), (usize, Option<usize>)> = ahash::AHashMap::new();
    for ((pid, tid, page), c) in &pages {
        locator.advance_to(c.first_ns);
        let epoch = locator.epoch();
        let owner = match owners.get(&(*pid, *page)) {
            Some(&(at, owner)) if at == epoch => owner,
            _ => {
                let owner = page_owner(&mut locator, &placed, objects, (*pid, *page), c.first_ns);
                owners.insert((*pid, *page), (epoch, owner));
                owner
            }
        };
        counts.page_rows += 1;
        counts.accesses = counts
            .accesses
            .saturating_add(c.reads.saturating_add(c.writes));
        writer.push_page_stat(PageStat {
            pid: *pid,
            tid: *tid,
            page: *page,
            reads: c.reads,
            writes: c.writes,
            first_access_ns: c.first_ns.saturating_sub(origin),
            object_id: owner.map(|o| o as u64),
        })?;
    }
    let mut locator = Locator::new(objects);
    for s in &data.samples {
        locator.advance_to(s.time_ns);
        let ip = sample_ip(s);
        counts.samples += 1;
        writer.push_sample(Sample {
            time_ns: s.time_ns.saturating_sub(origin),
            pid: s.pid,
            tid: s.tid,
            cpu: None,
            address: s.address,
            kind: if s.is_write {
                SampleKind::Store
            } else {
                SampleKind::Load
            },
            weight: s.weight,
            object_id: locator.find(s.pid, s.address).map(|o| o as u64),
            node: None,
            data_source: DataSource::Unknown,
            latency: None,
            ip: Some(ip),
            page_size: None,
            snoop: None,
        })?;
    }
    Ok(counts)
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
}
