//! Findings on small profiles with exactly known accesses (examples/fixture_profiles.rs): each
//! pattern gives its finding and nothing else, and near misses give none.

#[path = "../examples/fixture_profiles.rs"]
#[allow(dead_code)]
mod fixture_profiles;

use fixture_profiles::*;
use numalens_analyze::model::ReportModel;
use numalens_analyze::{Options, analyze};
use numalens_format::Profile;

fn model_of(s: Scenario) -> ReportModel {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.numalens");
    s.write(&path).unwrap();
    analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap()
}

/// (finding id, advice id, object name) of every finding.
fn findings(m: &ReportModel) -> Vec<(String, String, String)> {
    m.findings
        .iter()
        .map(|f| (f.id.clone(), f.advice.clone(), f.object.name.clone()))
        .collect()
}

fn one(id: &str, advice: &str, object: &str) -> Vec<(String, String, String)> {
    vec![(id.into(), advice.into(), object.into())]
}

#[test]
fn private_blocks_have_no_finding() {
    let m = model_of(private_blocks());
    assert_eq!(findings(&m), []);
    let a = m.objects[0].access.as_ref().unwrap();
    assert_eq!(
        (a.sharing.as_str(), a.pages, a.mismatched_pages),
        ("private", 64, 0)
    );
    assert_eq!(a.accesses, 64 * 3072);
}

#[test]
fn master_init_is_a_first_touch_mismatch() {
    let m = model_of(master_init());
    assert_eq!(
        findings(&m),
        one("first-touch-mismatch", "parallel-first-touch", "grid")
    );
    let a = m.objects[0].access.as_ref().unwrap();
    assert_eq!(a.mismatched_pages, 48);
    assert_eq!(a.first_toucher.unwrap().count, 64);
    let f = &m.findings[0];
    assert_eq!(f.cost.accesses, 48 * (512 + 4608));
}

#[test]
fn shared_readonly_is_replicated() {
    let m = model_of(shared_readonly());
    assert_eq!(findings(&m), one("shared-read-only", "replicate", "db"));
    assert_eq!(
        m.objects[0].access.as_ref().unwrap().sharing,
        "shared-read-only"
    );
}

#[test]
fn shared_rw_is_interleaved() {
    let m = model_of(shared_rw());
    assert_eq!(
        findings(&m),
        one("shared-read-write", "interleave", "points")
    );
}

#[test]
fn hot_band_is_a_hotspot() {
    let m = model_of(hotspot());
    assert_eq!(
        findings(&m),
        one("hotspot", "cyclic-split-schedule", "key_buff1")
    );
}

#[test]
fn stencil_edges_are_neighbour_sharing() {
    let m = model_of(stencil());
    assert_eq!(
        findings(&m),
        one("neighbour-sharing", "co-locate-threads", "u")
    );
    let c = &m.communication.values;
    assert_eq!(
        (c[0][1], c[1][2], c[2][3], c[0][2], c[0][3]),
        (4096, 4096, 4096, 0, 0)
    );
}

#[test]
fn handed_over_blocks_are_a_phase_change() {
    let m = model_of(phases());
    assert_eq!(
        findings(&m),
        one("phase-change", "migrate-between-phases", "field")
    );
}

#[test]
fn hammered_counters_are_false_sharing() {
    let m = model_of(false_sharing());
    assert_eq!(
        findings(&m),
        one("false-sharing", "pad-per-thread-data", "counters")
    );
    assert!(m.analysis.false_sharing.starts_with("candidates only"));
}

#[test]
fn small_records_of_one_site_share_pages() {
    let m = model_of(many_small());
    assert_eq!(
        findings(&m),
        one(
            "mixed-page-ownership",
            "allocate-in-thread",
            "record (many.c:12)"
        )
    );
}
