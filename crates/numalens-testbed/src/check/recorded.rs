//! A profile read into the few plain values the checks need, through `numalens_format::Profile`
//! (the same reader every other stage uses).

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array, UInt64Array};
use numalens_format::{Object, PageNodes, Profile, Row, Sample, SampleKind, SiteFrame, Thread};

/// Name of the optional samples column giving the size of the page a fault mapped (THP).
pub const SAMPLE_PAGE_SIZE_COLUMN: &str = "page_size";

/// One sample, with what the checks look at.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub tid: u32,
    pub address: u64,
    pub kind: SampleKind,
    pub node: Option<u32>,
    pub object_id: Option<u64>,
    /// Bytes the fault mapped, from the `page_size` column when the profile has it.
    pub page_size: Option<u64>,
}

/// One run of `page_nodes`: `pages` pages of `page_size` bytes from `start`.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRun {
    pub start: u64,
    pub pages: u64,
    pub page_size: u64,
    pub node: Option<u32>,
    pub status: String,
    pub source: String,
}

/// The parts of a profile the record checks use.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    /// Base page size (`meta.json`).
    pub page_size: u64,
    pub numa_balancing_mode: Option<u32>,
    pub complete: bool,
    pub incomplete_reasons: Vec<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub samples: Vec<Fault>,
    /// Whether the samples table has the `page_size` column at all.
    pub samples_have_page_size: bool,
    /// `(tid, logical id)` of every thread.
    pub threads: Vec<(u32, u32)>,
    pub objects: Vec<Object>,
    /// Frames of each site key, by depth.
    pub sites: BTreeMap<u64, Vec<SiteFrame>>,
    pub page_runs: Vec<PageRun>,
}

impl Recorded {
    pub fn load(dir: &Path) -> Result<Recorded, String> {
        let profile = Profile::open(dir).map_err(|e| e.to_string())?;
        let meta = profile.meta();
        let exit = meta.completeness.exit.as_ref();
        let mut r = Recorded {
            page_size: meta.page_size,
            numa_balancing_mode: meta.numa_balancing.as_ref().map(|b| b.mode),
            complete: meta.completeness.complete,
            incomplete_reasons: meta.completeness.reasons.clone(),
            exit_code: exit.and_then(|e| e.code),
            exit_signal: exit.and_then(|e| e.signal),
            ..Recorded::default()
        };
        let e = |e: numalens_format::FormatError| e.to_string();
        let path = profile.table_path::<Sample>();
        // All columns, so that a column newer than this crate's `Sample` (page_size) is there too.
        for batch in profile.batches::<Sample>(None, None).map_err(e)? {
            let batch = batch.map_err(e)?;
            let sizes = page_sizes(&batch)?;
            r.samples_have_page_size |= sizes.is_some();
            for (i, s) in Sample::from_batch(&batch, &path)
                .map_err(e)?
                .into_iter()
                .enumerate()
            {
                r.samples.push(Fault {
                    tid: s.tid,
                    address: s.address,
                    kind: s.kind,
                    node: s.node,
                    object_id: s.object_id,
                    page_size: sizes.as_ref().and_then(|v| v[i]),
                });
            }
        }
        r.threads = profile
            .read_all::<Thread>()
            .map_err(e)?
            .into_iter()
            .map(|t| (t.tid, t.logical_id))
            .collect();
        r.objects = profile.read_all::<Object>().map_err(e)?;
        for f in profile.read_all::<SiteFrame>().map_err(e)? {
            r.sites.entry(f.site_key).or_default().push(f);
        }
        r.page_runs = profile
            .read_all::<PageNodes>()
            .map_err(e)?
            .into_iter()
            .map(|p| PageRun {
                start: p.start,
                pages: p.pages,
                page_size: p.page_size,
                node: p.node,
                status: p.status,
                source: p.source,
            })
            .collect();
        Ok(r)
    }

    pub fn logical_id(&self, tid: u32) -> Option<u32> {
        self.threads.iter().find(|t| t.0 == tid).map(|t| t.1)
    }
}

/// The `page_size` column of a samples batch, if the profile has one (u64 or u32).
fn page_sizes(batch: &RecordBatch) -> Result<Option<Vec<Option<u64>>>, String> {
    let Some(column) = batch.column_by_name(SAMPLE_PAGE_SIZE_COLUMN) else {
        return Ok(None);
    };
    fn collect<A: Array>(a: &A, get: impl Fn(usize) -> u64) -> Vec<Option<u64>> {
        (0..a.len())
            .map(|i| (!a.is_null(i)).then(|| get(i)))
            .collect()
    }
    let column: &ArrayRef = column;
    if let Some(a) = column.as_any().downcast_ref::<UInt64Array>() {
        return Ok(Some(collect(a, |i| a.value(i))));
    }
    if let Some(a) = column.as_any().downcast_ref::<UInt32Array>() {
        return Ok(Some(collect(a, |i| u64::from(a.value(i)))));
    }
    Err(format!(
        "samples column {SAMPLE_PAGE_SIZE_COLUMN} has type {}, expected an unsigned integer",
        column.data_type()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_format::synth::SynthConfig;

    #[test]
    fn reads_a_profile_written_by_the_format_crate() {
        let dir = std::env::temp_dir().join(format!("nl-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let meta = numalens_format::synth::example_meta("prog", "CLOCK_MONOTONIC");
        numalens_format::synth::write_example_profile(&dir, SynthConfig::default(), 1000, meta)
            .unwrap();
        let r = Recorded::load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(r.samples.len(), 1000);
        assert!(!r.threads.is_empty() && !r.objects.is_empty());
        assert!(r.complete);
        // Every sample either has a page size or none does: the column is all or nothing.
        let with = r.samples.iter().filter(|s| s.page_size.is_some()).count();
        assert!(with == 0 || r.samples_have_page_size);
    }

    #[test]
    fn a_missing_profile_is_an_error_naming_it() {
        let e = Recorded::load(Path::new("/nonexistent/run.numalens")).unwrap_err();
        assert!(e.contains("/nonexistent/run.numalens"), "{e}");
    }
}
