use super::*;

const PAGE: u64 = 4096;

fn sample(tid: u32, page: u64, time_ns: u64, cpu: Option<u32>, kind: SampleKind) -> Sample {
    Sample {
        time_ns,
        pid: 1,
        tid,
        cpu,
        address: page * PAGE + 8,
        kind,
        weight: 1,
        object_id: None,
        node: None,
        data_source: numalens_format::DataSource::Unknown,
        latency: None,
        ip: None,
        page_size: None,
    }
}

/// Thread 1 runs on node 0 (CPU 0), thread 2 on node 1 (CPU 1). Page 10 stays on node 0;
/// page 20 is on node 0 until t=100, then on node 1.
fn run() -> Run {
    let mut samples = vec![
        sample(1, 0, 1, Some(0), SampleKind::FirstTouch),
        sample(2, 1, 1, Some(1), SampleKind::FirstTouch),
    ];
    for t in 0..10 {
        samples.push(sample(1, 10, 10 + t, None, SampleKind::Load));
        samples.push(sample(2, 20, 50 + t, None, SampleKind::Load));
        samples.push(sample(2, 20, 150 + t, None, SampleKind::Store));
    }
    let mut pages: Timeline = HashMap::new();
    pages.insert((1, 10), vec![(0, 0), (100, 0), (200, 0)]);
    pages.insert((1, 20), vec![(0, 0), (100, 1), (200, 1)]);
    Run {
        page_size: PAGE,
        cpu_node: [(0, 0), (1, 1)].into(),
        thread_node: majority_nodes(&samples, &[(0, 0), (1, 1)].into()),
        pages,
        samples,
    }
}

fn count(tid: u32, page: u64, n: u64) -> PageStat {
    PageStat {
        pid: 1,
        tid,
        page: page * PAGE,
        reads: n,
        writes: 0,
        first_access_ns: 0,
        object_id: None,
    }
}

#[test]
fn exact_counts_are_local_in_the_share_their_samples_found_the_page_near() {
    let r = run();
    // Page 20: half its samples before the move (remote), half after (local).
    let (lar, imbalance, accesses) = exact_locality(&r, &[count(1, 10, 100), count(2, 20, 100)]);
    assert_eq!(accesses, 200);
    assert!((lar - 0.75).abs() < 1e-9, "{lar}");
    // Node 0 served 100 + 50, node 1 served 50.
    assert!((imbalance - 0.5).abs() < 1e-9, "{imbalance}");
}

#[test]
fn a_pair_without_samples_is_judged_by_where_the_page_ended() {
    let r = run();
    let (lar, _, _) = exact_locality(&r, &[count(2, 10, 40)]);
    assert_eq!(lar, 0.0, "page 10 ended on node 0, thread 2 runs on node 1");
}

#[test]
fn pages_are_where_the_latest_answer_put_them() {
    let r = run();
    assert_eq!(r.node_at(1, 20, 99), Some(0));
    assert_eq!(r.node_at(1, 20, 100), Some(1));
    assert_eq!(r.final_node(1, 20), Some(1));
    assert_eq!(r.node_at(1, 99, 0), None);
}

#[test]
fn placement_is_good_from_the_interval_after_which_locality_stays() {
    let r = run();
    // Interval [0,100) holds 20 samples (10 local of thread 1, 10 remote of thread 2): 0.5;
    // [100,200) only 10, under the 20 an interval needs, so it is left out: the level of the
    // first interval is final, reached at the first sample.
    assert_eq!(time_to_good(&r), Some(0.0));
}
