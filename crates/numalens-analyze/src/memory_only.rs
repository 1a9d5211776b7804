//! In a profile with load or store samples, those alone are accesses: the page faults beside
//! them (first touches, later faults, NUMA-balancing hints) say who placed a page, not how much
//! it is used, and a first-touched page that a load sample also hit would be counted twice. The
//! report's sample pass keeps them apart (`samples.rs`); the simulator's loader counts every
//! fault as an access of unknown direction, as a profile of page faults alone needs, so its
//! counts are narrowed here for the what-if table and `numalens simulate`.

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt8Type;
use numalens_format::{Label, Profile, Sample, SampleKind};
use numalens_place::{Accesses, CountSource};

use crate::error::Result;

/// Whether some row of `profile`'s samples is a load or a store: one column is read, until the
/// first such row.
pub fn has_memory_samples(profile: &Profile) -> Result<bool> {
    for batch in profile.batches::<Sample>(Some(&["kind"]), None)? {
        let batch = batch?;
        let Some(kind) = batch
            .column_by_name("kind")
            .and_then(|c| c.as_dictionary_opt::<UInt8Type>())
        else {
            continue;
        };
        let Some(labels) = kind.values().as_string_opt::<i32>() else {
            continue;
        };
        let memory: Vec<bool> = labels
            .iter()
            .map(|l| {
                matches!(
                    SampleKind::from_label(l.unwrap_or("")),
                    Some(SampleKind::Load | SampleKind::Store)
                )
            })
            .collect();
        let keys = kind.keys();
        if (0..keys.len()).any(|i| keys.is_valid(i) && memory[keys.value(i) as usize]) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `accesses` of a profile whose samples hold loads or stores (`memory_samples`), without the
/// counts of its page faults; the pages and who first touched them stay. Exact counts, and
/// profiles of faults alone, are returned as they are.
pub fn without_fault_counts(accesses: Accesses, memory_samples: bool) -> Accesses {
    if !memory_samples || accesses.source != CountSource::Sampled {
        return accesses;
    }
    let (sample_period, retimed) = (accesses.sample_period, accesses.retimed);
    let mut windows = accesses.windows;
    for cells in &mut windows.cells {
        for c in cells.iter_mut() {
            c.other = 0;
        }
        cells.retain(|c| c.total() > 0);
    }
    let mut narrowed = Accesses::from_cells(
        accesses.page_size,
        accesses.source,
        accesses.threads,
        accesses.objects,
        accesses.pages,
        windows,
    );
    narrowed.sample_period = sample_period;
    narrowed.retimed = retimed;
    narrowed
}
