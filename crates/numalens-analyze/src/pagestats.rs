//! The pass over `page_stats`: exact per-thread page counts, in parallel over row groups, into
//! the same per-page counters as the samples.

use std::path::Path;
use std::sync::Mutex;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{Array, PrimitiveArray, RecordBatch};
use numalens_format::{FormatError, PageStat, Profile};

use crate::access::{AccessTally, NO_OBJECT, User};
use crate::samples::SampleFilter;

const COLUMNS: &[&str] = &[
    "pid",
    "tid",
    "page",
    "reads",
    "writes",
    "first_access_ns",
    "object_id",
];

/// Exact counts of the selected threads and objects.
pub(crate) fn tally(
    profile: &Profile,
    filter: &SampleFilter,
    workers: usize,
) -> Result<AccessTally, FormatError> {
    let path = profile.table_path::<PageStat>();
    let pool: Mutex<Vec<AccessTally>> = Mutex::new(Vec::new());
    let lock = || pool.lock().unwrap_or_else(|e| e.into_inner());
    profile.for_each_batch_parallel::<PageStat, _>(COLUMNS, workers, |batch| {
        let popped = lock().pop();
        let mut tally =
            popped.unwrap_or_else(|| AccessTally::new(filter.page_size, filter.dense.clone()));
        let result = add_batch(&mut tally, &batch, filter, &path);
        lock().push(tally);
        result
    })?;
    let mut total = AccessTally::new(filter.page_size, filter.dense.clone());
    for tally in pool.into_inner().unwrap_or_else(|e| e.into_inner()) {
        total.merge(tally);
    }
    Ok(total)
}

fn add_batch(
    tally: &mut AccessTally,
    batch: &RecordBatch,
    filter: &SampleFilter,
    path: &Path,
) -> Result<(), FormatError> {
    let u32s = |name: &str| -> Result<&PrimitiveArray<UInt32Type>, FormatError> {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<UInt32Type>())
            .ok_or_else(|| bad(path, name, "uint32"))
    };
    let u64s = |name: &str| -> Result<&PrimitiveArray<UInt64Type>, FormatError> {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<UInt64Type>())
            .ok_or_else(|| bad(path, name, "uint64"))
    };
    let (pid, tid, page) = (u32s("pid")?, u32s("tid")?, u64s("page")?);
    let (reads, writes, first) = (u64s("reads")?, u64s("writes")?, u64s("first_access_ns")?);
    // Profiles of format 1.1 have no object column: pages are then found by address later.
    let object = batch
        .column_by_name("object_id")
        .and_then(|c| c.as_primitive_opt::<UInt64Type>());
    let mut current = None;
    for i in 0..batch.num_rows() {
        let key = (pid.value(i), tid.value(i));
        let thread = match current {
            Some((k, id)) if k == key => id,
            _ => {
                let id = filter
                    .thread_selected(key)
                    .then(|| filter.thread_ids.id(key));
                current = Some((key, id));
                id
            }
        };
        let Some(thread) = thread else { continue };
        let object_pos = object
            .filter(|o| !o.is_null(i))
            .and_then(|o| filter.objects.get(o.value(i)));
        if let Some(chosen) = &filter.object_selected
            && !object_pos.is_some_and(|o| chosen[o as usize])
        {
            continue;
        }
        let user = User {
            thread,
            reads: reads.value(i),
            writes: writes.value(i),
            first_ns: first.value(i),
            last_ns: first.value(i),
            ..User::default()
        };
        let page_key = (key.0, page.value(i) / filter.page_size);
        tally.add_exact(page_key, object_pos.unwrap_or(NO_OBJECT), user);
    }
    Ok(())
}

fn bad(path: &Path, column: &str, ty: &str) -> FormatError {
    FormatError::Column {
        path: path.to_path_buf(),
        column: column.to_string(),
        problem: format!("is missing or not of type {ty}"),
    }
}
