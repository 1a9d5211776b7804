use super::*;
use crate::accesses::Page;
use crate::fixture::{self, cell, exact};
use crate::layout::{Layout, Move, MoveKind};
use crate::policies::{Input, Params};
use numalens_topology::presets::preset;

fn machine() -> Machine {
    Machine::from_topology(&preset("machine-b").unwrap())
}

fn object(id: u64, site: u64, name: &str) -> ObjectInfo {
    ObjectInfo {
        id,
        pid: 7,
        kind: "heap".into(),
        name: name.into(),
        start: 0,
        size: 0,
        site_key: Some(site),
        frames: vec!["make_grid (grid.c:12)".into(), "main (main.c:40)".into()],
        module: None,
        alloc_thread: None,
    }
}

/// Pages of objects given as (object, first page number, count).
fn accesses(objects: Vec<ObjectInfo>, spans: &[(u32, u64, u64)]) -> Accesses {
    let mut pages = Vec::new();
    let mut cells = Vec::new();
    for &(o, first, count) in spans {
        for k in 0..count {
            cells.push(cell(pages.len() as u32, 0, 10 + o as u64, 0));
            pages.push(Page {
                pid: 7,
                number: first + k,
                object: Some(o),
                first_toucher: Some(0),
                ..Page::default()
            });
        }
    }
    exact(
        fixture::threads(7, 7, 2),
        objects,
        pages,
        1_000_000_000,
        vec![cells],
    )
}

fn plan(a: &Accesses, page_node: Vec<usize>, replicated: Vec<bool>) -> Plan {
    let s = Schedule::fixed(Layout {
        thread_node: vec![0, 1],
        page_node,
        replicated,
    });
    from_schedule(
        a,
        &machine(),
        &s,
        Policy::MaratheHop,
        serde_json::json!({}),
        PlanSource::default(),
    )
}

#[test]
fn one_node_is_a_bind_and_threads_get_rules() {
    let a = accesses(vec![object(1, 0xabc, "grid")], &[(0, 100, 4)]);
    let p = plan(&a, vec![2; 4], vec![]);
    assert_eq!(p.objects.len(), 1);
    assert_eq!(p.objects[0].action, Action::Bind { node: 2 });
    assert_eq!(
        p.objects[0].identity.site.as_deref(),
        Some("0x0000000000000abc")
    );
    assert_eq!(p.objects[0].identity.frames[0], "make_grid (grid.c:12)");
    assert_eq!(
        p.threads[1],
        ThreadRule {
            process: 0,
            logical_id: 1,
            node: 1,
            migrate_at: Vec::new(),
        }
    );
}

#[test]
fn an_interleaved_object_is_an_interleave_over_its_nodes() {
    let a = accesses(vec![object(1, 1, "points")], &[(0, 64, 16)]);
    let nodes: Vec<usize> = (64..80u64).map(|n| (n % 2) as usize * 2).collect();
    let p = plan(&a, nodes, vec![]);
    assert_eq!(
        p.objects[0].action,
        Action::Interleave {
            nodes: vec![0, 2],
            weights: None
        }
    );
}

#[test]
fn a_mixed_object_gets_page_ranges() {
    let a = accesses(vec![object(1, 1, "grid")], &[(0, 10, 6)]);
    let p = plan(&a, vec![0, 0, 0, 3, 3, 1], vec![]);
    let ranges = vec![
        PageRange {
            pages: [0, 2],
            node: 0,
        },
        PageRange {
            pages: [3, 4],
            node: 3,
        },
        PageRange {
            pages: [5, 5],
            node: 1,
        },
    ];
    assert_eq!(p.objects[0].action, Action::Ranges(ranges));
}

#[test]
fn instances_of_a_site_merge_and_disagreements_are_noted() {
    let a = accesses(
        vec![
            object(1, 5, "buf"),
            object(2, 5, "buf"),
            object(3, 5, "buf"),
        ],
        &[(0, 0, 2), (1, 8, 2), (2, 16, 2)],
    );
    let p = plan(&a, vec![1, 1, 1, 1, 1, 1], vec![]);
    assert_eq!(p.objects.len(), 1);
    assert_eq!(p.objects[0].instances, 3);
    assert_eq!(p.objects[0].note, None);
    let p = plan(&a, vec![1, 1, 1, 1, 2, 2], vec![]);
    // The third instance (most accesses: object index 2 reads 12 per page) wins.
    assert_eq!(p.objects[0].action, Action::Bind { node: 2 });
    assert!(
        p.objects[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("2 of 3 instances")
    );
}

#[test]
fn replication_is_advisory() {
    let a = accesses(vec![object(1, 1, "table")], &[(0, 0, 2)]);
    let p = plan(&a, vec![0, 0], vec![true, true]);
    assert_eq!(p.objects[0].action, Action::Replicate {});
    assert!(
        p.objects[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("advisory")
    );
}

#[test]
fn objects_without_identity_are_counted_as_unplaced() {
    let mut o = object(1, 1, "anon");
    o.site_key = None;
    let a = accesses(vec![o], &[(0, 0, 3)]);
    let p = plan(&a, vec![0; 3], vec![]);
    assert!(p.objects.is_empty());
    assert_eq!(
        p.unplaced,
        Unplaced {
            pages: 3,
            accesses: 30
        }
    );
}

#[test]
fn online_moves_become_migrate_at_rules() {
    let a = accesses(vec![object(1, 1, "grid")], &[(0, 40, 4)]);
    let mut s = Schedule::fixed(Layout {
        thread_node: vec![0, 1],
        page_node: vec![0; 4],
        replicated: vec![],
    });
    s.moves = vec![vec![Move::migrate(2, 1), Move::migrate(3, 1)]];
    let p = from_schedule(
        &a,
        &machine(),
        &s,
        Policy::Carrefour,
        serde_json::json!({}),
        PlanSource::default(),
    );
    assert_eq!(
        p.objects[0].migrate_at,
        vec![MigrateAt {
            time_s: 1.0,
            node: 1,
            pages: vec![2, 3],
            replicate: false,
        }]
    );
}

#[test]
fn json_round_trip_versions_and_machine_check() {
    let a = accesses(vec![object(1, 0xabc, "grid")], &[(0, 100, 4)]);
    let p = plan(&a, vec![3; 4], vec![]);
    let path = Path::new("plan.json");
    let text = p.to_json_pretty();
    assert_eq!(Plan::from_json_str(&text, path).unwrap(), p);
    let newer_minor = text.replacen(
        "\"plan_version\": \"1.0\"",
        "\"plan_version\": \"1.7\", \"future\": 1",
        1,
    );
    assert!(Plan::from_json_str(&newer_minor, path).is_ok());
    let newer_major = text.replacen("\"plan_version\": \"1.0\"", "\"plan_version\": \"2.0\"", 1);
    let e = Plan::from_json_str(&newer_major, path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("plan version 2.0"), "{e}");
    assert!(
        Plan::from_json_str("{}", path)
            .unwrap_err()
            .to_string()
            .contains("plan_version")
    );
    // Node 3 does not exist on a 2-node machine.
    let mut small = machine();
    small.nodes.truncate(2);
    let e = p.check_machine(&small, path).unwrap_err().to_string();
    assert!(e.contains("node 3") && e.contains("grid"), "{e}");
    assert!(p.check_machine(&machine(), path).is_ok());
}

#[test]
fn build_id_of_a_real_binary() {
    let me = std::env::current_exe().unwrap();
    let id = read_build_id(&me);
    // Rust test binaries carry a GNU build id on Linux.
    assert!(id.as_ref().is_some_and(|i| i.len() >= 16), "{id:?}");
    assert_eq!(read_build_id(Path::new("/nonexistent")), None);
}

/// An object whose first page (from its start address) was never touched: offsets count from
/// the start, as a run that applies the plan sees the object.
#[test]
fn offsets_count_from_the_objects_start() {
    let mut grid = object(1, 0xabc, "grid");
    grid.start = 96 * 4096 + 16;
    let a = accesses(vec![grid], &[(0, 100, 4)]);
    let p = plan(&a, vec![0, 0, 1, 1], vec![]);
    let Action::Ranges(ranges) = &p.objects[0].action else {
        panic!("{:?}", p.objects[0].action)
    };
    assert_eq!(ranges[0].pages, [4, 5]);
    assert_eq!(ranges[1].pages, [6, 7]);
}

/// A plan read back onto the profile it was made from gives the schedule it was made from:
/// placement, thread mapping and timed moves (replications too), and so the same simulated
/// time.
#[test]
fn a_plan_read_back_gives_the_schedule_it_was_made_from() {
    let mut grid = object(1, 0xabc, "grid");
    grid.start = 96 * 4096;
    let mut table = object(2, 0xdef, "table");
    table.start = 300 * 4096;
    let a = accesses(vec![grid, table], &[(0, 100, 8), (1, 300, 4)]);
    let m = machine();
    let mut s = Schedule::fixed(Layout {
        thread_node: vec![0, 2],
        page_node: vec![0, 0, 1, 3, 3, 3, 2, 0, 1, 1, 1, 1],
        replicated: vec![],
    });
    s.thread_moves = vec![vec![crate::layout::ThreadMove { thread: 1, to: 3 }]];
    s.moves = vec![vec![
        Move::migrate(2, 3),
        Move {
            page: 9,
            to: 1,
            kind: MoveKind::Replicate,
        },
    ]];
    let plan = from_schedule(
        &a,
        &m,
        &s,
        Policy::Carrefour,
        serde_json::json!({}),
        PlanSource::default(),
    );
    let params = Params::default();
    // The default mapping differs from the plan's: its thread rules win.
    let threads = vec![0, 0];
    let input = Input {
        accesses: &a,
        machine: &m,
        threads: &threads,
        params: &params,
    };
    let back = apply::schedule(&plan, &input);
    assert_eq!(back.initial.thread_node, s.initial.thread_node);
    assert_eq!(back.initial.page_node, s.initial.page_node);
    assert_eq!(back.moves, s.moves);
    assert_eq!(back.thread_moves, s.thread_moves);
    assert_eq!(plan.threads[1].migrate_at[0].node, 3);
    let time = |s: &Schedule| crate::sim::simulate(&a, &m, s, &params.model).modelled_time_s;
    assert_eq!(time(&back), time(&s));
    assert!(
        back.notes[0].contains("2 of 2 object rules"),
        "{:?}",
        back.notes
    );
}

#[test]
fn a_rule_that_matches_nothing_is_noted_and_its_pages_stay_with_first_touch() {
    let a = accesses(vec![object(1, 0xabc, "grid")], &[(0, 100, 4)]);
    let mut p = plan(&a, vec![3; 4], vec![]);
    p.objects[0].identity.site = Some("0x1234".into());
    let params = Params::default();
    let m = machine();
    let threads = vec![0, 1];
    let input = Input {
        accesses: &a,
        machine: &m,
        threads: &threads,
        params: &params,
    };
    let back = apply::schedule(&p, &input);
    assert_eq!(
        back.initial.page_node,
        vec![0; 4],
        "first touch: thread 0's node"
    );
    assert!(
        back.notes[1].contains("no object of the profile matches the rule of `grid`"),
        "{:?}",
        back.notes
    );
}

/// Three heap objects of 16 pages, 4 threads, 3 windows of pseudo-random counts.
fn three_objects(seed: u64) -> Accesses {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let objects: Vec<ObjectInfo> = (0..3)
        .map(|o| {
            let mut info = object(o + 1, 0x100 + o, &format!("array{o}"));
            info.start = (1000 + 100 * o) * 4096;
            info
        })
        .collect();
    let mut pages = Vec::new();
    for o in 0..3u32 {
        for k in 0..16 {
            pages.push(Page {
                pid: 7,
                number: 1000 + 100 * o as u64 + k,
                object: Some(o),
                first_toucher: Some((next() % 4) as u32),
                ..Page::default()
            });
        }
    }
    let mut cells = vec![Vec::new(); 3];
    for window in &mut cells {
        for page in 0..48u32 {
            for thread in 0..4 {
                if next() % 3 == 0 {
                    let reads = next() % 200_000;
                    let writes = if page < 16 { 0 } else { next() % 50_000 };
                    window.push(cell(page, thread, reads, writes));
                }
            }
        }
    }
    exact(fixture::threads(7, 7, 4), objects, pages, 1_000_000, cells)
}

/// What docs/PLAN.md promises: a plan made from a profile gives, simulated on that profile,
/// the figures of the policy that made it.
#[test]
fn every_policys_plan_simulates_as_the_policy() {
    let m = Machine::from_topology(&preset("machine-c").unwrap());
    let params = Params::default();
    for seed in 0..3 {
        let a = three_objects(seed);
        let (threads, _) = crate::layout::spread_threads(&a, &m, params.spread);
        let input = Input {
            accesses: &a,
            machine: &m,
            threads: &threads,
            params: &params,
        };
        for policy in Policy::all() {
            let s = crate::policies::run(policy, &input).unwrap();
            let plan = from_schedule(
                &a,
                &m,
                &s,
                policy,
                serde_json::json!({}),
                PlanSource::default(),
            );
            let back = apply::schedule(&plan, &input);
            let time =
                |s: &Schedule| crate::sim::simulate(&a, &m, s, &params.model).modelled_time_s;
            let (want, got) = (time(&s), time(&back));
            assert!(
                (got - want).abs() <= want * 1e-12,
                "seed {seed}, {}: policy {want}, plan {got}\n{}",
                policy.name(),
                plan.to_json_pretty()
            );
        }
    }
}

#[test]
fn overlapping_ranges_of_an_edited_plan_go_to_the_one_written_last() {
    let a = accesses(vec![object(1, 0xabc, "grid")], &[(0, 100, 9)]);
    let mut p = plan(&a, vec![0; 9], vec![]);
    let range = |first, last, node| PageRange {
        pages: [first, last],
        node,
    };
    p.objects[0].action = Action::Ranges(vec![range(0, 7, 1), range(2, 3, 2), range(3, 5, 3)]);
    let params = Params::default();
    let m = machine();
    let threads = vec![0, 1];
    let input = Input {
        accesses: &a,
        machine: &m,
        threads: &threads,
        params: &params,
    };
    let back = apply::schedule(&p, &input);
    // Offset 8 is in no range: first touch (thread 0's node).
    assert_eq!(back.initial.page_node, vec![1, 1, 2, 3, 3, 3, 1, 1, 0]);
}
