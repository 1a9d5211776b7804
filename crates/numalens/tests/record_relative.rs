//! `numalens record` with its default output, a path relative to the current directory, on a
//! program that changes directory and then forks (as daemons do): the child's allocations are in
//! the profile, as they are with an absolute `-o`.

use std::path::Path;
use std::process::Command;

use numalens_format::{Object, ObjectKind, Profile};

fn build(dir: &Path) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../numalens-record/tests/record_progs/chdir_fork.c");
    let exe = dir.join("chdir_fork");
    let out = Command::new("gcc")
        .args(["-O1", "-g", "-o"])
        .arg(&exe)
        .arg(source)
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn a_child_forked_after_chdir_is_recorded_with_the_default_output() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let printed = dir.path().join("child.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "./chdir_fork"])
        .arg(&printed)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("numalens runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let text = std::fs::read_to_string(&printed).unwrap();
    let (pid, address) = text.trim().split_once(' ').unwrap();
    let pid: u32 = pid.parse().unwrap();
    let address = u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap();
    let profile = Profile::open(&dir.path().join("chdir_fork.numalens")).unwrap();
    let objects = profile.read_all::<Object>().unwrap();
    let child_heap = objects
        .iter()
        .filter(|o| o.pid == pid && o.kind == ObjectKind::Heap)
        .count();
    assert!(
        objects.iter().any(|o| o.pid == pid && o.start == address),
        "the child's 1 MiB block at {address:#x} is an object ({child_heap} heap objects of pid {pid})"
    );
}
