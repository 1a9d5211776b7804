//! Page-level views of a profile over one address block: which samples cover each base page, and
//! which node `page_nodes` gives each base page at exit.

use super::recorded::{Fault, PageRun};

/// The size of a transparent huge page on x86-64.
pub const HUGE_PAGE: u64 = 2 << 20;

/// How much memory one fault sample stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granule {
    /// The profile says, per sample (`samples.page_size`); a sample without a value maps a base
    /// page.
    Column { base: u64 },
    /// No `page_size` column and THP off: every fault maps one base page.
    Base(u64),
    /// No `page_size` column and THP on: a first-touch fault may have mapped a whole huge page
    /// or (when the kernel fell back) one base page, and the profile cannot tell which. A huge
    /// region then counts as covered by any sample inside it, and several samples may share it.
    HugeRegion,
}

impl Granule {
    pub fn new(base_page: u64, samples_have_page_size: bool, thp_always: bool) -> Granule {
        match (samples_have_page_size, thp_always) {
            (true, _) => Granule::Column { base: base_page },
            (false, false) => Granule::Base(base_page),
            (false, true) => Granule::HugeRegion,
        }
    }

    /// Bytes covered by `f`, a power of two, from the address rounded down to it.
    pub fn span(&self, f: &Fault) -> u64 {
        match *self {
            Granule::Column { base } => f.page_size.filter(|s| s.is_power_of_two()).unwrap_or(base),
            Granule::Base(base) => base,
            Granule::HugeRegion => HUGE_PAGE,
        }
    }

    /// Whether one page may be covered by several samples of the same kind without that being
    /// a recorder error (only when the granule is a guess).
    pub fn overlap_allowed(&self) -> bool {
        *self == Granule::HugeRegion
    }

    pub fn describe(&self) -> &'static str {
        match self {
            Granule::Column { .. } => "per-sample page_size",
            Granule::Base(_) => "base pages",
            Granule::HugeRegion => "2 MiB regions (THP, no page_size column)",
        }
    }
}

/// For every base page of `[start, start + size)`, the indices into `samples` of the samples
/// chosen by `pick` that cover it.
pub fn coverage(
    samples: &[Fault],
    pick: impl Fn(&Fault) -> bool,
    start: u64,
    size: u64,
    base_page: u64,
    granule: Granule,
) -> Vec<Vec<usize>> {
    let mut pages = vec![Vec::new(); (size / base_page) as usize];
    let end = start + size;
    for (i, f) in samples.iter().enumerate() {
        if !pick(f) {
            continue;
        }
        let span = granule.span(f);
        let lo = (f.address & !(span - 1)).max(start);
        let hi = (f.address & !(span - 1)).saturating_add(span).min(end);
        let mut page = lo;
        while page < hi {
            pages[((page - start) / base_page) as usize].push(i);
            page += base_page;
        }
    }
    pages
}

/// What `page_nodes` says about one base page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageAnswer {
    /// No run of the exit query covers it.
    NotQueried,
    Node(u32),
    /// No node, with the status given (`untouched` or an error).
    NoNode(String),
}

/// The node of every base page of `[start, start + size)` by the runtime's exit query.
pub fn exit_nodes(runs: &[PageRun], start: u64, size: u64, base_page: u64) -> Vec<PageAnswer> {
    let mut pages = vec![PageAnswer::NotQueried; (size / base_page) as usize];
    let end = start + size;
    for run in runs.iter().filter(|r| r.source == "exit") {
        let run_end = run.start + run.pages * run.page_size;
        let mut page = run.start.max(start);
        // Base-page aligned, since runs may use a different (larger) page size.
        page -= (page - start) % base_page;
        while page < run_end.min(end) {
            pages[((page - start) / base_page) as usize] = match run.node {
                Some(n) => PageAnswer::Node(n),
                None => PageAnswer::NoNode(run.status.clone()),
            };
            page += base_page;
        }
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_format::SampleKind;

    const K4: u64 = 4096;

    fn fault(address: u64, page_size: Option<u64>) -> Fault {
        Fault {
            tid: 1,
            address,
            kind: SampleKind::FirstTouch,
            node: Some(0),
            object_id: Some(0),
            page_size,
        }
    }

    #[test]
    fn base_pages_cover_one_page_each() {
        let s = [
            fault(0x10_0010, None),
            fault(0x10_2fff, None),
            fault(0x20_0000, None),
        ];
        let c = coverage(&s, |_| true, 0x10_0000, 4 * K4, K4, Granule::Base(K4));
        assert_eq!(c, vec![vec![0], vec![], vec![1], vec![]]);
    }

    #[test]
    fn the_page_size_column_widens_a_sample_to_its_huge_page() {
        let base = 0x40_0000;
        let s = [
            fault(base + 0x1234, Some(HUGE_PAGE)),
            fault(base + HUGE_PAGE + 8, Some(K4)),
        ];
        let g = Granule::new(K4, true, false);
        let c = coverage(&s, |_| true, base, 2 * HUGE_PAGE, K4, g);
        assert!(c[..512].iter().all(|p| p == &vec![0]));
        assert_eq!(c[512], vec![1]);
        assert!(c[513..].iter().all(Vec::is_empty));
        assert!(!g.overlap_allowed());
    }

    #[test]
    fn without_the_column_thp_always_accepts_any_sample_in_a_region() {
        let base = 0x40_0000;
        let s = [fault(base + 0x5000, None), fault(base + 0x9000, None)];
        let g = Granule::new(K4, false, true);
        let c = coverage(&s, |_| true, base, 2 * HUGE_PAGE, K4, g);
        assert!(c[..512].iter().all(|p| p == &vec![0, 1]));
        assert!(c[512..].iter().all(Vec::is_empty));
        assert!(g.overlap_allowed());
    }

    #[test]
    fn a_huge_sample_outside_the_block_does_not_leak_into_it() {
        // The block starts on a huge-page boundary; a fault just below it covers only below.
        let s = [fault(0x40_0000 - 8, Some(HUGE_PAGE))];
        let c = coverage(
            &s,
            |_| true,
            0x40_0000,
            HUGE_PAGE,
            K4,
            Granule::Column { base: K4 },
        );
        assert!(c.iter().all(Vec::is_empty));
    }

    fn run(start: u64, pages: u64, page_size: u64, node: Option<u32>, source: &str) -> PageRun {
        PageRun {
            start,
            pages,
            page_size,
            node,
            status: if node.is_some() { "" } else { "untouched" }.into(),
            source: source.into(),
        }
    }

    #[test]
    fn exit_runs_give_each_page_its_node() {
        let runs = [
            run(0x1000, 2, K4, Some(3), "exit"),
            run(0x3000, 1, K4, None, "exit"),
            run(0x0, 8, K4, Some(9), "scan"), // not the exit query: ignored
        ];
        let got = exit_nodes(&runs, 0x1000, 4 * K4, K4);
        assert_eq!(
            got,
            vec![
                PageAnswer::Node(3),
                PageAnswer::Node(3),
                PageAnswer::NoNode("untouched".into()),
                PageAnswer::NotQueried
            ]
        );
    }

    #[test]
    fn runs_larger_than_the_block_are_clipped() {
        let runs = [run(0x0, 1, HUGE_PAGE, Some(1), "exit")];
        let got = exit_nodes(&runs, 0x10_0000, 2 * K4, K4);
        assert_eq!(got, vec![PageAnswer::Node(1); 2]);
    }
}
