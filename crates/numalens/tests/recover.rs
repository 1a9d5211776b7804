//! A recorder killed while the program runs: `report` says how to recover the recording,
//! `recover` turns it into a readable profile marked incomplete, and nothing stays in
//! `/dev/shm`.

mod recover_common;

use std::time::Duration;

use numalens_format::Profile;
use recover_common::*;

/// Records with `backend`, kills the recorder half-way through the program, and checks the
/// whole recovery path.
fn killed_mid_run_is_recovered(backend: &str, inst: bool) {
    let dir = tempfile::tempdir().unwrap();
    let worker = build_worker(dir.path(), inst);
    let native = native_output(&worker, dir.path());
    let profile = dir.path().join("killed.numalens");
    let out = dir.path().join("recorded.out");
    let cmd = record_command(&worker, backend, &profile, &out);
    let rec = killed_mid_run(cmd, &profile, &out, &native);
    assert_eq!(
        rec.shm_left_after(Duration::from_secs(10)),
        Vec::<std::path::PathBuf>::new()
    );

    let (status, _, stderr) = run(&["report".as_ref(), profile.as_os_str()]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("was not finished") && stderr.contains("numalens recover"),
        "{stderr}"
    );
    let (status, _, stderr) = run(&["recover".as_ref(), profile.as_os_str()]);
    assert!(status.success(), "{stderr}");
    let (status, stdout, stderr) = run(&["report".as_ref(), profile.as_os_str()]);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("the recorder did not write the profile"),
        "{stdout}"
    );

    let recovered = Profile::open(&profile).unwrap();
    let completeness = &recovered.meta().completeness;
    assert!(!completeness.complete);
    assert_eq!(
        completeness.exit, None,
        "only the recorder knew the exit status"
    );
    assert!(recovered.meta().tables["objects"].rows > 0);
    assert!(recovered.meta().tables["threads"].rows >= 2);
    // The recorder spilled its page-fault samples every 100 ms while the program ran.
    assert!(
        recovered.meta().tables["samples"].rows > 0,
        "the spilled samples are kept"
    );
    if inst {
        assert!(
            recovered.meta().tables["page_stats"].rows > 0,
            "the hooks' counts are kept"
        );
    }
    assert!(
        !profile.join(".events").exists(),
        "recovered, the logs are not needed"
    );
}

#[test]
fn a_killed_faults_recording_is_recovered_from_the_runtime_logs() {
    killed_mid_run_is_recovered("faults", false);
}

#[test]
fn a_killed_inst_recording_is_recovered_with_the_hooks_files_and_leaves_no_shm() {
    killed_mid_run_is_recovered("inst", true);
}

#[test]
fn recover_refuses_what_is_not_an_unfinished_recording() {
    let dir = tempfile::tempdir().unwrap();
    let (status, _, stderr) = run(&["recover".as_ref(), dir.path().as_os_str()]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a numalens recording"), "{stderr}");

    let worker = build_worker(dir.path(), false);
    let profile = dir.path().join("done.numalens");
    let out = dir.path().join("done.out");
    let done = record(&worker, "faults", &profile, &out, None);
    assert_eq!(done.status.code(), Some(3), "the program's own status");
    let (status, _, stderr) = run(&["recover".as_ref(), profile.as_os_str()]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing to recover"), "{stderr}");
}

#[test]
fn recording_over_an_unfinished_recording_says_to_recover_it() {
    let dir = tempfile::tempdir().unwrap();
    let worker = build_worker(dir.path(), false);
    let profile = dir.path().join("killed.numalens");
    let out = dir.path().join("recorded.out");
    let run1 = record(
        &worker,
        "faults",
        &profile,
        &out,
        Some(KillAt::After(Duration::from_millis(300))),
    );
    assert!(run1.killed);
    run1.program_output();
    let (status, _, stderr) = run(&[
        "record".as_ref(),
        "-o".as_ref(),
        profile.as_os_str(),
        "true".as_ref(),
    ]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("numalens recover"), "{stderr}");
}
