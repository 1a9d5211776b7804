//! What the policies and the simulator see of a run: threads, objects, and for every touched
//! page who accessed it how often, in total and per time window. Built from a profile by
//! `load.rs`, or by hand in tests. Memory grows with pages × the threads using each page ×
//! windows, never with samples.

use serde::Serialize;

/// Where the access counts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CountSource {
    /// Exact per-thread page counts (`page_stats`, the `inst` backend's exact mode).
    Exact,
    /// Sampled accesses (loads, stores, NUMA-balancing hint faults), weighted.
    Sampled,
    /// Exact totals spread over time windows as the samples of the same page and thread are.
    ExactWithSamples,
    /// Only first-touch faults: who placed each page, not how much it is used.
    FirstTouchesOnly,
}

/// A thread of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    pub pid: u32,
    pub tid: u32,
    /// Creation order within its process: the identity a plan's thread rules use.
    pub logical_id: u32,
    pub name: Option<String>,
}

/// A data object (what a plan's rules are keyed by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub id: u64,
    pub pid: u32,
    /// `heap`, `mmap`, `static`, `stack`, …
    pub kind: String,
    pub name: String,
    pub start: u64,
    pub size: u64,
    pub site_key: Option<u64>,
    /// The allocation site's frames, innermost first, readable (`function (file:line)`, else
    /// `module+0xoffset`).
    pub frames: Vec<String>,
    /// The module a static object belongs to.
    pub module: Option<String>,
    /// Allocating thread (dense index), when known.
    pub alloc_thread: Option<u32>,
}

/// One thread's accesses to one page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Use {
    /// Dense thread index into [`Accesses::threads`].
    pub thread: u32,
    pub reads: u64,
    pub writes: u64,
    /// Accesses of unknown direction (hint faults).
    pub other: u64,
}

impl Use {
    pub fn total(&self) -> u64 {
        self.reads
            .saturating_add(self.writes)
            .saturating_add(self.other)
    }
}

/// A touched page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    pub pid: u32,
    /// Virtual page number (address / page size).
    pub number: u64,
    /// Index into [`Accesses::objects`].
    pub object: Option<u32>,
    /// The thread whose access placed it (its first-touch fault, else its earliest access).
    pub first_toucher: Option<u32>,
    /// When it was first touched, in ns on the profile's clock.
    pub first_ns: u64,
    /// The node the run found it on, when recorded.
    pub recorded_node: Option<u32>,
    /// Totals per thread, by thread index.
    pub users: Vec<Use>,
}

impl Page {
    pub fn total(&self) -> u64 {
        self.users
            .iter()
            .fold(0u64, |s, u| s.saturating_add(u.total()))
    }

    pub fn writes(&self) -> u64 {
        self.users
            .iter()
            .fold(0u64, |s, u| s.saturating_add(u.writes))
    }
}

/// Accesses of one thread to one page within one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// Index into [`Accesses::pages`].
    pub page: u32,
    pub thread: u32,
    pub reads: u64,
    pub writes: u64,
    pub other: u64,
}

impl Cell {
    pub fn total(&self) -> u64 {
        self.reads
            .saturating_add(self.writes)
            .saturating_add(self.other)
    }
}

/// The run cut into equal time windows; online policies decide at their ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Windows {
    pub start_ns: u64,
    pub length_ns: u64,
    /// Per window, its cells sorted by (page, thread).
    pub cells: Vec<Vec<Cell>>,
}

/// Everything the policies and the simulator read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accesses {
    pub page_size: u64,
    pub source: CountSource,
    /// Accesses one sample stands for (the samples' median weight; 1 for exact counts): how a
    /// policy that counts samples (Carrefour's "≥ 2 samples") reads the counts.
    pub sample_period: u64,
    /// The windows are per-thread time, not the recording's clock: the recording machine had
    /// fewer CPUs than the program had threads (see `load.rs`).
    pub retimed: bool,
    pub threads: Vec<ThreadInfo>,
    pub objects: Vec<ObjectInfo>,
    /// Sorted by (pid, number).
    pub pages: Vec<Page>,
    pub windows: Windows,
}

impl Accesses {
    /// Sum of every access counted.
    pub fn total(&self) -> u64 {
        self.pages
            .iter()
            .fold(0u64, |s, p| s.saturating_add(p.total()))
    }

    /// Builds the accesses of a run from per-window cells (each cell's page must exist); page
    /// totals are the sums of the cells. Used by tests and by the loader.
    pub fn from_cells(
        page_size: u64,
        source: CountSource,
        threads: Vec<ThreadInfo>,
        objects: Vec<ObjectInfo>,
        mut pages: Vec<Page>,
        mut windows: Windows,
    ) -> Accesses {
        for page in &mut pages {
            page.users.clear();
        }
        for window in &mut windows.cells {
            window.sort_by_key(|c| (c.page, c.thread));
            merge_equal_cells(window);
            for c in window.iter() {
                let page = &mut pages[c.page as usize];
                add_use(page, c);
            }
        }
        for page in &mut pages {
            page.users.sort_by_key(|u| u.thread);
            if page.first_toucher.is_none() {
                page.first_toucher = page
                    .users
                    .iter()
                    .max_by_key(|u| (u.total(), std::cmp::Reverse(u.thread)))
                    .map(|u| u.thread);
            }
        }
        Accesses {
            page_size,
            source,
            sample_period: 1,
            retimed: false,
            threads,
            objects,
            pages,
            windows,
        }
    }

    /// The same run in at most `max` windows, each the sum of adjacent ones (None when it has
    /// no more already). A search of static placements ranks them the same on far fewer cells:
    /// a page used all along has one cell per merged window instead of one per window.
    pub fn coarsened(&self, max: usize) -> Option<Accesses> {
        let n = self.windows.cells.len();
        if n <= max.max(1) {
            return None;
        }
        let k = n.div_ceil(max.max(1));
        let cells = self
            .windows
            .cells
            .chunks(k)
            .map(|group| {
                let mut merged: Vec<Cell> = group.iter().flatten().copied().collect();
                merged.sort_unstable_by_key(|c| (c.page, c.thread));
                merge_equal_cells(&mut merged);
                merged
            })
            .collect();
        Some(Accesses {
            windows: Windows {
                start_ns: self.windows.start_ns,
                length_ns: self.windows.length_ns.saturating_mul(k as u64),
                cells,
            },
            ..self.clone_without_windows()
        })
    }

    fn clone_without_windows(&self) -> Accesses {
        Accesses {
            page_size: self.page_size,
            source: self.source,
            sample_period: self.sample_period,
            retimed: self.retimed,
            threads: self.threads.clone(),
            objects: self.objects.clone(),
            pages: self.pages.clone(),
            windows: Windows::default(),
        }
    }

    /// True when the run has access counts, not only first touches.
    pub fn has_counts(&self) -> bool {
        self.source != CountSource::FirstTouchesOnly && self.total() > 0
    }

    /// Number of threads in each process, by pid.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.threads.iter().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }
}

fn add_use(page: &mut Page, c: &Cell) {
    let at = match page.users.iter().position(|u| u.thread == c.thread) {
        Some(at) => at,
        None => {
            page.users.push(Use {
                thread: c.thread,
                ..Use::default()
            });
            page.users.len() - 1
        }
    };
    let u = &mut page.users[at];
    u.reads = u.reads.saturating_add(c.reads);
    u.writes = u.writes.saturating_add(c.writes);
    u.other = u.other.saturating_add(c.other);
}

/// Adds up adjacent cells of the same (page, thread) in a sorted window.
/// Cells sorted by page and thread with equal neighbours added together.
pub fn merge_equal_cells(cells: &mut Vec<Cell>) {
    let mut out: Vec<Cell> = Vec::with_capacity(cells.len());
    for c in cells.drain(..) {
        match out.last_mut() {
            Some(last) if last.page == c.page && last.thread == c.thread => {
                last.reads = last.reads.saturating_add(c.reads);
                last.writes = last.writes.saturating_add(c.writes);
                last.other = last.other.saturating_add(c.other);
            }
            _ => out.push(c),
        }
    }
    *cells = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarsened_windows_keep_every_count_and_the_runs_length() {
        let mut a = crate::sim::tests::private_pages(3, 4, 10);
        // 130 windows: window w holds thread (w % 3)'s accesses to its pages, w + 1 each.
        let one = a.windows.cells[0].clone();
        a.windows.cells = (0..130u64)
            .map(|w| {
                one.iter()
                    .filter(|c| c.thread as u64 == w % 3)
                    .map(|c| Cell {
                        reads: w + 1,
                        writes: 1,
                        ..*c
                    })
                    .collect()
            })
            .collect();
        a.windows.length_ns = 1000;
        let c = a.coarsened(64).unwrap();
        // Three windows in one: 44 windows (the last of one), each three times as long.
        assert_eq!(c.windows.cells.len(), 44);
        assert_eq!(c.windows.length_ns, 3000);
        let sum = |a: &Accesses| {
            let mut by: std::collections::BTreeMap<(u32, u32), (u64, u64)> = Default::default();
            for c in a.windows.cells.iter().flatten() {
                let e = by.entry((c.page, c.thread)).or_default();
                e.0 += c.reads;
                e.1 += c.writes;
            }
            by
        };
        assert_eq!(sum(&c), sum(&a));
        // Window 0 of the merged run is windows 0 to 2: each thread's 4 pages once.
        assert_eq!(c.windows.cells[0].len(), 12);
        assert_eq!(c.windows.cells[0][0].reads, 1);
        assert!(
            c.windows.cells[0]
                .windows(2)
                .all(|w| (w[0].page, w[0].thread) < (w[1].page, w[1].thread))
        );
        assert_eq!(c.pages, a.pages);
        assert!(a.coarsened(130).is_none());
    }
}
