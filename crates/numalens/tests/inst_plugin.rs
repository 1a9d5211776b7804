//! What gcc's plugin keeps in registers (`runtime/inst/gcc_plugin_registers.h`) must not change
//! what a program does nor what is recorded of it: tail calls stay jumps, exceptions and a
//! process ending mid-loop lose no samples or counts.

#[allow(dead_code)] // each test file uses part of it
mod common;
mod inst_build;

use std::path::{Path, PathBuf};
use std::process::Command;

use inst_build::{build_with, object_at, prog, weighted};

use numalens_format::{PageStat, Profile, SampleKind};

fn build(wrapper: &str, source: &str, out: &Path) -> PathBuf {
    build_with(wrapper, None, &prog(source), out, &[])
}

fn record(program: &Path, profile: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "inst", "--inst-mode", "both"])
        .args(args)
        .arg("-o")
        .arg(profile)
        .arg(program)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    common::text(&out.stdout)
}

#[test]
fn tail_calls_stay_jumps() {
    let dir = tempfile::tempdir().unwrap();
    let program = build("cc", "tail_calls.c", &dir.path().join("tail_calls"));
    // Ten million calls deep: on an 8 MiB stack only jumps get there.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -s 8192 && {} 10000000", program.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        common::text(&out.stderr)
    );
    // 5 M walks of +120, 5 M others of -56.
    assert_eq!(common::text(&out.stdout).trim(), "320000000");
}

#[test]
fn a_caught_exception_loses_no_samples() {
    let dir = tempfile::tempdir().unwrap();
    let program = build("c++", "throws.cc", &dir.path().join("throws"));
    let profile = dir.path().join("throws.numalens");
    let stdout = record(&program, &profile, &["--max-sample-rate", "0"]);
    let fields: Vec<f64> = stdout
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let p = Profile::open(&profile).unwrap();
    let written = weighted(&p, object_at(&p, "throws.cc", "written"));
    let read = weighted(&p, object_at(&p, "throws.cc", "read"));
    // 3.2 M stores and 200,000 loads: about 3,100 and 200 samples.
    for (got, want) in [
        (written.get(&SampleKind::Store), fields[1]),
        (read.get(&SampleKind::Load), fields[0]),
    ] {
        let got = got.copied().unwrap_or(0) as f64;
        assert!(
            (got - want).abs() < 0.25 * want,
            "{got} vs {want}: {written:?} {read:?}"
        );
    }
}

#[test]
fn a_process_ending_mid_loop_keeps_the_counts_held_in_registers() {
    let dir = tempfile::tempdir().unwrap();
    let program = build("cc", "spin_at_exit.c", &dir.path().join("spin"));
    let profile = dir.path().join("spin.numalens");
    record(&program, &profile, &[]);
    let p = Profile::open(&profile).unwrap();
    let hist = object_at(&p, "spin_at_exit.c", "hist");
    let exact: u64 = p
        .read_all::<PageStat>()
        .unwrap()
        .iter()
        .filter(|s| s.object_id == Some(hist))
        .map(|s| s.reads + s.writes)
        .sum();
    // The samples were written as they were taken; the exact counts held in registers may lack
    // up to 65,536 accesses per access site when the process ended.
    let sampled: u64 = weighted(&p, hist).values().sum();
    assert!(sampled > 10_000_000, "{sampled} sampled accesses");
    let error = (exact as f64 - sampled as f64).abs() / sampled as f64;
    assert!(error < 0.1, "exact {exact} against {sampled} sampled");
}
