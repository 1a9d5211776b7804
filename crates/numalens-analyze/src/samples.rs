//! The pass over the samples table: projected columns, batch by batch, in parallel over row
//! groups, into per-object and per-thread counters. Memory grows with objects and threads, never
//! with samples.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt32Type, UInt64Type};
use arrow_array::{Array, DictionaryArray, PrimitiveArray, RecordBatch, StringArray};
use numalens_format::{FormatError, Label, Profile, Sample, SampleKind};

use crate::access::{
    Access, AccessTally, Direction, NO_OBJECT, ThreadIds, Touch, interleaved, region,
};
use crate::index::ObjectIndex;

/// The only sample columns the report reads.
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

/// Counters per sample kind, indexed by `SampleKind::code()`.
pub(crate) type Kinds = [u64; 5];

const FIRST_TOUCH: usize = SampleKind::FirstTouch as usize;
const LOAD: usize = SampleKind::Load as usize;
const STORE: usize = SampleKind::Store as usize;

/// How many rows ahead the page counters are prefetched: enough to cover a memory access.
const PREFETCH_AHEAD: usize = 16;

/// Node ids below this are counted in a vector; Linux has at most 1024 nodes.
const DENSE_NODES: u32 = 4096;

/// (pid, tid) of a thread.
pub(crate) type ThreadKey = (u32, u32);

/// Which samples count.
pub(crate) struct SampleFilter<'a> {
    pub objects: &'a ObjectIndex,
    /// By object position; `None` selects every sample, attributed or not.
    pub object_selected: Option<Vec<bool>>,
    /// `None` selects every thread.
    pub threads: Option<Vec<ThreadKey>>,
    pub thread_ids: &'a ThreadIds,
    /// (start, size) by object position.
    pub ranges: Vec<(u64, u64)>,
    pub dense: crate::access::DensePages,
    pub page_size: u64,
}

impl SampleFilter<'_> {
    pub(crate) fn thread_selected(&self, key: ThreadKey) -> bool {
        self.threads.as_ref().is_none_or(|t| t.contains(&key))
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectTally {
    pub kinds: Kinds,
    pub weight: u64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadTally {
    pub kinds: Kinds,
    pub weight: u64,
    /// Samples by node id (dense part).
    pub nodes: Vec<u64>,
    /// Samples on nodes with ids of `DENSE_NODES` or more.
    pub far_nodes: HashMap<u32, u64>,
    pub unknown_node: u64,
}

impl ThreadTally {
    fn add_node(&mut self, node: u32, samples: u64) {
        if node >= DENSE_NODES {
            *self.far_nodes.entry(node).or_default() += samples;
            return;
        }
        let node = node as usize;
        if self.nodes.len() <= node {
            self.nodes.resize(node + 1, 0);
        }
        self.nodes[node] += samples;
    }

    /// (node, samples) for every node with samples.
    pub(crate) fn node_counts(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let dense = self.nodes.iter().enumerate();
        let dense = dense.filter(|(_, n)| **n > 0).map(|(i, n)| (i as u32, *n));
        dense.chain(self.far_nodes.iter().map(|(k, v)| (*k, *v)))
    }

    fn merge(&mut self, other: ThreadTally) {
        add_kinds(&mut self.kinds, &other.kinds);
        self.weight += other.weight;
        for (node, samples) in other.node_counts() {
            self.add_node(node, samples);
        }
        self.unknown_node += other.unknown_node;
    }
}

/// Everything counted over the selected samples.
#[derive(Debug)]
pub(crate) struct SampleTally {
    /// By object position.
    pub objects: Vec<ObjectTally>,
    pub threads: HashMap<ThreadKey, ThreadTally>,
    /// First-touch samples by (object position, thread).
    pub first_touches: HashMap<(u32, ThreadKey), u64>,
    /// Selected samples not attributed to a known object.
    pub unattributed: Kinds,
    /// The accesses: the load and store samples, or, in a profile without any, the page faults.
    pub access: AccessTally,
    /// The page faults (first touches, later faults, hints) while the pass is under way: the
    /// accesses of a profile without load or store samples, and in one with them only the
    /// first touches, which say who placed each page (a fault is no load or store, and
    /// counting both would count every first-touched page twice).
    faults: AccessTally,
    /// Some row of the profile, selected or not, is a load or store sample.
    pub memory_samples: bool,
}

pub(crate) fn add_kinds(into: &mut Kinds, from: &Kinds) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// Counts the selected samples of `profile` on `workers` threads.
pub(crate) fn tally(
    profile: &Profile,
    filter: &SampleFilter,
    object_count: usize,
    workers: usize,
) -> Result<SampleTally, FormatError> {
    let path = profile.table_path::<Sample>();
    // One tally per worker at most: a batch takes a free one and gives it back.
    let pool: Mutex<Vec<SampleTally>> = Mutex::new(Vec::new());
    let take = || pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let give = |t| pool.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    let fresh = || SampleTally::new(object_count, filter);
    profile.for_each_batch_parallel::<Sample, _>(COLUMNS, workers, |batch| {
        let mut tally = take().unwrap_or_else(fresh);
        let result = tally.add_batch(&batch, filter, &path);
        give(tally);
        result
    })?;
    let tallies = pool.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut total = fresh();
    for tally in tallies {
        total.merge(tally);
    }
    total.settle_accesses();
    Ok(total)
}

/// The sample columns of one batch.
struct Columns<'a> {
    time: &'a PrimitiveArray<UInt64Type>,
    address: &'a PrimitiveArray<UInt64Type>,
    pid: &'a PrimitiveArray<UInt32Type>,
    tid: &'a PrimitiveArray<UInt32Type>,
    kind: &'a DictionaryArray<UInt8Type>,
    weight: &'a PrimitiveArray<UInt32Type>,
    object: &'a PrimitiveArray<UInt64Type>,
    node: &'a PrimitiveArray<UInt32Type>,
}

impl<'a> Columns<'a> {
    fn of(batch: &'a RecordBatch, path: &Path) -> Result<Self, FormatError> {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| column_error(path, name, "is missing"))
        };
        let u32s = |name: &str| {
            column(name)?
                .as_primitive_opt::<UInt32Type>()
                .ok_or_else(|| column_error(path, name, "is not of type uint32"))
        };
        let u64s = |name: &str| {
            column(name)?
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(|| column_error(path, name, "is not of type uint64"))
        };
        Ok(Columns {
            time: u64s("time_ns")?,
            address: u64s("address")?,
            pid: u32s("pid")?,
            tid: u32s("tid")?,
            kind: column("kind")?
                .as_dictionary_opt::<UInt8Type>()
                .ok_or_else(|| column_error(path, "kind", "is not a dictionary of labels"))?,
            weight: u32s("weight")?,
            object: u64s("object_id")?,
            node: u32s("node")?,
        })
    }

    /// Sample kind per dictionary key; labels of newer format versions are `None` (skipped).
    fn kind_codes(&self, path: &Path) -> Result<Vec<Option<usize>>, FormatError> {
        let labels = self
            .kind
            .values()
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| column_error(path, "kind", "dictionary values are not strings"))?;
        Ok(labels
            .iter()
            .map(|l| SampleKind::from_label(l.unwrap_or("")).map(|k| k.code() as usize))
            .collect())
    }
}

fn column_error(path: &Path, column: &str, problem: &str) -> FormatError {
    FormatError::Column {
        path: path.to_path_buf(),
        column: column.to_string(),
        problem: problem.to_string(),
    }
}

impl SampleTally {
    fn new(object_count: usize, filter: &SampleFilter) -> Self {
        SampleTally {
            objects: vec![ObjectTally::default(); object_count],
            threads: HashMap::new(),
            first_touches: HashMap::new(),
            unattributed: [0; 5],
            access: AccessTally::new(filter.page_size, filter.dense.clone()),
            faults: AccessTally::new(filter.page_size, filter.dense.clone()),
            memory_samples: false,
        }
    }

    /// Which samples are the accesses, once every batch is in: the load and store samples when
    /// the profile has any (with the first touches' pages and placers), else the page faults.
    fn settle_accesses(&mut self) {
        let faults = std::mem::replace(&mut self.faults, AccessTally::new(1, Default::default()));
        if self.memory_samples {
            self.access.take_touches(faults);
        } else {
            self.access = faults;
        }
    }

    fn add_batch(
        &mut self,
        batch: &RecordBatch,
        filter: &SampleFilter,
        path: &Path,
    ) -> Result<(), FormatError> {
        let c = Columns::of(batch, path)?;
        let codes = c.kind_codes(path)?;
        let keys = c.kind.keys();
        // Rows come grouped by thread, so the thread's counters are looked up once per run.
        let mut current: Option<(ThreadKey, bool)> = None;
        let mut thread_id = 0;
        let mut thread = ThreadTally::default();
        let mut first_touch_run: Option<((u32, ThreadKey), u64)> = None;
        // Store samples, to find those whose line another thread wrote about the same time.
        let mut writes: Vec<Access> = Vec::new();
        let rows = batch.num_rows();
        if !self.memory_samples {
            self.memory_samples = (0..rows)
                .any(|i| matches!(codes[keys.value(i) as usize], Some(LOAD) | Some(STORE)));
        }
        for i in 0..rows {
            if i + PREFETCH_AHEAD < rows {
                self.prefetch_row(&c, filter, i + PREFETCH_AHEAD);
            }
            let key = (c.pid.value(i), c.tid.value(i));
            let selected = match current {
                Some((k, selected)) if k == key => selected,
                _ => {
                    if let Some((k, true)) = current {
                        self.put_thread(k, std::mem::take(&mut thread));
                    }
                    let selected = filter.thread_selected(key);
                    if selected {
                        thread_id = filter.thread_ids.id(key);
                    }
                    current = Some((key, selected));
                    selected
                }
            };
            let Some(kind) = (if selected {
                codes[keys.value(i) as usize]
            } else {
                None
            }) else {
                continue;
            };
            let object = if c.object.is_null(i) {
                None
            } else {
                filter.objects.get(c.object.value(i))
            };
            if let Some(chosen) = &filter.object_selected
                && !object.is_some_and(|o| chosen[o as usize])
            {
                continue;
            }
            let weight = c.weight.value(i) as u64;
            let access = Access {
                pid: key.0,
                thread: thread_id,
                address: c.address.value(i),
                time_ns: c.time.value(i),
                object: object.unwrap_or(NO_OBJECT),
                weight,
                direction: match kind {
                    LOAD => Direction::Read,
                    STORE => Direction::Write,
                    _ => Direction::Unknown,
                },
            };
            self.add_access(
                &access,
                filter,
                kind,
                (!c.node.is_null(i)).then(|| c.node.value(i)),
            );
            if kind == STORE {
                writes.push(access);
            }
            thread.kinds[kind] += 1;
            thread.weight += weight;
            if c.node.is_null(i) {
                thread.unknown_node += 1;
            } else {
                thread.add_node(c.node.value(i), 1);
            }
            let Some(object) = object else {
                self.unattributed[kind] += 1;
                continue;
            };
            let tally = &mut self.objects[object as usize];
            tally.kinds[kind] += 1;
            tally.weight += weight;
            if kind == FIRST_TOUCH {
                self.count_first_touch(&mut first_touch_run, (object, key));
            }
        }
        if let Some((k, true)) = current {
            self.put_thread(k, thread);
        }
        if let Some((k, n)) = first_touch_run {
            *self.first_touches.entry(k).or_default() += n;
        }
        let marked = interleaved(&mut writes);
        for (a, _) in writes.iter().zip(marked).filter(|(_, m)| *m) {
            self.access.interleaved(a);
        }
        Ok(())
    }

    /// Starts loading the page counters row `i` will update.
    fn prefetch_row(&self, c: &Columns, filter: &SampleFilter, i: usize) {
        if c.object.is_null(i) {
            return;
        }
        if let Some(object) = filter.objects.get(c.object.value(i)) {
            self.access.prefetch(c.address.value(i), object);
        }
    }

    /// The access counters and the timeline of the object region: a load or store sample's in
    /// the accesses, a page fault's in the faults (see [`SampleTally::settle_accesses`]).
    fn add_access(&mut self, a: &Access, filter: &SampleFilter, kind: usize, node: Option<u32>) {
        let into = if kind == LOAD || kind == STORE {
            &mut self.access
        } else {
            &mut self.faults
        };
        into.add(a);
        if kind == FIRST_TOUCH {
            let touch = Touch {
                time_ns: a.time_ns,
                thread: a.thread,
                node,
            };
            into.touch(a.pid, a.address, a.object, touch);
        }
        if a.object != NO_OBJECT {
            let (start, size) = filter.ranges[a.object as usize];
            let r = region(a.address, start, size);
            into.add_time(a.object, r, a.thread, a.time_ns, a.weight);
        }
    }

    /// Consecutive first touches of one thread in one object are counted before hashing.
    fn count_first_touch(
        &mut self,
        run: &mut Option<((u32, ThreadKey), u64)>,
        key: (u32, ThreadKey),
    ) {
        match run {
            Some((k, n)) if *k == key => *n += 1,
            _ => {
                if let Some((k, n)) = run.replace((key, 1)) {
                    *self.first_touches.entry(k).or_default() += n;
                }
            }
        }
    }

    fn put_thread(&mut self, key: ThreadKey, tally: ThreadTally) {
        match self.threads.get_mut(&key) {
            Some(existing) => existing.merge(tally),
            None => {
                self.threads.insert(key, tally);
            }
        }
    }

    fn merge(&mut self, other: SampleTally) {
        for (mine, theirs) in self.objects.iter_mut().zip(&other.objects) {
            add_kinds(&mut mine.kinds, &theirs.kinds);
            mine.weight += theirs.weight;
        }
        for (key, tally) in other.threads {
            self.put_thread(key, tally);
        }
        for (key, n) in other.first_touches {
            *self.first_touches.entry(key).or_default() += n;
        }
        add_kinds(&mut self.unattributed, &other.unattributed);
        self.access.merge(other.access);
        self.faults.merge(other.faults);
        self.memory_samples |= other.memory_samples;
    }
}
