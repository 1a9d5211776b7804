//! Ctrl-C while a daemon's child still runs: `numalens record` stops, exits with the first
//! process's status, and says which processes were still running, in its summary and in the
//! profile.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::numalens;

fn build_daemon(dir: &Path) -> std::path::PathBuf {
    let progs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../numalens-record/tests/record_progs");
    let exe = dir.join("daemon");
    let out = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(progs.join("daemon.c"))
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Waits until `path` exists, for at most 20 s.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_while_the_daemon_runs_says_what_is_missing() {
    ctrl_c_while_the_daemon_runs(None);
}

/// The daemon's main thread has ended (pthread_exit) while its worker runs on: the process still
/// runs, and is named as such.
#[test]
fn ctrl_c_while_a_daemon_without_its_main_thread_runs_names_it() {
    ctrl_c_while_the_daemon_runs(Some("thread"));
}

fn ctrl_c_while_the_daemon_runs(how: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_daemon(dir.path());
    let (out, done, profile) = (
        dir.path().join("out.txt"),
        dir.path().join("done.txt"),
        dir.path().join("p.numalens"),
    );
    // The child works for 200 ms, then lingers for a minute: it is still running at the signal.
    let stderr = std::fs::File::create(dir.path().join("stderr.txt")).unwrap();
    let mut recorder = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .arg("record")
        .arg("-o")
        .arg(&profile)
        .arg(&exe)
        .args([
            &out,
            Path::new("200"),
            Path::new("500"),
            &done,
            Path::new("60000"),
        ])
        .args(how)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    wait_for(&done);
    let text = std::fs::read_to_string(&out).unwrap();
    let child: i32 = text
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .expect("the child printed its pid")
        .parse()
        .unwrap();
    // The recorder goes on while the child runs.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        recorder.try_wait().unwrap().is_none(),
        "the recorder stopped before the child"
    );
    // SAFETY: signalling the recorder this test started.
    unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) };
    let start = Instant::now();
    let status = loop {
        if let Some(status) = recorder.try_wait().unwrap() {
            break status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the recorder did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The daemon is not the recorder's to stop: it runs on until the test ends it.
    // SAFETY: the pid of the child this test's program started; it lingers for a minute.
    let child_was_running = unsafe { libc::kill(child, 0) } == 0;
    unsafe { libc::kill(child, libc::SIGKILL) };
    assert!(
        child_was_running,
        "Ctrl-C to the recorder must not stop the daemon"
    );
    assert_eq!(status.code(), Some(7), "the first process's status");

    let summary = std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap();
    assert!(
        summary.contains(&format!(
            "still running: {child} (their work after that point is not in the profile)"
        )),
        "{summary}"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(profile.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["completeness"]["complete"], false);
    let reasons = meta["completeness"]["reasons"].to_string();
    assert!(
        reasons.contains(&format!("process {child} of the program was still running")),
        "{reasons}"
    );
    // It is not said to have been killed or to have skipped its exit path: it was still running.
    assert!(!reasons.contains("killed"), "{reasons}");
    assert!(!reasons.contains("exit path"), "{reasons}");
    // What the child did before the signal is in the profile: its 500 pages and 1 MiB block.
    let samples = numalens_format::Profile::open(&profile)
        .unwrap()
        .read_all::<numalens_format::Sample>()
        .unwrap();
    let of_child = samples.iter().filter(|s| s.pid == child as u32).count();
    assert!(of_child >= 500 + 256, "{of_child} samples of the child");
    let report = numalens(&["report", profile.to_str().unwrap()]);
    assert!(report.status.success(), "{}", common::text(&report.stderr));
    assert!(
        common::text(&report.stdout).contains("still running: their work"),
        "{}",
        common::text(&report.stdout)
    );
}
