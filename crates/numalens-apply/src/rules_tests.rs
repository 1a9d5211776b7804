use std::path::Path;

use numalens_place::plan::{Action, Identity, ObjectRule, PageRange, Plan, ThreadRule};

use super::*;

/// A 4-node preset cut to its first `nodes` nodes.
fn host(nodes: usize) -> Topology {
    let mut t = numalens_topology::presets::preset("machine-b").expect("a preset");
    t.nodes.truncate(nodes);
    t
}

fn plan(objects: Vec<ObjectRule>, threads: Vec<ThreadRule>) -> Plan {
    let text = r#"{"plan_version":"1.0","numalens_version":"0","policy":{"name":"kmaf"},
        "made_from":{"profile":"p"},"topology":{"name":"m","nodes":[
        {"id":0,"cpus":1},{"id":1,"cpus":1},{"id":2,"cpus":1},{"id":3,"cpus":1}]}}"#;
    let mut p = Plan::from_json_str(text, Path::new("p.json")).unwrap();
    p.objects = objects;
    p.threads = threads;
    p
}

fn rule(identity: Identity, action: Action) -> ObjectRule {
    ObjectRule {
        identity,
        name: "grid".into(),
        kind: "heap".into(),
        instances: 1,
        pages: 8,
        accesses: 100,
        action,
        migrate_at: Vec::new(),
        note: None,
    }
}

fn site(key: &str) -> Identity {
    Identity {
        site: Some(key.into()),
        ..Identity::default()
    }
}

#[test]
fn the_file_has_the_runtime_s_layout() {
    let p = plan(
        vec![
            rule(site("0xabc"), Action::Bind { node: 1 }),
            rule(
                site("0x10"),
                Action::Ranges(vec![PageRange {
                    pages: [0, 3],
                    node: 0,
                }]),
            ),
        ],
        vec![ThreadRule {
            process: 0,
            logical_id: 2,
            node: 1,
            migrate_at: Vec::new(),
        }],
    );
    let c = compile(&p, Path::new("/nonexistent"), &host(2), &NodeMap(None));
    assert_eq!(c.object_rules, vec![0, 1]);
    assert_eq!(c.thread_rules, 1);
    // header 80, 2 sites x 16, 1 thread x 136, 2 actions x 32, 1 range x 24
    assert_eq!(c.bytes.len(), 80 + 32 + 136 + 64 + 24);
    assert_eq!(&c.bytes[..8], b"NLRULES1");
    assert_eq!(
        u64::from_le_bytes(c.bytes[80..88].try_into().unwrap()),
        0xabc
    );
    // the thread's CPU mask: node 1's CPUs
    let thread = 80 + 32;
    let mask = host(2).nodes[1].cpus.iter().fold(0u64, |m, c| m | 1 << c);
    assert_eq!(
        u32::from_le_bytes(c.bytes[thread..thread + 4].try_into().unwrap()),
        2
    );
    assert_eq!(
        u64::from_le_bytes(c.bytes[thread + 8..thread + 16].try_into().unwrap()),
        mask
    );
}

#[test]
fn rules_a_run_cannot_apply_are_said_with_why() {
    let p = plan(
        vec![
            rule(site("0xabc"), Action::Replicate {}),
            rule(
                Identity {
                    symbol: Some("no_such_table".into()),
                    ..Identity::default()
                },
                Action::Bind { node: 0 },
            ),
            rule(
                Identity {
                    process: 1,
                    ..site("0x1")
                },
                Action::Bind { node: 0 },
            ),
        ],
        Vec::new(),
    );
    let c = compile(&p, Path::new("/nonexistent"), &host(4), &NodeMap(None));
    assert!(c.object_rules.is_empty());
    let why: Vec<&str> = c.skipped.iter().map(|(_, w)| w.as_str()).collect();
    assert!(why[0].contains("advisory"), "{why:?}");
    assert!(
        why[1].contains("`no_such_table` is not a static object"),
        "{why:?}"
    );
    assert!(why[2].contains("process 1"), "{why:?}");
}

#[test]
fn another_machine_is_refused_unless_forced_then_mapped_by_position() {
    let p = plan(
        vec![rule(site("0x1"), Action::Bind { node: 3 })],
        Vec::new(),
    );
    let refused = node_map(&p, &host(2), false).unwrap_err().to_string();
    assert!(
        refused.contains("uses nodes [3]") && refused.contains("--force"),
        "{refused}"
    );
    let map = node_map(&p, &host(2), true).unwrap();
    assert_eq!(
        (map.get(0), map.get(1), map.get(2), map.get(3)),
        (0, 1, 0, 1)
    );
    assert!(node_map(&p, &host(4), false).unwrap().describe().is_none());
}

#[test]
fn a_weighted_interleave_is_a_pattern_in_proportion() {
    let mut b = Builder::default();
    b.push_pattern(&[0, 1], &[3, 1]).unwrap();
    let nodes: Vec<u32> = b.ranges.iter().map(|r| r.2).collect();
    assert_eq!(nodes.len(), 4);
    assert_eq!(nodes.iter().filter(|n| **n == 0).count(), 3);
    let mut big = Builder::default();
    big.push_pattern(&[0, 1, 2], &[1000, 500, 1]).unwrap();
    assert!(big.ranges.len() as u64 <= PATTERN_MAX + 3);
    assert!(
        big.ranges.iter().any(|r| r.2 == 2),
        "a small weight keeps a page"
    );
}
