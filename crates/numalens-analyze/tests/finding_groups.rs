//! Findings of one rule on arrays allocated one after another in one function are one group:
//! six arrays of `Domain::AllocateNodePersistent(int)` (lulesh.h:166-172), each initialised by
//! thread 0 and used in blocks by every thread, beside one such array of another function.

#[path = "../examples/fixture_profiles.rs"]
#[allow(dead_code)]
mod fixture_profiles;

use fixture_profiles::*;
use numalens_analyze::model::ReportModel;
use numalens_analyze::{FindingEntry, Options, analyze};
use numalens_format::Profile;

const ALLOCATOR: &str = "Domain::AllocateNodePersistent(int)";

fn lulesh_like() -> ReportModel {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.numalens");
    allocated_in_one_function().write(&path).unwrap();
    analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap()
}

#[test]
fn six_arrays_of_one_allocating_function_are_one_entry() {
    let m = lulesh_like();
    assert_eq!(m.findings.len(), 7, "{:#?}", m.findings);
    assert!(m.findings.iter().all(|f| f.id == "first-touch-mismatch"));
    assert_eq!(m.finding_groups.len(), 1, "{:#?}", m.finding_groups);
    let g = &m.finding_groups[0];
    assert_eq!(
        g.summary,
        "first-touch-mismatch on 6 objects allocated in Domain::AllocateNodePersistent(int) (lulesh.h:166\u{2013}172)"
    );
    assert_eq!(g.lines, [166, 167, 168, 170, 171, 172]);
    assert_eq!(g.fix, m.findings[g.members[0]].fix);
    // The combined cost is the members' costs added up, and members are most costly first.
    let members: Vec<&numalens_analyze::model::Finding> =
        g.members.iter().map(|&i| &m.findings[i]).collect();
    assert_eq!(
        g.cost.accesses,
        members.iter().map(|f| f.cost.accesses).sum::<u64>()
    );
    assert!(
        members
            .windows(2)
            .all(|w| w[0].cost.remote >= w[1].cost.remote)
    );
    assert_eq!(members[0].object.name, "m_zd");
    // m_elemMass alone costs less than the six together, more than any one of them.
    let single = m
        .findings
        .iter()
        .position(|f| f.object.name == "m_elemMass")
        .unwrap();
    assert!(m.findings[single].cost.remote < g.cost.remote);
    assert!(m.findings[single].cost.remote > members[0].cost.remote);
    assert_eq!(m.findings[0].object.name, "m_elemMass");
    assert_eq!(
        m.finding_entries(),
        [FindingEntry::Group(0), FindingEntry::Single(single)]
    );
    // Additive in the JSON: every finding is where it was, the group names them by position.
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(json["findings"].as_array().unwrap().len(), 7);
    assert_eq!(
        json["finding_groups"][0]["members"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
}

#[test]
fn a_lone_finding_of_a_function_is_no_group() {
    let mut s = Scenario::default();
    master_initialised(&mut s, "m_x", 16, (ALLOCATOR, "lulesh.h", 166));
    master_initialised(
        &mut s,
        "m_e",
        16,
        ("Domain::Domain(int)", "lulesh.cc", 2700),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.numalens");
    s.write(&path).unwrap();
    let m = analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap();
    assert_eq!(m.findings.len(), 2);
    assert!(m.finding_groups.is_empty(), "{:#?}", m.finding_groups);
    assert_eq!(
        m.finding_entries(),
        [FindingEntry::Single(0), FindingEntry::Single(1)]
    );
}
