//! A program that daemonises: its first process exits at once, and the child it leaves behind
//! does the work. The recording lasts until that child has exited, the profile holds its
//! samples and objects and says it ended normally, and the recorder's status is still the first
//! process's.

mod common;

use std::time::{Duration, Instant};

use common::record::{PAGE, Printed, View, build, line_of, printed, record_with};
use numalens_format::SampleKind;
use numalens_record::record::SampleSource;

#[test]
fn the_work_of_a_child_that_outlives_the_program_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["daemon.c"], "daemon", &[]);
    let done = dir.path().join("done.txt");
    let (work_ms, pages) = (600, 2000);
    let started = Instant::now();
    let (recorded, profile) = record_with(
        dir.path(),
        &exe,
        &[
            &work_ms.to_string(),
            &pages.to_string(),
            done.to_str().unwrap(),
        ],
        |_| {},
    );
    let took = started.elapsed();
    // The recorder's status is the first process's, which exited long before the child.
    assert_eq!(recorded.exit.code(), Some(7));
    // The recording ended when the child did: its file is written by then, and it took the
    // child's whole work.
    assert_eq!(std::fs::read_to_string(&done).unwrap(), "done\n");
    assert!(took >= Duration::from_millis(work_ms), "{took:?}");
    let outlived = recorded
        .summary
        .outlived
        .as_ref()
        .expect("the child outlived");
    assert_eq!(outlived.processes, 2);
    assert!(outlived.still_running.is_empty(), "{outlived:?}");
    assert!(
        outlived.after_first >= Duration::from_millis(work_ms / 2),
        "{outlived:?}"
    );

    let p = printed(dir.path());
    let child = p.num("child") as u32;
    let view = View::read(&profile);
    let child_first_touches = view
        .samples
        .iter()
        .filter(|s| s.pid == child && s.kind == SampleKind::FirstTouch)
        .count() as u64;
    assert!(
        child_first_touches >= pages + (1 << 20) / PAGE,
        "{child_first_touches} first touches of the child"
    );
    let block = view.object_at(child, p.addr("block"));
    let line = line_of("daemon.c", "site: daemon block");
    assert!(
        block.name.contains(&format!("daemon.c:{line}")),
        "{}",
        block.name
    );
    assert!(block.free_ns.is_some(), "the child freed its block");
    let thread = view.thread(child);
    assert!(thread.exit_ns.is_some(), "the child's thread exited");
    // Forked without exec: named as the process that forked it, which is its parent.
    assert_eq!(thread.name.as_deref(), Some("daemon"));
    assert_eq!(thread.parent_tid, Some(p.num("parent") as u32));
    // Nothing is missing: the child ran its exit path, and no sample was lost.
    let meta = profile.meta();
    assert!(
        meta.completeness.complete,
        "{:?}",
        meta.completeness.reasons
    );
    assert_eq!(meta.completeness.exit.as_ref().unwrap().code, Some(7));
}

/// Without sampling rings (`--backend none`) the runtime's logs tell which processes of the
/// program still run: the child's objects are in the profile, and it ended normally.
#[test]
fn without_rings_the_daemon_child_is_waited_for_too() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["daemon.c"], "daemon", &[]);
    let done = dir.path().join("done.txt");
    let work_ms = 400;
    let started = Instant::now();
    let (recorded, profile) = record_with(
        dir.path(),
        &exe,
        &[&work_ms.to_string(), "200", done.to_str().unwrap(), "200"],
        |o| o.source = SampleSource::None,
    );
    let took = started.elapsed();
    assert_eq!(recorded.exit.code(), Some(7));
    assert_eq!(std::fs::read_to_string(&done).unwrap(), "done\n");
    // The child's work, then its 200 ms linger after the file.
    assert!(took >= Duration::from_millis(work_ms + 200), "{took:?}");
    let outlived = recorded
        .summary
        .outlived
        .as_ref()
        .expect("the child outlived");
    assert_eq!(outlived.processes, 2);
    assert!(outlived.still_running.is_empty(), "{outlived:?}");
    let p = printed(dir.path());
    let view = View::read(&profile);
    let block = view.object_at(p.num("child") as u32, p.addr("block"));
    assert!(block.free_ns.is_some(), "the child freed its block");
    let meta = profile.meta();
    assert!(
        meta.completeness.complete,
        "{:?}",
        meta.completeness.reasons
    );
}
