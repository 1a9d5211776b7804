//! `numalens recover`: the profile of a recording whose recorder died before writing it.
//!
//! What a killed recorder leaves (see `unfinished.rs`): the `meta.json` written at the start,
//! the runtime's event logs in the events directory (the program's processes write them
//! themselves, so they are whole up to the program's end), the `inst` hooks' files, in the
//! events directory or moved there by the staging directory's guard, and the recorder's spill
//! file (`spill.rs`: its page-fault samples, task records and maps snapshots up to its last
//! 100 ms flush). From those the same assembly as `record` writes the profile. What is lost: the
//! recorder's last moments (and all it held when the spill file could not be written), its page
//! scans and the program's exit status. The profile is marked incomplete and says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numalens_assemble::pagesize::ThpMode;
use numalens_assemble::raw::RawRecording;
use numalens_assemble::spill::{Spilled, read_spill};
use numalens_assemble::{AssembleOptions, ProgramEnd, Summary, write_profile};
use numalens_format::{EVENTS_DIR, Meta};
use numalens_inst::guard;

use crate::unfinished::{ProcessId, read_processes};

/// How long `recover` waits for a guard that is still moving the hooks' files.
const GUARD_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoverError {
    #[error(
        "{0}: not a numalens recording (no meta.json); give the directory `numalens record` was writing"
    )]
    NotARecording(PathBuf),
    #[error("{0}: a finished profile; there is nothing to recover (`numalens report` reads it)")]
    Finished(PathBuf),
    #[error(
        "{path}: the recorder (pid {pid}) is still running; let it finish, or end it and run `numalens recover` again"
    )]
    RecorderRunning { path: PathBuf, pid: u32 },
    #[error(
        "{path}: the program (pid {pid}) is still running and still writing its logs; run `numalens recover` again once it has ended"
    )]
    ProgramRunning { path: PathBuf, pid: u32 },
    #[error(
        "{path}: the recording's `{EVENTS_DIR}` directory is gone, so nothing can be recovered; record the program again"
    )]
    NoEvents { path: PathBuf },
    #[error("{path}: {problem}")]
    Failed { path: PathBuf, problem: String },
}

/// What `recover` wrote.
pub struct Recovered {
    pub summary: Summary,
    pub profile: PathBuf,
}

/// Turns the unfinished recording in `dir` into a profile marked incomplete.
pub fn recover(dir: &Path) -> Result<Recovered, RecoverError> {
    let meta_path = dir.join("meta.json");
    if !meta_path.is_file() {
        return Err(RecoverError::NotARecording(dir.to_path_buf()));
    }
    let failed = |problem: String| RecoverError::Failed {
        path: dir.to_path_buf(),
        problem,
    };
    let meta = Meta::read(&meta_path).map_err(|e| failed(e.to_string()))?;
    if !meta.is_unfinished() {
        return Err(RecoverError::Finished(dir.to_path_buf()));
    }
    let events_dir = dir.join(EVENTS_DIR);
    if !events_dir.is_dir() {
        return Err(RecoverError::NoEvents {
            path: dir.to_path_buf(),
        });
    }
    let processes = read_processes(&events_dir);
    let running = |p: Option<ProcessId>| p.filter(ProcessId::is_alive).map(|p| p.pid);
    if let Some(pid) = running(processes.recorder) {
        return Err(RecoverError::RecorderRunning {
            path: dir.to_path_buf(),
            pid,
        });
    }
    if let Some(pid) = running(processes.program) {
        return Err(RecoverError::ProgramRunning {
            path: dir.to_path_buf(),
            pid,
        });
    }
    if let Some(recorder) = processes.recorder {
        collect_staged_files(recorder.pid, &events_dir).map_err(|e| failed(e.to_string()))?;
    }
    let spilled = read_spill(&events_dir);
    let found = spilled.found;
    let mut raw = raw_recording(&meta, events_dir.clone(), spilled);
    let settings = &meta.backend.settings;
    let thp = settings
        .get("transparent_hugepage")
        .and_then(|v| v.as_str())
        .map_or(ThpMode::Never, |name| ThpMode::parse(&format!("[{name}]")));
    let opts = AssembleOptions {
        topology: meta.topology.clone(),
        min_object: settings
            .get("min_object")
            .and_then(|v| v.as_u64())
            .unwrap_or(4096),
        backend: &meta.backend.name,
        backend_settings: settings.clone(),
        numa_balancing: meta.numa_balancing.clone(),
        thp,
        recovered: Some(reason(&meta, &events_dir, found)),
    };
    // Only the recorder could see the program's exit status and its own overhead.
    let summary = write_profile(&mut raw, dir, opts, |_| Ok(ProgramEnd::default()))
        .map_err(|e| failed(e.to_string()))?;
    if std::env::var_os("NUMALENS_KEEP_EVENTS").is_none() {
        let _ = std::fs::remove_dir_all(&events_dir);
    }
    Ok(Recovered {
        summary,
        profile: dir.to_path_buf(),
    })
}

/// Why the recovered profile is incomplete: what only the recorder held (all of it without a
/// spill file, else its last moments), and the hooks' files when they are not there (a full
/// disk under the events directory kept them out).
fn reason(meta: &Meta, events_dir: &Path, spilled: bool) -> String {
    let (pages, samples) = numalens_inst::files::find_inst_files(events_dir);
    let inst_found = !(pages.is_empty() && samples.is_empty());
    let mut from = vec!["the runtime's logs"];
    let mut missing = Vec::new();
    if inst_found {
        from.push("the instrumentation's files");
    } else if meta.backend.name == "inst" {
        missing.push("the instrumentation's files");
    }
    let faults = meta.backend.settings.contains_key("event");
    if spilled {
        from.push("the recorder's spill file");
        missing.push(if faults {
            "the page-fault samples and mappings of the recorder's last 100-200 ms"
        } else {
            "the mappings of the recorder's last 100-200 ms"
        });
    } else {
        if faults {
            missing.push("page-fault samples");
        }
        missing.push("mappings seen only by the recorder");
    }
    missing.push("the program's exit status");
    format!(
        "the recorder did not write the profile (it was killed, or could not write); recovered from {}: {} are missing",
        from.join(", "),
        missing.join(", ")
    )
}

/// A recording with what is on disk: the spill file's samples, task records and mappings.
fn raw_recording(meta: &Meta, events_dir: PathBuf, mut spilled: Spilled) -> RawRecording {
    // Spilled as the rings were drained, one CPU after the other: the assembly wants time order.
    spilled.faults.sort_by_key(|f| f.time_ns);
    RawRecording {
        command: meta.command.clone(),
        events_dir,
        inst_dir: None,
        faults: spilled.faults,
        tasks: spilled.tasks,
        lost: spilled.lost,
        // The kernel's own count is read at the end, which a killed recorder never reached: the
        // recovery reason says samples may be missing.
        lost_uncounted: false,
        outlived: None,
        maps: spilled.maps,
        scans: Vec::new(),
        migrations: Vec::new(),
        sampler: None,
        start_unix_ns: meta.start_unix_ns,
        clock_origin_ns: meta.clock.origin_ns,
        host: meta.host.clone(),
        page_size: meta.page_size,
    }
}

/// Brings the hooks' files of the recorder `recorder` from `/dev/shm` into the events
/// directory, when its guard could not (it was killed too): waits for a guard that is still at
/// work, then copies what is left and removes the directory.
fn collect_staged_files(recorder: u32, events_dir: &Path) -> std::io::Result<()> {
    for dir in numalens_inst::staging::directories_of(recorder) {
        let waiting = Instant::now();
        while guard::is_guarded(&dir) && waiting.elapsed() < GUARD_WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !dir.exists() {
            continue;
        }
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            std::fs::copy(entry.path(), events_dir.join(entry.file_name()))?;
        }
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
