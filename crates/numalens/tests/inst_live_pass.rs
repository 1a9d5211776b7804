//! The recorder's live pass reads the `inst` hooks' sample files while the program runs and
//! merges what it can in time order; the profile it writes must be the one the after-the-run
//! read gives. A real sampled recording is
//! kept with its events directory (the hooks' files copied into it), assembled again from that
//! directory with the after-the-run read alone, and both profiles' `samples`, `objects` and
//! `code_locations` tables are compared row by row.

mod common;

use std::path::Path;
use std::process::Command;

use numalens_assemble::stored::write_stored_profile;
use numalens_assemble::symbols::ModuleFiles;
use numalens_format::{CodeLocation, Object, Profile, Sample, SampleKind};

/// How long the program samples: long enough for a dozen reads of the live pass.
const RUN_MS: &str = "1200";

#[test]
fn the_live_pass_gives_the_profile_of_the_after_the_run_read() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("churn");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inst_progs/churn.c");
    let built = common::numalens(&[
        "cc",
        "-O2",
        "-pthread",
        source.to_str().unwrap(),
        "-o",
        program.to_str().unwrap(),
    ]);
    assert!(built.status.success(), "{}", common::text(&built.stderr));
    let live = dir.path().join("live.numalens");
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args([
            "record",
            "--backend",
            "inst",
            "--inst-mode",
            "sampled",
            "-o",
        ])
        .arg(&live)
        .arg(&program)
        .arg(RUN_MS)
        .env("NUMALENS_KEEP_EVENTS", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let after = dir.path().join("after.numalens");
    write_stored_profile(&live, &after, ModuleFiles::AsRecorded).unwrap();
    let (live, after) = (
        Profile::open(&live).unwrap(),
        Profile::open(&after).unwrap(),
    );

    let settings = &live.meta().backend.settings;
    let total = settings["inst_samples"].as_u64().unwrap();
    let read_live = settings["inst_samples_read_live"].as_u64().unwrap();
    // The pass runs at SCHED_IDLE: how much it reads depends on how idle the machine is (the
    // program sleeps between its blocks to leave it some time), but never on what it writes.
    let merged_live = settings["inst_samples_merged_live"].as_u64().unwrap();
    assert!(
        merged_live > 0 && merged_live <= read_live && read_live <= total,
        "{read_live} of {total} samples were read while the program ran, {merged_live} merged"
    );
    let samples: Vec<Sample> = live.read_all().unwrap();
    assert_eq!(samples.len() as u64, total + first_touches(&samples));
    assert!(
        samples.iter().filter(|s| s.object_id.is_some()).count() * 2 > samples.len(),
        "most samples fall in objects"
    );
    assert!(
        samples == after.read_all::<Sample>().unwrap(),
        "samples differ"
    );
    let objects: Vec<Object> = live.read_all().unwrap();
    assert!(objects.len() > 50, "{} objects", objects.len());
    assert_eq!(objects, after.read_all::<Object>().unwrap());
    // The distinct code addresses, gathered live, name the same instructions.
    let code: Vec<CodeLocation> = live.read_all().unwrap();
    assert_eq!(code, after.read_all::<CodeLocation>().unwrap());
}

/// The page-fault rows beside the hooks' samples.
fn first_touches(samples: &[Sample]) -> u64 {
    let faults = samples
        .iter()
        .filter(|s| !matches!(s.kind, SampleKind::Load | SampleKind::Store));
    faults.count() as u64
}
