//! The cached stack walker gives libgcc's frames: runtime/tests/test_walk.c compares both walks
//! over frame-pointer, frameless, alloca'd, realigned and libc frames, threads and a signal
//! handler.

mod common;

use std::process::Command;

#[test]
fn cached_walker_matches_libgcc() {
    let d = tempfile::tempdir().unwrap();
    let exe = common::build_core_test(d.path(), "test_walk");
    let out = Command::new(&exe).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Walks refused on purpose: the thread before its stack is known and with the main thread's
    // stack, and the signal handler.
    let (walks, fast) = stdout
        .trim()
        .strip_prefix("walks ")
        .and_then(|s| s.split_once(" fast "))
        .map(|(w, f)| (w.parse::<u32>().unwrap(), f.parse::<u32>().unwrap()))
        .expect("walks N fast M");
    assert_eq!((walks, fast), (20, 17), "{stdout}");
}
