//! The report model of a fixture profile with known contents: exact numbers.

mod common;

use common::*;
use numalens_analyze::model::{KindCounts, NodeCount, NodeSummary, ReportModel, ThreadCount};
use numalens_analyze::{AnalyzeError, Options, analyze};
use numalens_format::Profile;

fn model_with(options: Options) -> Result<ReportModel, AnalyzeError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.numalens");
    write_fixture(&path);
    analyze(&Profile::open(&path).unwrap(), &options)
}

fn model() -> ReportModel {
    model_with(Options::default()).unwrap()
}

fn nodes(list: &[NodeCount]) -> Vec<(u32, u64)> {
    list.iter().map(|n| (n.node, n.count)).collect()
}

fn counts(first_touch: u64, load: u64, store: u64, fault: u64) -> KindCounts {
    KindCounts {
        load,
        store,
        first_touch,
        hint: 0,
        fault,
        total: first_touch + load + store + fault,
    }
}

#[test]
fn totals_count_every_sample_once() {
    let m = model();
    assert_eq!(m.totals.samples, counts(10, 4, 2, 1));
    assert_eq!(m.totals.weight, 10 + 301 + 200 + 1);
    assert_eq!(m.totals.unattributed, counts(0, 0, 0, 1));
    assert_eq!(
        (m.totals.objects, m.totals.objects_ranked, m.totals.threads),
        (4, 3, 3)
    );
    assert_eq!(m.profile.lost_samples, 3);
    let note = m.profile.lost_samples_note.as_deref().unwrap();
    assert!(
        note.starts_with(
            "3 samples or task records (15.0 %) were lost because the ring buffer filled"
        ),
        "{note}"
    );
    assert!(note.ends_with("--ring-pages 1024"), "{note}");
    assert_eq!(m.profile.command, ["./app", "--size", "8"]);
    assert_eq!(m.profile.completeness.exit.unwrap().code, Some(0));
}

#[test]
fn objects_ranked_by_first_touches_then_pages() {
    let m = model();
    let names: Vec<&str> = m.objects.iter().map(|o| o.name.as_str()).collect();
    // `stack[T1]` has neither samples nor pages, so it is not listed.
    assert_eq!(names, ["grid (main.c:10)", "table", "small"]);
    let grid = &m.objects[0];
    assert_eq!(
        (grid.kind.as_str(), grid.size, grid.start),
        ("heap", 0x8000, GRID)
    );
    assert_eq!(grid.samples, counts(8, 3, 2, 0));
    assert_eq!(grid.weight, 8 + 300 + 200);
    assert_eq!(grid.alloc_thread, Some(0));
    let toucher = |thread, tid| ThreadCount {
        pid: PID,
        tid,
        thread: Some(thread),
        count: 4,
    };
    assert_eq!(
        grid.first_touchers,
        [toucher(1, PID + 1), toucher(2, PID + 2)]
    );
    // The exit query (later) overrides the scan for the second half.
    assert_eq!(nodes(&grid.pages.by_node), [(0, 4), (1, 4)]);
    assert_eq!(grid.pages.not_queried, 0);
}

#[test]
fn allocation_site_names_the_innermost_frame_with_a_line() {
    let m = model();
    let site = m.objects[0].site.as_ref().unwrap();
    assert_eq!(site.key, "0x0000000000000abc");
    assert_eq!(site.location.function.as_deref(), Some("make_grid"));
    assert_eq!(
        (site.location.file.as_deref(), site.location.line),
        (Some("grid.c"), Some(42))
    );
    let depths: Vec<Option<&str>> = site.frames.iter().map(|f| f.function.as_deref()).collect();
    assert_eq!(depths, [None, Some("make_grid"), Some("main")]);
    assert!(m.objects[1].site.is_none());
}

#[test]
fn partial_pages_untouched_pages_and_small_objects() {
    let m = model();
    let table = &m.objects[1];
    assert_eq!(table.samples, counts(2, 1, 0, 0));
    assert_eq!(nodes(&table.pages.by_node), [(0, 1)]);
    assert_eq!(table.pages.untouched, 1);
    let small = &m.objects[2];
    assert_eq!(small.samples.total, 0);
    assert_eq!(nodes(&small.pages.by_node), [(1, 1)]);
}

#[test]
fn threads_with_kinds_and_nodes() {
    let m = model();
    let ids: Vec<(u32, Option<u32>)> = m.threads.iter().map(|t| (t.tid, t.logical_id)).collect();
    assert_eq!(
        ids,
        [
            (PID, Some(0)),
            (PID + 1, Some(1)),
            (PID + 2, Some(2)),
            (STRAY_TID, None)
        ]
    );
    let [t0, t1, t2, stray] = &m.threads[..] else {
        panic!("four threads")
    };
    assert_eq!(
        (t0.samples, nodes(&t0.nodes)),
        (counts(2, 3, 0, 0), vec![(0, 5)])
    );
    assert_eq!(
        (t1.samples, nodes(&t1.nodes)),
        (counts(4, 0, 0, 1), vec![(0, 4)])
    );
    assert_eq!(t1.unknown_node, 1);
    assert_eq!(
        (t2.samples, nodes(&t2.nodes)),
        (counts(4, 0, 2, 0), vec![(1, 6)])
    );
    assert_eq!(t2.start_routine.as_deref(), Some("0x401000"));
    assert_eq!(
        (t2.name.as_deref(), t2.parent_tid),
        (Some("worker"), Some(PID))
    );
    assert_eq!((stray.samples.load, stray.name.as_deref()), (1, None));
}

#[test]
fn node_totals_cover_every_queried_page() {
    let m = model();
    let node = |node, pages, samples| NodeSummary {
        node,
        pages,
        bytes: pages * 4096,
        samples,
    };
    assert_eq!(m.nodes.nodes, [node(0, 5, 10), node(1, 5, 6)]);
    assert_eq!((m.nodes.untouched_pages, m.nodes.unknown_pages), (1, 3));
    assert_eq!(m.nodes.unknown_node_samples, 1);
}

#[test]
fn thread_filter_keeps_that_threads_samples() {
    let m = model_with(Options {
        thread: Some(2),
        ..Options::default()
    })
    .unwrap();
    assert_eq!(m.totals.samples, counts(4, 0, 2, 0));
    let tids: Vec<u32> = m.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [PID + 2]);
    assert_eq!(m.objects[0].samples, counts(4, 0, 2, 0));
    assert_eq!(m.objects[0].first_touchers.len(), 1);
    let names: Vec<&str> = m.objects.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        ["grid (main.c:10)", "table", "small"],
        "resident pages still rank"
    );
}

#[test]
fn object_filter_keeps_matching_objects_and_their_samples() {
    let m = model_with(Options {
        object: Some("grid".into()),
        ..Options::default()
    })
    .unwrap();
    assert_eq!(m.objects.len(), 1);
    assert_eq!(m.totals.samples, counts(8, 3, 2, 0));
    assert_eq!(m.totals.unattributed.total, 0);
    let tids: Vec<u32> = m.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids, [PID, PID + 1, PID + 2]);
    let exact = model_with(Options {
        object: Some("table".into()),
        ..Options::default()
    })
    .unwrap();
    assert_eq!(exact.objects[0].name, "table");
}

#[test]
fn top_limits_the_list_not_the_totals() {
    let m = model_with(Options {
        top: 1,
        ..Options::default()
    })
    .unwrap();
    assert_eq!(m.objects.len(), 1);
    assert_eq!(m.totals.objects_ranked, 3);
}

#[test]
fn unknown_object_and_thread_are_errors_with_what_exists() {
    let err = model_with(Options {
        object: Some("tabel".into()),
        ..Options::default()
    })
    .unwrap_err();
    let AnalyzeError::UnknownObject { near, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(near[0], "table");
    assert!(err.to_string().contains("`tabel`"), "{err}");
    let err = model_with(Options {
        thread: Some(7),
        ..Options::default()
    })
    .unwrap_err();
    assert!(matches!(err, AnalyzeError::UnknownThread { id: 7, ref known } if known == &[0, 1, 2]));
    assert!(err.to_string().contains("0, 1, 2"), "{err}");
}
