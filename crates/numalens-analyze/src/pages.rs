//! Where pages were at the end of the run, from the `page_nodes` table: each row answers for a
//! run of pages at one moment, and the latest answer for a page is the one that counts.

use std::collections::{BTreeMap, HashMap};

use numalens_format::{FormatError, PageNodes, Profile};

use crate::model::{NodeCount, PagePlacement};

const STATUS_UNTOUCHED: &str = "untouched";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PageState {
    Node(u32),
    Untouched,
    /// The query failed for these pages (`status` holds the error).
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct PageRun {
    /// One past the last byte.
    end: u64,
    page_size: u64,
    state: PageState,
}

/// Address → page run, per process; runs never overlap.
#[derive(Debug, Default)]
pub(crate) struct PageMap {
    by_pid: HashMap<u32, BTreeMap<u64, PageRun>>,
    /// Rows read from the table.
    pub rows: u64,
}

/// Pages and bytes on one node.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodePages {
    pub pages: u64,
    pub bytes: u64,
}

/// Page totals over every queried page.
#[derive(Debug, Default)]
pub(crate) struct PageTotals {
    pub by_node: BTreeMap<u32, NodePages>,
    pub untouched: u64,
    pub unknown: u64,
}

impl PageMap {
    pub(crate) fn read(profile: &Profile) -> Result<Self, FormatError> {
        let mut rows = profile.read_all::<PageNodes>()?;
        rows.sort_by_key(|r| r.time_ns);
        let mut map = PageMap {
            rows: rows.len() as u64,
            ..PageMap::default()
        };
        for row in rows.iter().filter(|r| r.pages > 0 && r.page_size > 0) {
            let state = match (row.node, row.status.as_str()) {
                (Some(node), _) => PageState::Node(node),
                (None, STATUS_UNTOUCHED) => PageState::Untouched,
                (None, _) => PageState::Unknown,
            };
            let run = PageRun {
                end: row
                    .start
                    .saturating_add(row.pages.saturating_mul(row.page_size)),
                page_size: row.page_size,
                state,
            };
            map.insert(row.pid, row.start, run);
        }
        Ok(map)
    }

    /// Puts `run` at `start`, cutting away what older answers said about the same pages.
    fn insert(&mut self, pid: u32, start: u64, run: PageRun) {
        let runs = self.by_pid.entry(pid).or_default();
        if let Some((_, older)) = runs.range_mut(..start).next_back()
            && older.end > start
        {
            let cut = *older;
            older.end = start;
            if cut.end > run.end {
                runs.insert(run.end, cut);
            }
        }
        let inside: Vec<u64> = runs.range(start..run.end).map(|(&s, _)| s).collect();
        for s in inside {
            let older = runs.remove(&s).expect("listed just above");
            if older.end > run.end {
                runs.insert(run.end, older);
            }
        }
        runs.insert(start, run);
    }

    /// Where the pages of `[start, start + size)` of process `pid` were.
    pub(crate) fn placement(
        &self,
        pid: u32,
        start: u64,
        size: u64,
        base_page: u64,
    ) -> PagePlacement {
        let end = start.saturating_add(size);
        let mut placement = PagePlacement::default();
        let mut by_node: BTreeMap<u32, u64> = BTreeMap::new();
        let mut covered_base_pages = 0;
        for (run_start, run) in self.overlapping(pid, start, end) {
            let (lo, hi) = (run_start.max(start), run.end.min(end));
            let pages = pages_spanned(lo - run_start, hi - run_start, run.page_size);
            covered_base_pages += pages_spanned(lo, hi, base_page);
            match run.state {
                PageState::Node(node) => *by_node.entry(node).or_default() += pages,
                PageState::Untouched => placement.untouched += pages,
                PageState::Unknown => placement.unknown += pages,
            }
        }
        let object_pages = pages_spanned(start, end, base_page);
        placement.not_queried = object_pages.saturating_sub(covered_base_pages);
        placement.by_node = by_node
            .into_iter()
            .map(|(node, count)| NodeCount { node, count })
            .collect();
        placement
    }

    fn overlapping(&self, pid: u32, start: u64, end: u64) -> impl Iterator<Item = (u64, &PageRun)> {
        let runs = self.by_pid.get(&pid);
        let before = runs
            .and_then(|r| r.range(..start).next_back())
            .filter(|(_, run)| run.end > start);
        let inside = runs.into_iter().flat_map(move |r| r.range(start..end));
        before.into_iter().chain(inside).map(|(&s, run)| (s, run))
    }

    /// The node of the page holding `address`, when the latest answer gave one.
    pub(crate) fn node_at(&self, pid: u32, address: u64) -> Option<u32> {
        let (_, run) = self.by_pid.get(&pid)?.range(..=address).next_back()?;
        match run.state {
            PageState::Node(node) if run.end > address => Some(node),
            _ => None,
        }
    }

    /// Totals over every page of every process.
    pub(crate) fn totals(&self) -> PageTotals {
        let mut totals = PageTotals::default();
        for (&start, run) in self.by_pid.values().flatten() {
            let pages = (run.end - start).div_ceil(run.page_size);
            match run.state {
                PageState::Node(node) => {
                    let n = totals.by_node.entry(node).or_default();
                    // Runs from a damaged profile can cover the whole address space several
                    // times over; the totals stop at u64's end.
                    n.pages = n.pages.saturating_add(pages);
                    n.bytes = n.bytes.saturating_add(run.end - start);
                }
                PageState::Untouched => totals.untouched = totals.untouched.saturating_add(pages),
                PageState::Unknown => totals.unknown = totals.unknown.saturating_add(pages),
            }
        }
        totals
    }
}

/// Pages of `page_size` (aligned at 0) that `[lo, hi)` touches.
fn pages_spanned(lo: u64, hi: u64, page_size: u64) -> u64 {
    if hi <= lo {
        return 0;
    }
    hi.div_ceil(page_size) - lo / page_size
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(end: u64, state: PageState) -> PageRun {
        PageRun {
            end,
            page_size: 4096,
            state,
        }
    }

    fn nodes(p: &PagePlacement) -> Vec<(u32, u64)> {
        p.by_node.iter().map(|n| (n.node, n.count)).collect()
    }

    #[test]
    fn later_answers_replace_earlier_ones_page_by_page() {
        let mut map = PageMap::default();
        map.insert(1, 0x10000, run(0x20000, PageState::Node(0)));
        map.insert(1, 0x14000, run(0x16000, PageState::Node(1)));
        map.insert(1, 0x1f000, run(0x22000, PageState::Untouched));
        let p = map.placement(1, 0x10000, 0x12000, 4096);
        assert_eq!(nodes(&p), [(0, 13), (1, 2)]);
        assert_eq!(p.untouched, 3);
        assert_eq!(p.not_queried, 0);
        let totals = map.totals();
        assert_eq!(totals.by_node[&0].pages, 13);
        assert_eq!(totals.by_node[&1].bytes, 0x2000);
    }

    #[test]
    fn partial_pages_count_and_gaps_are_not_queried() {
        let mut map = PageMap::default();
        map.insert(1, 0x10000, run(0x12000, PageState::Node(2)));
        // An object from the middle of the first page to past the queried range.
        let p = map.placement(1, 0x10010, 0x3000, 4096);
        assert_eq!(nodes(&p), [(2, 2)]);
        assert_eq!(p.not_queried, 2);
        let other_pid = map.placement(2, 0x10010, 0x3000, 4096);
        assert!(other_pid.by_node.is_empty());
        assert_eq!(other_pid.not_queried, 4);
    }
}
