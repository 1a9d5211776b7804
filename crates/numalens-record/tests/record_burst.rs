//! The page-fault sampler under a burst it cannot keep up with: a one-page ring per CPU and
//! threads first-touching hundreds of MiB at once make the kernel drop samples for real. The
//! loss must be counted and reported (summary, `meta.json`, completeness), and what did arrive
//! must still be a readable profile with correctly attributed samples.

mod common;

use common::record::{PAGE, Printed, View, build, line_of, printed, record_with, shares};
use numalens_format::SampleKind;

#[test]
fn lost_samples_are_counted_reported_and_the_rest_attributed() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["burst.c"], "burst", &["-O2"]);
    let threads = 4;
    let (recorded, profile) = record_with(dir.path(), &exe, &["4", "128"], |o| o.ring_pages = 1);
    assert_eq!(recorded.exit.code(), Some(0));
    let summary = &recorded.summary;
    let meta = profile.meta();
    eprintln!(
        "burst: {} samples kept, {} lost, {} first touches",
        summary.samples, summary.lost, summary.first_touches
    );
    assert!(
        summary.lost > 0,
        "a one-page ring must overflow: {summary:?}"
    );
    assert_eq!(meta.lost_samples, summary.lost);
    assert_eq!(meta.backend.settings["ring_pages_per_cpu"], 1);
    assert!(!meta.completeness.complete);
    assert!(
        meta.completeness
            .reasons
            .iter()
            .any(|r| r.contains(&format!("dropped {} records", summary.lost))),
        "{:?}",
        meta.completeness.reasons
    );
    // The program itself finished normally: the loss is the only reason.
    assert_eq!(meta.completeness.exit.as_ref().unwrap().code, Some(0));
    assert_eq!(
        meta.completeness.reasons.len(),
        1,
        "{:?}",
        meta.completeness.reasons
    );

    // meta.json on disk says the same as the reader (the field users query with jq or pandas).
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(profile.dir().join("meta.json")).unwrap()).unwrap();
    assert_eq!(raw["lost_samples"], summary.lost);

    let view = View::read(&profile);
    assert_eq!(view.samples.len() as u64, meta.tables["samples"].rows);
    assert_eq!(view.samples.len() as u64, summary.samples);
    let p = printed(dir.path());
    let bytes = p.num("bytes");
    let text = std::fs::read_to_string(dir.path().join("stdout.txt")).unwrap();
    let blocks: Vec<(u32, u64)> = text
        .lines()
        .filter(|l| l.starts_with("block"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let address = u64::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap();
            (f[1].parse().unwrap(), address)
        })
        .collect();
    assert_eq!(blocks.len(), threads);
    let pid = view.thread(blocks[0].0).pid;
    let line = line_of("burst.c", "site: burst");
    let mut arrived = 0;
    for &(tid, start) in &blocks {
        let object = view.object_at(pid, start);
        assert_eq!(object.size, bytes);
        assert!(
            object.name.contains(&format!("burst.c:{line}")),
            "{}",
            object.name
        );
        // Every sample that arrived in a whole page of the block is the block's own thread's,
        // and is attributed to the block.
        let (lo, hi) = (
            (start + PAGE - 1) & !(PAGE - 1),
            (start + bytes) & !(PAGE - 1),
        );
        for s in view
            .samples
            .iter()
            .filter(|s| (lo..hi).contains(&s.address))
        {
            assert_eq!(s.tid, tid, "sample at {:#x}", s.address);
            assert_eq!(
                s.object_id,
                Some(object.object_id),
                "sample at {:#x}",
                s.address
            );
            assert_eq!(
                s.kind,
                SampleKind::FirstTouch,
                "one fault per page: {:#x}",
                s.address
            );
            arrived += 1;
        }
    }
    let pages = threads as u64 * bytes / PAGE;
    eprintln!("burst: {arrived} of {pages} block pages sampled");
    assert!(arrived > 0, "some samples of the burst arrived");
    assert!(arrived < pages, "and some were lost");
    let (_, data) = shares("burst (ring_pages = 1)", &recorded, &view);
    assert!(data >= 99.0, "{data:.2} %");
}
