//! The `inst` backend's files in a profile: exact counts become `page_stats` rows, sampled
//! accesses become `load`/`store` samples, each attributed to the object that held its address.

use std::collections::BTreeMap;

use numalens_format::{DataSource, PageStat, ProfileWriter, Sample, SampleKind};
use numalens_inst::files::{InstData, InstSample, PAGE_SHIFT};

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
    let mut pages: Vec<_> = data.pages.iter().collect();
    pages.sort_by_key(|((pid, tid, page), c)| (c.first_ns, *pid, *tid, *page));
    let mut locator = Locator::new(objects);
    let placed = tracked_starts(objects);
    for ((pid, tid, page), c) in pages {
        locator.advance_to(c.first_ns);
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
            object_id: page_owner(&mut locator, &placed, objects, (*pid, *page), c.first_ns)
                .map(|o| o as u64),
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
/// access before most of them exist. A tracked object (allocation, static, stack, TLS) beats a
/// fallback mapping; ties go to the earliest allocated.
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
    candidates.extend(
        placed
            .range((pid, page)..(pid, end))
            .flat_map(|(_, ids)| ids)
            .filter(|id| objects[**id].free_ns.is_none_or(|f| f > first_ns)),
    );
    let overlap = |o: &ObjectSpec| {
        end.min(o.start.saturating_add(o.size))
            .saturating_sub(page.max(o.start))
    };
    candidates.into_iter().max_by_key(|id| {
        let o = &objects[*id];
        (
            o.tracked,
            overlap(o),
            std::cmp::Reverse(o.alloc_ns),
            std::cmp::Reverse(*id),
        )
    })
}
