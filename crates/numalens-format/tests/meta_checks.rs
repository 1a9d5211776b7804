//! `meta.json` values that parse but make no sense are refused when a profile is opened, with an
//! error naming the field and what is wrong with it.

mod common;

use std::path::{Path, PathBuf};

use numalens_format::{Profile, ProfileWriter};

fn written(dir: &Path) -> PathBuf {
    let path = dir.join("m.numalens");
    let mut meta = common::meta();
    meta.topology = Some(numalens_topology::presets::preset("machine-a").unwrap());
    let writer = ProfileWriter::create(&path, meta).unwrap();
    writer.finish(common::complete()).unwrap();
    path
}

/// The error of opening the profile after `change` edits its `meta.json`.
fn open_after(change: impl FnOnce(&mut serde_json::Value)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let meta_path = path.join("meta.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    change(&mut value);
    std::fs::write(&meta_path, value.to_string()).unwrap();
    match Profile::open(&path) {
        Ok(_) => "opened".to_string(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_sound_meta_opens() {
    assert_eq!(open_after(|_| {}), "opened");
    assert_eq!(open_after(|v| v["page_size"] = 65536.into()), "opened");
}

#[test]
fn page_size_must_be_a_power_of_two_a_page_can_have() {
    for bad in [0u64, 1, 3000, 4097, 1 << 40] {
        let e = open_after(|v| v["page_size"] = bad.into());
        assert!(
            e.contains("meta.json")
                && e.contains("field `page_size`")
                && e.contains("power of two"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn the_recording_cannot_end_before_it_started() {
    let e = open_after(|v| {
        v["start_unix_ns"] = 2_000_000_000_000_000_000u64.into();
        v["end_unix_ns"] = 1_000_000_000_000_000_000u64.into();
    });
    assert!(
        e.contains("field `end_unix_ns`") && e.contains("before `start_unix_ns`"),
        "{e}"
    );
}

/// `numalens topology --topology` rejects this JSON; a profile carrying it is no better.
#[test]
fn the_recorded_topology_is_validated() {
    let e = open_after(|v| v["topology"]["distances"]["values"][0][0] = 5.into());
    assert!(
        e.contains("field `topology.distances.values[0][0]`") && e.contains("must be 10"),
        "{e}"
    );
    let e = open_after(|v| v["topology"]["nodes"][0]["cpus"] = "0-4000000000".into());
    assert!(
        e.contains("topology.nodes[0].cpus") && e.contains("more CPUs than"),
        "{e}"
    );
    // Lists bounded one by one are bounded together too, before any is expanded.
    let e = open_after(|v| {
        let nodes = v["topology"]["nodes"].as_array_mut().unwrap();
        for (i, node) in nodes.iter_mut().enumerate() {
            node["cpus"] = format!("{}-{}", i * 65536, i * 65536 + 65535).into();
        }
    });
    assert!(
        e.contains("field `topology.nodes[1].cpus`") && e.contains("65536"),
        "{e}"
    );
}

/// An edit of `meta.json`.
type Edit = fn(&mut serde_json::Value);

#[test]
fn other_values_are_checked_for_sense() {
    let cases: [(&str, Edit); 4] = [
        ("numa_balancing.mode", |v| {
            v["numa_balancing"] = serde_json::json!({ "mode": 9, "tunables": {} })
        }),
        ("completeness.reasons", |v| {
            v["completeness"]["reasons"] = serde_json::json!(["the program was killed"])
        }),
        ("overhead.recorder_cpu_s", |v| {
            v["overhead"] = serde_json::json!({ "recorder_cpu_s": -1.0 })
        }),
        ("command", |v| v["command"] = serde_json::json!([])),
    ];
    for (field, change) in cases {
        let e = open_after(change);
        assert!(
            e.contains("meta.json") && e.contains(&format!("field `{field}`")),
            "{field}: {e}"
        );
    }
}
