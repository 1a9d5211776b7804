//! `numalens record`: run a program under the runtime and the sampler, then write its profile.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numalens_assemble::procmaps::{Mapping, MapsHistory};
use numalens_assemble::raw::{Access, Fault, PerfEvent, RawRecording, ScannedRun};
use numalens_assemble::spill::Spill;
use numalens_assemble::symbols::ModuleFiles;
use numalens_assemble::this_host;
use numalens_inst::staging::InstStaging;

use crate::faults::online_cpus;
use crate::launch::{ExitWatch, LaunchError, LaunchSpec, launch};
use crate::outlive::{FirstExit, Others};
pub use crate::program_end::{ProgramEnding, Reaper, own_cpu_time};
use crate::ring_drain::RingDrain;
use crate::scan::scan_process;
use crate::signals;
use crate::status_line::StatusLine;
use crate::time_order::{FaultsInOrder, SETTLE_LAG_NS};

/// Where accesses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleSource {
    /// Page-fault sampling (perf software event).
    Faults,
    /// Precise sampling of loads and stores (`RecordOptions::pmu_events`).
    Pmu,
    /// Allocation and thread tracking only.
    None,
}

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub output: PathBuf,
    pub source: SampleSource,
    /// Allocations of at least this many bytes get a record and a call site.
    pub min_object: u64,
    /// Use this runtime library instead of the embedded one.
    pub runtime: Option<PathBuf>,
    /// Preload the runtime (objects and threads); off for static programs.
    pub track_objects: bool,
    /// Pages per CPU of each sampling ring.
    pub ring_pages: usize,
    /// The events of `SampleSource::Pmu` (`pmu_live::choose`).
    pub pmu_events: Vec<crate::pmu_events::LiveEvent>,
    /// Print a status line on stderr while the program runs.
    pub status_line: bool,
    /// Query where every data page of the program is this often (`--page-scan-interval`).
    pub page_scan_interval: Option<Duration>,
    /// Count or sample every access of a program built with `numalens cc` (`--backend inst`).
    pub inst: Option<numalens_inst::InstOptions>,
    /// The rules file of `numalens run --plan` for the runtime to apply (numalens_plan.h).
    pub plan_rules: Option<PathBuf>,
}

impl RecordOptions {
    /// Page-fault sampling with objects tracked, the defaults of `numalens record`.
    pub fn new(program: impl Into<OsString>, args: Vec<OsString>, output: PathBuf) -> Self {
        RecordOptions {
            program: program.into(),
            args,
            output,
            source: SampleSource::Faults,
            min_object: 4096,
            runtime: None,
            track_objects: true,
            ring_pages: 256,
            pmu_events: Vec::new(),
            status_line: false,
            page_scan_interval: None,
            inst: None,
            plan_rules: None,
        }
    }
}

/// What the run produced, before it is turned into a profile.
pub struct Recording {
    pub raw: RawRecording,
    /// The program's end, which only the recorder sees.
    pub end: ProgramEnding,
    /// Where the `inst` hooks wrote their files (with `--backend inst`); removed when dropped,
    /// so it is kept until the profile is written.
    pub inst_staging: Option<InstStaging>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    #[error("{path}: {problem}")]
    Output { path: PathBuf, problem: String },
    #[error("{path}: already exists; remove it or choose another name with -o")]
    OutputExists { path: PathBuf },
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("runtime: {0}")]
    Runtime(String),
    #[error(transparent)]
    Inst(#[from] numalens_inst::InstCheckError),
    #[error("waiting for the program failed: {0}")]
    Wait(std::io::Error),
}

/// Checks that the profile can be written, before the program runs.
pub fn prepare_output(output: &Path) -> Result<PathBuf, RecordError> {
    let fail = |problem: String| RecordError::Output {
        path: output.to_path_buf(),
        problem,
    };
    if output.join(numalens_format::EVENTS_DIR).is_dir()
        && numalens_format::Meta::read(&output.join("meta.json")).is_ok_and(|m| m.is_unfinished())
    {
        return Err(fail(format!(
            "holds a recording that was not finished; run `numalens recover {}` to keep it, or remove it, or choose another name with -o",
            output.display()
        )));
    }
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| fail(format!("cannot be created: {e}")))?;
    }
    // Creating the directory is the test that it is new: two recordings started at once with the
    // same -o cannot both pass it.
    std::fs::create_dir(output).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => RecordError::OutputExists {
            path: output.to_path_buf(),
        },
        _ => fail(format!("cannot be created: {e}")),
    })?;
    let events = output.join(".events");
    std::fs::create_dir(&events).map_err(|e| fail(format!("is not writable: {e}")))?;
    Ok(events)
}

/// CLOCK_MONOTONIC now, in ns: the clock of perf samples and runtime records.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What runs beside the recorder's loop while the program runs: the online placement engine.
/// Called at every turn of the loop (about every 50 ms) with the samples put in time order
/// since the last call; returns the `migrations` rows of what it did.
pub trait LiveHook {
    fn tick(&mut self, live: LiveView<'_>) -> Vec<numalens_format::Migration>;
    /// The program has ended: what is still under way is finished and reported.
    fn finish(&mut self, _now_ns: u64) -> Vec<numalens_format::Migration> {
        Vec::new()
    }
}

/// The run as the loop sees it now.
pub struct LiveView<'a> {
    /// Monotonic clock now and at the recording's origin, ns.
    pub now_ns: u64,
    pub origin_ns: u64,
    /// Processes of the program running now.
    pub live: &'a std::collections::BTreeSet<u32>,
    /// Page-fault samples in time order since the last call.
    pub faults: &'a [Fault],
    /// The `pmu` backend's load and store samples since the last call, as the rings were
    /// drained (each CPU's in time order).
    pub accesses: &'a [Access],
    /// Where the `inst` hooks write their files (`--backend inst`): their sampled stream can be
    /// read live with [`numalens_inst::tail::SamplesTail`].
    pub inst_dir: Option<&'a std::path::Path>,
    /// Where the preload runtime writes its event logs (records reach them as each thread's
    /// buffer is flushed), when it runs.
    pub events_dir: Option<&'a std::path::Path>,
}

/// Runs the program to its end, sampling it; the program's own output goes where ours goes.
pub fn run(
    opts: &RecordOptions,
    events_dir: PathBuf,
    runtime: Option<PathBuf>,
) -> Result<Recording, RecordError> {
    run_with(opts, events_dir, runtime, None)
}

/// [`run`], with `hook` called as the program runs.
pub fn run_with(
    opts: &RecordOptions,
    events_dir: PathBuf,
    runtime: Option<PathBuf>,
    mut hook: Option<&mut dyn LiveHook>,
) -> Result<Recording, RecordError> {
    // The program's processes may change directory before they open their logs (daemons do).
    let events_dir = std::path::absolute(&events_dir).unwrap_or(events_dir);
    let inst_staging = opts.inst.map(|_| InstStaging::new(&events_dir));
    let inst_dir = inst_staging.as_ref().map(|s| s.dir());
    let env = program_env(opts, &events_dir, inst_dir, runtime);
    let sample_cpus = match opts.source {
        SampleSource::Faults | SampleSource::Pmu => {
            Some(online_cpus().map_err(|e| RecordError::Runtime(e.to_string()))?)
        }
        SampleSource::None => None,
    };
    let spec = LaunchSpec {
        program: opts.program.clone(),
        args: opts.args.clone(),
        env,
        sample_cpus,
        precise: (opts.source == SampleSource::Pmu).then(|| opts.pmu_events.clone()),
        ring_pages: opts.ring_pages,
    };
    signals::install();
    let start_unix_ns = numalens_format::meta::unix_now_ns();
    let clock_origin_ns = monotonic_ns();
    let started = Instant::now();
    let cpu_at_start = own_cpu_time();
    let mut launched = launch(&spec)?;
    crate::unfinished::note_program(&events_dir, launched.child.id());
    if let Some(staging) = &inst_staging {
        staging.watch(launched.child.id());
    }
    let live_pass = inst_staging
        .as_ref()
        .and_then(|s| crate::live_pass::LivePass::start(s.dir().to_path_buf()));
    // The rings are drained on a thread of their own: nothing the loop does holds them up.
    let mut rings = launched.sampler.take().map(RingDrain::start);
    // Without rings, whose hang-up reports the end, the program's exit is watched directly.
    let exit_watch = rings.is_none().then(|| ExitWatch::new(launched.child.id()));
    let mut raw = Collected {
        spill: Spill::create(&events_dir),
        ..Collected::default()
    };
    raw.live.insert(launched.child.id());
    let mut status = StatusLine::new(opts.status_line, &events_dir);
    let mut last_snapshot: Option<Instant> = None;
    let mut last_scan: Option<Instant> = None;
    let page_size = crate::perf::page_size() as u64;
    // The first process's status and when it was reaped: the recording goes on while other
    // processes of the program (a daemon's child) still run.
    let mut first_exit: Option<FirstExit> = None;
    let exit = loop {
        match &mut rings {
            Some(r) => {
                let over = r.receive(TURN, |e| raw.take(e));
                raw.faults
                    .settle(monotonic_ns().saturating_sub(SETTLE_LAG_NS));
                if let Some(hook) = hook.as_deref_mut() {
                    let seen = raw.hooked;
                    let faults = raw.faults.ordered_since(seen);
                    let accesses = &raw.accesses[raw.hooked_accesses..];
                    let rows = hook.tick(LiveView {
                        now_ns: monotonic_ns(),
                        origin_ns: clock_origin_ns,
                        live: &raw.live,
                        faults,
                        accesses,
                        inst_dir: inst_staging.as_ref().map(|s| s.dir()),
                        events_dir: Some(&events_dir),
                    });
                    raw.hooked = seen + faults.len();
                    raw.hooked_accesses = raw.accesses.len();
                    raw.migrations.extend(rows);
                }
                if over {
                    // Every task has exited: nothing more will be sampled, and the rest is the
                    // kernel freeing the program's memory.
                    break match &first_exit {
                        Some(first) => Ended::Reaped(first.status),
                        None => Ended::Exiting,
                    };
                }
            }
            // Once the first process is reaped its pidfd stays readable: sleep instead.
            None if first_exit.is_some() => std::thread::sleep(TURN),
            None => exit_watch
                .as_ref()
                .expect("made without a sampler")
                .wait(TURN.as_millis() as i32),
        }
        if first_exit.is_none() {
            // Once the first process is reaped its pid may be reused: nothing is sent to it then.
            signals::forward_pending(launched.child.id());
        }
        let snapshot_due = last_snapshot.is_none_or(|t| t.elapsed() >= MAPS_INTERVAL);
        let scan_due = opts
            .page_scan_interval
            .is_some_and(|every| last_scan.is_none_or(|t| t.elapsed() >= every));
        if snapshot_due || scan_due {
            // A scan needs the mappings of the moment: one read of the maps serves both.
            last_snapshot = Some(Instant::now());
            if scan_due {
                last_scan = last_snapshot;
            }
            let now = monotonic_ns();
            raw.prune_live();
            for pid in &raw.live {
                let mappings = snapshot(&mut raw.maps, &mut raw.spill, *pid, now);
                if scan_due {
                    scan_process(*pid, &mappings, page_size, now, &mut raw.scans);
                }
            }
            raw.spill.flush();
        }
        let samples = raw.faults.len() + raw.accesses.len();
        let drained = (samples, raw.tasks.as_slice(), raw.lost);
        status.update(started.elapsed(), drained, rings.as_ref());
        if first_exit.is_none()
            && let Some(exit) = launched.child.try_wait().map_err(RecordError::Wait)?
        {
            raw.live.remove(&launched.child.id());
            first_exit = Some(FirstExit::new(exit));
        }
        // The other processes are waited for until a signal to the recorder (the user's
        // Ctrl-C) says to stop.
        let others = Others {
            rings: rings.as_ref(),
            live: &raw.live,
            events_dir: &events_dir,
        };
        if let Some(first) = &mut first_exit
            && first.ends(others, signals::interrupted().is_some())
        {
            break Ended::Reaped(first.status);
        }
    };
    // The thread's last drain; after the program's end the kernel's lost count is final.
    // A drain thread that failed leaves what it handed over: the profile is made of that and
    // says what is missing.
    let (mut sampler, drain_failure) = match rings.map(|r| r.finish(|e| raw.take(e))) {
        Some(Ok(sampler)) => (Some(sampler), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    // What the last turns drained goes to disk too: a recorder killed while it writes the
    // profile then loses nothing of the run, and the events directory holds the whole recording.
    raw.spill.flush();
    let inst_live = live_pass.and_then(|p| p.finish());
    if let Some(hook) = hook {
        raw.migrations.extend(hook.finish(monotonic_ns()));
    }
    let running_cpu = own_cpu_time().saturating_sub(cpu_at_start);
    // Without rings, the runtime's logs tell how many processes there were.
    let processes = raw
        .processes_seen()
        .max(crate::outlive::logged_processes(&events_dir));
    let outlived = first_exit.and_then(|first| first.outlived(processes));
    let lost = sampler.as_ref().map(|s| s.lost()).unwrap_or_default();
    let mut incomplete = sampler.as_mut().map(spe_notes).unwrap_or_default();
    incomplete.extend(drain_failure);
    let (exit, reaper) = match exit {
        Ended::Reaped(exit) => (exit, None),
        Ended::Exiting => (
            std::os::unix::process::ExitStatusExt::from_raw(0),
            Some(Reaper::start(launched.child)),
        ),
    };
    status.finish();
    let raw = RawRecording {
        command: std::iter::once(&opts.program)
            .chain(&opts.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        inst_dir: inst_staging.as_ref().map(|s| s.dir().to_path_buf()),
        inst_live,
        events_dir: Some(events_dir),
        faults: raw.faults.into_ordered(),
        accesses: raw.accesses,
        access_stream: None,
        objects: Vec::new(),
        tasks: raw.tasks,
        // The kernel's own count covers the LOST records and what they never told.
        lost: raw.lost.max(lost.counted.unwrap_or(0)),
        lost_uncounted: lost.counted.is_none() && lost.rings_filled,
        outlived,
        maps: raw.maps,
        scans: raw.scans,
        migrations: raw.migrations,
        sampler: sampler.map(|s| s.info),
        start_unix_ns,
        end_unix_ns: None,
        incomplete,
        clock_origin_ns,
        host: this_host(),
        page_size,
        module_files: ModuleFiles::AsRecorded,
    };
    let end = ProgramEnding {
        exit,
        wall: started.elapsed(),
        ended: Instant::now(),
        running_cpu,
        reaper,
    };
    Ok(Recording {
        raw,
        end,
        inst_staging,
    })
}

/// What an SPE event's AUX area says of the recording: a reason it is incomplete when the area
/// filled, and the chunks with colliding samples in the backend's settings.
fn spe_notes(sampler: &mut crate::sampler::Sampler) -> Vec<String> {
    let collisions = sampler.spe_collisions();
    if collisions > 0 {
        let settings = &mut sampler.info.settings;
        settings.insert("spe_collisions".into(), collisions.into());
    }
    match sampler.spe_truncated() {
        0 => Vec::new(),
        n => vec![format!(
            "Arm SPE's AUX area filled {n} times: the samples until the recorder emptied it \
             were lost; a larger --ring-pages gives the area more room"
        )],
    }
}

/// The environment the runtimes read: where to write, what to record, the plan's rules, and
/// the preloaded runtime ahead of any the program already preloads.
fn program_env(
    opts: &RecordOptions,
    events_dir: &Path,
    inst_dir: Option<&Path>,
    runtime: Option<PathBuf>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = vec![
        ("NUMALENS_DIR".into(), events_dir.into()),
        (
            "NUMALENS_MIN_OBJECT".into(),
            opts.min_object.to_string().into(),
        ),
        ("NUMALENS_PAGE_NODES".into(), "1".into()),
    ];
    env.extend(opts.inst.iter().flat_map(|i| i.env()));
    if let Some(rules) = &opts.plan_rules {
        let rules = std::path::absolute(rules).unwrap_or(rules.clone());
        env.push(("NUMALENS_PLAN".into(), rules.into()));
        env.push((
            "NUMALENS_PLAN_PARENT".into(),
            std::process::id().to_string().into(),
        ));
    }
    if let Some(dir) = inst_dir {
        env.push(("NUMALENS_INST_DIR".into(), dir.into()));
    }
    if let Some(runtime) = runtime {
        let mut preload = OsString::from(runtime);
        if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
            preload.push(":");
            preload.push(existing);
        }
        env.push(("LD_PRELOAD".into(), preload));
    }
    env
}

/// How the record loop ended.
enum Ended {
    Reaped(std::process::ExitStatus),
    /// Every task of the program has exited; the first process is not reaped yet.
    Exiting,
}

/// The longest turn of the loop: it waits this long for what the rings gave.
const TURN: Duration = Duration::from_millis(50);

/// How often the recorder reads the maps of the program's processes.
const MAPS_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Collected {
    faults: FaultsInOrder,
    /// The `pmu` backend's samples, as drained (the assembly sorts them).
    accesses: Vec<Access>,
    /// How many of them the live hook has been given.
    hooked_accesses: usize,
    tasks: Vec<PerfEvent>,
    lost: u64,
    maps: MapsHistory,
    scans: Vec<ScannedRun>,
    /// Processes of the program that are running now.
    live: std::collections::BTreeSet<u32>,
    /// A copy of all the above on disk, for `numalens recover`.
    spill: Spill,
    /// Ordered samples the live hook has seen.
    hooked: usize,
    /// What the live hook did.
    migrations: Vec<numalens_format::Migration>,
}

impl Collected {
    /// The first process and every process it or its descendants started.
    /// Forgets the processes that no longer exist.
    fn prune_live(&mut self) {
        self.live.retain(|pid| crate::outlive::exists(*pid));
    }

    fn processes_seen(&self) -> u64 {
        let forks = self
            .tasks
            .iter()
            .filter(|t| matches!(t, PerfEvent::Fork { pid, tid, .. } if pid == tid));
        1 + forks.count() as u64
    }

    fn take(&mut self, event: PerfEvent) {
        self.spill.event(&event);
        match event {
            PerfEvent::Fault(f) => self.faults.push(f),
            PerfEvent::Access(a) => self.accesses.push(a),
            PerfEvent::Lost { count } => self.lost += count,
            other => {
                match &other {
                    PerfEvent::Fork { pid, tid, .. } if pid == tid => {
                        self.live.insert(*pid);
                    }
                    // A main thread's EXIT does not end its process when other threads run
                    // on (pthread_exit): processes leave `live` in `prune_live`, when gone.
                    PerfEvent::Comm {
                        pid, exec: true, ..
                    } => {
                        // A new image: its maps replace the old ones right away.
                        snapshot(&mut self.maps, &mut self.spill, *pid, monotonic_ns());
                    }
                    _ => {}
                }
                self.tasks.push(other)
            }
        }
    }
}

/// Reads `/proc/PID/maps` into the history and the spill; a process that is gone gives nothing.
fn snapshot(maps: &mut MapsHistory, spill: &mut Spill, pid: u32, now: u64) -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    spill.maps(pid, now, &text);
    maps.add(pid, &text, now)
}
