//! A profile's accesses as the policies see them: per page and thread, in time windows.
//!
//! Counts come from the samples (loads, stores, NUMA-balancing hint faults; first-touch faults
//! say who placed each page) and from the exact `page_stats` rows. Beside load or store samples,
//! page faults (first touches, later faults, hints) are not accesses: they say who placed a page,
//! not how much it is used, and a first-touched page that a load sample also hit would count
//! twice; only a profile of faults alone counts them. When both exist, the exact
//! totals are authoritative and the samples only say when they happened: each (page, thread)
//! total is spread over the windows in proportion to that pair's samples, or put in the window
//! of its first access when it has none. Memory grows with pages × threads per page × windows.

/// The loader hashes a key per sample: SipHash was most of its time.
type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch, StringArray};
use numalens_format::{
    FormatError, Label, Object, PageStat, Profile, Row, Sample, SampleKind, SiteFrame, Thread,
};

use crate::accesses::{Accesses, Cell, CountSource, ObjectInfo, Page, ThreadInfo, Windows};
use crate::error::Result;

/// How the run is cut into windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Window length; `None`: the run's length / [`DEFAULT_WINDOWS`], between 1 ms and 1 s.
    pub window_ns: Option<u64>,
}

/// Windows a run is cut into by default: recorded runs are often shorter than production
/// ones, so online policies get this many chances to react whatever the run's length.
pub const DEFAULT_WINDOWS: u64 = 32;

/// At most this many windows, whatever the window length asked for: memory grows with them.
pub const MAX_WINDOWS: u64 = 4096;

const COLUMNS: &[&str] = &[
    "time_ns",
    "pid",
    "tid",
    "address",
    "kind",
    "weight",
    "object_id",
    "node",
];

/// Reads the accesses of `profile`.
pub fn load(profile: &Profile, options: &LoadOptions) -> Result<Accesses> {
    let page_size = profile.meta().page_size.max(1);
    let mut b = Builder::new(profile, page_size)?;
    let (t0, t1) = b.time_range(profile)?;
    let window_ns = options
        .window_ns
        .unwrap_or(((t1 - t0) / DEFAULT_WINDOWS).clamp(1_000_000, 1_000_000_000))
        .max((t1 - t0) / MAX_WINDOWS + 1)
        .max(1);
    let count = ((t1 - t0) / window_ns + 1) as usize;
    b.windows = Windows {
        start_ns: t0,
        length_ns: window_ns,
        cells: Vec::new(),
    };
    b.cells = vec![HashMap::default(); count];
    for batch in profile.batches::<Sample>(Some(COLUMNS), None)? {
        b.add_samples(&batch?, &profile.table_path::<Sample>())?;
    }
    let exact = b.read_exact(profile)?;
    let recorded_cpus = profile.meta().topology.as_ref().map(|t| t.cpu_count());
    Ok(b.finish(exact, recorded_cpus))
}

type CellKey = (u32, u32);
type Counts = [u64; 3];

struct Builder {
    page_size: u64,
    threads: Vec<ThreadInfo>,
    thread_index: HashMap<(u32, u32), u32>,
    objects: Vec<ObjectInfo>,
    object_index: HashMap<u64, u32>,
    pages: Vec<Page>,
    page_index: HashMap<(u32, u64), u32>,
    windows: Windows,
    cells: Vec<HashMap<CellKey, Counts>>,
    weights: HashMap<u32, u64>,
    access_samples: u64,
    /// Load and store samples: when there are any, page faults are not counted as accesses.
    memory_samples: u64,
    /// Pages whose first-touch fault was sampled: the fault, not an exact count's first
    /// access, says who placed them.
    faulted: std::collections::HashSet<u32>,
}

impl Builder {
    fn new(profile: &Profile, page_size: u64) -> Result<Builder> {
        let mut threads = Vec::new();
        let mut thread_index = HashMap::default();
        for t in profile.read_all::<Thread>()? {
            thread_index.entry((t.pid, t.tid)).or_insert_with(|| {
                threads.push(ThreadInfo {
                    pid: t.pid,
                    tid: t.tid,
                    logical_id: t.logical_id,
                    name: t.name.clone(),
                });
                threads.len() as u32 - 1
            });
        }
        // A side table: when it is damaged, rules lose their readable frames, not their keys
        // (the report says which side tables it could not read).
        let frames = site_frames(profile.read_all::<SiteFrame>().unwrap_or_default());
        let mut objects = Vec::new();
        let mut object_index = HashMap::default();
        for o in profile.read_all::<Object>()? {
            object_index.entry(o.object_id).or_insert_with(|| {
                objects.push(object_info(&o, &frames, &thread_index));
                objects.len() as u32 - 1
            });
        }
        Ok(Builder {
            page_size,
            threads,
            thread_index,
            objects,
            object_index,
            pages: Vec::new(),
            page_index: HashMap::default(),
            windows: Windows::default(),
            cells: Vec::new(),
            weights: HashMap::default(),
            access_samples: 0,
            memory_samples: 0,
            faulted: Default::default(),
        })
    }

    /// First and last time of any sample or exact first access.
    fn time_range(&self, profile: &Profile) -> Result<(u64, u64)> {
        let mut range = (u64::MAX, 0u64);
        for batch in profile.batches::<Sample>(Some(&["time_ns"]), None)? {
            let batch = batch?;
            let times = u64s(&batch, "time_ns", &profile.table_path::<Sample>())?;
            for t in times.values().iter() {
                range = (range.0.min(*t), range.1.max(*t));
            }
        }
        for batch in profile.batches::<PageStat>(Some(&["first_access_ns"]), None)? {
            let batch = batch?;
            let times = u64s(&batch, "first_access_ns", &profile.table_path::<PageStat>())?;
            for t in times.values().iter() {
                range = (range.0.min(*t), range.1.max(*t));
            }
        }
        Ok(if range.0 > range.1 { (0, 0) } else { range })
    }

    fn thread(&mut self, pid: u32, tid: u32) -> u32 {
        let threads = &mut self.threads;
        *self.thread_index.entry((pid, tid)).or_insert_with(|| {
            // A thread only the data knows: after its process's known threads.
            let next = threads
                .iter()
                .filter(|t| t.pid == pid)
                .map(|t| t.logical_id.saturating_add(1))
                .max()
                .unwrap_or(0);
            threads.push(ThreadInfo {
                pid,
                tid,
                logical_id: next,
                name: None,
            });
            threads.len() as u32 - 1
        })
    }

    fn page(&mut self, pid: u32, address: u64, object: Option<u32>, time: u64) -> u32 {
        let number = address / self.page_size;
        let pages = &mut self.pages;
        let at = *self.page_index.entry((pid, number)).or_insert_with(|| {
            pages.push(Page {
                pid,
                number,
                object,
                first_ns: time,
                ..Page::default()
            });
            pages.len() as u32 - 1
        });
        let page = &mut self.pages[at as usize];
        // The object of its earliest row, whatever the rows' order (exact counts come epoch by
        // epoch, and a large page holds several of them).
        let earlier = time < page.first_ns;
        page.first_ns = page.first_ns.min(time);
        if object.is_some() && (page.object.is_none() || earlier) {
            page.object = object;
        }
        at
    }

    fn window(&self, time: u64) -> usize {
        let w = (time.saturating_sub(self.windows.start_ns) / self.windows.length_ns) as usize;
        w.min(self.cells.len() - 1)
    }

    fn add_samples(&mut self, batch: &RecordBatch, path: &Path) -> Result<()> {
        let time = u64s(batch, "time_ns", path)?;
        let address = u64s(batch, "address", path)?;
        let object = u64s(batch, "object_id", path)?;
        let pid = u32s(batch, "pid", path)?;
        let tid = u32s(batch, "tid", path)?;
        let weight = u32s(batch, "weight", path)?;
        let node = u32s(batch, "node", path)?;
        let kind = batch
            .column_by_name("kind")
            .and_then(|c| c.as_dictionary_opt::<UInt8Type>())
            .ok_or_else(|| column_error(path, "kind", "is not a dictionary of labels"))?;
        let labels = kind
            .values()
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| column_error(path, "kind", "dictionary values are not strings"))?;
        let kinds: Vec<Option<SampleKind>> = labels
            .iter()
            .map(|l| SampleKind::from_label(l.unwrap_or("")))
            .collect();
        for i in 0..batch.num_rows() {
            let Some(k) = kinds.get(kind.keys().value(i) as usize).copied().flatten() else {
                continue;
            };
            let t = time.value(i);
            let thread = self.thread(pid.value(i), tid.value(i));
            let obj = (!object.is_null(i))
                .then(|| self.object_index.get(&object.value(i)).copied())
                .flatten();
            let p = self.page(pid.value(i), address.value(i), obj, t);
            let w = weight.value(i).max(1) as u64;
            let slot = match k {
                SampleKind::Load => 0,
                SampleKind::Store => 1,
                SampleKind::Hint => 2,
                SampleKind::FirstTouch => {
                    // In a profile of faults alone, an access of unknown direction (as in the
                    // report); beside load or store samples, only who placed the page.
                    self.touched(p, thread, t, (!node.is_null(i)).then(|| node.value(i)));
                    2
                }
                // Another fault on a placed page (copy-on-write): counted as a first touch is.
                SampleKind::Fault => 2,
            };
            if !matches!(k, SampleKind::FirstTouch | SampleKind::Fault) {
                *self.weights.entry(w as u32).or_default() += 1;
                self.access_samples += 1;
            }
            if matches!(k, SampleKind::Load | SampleKind::Store) {
                self.memory_samples += 1;
            }
            let window = self.window(t);
            let counts = self.cells[window].entry((p, thread)).or_default();
            counts[slot] = counts[slot].saturating_add(w);
        }
        Ok(())
    }

    /// A first-touch fault: the earliest one says who placed the page and where.
    fn touched(&mut self, page: u32, thread: u32, time: u64, node: Option<u32>) {
        self.faulted.insert(page);
        let p = &mut self.pages[page as usize];
        if p.first_toucher.is_none() || time <= p.first_ns {
            p.first_toucher = Some(thread);
            p.first_ns = time;
            p.recorded_node = node.or(p.recorded_node);
        }
    }

    /// Exact counts by (page, thread): reads, writes, first access.
    fn read_exact(&mut self, profile: &Profile) -> Result<HashMap<CellKey, (u64, u64, u64)>> {
        let mut exact = HashMap::default();
        for batch in profile.batches::<PageStat>(None, None)? {
            for row in PageStat::from_batch(&batch?, &profile.table_path::<PageStat>())? {
                let thread = self.thread(row.pid, row.tid);
                let obj = row
                    .object_id
                    .and_then(|o| self.object_index.get(&o).copied());
                let p = self.page(row.pid, row.page, obj, row.first_access_ns);
                let e: &mut (u64, u64, u64) = exact.entry((p, thread)).or_insert((0, 0, u64::MAX));
                e.0 = e.0.saturating_add(row.reads);
                e.1 = e.1.saturating_add(row.writes);
                e.2 = e.2.min(row.first_access_ns);
                let page = &mut self.pages[p as usize];
                if self.faulted.contains(&p) {
                    continue;
                }
                // Without a sampled fault, the earliest exact first access placed the page.
                if page.first_toucher.is_none() || row.first_access_ns <= page.first_ns {
                    page.first_ns = row.first_access_ns;
                    page.first_toucher = Some(thread);
                }
            }
        }
        Ok(exact)
    }

    fn finish(
        mut self,
        exact: HashMap<CellKey, (u64, u64, u64)>,
        recorded_cpus: Option<usize>,
    ) -> Accesses {
        let source = match (exact.is_empty(), self.access_samples == 0) {
            (true, true) => CountSource::FirstTouchesOnly,
            (true, false) => CountSource::Sampled,
            (false, true) => CountSource::Exact,
            (false, false) => CountSource::ExactWithSamples,
        };
        if !exact.is_empty() {
            self.spread_exact(exact);
        }
        if self.memory_samples > 0 {
            self.drop_fault_counts();
        }
        let sample_period = median(&self.weights).unwrap_or(1);
        let active = self.active_threads();
        let oversubscribed = recorded_cpus.is_some_and(|cpus| active > cpus.max(1));
        if oversubscribed {
            self.compact_per_thread();
        }
        // Pages in (pid, number) order; cells follow the new positions.
        let mut order: Vec<u32> = (0..self.pages.len() as u32).collect();
        order.sort_by_key(|&p| (self.pages[p as usize].pid, self.pages[p as usize].number));
        let mut position = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            position[old as usize] = new as u32;
        }
        let pages: Vec<Page> = order
            .iter()
            .map(|&p| std::mem::take(&mut self.pages[p as usize]))
            .collect();
        let cells = self
            .cells
            .into_iter()
            .map(|w| {
                w.into_iter()
                    .map(|((p, thread), c)| Cell {
                        page: position[p as usize],
                        thread,
                        reads: c[0],
                        writes: c[1],
                        other: c[2],
                    })
                    .collect()
            })
            .collect();
        let windows = Windows {
            cells,
            ..self.windows
        };
        let mut accesses = Accesses::from_cells(
            self.page_size,
            source,
            self.threads,
            self.objects,
            pages,
            windows,
        );
        accesses.sample_period = sample_period;
        accesses.retimed = oversubscribed;
        accesses
    }

    /// Beside load or store samples, the faults' counts (slot 2: first touches, later faults,
    /// hints) are not accesses; the pages and who first touched them stay. Runs after the
    /// exact totals are spread, which use the faults only to say when a pair was used.
    fn drop_fault_counts(&mut self) {
        for cells in &mut self.cells {
            cells.retain(|_, c| {
                c[2] = 0;
                c[0] > 0 || c[1] > 0
            });
        }
    }

    fn active_threads(&self) -> usize {
        let mut seen = vec![false; self.threads.len()];
        for cells in &self.cells {
            for (_, thread) in cells.keys() {
                seen[*thread as usize] = true;
            }
        }
        seen.iter().filter(|s| **s).count()
    }

    /// The recording machine had fewer CPUs than the program had threads, so threads that would
    /// run at once took turns, and a window saw fewer of them than the target machine would.
    /// Each thread's active windows are closed up from the start, as if it had had a CPU of its
    /// own from the beginning; threads that waited on others are then early, an error smaller
    /// than the turns taken.
    fn compact_per_thread(&mut self) {
        let mut active: Vec<Vec<bool>> = vec![vec![false; self.cells.len()]; self.threads.len()];
        for (w, cells) in self.cells.iter().enumerate() {
            for (_, thread) in cells.keys() {
                active[*thread as usize][w] = true;
            }
        }
        let rank: Vec<Vec<usize>> = active
            .iter()
            .map(|row| {
                let mut seen = 0;
                row.iter()
                    .map(|&a| {
                        let r = seen;
                        seen += usize::from(a);
                        r
                    })
                    .collect()
            })
            .collect();
        let count = active
            .iter()
            .map(|row| row.iter().filter(|a| **a).count())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut cells: Vec<HashMap<CellKey, Counts>> = vec![HashMap::default(); count];
        for (w, window) in std::mem::take(&mut self.cells).into_iter().enumerate() {
            for (key, c) in window {
                let to = rank[key.1 as usize][w];
                cells[to].insert(key, c);
            }
        }
        self.cells = cells;
    }

    /// Replaces the sampled cells of every (page, thread) with an exact total by the exact
    /// one, spread over the windows as its samples were (else in its first access's window):
    /// reads as its load samples, writes as its store samples, each as all its samples when
    /// it has none of that kind. Spread together, an initialisation's writes would show in
    /// every window that reads the page, and a copy per node after it would look useless.
    fn spread_exact(&mut self, exact: HashMap<CellKey, (u64, u64, u64)>) {
        // Per window: samples of reads (loads and others), of writes, of every kind.
        let mut sampled: HashMap<CellKey, Vec<(usize, [u64; 3])>> = HashMap::default();
        for (w, cells) in self.cells.iter().enumerate() {
            for (key, c) in cells {
                if exact.contains_key(key) {
                    let reads = c[0].saturating_add(c[2]);
                    let all = reads.saturating_add(c[1]);
                    sampled
                        .entry(*key)
                        .or_default()
                        .push((w, [reads, c[1], all]));
                }
            }
        }
        for cells in &mut self.cells {
            cells.retain(|key, _| !exact.contains_key(key));
        }
        for (key, (reads, writes, first)) in exact {
            let spread = sampled.remove(&key).unwrap_or_default();
            let total = |k: usize| spread.iter().map(|s| s.1[k]).sum::<u64>();
            let all = total(2);
            if all == 0 {
                let w = self.window(first);
                self.cells[w].insert(key, [reads, writes, 0]);
                continue;
            }
            // By which kind of sample each count is spread: its own, else all of them.
            let by = |k: usize| if total(k) > 0 { k } else { 2 };
            let (read_by, write_by) = (by(0), by(1));
            let (read_total, write_total) = (total(read_by), total(write_by));
            for (w, n) in &spread {
                let share =
                    |x: u64, k: usize, of: u64| ((x as u128 * n[k] as u128) / of as u128) as u64;
                let cell = [
                    share(reads, read_by, read_total),
                    share(writes, write_by, write_total),
                    0,
                ];
                if cell[0] > 0 || cell[1] > 0 {
                    self.cells[*w].insert(key, cell);
                }
            }
        }
    }
}

fn median(weights: &HashMap<u32, u64>) -> Option<u64> {
    let total: u64 = weights.values().sum();
    let mut sorted: Vec<(&u32, &u64)> = weights.iter().collect();
    sorted.sort();
    let mut seen = 0;
    for (w, n) in sorted {
        seen += n;
        if seen * 2 >= total {
            return Some(*w as u64);
        }
    }
    None
}

/// Readable frames per site key, innermost first.
fn site_frames(sites: Vec<SiteFrame>) -> HashMap<u64, Vec<String>> {
    let mut by_key: HashMap<u64, Vec<(u32, String)>> = HashMap::default();
    for s in sites {
        let text = match (&s.function, &s.file, s.line) {
            (Some(f), Some(file), Some(line)) => format!("{f} ({file}:{line})"),
            (Some(f), _, _) => f.clone(),
            _ => format!("{}+{:#x}", s.module, s.offset),
        };
        by_key.entry(s.site_key).or_default().push((s.depth, text));
    }
    by_key
        .into_iter()
        .map(|(k, mut v)| {
            v.sort();
            (k, v.into_iter().map(|f| f.1).collect())
        })
        .collect()
}

fn object_info(
    o: &Object,
    frames: &HashMap<u64, Vec<String>>,
    threads: &HashMap<(u32, u32), u32>,
) -> ObjectInfo {
    let kind = o.kind.label().to_string();
    ObjectInfo {
        id: o.object_id,
        pid: o.pid,
        module: (kind == "static").then(|| module_of(&o.name)).flatten(),
        kind,
        name: o.name.clone(),
        start: o.start,
        size: o.size,
        site_key: o.site_key,
        frames: o
            .site_key
            .and_then(|k| frames.get(&k).cloned())
            .unwrap_or_default(),
        alloc_thread: o.alloc_tid.and_then(|t| threads.get(&(o.pid, t)).copied()),
    }
}

/// Static objects are named `symbol (module)` when the module is not the program itself.
fn module_of(name: &str) -> Option<String> {
    let open = name.rfind(" (")?;
    name.ends_with(')')
        .then(|| name[open + 2..name.len() - 1].to_string())
}

fn u64s<'a>(
    batch: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow_array::PrimitiveArray<UInt64Type>, FormatError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<UInt64Type>())
        .ok_or_else(|| column_error(path, name, "is missing or not of type uint64"))
}

fn u32s<'a>(
    batch: &'a RecordBatch,
    name: &str,
    path: &Path,
) -> Result<&'a arrow_array::PrimitiveArray<UInt32Type>, FormatError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<UInt32Type>())
        .ok_or_else(|| column_error(path, name, "is missing or not of type uint32"))
}

fn column_error(path: &Path, column: &str, problem: &str) -> FormatError {
    FormatError::Column {
        path: path.to_path_buf(),
        column: column.to_string(),
        problem: problem.to_string(),
    }
}

#[cfg(test)]
mod tests;
