//! Assembly of stored recordings: real `numalens record` runs of the programs under
//! `tests/data/progs/`, kept as the recorder leaves them on disk (`meta.json` and the events
//! directory; `tests/data/regenerate` records them again), each turned into a profile and
//! compared with its snapshot under `tests/snapshots/`. The modules the recordings name are
//! absent here (they are looked up under an empty directory), so symbolisation gives the same
//! answer on every machine: module and offset, without names.
//!
//! `UPDATE_SNAPSHOTS=1 cargo test -p numalens-assemble --test stored_recordings` writes the
//! snapshots instead of comparing.

mod snapshot;

use std::path::{Path, PathBuf};

use numalens_assemble::stored::write_stored_profile;
use numalens_assemble::symbols::ModuleFiles;

fn recording(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Assembles the stored recording `name` and checks the profile against its snapshot.
fn assemble_and_check(name: &str) {
    let recording = recording(name);
    let out = tempfile::tempdir().unwrap();
    let profile = out.path().join("p.numalens");
    let no_modules = out.path().join("no-modules");
    let summary =
        write_stored_profile(&recording, &profile, ModuleFiles::Under(no_modules)).unwrap();
    snapshot::check(name, &snapshot::dump(&profile, &summary, &recording));
}

/// Threads of one process; first touches by the main thread and a worker.
#[test]
fn threads() {
    assemble_and_check("threads");
}

/// A parent and a forked child, each with its own event log.
#[test]
fn fork() {
    assemble_and_check("fork");
}

/// The inst backend: the hooks' page tables and samples beside the runtime's log.
#[test]
fn inst() {
    assemble_and_check("inst");
}

/// Every stored recording has its test above (and so its snapshot).
#[test]
fn every_stored_recording_is_checked() {
    let mut stored: Vec<String> = std::fs::read_dir(recording(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("meta.json").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    stored.sort();
    assert_eq!(stored, ["fork", "inst", "threads"]);
}

/// Assembling the same recording twice gives the same profile.
#[test]
fn assembly_is_deterministic() {
    // Several call sites, in several processes.
    let recording = recording("inst");
    let out = tempfile::tempdir().unwrap();
    let dumps: Vec<String> = (0..2)
        .map(|i| {
            let profile = out.path().join(format!("p{i}.numalens"));
            let modules = ModuleFiles::Under(out.path().join("no-modules"));
            let summary = write_stored_profile(&recording, &profile, modules).unwrap();
            snapshot::dump(&profile, &summary, &recording)
        })
        .collect();
    assert_eq!(dumps[0], dumps[1]);
    // Row for row, not only as the dump sorts them: the sites come out in one order.
    let sites = |i: usize| std::fs::read(out.path().join(format!("p{i}.numalens/sites.parquet")));
    assert_eq!(sites(0).unwrap(), sites(1).unwrap());
}
