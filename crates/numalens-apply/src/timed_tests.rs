//! Timed moves resolved against the instances a plan's rules matched, from runtime records.

use numalens_place::plan::{MigrateAt, ObjectRule};
use numalens_preload::events::TimedEvent;

use super::*;

fn rule(action: Action, moves: Vec<MigrateAt>) -> ObjectRule {
    ObjectRule {
        identity: Default::default(),
        name: "grid".into(),
        kind: "heap".into(),
        instances: 1,
        pages: 8,
        accesses: 1,
        action,
        migrate_at: moves,
        note: None,
    }
}

fn at(time_s: f64, pages: Vec<u64>) -> MigrateAt {
    MigrateAt {
        time_s,
        node: 0,
        pages,
        replicate: false,
    }
}

fn moves(objects: Vec<ObjectRule>) -> TimedMoves {
    let text = r#"{"plan_version":"1.0","numalens_version":"0","policy":{"name":"spm"},
        "made_from":{"profile":"p"},"topology":{"name":"m","nodes":[{"id":0,"cpus":1}]}}"#;
    let mut plan = Plan::from_json_str(text, std::path::Path::new("p.json")).unwrap();
    plan.objects = objects;
    let host = numalens_topology::host().unwrap();
    TimedMoves::new(&plan, &NodeMap::default(), &host).unwrap()
}

fn event(tid: u32, event: Event) -> TimedEvent {
    TimedEvent {
        tid,
        time_ns: 0,
        event,
    }
}

fn place(address: u64, rule: u32, what: u8) -> Event {
    Event::Place {
        address,
        len: 4096,
        rule,
        node: 0,
        errno: 0,
        what,
        spread: false,
    }
}

#[test]
fn an_object_s_moves_follow_each_instance_its_rule_matched() {
    let mut t = moves(vec![
        rule(
            Action::Bind { node: 0 },
            vec![at(1.0, vec![0, 2, 40]), at(3.0, vec![1])],
        ),
        rule(Action::Bind { node: 0 }, Vec::new()),
    ]);
    // Thread 9 allocates 5 pages at 0x10010 (rule 0 applies), then 0x90000 without a rule.
    t.event(7, event(9, alloc(0x10010, 5 * 4096)));
    t.event(7, event(9, place(0x10000, 0, 0)));
    t.event(7, event(9, alloc(0x90000, 4096)));
    assert!(
        t.due_jobs(999_999_999, 0, 0).is_empty(),
        "nothing due before 1 s"
    );
    let jobs = t.due_jobs(1_500_000_000, 1_500_000_000, 0);
    assert_eq!(jobs.len(), 1);
    // Offsets from the object's first page; offset 40 lies past its end.
    assert_eq!(jobs[0].requests, [(0x10000, 0), (0x12000, 0)]);
    assert_eq!((jobs[0].pid, jobs[0].policy.as_str()), (7, TIMED_POLICY));
    assert!(
        jobs[0].reason.starts_with("objects[0] migrate_at[0]"),
        "{}",
        jobs[0].reason
    );
    assert!(t.due_jobs(2_000_000_000, 0, 0).is_empty(), "made once");
    // A second instance, from another thread: the due move is made on it too.
    t.event(7, event(11, alloc(0x40000, 8 * 4096)));
    t.event(7, event(11, place(0x40000, 0, 0)));
    let jobs = t.due_jobs(2_000_000_000, 0, 0);
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].requests[0], (0x40000, 0));
    // Freed before the next move: left alone.
    t.event(7, event(11, Event::Free { address: 0x40000 }));
    let jobs = t.due_jobs(3_000_000_000, 0, 0);
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].requests, [(0x11000, 0)]);
}

#[test]
fn a_static_object_is_found_by_its_first_range() {
    let ranges = Action::Ranges(vec![
        numalens_place::plan::PageRange {
            pages: [2, 3],
            node: 0,
        },
        numalens_place::plan::PageRange {
            pages: [4, 9],
            node: 0,
        },
    ]);
    let mut t = moves(vec![rule(ranges, vec![at(0.5, vec![0, 5])])]);
    // The runtime binds each range: the first record is range 0's, two pages in.
    t.event(3, event(3, place(0x602000, 0, 1)));
    t.event(3, event(3, place(0x604000, 0, 1)));
    let jobs = t.due_jobs(600_000_000, 0, 0);
    assert_eq!(jobs.len(), 1, "one instance");
    assert_eq!(jobs[0].requests, [(0x600000, 0), (0x605000, 0)]);
}

fn alloc(address: u64, size: u64) -> Event {
    Event::Alloc {
        address,
        size,
        alignment: 0,
        site_id: 1,
        function: numalens_preload::events::AllocFn::Malloc,
    }
}
