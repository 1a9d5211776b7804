//! Every workload built with plain gcc: it runs, prints the same checksum every time and for any
//! thread count, and refuses bad arguments with exit status 2.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use numalens_workloads::{Error, WORKLOADS, Workload, args, build, parse_checksum};

fn gcc() -> Vec<OsString> {
    vec!["gcc".into()]
}

fn run(exe: &Path, args: &[OsString]) -> Output {
    Command::new(exe).args(args).output().unwrap()
}

fn checksum(workload: &Workload, exe: &Path, overrides: &[(&str, u64)]) -> u64 {
    let manifest = workload.manifest().unwrap();
    let out = run(exe, &args(&manifest, overrides).unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {overrides:?}: {stderr}",
        workload.name
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one result line: {stdout}");
    assert!(stdout.starts_with(workload.name), "{stdout}");
    parse_checksum(&stdout).unwrap_or_else(|| panic!("no checksum in {stdout}"))
}

fn built(dir: &Path) -> Vec<(&'static Workload, PathBuf)> {
    WORKLOADS
        .iter()
        .map(|w| (w, build(w, &gcc(), &dir.join(w.name)).unwrap()))
        .collect()
}

#[test]
fn workloads_are_deterministic_and_thread_count_independent() {
    let dir = tempfile::tempdir().unwrap();
    for (workload, exe) in built(dir.path()) {
        let first = checksum(workload, &exe, &[]);
        assert_eq!(checksum(workload, &exe, &[]), first, "{}", workload.name);
        // The same work split over fewer threads gives the same result.
        for threads in [1, 2] {
            let other = checksum(workload, &exe, &[("threads", threads)]);
            assert_eq!(other, first, "{} with {threads} threads", workload.name);
        }
    }
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    for (workload, exe) in built(dir.path()) {
        for bad in [
            &["--bogus", "1"][..],
            &["--threads", "0"],
            &["--threads", "x"],
            &["--threads"],
        ] {
            let bad: Vec<OsString> = bad.iter().map(OsString::from).collect();
            let out = run(&exe, &bad);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{} {bad:?}: {stderr}",
                workload.name
            );
            assert!(stderr.contains("usage:"), "{stderr}");
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn argument_relations_are_checked_by_the_program_too() {
    let dir = tempfile::tempdir().unwrap();
    let workload = numalens_workloads::find("master-init").unwrap();
    let exe = build(workload, &gcc(), dir.path()).unwrap();
    let out = run(&exe, &["--n".into(), "1000".into()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("multiple of 512"));
}

#[test]
fn a_missing_compiler_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let workload = &WORKLOADS[0];
    let err = build(workload, &["/nonexistent/cc".into()], dir.path()).unwrap_err();
    assert!(matches!(err, Error::CompilerMissing { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/cc"), "{err}");
}

#[test]
fn a_failed_build_carries_the_compilers_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let compiler: Vec<OsString> = vec!["gcc".into(), "-DWL_COUNT=".into(), "-Werror".into()];
    let err = build(&WORKLOADS[0], &compiler, dir.path()).unwrap_err();
    let Error::BuildFailed {
        stderr, command, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert!(stderr.contains("WL_COUNT"), "{stderr}");
    assert!(command.contains("-fopenmp"), "{command}");
}
