//! Every sample the kernel drops is counted. A program first-touches 100 000 pages in two
//! processes of two threads each, recorded with rings of 4 pages per CPU: most samples are
//! dropped, in the first process's rings and in the inherited ones of its threads and child, and
//! many of them while the ring stays full to the end (the kernel then never writes the
//! `PERF_RECORD_LOST` record that would tell of them). Kept and counted-lost samples together
//! must account for every page. Two ring sizes, because how much a ring still holds untold at
//! the end depends on the moment the recorder last drained it.

mod common;

use std::path::Path;

use common::record::{Printed, build, printed, record_with};

#[test]
fn kept_and_lost_samples_account_for_every_first_touch() {
    for ring_pages in [4, 1] {
        let dir = tempfile::tempdir().unwrap();
        let exe = build(dir.path(), "gcc", &["many_pages.c"], "many_pages", &["-O2"]);
        check_accounting(dir.path(), &exe, ring_pages);
    }
}

fn check_accounting(dir: &Path, exe: &Path, ring_pages: usize) {
    let pages = 100_000;
    let (recorded, profile) = record_with(dir, exe, &[&pages.to_string()], |o| {
        o.ring_pages = ring_pages
    });
    assert_eq!(recorded.exit.code(), Some(0));
    assert_eq!(printed(dir).num("pages"), pages);
    let s = &recorded.summary;
    let accounted = s.samples + s.lost;
    eprintln!(
        "rings of {ring_pages} pages: {} samples kept, {} counted lost: {accounted} for {pages} \
         pages",
        s.samples, s.lost
    );
    assert!(
        s.lost > 0,
        "rings of {ring_pages} pages must overflow: {s:?}"
    );
    // Each page is one fault, so one sample kept or lost: nothing may be missing.
    assert!(
        accounted >= pages,
        "{} kept + {} lost < {pages} pages touched",
        s.samples,
        s.lost
    );
    // Beyond the pages, the program's own start, fork and exit fault a few hundred times (254
    // with rings large enough to lose nothing), and the lost count includes the odd task and
    // mapping record: 2 % is many times that, and far below any double count.
    assert!(
        accounted <= pages + pages / 50,
        "{accounted} accounted for {pages} pages: counted twice?"
    );
    let meta = profile.meta();
    assert_eq!(meta.lost_samples, s.lost);
    assert!(!meta.completeness.complete);
    assert!(
        meta.completeness
            .reasons
            .iter()
            .any(|r| r.contains(&format!("dropped {} records", s.lost))),
        "{:?}",
        meta.completeness.reasons
    );
}
