//! The runtime's core, linked directly into a C test program (no LD_PRELOAD): its own unit checks,
//! the event file's descriptor, concurrent thread buffers, and the configuration table against docs/RUNTIME.md.

use std::path::Path;
use std::process::Command;

use numalens_preload::events::{Event, read_event_log};

mod common;
use common::build_test_core;

#[test]
fn core_unit_checks_pass() {
    let d = tempfile::tempdir().unwrap();
    let exe = build_test_core(d.path());
    let out = Command::new(&exe).arg("unit").output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

/// The event file's descriptor against a program that takes it: out of reach of the soft limit,
/// taken by a raw close and dup2 (the write still goes to the event file), stepped aside, in place
/// notes, closed once removed, the limits lock, where it goes without room above the soft limit,
/// and RLIMIT_FSIZE (no SIGXFSZ for the program). Fails if any check fails or a signal
/// kills the test program.
#[test]
fn the_event_files_descriptor_survives_a_program_that_takes_it() {
    let d = tempfile::tempdir().unwrap();
    let files = d.path().join("files");
    assert_eq!(run_in(d.path(), "owned", &files).trim(), "ok");
}

/// Runs the core's test program in `MODE` on a new directory `dir`; its stdout, once it
/// succeeded (a failed check or a signal fails the test with its output).
fn run_in(work: &Path, mode: &str, dir: &Path) -> String {
    let exe = build_test_core(work);
    std::fs::create_dir(dir).unwrap();
    let out = Command::new(&exe).arg(mode).arg(dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A child of a raw fork system call, whose parent's log lock was held at the fork, writes its
/// records into a log of its own: the parent's log holds only the parent's.
#[test]
fn a_child_of_a_fork_no_handler_saw_writes_its_own_log() {
    let d = tempfile::tempdir().unwrap();
    let logs = d.path().join("logs");
    let stdout = run_in(d.path(), "raw-fork", &logs);
    if stdout.starts_with("skip") {
        eprintln!("{stdout}");
        return;
    }
    let child: u32 = stdout.trim().parse().unwrap();
    let frees = |pid: u32| -> Vec<u64> {
        let path = logs.join(format!("events-{pid}.bin"));
        let log = read_event_log(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(log.header.pid, pid);
        log.events()
            .filter_map(|e| match e.event {
                Event::Free { address } => Some(address),
                _ => None,
            })
            .collect()
    };
    let parent = parent_pid(&logs, child);
    assert_eq!(frees(parent), [1, 2]);
    assert_eq!(frees(child), [0xc41d]);
}

/// A creator logs a new thread's logical id before the thread exists (and that a failed creation
/// made none): once a flush mark of the creator has written the announcement out, the log tells of
/// a thread whose records are still in its buffer, each of them later than the announcement.
#[test]
fn a_creator_announces_a_new_thread_before_any_record_of_it() {
    let d = tempfile::tempdir().unwrap();
    let logs = d.path().join("logs");
    let at_mark: usize = run_in(d.path(), "create", &logs).trim().parse().unwrap();
    let files = numalens_preload::events::find_event_logs(&logs).unwrap();
    let bytes = std::fs::read(&files[0]).unwrap();
    let prefix = numalens_preload::events::parse_event_log(&bytes[..at_mark], &files[0]).unwrap();
    let creator = prefix.header.pid;
    let announced: Vec<(i64, i32)> = prefix
        .events()
        .filter_map(|e| match e.event {
            Event::ThreadCreate { logical_id, error } => Some((logical_id, error)),
            _ => None,
        })
        .collect();
    assert_eq!(announced, [(1, 0), (1, 11), (2, 0)], "EAGAIN is 11");
    assert!(matches!(
        prefix.events().last().map(|e| e.event),
        Some(Event::FlushMark)
    ));
    assert!(
        prefix.events().all(|e| e.tid == creator),
        "the new thread's records were still in its buffer at the mark"
    );
    let whole = read_event_log(&files[0]).unwrap();
    let announced_at = whole
        .events()
        .find(|e| matches!(e.event, Event::ThreadCreate { logical_id: 2, .. }))
        .unwrap()
        .time_ns;
    let new_thread: Vec<_> = whole.events().filter(|e| e.tid != creator).collect();
    assert!(matches!(
        new_thread.first().map(|e| &e.event),
        Some(Event::ThreadStart { logical_id: 2, .. })
    ));
    assert!(new_thread.iter().all(|e| e.time_ns > announced_at));
}

/// The pid of the log in `dir` that is not `child`'s.
fn parent_pid(dir: &Path, child: u32) -> u32 {
    let pids: Vec<u32> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("events-")?
                .strip_suffix(".bin")?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    pids.into_iter().find(|p| *p != child).unwrap()
}

#[test]
fn concurrent_thread_buffers_lose_nothing_and_keep_per_thread_order() {
    let d = tempfile::tempdir().unwrap();
    let exe = build_test_core(d.path());
    let logs = d.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let (threads, each) = (4u64, 2500u64);
    let st = Command::new(&exe)
        .arg("threads")
        .arg(&logs)
        .args([threads.to_string(), each.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let files = numalens_preload::events::find_event_logs(&logs).unwrap();
    assert_eq!(files.len(), 1);
    let log = read_event_log(&files[0]).unwrap();
    assert!(!log.truncated);
    assert!(log.has_end());
    // Two rounds of `threads` threads; each numbers its records 0..each in order.
    let mut next: std::collections::HashMap<(u32, u64), u64> = Default::default();
    let mut total = 0;
    for ev in log.events() {
        if let Event::Free { address } = ev.event {
            let logical = log
                .records
                .iter()
                .find(|r| r.tid == ev.tid && r.a == address)
                .map(|r| r.b)
                .unwrap();
            let n = next.entry((ev.tid, logical)).or_default();
            assert_eq!(*n, address, "per-thread order");
            *n += 1;
            total += 1;
        }
    }
    assert_eq!(total, 2 * threads * each);
    let logicals: std::collections::BTreeSet<u64> = next.keys().map(|k| k.1).collect();
    assert_eq!(logicals, (1..=2 * threads).collect());
}

#[test]
fn every_environment_variable_is_documented() {
    let d = tempfile::tempdir().unwrap();
    let exe = build_test_core(d.path());
    let out = Command::new(&exe).arg("env-table").output().unwrap();
    assert!(out.status.success());
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/RUNTIME.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.lines().count() >= 4);
    for line in table.lines() {
        let name = line.split('\t').next().unwrap();
        assert!(
            doc.contains(&format!("`{name}`")),
            "{name} missing from docs/RUNTIME.md"
        );
    }
}
