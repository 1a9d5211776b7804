//! Turning a recording (runtime event logs, page faults, maps snapshots, perf task records, the
//! `inst` hooks' files) into a profile directory. The live recorder hands over the recording it
//! holds in memory ([`write_profile`]); [`stored`] reads one back from a recording's directory.

pub mod attribute;
mod attribute_index;
mod code;
mod completeness;
mod debug_files;
mod fallback;
mod inherit;
mod inst;
pub mod live_watermark;
mod meta;
mod objects;
mod page_nodes;
mod page_owner;
pub mod page_times;
pub mod pagesize;
pub mod perf_sample;
pub mod placements;
pub mod procmaps;
pub mod raw;
mod rows;
mod sites;
pub mod spill;
pub mod stored;
pub mod symbols;
mod threads;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use numalens_format::{Completeness, NumaBalancing, Overhead, ProfileWriter, ProgramExit};
use numalens_preload::events::{EventLog, EventsError, find_event_logs, read_event_log};
use numalens_topology::Topology;

use crate::attribute::{ObjectSpec, attributions};
use crate::pagesize::ThpMode;
use crate::raw::{Outlived, RawRecording};
use crate::rows::{FaultRows, cpu_nodes, object_row};
use crate::symbols::Symbolizer;

pub use meta::{profile_meta, this_host};
pub use objects::{ProcessView, process_view};
pub use page_nodes::{exit_page_nodes, exit_residency};

/// What the profile holds, for the summary the recorder prints.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub samples: u64,
    pub first_touches: u64,
    /// First touches attributed to a tracked object (allocation, static, stack, TLS).
    pub first_touches_tracked: u64,
    /// First touches attributed to any object, fallback mappings included.
    pub first_touches_attributed: u64,
    pub objects: u64,
    pub threads: u64,
    pub processes: u64,
    pub lost: u64,
    /// Pages per CPU of the sampling rings, when page faults were sampled.
    pub ring_pages: Option<u64>,
    /// Processes of the program that ran on after the first one exited.
    pub outlived: Option<Outlived>,
    /// `page_stats` rows and sampled accesses from the `inst` backend.
    pub exact_pages: u64,
    pub inst_samples: u64,
    /// Accesses counted exactly by the `inst` backend.
    pub exact_accesses: u64,
    pub complete: bool,
    pub reasons: Vec<String>,
}

/// Settings of the assembly that are not in the recording itself.
pub struct AssembleOptions<'a> {
    pub topology: Option<Topology>,
    pub min_object: u64,
    pub backend: &'a str,
    pub backend_settings: BTreeMap<String, serde_json::Value>,
    pub numa_balancing: Option<NumaBalancing>,
    /// The transparent-huge-page setting the program ran under.
    pub thp: ThpMode,
    /// Set for a recording read back from its directory ([`stored`], what `numalens recover`
    /// runs): why the profile is incomplete (what only the live recorder held is missing).
    pub recovered: Option<String>,
}

/// How the program ended: known to the live recorder only once the kernel has freed the
/// program's memory, which can take seconds, so the tables are written meanwhile.
#[derive(Debug, Clone, Default)]
pub struct ProgramEnd {
    /// `None` when no one saw it (a recording recovered from disk).
    pub exit: Option<ProgramExit>,
    pub overhead: Option<Overhead>,
}

/// Reads the runtime's logs; unreadable ones are reported as reasons for incompleteness.
fn read_logs(dir: &Path, reasons: &mut Vec<String>) -> Vec<EventLog> {
    let paths = match find_event_logs(dir) {
        Ok(paths) => paths,
        // Not one log could be read: the profile lacks every tracked object and thread name.
        Err(EventsError::Io { source, .. }) => {
            reasons.push(format!(
                "runtime logs unreadable: cannot list {}: {source}",
                dir.display()
            ));
            Vec::new()
        }
        Err(e) => {
            reasons.push(format!("runtime logs unreadable: {e}"));
            Vec::new()
        }
    };
    let mut logs = Vec::new();
    for path in paths {
        match read_event_log(&path) {
            Ok(log) => logs.push(log),
            Err(e) => reasons.push(format!("runtime log unreadable: {e}")),
        }
    }
    logs
}

/// Writes the profile for `raw` into `output` and returns its summary. `program_end` is asked
/// for the program's end once the tables are written, with the moment the writing started.
pub fn write_profile(
    raw: &mut RawRecording,
    output: &Path,
    opts: AssembleOptions<'_>,
    program_end: impl FnOnce(Instant) -> std::io::Result<ProgramEnd>,
) -> numalens_format::Result<Summary> {
    let writing_started = Instant::now();
    let mut reasons = Vec::new();
    let inst_dir = raw.inst_dir.as_deref().or(raw.events_dir.as_deref());
    let mut symbols = Symbolizer::with_files(raw.module_files.clone());
    // The hooks' files (hundreds of MiB in a sampled run) are read beside the runtime's logs
    // and the objects they give, which need none of them.
    let inst_live = raw.inst_live.take();
    let read_live = inst_live.as_ref().map(|l| l.held() as u64);
    let mut merged_live = 0;
    let (logs, views, inst_data) = std::thread::scope(|s| {
        let inst = s.spawn(|| match (inst_dir, inst_live) {
            (Some(dir), Some(live)) => live.finish(dir),
            (Some(dir), None) => (numalens_inst::files::read_inst_dir(dir), 0),
            (None, _) => Default::default(),
        });
        let logs = match &raw.events_dir {
            Some(dir) => read_logs(dir, &mut reasons),
            None => Vec::new(),
        };
        let views = process_views(&logs, opts.min_object, &mut symbols);
        let (inst_data, merged) = inst
            .join()
            .expect("reading the hooks' files does not panic");
        merged_live = merged as u64;
        (logs, views, inst_data)
    });
    reasons.extend(inst_data.problems.iter().cloned());
    let mut objects: Vec<ObjectSpec> = views
        .iter()
        .flat_map(|v| v.objects.iter().cloned())
        .chain(raw.objects.iter().cloned())
        .collect();
    let mut fallbacks = fallback::mapped_objects(&raw.maps.mappings());
    fallbacks.extend(fallback::reported_objects(&raw.tasks));
    objects.extend(fallback::merge_grown(fallbacks));
    inherit::backdate_main_stacks(&mut objects, &raw.tasks);
    inherit::inherit_objects(&mut objects, &raw.tasks, &raw.faults);
    // Attribution needs one time order. The recorder merged the rings in time order already
    // (`time_order`), so this is one pass over ordered samples; it puts right whatever a ring
    // held out of order, in place.
    raw.faults.sort_by_key(|f| f.time_ns);
    raw.accesses.sort_by_key(|a| a.time_ns);
    let faults = &raw.faults;
    let balancing = opts.numa_balancing.as_ref().is_some_and(|b| b.mode != 0);
    let pages = page_nodes::page_sizes(raw, &views, opts.thp);
    let attributed = attributions(faults, &objects, &pages, balancing);

    let ips = code::code_addresses(faults, &raw.accesses, &inst_data, &views);
    let stream = raw.access_stream.take();
    // Streamed accesses' code addresses are known only once read: those beyond `ips` are
    // symbolised after the tables.
    let known_ips = if stream.is_some() {
        ips.clone()
    } else {
        Default::default()
    };
    let origin = raw.clock_origin_ns;
    let (views_ref, tasks) = (&views, &raw.tasks);
    let (mut writer, mut summary, streamed_ips) = std::thread::scope(|s| {
        // Symbolising the code addresses is the longest step after the program's end (it reads
        // the modules' symbol tables and DWARF); it runs beside the writing of the other tables.
        let symbols = &mut symbols;
        let locations = s.spawn(move || code::code_locations(&ips, views_ref, tasks, symbols));
        let mut writer = ProfileWriter::create(output, meta::recording_meta(raw, &opts))?;
        let mut summary = Summary {
            lost: raw.lost,
            ring_pages: raw.sampler.as_ref().map(|s| s.ring_pages as u64),
            outlived: raw.outlived.clone(),
            processes: logs.len().max(1) as u64,
            ..Summary::default()
        };
        let cpu_node = cpu_nodes(opts.topology.as_ref());
        FaultRows {
            faults,
            attributed,
            objects: &objects,
            cpu_node: &cpu_node,
            origin,
        }
        .write(&mut writer, &mut summary)?;
        let accesses = rows::AccessRows {
            held: &raw.accesses,
            stream,
            objects: &objects,
            origin,
        };
        let (count, streamed_ips) = accesses.write(&mut writer, output)?;
        summary.samples += count;
        let inst_counts = inst::write_inst(&mut writer, &inst_data, &objects, origin)?;
        summary.exact_pages = inst_counts.page_rows;
        summary.inst_samples = inst_counts.samples;
        summary.exact_accesses = inst_counts.accesses;
        summary.samples += inst_counts.samples;
        if inst_counts.samples > 0 {
            // Not from a ring: a share of lost ring records is taken over the others.
            writer
                .meta_mut()
                .backend
                .settings
                .insert("inst_samples".into(), inst_counts.samples.into());
        }
        if let Some(read) = read_live {
            // How much of the sampled stream the recorder read, and merged in time order, while
            // the program ran (0 merged: what was read live could not be used).
            let settings = &mut writer.meta_mut().backend.settings;
            settings.insert("inst_samples_read_live".into(), read.into());
            settings.insert("inst_samples_merged_live".into(), merged_live.into());
        }
        for (id, o) in objects.iter().enumerate() {
            writer.push_object(object_row(id as u64, o, origin))?;
        }
        for row in locations.join().expect("symbolising does not panic") {
            writer.push_code_location(row)?;
        }
        Ok::<_, numalens_format::FormatError>((writer, summary, streamed_ips))
    })?;
    let streamed_ips: std::collections::BTreeSet<(u32, u64)> =
        streamed_ips.difference(&known_ips).copied().collect();
    for row in code::code_locations(&streamed_ips, &views, &raw.tasks, &mut symbols) {
        writer.push_code_location(row)?;
    }
    summary.objects = objects.len() as u64;
    for view in &views {
        write_process_tables(&mut writer, view, origin)?;
    }
    for row in &raw.migrations {
        writer.push_migration(row.clone())?;
    }
    page_nodes::write_scans(&mut writer, &raw.scans, origin)?;
    summary.threads = threads::write_threads(&mut writer, &views, &raw.tasks, origin)?;
    // The tables were written while the kernel freed the program's memory; its end is known now.
    let end = program_end(writing_started).map_err(|source| numalens_format::FormatError::Io {
        path: output.to_path_buf(),
        source,
    })?;
    reasons.extend(raw.incomplete.iter().cloned());
    let completeness = completeness::completeness(
        raw,
        (&logs, &views),
        reasons,
        opts.recovered.as_deref(),
        end.exit,
    );
    writer.meta_mut().overhead = end.overhead;
    writer.meta_mut().end_unix_ns = raw.end_unix_ns;
    finish(writer, completeness, summary)
}

/// Each process's objects, threads and modules from its log.
fn process_views(logs: &[EventLog], min_object: u64, symbols: &mut Symbolizer) -> Vec<ProcessView> {
    let modules = objects::modules_per_log(logs);
    logs.iter()
        .zip(&modules)
        .map(|(log, modules)| objects::process_view(log, min_object, symbols, modules))
        .collect()
}

/// The rows a process's log gives beyond objects and threads: its call sites' frames, its exit
/// query and the plan's rules the runtime applied.
fn write_process_tables(
    writer: &mut ProfileWriter,
    view: &ProcessView,
    origin: u64,
) -> numalens_format::Result<()> {
    for site in view.sites.used() {
        for frame in &site.frames {
            writer.push_site_frame(frame.clone())?;
        }
    }
    page_nodes::write_exit_query(writer, view, origin)?;
    for (t, event) in &view.places {
        if let Some(row) = placements::plan_row(*t, view.pid, event, origin) {
            writer.push_migration(row)?;
        }
    }
    Ok(())
}

fn finish(
    writer: ProfileWriter,
    completeness: Completeness,
    mut summary: Summary,
) -> numalens_format::Result<Summary> {
    let meta = writer.finish(completeness)?;
    summary.complete = meta.completeness.complete;
    summary.reasons = meta.completeness.reasons.clone();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_directory_that_cannot_be_listed_is_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the directory should be: listing fails even for root, unlike a mode.
        let not_a_dir = dir.path().join("events");
        std::fs::write(&not_a_dir, b"").unwrap();
        let mut reasons = Vec::new();
        assert!(read_logs(&not_a_dir, &mut reasons).is_empty());
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].starts_with("runtime logs unreadable: cannot list"),
            "{reasons:?}"
        );
        assert!(reasons[0].contains("events"), "{reasons:?}");
    }

    #[test]
    fn an_unreadable_log_is_a_reason_and_an_empty_directory_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut reasons = Vec::new();
        assert!(read_logs(dir.path(), &mut reasons).is_empty());
        assert!(reasons.is_empty(), "{reasons:?}");
        std::fs::write(dir.path().join("events-1.bin"), b"short").unwrap();
        assert!(read_logs(dir.path(), &mut reasons).is_empty());
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(
            reasons[0].starts_with("runtime log unreadable"),
            "{reasons:?}"
        );
    }
}
