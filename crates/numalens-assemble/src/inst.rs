//! The `inst` backend's files in a profile: exact counts become `page_stats` rows, sampled
//! accesses become `load`/`store` samples, each attributed to the object that held its address.

use numalens_format::{DataSource, PageStat, ProfileWriter, Sample, SampleKind};
use numalens_inst::files::{InstData, InstSample, PageCount};
use numalens_inst::page_counts::{self, PageKey, ThreadPages};

use crate::attribute::{Locator, ObjectSpec};
use crate::page_owner::PageOwners;

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
    let mut owners = PageOwners::new(objects);
    let order = owners.epoch_order(page_counts::rows(&data.pages).map(|(_, c)| c.first_ns));
    let mut rows = RowsAt::new(&data.pages);
    for row in order {
        let ((pid, tid, page), c) = rows.at(row);
        let owner = owners.owner(pid, page, c.first_ns);
        counts.page_rows += 1;
        counts.accesses = counts
            .accesses
            .saturating_add(c.reads.saturating_add(c.writes));
        writer.push_page_stat(PageStat {
            pid,
            tid,
            page,
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

/// The rows of every thread's list by position in all of them one after the other, for
/// positions that mostly ascend.
struct RowsAt<'a> {
    threads: &'a [ThreadPages],
    /// Where each thread's rows start, and one past the last row.
    starts: Vec<usize>,
    /// The thread of the last row asked for.
    thread: usize,
}

impl<'a> RowsAt<'a> {
    fn new(threads: &'a [ThreadPages]) -> Self {
        let mut starts = Vec::with_capacity(threads.len() + 1);
        let mut at = 0;
        starts.push(at);
        for t in threads {
            at += t.pages.len();
            starts.push(at);
        }
        RowsAt {
            threads,
            starts,
            thread: 0,
        }
    }

    fn at(&mut self, row: usize) -> (PageKey, &'a PageCount) {
        if !(self.starts[self.thread] <= row && row < self.starts[self.thread + 1]) {
            self.thread = self.starts.partition_point(|&s| s <= row) - 1;
        }
        let t = &self.threads[self.thread];
        let (page, c) = &t.pages[row - self.starts[self.thread]];
        ((t.pid, t.tid, *page), c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_inst::files::PageCount;

    #[test]
    fn rows_are_found_by_their_position_in_all_threads_lists() {
        let count = |first_ns| PageCount {
            reads: 1,
            writes: 0,
            first_ns,
        };
        let thread = |tid, pages: &[u64]| ThreadPages {
            pid: 9,
            tid,
            pages: pages.iter().map(|&p| (p, count(p + 1))).collect(),
        };
        let threads = [
            thread(1, &[0x1000, 0x2000]),
            thread(2, &[]),
            thread(3, &[0x5000]),
            thread(4, &[0x7000, 0x8000, 0x9000]),
        ];
        let all: Vec<(PageKey, PageCount)> =
            page_counts::rows(&threads).map(|(k, c)| (k, *c)).collect();
        let mut rows = RowsAt::new(&threads);
        // In order, backwards, and jumping about.
        for at in (0..all.len())
            .chain((0..all.len()).rev())
            .chain([4, 0, 5, 2, 1, 3])
        {
            let (key, c) = rows.at(at);
            assert_eq!((key, *c), all[at], "row {at}");
        }
    }
}
