//! What each finding rests on (docs/FINDINGS.md, "What a finding rests on"): every rule names
//! its data, how much of it, and the thresholds it passed, whichever data the profile holds;
//! and the first toucher beside samples is counted over every page a fault placed.

#[path = "../examples/fixture_profiles.rs"]
#[allow(dead_code)]
mod fixture_profiles;

use fixture_profiles::*;
use numalens_analyze::model::{Finding, ReportModel};
use numalens_analyze::{Options, analyze};
use numalens_format::{DataSource, Profile, Sample, SampleKind};

fn model_of(s: Scenario) -> ReportModel {
    s.analyzed()
}

/// The basis is there, in words and structured, and every test it lists was passed.
fn check_basis(f: &Finding, kind: &str) {
    let b = f
        .basis
        .as_ref()
        .unwrap_or_else(|| panic!("{} has no basis", f.id));
    let words = f.rests_on.as_deref().unwrap_or_default();
    assert!(!words.is_empty(), "{}", f.id);
    assert_eq!(b.data[0].kind, kind, "{}: {words}", f.id);
    assert!(b.data.iter().all(|d| d.count > 0), "{}: {words}", f.id);
    assert!(!b.tests.is_empty(), "{}", f.id);
    for t in &b.tests {
        // On samples the lower bound is what must reach the threshold.
        let value = t.lower_bound.unwrap_or(t.value);
        match t.passes.as_str() {
            "at-least" => assert!(value >= t.threshold, "{}: {t:?}", f.id),
            "below" => assert!(value < t.threshold, "{}: {t:?}", f.id),
            other => panic!("{other}"),
        }
        assert_eq!(t.samples.is_some(), t.lower_bound.is_some(), "{t:?}");
        assert!(words.contains(&t.measure.replace('_', " ")), "{words}");
    }
    let sampled = b.tests.iter().any(|t| t.samples.is_some());
    assert_eq!(b.confidence.is_some(), sampled, "{}", f.id);
}

#[test]
fn every_finding_from_exact_counts_rests_on_them() {
    let mut seen: Vec<String> = Vec::new();
    for (name, scenario) in all() {
        let m = model_of(scenario);
        for f in &m.findings {
            check_basis(f, "exact-counts");
            assert!(
                f.basis
                    .as_ref()
                    .unwrap()
                    .tests
                    .iter()
                    .all(|t| t.samples.is_none()),
                "{name}"
            );
            seen.push(f.id.clone());
        }
    }
    seen.sort();
    seen.dedup();
    let expected = [
        "false-sharing-candidate",
        "first-touch-mismatch",
        "hotspot",
        "mixed-page-ownership",
        "neighbour-sharing",
        "phase-change",
        "shared-read-only",
        "shared-read-write",
    ];
    assert_eq!(seen, expected);
}

/// The stored profiles of the JSON snapshots: every finding kind in them has its basis.
#[test]
fn every_finding_of_the_snapshot_profiles_rests_on_its_data() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let mut findings = 0;
    for name in ["master-init", "stencil", "many-small"] {
        let path = std::path::Path::new(dir).join(format!("{name}.numalens"));
        let m = analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap();
        for f in &m.findings {
            check_basis(f, "exact-counts");
            findings += 1;
        }
    }
    assert_eq!(findings, 3);
}

fn touch(t: u32, time_ns: u64, address: u64) -> Sample {
    let mut s = Scenario::default();
    s.sample(t, time_ns, address, false, 1);
    Sample {
        kind: SampleKind::FirstTouch,
        object_id: Some(0),
        ..s.samples.remove(0)
    }
}

fn with_kind(kind: SampleKind, s: Sample) -> Sample {
    Sample {
        kind,
        data_source: DataSource::Unknown,
        ..s
    }
}

/// Thread 0 touches the first 32 of 96 pages, then threads 1-3 read them (sampled loads): a
/// serial initialisation. Thread 1 touches the other 64 pages, which no load sample hits.
fn serial_init_half_sampled(access: SampleKind) -> Scenario {
    let mut s = Scenario::default();
    let grid = s.object("grid", 96 * PAGE);
    let mut touches = Vec::new();
    for p in 0..96u64 {
        let t = if p < 32 { 0 } else { 1 };
        touches.push(touch(t, p, grid + p * PAGE));
    }
    for p in 0..32u64 {
        let user = 1 + (p * 3 / 32) as u32;
        for k in 0..16u64 {
            let at = grid + p * PAGE + 64 * k;
            s.sample(user, 1_000_000 + 1000 * p + k, at, false, 1024);
        }
    }
    let accesses = std::mem::take(&mut s.samples);
    s.samples = touches;
    s.samples
        .extend(accesses.into_iter().map(|a| with_kind(access, a)));
    s
}

#[test]
fn a_finding_from_load_samples_rests_on_them_and_on_the_faults() {
    let m = model_of(serial_init_half_sampled(SampleKind::Load));
    let f = m
        .findings
        .iter()
        .find(|f| f.id == "first-touch-mismatch")
        .expect("the serial initialisation is found");
    check_basis(f, "load-store-samples");
    let b = f.basis.as_ref().unwrap();
    assert_eq!(b.data[0].count, 32 * 16);
    assert_eq!(
        (b.data[1].kind.as_str(), b.data[1].count),
        ("first-touch-faults", 96)
    );
    let share = b
        .tests
        .iter()
        .find(|t| t.measure == "mismatched_access_share")
        .unwrap();
    assert_eq!(share.samples, Some(32 * 16));
    assert_eq!(b.confidence, Some(0.95));
    assert!(
        f.rests_on
            .as_deref()
            .unwrap()
            .contains("512 load/store samples")
    );
}

#[test]
fn pages_without_a_recorded_first_touch_say_their_earliest_sample_placed_them() {
    // The first-touch faults of 16 of the 32 used pages were not recorded (sampled faults).
    let mut s = serial_init_half_sampled(SampleKind::Load);
    let grid = s.objects[0].start;
    s.samples
        .retain(|x| x.kind != SampleKind::FirstTouch || (x.address - grid) / PAGE >= 16);
    let m = model_of(s);
    let f = m
        .findings
        .iter()
        .find(|f| f.id == "first-touch-mismatch")
        .expect("the serial initialisation is found");
    let b = f.basis.as_ref().unwrap();
    assert_eq!(b.data[1].kind, "first-touch-faults-else-earliest-samples");
    assert!(
        f.rests_on
            .as_deref()
            .unwrap()
            .contains("or without one by their earliest sample")
    );
}

#[test]
fn a_finding_from_hinting_faults_rests_on_fault_samples() {
    let m = model_of(serial_init_half_sampled(SampleKind::Hint));
    let f = m
        .findings
        .iter()
        .find(|f| f.id == "first-touch-mismatch")
        .expect("the serial initialisation is found");
    check_basis(f, "fault-samples");
}

/// The faults say who placed every page; the samples, who uses the sampled ones. Thread 1 placed
/// 64 of the 96 pages although no sample hit them: it is the first toucher, of 2/3 of the pages
/// (over the sampled pages alone it would be thread 0, of all of them).
#[test]
fn the_first_toucher_counts_every_page_a_fault_placed() {
    let m = model_of(serial_init_half_sampled(SampleKind::Load));
    let a = m.objects[0].access.as_ref().unwrap();
    let toucher = a.first_toucher.unwrap();
    assert_eq!(m.threads[toucher.thread].logical_id, Some(1));
    assert_eq!(toucher.count, 64);
    assert!(
        (toucher.share - 2.0 / 3.0).abs() < 1e-9,
        "{}",
        toucher.share
    );
    // The sampled pages are still what the use is judged on.
    assert_eq!(a.pages, 32);
    let g = &m.groups[0];
    assert_eq!(g.first_toucher.unwrap().count, 64);
    assert!((g.first_toucher.unwrap().share - 2.0 / 3.0).abs() < 1e-9);
}
