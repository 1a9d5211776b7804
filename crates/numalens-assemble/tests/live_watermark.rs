//! The live watermark on the stored recordings' real event logs: whatever prefix of the logs
//! the recorder has read, no record it has not read yet is older than the watermark. That is
//! what lets a sample older than the watermark be attributed before the program ends.

use std::path::{Path, PathBuf};

use numalens_assemble::live_watermark::FlushWatermark;
use numalens_preload::events::{TimedEvent, find_event_logs, read_event_log};

/// Each log of a stored recording: its process and its records in file order.
fn logs(name: &str) -> Vec<(u32, Vec<TimedEvent>)> {
    let events: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .join(".events");
    find_event_logs(&events)
        .unwrap()
        .iter()
        .map(|path| {
            let log = read_event_log(path).unwrap();
            (log.header.pid, log.events().collect())
        })
        .collect()
}

/// With the first `listed` logs found in the directory, reads the first `read[i]` records of
/// log i, then checks every record not read against the watermark.
fn check_prefix(logs: &[(u32, Vec<TimedEvent>)], listed: usize, read: &[usize]) {
    let mut watermark = FlushWatermark::default();
    for ((pid, records), n) in logs.iter().zip(read).take(listed) {
        watermark.process_seen(*pid);
        records[..*n]
            .iter()
            .for_each(|r| watermark.observe(*pid, r));
    }
    let Some(w) = watermark.watermark() else {
        return;
    };
    for ((pid, records), n) in logs.iter().zip(read) {
        for (i, r) in records.iter().enumerate().skip(*n) {
            assert!(
                r.time_ns >= w,
                "process {pid}: record {i} of {} at {} not read yet, below the watermark {w} \
                 (read {read:?}): {r:?}",
                records.len(),
                r.time_ns,
            );
        }
    }
}

/// Every prefix of every log, the others unread or read whole; for the first log, also before
/// the others appeared (a process's log exists before it forks, and the logs are listed in pid
/// order, which is creation order in these recordings).
fn check_every_prefix(name: &str) {
    let logs = logs(name);
    assert!(
        logs.is_sorted_by_key(|(pid, _)| *pid),
        "{name}: logs not in creation order"
    );
    assert!(!logs.is_empty(), "{name} has no event log");
    let whole: Vec<usize> = logs.iter().map(|(_, r)| r.len()).collect();
    for i in 0..logs.len() {
        for n in 0..=whole[i] {
            let mut alone = vec![0; logs.len()];
            alone[i] = n;
            check_prefix(&logs, logs.len(), &alone);
            if i == 0 {
                check_prefix(&logs, 1, &alone);
            }
            let mut with_others = whole.clone();
            with_others[i] = n;
            check_prefix(&logs, logs.len(), &with_others);
        }
    }
    let mut all = FlushWatermark::default();
    for (pid, records) in &logs {
        records.iter().for_each(|r| all.observe(*pid, r));
    }
    assert_eq!(
        all.watermark(),
        Some(u64::MAX),
        "{name}: every process ended, so everything can be attributed"
    );
}

#[test]
fn threads() {
    check_every_prefix("threads");
}

#[test]
fn fork() {
    check_every_prefix("fork");
}

#[test]
fn inst() {
    check_every_prefix("inst");
}
