//! `numalens export`: the aggregated tables as CSV and JSON files, and its errors.

mod common;
#[path = "support/synthetic.rs"]
mod synthetic;

use common::{numalens, text};
use std::path::Path;
use synthetic::synthetic_profile;
#[path = "../../numalens-analyze/examples/fixture_profiles.rs"]
#[allow(dead_code)]
mod fixture_profiles;

fn demo(dir: &Path) -> String {
    let profile = synthetic_profile(dir, 4000);
    profile.to_str().unwrap().to_string()
}

const TABLES: [&str; 7] = [
    "objects",
    "object_threads",
    "threads",
    "nodes",
    "findings",
    "communication",
    "node_traffic",
];

#[test]
fn csv_and_json_hold_the_same_tables() {
    let dir = tempfile::tempdir().unwrap();
    let profile = demo(dir.path());
    let (csv, json) = (dir.path().join("csv"), dir.path().join("json"));
    for (format, out_dir) in [("csv", &csv), ("json", &json)] {
        let out = numalens(&[
            "export",
            &profile,
            "--format",
            format,
            "-o",
            out_dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    for table in TABLES {
        let rows = std::fs::read_to_string(csv.join(format!("{table}.csv"))).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(json.join(format!("{table}.json"))).unwrap(),
        )
        .unwrap();
        let array = parsed.as_array().unwrap();
        assert_eq!(rows.lines().count(), array.len() + 1, "{table}");
    }
    // The demo's 8 threads and 9 objects; node traffic over the 4 nodes of machine-a.
    let threads = std::fs::read_to_string(csv.join("threads.csv")).unwrap();
    assert!(
        threads.starts_with("thread,pid,tid,logical_id,name,samples,accesses"),
        "{threads}"
    );
    assert_eq!(threads.lines().count(), 9);
    let objects: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.join("objects.json")).unwrap()).unwrap();
    assert_eq!(objects.as_array().unwrap().len(), 9);
    let accesses: u64 = objects
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["accesses"].as_u64().unwrap())
        .sum();
    assert_eq!(
        accesses,
        4000 * 1000,
        "every sample stands for 1000 accesses"
    );
    let traffic = std::fs::read_to_string(csv.join("node_traffic.csv")).unwrap();
    assert_eq!(traffic.lines().count(), 1 + 16);
}

/// The six arrays of one function and a seventh of another (`fixture_profiles`), each a
/// first-touch mismatch.
#[test]
fn findings_carry_what_they_rest_on() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.numalens");
    fixture_profiles::allocated_in_one_function()
        .write(&profile)
        .unwrap();
    let (csv, json) = (dir.path().join("csv"), dir.path().join("json"));
    for (format, out_dir) in [("csv", &csv), ("json", &json)] {
        let out = numalens(&[
            "export",
            profile.to_str().unwrap(),
            "--format",
            format,
            "-o",
            out_dir.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // What each finding rests on: its words in both, the structured basis in the JSON alone.
    let findings = std::fs::read_to_string(csv.join("findings.csv")).unwrap();
    let header = findings.lines().next().unwrap();
    assert!(header.ends_with(",summary,rests_on"), "{header}");
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.join("findings.json")).unwrap())
            .unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 7);
    for row in rows {
        let words = row["rests_on"].as_str().unwrap();
        assert!(findings.contains(words), "{words} not in {findings}");
        assert!(
            !row["basis"]["data"].as_array().unwrap().is_empty(),
            "{row}"
        );
        assert!(
            !row["basis"]["tests"].as_array().unwrap().is_empty(),
            "{row}"
        );
    }
    assert_eq!(findings.lines().count(), 1 + 7);
}

#[test]
fn what_if_topology_and_bad_options() {
    let dir = tempfile::tempdir().unwrap();
    let profile = demo(dir.path());
    let out_dir = dir.path().join("out");
    let o = out_dir.to_str().unwrap();
    let out = numalens(&[
        "export",
        &profile,
        "--format",
        "csv",
        "-o",
        o,
        "--topology",
        "machine-c",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let traffic = std::fs::read_to_string(out_dir.join("node_traffic.csv")).unwrap();
    assert_eq!(traffic.lines().count(), 1 + 64, "machine-c has 8 nodes");
    let out = numalens(&[
        "export",
        &profile,
        "--format",
        "csv",
        "-o",
        o,
        "--topology",
        "nosuch",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("machine-a"),
        "{}",
        text(&out.stderr)
    );
    let out = numalens(&[
        "export",
        &profile,
        "--format",
        "csv",
        "-o",
        o,
        "--block-size",
        "100",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("multiple of the profile's page size"));
    let out = numalens(&["export", "/nonexistent/x.numalens", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/x.numalens"));
}
