//! Turning a finished recording (runtime event logs, page faults, maps snapshots, perf task
//! records) into a profile directory.

mod code;
mod inherit;
mod inst;
mod objects;
pub mod placements;
mod sites;
mod threads;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use numalens_format::{
    Backend, Clock, Completeness, DataSource, Host, Meta, NumaBalancing, Object, ObjectKind,
    Overhead, PageNodes, ProfileWriter, ProgramExit, Sample, SampleKind,
};
use numalens_topology::Topology;

use crate::attribute::{Attributions, ObjectSpec, attributions};
use crate::events::{Event, EventLog, EventsError, find_event_logs, read_event_log};
use crate::faults::Fault;
use crate::pagesize::{self, PageSizes, ThpMode};
use crate::procmaps::SeenMapping;
use crate::record::RawRecording;
use crate::scan::ScannedRun;
use crate::symbols::Symbolizer;

pub use objects::{ProcessView, process_view};

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
    pub outlived: Option<crate::record::Outlived>,
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
    /// Set by `numalens recover`: why the profile is incomplete (the recorder was killed, and
    /// what it alone held is missing). The program's exit status is then unknown.
    pub recovered: Option<String>,
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

/// Writes the profile for `raw` into `output` and returns its summary.
pub fn write_profile(
    raw: &mut RawRecording,
    output: &Path,
    opts: AssembleOptions<'_>,
) -> numalens_format::Result<Summary> {
    let writing_started = std::time::Instant::now();
    let mut reasons = Vec::new();
    let logs = read_logs(&raw.events_dir, &mut reasons);
    let inst_dir = raw.inst_staging.as_ref().map(|s| s.dir());
    let inst_data = crate::inst::files::read_inst_dir(inst_dir.unwrap_or(&raw.events_dir));
    reasons.extend(inst_data.problems.iter().cloned());
    let mut symbols = Symbolizer::new();
    let modules = objects::modules_per_log(&logs);
    let views: Vec<ProcessView> = logs
        .iter()
        .zip(&modules)
        .map(|(log, modules)| objects::process_view(log, opts.min_object, &mut symbols, modules))
        .collect();
    let mut objects: Vec<ObjectSpec> = views
        .iter()
        .flat_map(|v| v.objects.iter().cloned())
        .collect();
    objects.extend(raw.maps.mappings().iter().map(fallback_object));
    objects.extend(raw.tasks.iter().filter_map(mapped_object));
    inherit::backdate_main_stacks(&mut objects, &raw.tasks);
    inherit::inherit_objects(&mut objects, &raw.tasks, &raw.faults);
    let page_size = crate::perf::page_size() as u64;
    // Attribution needs one time order. The recorder merged the rings in time order already
    // (`time_order`), so this is one pass over ordered samples; it puts right whatever a ring
    // held out of order, in place.
    raw.faults.sort_by_key(|f| f.time_ns);
    let faults = &raw.faults;
    let balancing = opts.numa_balancing.as_ref().is_some_and(|b| b.mode != 0);
    let pages = page_sizes(raw, &views, &opts, page_size);
    let attributed = attributions(faults, &objects, &pages, balancing);

    let ips = code_addresses(faults, &inst_data, &views);
    let origin = raw.clock_origin_ns;
    let (views_ref, tasks) = (&views, &raw.tasks);
    let (mut writer, mut summary) = std::thread::scope(|s| {
        // Symbolising the code addresses is the longest step after the program's end (it reads
        // the modules' symbol tables and DWARF); it runs beside the writing of the other tables.
        let symbols = &mut symbols;
        let locations = s.spawn(move || code::code_locations(&ips, views_ref, tasks, symbols));
        let mut writer = ProfileWriter::create(output, meta(raw, &opts))?;
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
        for (id, o) in objects.iter().enumerate() {
            writer.push_object(object_row(id as u64, o, origin))?;
        }
        for row in locations.join().expect("symbolising does not panic") {
            writer.push_code_location(row)?;
        }
        Ok::<_, numalens_format::FormatError>((writer, summary))
    })?;
    summary.objects = objects.len() as u64;
    for view in &views {
        for site in view.sites.used() {
            for frame in &site.frames {
                writer.push_site_frame(frame.clone())?;
            }
        }
        write_page_nodes(&mut writer, view, origin)?;
        for (t, event) in &view.places {
            if let Some(row) = placements::plan_row(*t, view.pid, event, origin) {
                writer.push_migration(row)?;
            }
        }
    }
    for row in &raw.migrations {
        writer.push_migration(row.clone())?;
    }
    write_scans(&mut writer, &raw.scans, origin)?;
    summary.threads = threads::write_threads(&mut writer, &views, &raw.tasks, origin)?;
    // The tables were written while the kernel freed the program's memory; its end is known now.
    raw.wait_for_exit()
        .map_err(|source| numalens_format::FormatError::Io {
            path: output.to_path_buf(),
            source,
        })?;
    let completeness = completeness(raw, &logs, &views, reasons, opts.recovered.as_deref());
    if opts.recovered.is_some() {
        return finish(writer, completeness, summary);
    }
    writer.meta_mut().overhead = Some(Overhead {
        slowdown: None,
        recorder_cpu_s: Some(crate::record::own_cpu_time().as_secs_f64()),
        running_cpu_s: Some(raw.running_cpu.as_secs_f64()),
        program_wall_s: Some(raw.wall.as_secs_f64()),
        writing_wall_s: Some(writing_started.max(raw.ended).elapsed().as_secs_f64()),
    });
    finish(writer, completeness, summary)
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

/// The page size of every faulted region, from the faults, the mappings and the exit query.
fn page_sizes(
    raw: &RawRecording,
    views: &[ProcessView],
    opts: &AssembleOptions<'_>,
    base_page: u64,
) -> PageSizes {
    let anonymous_maps = raw.maps.mappings().into_iter().filter_map(|seen| {
        let m = &seen.mapping;
        let anonymous = m.path.is_empty() || m.path == "[heap]" || m.path == "[stack]";
        (anonymous && m.perms.ends_with('p')).then_some((seen.pid, m.start, m.end))
    });
    let anonymous_mmaps = raw.tasks.iter().filter_map(|t| match t {
        crate::faults::PerfEvent::Mmap {
            pid,
            start,
            len,
            path,
            flags,
            ..
        } if (path.is_empty() || path.starts_with("//anon"))
            && *flags & libc::MAP_SHARED as u32 == 0 =>
        {
            Some((*pid, *start, start + len))
        }
        _ => None,
    });
    let anonymous = pagesize::anonymous_by_pid(anonymous_maps.chain(anonymous_mmaps));
    let faulted: BTreeSet<(u32, u64)> = raw
        .faults
        .iter()
        .map(|f| (f.pid, f.address & !(pagesize::HUGE_PAGE - 1)))
        .collect();
    let residency = exit_residency(views, &faulted);
    PageSizes::infer(
        &raw.faults,
        &pagesize::Evidence {
            mode: opts.thp,
            base_page,
            page_sizes_sampled: raw.sampler.as_ref().is_some_and(|s| s.page_sizes),
            anonymous: &anonymous,
            residency: &residency,
        },
    )
}

/// What the runtimes' exit queries say of each faulted huge-page region (`(pid, region start)`
/// in `faulted`): pages present and untouched.
pub fn exit_residency(
    views: &[ProcessView],
    faulted: &BTreeSet<(u32, u64)>,
) -> HashMap<(u32, u64), pagesize::Residency> {
    let mut residency = HashMap::new();
    for view in views {
        for (_, event) in &view.page_nodes {
            if let Event::PageNodes {
                first_page,
                count,
                node,
                page_size,
            } = *event
            {
                let present = node >= 0;
                if present || node == -(libc::ENOENT as i64) {
                    pagesize::add_residency(
                        &mut residency,
                        faulted,
                        (view.pid, first_page),
                        count,
                        page_size,
                        present,
                    );
                }
            }
        }
    }
    residency
}

fn object_row(id: u64, o: &ObjectSpec, origin: u64) -> Object {
    Object {
        object_id: id,
        pid: o.pid,
        kind: o.kind,
        name: o.name.clone(),
        start: o.start,
        size: o.size,
        alloc_ns: o.alloc_ns.saturating_sub(origin),
        free_ns: o.free_ns.map(|t| t.saturating_sub(origin)),
        alloc_tid: o.alloc_tid,
        site_key: o.site_key,
    }
}

/// A mapping seen in `/proc/PID/maps`, as an object of last resort. It is taken to exist for the
/// whole run: snapshots are periodic, so their times only bound when it appeared.
fn fallback_object(seen: &SeenMapping) -> ObjectSpec {
    let m = &seen.mapping;
    let (kind, name) = match m.path.as_str() {
        "[heap]" => (
            ObjectKind::Heap,
            "[heap] (allocations below --min-object)".to_string(),
        ),
        "[stack]" => (ObjectKind::Stack, "[stack] (main thread)".to_string()),
        "" => (
            ObjectKind::Mmap,
            format!("anonymous mapping {:#x} ({})", m.start, m.perms),
        ),
        p if p.starts_with('[') => (ObjectKind::Unknown, p.to_string()),
        p if m.perms.contains('x') => (ObjectKind::Code, p.to_string()),
        p => (ObjectKind::File, p.to_string()),
    };
    ObjectSpec {
        pid: seen.pid,
        kind,
        name,
        start: m.start,
        size: m.end - m.start,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: None,
        site_key: None,
        tracked: false,
    }
}

/// A mapping the kernel reported (perf MMAP2, data mappings included), as an object of last
/// resort from the moment it was made: it covers what the program maps before the runtime starts
/// and between two maps snapshots.
fn mapped_object(task: &crate::faults::PerfEvent) -> Option<ObjectSpec> {
    let crate::faults::PerfEvent::Mmap {
        pid,
        start,
        len,
        prot,
        path,
        time_ns,
        ..
    } = task
    else {
        return None;
    };
    let anonymous = path.is_empty() || path.starts_with("//anon") || path.starts_with("/dev/zero");
    let (kind, name) = if anonymous {
        (ObjectKind::Mmap, format!("anonymous mapping {start:#x}"))
    } else if path.starts_with('[') {
        (ObjectKind::Unknown, path.clone())
    } else if prot & libc::PROT_EXEC as u32 != 0 {
        (ObjectKind::Code, path.clone())
    } else {
        (ObjectKind::File, path.clone())
    };
    Some(ObjectSpec {
        pid: *pid,
        kind,
        name,
        start: *start,
        size: *len,
        alloc_ns: *time_ns,
        free_ns: None,
        alloc_tid: None,
        site_key: None,
        tracked: false,
    })
}

fn write_page_nodes(
    writer: &mut ProfileWriter,
    view: &ProcessView,
    origin: u64,
) -> numalens_format::Result<()> {
    for row in exit_page_nodes(view, origin) {
        writer.push_page_nodes(row)?;
    }
    Ok(())
}

/// The `page_nodes` rows of a process's exit query.
pub fn exit_page_nodes(view: &ProcessView, origin: u64) -> impl Iterator<Item = PageNodes> + '_ {
    view.page_nodes.iter().filter_map(move |(t, event)| {
        let Event::PageNodes {
            first_page,
            count,
            node,
            page_size,
        } = *event
        else {
            return None;
        };
        Some(page_nodes_row(
            t.saturating_sub(origin),
            view.pid,
            (first_page, count, page_size),
            node,
            "exit",
        ))
    })
}

fn write_scans(
    writer: &mut ProfileWriter,
    scans: &[ScannedRun],
    origin: u64,
) -> numalens_format::Result<()> {
    for s in scans {
        writer.push_page_nodes(page_nodes_row(
            s.time_ns.saturating_sub(origin),
            s.pid,
            (s.start, s.pages, s.page_size),
            s.node as i64,
            "scan",
        ))?;
    }
    Ok(())
}

/// A `page_nodes` row from a `move_pages` answer: a node, or a negative errno.
fn page_nodes_row(
    time_ns: u64,
    pid: u32,
    (start, pages, page_size): (u64, u64, u64),
    answer: i64,
    source: &str,
) -> PageNodes {
    // Linux's errnos are 1..=4095; a log from a damaged or hostile process may hold anything.
    const MAX_ERRNO: i64 = 4095;
    let (node, status) = match answer {
        n if n == -(libc::ENOENT as i64) => (None, "untouched".to_string()),
        n if n >= 0 => match u32::try_from(n) {
            Ok(node) => (Some(node), String::new()),
            Err(_) => (None, format!("answer {n} is not a node number")),
        },
        n if n >= -MAX_ERRNO => (
            None,
            std::io::Error::from_raw_os_error(-n as i32).to_string(),
        ),
        n => (None, format!("answer {n} is not an error number")),
    };
    PageNodes {
        time_ns,
        pid,
        start,
        pages,
        page_size,
        node,
        status,
        source: source.into(),
    }
}

fn completeness(
    raw: &RawRecording,
    logs: &[EventLog],
    views: &[ProcessView],
    mut reasons: Vec<String>,
    recovered: Option<&str>,
) -> Completeness {
    use std::os::unix::process::ExitStatusExt;
    if let Some(why) = recovered {
        reasons.insert(0, why.to_string());
    }
    let still_running = raw.outlived.as_ref().map_or(&[][..], |o| &o.still_running);
    for (log, view) in logs.iter().zip(views) {
        if still_running.contains(&log.header.pid) {
            // Its log ends where the recording stopped, not where the process did.
        } else if log.header.write_errno != 0 {
            let why = std::io::Error::from_raw_os_error(log.header.write_errno as i32);
            reasons.push(format!(
                "process {}: the runtime could not write its event log ({why}); what the process \
                 did after that is missing",
                log.header.pid
            ));
        } else if let Some(signal) = view.signal {
            reasons.push(format!(
                "process {} died of signal {signal}",
                log.header.pid
            ));
        } else if !view.ended_cleanly {
            reasons.push(format!(
                "process {} ended without running its exit path (killed or _exit)",
                log.header.pid
            ));
        }
        if let n @ 1.. = log.header.inst_uncounted {
            let (threads, their) = if n == 1 {
                ("1 thread".to_string(), "its")
            } else {
                (format!("{n} threads"), "their")
            };
            reasons.push(format!(
                "process {}: {threads} could not create the inst backend's count files (no \
                 descriptor or no space left): {their} accesses are not counted",
                log.header.pid
            ));
        }
        if log.truncated {
            reasons.push(format!(
                "{}: the last record was cut off",
                log.path.display()
            ));
        }
    }
    if raw.lost > 0 {
        reasons.push(format!(
            "the kernel dropped {} records (page-fault samples, and any task or mapping records among them) because the ring buffer filled",
            raw.lost
        ));
    }
    if raw.lost_uncounted {
        reasons.push(
            "a ring buffer filled and this kernel (before Linux 6.0) does not count every \
             sample it drops: more samples than counted may be missing"
                .into(),
        );
    }
    if raw.outlived.as_ref().is_some_and(|o| o.stopped_early) {
        let pids: Vec<String> = still_running.iter().map(u32::to_string).collect();
        let which = match pids.as_slice() {
            [] => "processes of the program were".to_string(),
            [one] => format!("process {one} of the program was"),
            _ => format!("processes {} of the program were", pids.join(", ")),
        };
        reasons.push(format!(
            "the recording was stopped while {which} still running: their work after that \
             point is not in the profile"
        ));
    }
    // Only the recorder could see the program's exit status: a recovered one is unknown.
    let exit = recovered.is_none().then(|| ProgramExit {
        code: raw.exit.code(),
        signal: raw.exit.signal(),
    });
    if let Some(signal) = exit.as_ref().and_then(|e| e.signal) {
        reasons.push(format!("the program was killed by signal {signal}"));
    }
    Completeness {
        complete: reasons.is_empty(),
        exit,
        reasons,
    }
}

fn meta(raw: &RawRecording, opts: &AssembleOptions<'_>) -> Meta {
    let mut meta = profile_meta(
        raw.command.clone(),
        (raw.start_unix_ns, raw.clock_origin_ns),
        opts,
    );
    meta.lost_samples = raw.lost;
    meta
}

/// The meta of a profile of `command`, started at `start` (Unix time, then the samples' clock,
/// both in ns), before anything of the run is known.
pub fn profile_meta(command: Vec<String>, start: (u64, u64), opts: &AssembleOptions<'_>) -> Meta {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let host = Host {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
    };
    let backend = Backend {
        name: opts.backend.to_string(),
        settings: opts.backend_settings.clone(),
    };
    let clock = Clock {
        name: "CLOCK_MONOTONIC".into(),
        origin_ns: start.1,
    };
    let mut meta = Meta::new(command, backend, host, clock);
    meta.start_unix_ns = start.0;
    meta.topology = opts.topology.clone();
    meta.page_size = crate::perf::page_size() as u64;
    meta.numa_balancing = opts.numa_balancing.clone();
    meta
}

/// The code addresses the report names: sample IPs and thread start routines, per process.
fn code_addresses(
    faults: &[Fault],
    inst_data: &crate::inst::files::InstData,
    views: &[ProcessView],
) -> BTreeSet<(u32, u64)> {
    let mut ips: BTreeSet<(u32, u64)> = faults.iter().map(|f| (f.pid, f.ip)).collect();
    ips.extend(
        inst_data
            .samples
            .iter()
            .map(|s| (s.pid, inst::sample_ip(s))),
    );
    for view in views {
        ips.extend(
            view.threads
                .iter()
                .filter(|t| t.start_routine != 0)
                .map(|t| (view.pid, t.start_routine)),
        );
    }
    ips
}

/// The page-fault samples with their attribution, as `samples` rows.
struct FaultRows<'a> {
    faults: &'a [Fault],
    attributed: Attributions<'a>,
    objects: &'a [ObjectSpec],
    cpu_node: &'a HashMap<u32, u32>,
    origin: u64,
}

impl FaultRows<'_> {
    fn write(
        self,
        writer: &mut ProfileWriter,
        summary: &mut Summary,
    ) -> numalens_format::Result<()> {
        for (fault, a) in self.faults.iter().zip(self.attributed) {
            let first = a.kind == SampleKind::FirstTouch;
            summary.samples += 1;
            if first {
                summary.first_touches += 1;
                summary.first_touches_attributed += a.object.is_some() as u64;
                summary.first_touches_tracked +=
                    a.object.is_some_and(|o| self.objects[o].tracked) as u64;
            }
            writer.push_sample(Sample {
                time_ns: fault.time_ns.saturating_sub(self.origin),
                pid: fault.pid,
                tid: fault.tid,
                cpu: Some(fault.cpu),
                address: fault.address,
                kind: a.kind,
                weight: 1,
                object_id: a.object.map(|o| o as u64),
                // Under Linux's default policy a first touch places the page on the faulting
                // CPU's node.
                node: if first {
                    self.cpu_node.get(&fault.cpu).copied()
                } else {
                    None
                },
                data_source: DataSource::Unknown,
                latency: None,
                ip: Some(fault.ip),
                page_size: Some(a.page_size as u32),
            })?;
        }
        Ok(())
    }
}

fn cpu_nodes(topology: Option<&Topology>) -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    for node in topology.map(|t| t.nodes.as_slice()).unwrap_or_default() {
        for cpu in &node.cpus {
            map.insert(*cpu, node.id);
        }
    }
    map
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
