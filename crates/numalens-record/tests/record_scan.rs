//! `--page-scan-interval`: the recorder's periodic page → node queries show placement over time.

mod common;

use std::time::Duration;

use common::record::{Printed, build, printed};
use numalens_format::{PageNodes, Profile};
use numalens_record::record::RecordOptions;
use numalens_record::session::record;

/// (present, untouched) pages of [start, start+len) in the scan rows of one moment.
fn counts(rows: &[&PageNodes], start: u64, len: u64) -> (u64, u64) {
    let (mut present, mut untouched) = (0, 0);
    for r in rows {
        let lo = r.start.max(start);
        let hi = (r.start + r.pages * r.page_size).min(start + len);
        if lo >= hi {
            continue;
        }
        let n = (hi - lo) / r.page_size;
        match r.node {
            Some(_) => present += n,
            None if r.status == "untouched" => untouched += n,
            None => panic!("unexpected status {}", r.status),
        }
    }
    (present, untouched)
}

#[test]
fn scans_show_the_second_half_arriving_later() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["two_steps.c"], "two_steps", &[]);
    let out = dir.path().join("stdout.txt");
    let command = format!("exec {} > {}", exe.display(), out.display());
    let mut opts = RecordOptions::new(
        "sh",
        vec!["-c".into(), command.into()],
        dir.path().join("p.numalens"),
    );
    opts.page_scan_interval = Some(Duration::from_millis(50));
    let recorded = record(&opts).unwrap();
    assert!(recorded.exit.success());
    let p = printed(dir.path());
    let (block, bytes) = (p.addr("block"), p.num("bytes"));
    let pages = bytes / 4096;

    let profile = Profile::open(&recorded.profile).unwrap();
    let rows = profile.read_all::<PageNodes>().unwrap();
    let mut by_time: std::collections::BTreeMap<u64, Vec<&PageNodes>> = Default::default();
    for r in rows.iter().filter(|r| r.source == "scan") {
        by_time.entry(r.time_ns).or_default().push(r);
    }
    let seen: Vec<(u64, u64)> = by_time
        .values()
        .map(|rows| counts(rows, block, bytes))
        .filter(|(present, untouched)| present + untouched > 0)
        .collect();
    assert!(seen.len() >= 4, "several scans cover the block: {seen:?}");
    assert!(seen.iter().all(|(p, u)| p + u == pages), "{seen:?}");
    assert!(
        seen.contains(&(pages / 2, pages / 2)),
        "a scan between the two steps sees half the block: {seen:?}"
    );
    assert_eq!(
        *seen.last().unwrap(),
        (pages, 0),
        "the last scan sees it all"
    );
    let presents: Vec<u64> = seen.iter().map(|(p, _)| *p).collect();
    assert!(presents.windows(2).all(|w| w[0] <= w[1]), "{presents:?}");
}
