//! The real page size of each fault: with transparent huge pages one fault places a whole 2 MiB
//! page, so first touches, hints and page counts must be taken at that granularity.
//!
//! The kernel tells the page size only for pages that are already mapped (the sample's
//! `mapped_page_size`: a hinting fault on a huge page says 2 MiB); a first touch faults on an
//! unmapped address. So each 2 MiB region of a process is decided from the evidence:
//! - huge when a fault on a present page in it reported 2 MiB;
//! - 4 KiB pages when two different 4 KiB pages of it took faults on unmapped addresses (a huge
//!   page would have taken one), or when the runtime's page-node query at exit found some of its
//!   pages never touched;
//! - otherwise huge when THP could have given it one: the region lies in an anonymous private
//!   mapping and THP is `always`, or the exit query found every one of its pages present (under
//!   `madvise`, where a mapping's advice is not known to the recorder).

use ahash::{AHashMap, AHashSet};
use std::collections::{BTreeSet, HashMap};

use crate::raw::Fault;

/// Size of a PMD-mapped transparent huge page on x86-64 and arm64 with 4 KiB base pages.
pub const HUGE_PAGE: u64 = 2 << 20;

/// `/sys/kernel/mm/transparent_hugepage/enabled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThpMode {
    Always,
    Madvise,
    Never,
}

impl ThpMode {
    /// This machine's setting; `Never` when the kernel has no THP.
    pub fn host() -> ThpMode {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .map(|text| Self::parse(&text))
            .unwrap_or(ThpMode::Never)
    }

    /// Parses the sysfs text, whose selected value is in brackets: `always [madvise] never`.
    pub fn parse(text: &str) -> ThpMode {
        let selected = text
            .split_whitespace()
            .find(|w| w.starts_with('['))
            .unwrap_or("[never]");
        match selected.trim_matches(|c| c == '[' || c == ']') {
            "always" => ThpMode::Always,
            "madvise" => ThpMode::Madvise,
            _ => ThpMode::Never,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ThpMode::Always => "always",
            ThpMode::Madvise => "madvise",
            ThpMode::Never => "never",
        }
    }
}

/// What the runtime's exit query says about a region: all its pages present, some untouched.
#[derive(Debug, Default, Clone, Copy)]
pub struct Residency {
    pub present: u64,
    pub untouched: u64,
}

/// Evidence that the recorder has besides the faults.
pub struct Evidence<'a> {
    pub mode: ThpMode,
    pub base_page: u64,
    /// Whether faults carry `mapped_page_size` at all.
    pub page_sizes_sampled: bool,
    /// Anonymous private mappings seen per process: (start, end).
    pub anonymous: &'a HashMap<u32, Vec<(u64, u64)>>,
    /// Page-node answers per (pid, 2 MiB region start).
    pub residency: &'a HashMap<(u32, u64), Residency>,
}

/// The page size decided for every 2 MiB region that took a fault.
pub struct PageSizes {
    base_page: u64,
    huge: AHashSet<(u32, u64)>,
}

#[derive(Default)]
struct RegionFaults {
    /// First unmapped-address fault's 4 KiB page, and whether another page followed.
    first_page: Option<u64>,
    split: bool,
    huge_seen: bool,
}

impl PageSizes {
    /// Decides each faulted region's page size from `faults` and `evidence`.
    pub fn infer(faults: &[Fault], evidence: &Evidence<'_>) -> PageSizes {
        let mut huge = AHashSet::new();
        if evidence.mode == ThpMode::Never || evidence.base_page >= HUGE_PAGE {
            return PageSizes {
                base_page: evidence.base_page,
                huge,
            };
        }
        let mut regions: AHashMap<(u32, u64), RegionFaults> = AHashMap::new();
        // Consecutive faults mostly fall in the same region: its entry is kept at hand and
        // written back when another region comes, instead of a lookup per fault.
        let mut current: Option<((u32, u64), RegionFaults)> = None;
        for f in faults {
            let key = (f.pid, f.address & !(HUGE_PAGE - 1));
            if current.as_ref().is_none_or(|(k, _)| *k != key) {
                if let Some((k, r)) = current.take() {
                    regions.insert(k, r);
                }
                current = Some((key, regions.remove(&key).unwrap_or_default()));
            }
            let r = &mut current.as_mut().expect("set above").1;
            let mapped = f.mapped_page_size as u64;
            if mapped >= HUGE_PAGE {
                r.huge_seen = true;
            }
            // Without the page size every fault counts as one on an unmapped page.
            if mapped == 0 || !evidence.page_sizes_sampled {
                let page = f.address / evidence.base_page;
                match r.first_page {
                    None => r.first_page = Some(page),
                    Some(p) if p != page => r.split = true,
                    _ => {}
                }
            }
        }
        if let Some((k, r)) = current {
            regions.insert(k, r);
        }
        for ((pid, start), r) in regions {
            if r.huge_seen || (!r.split && could_be_huge(pid, start, evidence)) {
                huge.insert((pid, start));
            }
        }
        PageSizes {
            base_page: evidence.base_page,
            huge,
        }
    }

    /// First address and size of the page holding `address` in process `pid`.
    pub fn page_of(&self, pid: u32, address: u64) -> (u64, u64) {
        let region = address & !(HUGE_PAGE - 1);
        if !self.huge.is_empty() && self.huge.contains(&(pid, region)) {
            (region, HUGE_PAGE)
        } else {
            (address / self.base_page * self.base_page, self.base_page)
        }
    }

    /// The base page size, the size of every page not in a huge region.
    pub fn base_page(&self) -> u64 {
        self.base_page
    }

    pub fn huge_regions(&self) -> usize {
        self.huge.len()
    }
}

fn could_be_huge(pid: u32, start: u64, evidence: &Evidence<'_>) -> bool {
    let residency = evidence.residency.get(&(pid, start));
    if residency.is_some_and(|r| r.untouched > 0) {
        return false;
    }
    let all_present = residency.is_some_and(|r| r.present * evidence.base_page >= HUGE_PAGE);
    let in_anonymous = evidence.anonymous.get(&pid).is_some_and(|maps| {
        maps.iter()
            .any(|(s, e)| *s <= start && start + HUGE_PAGE <= *e)
    });
    match evidence.mode {
        ThpMode::Always => in_anonymous,
        ThpMode::Madvise => in_anonymous && all_present,
        ThpMode::Never => false,
    }
}

/// Adds a page-node run (`pages` pages of `page_size` from `start`, present or untouched) to the
/// residency of the regions in `faulted`, the only ones whose page size is decided. A run can
/// span a whole mapping (terabytes of reserved, untouched address space), so the regions it
/// covers are not enumerated: only the faulted ones within it are visited. A run that cannot
/// be a real one (page size not a power of two, range past the address space) is left out.
pub fn add_residency(
    residency: &mut HashMap<(u32, u64), Residency>,
    faulted: &BTreeSet<(u32, u64)>,
    (pid, start): (u32, u64),
    pages: u64,
    page_size: u64,
    present: bool,
) {
    if !page_size.is_power_of_two() {
        return;
    }
    let Some(end) = pages
        .checked_mul(page_size)
        .and_then(|len| start.checked_add(len))
    else {
        return;
    };
    let first_region = start & !(HUGE_PAGE - 1);
    for &(_, region) in faulted.range((pid, first_region)..(pid, end)) {
        let from = start.max(region);
        let upto = end.min(region.saturating_add(HUGE_PAGE));
        let n = upto.saturating_sub(from) / page_size;
        let r = residency.entry((pid, region)).or_default();
        if present {
            r.present += n;
        } else {
            r.untouched += n;
        }
    }
}

/// Anonymous private mappings per process, from (pid, start, end) rows.
pub fn anonymous_by_pid(
    rows: impl Iterator<Item = (u32, u64, u64)>,
) -> HashMap<u32, Vec<(u64, u64)>> {
    let mut by_pid: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for (pid, start, end) in rows {
        by_pid.entry(pid).or_default().push((start, end));
    }
    by_pid
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 4096;

    fn fault(address: u64, mapped: u32) -> Fault {
        Fault {
            pid: 1,
            tid: 1,
            time_ns: 0,
            address,
            cpu: 0,
            mapped_page_size: mapped,
            ip: 0,
        }
    }

    fn infer(
        faults: &[Fault],
        mode: ThpMode,
        residency: &HashMap<(u32, u64), Residency>,
    ) -> PageSizes {
        let anonymous = anonymous_by_pid([(1, 0x4000_0000, 0x4100_0000)].into_iter());
        PageSizes::infer(
            faults,
            &Evidence {
                mode,
                base_page: BASE,
                page_sizes_sampled: true,
                anonymous: &anonymous,
                residency,
            },
        )
    }

    #[test]
    fn parses_the_selected_mode() {
        assert_eq!(ThpMode::parse("always [madvise] never\n"), ThpMode::Madvise);
        assert_eq!(ThpMode::parse("[always] madvise never"), ThpMode::Always);
        assert_eq!(ThpMode::parse("always madvise [never]"), ThpMode::Never);
    }

    #[test]
    fn one_fault_per_region_in_an_anonymous_mapping_is_huge_under_always() {
        let r = 0x4000_0000;
        let faults = [fault(r + 0x10, 0), fault(r + HUGE_PAGE + 0x3000, 0)];
        let sizes = infer(&faults, ThpMode::Always, &HashMap::new());
        assert_eq!(sizes.page_of(1, r + 0x1f_0000), (r, HUGE_PAGE));
        assert_eq!(
            sizes.page_of(1, r + HUGE_PAGE + 5),
            (r + HUGE_PAGE, HUGE_PAGE)
        );
        // Outside any anonymous mapping, or with THP off, pages are 4 KiB.
        let outside = [fault(0x9000_0000, 0)];
        let sizes = infer(&outside, ThpMode::Always, &HashMap::new());
        assert_eq!(sizes.page_of(1, 0x9000_0010), (0x9000_0000, BASE));
        let sizes = infer(&faults, ThpMode::Never, &HashMap::new());
        assert_eq!(sizes.page_of(1, r + 0x1234), (r + 0x1000, BASE));
    }

    #[test]
    fn two_first_touched_pages_in_a_region_mean_small_pages() {
        let r = 0x4000_0000;
        let faults = [fault(r, 0), fault(r + BASE, 0)];
        let sizes = infer(&faults, ThpMode::Always, &HashMap::new());
        assert_eq!(sizes.page_of(1, r + BASE + 1), (r + BASE, BASE));
        // Later faults on present pages (hints) do not split a huge region.
        let faults = [fault(r, 0), fault(r + 7 * BASE, HUGE_PAGE as u32)];
        let sizes = infer(&faults, ThpMode::Madvise, &HashMap::new());
        assert_eq!(sizes.page_of(1, r + 7 * BASE), (r, HUGE_PAGE));
    }

    #[test]
    fn the_exit_query_decides_when_the_faults_cannot() {
        let r = 0x4000_0000;
        let faults = [fault(r + 0x40, 0)];
        let faulted = BTreeSet::from([(1, r)]);
        let mut residency = HashMap::new();
        add_residency(&mut residency, &faulted, (1, r), 512, BASE, true);
        let sizes = infer(&faults, ThpMode::Madvise, &residency);
        assert_eq!(sizes.page_of(1, r + 0x40), (r, HUGE_PAGE));
        let mut residency = HashMap::new();
        add_residency(&mut residency, &faulted, (1, r), 1, BASE, true);
        add_residency(&mut residency, &faulted, (1, r + BASE), 511, BASE, false);
        let sizes = infer(&faults, ThpMode::Always, &residency);
        assert_eq!(sizes.page_of(1, r + 0x40), (r, BASE));
        assert_eq!(sizes.huge_regions(), 0);
    }

    #[test]
    fn residency_runs_are_split_at_region_boundaries() {
        let mut residency = HashMap::new();
        let faulted = BTreeSet::from([(1, 0), (1, HUGE_PAGE)]);
        add_residency(
            &mut residency,
            &faulted,
            (1, HUGE_PAGE - BASE),
            3,
            BASE,
            true,
        );
        assert_eq!(residency[&(1, 0)].present, 1);
        assert_eq!(residency[&(1, HUGE_PAGE)].present, 2);
    }

    /// A run read from a damaged or hostile log: huge counts, page sizes that are no page size,
    /// ranges past the address space. None may panic, and the residency holds only the faulted
    /// regions however many regions the run claims to cover.
    #[test]
    fn damaged_runs_cost_nothing_and_never_panic() {
        let top = !(HUGE_PAGE - 1);
        let faulted = BTreeSet::from([(1, 0), (1, 1 << 46), (1, top)]);
        let mut residency = HashMap::new();
        add_residency(&mut residency, &faulted, (1, 0), 1 << 40, BASE, false);
        assert_eq!(residency.len(), 2);
        assert_eq!(residency[&(1, 1 << 46)].untouched, 512);
        for (start, pages, page_size) in [
            (0, u64::MAX, BASE),
            (top, 512, BASE),
            (top + BASE, 1, BASE),
            (0x1000, 10, 0),
            (0x1000, 10, 3000),
            (u64::MAX, 1, 1),
        ] {
            add_residency(&mut residency, &faulted, (1, start), pages, page_size, true);
        }
        // A run ending exactly at 2^64 is past the address space: only the one-page run counts.
        assert_eq!(residency[&(1, top)].present, 1);
        assert!(residency.len() <= faulted.len());
    }
}
