//! `numalens run --policy` and `--pid` on real processes of this (one-node) machine: the engine
//! runs beside the program or the running process, never changes what it does, stops on
//! Ctrl-C leaving an attached process running, and refuses what it may not touch. Pages moving
//! between nodes is checked in the multi-node guests (bench/vm-placement, tests/vm).

mod common;
mod prerequisites;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{numalens, text};

fn busy(dir: &Path) -> std::path::PathBuf {
    let source = dir.join("busy.c");
    std::fs::write(
        &source,
        "#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\
         int main(int c, char **v) { int s = c > 1 ? atoi(v[1]) : 2; size_t n = 8u << 20;\n\
         char *a = malloc(n); memset(a, 1, n); time_t end = time(0) + s;\n\
         while (time(0) < end) for (size_t i = 0; i < n; i += 4096) a[i]++;\n\
         return a[4096] == 0 ? 3 : 7; }\n",
    )
    .unwrap();
    let out = dir.join("busy");
    assert!(
        Command::new("cc")
            .arg("-O1")
            .arg("-o")
            .arg(&out)
            .arg(&source)
            .status()
            .unwrap()
            .success()
    );
    out
}

#[test]
fn the_engine_runs_beside_the_program_and_keeps_its_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let program = busy(dir.path());
    let profile = dir.path().join("spm.numalens");
    let out = numalens(&[
        "run",
        "--policy",
        "spm",
        "--epoch",
        "200ms",
        "-o",
        profile.to_str().unwrap(),
        program.to_str().unwrap(),
        "1",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(7),
        "the program's own status: {stderr}"
    );
    assert!(
        stderr.contains("spm engine:") && stderr.contains("epochs"),
        "{stderr}"
    );
    assert!(profile.join("migrations.parquet").exists());
}

/// The engine's sample count, from its closing line (`… engine: E epochs, S samples, …`).
fn engine_samples(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(" engine: "))
        .unwrap_or_else(|| panic!("no engine line: {stderr}"));
    let (_, rest) = line.split_once(" epochs, ").unwrap();
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// `--backend pmu` feeds the engine the PMU's loads and stores beside the page faults. With
/// the stand-in (the page-fault event as the "precise" one, period 1) every first touch comes
/// twice, once from each event: the engine must see about twice the samples of a faults-only
/// run of the same program. Not a hardware validation: it checks that the samples reach it.
#[test]
fn the_engine_takes_the_pmu_backends_samples() {
    let dir = tempfile::tempdir().unwrap();
    let program = busy(dir.path());
    let run = |backend: &str| {
        let profile = dir.path().join(format!("{backend}.numalens"));
        let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
            .args(["run", "--policy", "carrefour", "--epoch", "100ms"])
            .args(["--backend", backend, "-o"])
            .arg(&profile)
            .arg(&program)
            .arg("1")
            .env("NUMALENS_PMU_STAND_IN", "page-faults")
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "{backend}: {stderr}");
        (engine_samples(&stderr), stderr)
    };
    let (faults, _) = run("faults");
    let (pmu, said) = run("pmu");
    assert!(said.contains("stand-in"), "{said}");
    // 8 MiB first touched: 2048 faults at least, and as many loads beside them.
    assert!(faults >= 2048, "{faults}");
    assert!(
        pmu as f64 >= 1.8 * faults as f64,
        "pmu {pmu} samples, faults {faults}: {said}"
    );
}

#[test]
fn offline_policies_are_sent_to_plans() {
    let out = numalens(&["run", "--policy", "marathe-hop", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let why = text(&out.stderr);
    assert!(
        why.contains("numalens plan") && why.contains("--plan"),
        "{why}"
    );
    let unknown = numalens(&["run", "--policy", "nonsense", "true"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[test]
fn an_attached_engine_stops_on_ctrl_c_and_leaves_the_process_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut process = Command::new(busy(dir.path())).arg("20").spawn().unwrap();
    let pid = process.id().to_string();
    let profile = dir.path().join("pid.numalens");
    let engine = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args([
            "run",
            "--pid",
            &pid,
            "--policy",
            "carrefour",
            "--epoch",
            "100ms",
            "-o",
        ])
        .arg(&profile)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    unsafe { libc::kill(engine.id() as i32, libc::SIGINT) };
    let out = engine.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the process runs on"), "{stderr}");
    assert!(
        process.try_wait().unwrap().is_none(),
        "the process is still running"
    );
    let meta = std::fs::read_to_string(profile.join("meta.json")).unwrap();
    assert!(meta.contains("attached_pid"), "{meta}");
    process.kill().unwrap();
    process.wait().unwrap();
}

#[test]
fn a_process_that_does_not_exist_or_is_not_ours_is_refused() {
    let gone = numalens(&["run", "--pid", "999999999", "--policy", "spm"]);
    assert_eq!(gone.status.code(), Some(2));
    assert!(text(&gone.stderr).contains("no such process"));
    // Another user's process, from a user without CAP_SYS_NICE.
    let setpriv = which("setpriv");
    let remedy = "install the `util-linux` package (tests/install-deps installs it)";
    if !prerequisites::require(setpriv.is_ok(), "setpriv", remedy) {
        return;
    }
    let setpriv = setpriv.expect("found");
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: switching users needs root");
        return;
    }
    let mut other = Command::new(&setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sleep",
            "5",
        ])
        .spawn()
        .unwrap();
    let out = Command::new(&setpriv)
        .args([
            "--reuid=65533",
            "--regid=65533",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_numalens"))
        .args([
            "run",
            "--pid",
            &other.id().to_string(),
            "--policy",
            "spm",
            "-o",
            "/tmp/x.numalens",
        ])
        .output()
        .unwrap();
    other.kill().unwrap();
    other.wait().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("CAP_SYS_NICE"),
        "{}",
        text(&out.stderr)
    );
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

#[test]
fn kernel_balancing_switched_off_for_a_run_is_put_back() {
    const SYSCTL: &str = "/proc/sys/kernel/numa_balancing";
    let Ok(found) = std::fs::read_to_string(SYSCTL) else {
        eprintln!("skipped: this kernel has no kernel.numa_balancing");
        return;
    };
    if std::fs::write(SYSCTL, "1").is_err() {
        eprintln!("skipped: writing kernel.numa_balancing needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let program = busy(dir.path());
    let out = numalens(&[
        "run",
        "--kernel-balancing",
        "off",
        "--policy",
        "spm",
        "-o",
        dir.path().join("p.numalens").to_str().unwrap(),
        program.to_str().unwrap(),
        "1",
    ]);
    let now = std::fs::read_to_string(SYSCTL).unwrap();
    std::fs::write(SYSCTL, found.trim()).unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("switched from 1 to 0") && stderr.contains("is 1 again"),
        "{stderr}"
    );
    assert_eq!(now.trim(), "1");
}
