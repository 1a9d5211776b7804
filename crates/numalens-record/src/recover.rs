//! `numalens recover`: the profile of a recording whose recorder died before writing it.
//!
//! What a killed recorder leaves (see `unfinished.rs`): the `meta.json` written at the start,
//! the runtime's event logs in the events directory (the program's processes write them
//! themselves, so they are whole up to the program's end), the `inst` hooks' files, in the
//! events directory or moved there by the staging directory's guard, and the recorder's spill
//! file (`numalens-assemble`'s `spill.rs`: its page-fault samples, task records and maps
//! snapshots up to its last 100 ms flush). Once no one writes there any more and the hooks' files
//! are in, the assembly of a stored recording (`numalens_assemble::stored`) writes the profile.
//! What is lost: the recorder's last moments (and all it held when the spill file could not be
//! written), its page scans and the program's exit status. The profile is marked incomplete and
//! says so.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numalens_assemble::Summary;
use numalens_assemble::stored::write_stored_profile;
use numalens_assemble::symbols::ModuleFiles;
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
    let summary = write_stored_profile(dir, dir, ModuleFiles::AsRecorded)
        .map_err(|e| failed(e.to_string()))?;
    if std::env::var_os("NUMALENS_KEEP_EVENTS").is_none() {
        let _ = std::fs::remove_dir_all(&events_dir);
    }
    Ok(Recovered {
        summary,
        profile: dir.to_path_buf(),
    })
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
