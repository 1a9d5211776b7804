//! One recording from start to finish: check the output, start the program under the runtime and
//! the sampler, wait for it, and write the profile. The program's exit status is kept for the
//! caller to return.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use numalens_assemble::pagesize::ThpMode;
use numalens_assemble::{AssembleOptions, Summary, profile_meta, write_profile};
use numalens_format::{Meta, NumaBalancing};
use numalens_inst::program_path;
use object::{Object, ObjectSection};
use serde_json::Value;

use crate::record::{
    LiveHook, RecordError, RecordOptions, Recording, SampleSource, monotonic_ns, prepare_output,
    run_with,
};
use crate::unfinished;

/// The result of a recording.
pub struct Recorded {
    pub exit: ExitStatus,
    pub summary: Summary,
    pub profile: PathBuf,
    /// Things the user should know (a static program, kernel samples refused, …).
    pub notes: Vec<String>,
}

/// Records `opts.program` into `opts.output`.
pub fn record(opts: &RecordOptions) -> Result<Recorded, RecordError> {
    record_with(opts, None)
}

/// [`record`], with `hook` (the online engine) called as the program runs.
pub fn record_with(
    opts: &RecordOptions,
    hook: Option<&mut dyn LiveHook>,
) -> Result<Recorded, RecordError> {
    let mut notes = Vec::new();
    let mut hooks_are_calls = Vec::new();
    if opts.inst.is_some() {
        let program = numalens_inst::check_program(&opts.program)?;
        if let Some(note) = program.calls_note(&opts.program) {
            // Said now, before a run that may be long, not only in the summary after it.
            eprintln!("numalens: {note}");
            notes.push(note);
        }
        hooks_are_calls = program.hooks_are_calls;
    }
    let events_dir = prepare_output(&opts.output)?;
    let mut track_objects = opts.track_objects;
    if track_objects && is_static_program(&opts.program) {
        notes.push("the program is statically linked: LD_PRELOAD cannot reach it, so objects and threads are not tracked; page faults are recorded".into());
        track_objects = false;
    }
    let mut start = start_meta(opts, track_objects, &hooks_are_calls);
    if let Err(e) = unfinished::write_start_meta(&opts.output, &start)
        .and_then(|()| unfinished::note_recorder(&events_dir))
    {
        let _ = std::fs::remove_dir_all(&opts.output);
        return Err(RecordError::Output {
            path: opts.output.clone(),
            problem: format!("cannot be written: {e}"),
        });
    }
    // The machine's description takes half a millisecond of sysfs reads: read while the program
    // is being started, when the recorder waits on the kernel and a core is idle. The unfinished
    // profile's meta gets it as soon as it is known.
    let output = opts.output.clone();
    let machine = std::thread::spawn(move || {
        let machine = (
            numalens_topology::host().ok(),
            numa_balancing(),
            ThpMode::host(),
        );
        start.topology = machine.0.clone();
        start.numa_balancing = machine.1.clone();
        let thp = machine.2.name();
        start
            .backend
            .settings
            .insert("transparent_hugepage".into(), thp.into());
        let _ = unfinished::write_start_meta(&output, &start);
        machine
    });
    let runtime = if track_objects {
        Some(
            numalens_preload::runtime::runtime_path(opts.runtime.as_deref())
                .map_err(|e| RecordError::Runtime(e.to_string()))?,
        )
    } else {
        None
    };
    let Recording {
        mut raw,
        mut end,
        inst_staging,
    } = match run_with(opts, events_dir.clone(), runtime, hook) {
        Ok(recording) => recording,
        Err(e) => {
            // The thread writes into the directory: it must be done before the directory goes.
            let _ = machine.join();
            let _ = std::fs::remove_dir_all(&opts.output);
            return Err(e);
        }
    };
    let mut settings = start_settings(opts, track_objects, &hooks_are_calls);
    if let Some(info) = &raw.sampler {
        settings.insert("ring_pages_per_cpu".into(), info.ring_pages.into());
        if opts.source == SampleSource::Pmu {
            settings.insert("kernel_mode_samples".into(), info.kernel_faults.into());
        } else {
            settings.insert("kernel_mode_faults".into(), info.kernel_faults.into());
            settings.insert("fault_page_sizes".into(), info.page_sizes.into());
        }
        settings.insert("lost_counted_by_kernel".into(), info.lost_counted.into());
        settings.extend(info.settings.clone());
        notes.extend(refusal_notes(info, opts.source));
    }
    let (topology, numa_balancing, thp) = machine.join().expect("reading sysfs does not panic");
    settings.insert("transparent_hugepage".into(), thp.name().into());
    if opts.inst.is_some() {
        settings.insert("page_faults_sampled".into(), raw.sampler.is_some().into());
    }
    let backend = backend_name(opts);
    let assemble = AssembleOptions {
        topology,
        min_object: opts.min_object,
        backend,
        backend_settings: settings,
        numa_balancing,
        thp,
        recovered: None,
    };
    let summary = write_profile(&mut raw, &opts.output, assemble, |writing_started| {
        end.program_end(writing_started)
    })
    .map_err(|e| RecordError::Output {
        path: opts.output.clone(),
        problem: format!("{e}{}", recovery_hint(&opts.output)),
    })?;
    // With `NUMALENS_KEEP_EVENTS`, the hooks' files are copied into the events directory here.
    drop(inst_staging);
    if std::env::var_os("NUMALENS_KEEP_EVENTS").is_none() {
        let _ = std::fs::remove_dir_all(&events_dir);
    }
    Ok(Recorded {
        exit: end.exit,
        summary,
        profile: opts.output.clone(),
        notes,
    })
}

/// After a profile could not be written (a full disk): how to get it once the cause is gone.
fn recovery_hint(output: &Path) -> String {
    let unfinished = numalens_format::Meta::read(&output.join("meta.json"))
        .is_ok_and(|m| m.is_unfinished())
        && output.join(numalens_format::EVENTS_DIR).is_dir();
    if unfinished {
        format!(
            "; the runtime's logs are kept: once there is room, `numalens recover {}` writes what they hold",
            output.display()
        )
    } else {
        String::new()
    }
}

fn backend_name(opts: &RecordOptions) -> &'static str {
    match (opts.inst.is_some(), opts.source) {
        (true, _) => "inst",
        (false, SampleSource::Faults) => "faults",
        (false, SampleSource::Pmu) => "pmu",
        (false, SampleSource::None) => "none",
    }
}

/// The backend's settings known before the program starts.
/// `hooks_are_calls`: why the program's hooks are calls, if its links said so.
fn start_settings(
    opts: &RecordOptions,
    track_objects: bool,
    hooks_are_calls: &[String],
) -> BTreeMap<String, Value> {
    let mut settings = BTreeMap::new();
    if opts.source == SampleSource::Faults {
        settings.insert("event".into(), "page-faults".into());
        settings.insert("sample_period".into(), 1.into());
    }
    if opts.source == SampleSource::Pmu {
        // The events chosen; the kernel's answers are added once the sampler is open.
        let names: Vec<&str> = opts.pmu_events.iter().map(|e| e.name.as_str()).collect();
        settings.insert("event".into(), names.join(" ").into());
    }
    settings.insert("objects_tracked".into(), track_objects.into());
    settings.insert("min_object".into(), opts.min_object.into());
    if let Some(inst) = &opts.inst {
        settings.insert("inst_mode".into(), inst.mode.env_value().into());
        settings.insert("sample_every".into(), inst.sample_every.into());
        settings.insert("max_sample_rate".into(), inst.max_sample_rate.into());
    }
    if !hooks_are_calls.is_empty() {
        // In the profile, so that the report's header says it too.
        let why = format!("calls, not inlined: {}", hooks_are_calls.join("; "));
        settings.insert("hooks".into(), why.into());
    }
    settings
}

/// The `meta.json` written before the program starts, marked incomplete.
fn start_meta(opts: &RecordOptions, track_objects: bool, hooks_are_calls: &[String]) -> Meta {
    let command = std::iter::once(&opts.program)
        .chain(&opts.args)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let assemble = AssembleOptions {
        topology: None,
        min_object: opts.min_object,
        backend: backend_name(opts),
        backend_settings: start_settings(opts, track_objects, hooks_are_calls),
        numa_balancing: None,
        thp: ThpMode::Never,
        recovered: None,
    };
    profile_meta(
        command,
        (numalens_format::meta::unix_now_ns(), monotonic_ns()),
        &assemble,
    )
}

/// True for an ELF executable without an interpreter (statically linked).
fn is_static_program(program: &std::ffi::OsStr) -> bool {
    let Some(path) = program_path(program) else {
        return false;
    };
    let Ok(bytes) = std::fs::read(&path) else {
        return false;
    };
    let Ok(file) = object::File::parse(&*bytes) else {
        return false;
    };
    file.section_by_name(".interp").is_none() && file.sections().any(|s| s.name() == Ok(".text"))
}

/// `kernel.numa_balancing` and its scan tunables, when the kernel has them.
pub fn numa_balancing() -> Option<NumaBalancing> {
    let mode = std::fs::read_to_string("/proc/sys/kernel/numa_balancing")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let mut tunables = BTreeMap::new();
    for dir in ["/sys/kernel/debug/sched/numa_balancing", "/proc/sys/kernel"] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let wanted = dir.ends_with("numa_balancing") || name.starts_with("numa_balancing_");
            if wanted && let Ok(value) = std::fs::read_to_string(entry.path()) {
                tunables.insert(name, value.trim().to_string());
            }
        }
    }
    Some(NumaBalancing { mode, tunables })
}

/// What the sampler's settings lost to the kernel's refusals, and what would give it back.
fn refusal_notes(info: &numalens_assemble::raw::SamplerInfo, source: SampleSource) -> Vec<String> {
    use crate::permission::{paranoid, refused_note};
    let mut notes = Vec::new();
    let setting = |key: &str| info.settings.get(key).and_then(Value::as_bool);
    if setting("physical_addresses") == Some(false) {
        let unknown = "the node of each load and store is unknown";
        notes.push(if setting("physical_addresses_denied") == Some(true) {
            refused_note("the samples' physical addresses", unknown, paranoid())
        } else {
            format!("this kernel or PMU gives no physical addresses of samples: {unknown}")
        });
    }
    if !info.kernel_faults {
        let missed = match source {
            SampleSource::Pmu => "loads, stores and faults inside system calls are missed",
            _ => "faults taken inside system calls are missed",
        };
        notes.push(refused_note("kernel-mode samples", missed, paranoid()));
    }
    notes
}
