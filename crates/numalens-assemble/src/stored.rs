//! A recording read back from its directory: the profile directory as the recorder leaves it
//! before it writes the profile (see `numalens-record`'s `unfinished.rs`), which is what a killed
//! recorder leaves for `numalens recover`, and what the assembly's tests store.
//!
//! The directory holds the `meta.json` written when the recording started (the command, the
//! clock origin, the machine and the backend's settings) and the events directory: the runtime's
//! event logs, the `inst` hooks' files and the recorder's spill file ([`crate::spill`]: its
//! page-fault samples, task records and maps snapshots up to its last 100 ms flush). What only
//! the live recorder holds is missing: its last moments (all it held when there is no spill
//! file), its page scans and the program's exit status. The profile is marked incomplete and
//! says so.

use std::path::{Path, PathBuf};

use numalens_format::{EVENTS_DIR, FormatError, Meta};

use crate::pagesize::ThpMode;
use crate::raw::RawRecording;
use crate::spill::{Spilled, read_spill};
use crate::symbols::ModuleFiles;
use crate::{AssembleOptions, ProgramEnd, Summary, write_profile};

/// Why a stored recording could not be turned into a profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoredError {
    #[error("{0}: not a numalens recording (no readable meta.json): {1}")]
    NoMeta(PathBuf, FormatError),
    #[error("{0}: the recording's `{EVENTS_DIR}` directory is missing")]
    NoEvents(PathBuf),
    #[error(transparent)]
    Write(#[from] FormatError),
}

/// Writes the profile of the recording stored in `recording` into `output` (which may be
/// `recording` itself) and returns its summary. `modules` says where the files of the modules
/// the recording names are read, for symbols and static objects.
pub fn write_stored_profile(
    recording: &Path,
    output: &Path,
    modules: ModuleFiles,
) -> Result<Summary, StoredError> {
    let meta = Meta::read(&recording.join("meta.json"))
        .map_err(|e| StoredError::NoMeta(recording.to_path_buf(), e))?;
    let events_dir = recording.join(EVENTS_DIR);
    if !events_dir.is_dir() {
        return Err(StoredError::NoEvents(recording.to_path_buf()));
    }
    let spilled = read_spill(&events_dir);
    let why = why_incomplete(&meta, &events_dir, spilled.found);
    let mut raw = raw_recording(&meta, events_dir, spilled, modules);
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
        recovered: Some(why),
    };
    // Only the live recorder sees the program's exit status and its own overhead.
    Ok(write_profile(&mut raw, output, opts, |_| {
        Ok(ProgramEnd::default())
    })?)
}

/// Why the profile is incomplete: what only the recorder held (all of it without a spill file,
/// else its last moments), and the hooks' files when they are not there (a full disk under the
/// events directory kept them out).
fn why_incomplete(meta: &Meta, events_dir: &Path, spilled: bool) -> String {
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
fn raw_recording(
    meta: &Meta,
    events_dir: PathBuf,
    mut spilled: Spilled,
    module_files: ModuleFiles,
) -> RawRecording {
    // Spilled as the rings were drained, one CPU after the other: the assembly wants time order.
    spilled.faults.sort_by_key(|f| f.time_ns);
    spilled.accesses.sort_by_key(|a| a.time_ns);
    RawRecording {
        command: meta.command.clone(),
        events_dir: Some(events_dir),
        inst_dir: None,
        inst_live: None,
        faults: spilled.faults,
        accesses: spilled.accesses,
        access_stream: None,
        objects: Vec::new(),
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
        end_unix_ns: None,
        incomplete: Vec::new(),
        clock_origin_ns: meta.clock.origin_ns,
        host: meta.host.clone(),
        page_size: meta.page_size,
        module_files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the `meta.json` a recording of `prog` with the `faults` backend starts with.
    fn write_start_meta(dir: &Path) {
        let opts = AssembleOptions {
            topology: None,
            min_object: 4096,
            backend: "faults",
            backend_settings: [("event".to_string(), "page-faults".into())].into(),
            numa_balancing: None,
            thp: ThpMode::Never,
            recovered: None,
        };
        let meta = crate::profile_meta(vec!["prog".into()], (1, 2), &opts);
        std::fs::write(dir.join("meta.json"), serde_json::to_string(&meta).unwrap()).unwrap();
    }

    #[test]
    fn a_directory_without_meta_or_events_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let err = write_stored_profile(dir.path(), &out, ModuleFiles::AsRecorded).unwrap_err();
        assert!(
            matches!(err, StoredError::NoMeta(ref p, _) if p == dir.path()),
            "{err}"
        );
        write_start_meta(dir.path());
        let err = write_stored_profile(dir.path(), &out, ModuleFiles::AsRecorded).unwrap_err();
        assert!(
            matches!(err, StoredError::NoEvents(ref p) if p == dir.path()),
            "{err}"
        );
        assert!(!out.exists());
    }

    #[test]
    fn an_empty_events_directory_gives_an_empty_profile_that_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        write_start_meta(dir.path());
        std::fs::create_dir(dir.path().join(EVENTS_DIR)).unwrap();
        let out = dir.path().join("out");
        let summary = write_stored_profile(dir.path(), &out, ModuleFiles::AsRecorded).unwrap();
        assert_eq!((summary.samples, summary.objects), (0, 0));
        assert!(!summary.complete);
        assert!(
            summary.reasons[0].contains("page-fault samples, mappings seen only by the recorder"),
            "{:?}",
            summary.reasons
        );
        let written = Meta::read(&out.join("meta.json")).unwrap();
        assert_eq!(written.command, ["prog"]);
        assert_eq!(written.completeness.exit, None);
    }
}
