//! Attributing faults to objects and telling first touches from later faults.
//!
//! Objects come and go (an address range can hold several objects over time), so a fault at
//! address A and time T belongs to the object live at A at T. Faults and object lifetimes are
//! swept together in time order over an index of the live objects (`attribute_index`). Tracked
//! objects (allocations, statics, stacks, TLS) win over fallback objects (mappings seen in
//! `/proc/PID/maps`), which only answer for addresses no tracked object covers; among either,
//! the smallest containing object wins (ties: the lowest start, then the earliest allocated).

use numalens_format::{ObjectKind, SampleKind};

use crate::attribute_index::{LiveIndex, Span};
use crate::page_times::PageTimes;
use crate::pagesize::PageSizes;
use crate::raw::Fault;

/// An object as the recorder knows it; times are CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectSpec {
    pub pid: u32,
    pub kind: ObjectKind,
    pub name: String,
    pub start: u64,
    pub size: u64,
    pub alloc_ns: u64,
    pub free_ns: Option<u64>,
    pub alloc_tid: Option<u32>,
    pub site_key: Option<u64>,
    /// False for fallback objects from the maps snapshots.
    pub tracked: bool,
}

/// What each fault became: its object (index into the objects), its kind and the size of the page
/// it hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attributed {
    pub object: Option<usize>,
    pub kind: SampleKind,
    pub page_size: u64,
}

/// Attributes `faults` (sorted by time) to `objects`. A fault is a first touch when its page (of
/// the size `pages` decided) had no fault since the containing object was allocated; later faults
/// are NUMA-balancing hints when `balancing` is on, plain faults otherwise.
pub fn attribute(
    faults: &[Fault],
    objects: &[ObjectSpec],
    pages: &PageSizes,
    balancing: bool,
) -> Vec<Attributed> {
    attributions(faults, objects, pages, balancing).collect()
}

/// [`attribute`], one fault at a time: the profile writer encodes earlier samples while later
/// ones are attributed, and no vector of a million answers is kept.
pub fn attributions<'a>(
    faults: &'a [Fault],
    objects: &'a [ObjectSpec],
    pages: &'a PageSizes,
    balancing: bool,
) -> Attributions<'a> {
    // Sized for a first touch per fault (the worst case, and the usual one).
    let pages_expected = faults.len().min(MAX_PRESIZED_PAGES);
    Attributions {
        faults: faults.iter(),
        objects,
        pages,
        balancing,
        locator: Locator::new(objects),
        last_fault: PageTimes::new(pages.base_page(), pages_expected),
    }
}

/// Beyond this many faults the page table grows as needed instead (runs with many faults per page).
const MAX_PRESIZED_PAGES: usize = 1 << 24;

/// The iterator of [`attributions`].
pub struct Attributions<'a> {
    faults: std::slice::Iter<'a, Fault>,
    objects: &'a [ObjectSpec],
    pages: &'a PageSizes,
    balancing: bool,
    locator: Locator<'a>,
    /// Time of the last fault on each (pid, page).
    last_fault: PageTimes,
}

impl Iterator for Attributions<'_> {
    type Item = Attributed;

    fn next(&mut self) -> Option<Attributed> {
        let fault = self.faults.next()?;
        self.locator.advance_to(fault.time_ns);
        let object = self.locator.find(fault.pid, fault.address);
        let (page, page_size) = self.pages.page_of(fault.pid, fault.address);
        let previous = self.last_fault.insert(fault.pid, page, fault.time_ns);
        let born = object.map_or(0, |o| self.objects[o].alloc_ns);
        let kind = match previous {
            Some(t) if t >= born => {
                if self.balancing {
                    SampleKind::Hint
                } else {
                    SampleKind::Fault
                }
            }
            _ => SampleKind::FirstTouch,
        };
        Some(Attributed {
            object,
            kind,
            page_size,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.faults.size_hint()
    }
}

impl ExactSizeIterator for Attributions<'_> {}

/// Which object held an address at a time, for queries in time order: the smallest live tracked
/// object (allocation, static, stack, TLS) containing it, else the smallest fallback mapping.
pub struct Locator<'a> {
    /// (time, starts, object): allocations and frees in time order.
    lifetimes: Vec<(u64, bool, usize)>,
    next: usize,
    live: LiveIndex<'a>,
}

impl<'a> Locator<'a> {
    pub fn new(objects: &'a [ObjectSpec]) -> Self {
        let mut lifetimes: Vec<(u64, bool, usize)> = Vec::with_capacity(objects.len() * 2);
        for (id, o) in objects.iter().enumerate() {
            lifetimes.push((o.alloc_ns, true, id));
            if let Some(free) = o.free_ns {
                lifetimes.push((free, false, id));
            }
        }
        // At equal times ends come first, so a range freed and reused at once maps to the new
        // object.
        lifetimes.sort_by_key(|(t, start, id)| (*t, *start, *id));
        Locator {
            lifetimes,
            next: 0,
            live: LiveIndex::new(objects),
        }
    }

    /// Applies every allocation and free up to `time_ns` (which must not go backwards).
    pub fn advance_to(&mut self, time_ns: u64) {
        while self.next < self.lifetimes.len() && self.lifetimes[self.next].0 <= time_ns {
            let (_, starts, id) = self.lifetimes[self.next];
            if starts {
                self.live.insert(id);
            } else {
                self.live.remove(id);
            }
            self.next += 1;
        }
    }

    /// How many allocations and frees [`advance_to`](Self::advance_to)`(time_ns)` would have
    /// applied from the start.
    pub fn epoch_at(&self, time_ns: u64) -> usize {
        self.lifetimes.partition_point(|(t, _, _)| *t <= time_ns)
    }

    /// The times of epoch `epoch`: from its last allocation or free (0 for the first epoch)
    /// until the next one (`u64::MAX` for the last).
    pub fn epoch_times(&self, epoch: usize) -> (u64, u64) {
        let from = epoch.checked_sub(1).map_or(0, |e| self.lifetimes[e].0);
        let to = self.lifetimes.get(epoch).map_or(u64::MAX, |l| l.0);
        (from, to)
    }

    /// The number of epochs but the first: one per allocation and free.
    pub fn epochs(&self) -> usize {
        self.lifetimes.len()
    }

    /// How many allocations and frees have been applied: two lookups made at the same epoch see
    /// the same objects.
    pub fn epoch(&self) -> usize {
        self.next
    }

    /// The object holding `address` of process `pid` and the addresses around it that the same
    /// object (or none) holds, when that is known without a search.
    pub fn span(&mut self, pid: u32, address: u64) -> Option<Span> {
        self.live.span(pid, address)
    }

    /// The object holding `address` of process `pid` at the time last advanced to.
    pub fn find(&mut self, pid: u32, address: u64) -> Option<usize> {
        self.live.find(pid, address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pagesize::{Evidence, ThpMode};

    fn small_pages() -> PageSizes {
        let none = Default::default();
        PageSizes::infer(
            &[],
            &Evidence {
                mode: ThpMode::Never,
                base_page: 4096,
                page_sizes_sampled: true,
                anonymous: &none,
                residency: &Default::default(),
            },
        )
    }

    fn object(start: u64, size: u64, alloc: u64, free: Option<u64>, tracked: bool) -> ObjectSpec {
        ObjectSpec {
            pid: 1,
            kind: ObjectKind::Heap,
            name: format!("o{start:x}@{alloc}"),
            start,
            size,
            alloc_ns: alloc,
            free_ns: free,
            alloc_tid: None,
            site_key: None,
            tracked,
        }
    }

    fn fault(time_ns: u64, address: u64) -> Fault {
        Fault {
            pid: 1,
            tid: 1,
            time_ns,
            address,
            cpu: 0,
            mapped_page_size: 0,
            ip: 0,
        }
    }

    #[test]
    fn reused_addresses_map_to_the_object_live_at_the_time() {
        let objects = vec![
            object(0x10000, 0x4000, 10, Some(20), true),
            object(0x10000, 0x8000, 20, None, true),
            object(0x0, 0x100000, 0, None, false),
        ];
        let faults = [
            fault(15, 0x10010),
            fault(25, 0x10010),
            fault(26, 0x17000),
            fault(27, 0x90000),
            fault(28, 0x10020),
        ];
        let got = attribute(&faults, &objects, &small_pages(), false);
        let ids: Vec<_> = got.iter().map(|a| a.object).collect();
        assert_eq!(ids, vec![Some(0), Some(1), Some(1), Some(2), Some(1)]);
        let kinds: Vec<_> = got.iter().map(|a| a.kind).collect();
        use SampleKind::*;
        assert_eq!(
            kinds,
            vec![FirstTouch, FirstTouch, FirstTouch, FirstTouch, Fault]
        );
    }

    #[test]
    fn later_faults_are_hints_when_balancing_is_on() {
        let objects = vec![object(0x10000, 0x4000, 0, None, true)];
        let got = attribute(
            &[fault(1, 0x10000), fault(2, 0x10008)],
            &objects,
            &small_pages(),
            true,
        );
        assert_eq!(got[1].kind, SampleKind::Hint);
    }

    #[test]
    fn a_container_is_found_past_any_number_of_objects_inside_it() {
        // A 64 MiB tracked mapping holding a thousand tracked blocks below the fault's address.
        let mut objects = vec![object(0x1000_0000, 64 << 20, 0, None, true)];
        for i in 0..1000 {
            objects.push(object(0x1000_0000 + i * 0x2000, 0x1000, 0, None, true));
        }
        let got = attribute(
            &[
                fault(1, 0x1000_0000 + 1000 * 0x2000 + 8),
                fault(2, 0x1000_1010),
            ],
            &objects,
            &small_pages(),
            false,
        );
        assert_eq!(got[0].object, Some(0));
        assert_eq!(got[1].object, Some(0), "between two blocks");
        let got = attribute(&[fault(3, 0x1000_2010)], &objects, &small_pages(), false);
        assert_eq!(got[0].object, Some(2), "inside a block");
    }

    #[test]
    fn smallest_containing_object_wins_and_unknown_addresses_have_none() {
        let objects = vec![
            object(0x0, 0x100000, 0, None, true),
            object(0x2000, 0x1000, 0, None, true),
        ];
        let got = attribute(
            &[fault(1, 0x2500), fault(2, 0x5000), fault(3, 0x200000)],
            &objects,
            &small_pages(),
            false,
        );
        assert_eq!(
            got.iter().map(|a| a.object).collect::<Vec<_>>(),
            vec![Some(1), Some(0), None]
        );
    }
}
