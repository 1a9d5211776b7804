//! `numalens import`: a `perf.data` recording made with `perf mem record`, `perf c2c record`,
//! `perf record -d` with any event (page faults, PEBS load latency, IBS op, …) becomes a numalens
//! profile. Page-fault samples go through the same attribution as the `faults` backend's; samples
//! of other events become `load`/`store` samples with their data source, latency and the node
//! of their physical page when the file says which node holds it. Objects are the mappings the
//! file's MMAP records name (no allocation sites: no runtime ran beside the program).

mod aux_spe;
mod first_pass;
mod fixed;
mod layout_check;
pub mod machine;
mod read;
mod records;
mod statics;
pub mod write;

// The decoders of sample records, shared with the live sampler of `numalens record`.
pub use numalens_assemble::perf_sample::{bytes, data_src, ibs, sample, spe};

use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use numalens_assemble::pagesize::ThpMode;
use numalens_assemble::procmaps::MapsHistory;
use numalens_assemble::raw::{Access, AccessStream, PerfEvent, RawRecording};
use numalens_assemble::symbols::ModuleFiles;
use numalens_assemble::{AssembleOptions, ProgramEnd, Summary, write_profile};
use numalens_format::Host;

use crate::aux_spe::AuxOwners;

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("not a readable perf.data file: {0}")]
    Perf(#[from] linux_perf_data::Error),
    #[error(
        "{0} is not a perf.data file (it does not start with PERFILE2): give a file written by \
         `perf record`, `perf mem record` or `perf c2c record`"
    )]
    NotPerfData(PathBuf),
    #[error("the perf.data header's {0} section is damaged")]
    Header(&'static str),
    #[error("the perf.data file is damaged: {0}")]
    Damaged(&'static str),
    #[error("cannot read the perf.data file: {0}")]
    Read(std::io::Error),
    #[error(
        "no sample in the file has a data address: record with `perf mem record`, `perf c2c record` \
         or `perf record -d` (events: {0})"
    )]
    NoAddresses(String),
    #[error(transparent)]
    Write(#[from] numalens_format::FormatError),
}

/// One event of the recording and what it gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    pub name: String,
    /// A page-fault event (its samples are first touches and faults, not loads and stores).
    pub faults: bool,
    /// A page-fault event whose faults another event of the file counts already (`minor-faults`
    /// beside `page-faults`): its samples are not faults of the profile.
    pub counted_elsewhere: bool,
    pub samples: u64,
    pub with_address: u64,
}

/// What the import did.
#[derive(Debug, Clone)]
pub struct Imported {
    pub profile: Summary,
    pub events: Vec<EventSummary>,
    pub faults: u64,
    pub accesses: u64,
    /// Records cut short or impossible (a damaged file); they are skipped.
    pub truncated: u64,
    /// The recording machine's NUMA nodes, when the file says.
    pub nodes: usize,
}

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Mappings smaller than this are not objects of their own.
    pub min_object: u64,
}

/// Imports `input` (a perf.data file) as the profile `output`. The file is read twice: once for
/// its tasks, mappings and page faults, then its memory samples are streamed into the profile,
/// so that memory is bounded by objects and pages, not by samples.
pub fn import(input: &Path, output: &Path, opts: &ImportOptions) -> Result<Imported, ImportError> {
    let mut file = open(input)?;
    let mtime = file.metadata().and_then(|m| m.modified()).ok();
    let Some(big_endian) = perf_data_byte_order(&mut file) else {
        return Err(ImportError::NotPerfData(input.to_path_buf()));
    };
    // The records themselves are checked as they are read (`read::each_record`).
    layout_check::check(&mut file, big_endian).map_err(ImportError::Damaged)?;
    file.rewind().map_err(|source| ImportError::Open {
        path: input.to_path_buf(),
        source,
    })?;
    let mut d = read::read_file(file)?;
    if d.faults.is_empty() && d.accesses.count == 0 {
        let names: Vec<String> = d.events.iter().map(|e| e.name.clone()).collect();
        return Err(ImportError::NoAddresses(names.join(", ")));
    }
    let (first, last) = time_span(&d);
    let start_unix_ns = match d.wall_minus_clock_ns {
        Some(offset) => (i128::from(first) + offset).clamp(0, i128::from(u64::MAX)) as u64,
        // The file was written when the recording ended.
        None => mtime
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| (d.as_nanos() as u64).saturating_sub(last - first)),
    };
    let assemble = AssembleOptions {
        topology: machine::topology(&d.nodes, &d.hostname),
        min_object: opts.min_object,
        backend: if d.accesses.count == 0 {
            "faults"
        } else {
            "pmu"
        },
        backend_settings: settings(input, &d),
        // Not in the file: what the recording machine's balancing did is not known.
        numa_balancing: None,
        thp: ThpMode::Never,
        recovered: None,
    };
    let imported = Imported {
        profile: Summary::default(),
        events: d.events.clone(),
        faults: d.faults.len() as u64,
        accesses: d.accesses.count,
        truncated: d.truncated,
        nodes: d.nodes.len(),
    };
    d.tasks.extend(threads_seen_running(&d));
    let sampled_faults = d.sampled_faults;
    let build_ids = std::mem::take(&mut d.build_ids);
    let pids = std::mem::take(&mut d.pids);
    let owners = std::mem::take(&mut d.aux_owners);
    let mut raw = raw_recording(d, start_unix_ns, first);
    raw.end_unix_ns = Some(start_unix_ns.saturating_add(last - first));
    if imported.truncated > 0 {
        raw.incomplete.push(format!(
            "{} damaged records of the file (cut short, or a mapping past the end of memory) \
             were skipped",
            imported.truncated
        ));
    }
    if sampled_faults > 0 {
        raw.incomplete.push(format!(
            "{sampled_faults} page-fault samples stand for several faults each (perf samples \
             page faults 4000 times a second unless told otherwise): the first touches of the \
             pages between them are missing; record with `-c 1` to keep every fault"
        ));
    }
    raw.access_stream = Some(Box::new(SecondPass(input.to_path_buf(), pids, owners)));
    let this_host = raw.host.hostname == numalens_assemble::this_host().hostname;
    raw.objects = statics::statics(&raw.tasks, opts.min_object, &build_ids, this_host);
    let profile = write_profile(&mut raw, output, assemble, |_| Ok(ProgramEnd::default()))?;
    Ok(Imported {
        profile,
        ..imported
    })
}

fn open(input: &Path) -> Result<std::fs::File, ImportError> {
    std::fs::File::open(input).map_err(|source| ImportError::Open {
        path: input.to_path_buf(),
        source,
    })
}

/// The memory samples, read again from the file as the profile is written.
struct SecondPass(PathBuf, ahash::AHashMap<u32, u32>, AuxOwners);

/// Accesses handed from the reading thread to the writing one at a time.
const BATCH: usize = 4096;

impl AccessStream for SecondPass {
    /// The file is read and decoded on a thread of its own while the caller attributes and
    /// writes the accesses already read.
    fn for_each(self: Box<Self>, sink: &mut dyn FnMut(Access)) -> Result<(), String> {
        let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Access>>(8);
        let SecondPass(path, pids, owners) = *self;
        let reader = std::thread::spawn(move || {
            let file = open(&path).map_err(|e| e.to_string())?;
            let mut batch = Vec::with_capacity(BATCH);
            let mut stopped = false;
            let read = read::stream_accesses(file, (&pids, owners), &mut |a| {
                batch.push(a);
                if batch.len() == BATCH && !stopped {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    // The writer stopped (it failed): the rest is read for nothing.
                    stopped = send.send(full).is_err();
                }
            });
            if !batch.is_empty() {
                let _ = send.send(batch);
            }
            read.map_err(|e| format!("reading {} again: {e}", path.display()))
        });
        for batch in receive {
            batch.into_iter().for_each(&mut *sink);
        }
        reader
            .join()
            .map_err(|_| "the reading thread panicked".to_string())?
    }
}

/// The first and last sample times.
fn time_span(d: &read::Decoded) -> (u64, u64) {
    let faults = d.faults.iter().map(|f| f.time_ns);
    let accesses = d
        .accesses
        .first_ns
        .into_iter()
        .chain((d.accesses.count > 0).then_some(d.accesses.last_ns));
    faults
        .chain(accesses)
        .fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)))
}

/// The backend settings of an imported profile: the file, its events and perf's command line.
fn settings(input: &Path, d: &read::Decoded) -> BTreeMap<String, serde_json::Value> {
    let mut settings: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    settings.insert("imported_from".into(), input.display().to_string().into());
    let events: BTreeMap<&str, u64> = d
        .events
        .iter()
        .map(|e| (e.name.as_str(), e.samples))
        .collect();
    settings.insert(
        "events".into(),
        serde_json::to_value(events).unwrap_or_default(),
    );
    if !d.command.is_empty() {
        settings.insert("perf_command".into(), d.command.join(" ").into());
    }
    let counted_elsewhere: Vec<&str> = d
        .events
        .iter()
        .filter(|e| e.counted_elsewhere)
        .map(|e| e.name.as_str())
        .collect();
    if !counted_elsewhere.is_empty() {
        // Their samples are the same faults as another event's: not faults of the profile.
        settings.insert(
            "fault_events_not_kept".into(),
            serde_json::to_value(counted_elsewhere).unwrap_or_default(),
        );
    }
    settings
}

/// The file's byte order (big-endian or not) when it starts with perf.data's magic.
fn perf_data_byte_order(file: &mut std::fs::File) -> Option<bool> {
    let mut magic = [0u8; 8];
    file.read_exact(&mut magic).ok()?;
    match &magic {
        b"PERFILE2" => Some(false),
        b"2ELIFREP" => Some(true),
        _ => None,
    }
}

/// Threads that ran before the recording started (`perf record -p`, `-a`) have no FORK record:
/// they are known from their first sample, as created then by their process.
fn threads_seen_running(d: &read::Decoded) -> Vec<PerfEvent> {
    let forked: std::collections::HashSet<u32> = d
        .tasks
        .iter()
        .filter_map(|t| match t {
            PerfEvent::Fork { tid, .. } => Some(*tid),
            _ => None,
        })
        .collect();
    let mut first: BTreeMap<(u32, u32), u64> =
        d.accesses.threads.iter().map(|(k, v)| (*k, *v)).collect();
    for f in &d.faults {
        let t = first.entry((f.pid, f.tid)).or_insert(f.time_ns);
        *t = (*t).min(f.time_ns);
    }
    first
        .into_iter()
        .filter(|((_, tid), _)| !forked.contains(tid))
        .map(|((pid, tid), time_ns)| PerfEvent::Fork {
            pid,
            ppid: pid,
            tid,
            ptid: pid,
            time_ns,
        })
        .collect()
}

/// What was recorded: perf's command line holds the program after its `--` when given; without
/// a command line (some tools do not write one), the name of the process sampled first.
fn command(d: &read::Decoded) -> Vec<String> {
    if let Some(i) = d.command.iter().position(|a| a == "--") {
        return d.command[i + 1..].to_vec();
    }
    let first = d.faults.first().map(|f| f.pid).or(d.accesses.first_pid);
    // The process's name after its exec (before it, a child perf forked is named `perf`).
    let names = |exec_only: bool| {
        d.tasks.iter().rev().find_map(|t| match t {
            PerfEvent::Comm {
                pid, name, exec, ..
            } if Some(*pid) == first && (*exec || !exec_only) => Some(name.clone()),
            _ => None,
        })
    };
    let name = names(true).or_else(|| names(false));
    // Without `--`, the program is the last word of perf's command line named as the process
    // (whose name the kernel cuts to 15 bytes): `perf record -d -o x.data ./app 3` → `./app 3`.
    let named = |arg: &String| {
        let base = Path::new(arg).file_name().map(|b| b.to_string_lossy());
        name.as_deref()
            .is_some_and(|n| !n.is_empty() && base.is_some_and(|b| b.starts_with(n)))
    };
    if let Some(i) = d.command.iter().rposition(named) {
        return d.command[i..].to_vec();
    }
    if !d.command.is_empty() {
        return d.command.clone();
    }
    vec![name.unwrap_or_else(|| format!("process {}", first.unwrap_or(0)))]
}

/// A header field, or `unknown` when the file does not have it.
fn known(text: String) -> String {
    if text.is_empty() {
        "unknown".into()
    } else {
        text
    }
}

fn raw_recording(d: read::Decoded, start_unix_ns: u64, origin: u64) -> RawRecording {
    let command = command(&d);
    RawRecording {
        command,
        events_dir: None,
        inst_dir: None,
        inst_live: None,
        faults: d.faults,
        accesses: Vec::new(),
        access_stream: None,
        objects: Vec::new(),
        tasks: d.tasks,
        lost: d.lost,
        lost_uncounted: false,
        outlived: None,
        maps: MapsHistory::default(),
        scans: Vec::new(),
        migrations: Vec::new(),
        sampler: None,
        start_unix_ns,
        end_unix_ns: None,
        incomplete: Vec::new(),
        clock_origin_ns: origin,
        host: Host {
            hostname: known(d.hostname),
            kernel: known(d.os_release),
            arch: known(d.arch),
        },
        // Not in the file: the base page of x86-64 and of most Arm64 distributions.
        page_size: 4096,
        module_files: ModuleFiles::AsRecorded,
    }
}
