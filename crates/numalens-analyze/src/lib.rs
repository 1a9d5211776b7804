//! Analysis of a numalens profile: its tables in, a [`ReportModel`] out.
//!
//! Pure: reads the profile and nothing else, writes nothing. The samples table is streamed as
//! projected batches in parallel over row groups, so memory grows with the number of objects and
//! threads, not with the number of samples. Renderers (text, JSON, HTML) take the model only.

mod access;
mod assemble;
mod basis;
mod build;
mod classify;
mod coverage;
mod engine;
mod error;
mod fill;
mod finding_groups;
pub use finding_groups::FindingEntry;
mod findings;
mod groups;
mod hitm;
mod index;
mod latency;
mod limits;
mod measured;
pub mod model;
pub use limits::UNKNOWN;
mod names;
mod pages;
mod pagestats;
mod phases;
mod placement;
mod samples;
mod side_tables;
mod sites;
mod sources;
mod stats;
mod timeline;
mod whatif;

use std::collections::HashMap;

use numalens_format::{Object, Profile, Thread};

pub use error::{AnalyzeError, Result};
pub use fill::site_text;
pub use model::ReportModel;
/// How reports shorten a long function name (a C++ template's) where they name a site.
pub use numalens_format::short_function_name;
pub use placement::{DEFAULT_PRESET, WhatIf};

use access::ThreadIds;
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
    /// Place threads and pages on this machine model instead of the recorded placement.
    pub what_if: Option<WhatIf>,
    /// Block size of the communication matrix in bytes; `None` is one page. Must be a multiple
    /// of the page size.
    pub block_size: Option<u64>,
    /// Simulate every placement policy and each finding's fix (docs/SIMULATOR.md).
    pub simulate: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top: 20,
            object: None,
            thread: None,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            what_if: None,
            block_size: None,
            simulate: true,
        }
    }
}

/// Builds the report model of `profile`.
pub fn analyze(profile: &Profile, options: &Options) -> Result<ReportModel> {
    let objects = profile.read_all::<Object>()?;
    let threads = profile.read_all::<Thread>()?;
    // No part of the report shows migrations yet; reading them checks that the table is sound,
    // so that damage to it is reported rather than found by the first stage that needs it.
    profile.read_migrations()?;
    let page_size = profile.meta().page_size.max(1);
    let block_size = options.block_size.unwrap_or(page_size);
    if block_size == 0 || !block_size.is_multiple_of(page_size) {
        return Err(AnalyzeError::BlockSize {
            block_size,
            page_size,
        });
    }
    let index = ObjectIndex::new(&objects);
    let ranges: Vec<(u64, u64)> = objects.iter().map(|o| (o.start, o.size)).collect();
    let thread_ids = ThreadIds::new(threads.iter().map(|t| (t.pid, t.tid)));
    let filter = SampleFilter {
        objects: &index,
        object_selected: select_objects(&objects, options.object.as_deref())?,
        threads: select_threads(&threads, options.thread)?,
        thread_ids: &thread_ids,
        ranges: ranges.clone(),
        dense: access::dense_pages(&ranges, page_size),
        page_size,
    };
    let tally = samples::tally(profile, &filter, objects.len(), options.workers)?;
    let exact = pagestats::tally(profile, &filter, options.workers)?;
    let object_selected = filter.object_selected.clone();
    drop(filter);
    let keys = thread_ids.keys();
    let mut unreadable = side_tables::Unreadable::default();
    let pages = unreadable.or_empty(side_tables::PAGE_NODES, pages::PageMap::read(profile));
    let is_exact = !exact.is_empty();
    let source = if is_exact {
        &exact.pages
    } else {
        &tally.access.pages
    };
    let placement = placement::Placement::choose(
        profile,
        options.what_if.as_ref(),
        &keys,
        &threads,
        &touched_nodes(&tally.access, keys.len()),
    );
    let logical: HashMap<ThreadKey, u32> = threads
        .iter()
        .map(|t| ((t.pid, t.tid), t.logical_id))
        .collect();
    let ctx = engine::Context {
        objects: &objects,
        page_size,
        placement: &placement,
        page_map: &pages,
        logical: &keys
            .iter()
            .map(|k| logical.get(k).copied())
            .collect::<Vec<_>>(),
        pids: &keys.iter().map(|k| k.0).collect::<Vec<_>>(),
        block_size,
    };
    let agg = engine::aggregate(&ctx, source, is_exact, &tally.access, keys.len());
    let object_accesses: Vec<u64> = agg.objects.iter().map(|o| engine::total(&o.rw)).collect();
    let active: Vec<ThreadKey> = keys
        .iter()
        .zip(&agg.threads)
        .filter(|(_, t)| engine::total(&t.rw) > 0)
        .map(|(k, _)| *k)
        .collect();
    let sites = unreadable.or_empty(side_tables::SITES, sites::read_sites(profile));
    let code = unreadable.or_empty(side_tables::CODE_LOCATIONS, sites::read_code_names(profile));
    let tables = assemble::Tables {
        objects: &objects,
        threads: &threads,
        sites: &sites,
        code: &code,
        pages: &pages,
        page_size,
        object_selected: object_selected.as_deref(),
        object_accesses: &object_accesses,
        active_threads: &active,
    };
    let (mut model, ranked) = assemble::model(profile, options, &tables, &tally);
    model.profile.unreadable_tables = unreadable.0;
    let inputs = fill::Inputs {
        objects: &objects,
        sites: &sites,
        index: &index,
        keys: &keys,
        pages: source,
        exact: is_exact,
        memory_samples: tally.memory_samples,
        sampled: &tally.access,
        agg: &agg,
        placement: &placement,
        page_size,
        block_size,
    };
    fill::fill(&mut model, &inputs);
    let grouping = groups::Inputs {
        objects: &objects,
        ranked: &ranked,
        tally: &tally,
        agg: &agg,
        keys: &keys,
        sites: &sites,
        top: options.top,
    };
    model.groups = groups::groups(&model, &grouping);
    let thread_selected = select_threads(&threads, options.thread)?;
    let selected = sources::Selected {
        objects: object_selected.as_deref(),
        threads: thread_selected.as_deref(),
    };
    model.data_sources =
        sources::data_sources(profile, &objects, &threads, &selected, &placement.machine)?;
    measured::add_findings(&mut model, &objects, &sites);
    let selected = model.selection.filters();
    let recording = limits::Recording::of(&model);
    if limits::faults_only(&model.totals.samples, is_exact, selected, recording) {
        model.analysis.limits = Some(limits::of_faults_only(&model));
        limits::withhold_verdicts(&mut model);
    } else if options.simulate {
        whatif::add(&mut model, profile, &placement)?;
    }
    let site_of = |id: u64| {
        let o = &objects[index.get(id)? as usize];
        sites.get(&o.site_key?).map(|s| &s.location)
    };
    model.finding_groups = finding_groups::of(&model, &site_of);
    Ok(model)
}

/// Per dense thread id: nodes of the pages it placed by a first-touch fault.
fn touched_nodes(sampled: &access::AccessTally, threads: usize) -> Vec<HashMap<u32, u64>> {
    let mut out = vec![HashMap::new(); threads];
    for (_, page) in &sampled.pages {
        if let Some(t) = page.touch
            && let Some(node) = t.node
            && let Some(map) = out.get_mut(t.thread as usize)
        {
            *map.entry(node).or_default() += 1;
        }
    }
    out
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
