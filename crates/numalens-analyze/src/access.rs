//! Per-page, per-thread access counters, filled from samples (weighted, with addresses and times)
//! or from exact `page_stats` rows, in parallel by workers that each own a tally, merged at the
//! end. Memory grows with the pages touched times the threads touching each, never with samples.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ahash::RandomState;
use smallvec::SmallVec;

use crate::samples::ThreadKey;
use crate::timeline::Buckets;

/// No object.
pub(crate) const NO_OBJECT: u32 = u32::MAX;

/// Cache lines of this many bytes, for false sharing.
pub(crate) const LINE: u64 = 64;

/// Two threads' writes to one cache line at most this far apart in time alternate on it: 1 ms.
///
/// A line bounces between caches only while its writers alternate on it; writers that take it
/// in turns across phases of a loop nest (one partition of an array, then another) write the
/// same lines without any of that cost, and padding would win nothing. A sampled thread that
/// keeps writing a line leaves a sample on it every few microseconds (`inst` samples one write in
/// 1024, PMU backends thousands of samples a second), so two writers alternating for longer than
/// a millisecond leave samples of both inside one window, while phases (of milliseconds or more)
/// put samples of two threads that close only at their boundaries. It is also about a scheduler
/// time slice: two writers that meet less often than that do not share the line's cache
/// residency in any way padding changes.
pub(crate) const INTERLEAVE_NS: u64 = 1_000_000;

/// Regions each object is cut into for phase detection and timelines.
pub(crate) const REGIONS: u64 = 16;

/// Dense thread numbers: the threads table first, then threads only seen in the data, shared by
/// every worker (a lookup per run of one thread's rows, not per row).
pub(crate) struct ThreadIds {
    inner: Mutex<(HashMap<ThreadKey, u32>, Vec<ThreadKey>)>,
}

impl ThreadIds {
    pub(crate) fn new(table: impl Iterator<Item = ThreadKey>) -> Self {
        let mut map = HashMap::new();
        let mut keys = Vec::new();
        for key in table {
            map.entry(key).or_insert_with(|| {
                keys.push(key);
                keys.len() as u32 - 1
            });
        }
        ThreadIds {
            inner: Mutex::new((map, keys)),
        }
    }

    pub(crate) fn id(&self, key: ThreadKey) -> u32 {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (map, keys) = &mut *guard;
        *map.entry(key).or_insert_with(|| {
            keys.push(key);
            keys.len() as u32 - 1
        })
    }

    pub(crate) fn keys(self) -> Vec<ThreadKey> {
        self.inner.into_inner().unwrap_or_else(|e| e.into_inner()).1
    }
}

/// One thread's use of one page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct User {
    pub thread: u32,
    pub reads: u64,
    pub writes: u64,
    /// Accesses of unknown direction (page faults).
    pub other: u64,
    /// Samples behind its counts: what a share of them can rest on (0 for exact counts).
    pub samples: u64,
    /// The store samples among them.
    pub write_samples: u64,
    /// Sum of the squares of their weights, for the effective number of samples of weights
    /// that differ (`stats::effective_samples`).
    pub weight_sq: u64,
    pub first_ns: u64,
    /// Time of its last sample; `first_ns` for exact counts (no later time is known).
    pub last_ns: u64,
    /// Bit `i`: it wrote cache line `i` of the page (sample addresses only).
    pub written_lines: u64,
    /// Bit `b`: it wrote at byte `b` of some written line of the page.
    pub written_bytes: u64,
    /// Weight of its write samples that another thread's write sample on the same line
    /// follows or precedes within [`INTERLEAVE_NS`]: the lines bounced between their caches.
    pub interleaved_writes: u64,
    /// Bit `i`: some of those writes were on cache line `i` of the page.
    pub interleaved_lines: u64,
}

/// Sums of access counts. Counts read from a damaged profile can be anything up to u64::MAX;
/// a sum stops there instead of overflowing.
pub(crate) trait SaturatingSum {
    fn saturating_sum(self) -> u64;
}

impl<I, T> SaturatingSum for I
where
    I: Iterator<Item = T>,
    T: std::borrow::Borrow<u64>,
{
    fn saturating_sum(self) -> u64 {
        self.fold(0, |sum, v| sum.saturating_add(*v.borrow()))
    }
}

impl User {
    pub(crate) fn accesses(&self) -> u64 {
        // Counts from a damaged profile can reach u64's end; sums stop there.
        self.reads
            .saturating_add(self.writes)
            .saturating_add(self.other)
    }

    fn merge(&mut self, o: &User) {
        self.reads = self.reads.saturating_add(o.reads);
        self.writes = self.writes.saturating_add(o.writes);
        self.other = self.other.saturating_add(o.other);
        self.samples = self.samples.saturating_add(o.samples);
        self.write_samples = self.write_samples.saturating_add(o.write_samples);
        self.weight_sq = self.weight_sq.saturating_add(o.weight_sq);
        self.first_ns = self.first_ns.min(o.first_ns);
        self.last_ns = self.last_ns.max(o.last_ns);
        self.written_lines |= o.written_lines;
        self.written_bytes |= o.written_bytes;
        self.interleaved_writes = self.interleaved_writes.saturating_add(o.interleaved_writes);
        self.interleaved_lines |= o.interleaved_lines;
    }
}

/// The first-touch fault of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Touch {
    pub time_ns: u64,
    pub thread: u32,
    pub node: Option<u32>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct PageAcc {
    /// Object position, or [`NO_OBJECT`].
    pub object: u32,
    /// Most pages have one user: kept inline, without an allocation of its own.
    pub users: SmallVec<[User; 1]>,
    pub touch: Option<Touch>,
}

impl PageAcc {
    fn user(&mut self, thread: u32, time_ns: u64) -> &mut User {
        let at = self.user_position(thread, time_ns);
        &mut self.users[at]
    }

    /// The position of `thread`'s counters in `users`, appended when new.
    fn user_position(&mut self, thread: u32, time_ns: u64) -> usize {
        match self.users.iter().position(|u| u.thread == thread) {
            Some(at) => at,
            None => {
                self.users.push(User {
                    thread,
                    first_ns: time_ns,
                    last_ns: time_ns,
                    ..User::default()
                });
                self.users.len() - 1
            }
        }
    }

    fn touched(&mut self, touch: Touch) {
        if self.touch.is_none_or(|t| touch.time_ns < t.time_ns) {
            self.touch = Some(touch);
        }
    }

    fn merge(&mut self, other: PageAcc) {
        if self.object == NO_OBJECT {
            self.object = other.object;
        }
        for u in &other.users {
            let mine = self.user(u.thread, u.first_ns);
            mine.merge(u);
        }
        if let Some(t) = other.touch {
            self.touched(t);
        }
    }
}

/// (pid, page number).
pub(crate) type PageKey = (u32, u64);

/// (object position, region, thread).
type RegionKey = (u32, u16, u32);

/// One access to add.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    pub pid: u32,
    pub thread: u32,
    pub address: u64,
    pub time_ns: u64,
    pub object: u32,
    pub weight: u64,
    pub direction: Direction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
    Unknown,
}

/// Objects of at most this many pages get a direct page → counter table (no hashing).
const DENSE_PAGES: u64 = 1 << 22;

/// By object position: (first page wholly inside it, number of such pages).
pub(crate) type DensePages = Arc<Vec<(u64, u64)>>;

/// The pages wholly inside each object.
pub(crate) fn dense_pages(ranges: &[(u64, u64)], page_size: u64) -> DensePages {
    let ps = page_size.max(1);
    Arc::new(
        ranges
            .iter()
            .map(|&(start, size)| {
                let first = start.div_ceil(ps);
                let end = start.saturating_add(size) / ps;
                (first, end.saturating_sub(first))
            })
            .collect(),
    )
}

/// Slots of the cache of recently used (page, thread) counters; a power of two.
const RECENT: usize = 16;

/// Where the counters of one thread on one page sit: `pages[at].users[user]`. Both positions
/// are stable, because pages and users are only ever appended.
#[derive(Debug, Clone, Copy)]
struct Recent {
    pid: u32,
    thread: u32,
    page: u64,
    at: u32,
    user: u32,
}

const NO_RECENT: Recent = Recent {
    pid: u32::MAX,
    thread: u32::MAX,
    page: u64::MAX,
    at: u32::MAX,
    user: u32::MAX,
};

/// Slots of the cache of recently used timeline rows; a power of two.
const RECENT_REGIONS: usize = 16;

/// Everything one worker counted.
#[derive(Debug)]
pub(crate) struct AccessTally {
    page_size: u64,
    /// log2 of `page_size` when it is a power of two (always, for real profiles): a shift
    /// instead of a division per sample.
    page_shift: Option<u32>,
    /// Samples of one thread return to the page it streams through between excursions
    /// elsewhere; this cache finds its counters again without a table lookup or a search.
    recent: [Recent; RECENT],
    /// Recently used timeline rows, by a hash of their key: the same few regions recur.
    recent_regions: [Option<(RegionKey, u32)>; RECENT_REGIONS],
    dense_pages: DensePages,
    /// By object position: page slot → 1 + index in `pages` (0: none yet).
    dense: Vec<Vec<u32>>,
    index: HashMap<PageKey, u32, RandomState>,
    pub pages: Vec<(PageKey, PageAcc)>,
    last_page: Option<(PageKey, u32)>,
    /// Accesses per (object, region, thread) per time bucket.
    regions: HashMap<RegionKey, u32, RandomState>,
    pub region_keys: Vec<RegionKey>,
    pub timelines: Buckets,
}

impl AccessTally {
    pub(crate) fn new(page_size: u64, dense_pages: DensePages) -> Self {
        let page_size = page_size.max(1);
        AccessTally {
            page_size,
            page_shift: page_size
                .is_power_of_two()
                .then(|| page_size.trailing_zeros()),
            recent: [NO_RECENT; RECENT],
            recent_regions: [None; RECENT_REGIONS],
            dense: vec![Vec::new(); dense_pages.len()],
            dense_pages,
            index: HashMap::default(),
            pages: Vec::new(),
            last_page: None,
            regions: HashMap::default(),
            region_keys: Vec::new(),
            timelines: Buckets::new(),
        }
    }

    fn page_number(&self, address: u64) -> u64 {
        match self.page_shift {
            Some(shift) => address >> shift,
            None => address / self.page_size,
        }
    }

    /// The counters of `thread` on the page holding `a.address`, created when new.
    fn user_of(&mut self, a: &Access) -> &mut User {
        let page = self.page_number(a.address);
        let slot = (page as usize ^ (a.thread as usize).wrapping_mul(7)) & (RECENT - 1);
        let r = self.recent[slot];
        if r.page == page && r.thread == a.thread && r.pid == a.pid {
            return &mut self.pages[r.at as usize].1.users[r.user as usize];
        }
        let at = self.page_index((a.pid, page), a.object);
        let acc = &mut self.pages[at as usize].1;
        let user = acc.user_position(a.thread, a.time_ns);
        self.recent[slot] = Recent {
            pid: a.pid,
            thread: a.thread,
            page,
            at,
            user: user as u32,
        };
        &mut acc.users[user]
    }

    fn page(&mut self, key: PageKey, object: u32) -> &mut PageAcc {
        let at = self.page_index(key, object);
        &mut self.pages[at as usize].1
    }

    /// The position in `pages` of the page `key`, appended when new.
    fn page_index(&mut self, key: PageKey, object: u32) -> u32 {
        match self.last_page {
            Some((k, at)) if k == key => at,
            _ if object != NO_OBJECT && self.dense_slot(object, key.1).is_some() => {
                let slot = self.dense_slot(object, key.1).unwrap_or(0);
                let table = &mut self.dense[object as usize];
                if table.is_empty() {
                    table.resize(self.dense_pages[object as usize].1 as usize, 0);
                }
                if table[slot] == 0 {
                    let page = PageAcc {
                        object,
                        ..PageAcc::default()
                    };
                    self.pages.push((key, page));
                    table[slot] = self.pages.len() as u32;
                }
                let at = table[slot] - 1;
                self.last_page = Some((key, at));
                at
            }
            _ => {
                let next = self.pages.len() as u32;
                let at = *self.index.entry(key).or_insert(next);
                if at == next {
                    let page = PageAcc {
                        object,
                        ..PageAcc::default()
                    };
                    self.pages.push((key, page));
                }
                self.last_page = Some((key, at));
                at
            }
        }
    }

    /// The slot of `page` in the direct table of `object`, when the page lies wholly inside it.
    fn dense_slot(&self, object: u32, page: u64) -> Option<usize> {
        let &(first, count) = self.dense_pages.get(object as usize)?;
        (count <= DENSE_PAGES && page >= first && page - first < count)
            .then(|| (page - first) as usize)
    }

    /// Asks the CPU to start loading the counters of the page holding `address` of `object`,
    /// when that page is already known. Called a few samples ahead: the tables outgrow the
    /// caches, and the load of a page's counters is most of the cost of a sample otherwise.
    pub(crate) fn prefetch(&self, address: u64, object: u32) {
        if object == NO_OBJECT {
            return;
        }
        let page = self.page_number(address);
        let Some(slot) = self.dense_slot(object, page) else {
            return;
        };
        let Some(&at) = self.dense[object as usize].get(slot) else {
            return;
        };
        if let Some(entry) = at.checked_sub(1).and_then(|at| self.pages.get(at as usize)) {
            prefetch_read(entry);
        }
    }

    /// A sampled access: counts, times, written bytes.
    pub(crate) fn add(&mut self, a: &Access) {
        let offset = match self.page_shift {
            Some(_) => a.address & (self.page_size - 1),
            None => a.address % self.page_size,
        };
        let user = self.user_of(a);
        user.samples = user.samples.saturating_add(1);
        user.weight_sq = user
            .weight_sq
            .saturating_add(a.weight.saturating_mul(a.weight));
        user.first_ns = user.first_ns.min(a.time_ns);
        user.last_ns = user.last_ns.max(a.time_ns);
        match a.direction {
            Direction::Read => user.reads = user.reads.saturating_add(a.weight),
            Direction::Write => {
                user.writes = user.writes.saturating_add(a.weight);
                user.write_samples = user.write_samples.saturating_add(1);
                user.written_lines |= 1 << ((offset / LINE) % 64);
                user.written_bytes |= 1 << (offset % LINE);
            }
            Direction::Unknown => user.other = user.other.saturating_add(a.weight),
        }
    }

    /// A write sample `a` that alternates with another thread's on its line (see
    /// [`interleaved`]); its counters already hold it from [`AccessTally::add`].
    pub(crate) fn interleaved(&mut self, a: &Access) {
        let offset = match self.page_shift {
            Some(_) => a.address & (self.page_size - 1),
            None => a.address % self.page_size,
        };
        let user = self.user_of(a);
        user.interleaved_writes = user.interleaved_writes.saturating_add(a.weight);
        user.interleaved_lines |= 1 << ((offset / LINE) % 64);
    }

    /// A first-touch fault: who placed the page, and where.
    pub(crate) fn touch(&mut self, pid: u32, address: u64, object: u32, touch: Touch) {
        let page = self.page_number(address);
        self.page((pid, page), object).touched(touch);
    }

    /// The first touches of `faults`' pages, without its counts: the pages placed by a fault in
    /// a profile whose accesses are its load and store samples.
    pub(crate) fn take_touches(&mut self, faults: AccessTally) {
        self.last_page = None;
        for (key, page) in faults.pages {
            if let Some(touch) = page.touch {
                self.page(key, page.object).touched(touch);
            }
        }
    }

    /// Exact counts of one thread on one page.
    pub(crate) fn add_exact(&mut self, key: PageKey, object: u32, user: User) {
        let page = self.page(key, object);
        page.user(user.thread, user.first_ns).merge(&user);
    }

    /// Adds `weight` to the timeline of (object, region, thread) at `time_ns`.
    pub(crate) fn add_time(&mut self, object: u32, region: u16, thread: u32, time_ns: u64, w: u64) {
        let key = (object, region, thread);
        let slot = (object as usize)
            .wrapping_mul(31)
            .wrapping_add(region as usize)
            .wrapping_mul(7)
            .wrapping_add(thread as usize)
            & (RECENT_REGIONS - 1);
        let at = match self.recent_regions[slot] {
            Some((k, at)) if k == key => at,
            _ => {
                let next = self.region_keys.len() as u32;
                let at = *self.regions.entry(key).or_insert(next);
                if at == next {
                    self.region_keys.push(key);
                    self.timelines.push_row();
                }
                self.recent_regions[slot] = Some((key, at));
                at
            }
        };
        self.timelines.add(at as usize, time_ns, w);
    }

    pub(crate) fn merge(&mut self, other: AccessTally) {
        self.last_page = None;
        for (key, page) in other.pages {
            let object = page.object;
            self.page(key, object).merge(page);
        }
        self.timelines.widen_to(other.timelines.width());
        let mut theirs = other.timelines;
        theirs.widen_to(self.timelines.width());
        for (row, key) in other.region_keys.into_iter().enumerate() {
            let next = self.region_keys.len() as u32;
            let at = *self.regions.entry(key).or_insert(next);
            if at == next {
                self.region_keys.push(key);
                self.timelines.push_row();
            }
            self.timelines.add_row(at as usize, theirs.row(row));
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
}

/// Marks the write samples of `writes` (one batch's store samples, in any order) that another
/// thread's write sample on the same cache line of the same process follows or precedes within
/// [`INTERLEAVE_NS`]. Samples of one batch cover one stretch of time; a pair split across two
/// batches is missed, which only ever weakens the evidence for false sharing.
pub(crate) fn interleaved(writes: &mut [Access]) -> Vec<bool> {
    writes.sort_unstable_by_key(|a| (a.pid, a.address / LINE, a.time_ns));
    let mut marked = vec![false; writes.len()];
    let mut start = 0;
    while start < writes.len() {
        let key = |a: &Access| (a.pid, a.address / LINE);
        let line = key(&writes[start]);
        let end = start + writes[start..].partition_point(|a| key(a) == line);
        let group = &writes[start..end];
        // Forward, then backward: the nearest other thread's sample on each side.
        let mut near = Nearest::default();
        for (i, a) in group.iter().enumerate() {
            if near
                .other(a.thread)
                .is_some_and(|t| a.time_ns - t <= INTERLEAVE_NS)
            {
                marked[start + i] = true;
            }
            near.saw(a.thread, a.time_ns);
        }
        let mut near = Nearest::default();
        for (i, a) in group.iter().enumerate().rev() {
            if near
                .other(a.thread)
                .is_some_and(|t| t - a.time_ns <= INTERLEAVE_NS)
            {
                marked[start + i] = true;
            }
            near.saw(a.thread, a.time_ns);
        }
        start = end;
    }
    marked
}

/// The last sample seen and the last one of another thread than its: enough to give, for any
/// thread, the last time another thread was seen.
#[derive(Default)]
struct Nearest {
    last: Option<(u32, u64)>,
    last_other: Option<(u32, u64)>,
}

impl Nearest {
    fn saw(&mut self, thread: u32, time: u64) {
        match self.last {
            Some((t, _)) if t == thread => {}
            previous => self.last_other = previous,
        }
        self.last = Some((thread, time));
    }

    fn other(&self, thread: u32) -> Option<u64> {
        match self.last {
            Some((t, time)) if t != thread => Some(time),
            _ => self.last_other.map(|(_, time)| time),
        }
    }
}

/// A hint to bring `value` into the caches; no effect on what the program computes.
#[inline(always)]
fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching has no architectural effect; the address is a valid reference.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// The region of an object an address falls in.
pub(crate) fn region(address: u64, start: u64, size: u64) -> u16 {
    if size == 0 || address < start {
        return 0;
    }
    let offset = (address - start).min(size - 1);
    // offset < size, so offset * REGIONS fits in u64 unless the object spans over 2^60 bytes.
    let scaled = match offset.checked_mul(REGIONS) {
        Some(o) => o / size,
        None => (offset as u128 * REGIONS as u128 / size as u128) as u64,
    };
    scaled.min(REGIONS - 1) as u16
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The caches in front of the tables (recent page counters, recent timeline rows, the
    /// dense tables) must give the same counts as a plain map, whatever the order of accesses:
    /// threads interleaved on shared pages, pages that collide in the caches, an unknown
    /// object, and a merge of two tallies.
    #[test]
    fn cached_lookups_count_like_a_plain_map() {
        const PAGE: u64 = 4096;
        let start = 0x10_0000;
        let ranges = [(start, 64 * PAGE)];
        let mut tallies = [
            AccessTally::new(PAGE, dense_pages(&ranges, PAGE)),
            AccessTally::new(PAGE, dense_pages(&ranges, PAGE)),
        ];
        let mut expected: BTreeMap<(u64, u32), (u64, u64)> = BTreeMap::new();
        let mut x = 12345u64;
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let thread = ((x >> 33) % 40) as u32; // threads 16 apart share a cache slot
            // Pages 16 apart collide in the caches; some accesses fall outside the object.
            let page = (x >> 40) % 80;
            let address = start + page * PAGE + (x >> 20) % PAGE;
            let object = if page < 64 { 0 } else { NO_OBJECT };
            let write = (x >> 50).is_multiple_of(3);
            let access = Access {
                pid: 1,
                thread,
                address,
                time_ns: i,
                object,
                weight: 1 + (x >> 60),
                direction: if write {
                    Direction::Write
                } else {
                    Direction::Read
                },
            };
            tallies[(i / 1000 % 2) as usize].add(&access);
            tallies[(i / 1000 % 2) as usize].add_time(
                0,
                region(address, start, 64 * PAGE),
                thread,
                i,
                1,
            );
            let e = expected.entry((address / PAGE, thread)).or_default();
            if write {
                e.1 += access.weight;
            } else {
                e.0 += access.weight;
            }
        }
        let [mut total, other] = tallies;
        total.merge(other);
        let mut counted: BTreeMap<(u64, u32), (u64, u64)> = BTreeMap::new();
        for ((pid, page), acc) in &total.pages {
            assert_eq!(*pid, 1);
            for u in &acc.users {
                let previous = counted.insert((*page, u.thread), (u.reads, u.writes));
                assert!(previous.is_none(), "page {page} thread {} twice", u.thread);
            }
        }
        assert_eq!(counted, expected);
        let timeline_total: u64 = (0..total.region_keys.len())
            .map(|row| total.timelines.row(row).iter().sum::<u64>())
            .saturating_sum();
        assert_eq!(timeline_total, 20_000);
    }

    fn store(thread: u32, time_ns: u64, address: u64) -> Access {
        Access {
            pid: 1,
            thread,
            address,
            time_ns,
            object: 0,
            weight: 1,
            direction: Direction::Write,
        }
    }

    #[test]
    fn writes_alternate_on_a_line_only_within_the_window() {
        let ms = INTERLEAVE_NS;
        let mut writes = vec![
            // Line 0: threads 0 and 1 within the window, then thread 0 alone much later.
            store(0, 10, 0),
            store(1, 10 + ms, 8),
            store(0, 10 + 5 * ms, 16),
            // Line 1: threads 0 then 2, too far apart; thread 2 again next to thread 0.
            store(0, 0, 64),
            store(2, 3 * ms, 72),
            store(2, 20 * ms, 72),
            store(0, 20 * ms + 1, 64),
            // Another process at the same address: another line.
            Access {
                pid: 2,
                ..store(3, 10, 0)
            },
        ];
        let marked = interleaved(&mut writes);
        let got: Vec<(u32, u32, u64)> = writes
            .iter()
            .zip(marked)
            .filter(|(_, m)| *m)
            .map(|(a, _)| (a.pid, a.thread, a.time_ns))
            .collect();
        assert_eq!(
            got,
            [
                (1, 0, 10),
                (1, 1, 10 + ms),
                (1, 2, 20 * ms),
                (1, 0, 20 * ms + 1)
            ]
        );
    }
}
