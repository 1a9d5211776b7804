//! Fault injection on the recorder: SIGKILL at seeded random points of a recording (at the
//! start, while the program runs, while the profile is written), a full disk under the profile
//! and a full `/dev/shm`. Whatever happens, the program's own output is what it is natively,
//! every recording killed after the program started leaves a directory that `report` reads or
//! that `recover` makes readable, and nothing stays in `/dev/shm`.

mod prerequisites;
mod recover_common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use numalens_format::Profile;
use recover_common::*;

/// Kill points per backend.
const KILLS: usize = 15;
/// The seed of the kill points: a failure names its run, and the same run comes back.
const SEED: u64 = 0x6e75_6d61;

/// What became of the killed recordings.
#[derive(Debug, Default)]
struct Figures {
    runs: usize,
    ended_before_the_kill: usize,
    killed_before_the_program: usize,
    killed_after: usize,
    /// Of those, killed after the program's end, while the profile was written.
    while_writing: usize,
    readable_as_left: usize,
    recovered: usize,
}

/// The report of `profile`: Ok, or its error message.
fn report(profile: &Path) -> Result<(), String> {
    let (status, _, stderr) = run(&["report".as_ref(), profile.as_os_str()]);
    assert!(!stderr.contains("panicked"), "{stderr}");
    match status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(stderr),
        other => panic!("report exited with {other:?}: {stderr}"),
    }
}

/// Readable as left, or made readable by `recover`; true when recovered.
fn readable_or_recovered(profile: &Path, what: &str) -> bool {
    let Err(message) = report(profile) else {
        return false;
    };
    assert!(message.contains("numalens recover"), "{what}: {message}");
    let (status, _, stderr) = run(&["recover".as_ref(), profile.as_os_str()]);
    assert!(status.success(), "{what}: recover failed: {stderr}");
    report(profile).unwrap_or_else(|e| panic!("{what}: recovered but unreadable: {e}"));
    let meta = Profile::open(profile).unwrap().meta().clone();
    assert!(
        !meta.completeness.complete,
        "{what}: a recovered profile says it is incomplete"
    );
    true
}

/// Times of one whole recording: until the program wrote its output, and until the recorder
/// ended. The kill points are spread over them.
fn recording_times(worker: &Path, backend: &str, dir: &Path) -> (Duration, Duration) {
    let out = dir.join("whole.out");
    let started = Instant::now();
    let mut child = numalens()
        .args(["record", "--backend", backend, "-o"])
        .arg(dir.join("whole.numalens"))
        .arg(worker)
        .arg(&out)
        .arg(ROUNDS)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut program = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if program.is_none() && out.exists() {
            program = Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    let whole = started.elapsed();
    assert_eq!(status.code(), Some(3), "the program's own exit status");
    (program.unwrap_or(whole), whole)
}

/// The `i`th kill point: the first at once, a third while the profile is written, the rest
/// while the program runs.
fn kill_point(i: usize, (program, whole): (Duration, Duration), rng: &mut fastrand::Rng) -> KillAt {
    match i % 3 {
        _ if i == 0 => KillAt::After(Duration::ZERO),
        0 => KillAt::AfterProgram(whole.saturating_sub(program).mul_f64(rng.f64())),
        _ => KillAt::After(program.mul_f64(rng.f64())),
    }
}

fn kill_at_random_points(backend: &str, inst: bool, rng: &mut fastrand::Rng) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let worker = build_worker(dir.path(), inst);
    let native = native_output(&worker, dir.path());
    let times = recording_times(&worker, backend, dir.path());
    let mut figures = Figures::default();
    for i in 0..KILLS {
        let kill = kill_point(i, times, rng);
        let what = format!("{backend} run {i}, killed at {kill:?} (whole run {times:?})");
        let profile = dir.path().join(format!("run{i}.numalens"));
        let out = dir.path().join(format!("run{i}.out"));
        let rec = record(&worker, backend, &profile, &out, Some(kill));
        figures.runs += 1;
        let output = rec.program_output();
        assert_eq!(
            rec.shm_left_after(Duration::from_secs(10)),
            Vec::<PathBuf>::new(),
            "{what}: left in /dev/shm"
        );
        if !rec.killed {
            assert_eq!(
                rec.status.code(),
                Some(3),
                "{what}: the program's own status"
            );
            assert_eq!(output.as_deref(), Some(native.as_str()), "{what}");
            report(&profile).unwrap_or_else(|e| panic!("{what}: {e}"));
            figures.ended_before_the_kill += 1;
            continue;
        }
        let Some(output) = output else {
            // Never started: whatever is left must say what it is, not crash a reader.
            if profile.exists() {
                let _ = report(&profile);
            }
            figures.killed_before_the_program += 1;
            continue;
        };
        assert_eq!(output, native, "{what}: the program's output changed");
        figures.killed_after += 1;
        figures.while_writing += matches!(kill, KillAt::AfterProgram(_)) as usize;
        if readable_or_recovered(&profile, &what) {
            figures.recovered += 1;
        } else {
            figures.readable_as_left += 1;
        }
    }
    figures
}

#[test]
fn killing_the_recorder_anywhere_never_costs_the_program_or_the_run() {
    let mut rng = fastrand::Rng::with_seed(SEED);
    for (backend, inst) in [("faults", false), ("inst", true)] {
        let f = kill_at_random_points(backend, inst, &mut rng);
        eprintln!(
            "fault injection, {backend}: {} runs: {} ended before their kill, {} killed before the program started, {} killed after ({} while the profile was written): {} readable as left, {} recovered by `numalens recover`",
            f.runs,
            f.ended_before_the_kill,
            f.killed_before_the_program,
            f.killed_after,
            f.while_writing,
            f.readable_as_left,
            f.recovered
        );
        assert_eq!(f.readable_as_left + f.recovered, f.killed_after);
        assert!(f.killed_after > 0, "no kill landed while the program ran");
    }
}

/// A tmpfs of `size` mounted over a fresh directory, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallDisk(dir))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn grow(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,size=64m"])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_under_the_profile_never_costs_the_program() {
    let dir = tempfile::tempdir().unwrap();
    for (backend, inst) in [("faults", false), ("inst", true)] {
        let worker = build_worker(dir.path(), inst);
        let native = native_output(&worker, dir.path());
        // The runtime's log outgrows the first; the profile's tables the others.
        for size in ["16k", "48k", "1m"] {
            let disk = SmallDisk::mount(size);
            let remedy = "mounting one needs root (CAP_SYS_ADMIN): run the tests as root";
            if !prerequisites::require(disk.is_some(), "a small tmpfs", remedy) {
                return;
            }
            let disk = disk.expect("mounted");
            let what = format!("{backend} on a {size} file system");
            let profile = disk.path().join("p.numalens");
            let out = dir.path().join(format!("{backend}-{size}.out"));
            let (status, _, stderr) = run(&[
                "record".as_ref(),
                "--backend".as_ref(),
                backend.as_ref(),
                "-o".as_ref(),
                profile.as_os_str(),
                worker.as_os_str(),
                out.as_os_str(),
                ROUNDS.as_ref(),
            ]);
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
            assert_eq!(std::fs::read_to_string(&out).unwrap(), native, "{what}");
            let outcome = match status.code() {
                Some(3) => "profile written",
                Some(1) => {
                    assert!(
                        stderr.contains("No space left on device"),
                        "{what}: {stderr}"
                    );
                    assert!(stderr.contains("numalens recover"), "{what}: {stderr}");
                    disk.grow();
                    assert!(readable_or_recovered(&profile, &what), "{what}");
                    "recovered once there was room"
                }
                other => panic!("{what}: exited with {other:?}: {stderr}"),
            };
            eprintln!("full disk, {what}: {outcome}");
        }
    }
}

/// `unshare -m` with a tmpfs of `size` over `/dev/shm`, then `numalens ARGS`, as a command.
fn with_small_shm(size: &str, args: &[&OsStr]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size={size} tmpfs /dev/shm && exec \"$@\""
        ))
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_numalens"))
        .args(args);
    cmd
}

#[test]
fn a_full_dev_shm_is_passed_over_and_a_killed_recording_still_recovered() {
    let probe = with_small_shm("256k", &["--version".as_ref()]).output();
    let remedy = match &probe {
        Err(e) => format!("running unshare failed ({e}): install the `util-linux` package"),
        Ok(o) => format!(
            "`unshare -m` then mount was refused ({}): run the tests as root (CAP_SYS_ADMIN)",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
    };
    let mounted = probe.as_ref().is_ok_and(|o| o.status.success());
    if !prerequisites::require(
        mounted,
        "a tmpfs over /dev/shm in a mount namespace",
        &remedy,
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let worker = build_worker(dir.path(), true);
    let native = native_output(&worker, dir.path());
    for kill in [None, Some(KillAt::After(Duration::from_millis(300)))] {
        let profile = dir.path().join(format!("shm-{}.numalens", kill.is_some()));
        let out = dir.path().join(format!("shm-{}.out", kill.is_some()));
        let args: Vec<&OsStr> = vec![
            "record".as_ref(),
            "--backend".as_ref(),
            "inst".as_ref(),
            "-o".as_ref(),
            profile.as_os_str(),
            worker.as_os_str(),
            out.as_os_str(),
            ROUNDS.as_ref(),
        ];
        let rec = record_with(with_small_shm("256k", &args), &profile, &out, kill);
        assert_eq!(rec.program_output().as_deref(), Some(native.as_str()));
        assert!(shm_dirs_of(rec.recorder_pid).is_empty());
        if rec.killed {
            assert!(readable_or_recovered(
                &profile,
                "killed under a full /dev/shm"
            ));
        } else {
            assert_eq!(rec.status.code(), Some(3));
        }
        let meta = Profile::open(&profile).unwrap().meta().clone();
        assert!(
            meta.tables["page_stats"].rows > 0,
            "the hooks' files went to the events directory instead"
        );
        eprintln!(
            "full /dev/shm, {}: profile readable, {} exact page rows",
            if rec.killed {
                "killed and recovered"
            } else {
                "whole run"
            },
            meta.tables["page_stats"].rows
        );
    }
}
