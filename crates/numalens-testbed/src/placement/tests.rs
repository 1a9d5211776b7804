//! The measurement on hand-built runs: observations, the estimator, time to good placement,
//! the measured schedule the simulator replays, and the table's rows and targets.

use std::collections::HashMap;
use std::path::Path;

use numalens_format::{Migration, PageNodes};
use numalens_place::accesses::{Accesses, Cell, CountSource, Page, ThreadInfo, Windows};
use numalens_place::layout::{Move, ThreadMove};
use numalens_place::{Machine, Model};

use super::locality::{self, Window, time_to_good};
use super::modelled::measured_schedule;
use super::observed::{AccessSample, CpuSeen, ExactCount, Observed, Steps, parse_thread_cpus};
use super::table::{
    self, Measured, Row, RunOutcome, Verdict, recommendation, recommended_stem, render, targets,
    vmstat_delta, without_profile,
};

const PAGE: u64 = 4096;

fn sample(tid: u32, page: u64, time_ns: u64, write: bool) -> AccessSample {
    AccessSample {
        time_ns,
        pid: 1,
        tid,
        page,
        weight: 1,
        write,
    }
}

fn count(tid: u32, page: u64, reads: u64, writes: u64, first_ns: u64) -> ExactCount {
    ExactCount {
        pid: 1,
        tid,
        page,
        reads,
        writes,
        first_ns,
    }
}

/// Two nodes with memory (0, 1) and an empty third (2). Thread 1 runs on node 0 throughout;
/// thread 2 on node 1 until t=500, then on node 0. Page 10 stays on node 0; page 20 is on node
/// 0 until the scan at t=100, then on node 1. Scans at 100, 200, …, 900.
fn observed() -> Observed {
    let mut o = Observed {
        page_size: PAGE,
        memory_nodes: vec![0, 1, 2],
        start_ns: 0,
        end_ns: 999,
        ..Observed::default()
    };
    let cpu_node: HashMap<u32, u32> = [(0, 0), (1, 1), (2, 2)].into();
    let seen = |tid, time_ns, cpu| CpuSeen {
        time_ns,
        pid: 1,
        tid,
        cpu,
    };
    o.set_threads(
        &[
            seen(1, 5, 0),
            seen(2, 5, 1),
            seen(2, 500, 0),
            seen(9, 5, 77),
        ],
        &cpu_node,
    );
    let scan = |t: u64, start: u64, pages: u64, node: u32| PageNodes {
        time_ns: t,
        pid: 1,
        start: start * PAGE,
        pages,
        page_size: PAGE,
        node: Some(node),
        status: String::new(),
        source: "scan".into(),
    };
    let mut rows = Vec::new();
    for k in 1..10 {
        rows.push(scan(k * 100, 10, 1, 0));
        rows.push(scan(k * 100, 20, 1, if k == 1 { 0 } else { 1 }));
    }
    o.set_pages(&rows, &[]);
    o
}

#[test]
fn steps_give_the_latest_observation_else_the_first() {
    let s = Steps::new(vec![(300, 2), (100, 1), (200, 1)]);
    assert_eq!(s.observations(), &[(100, 1), (300, 2)]);
    assert_eq!(s.at(0), Some(1));
    assert_eq!(s.at(299), Some(1));
    assert_eq!(s.at(300), Some(2));
    assert_eq!(s.at(u64::MAX), Some(2));
    assert_eq!(s.changes(), 1);
    assert_eq!(Steps::default().at(5), None);
}

#[test]
fn pages_and_threads_are_where_the_observations_put_them() {
    let o = observed();
    assert_eq!(o.page_node(1, 20, 150), Some(0));
    assert_eq!(o.page_node(1, 20, 200), Some(1));
    assert_eq!(o.page_node(1, 99, 200), None);
    assert_eq!(o.thread_node(1, 2, 499), Some(1));
    assert_eq!(o.thread_node(1, 2, 500), Some(0));
    assert_eq!(o.thread_node(1, 9, 10), None, "CPU 77 is on no node");
    assert_eq!(o.scans.len(), 9);
    assert_eq!(o.moves_seen, 1);
}

#[test]
fn numalens_moves_count_at_their_time_and_plan_rows_do_not() {
    let mut o = observed();
    let migration = |time_ns, policy: &str, result: &str| Migration {
        time_ns,
        pid: 1,
        start: 10 * PAGE,
        len: 2 * PAGE,
        from_node: Some(0),
        to_node: 2,
        policy: policy.into(),
        reason: String::new(),
        result: result.into(),
    };
    let rows: Vec<PageNodes> = Vec::new();
    o.set_pages(
        &rows,
        &[
            migration(350, "spm", "ok"),
            migration(100, "plan", "ok"),
            migration(50, "spm", "EBUSY"),
        ],
    );
    assert_eq!(
        o.page_node(1, 10, 349),
        Some(2),
        "before its first answer: that answer"
    );
    assert_eq!(o.page_node(1, 11, 350), Some(2));
    assert_eq!(
        o.moves_seen, 0,
        "numalens' own moves are not scan observations"
    );
    assert_eq!(
        super::numalens_moved_pages(
            &[
                migration(350, "spm", "ok"),
                migration(100, "plan", "ok"),
                migration(50, "spm", "EBUSY")
            ],
            PAGE
        ),
        2
    );
}

#[test]
fn multi_page_runs_cover_each_base_page() {
    let mut o = observed();
    let huge = PageNodes {
        time_ns: 7,
        pid: 1,
        start: 512 * PAGE,
        pages: 2,
        page_size: 512 * PAGE,
        node: Some(1),
        status: String::new(),
        source: "exit".into(),
    };
    let untouched = PageNodes {
        node: None,
        status: "untouched".into(),
        start: 4096 * PAGE,
        ..huge.clone()
    };
    o.set_pages(&[huge, untouched], &[]);
    assert_eq!(o.pages.len(), 1024);
    assert_eq!(o.page_node(1, 1535, 0), Some(1));
    assert_eq!(o.page_node(1, 4096, 0), None);
    assert!(o.scans.is_empty(), "exit answers are not scans");
}

#[test]
fn thread_cpus_lines_go_on_the_profiles_clock() {
    let pid_of: HashMap<u32, u32> = [(11, 7)].into();
    let seen = parse_thread_cpus(
        "1500 11 3\n1400 12 0\nbad line\n900 11 1\n2000 11\n",
        1000,
        &pid_of,
    );
    assert_eq!(
        seen,
        vec![CpuSeen {
            time_ns: 500,
            pid: 7,
            tid: 11,
            cpu: 3
        }],
        "unknown threads, lines before the origin and short lines are left out"
    );
}

#[test]
fn exact_counts_are_local_in_the_share_their_samples_found_the_page_near() {
    let o = observed();
    // Thread 1 (node 0) on page 20: half its samples before the move (local), half after.
    let samples: Vec<AccessSample> = (0..10)
        .map(|k| sample(1, 20, 50 + k, false))
        .chain((0..10).map(|k| sample(1, 20, 300 + k, false)))
        .collect();
    let l = locality::measure(&o, &samples, &[count(1, 20, 100, 0, 50)]);
    assert_eq!(l.accesses, 100);
    assert!((l.lar().unwrap() - 0.5).abs() < 1e-9, "{:?}", l.lar());
    assert!((l.judged_share() - 1.0).abs() < 1e-9);
    // Node 0 and node 1 served 50 each, node 2 nothing.
    let imbalance = l.imbalance(&o.memory_nodes).unwrap();
    let expected = 0.5f64.sqrt();
    assert!(
        (imbalance - expected).abs() < 1e-9,
        "{imbalance} vs {expected}"
    );
}

#[test]
fn reads_follow_loads_and_writes_follow_stores() {
    let o = observed();
    // Thread 1 stores to page 20 early (page local), loads late (page moved away).
    let samples = vec![sample(1, 20, 50, true), sample(1, 20, 400, false)];
    let l = locality::measure(&o, &samples, &[count(1, 20, 30, 10, 40)]);
    assert!(
        (l.local - 10.0).abs() < 1e-9,
        "the writes were local, the reads not"
    );
    assert!((l.judged - 40.0).abs() < 1e-9);
}

#[test]
fn a_pair_without_samples_follows_the_threads_samples_on_its_block() {
    let o = observed();
    // Thread 2's samples on page 21 (same block as page 20) come late, when thread 2 is on
    // node 0 and page 20 on node 1; its samples elsewhere come early, when it was on node 1.
    let mut samples = vec![sample(2, 21, 600, false), sample(2, 21, 700, false)];
    samples.extend((0..50).map(|k| sample(2, 1000, 210 + k, false)));
    let l = locality::measure(&o, &samples, &[count(2, 20, 8, 0, 550)]);
    assert_eq!(
        l.local, 0.0,
        "judged at 600 and 700: thread on node 0, page on node 1"
    );
    // Without samples on the block: the thread's samples after its first access (all before
    // 500 here, so none after 450: the count sits at its first access, when thread 2 was on
    // node 1 and the page too).
    let l = locality::measure(&o, &samples[2..], &[count(2, 20, 8, 0, 450)]);
    assert!((l.local - 8.0).abs() < 1e-9, "{l:?}");
    // With thread samples after the first access: spread over them.
    let l = locality::measure(&o, &samples[2..], &[count(2, 20, 8, 0, 235)]);
    assert!((l.local - 8.0).abs() < 1e-9);
}

#[test]
fn accesses_of_an_unseen_thread_are_served_but_not_judged() {
    let o = observed();
    let l = locality::measure(&o, &[], &[count(5, 10, 60, 0, 10), count(1, 10, 40, 0, 10)]);
    assert_eq!(l.accesses, 100);
    assert!((l.judged_share() - 0.4).abs() < 1e-9);
    assert_eq!(l.lar(), Some(1.0));
    assert!((l.served[&0] - 100.0).abs() < 1e-9);
}

#[test]
fn evaluation_points_are_capped_and_evenly_spread() {
    let o = observed();
    // 1000 samples, the first 900 before the move (local), the rest after.
    let samples: Vec<AccessSample> = (0..1000)
        .map(|k| sample(1, 20, if k < 900 { 50 } else { 300 }, false))
        .collect();
    let l = locality::measure(&o, &samples, &[count(1, 20, 1000, 0, 50)]);
    let lar = l.lar().unwrap();
    assert!(
        (lar - 0.9).abs() <= 1.0 / locality::MAX_POINTS as f64,
        "{lar}"
    );
}

#[test]
fn windows_are_cut_at_the_scans() {
    let o = observed();
    let samples: Vec<AccessSample> = (0..10)
        .map(|k| sample(1, 20, 50 + 100 * k, false))
        .collect();
    let l = locality::measure(&o, &samples, &[count(1, 20, 10, 0, 50)]);
    assert_eq!(l.windows.len(), 10);
    assert_eq!(l.windows[0].lar(), Some(1.0));
    assert_eq!(
        l.windows[1].lar(),
        Some(1.0),
        "the scan at 100 still found page 20 on 0"
    );
    assert_eq!(l.windows[2].lar(), Some(0.0));
    assert_eq!((l.windows[9].start_ns, l.windows[9].end_ns), (900, 1000));
}

fn windows(lars: &[f64]) -> Vec<Window> {
    lars.iter()
        .enumerate()
        .map(|(k, lar)| Window {
            start_ns: 1_000_000_000 + k as u64 * 100_000_000,
            end_ns: 1_000_000_000 + (k as u64 + 1) * 100_000_000,
            judged: 100.0,
            local: lar * 100.0,
        })
        .collect()
}

#[test]
fn placement_is_good_from_the_scan_after_which_locality_stays_near_its_final_level() {
    // Final level: the last quarter (two windows) at 0.98; 0.90 is more than 5 % below it.
    let w = windows(&[0.25, 0.3, 0.9, 0.95, 0.97, 0.98, 0.98, 0.98]);
    let t = time_to_good(&w, 1_000_000_000).unwrap();
    assert!((t - 0.3).abs() < 1e-9, "{t}");
    // Stable from the start.
    let w = windows(&[0.5, 0.51, 0.5, 0.5]);
    assert_eq!(time_to_good(&w, 1_000_000_000), Some(0.0));
    // Windows with too few accesses do not count.
    let mut w = windows(&[0.9, 0.2, 0.9, 0.9]);
    w[1].judged = 1.0;
    w[1].local = 0.2;
    assert_eq!(time_to_good(&w, 1_000_000_000), Some(0.0));
    assert_eq!(time_to_good(&[], 0), None);
}

/// Two threads, two pages, four windows of 100 ns from t=0 on machine-b.
fn accesses() -> (Accesses, Machine) {
    let topology = numalens_topology::presets::preset("machine-b").unwrap();
    let machine = Machine::from_topology(&topology);
    let threads = (0..2)
        .map(|t| ThreadInfo {
            pid: 1,
            tid: 1 + t,
            logical_id: t,
            name: None,
        })
        .collect();
    let pages = [10, 20]
        .into_iter()
        .map(|number| Page {
            pid: 1,
            number,
            first_ns: 0,
            ..Page::default()
        })
        .collect();
    let cell = |page, thread| Cell {
        page,
        thread,
        reads: 1000,
        writes: 0,
        other: 0,
    };
    let w = Windows {
        start_ns: 0,
        length_ns: 250,
        cells: (0..4).map(|_| vec![cell(0, 0), cell(1, 1)]).collect(),
    };
    let a = Accesses::from_cells(PAGE, CountSource::Exact, threads, Vec::new(), pages, w);
    (a, machine)
}

#[test]
fn the_schedule_puts_pages_and_threads_where_they_were_measured() {
    let (a, machine) = accesses();
    let (schedule, notes) = measured_schedule(&a, &machine, &observed());
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(schedule.initial.thread_node, vec![0, 1]);
    assert_eq!(
        schedule.initial.page_node,
        vec![0, 0],
        "page 20 moved at the scan at 200"
    );
    assert_eq!(schedule.moves[0], vec![Move::migrate(1, 1)]);
    assert!(schedule.moves[1].is_empty());
    assert_eq!(
        schedule.thread_moves[1],
        vec![ThreadMove { thread: 1, to: 0 }],
        "thread 2 moved to node 0 at 500, within window 2"
    );
}

#[test]
fn the_schedule_says_what_it_had_to_assume() {
    let (a, machine) = accesses();
    let (schedule, notes) = measured_schedule(&a, &machine, &Observed::default());
    assert_eq!(schedule.initial.thread_node, vec![0, 0]);
    assert_eq!(notes.len(), 2, "{notes:?}");
}

#[test]
fn local_placements_model_faster_than_remote_ones() {
    let (a, machine) = accesses();
    let mut local = observed();
    local.set_pages(&[], &[]);
    let at = |page: u64, node: u32| PageNodes {
        time_ns: 0,
        pid: 1,
        start: page * PAGE,
        pages: 1,
        page_size: PAGE,
        node: Some(node),
        status: String::new(),
        source: "exit".into(),
    };
    let cpu_node: HashMap<u32, u32> = [(0, 0), (1, 1)].into();
    let seen = |tid, cpu| CpuSeen {
        time_ns: 0,
        pid: 1,
        tid,
        cpu,
    };
    local.set_threads(&[seen(1, 0), seen(2, 1)], &cpu_node);
    local.set_pages(&[at(10, 0), at(20, 1)], &[]);
    let mut remote = local.clone();
    remote.set_pages(&[at(10, 1), at(20, 0)], &[]);
    let time = |o: &Observed| {
        let (s, _) = measured_schedule(&a, &machine, o);
        numalens_place::simulate(&a, &machine, &s, &Model::default())
    };
    let (l, r) = (time(&local), time(&remote));
    assert_eq!(l.local_access_ratio, Some(1.0));
    assert_eq!(r.local_access_ratio, Some(0.0));
    assert!(l.modelled_time_s < r.modelled_time_s);
}

#[test]
fn the_recommendation_is_read_from_simulates_output() {
    let text = "  oracle (limit) 1.23×\n\n  Best policy: per-object (-18.7 % modelled memory time vs first-touch).\n";
    assert_eq!(recommendation(text).as_deref(), Some("per-object"));
    assert_eq!(recommendation("nothing"), None);
    assert_eq!(recommended_stem("kmaf"), "plan-kmaf");
    assert_eq!(recommended_stem("kmaf-online"), "online-kmaf");
    assert_eq!(recommended_stem("per-object"), "recommended");
}

#[test]
fn a_run_without_a_profile_says_why() {
    let out = "numalens: --policy carrefour: the online engine is not available yet; make a plan";
    assert_eq!(
        without_profile(Some(2), out, None),
        RunOutcome::Unavailable("engine not available".into())
    );
    assert_eq!(
        without_profile(Some(1), "line\nerror: boom\n\n", None),
        RunOutcome::Failed("exit 1: error: boom".into())
    );
    assert_eq!(
        without_profile(None, "", Some("numalens plan failed")),
        RunOutcome::Failed("numalens plan failed".into())
    );
    assert_eq!(vmstat_delta("100\n250\n"), Some(150));
    assert_eq!(vmstat_delta("42"), Some(42));
    assert_eq!(vmstat_delta("250\n100"), None);
    assert_eq!(vmstat_delta(""), None);
}

fn m(lar: f64, imbalance: f64, modelled_s: f64) -> RunOutcome {
    RunOutcome::Measured(Box::new(Measured {
        lar: Some(lar),
        imbalance: Some(imbalance),
        modelled_s,
        ..Measured::default()
    }))
}

fn row(workload: &str, stem: &str, outcome: RunOutcome) -> Row {
    let c = table::CONDITIONS.iter().find(|c| c.stem == stem);
    Row {
        workload: workload.into(),
        stem: stem.into(),
        label: c.map_or(stem.to_string(), |c| c.label.to_string()),
        online: c.is_some_and(|c| c.online),
        outcome,
        kernel_migrated: None,
    }
}

#[test]
fn targets_are_met_not_met_or_not_applicable() {
    let unavailable = || RunOutcome::Unavailable("engine not available".into());
    let rows = vec![
        row("master-init", "first-touch", m(0.25, 1.7, 2.0)),
        row("master-init", "linux", m(0.98, 0.1, 1.4)),
        row("master-init", "plan-oracle", m(0.99, 0.0, 1.2)),
        row("master-init", "online-carrefour", m(0.30, 1.6, 1.9)),
        row("master-init", "online-spm", m(0.978, 0.1, 1.4)),
        row("master-init", "recommended", m(0.99, 0.0, 1.2)),
        row("stencil", "first-touch", m(0.8, 0.4, 2.0)),
        row("stencil", "linux", m(0.8, 0.4, 2.0)),
        row("stencil", "plan-oracle", m(0.8, 0.4, 2.0)),
        row("stencil", "online-spm", m(0.7, 0.4, 2.0)),
        row("stencil", "recommended", m(0.75, 0.5, 2.1)),
        row("shared-hot-rw", "first-touch", m(0.25, 1.7, 1.0)),
        row("shared-hot-rw", "online-spm", unavailable()),
        row("shared-hot-rw", "recommended", m(0.25, 0.1, 0.8)),
    ];
    let t = targets(&rows);
    let verdicts: Vec<Verdict> = t.iter().map(|t| t.verdict).collect();
    assert_eq!(
        verdicts,
        vec![
            Verdict::Met,
            Verdict::NotMet,
            Verdict::NotApplicable,
            Verdict::NotMet
        ],
        "{t:#?}"
    );
    assert!(t[0].detail.contains("online spm"), "{}", t[0].detail);
    assert!(
        t[0].detail
            .ends_with("(below by less than 0.5 points: a tie)"),
        "{}",
        t[0].detail
    );
    assert!(!t[1].detail.contains("a tie"), "{}", t[1].detail);
    assert_eq!(t[2].detail, "engine not available");
    assert!(t[3].detail.contains("stencil"), "{}", t[3].detail);
}

#[test]
fn the_recommendation_is_judged_beyond_the_modelled_times_run_to_run_noise() {
    let rows = vec![
        row("stencil", "first-touch", m(0.8, 0.4, 2.0)),
        // The same placement in another run: modelled 4 % slower.
        row("stencil", "plan-kmaf", m(0.802, 0.41, 2.08)),
        // Another placement: not noise.
        row("stencil", "interleave", m(0.25, 0.4, 3.0)),
        row("stencil", "recommended", m(0.75, 0.45, 2.06)),
    ];
    let (noise, runs) = table::modelled_noise(&rows).unwrap();
    assert!((noise - 0.04).abs() < 1e-9, "{noise}");
    assert_eq!(runs, 1, "plan kmaf's run");
    let t = targets(&rows);
    let last = t.last().unwrap();
    assert_eq!(last.verdict, Verdict::Met, "{last:?}");
    assert!(last.name.contains("4.0 % tolerance"), "{}", last.name);
    assert!(
        last.detail
            .contains("more than 2 % but within the noise: stencil"),
        "{}",
        last.detail
    );
    let worse = vec![
        rows[0].clone(),
        row("stencil", "recommended", m(0.5, 0.9, 2.3)),
    ];
    assert_eq!(targets(&worse).last().unwrap().verdict, Verdict::NotMet);
    assert!(render("g", &rows).contains("within 4.0 % of it"));
}

#[test]
fn the_table_shows_unavailable_and_failed_runs() {
    let rows = vec![
        row("master-init", "first-touch", m(0.25, 1.7, 2.0)),
        row("master-init", "linux", m(0.98, 0.1, 1.0)),
        row(
            "master-init",
            "online-kmaf",
            RunOutcome::Unavailable("engine not available".into()),
        ),
        row(
            "master-init",
            "plan-kmaf",
            RunOutcome::Failed("exit 1: a|b".into()),
        ),
    ];
    let text = render("guest", &rows);
    assert!(text.contains("| master-init | Linux NUMA balancing | 98.0 % | 0.10 | ? (kernel) |"));
    assert!(text.contains("| 2.00× |"), "{text}");
    assert!(text.contains("| online kmaf | n/a (engine not available) |"));
    assert!(text.contains("failed: exit 1: a/b"));
    let columns = |line: &str| line.matches('|').count();
    let header = text.lines().find(|l| l.starts_with("| workload")).unwrap();
    for line in text.lines().filter(|l| l.starts_with("| master-init")) {
        assert_eq!(columns(line), columns(header), "{line}");
    }
}

#[test]
fn rows_come_from_a_workloads_files() {
    let dir = std::env::temp_dir().join(format!("numalens-vm-placement-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("first-touch.numalens/meta.json", "{}");
    write("first-touch.status", "0\n");
    write("linux.numalens/meta.json", "{}");
    write("linux.status", "0\n");
    write("linux.vmstat", "10\n30\n");
    write("online-spm.status", "2\n");
    write(
        "online-spm.txt",
        "error: the online engine is not available yet\n",
    );
    write(
        "plan-kmaf.why",
        "numalens plan --policy kmaf failed: boom\n",
    );
    write(
        "simulate.txt",
        "  Best policy: first-touch (no gain over first touch).\n",
    );
    let fake = |profile: &Path, _cpus: Option<&Path>| -> Result<Measured, String> {
        let stem = profile.file_stem().unwrap().to_str().unwrap().to_string();
        Ok(Measured {
            lar: Some(if stem == "linux" { 0.9 } else { 0.3 }),
            modelled_s: 1.0,
            ..Measured::default()
        })
    };
    let rows = table::workload_rows("w", &dir, &fake);
    let _ = std::fs::remove_dir_all(&dir);
    let by = |stem: &str| rows.iter().find(|r| r.stem == stem).unwrap();
    assert_eq!(rows.len(), table::CONDITIONS.len() + 1);
    assert_eq!(by("linux").kernel_migrated, Some(20));
    assert_eq!(by("linux").measured().unwrap().lar, Some(0.9));
    assert_eq!(
        by("online-spm").outcome,
        RunOutcome::Unavailable("engine not available".into())
    );
    assert_eq!(
        by("plan-kmaf").outcome,
        RunOutcome::Failed("numalens plan --policy kmaf failed: boom".into())
    );
    assert_eq!(
        by("online-carrefour").outcome,
        RunOutcome::Failed("not run".into())
    );
    let rec = by("recommended");
    assert_eq!(rec.label, "recommended: first-touch (= first-touch)");
    assert!(!rec.online);
    assert_eq!(rec.measured().unwrap().lar, Some(0.3));
}
