//! Analysis of a numalens profile: its tables in, a [`ReportModel`] out.
//!
//! Pure: reads the profile and nothing else, writes nothing. The samples table is streamed as
//! projected batches in parallel over row groups, so memory grows with the number of objects and
//! threads, not with the number of samples. Renderers (text, JSON, HTML) take the model only.

mod assemble;
mod error;
mod index;
pub mod model;
mod names;
mod pages;
mod samples;
mod sites;

use numalens_format::{Object, Profile, Thread};

pub use error::{AnalyzeError, Result};
pub use model::ReportModel;

use index::ObjectIndex;
use samples::{SampleFilter, ThreadKey};

/// What to analyse and show.
#[derive(Debug, Clone)]
pub struct Options {
    /// Objects listed, at most.
    pub top: usize,
    /// Only objects with this name (exact match, else those containing it) and their samples.
    pub object: Option<String>,
    /// Only samples of threads with this logical id.
    pub thread: Option<u32>,
    /// Threads reading the samples table in parallel.
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top: 20,
            object: None,
            thread: None,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Builds the report model of `profile`.
pub fn analyze(profile: &Profile, options: &Options) -> Result<ReportModel> {
    let objects = profile.read_all::<Object>()?;
    let threads = profile.read_all::<Thread>()?;
    let filter = SampleFilter {
        objects: &ObjectIndex::new(&objects),
        object_selected: select_objects(&objects, options.object.as_deref())?,
        threads: select_threads(&threads, options.thread)?,
    };
    let tally = samples::tally(profile, &filter, objects.len(), options.workers)?;
    let pages = pages::PageMap::read(profile)?;
    let sites = sites::read_sites(profile)?;
    let code = sites::read_code_names(profile)?;
    let tables = assemble::Tables {
        objects: &objects,
        threads: &threads,
        sites: &sites,
        code: &code,
        pages: &pages,
        page_size: profile.meta().page_size.max(1),
        object_selected: filter.object_selected.as_deref(),
    };
    Ok(assemble::model(profile, options, &tables, &tally))
}

/// Objects named `wanted` (exactly, or else containing it); an error with near matches when none.
fn select_objects(objects: &[Object], wanted: Option<&str>) -> Result<Option<Vec<bool>>> {
    let Some(wanted) = wanted else {
        return Ok(None);
    };
    let mut chosen: Vec<bool> = objects.iter().map(|o| o.name == wanted).collect();
    if !chosen.contains(&true) {
        chosen = objects.iter().map(|o| o.name.contains(wanted)).collect();
    }
    if !chosen.contains(&true) {
        return Err(AnalyzeError::UnknownObject {
            name: wanted.to_string(),
            near: names::near_matches(wanted, objects.iter().map(|o| o.name.as_str())),
        });
    }
    Ok(Some(chosen))
}

/// Threads with logical id `wanted` (one per process); an error listing the ids when none.
fn select_threads(threads: &[Thread], wanted: Option<u32>) -> Result<Option<Vec<ThreadKey>>> {
    let Some(wanted) = wanted else {
        return Ok(None);
    };
    let keys: Vec<ThreadKey> = threads
        .iter()
        .filter(|t| t.logical_id == wanted)
        .map(|t| (t.pid, t.tid))
        .collect();
    if keys.is_empty() {
        let mut known: Vec<u32> = threads.iter().map(|t| t.logical_id).collect();
        known.sort_unstable();
        known.dedup();
        return Err(AnalyzeError::UnknownThread { id: wanted, known });
    }
    Ok(Some(keys))
}
