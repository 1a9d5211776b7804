//! The hooks' rate cap (runtime/inst/sample_rate.h) on a simulated clock: a C program that
//! includes the header and checks the rates it allows and how it counts the threads sharing
//! the cap.

use std::path::Path;
use std::process::Command;

#[test]
fn each_thread_takes_its_share_of_the_process_cap() {
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime");
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("test_sample_rate");
    let built = Command::new("gcc")
        .args([
            "-O1",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-function",
        ])
        .arg("-I")
        .arg(runtime.join("inst"))
        .arg("-I")
        .arg(runtime.join("include"))
        .arg(runtime.join("tests/test_sample_rate.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("gcc runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let report = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{report}");
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok ")).count(),
        18,
        "{report}"
    );
}
