//! The `inst` backend's files in a profile: exact counts become `page_stats` rows, sampled
//! accesses become `load`/`store` samples, each attributed to the object that held its address.

use std::collections::BTreeSet;

use numalens_format::{DataSource, PageStat, ProfileWriter, Sample, SampleKind};

use crate::attribute::{Locator, ObjectSpec};
use crate::inst::files::{InstData, PAGE_SHIFT};

/// Points of a page probed to find the object holding most of its bytes.
const PAGE_PROBES: u64 = 16;

/// What the instrumentation contributed, for the summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct InstCounts {
    pub page_rows: u64,
    pub samples: u64,
    pub accesses: u64,
}

/// Writes `data` into the profile; `ips` collects the sample IPs to symbolise.
pub fn write_inst(
    writer: &mut ProfileWriter,
    data: &InstData,
    objects: &[ObjectSpec],
    origin: u64,
    ips: &mut BTreeSet<(u32, u64)>,
) -> numalens_format::Result<InstCounts> {
    let mut counts = InstCounts::default();
    let mut pages: Vec<_> = data.pages.iter().collect();
    pages.sort_by_key(|((pid, tid, page), c)| (c.first_ns, *pid, *tid, *page));
    let mut locator = Locator::new(objects);
    for ((pid, tid, page), c) in pages {
        locator.advance_to(c.first_ns);
        counts.page_rows += 1;
        counts.accesses += c.reads + c.writes;
        writer.push_page_stat(PageStat {
            pid: *pid,
            tid: *tid,
            page: *page,
            reads: c.reads,
            writes: c.writes,
            first_access_ns: c.first_ns.saturating_sub(origin),
            object_id: page_owner(&mut locator, objects, *pid, *page).map(|o| o as u64),
        })?;
    }
    let mut locator = Locator::new(objects);
    for s in &data.samples {
        locator.advance_to(s.time_ns);
        // The hook returns to the instruction after its call; one byte back is inside the call
        // that precedes the access, so the line found is the access's.
        let ip = s.ip.saturating_sub(1);
        ips.insert((s.pid, ip));
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
        })?;
    }
    Ok(counts)
}

/// The object holding most of the page's bytes, judged at evenly spread probe points (the
/// counts are per page, so a page shared by two objects goes to the larger share).
fn page_owner(
    locator: &mut Locator<'_>,
    objects: &[ObjectSpec],
    pid: u32,
    page: u64,
) -> Option<usize> {
    let size = 1u64 << PAGE_SHIFT;
    let step = size / PAGE_PROBES;
    let mut votes: Vec<(usize, u32)> = Vec::new();
    for i in 0..PAGE_PROBES {
        if let Some(o) = locator.find(pid, page + i * step + step / 2) {
            match votes.iter_mut().find(|(id, _)| *id == o) {
                Some((_, n)) => *n += 1,
                None => votes.push((o, 1)),
            }
        }
    }
    // Ties go to the smaller (more specific) object.
    votes
        .into_iter()
        .max_by_key(|(id, n)| (*n, std::cmp::Reverse(objects[*id].size)))
        .map(|(id, _)| id)
}
