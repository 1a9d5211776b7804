//! The checks on profiles built in memory: a faithful recording passes, and each kind of recorder
//! error (wrong node, wrong thread, missing or duplicated samples, wrong page nodes, hints taken
//! for first touches) fails with the page and sample that show it.

use numalens_format::{Object, ObjectKind, SampleKind, SiteFrame};

use super::pages::HUGE_PAGE;
use super::probe::{Array, Block, Moved, ProbeOutput, ProbeThread};
use super::recorded::{Fault, PageRun, Recorded};
use super::{Check, balancing, first_touch};

const PAGE: u64 = 4096;
const HEAP: u64 = 0x7f00_0000_0010;
const HEAP_BLOCKS: u64 = 0x7f00_0020_0000;
const STATIC: u64 = 0x5600_0000_0000;
const BLOCK: u64 = 2 * HUGE_PAGE;

fn object(object_id: u64, kind: ObjectKind, start: u64, size: u64, site: Option<u64>) -> Object {
    Object {
        object_id,
        pid: 100,
        kind,
        name: "x".into(),
        start,
        size,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: Some(100),
        site_key: site,
    }
}

fn frame(site_key: u64) -> SiteFrame {
    SiteFrame {
        site_key,
        depth: 0,
        module: "/bin/record_probe".into(),
        offset: 0x1234,
        function: Some("heap_array".into()),
        file: None,
        line: None,
    }
}

fn fault(tid: u32, address: u64, kind: SampleKind, node: Option<u32>, object: u64) -> Fault {
    Fault {
        tid,
        address,
        kind,
        node,
        object_id: Some(object),
        page_size: None,
    }
}

fn run(start: u64, size: u64, node: u32) -> PageRun {
    PageRun {
        start,
        pages: size / PAGE,
        page_size: PAGE,
        node: Some(node),
        status: String::new(),
        source: "exit".into(),
    }
}

/// A faithful recording of `record_probe first-touch` on `nodes` nodes; with `huge`, one
/// first-touch sample per huge page (THP always) instead of one per base page.
fn first_touch_world(nodes: u32, huge: bool) -> (Recorded, ProbeOutput) {
    let mut r = Recorded {
        page_size: PAGE,
        numa_balancing_mode: Some(0),
        complete: true,
        exit_code: Some(0),
        threads: vec![(100, 0)],
        objects: vec![
            object(
                1,
                ObjectKind::Heap,
                HEAP,
                BLOCK * nodes as u64 + HUGE_PAGE,
                Some(7),
            ),
            object(2, ObjectKind::Static, STATIC, 8 * HUGE_PAGE, None),
        ],
        ..Recorded::default()
    };
    r.sites.insert(7, vec![frame(7)]);
    let mut p = ProbeOutput {
        heap_object: Some((HEAP, BLOCK * nodes as u64 + HUGE_PAGE)),
        ..ProbeOutput::default()
    };
    for k in 0..nodes {
        let tid = 101 + k;
        r.threads.push((tid, k + 1));
        p.threads.push(ProbeThread {
            role: k.to_string(),
            logical_id: k + 1,
            tid,
            node: k,
            cpu: k,
        });
        let blocks = [
            (Array::Heap, HEAP_BLOCKS + k as u64 * BLOCK, BLOCK, 1),
            (Array::Static, STATIC + k as u64 * HUGE_PAGE, HUGE_PAGE, 2),
        ];
        for (array, start, size, obj) in blocks {
            p.blocks.push(Block {
                array,
                index: k as usize,
                start,
                size,
            });
            let step = if huge { HUGE_PAGE } else { PAGE };
            for a in (start..start + size).step_by(step as usize) {
                r.samples
                    .push(fault(tid, a + 8, SampleKind::FirstTouch, Some(k), obj));
            }
            r.page_runs.push(run(start, size, k));
        }
    }
    (r, p)
}

fn failures(checks: &[Check]) -> Vec<&Check> {
    checks.iter().filter(|c| !c.ok).collect()
}

fn find<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name}"))
}

#[test]
fn a_faithful_first_touch_recording_passes() {
    let (r, p) = first_touch_world(4, false);
    let checks = first_touch::checks(&r, &p, false);
    assert_eq!(failures(&checks), Vec::<&Check>::new());
    // 3 profile-level checks, then 2 per block, 2 blocks per node.
    assert_eq!(checks.len(), 3 + 4 * 4);
    assert!(
        find(&checks, "first-touch-heap-node3")
            .detail
            .contains("1024 pages")
    );
    assert!(
        find(&checks, "heap-object-site")
            .detail
            .contains("heap_array")
    );
}

#[test]
fn a_sample_with_the_wrong_node_fails_its_block_only() {
    let (mut r, p) = first_touch_world(4, false);
    let i = r.samples.iter().position(|f| f.tid == 102).unwrap();
    r.samples[i].node = Some(0);
    let checks = first_touch::checks(&r, &p, false);
    let failed = failures(&checks);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].name, "first-touch-heap-node1");
    assert!(
        failed[0].detail.contains("by tid 102 node 0"),
        "{}",
        failed[0].detail
    );
}

#[test]
fn missing_and_duplicated_samples_fail() {
    let (mut r, p) = first_touch_world(2, false);
    r.samples
        .retain(|f| f.address != HEAP_BLOCKS + 5 * PAGE + 8);
    let dup = r.samples[40].clone();
    r.samples.push(dup);
    let checks = first_touch::checks(&r, &p, false);
    let c = find(&checks, "first-touch-heap-node0");
    assert!(
        !c.ok
            && c.detail
                .contains("1 of 1024 pages have no first-touch sample"),
        "{c:?}"
    );
    assert!(c.detail.contains("several first-touch samples"), "{c:?}");
}

#[test]
fn thp_without_a_page_size_column_accepts_one_sample_per_huge_page() {
    let (r, p) = first_touch_world(2, true);
    assert_eq!(
        failures(&first_touch::checks(&r, &p, true)),
        Vec::<&Check>::new()
    );
    // The same profile read as base pages is missing samples.
    let c = first_touch::checks(&r, &p, false);
    assert!(!find(&c, "first-touch-heap-node0").ok);
}

#[test]
fn the_page_size_column_decides_when_present() {
    let (mut r, p) = first_touch_world(2, true);
    r.samples_have_page_size = true;
    for f in &mut r.samples {
        f.page_size = Some(HUGE_PAGE);
    }
    assert_eq!(
        failures(&first_touch::checks(&r, &p, true)),
        Vec::<&Check>::new()
    );
    // A base-page fault inside a huge page another sample covers is a duplicate first touch.
    let mut extra = r.samples[0].clone();
    extra.address += 3 * PAGE;
    extra.page_size = Some(PAGE);
    r.samples.push(extra);
    let c = first_touch::checks(&r, &p, true);
    assert!(
        find(&c, "first-touch-heap-node0")
            .detail
            .contains("several"),
        "{c:?}"
    );
}

#[test]
fn page_nodes_and_logical_ids_are_checked() {
    let (mut r, p) = first_touch_world(2, false);
    r.page_runs[2].node = Some(0); // node 1's heap block
    r.threads[1].1 = 5;
    let checks = first_touch::checks(&r, &p, false);
    let c = find(&checks, "page-nodes-heap-node1");
    assert!(!c.ok && c.detail.contains("1024 node 0"), "{c:?}");
    assert!(!find(&checks, "threads-logical-ids").ok);
}

#[test]
fn an_incomplete_profile_or_a_missing_object_fails() {
    let (mut r, p) = first_touch_world(2, false);
    r.complete = false;
    r.exit_code = None;
    r.exit_signal = Some(11);
    r.incomplete_reasons = vec!["the program was killed by SIGSEGV".into()];
    r.objects.retain(|o| o.kind != ObjectKind::Static);
    let checks = first_touch::checks(&r, &p, false);
    assert!(find(&checks, "profile-complete").detail.contains("SIGSEGV"));
    let c = find(&checks, "first-touch-static-node0");
    assert!(!c.ok && c.detail.contains("no static object"), "{c:?}");
}

/// `record_probe balancing` on 4 nodes: the writer (node 0) first-touches, the reader (node 3)
/// takes a hinting fault on each page and the kernel moves it.
fn balancing_world() -> (Recorded, ProbeOutput) {
    let size = 4 * HUGE_PAGE;
    let mut r = Recorded {
        page_size: PAGE,
        numa_balancing_mode: Some(1),
        complete: true,
        exit_code: Some(0),
        threads: vec![(100, 0), (101, 1), (102, 2)],
        objects: vec![object(1, ObjectKind::Heap, HEAP, size + HUGE_PAGE, Some(7))],
        ..Recorded::default()
    };
    r.sites.insert(7, vec![frame(7)]);
    for a in (HEAP_BLOCKS..HEAP_BLOCKS + size).step_by(PAGE as usize) {
        r.samples
            .push(fault(101, a, SampleKind::FirstTouch, Some(0), 1));
    }
    for a in (HEAP_BLOCKS..HEAP_BLOCKS + size).step_by(PAGE as usize) {
        r.samples
            .push(fault(102, a + 64, SampleKind::Hint, None, 1));
    }
    r.page_runs.push(run(HEAP_BLOCKS, size, 3));
    let thread = |role: &str, logical_id, tid, node| ProbeThread {
        role: role.into(),
        logical_id,
        tid,
        node,
        cpu: node,
    };
    let p = ProbeOutput {
        threads: vec![thread("writer", 1, 101, 0), thread("reader", 2, 102, 3)],
        heap_object: Some((HEAP, size + HUGE_PAGE)),
        blocks: vec![Block {
            array: Array::Heap,
            index: 0,
            start: HEAP_BLOCKS,
            size,
        }],
        moved: Some(Moved {
            on_reader_node: 2048,
            pages: 2048,
            seconds: 1.5,
        }),
    };
    (r, p)
}

#[test]
fn a_faithful_balancing_recording_passes() {
    let (r, p) = balancing_world();
    let checks = balancing::checks(&r, &p, false);
    assert_eq!(failures(&checks), Vec::<&Check>::new());
    assert!(
        find(&checks, "hint-samples-reader")
            .detail
            .starts_with("2048 hint samples")
    );
}

#[test]
fn hints_recorded_as_first_touches_fail() {
    // What a recorder that tracks pages at the base size does under THP: the reader's hinting
    // fault lands on another base page of a huge page the writer touched once.
    let (mut r, p) = balancing_world();
    for f in r.samples.iter_mut().filter(|f| f.tid == 102).take(10) {
        f.kind = SampleKind::FirstTouch;
        f.node = Some(3);
    }
    let checks = balancing::checks(&r, &p, false);
    let names: Vec<&str> = failures(&checks).iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "first-touch-writer",
            "hint-samples-reader",
            "hints-cover-moved-pages"
        ]
    );
    assert!(
        find(&checks, "hint-samples-reader")
            .detail
            .contains("10 of the reader's samples")
    );
}

#[test]
fn pages_left_behind_or_balancing_off_fail() {
    let (mut r, p) = balancing_world();
    r.numa_balancing_mode = Some(0);
    r.page_runs = vec![
        run(HEAP_BLOCKS, 3 * HUGE_PAGE, 3),
        run(HEAP_BLOCKS + 3 * HUGE_PAGE, HUGE_PAGE, 0),
    ];
    let checks = balancing::checks(&r, &p, false);
    let names: Vec<&str> = failures(&checks).iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["meta-numa-balancing-mode-1", "page-nodes-moved-to-node3"]
    );
}
