//! `numalens record`: run a program and write its profile; exit with the program's status.

use std::path::{Path, PathBuf};

use anyhow::Result;
use numalens_analyze::model::lost_samples_note;
use numalens_inst::{InstMode, InstOptions};
use numalens_record::launch::LaunchError;
use numalens_record::pmu_events::LiveEvent;
use numalens_record::pmu_live::NoLiveEvent;
use numalens_record::record::{RecordError, RecordOptions, SampleSource};
use numalens_record::sampler::SamplerError;
use numalens_record::session::{Recorded, record_with};

use crate::cli::{BackendArg, InstModeArg, RecordArgs, RecordingArgs};
use crate::exit::{ExitWith, UsageError};

pub fn run(args: RecordArgs) -> Result<()> {
    let (opts, backend) = record_options(&args.recording, &args.command)?;
    let recorded = record_with_fallback(opts, backend, None)?;
    print_summary(&recorded);
    program_status(&recorded)
}

/// The recorder's options from the command line.
pub fn record_options(
    args: &RecordingArgs,
    command: &[std::ffi::OsString],
) -> Result<(RecordOptions, BackendArg)> {
    if let Some(runtime) = &args.runtime {
        numalens_preload::runtime::check_runtime(runtime)
            .map_err(|e| UsageError(format!("--runtime: {e}")))?;
    }
    let program = command[0].clone();
    if program.is_empty() {
        return Err(UsageError("the program to record is an empty name".into()).into());
    }
    // What auto records depends on whether the program carries the hooks: read it once.
    let hooks = (args.backend == BackendArg::Auto).then(|| numalens_inst::check_program(&program));
    let auto_inst = matches!(hooks, Some(Ok(_)));
    let mut inst = inst_options(args, hooks.as_ref())?;
    let pmu_events = pmu_events(args, inst.is_some() || auto_inst, &program)?;
    if auto_inst && pmu_events.is_empty() {
        // A build with `numalens cc` carries the hooks: its accesses are what it was built for.
        eprintln!(
            "numalens: {} is built with `numalens cc`: recording its accesses (--backend inst; \
             --backend faults records first touches only)",
            program.to_string_lossy()
        );
        inst.get_or_insert_with(InstOptions::default);
    }
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(Path::new(&program)));
    let opts = RecordOptions {
        program,
        args: command[1..].to_vec(),
        output,
        source: match args.backend {
            BackendArg::None => SampleSource::None,
            _ if !pmu_events.is_empty() => SampleSource::Pmu,
            BackendArg::Auto | BackendArg::Faults | BackendArg::Inst | BackendArg::Pmu => {
                SampleSource::Faults
            }
        },
        pmu_events,
        min_object: args.min_object,
        runtime: args.runtime.clone(),
        track_objects: !args.no_runtime,
        ring_pages: args.ring_pages,
        status_line: true,
        page_scan_interval: args.page_scan_interval,
        inst,
        plan_rules: None,
    };
    Ok((opts, args.backend))
}

/// Records, falling back to allocations and threads only when the kernel refuses the sampler
/// and the backend allows it; errors become the exit statuses `numalens record` documents.
pub fn record_with_fallback(
    mut opts: RecordOptions,
    backend: BackendArg,
    mut hook: Option<&mut dyn numalens_record::record::LiveHook>,
) -> Result<Recorded> {
    use numalens_record::record::LiveHook;
    // A reborrow for the first try, whose trait object's lifetime is shortened to it.
    let first = record_with(&opts, hook.as_deref_mut().map(|h| h as &mut dyn LiveHook));
    let first = match first {
        Err(RecordError::Launch(LaunchError::Sampler(e)))
            if backend == BackendArg::Auto && opts.source == SampleSource::Pmu =>
        {
            // The PMU is listed but refuses the event (a virtual PMU without PEBS or IBS):
            // first touches are still there to record.
            eprintln!("numalens: {e}\nnumalens: recording page faults instead (--backend faults)");
            opts.source = SampleSource::Faults;
            opts.pmu_events.clear();
            record_with(&opts, hook.as_deref_mut().map(|h| h as &mut dyn LiveHook))
        }
        other => other,
    };
    let recorded = match first {
        Err(RecordError::Launch(LaunchError::Sampler(e @ SamplerError::Denied(_))))
            if matches!(backend, BackendArg::Auto | BackendArg::Inst) =>
        {
            eprintln!(
                "numalens: {e}\nnumalens: recording allocations and threads only (--backend none)"
            );
            opts.source = SampleSource::None;
            record_with(&opts, hook)
        }
        other => other,
    };
    let recorded = match recorded {
        Ok(r) => r,
        Err(RecordError::Inst(e)) => {
            return Err(ExitWith {
                status: 2,
                message: e.to_string(),
            }
            .into());
        }
        Err(RecordError::Launch(e)) => {
            let status = e.exit_status();
            return Err(ExitWith {
                status,
                message: e.to_string(),
            }
            .into());
        }
        Err(e @ RecordError::OutputExists { .. }) => return Err(UsageError(e.to_string()).into()),
        Err(e) => return Err(e.into()),
    };
    Ok(recorded)
}

/// The `inst` backend's settings. `--inst-mode`, `--sample-every` and `--max-sample-rate` are
/// taken with `--backend inst`, and with `--backend auto` for a program built with `numalens
/// cc` (which auto records with inst; `hooks` is the program's check under auto); elsewhere
/// they are a usage error rather than settings silently ignored.
fn inst_options(
    args: &RecordingArgs,
    hooks: Option<&Result<numalens_inst::InstProgram, numalens_inst::InstCheckError>>,
) -> Result<Option<InstOptions>, UsageError> {
    let given: Vec<&str> = [
        args.inst_mode.map(|_| "--inst-mode"),
        args.sample_every.map(|_| "--sample-every"),
        args.max_sample_rate.map(|_| "--max-sample-rate"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let (verb, them) = if given.len() > 1 {
        ("apply", "them")
    } else {
        ("applies", "it")
    };
    match args.backend {
        BackendArg::Inst => {}
        _ if given.is_empty() => return Ok(None),
        BackendArg::Auto => {
            if let Some(Err(e)) = hooks {
                // The check's own message says what to do about a script or libtsan; only a
                // plain build needs telling how to rebuild.
                let why = match e {
                    numalens_inst::InstCheckError::NotInstrumented(name) => format!(
                        "{name} is not one. Rebuild it with the compiler wrappers (e.g. `make \
                         CC=\"numalens cc\" CXX=\"numalens c++\"`)"
                    ),
                    other => other.to_string(),
                };
                return Err(UsageError(format!(
                    "{} only {verb} to `--backend inst`, which `--backend auto` takes for a \
                     program built with `numalens cc`: {why}; or leave {them} out",
                    given.join(" and ")
                )));
            }
        }
        other => {
            return Err(UsageError(format!(
                "{} only {verb} to `--backend inst` (a program built with `numalens cc`), and \
                 this recording uses `--backend {}`: add `--backend inst` or leave {them} out",
                given.join(" and "),
                format!("{other:?}").to_lowercase()
            )));
        }
    }
    let defaults = InstOptions::default();
    Ok(Some(InstOptions {
        mode: match args.inst_mode {
            None => defaults.mode,
            Some(InstModeArg::Exact) => InstMode::Exact,
            Some(InstModeArg::Sampled) => InstMode::Sampled,
            Some(InstModeArg::Both) => InstMode::Both,
        },
        sample_every: args.sample_every.unwrap_or(defaults.sample_every),
        max_sample_rate: args.max_sample_rate.unwrap_or(defaults.max_sample_rate),
    }))
}

/// The precise events `--backend pmu` records, or `auto` when the recording does not use the
/// hooks (`inst`: the program is not built with `numalens cc`) and the machine has them; none
/// for the other backends. Says which it chose.
fn pmu_events(
    args: &RecordingArgs,
    inst: bool,
    program: &std::ffi::OsStr,
) -> Result<Vec<LiveEvent>, UsageError> {
    let wanted = match args.backend {
        BackendArg::Pmu => true,
        // A build with `numalens cc` records every access with the hooks: auto takes that.
        BackendArg::Auto => !inst,
        _ => false,
    };
    let chosen = match args.backend {
        BackendArg::Pmu | BackendArg::Auto => pmu_choice(args.backend, wanted, args.sample_period)?,
        _ => None,
    };
    match (args.backend, chosen) {
        (_, Some(Ok(events))) => {
            let period = match events[0].meaning.fixed_period {
                1 => "every event".to_string(),
                n => format!("one in {n} events"),
            };
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            if events[0].name == numalens_record::pmu_live::stand_in(None).name {
                eprintln!(
                    "numalens: test stand-in ({}): sampling page faults as if they were loads, \
                     {period}, beside the page faults themselves (--backend pmu); no data source \
                     or latency is measured",
                    numalens_record::pmu_live::STAND_IN_VAR
                );
            } else {
                eprintln!(
                    "numalens: sampling loads and stores with {}, {period}, and page faults \
                     (--backend pmu)",
                    names.join(" and ")
                );
            }
            Ok(events)
        }
        (BackendArg::Pmu, Some(Err(missing))) => Err(UsageError(pmu_refusal(&missing, program))),
        (_, _) if args.sample_period.is_some() => Err(UsageError(format!(
            "--sample-period applies to `--backend pmu`, and this recording uses `--backend {}` \
             (auto takes pmu only on a machine with a precise memory event, for a program not \
             built with `numalens cc`): leave it out",
            format!("{:?}", args.backend).to_lowercase()
        ))),
        _ => Ok(Vec::new()),
    }
}

/// The precise events of `--backend pmu` (the stand-in when `NUMALENS_PMU_STAND_IN` asks for it)
/// or, when `wanted`, of `--backend auto` (the machine's own: auto never takes the test
/// stand-in, and says that it leaves it out). A value of the variable that it does not take is
/// an error under both.
fn pmu_choice(
    backend: BackendArg,
    wanted: bool,
    period: Option<u64>,
) -> Result<Option<Result<Vec<LiveEvent>, NoLiveEvent>>, UsageError> {
    use numalens_record::pmu_live::{self, STAND_IN_VAR};
    let stand_in = pmu_live::stand_in_requested().map_err(UsageError)?;
    if backend == BackendArg::Pmu {
        return Ok(Some(pmu_live::choose(period)));
    }
    if stand_in {
        eprintln!(
            "numalens: note: {STAND_IN_VAR} is a test stand-in taken only with --backend pmu; \
             --backend auto leaves it out and records with what this machine has"
        );
    }
    Ok(wanted.then(|| pmu_live::choose_hardware(period)))
}

/// Why `--backend pmu` does not record here, and what does.
fn pmu_refusal(missing: &NoLiveEvent, program: &std::ffi::OsStr) -> String {
    if let NoLiveEvent::BadStandIn(why) = missing {
        return why.clone();
    }
    let works = if numalens_inst::check_program(program).is_ok() {
        "--backend inst (this program is built with `numalens cc`) records every access here"
    } else {
        "--backend faults records first touches here; a build with `numalens cc` and --backend \
         inst records every access"
    };
    format!("--backend pmu: {missing}. {works}")
}

/// `PROGRAM.numalens`, or `PROGRAM.2.numalens`, … when taken.
fn default_output(program: &Path) -> PathBuf {
    let stem = program
        .file_name()
        .map_or("program".into(), |n| n.to_string_lossy().into_owned());
    free_profile_name(&stem)
}

/// `STEM.numalens`, or `STEM.2.numalens`, … when taken.
pub(crate) fn free_profile_name(stem: &str) -> PathBuf {
    let first = PathBuf::from(format!("{stem}.numalens"));
    if !first.exists() {
        return first;
    }
    (2..)
        .map(|n| PathBuf::from(format!("{stem}.{n}.numalens")))
        .find(|p| !p.exists())
        .expect("a free name")
}

pub fn print_summary(r: &Recorded) {
    let s = &r.summary;
    for note in &r.notes {
        eprintln!("numalens: note: {note}");
    }
    let share = |n: u64| {
        if s.first_touches == 0 {
            100.0
        } else {
            100.0 * n as f64 / s.first_touches as f64
        }
    };
    eprintln!(
        "numalens: {} samples ({} first touches: {:.1}% in tracked objects, {:.1}% in any object), \
         {} objects, {} threads, {} lost",
        s.samples,
        s.first_touches,
        share(s.first_touches_tracked),
        share(s.first_touches_attributed),
        s.objects,
        s.threads,
        s.lost
    );
    if let Some(o) = &s.outlived {
        if !o.stopped_early {
            eprintln!(
                "numalens: recorded until the last of {} processes exited, {:.1} s after the first",
                o.processes,
                o.after_first.as_secs_f64()
            );
        } else {
            let pids: Vec<String> = o.still_running.iter().map(u32::to_string).collect();
            let which = if pids.is_empty() {
                "processes of the program whose ids were not recorded".to_string()
            } else {
                pids.join(", ")
            };
            eprintln!(
                "numalens: recording stopped {:.1} s after the first process exited; still \
                 running: {which} (their work after that point is not in the profile)",
                o.after_first.as_secs_f64(),
            );
        }
    }
    let ring_samples = s.samples.saturating_sub(s.inst_samples);
    if let Some(note) = lost_samples_note(s.lost, ring_samples, s.ring_pages) {
        eprintln!("numalens: {note}");
    }
    if s.exact_pages > 0 || s.inst_samples > 0 {
        eprintln!(
            "numalens: instrumentation: {} accesses counted exactly over {} thread pages, {} sampled accesses",
            s.exact_accesses, s.exact_pages, s.inst_samples
        );
    }
    if !s.complete {
        eprintln!(
            "numalens: the profile is marked incomplete: {}",
            s.reasons.join("; ")
        );
    }
    eprintln!("numalens: profile written to {}", r.profile.display());
}

/// The program's own exit status becomes ours (128 + signal for a killed program).
pub fn program_status(r: &Recorded) -> Result<()> {
    use std::os::unix::process::ExitStatusExt;
    let status = match (r.exit.code(), r.exit.signal()) {
        (Some(0), _) => return Ok(()),
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        _ => 1,
    };
    Err(ExitWith {
        status,
        message: String::new(),
    }
    .into())
}
