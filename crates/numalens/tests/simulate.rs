//! `numalens simulate` and `numalens plan` on real recordings of the ground-truth workloads,
//! and their answers to bad input.

mod common;
#[path = "support/synthetic.rs"]
mod synthetic;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{numalens, text};
use serde_json::Value;

/// Builds workload `name` with `numalens cc` and records it with exact counts.
fn record(name: &str, dir: &Path) -> PathBuf {
    let w = numalens_workloads::find(name).unwrap();
    let manifest = w.manifest().unwrap();
    let cc: Vec<OsString> = vec![env!("CARGO_BIN_EXE_numalens").into(), "cc".into()];
    let program = numalens_workloads::build(w, &cc, &dir.join(name)).unwrap();
    let args = numalens_workloads::args(&manifest, &[]).unwrap();
    let profile = dir.join(format!("{name}.numalens"));
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "inst", "--inst-mode", "exact", "-o"])
        .arg(&profile)
        .arg(&program)
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    profile
}

fn simulate(profile: &Path, machine: &str) -> Value {
    let out = numalens(&[
        "simulate",
        profile.to_str().unwrap(),
        "--topology",
        machine,
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn speedup(w: &Value, policy: &str) -> f64 {
    w["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == policy)
        .unwrap_or_else(|| panic!("no {policy} in {w}"))["speedup_vs_first_touch"]
        .as_f64()
        .unwrap()
}

#[test]
fn workloads_gain_from_the_policies_their_pattern_calls_for() {
    let dir = tempfile::tempdir().unwrap();
    let shared = record("shared-hot-rw", dir.path());
    let master = record("master-init", dir.path());
    let s = simulate(&shared, "machine-b");
    assert!(speedup(&s, "interleave") > 1.05, "{s}");
    let m = simulate(&master, "machine-b");
    for locality in ["marathe-hop", "kmaf"] {
        assert!(speedup(&m, locality) > 1.05, "{locality}: {m}");
    }
    for w in [&s, &m] {
        // Every policy is listed once; the oracle is never worse than any of them.
        let policies = w["policies"].as_array().unwrap();
        assert_eq!(policies.len(), 12, "{w}");
        let oracle = speedup(w, "oracle");
        for p in policies {
            assert!(
                oracle >= p["speedup_vs_first_touch"].as_f64().unwrap() - 1e-9,
                "{p}"
            );
        }
        assert_eq!(speedup(w, "first-touch"), 1.0);
    }
    // The same answer run after run.
    assert_eq!(simulate(&master, "machine-b"), m);
    // A plan for the best locality policy binds the grid's blocks where their threads run.
    let plan = dir.path().join("plan.json");
    let out = numalens(&[
        "plan",
        master.to_str().unwrap(),
        "--policy",
        "kmaf",
        "--topology",
        "machine-b",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let p: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(p["plan_version"], "1.0");
    assert_eq!(p["policy"]["name"], "kmaf");
    let grid = &p["objects"][0];
    assert_eq!(grid["kind"], "heap");
    assert!(grid["identity"]["site"].is_string(), "{grid}");
    assert!(
        grid["action"]["ranges"].as_array().unwrap().len() >= 4,
        "{grid}"
    );
    assert_eq!(p["threads"].as_array().unwrap().len(), 4);
    assert!(
        p["made_from"]["build_ids"][0]["build_id"].is_string(),
        "{p}"
    );
    // Simulated beside the policies, the plan places the pages as the policy did.
    let out = numalens(&[
        "simulate",
        master.to_str().unwrap(),
        "--topology",
        "machine-b",
        "--policy",
        "kmaf",
        "--plan",
        plan.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let w: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = format!("plan: {}", plan.display());
    let time = |name: &str| {
        w["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["policy"] == name)
            .unwrap_or_else(|| panic!("no {name} in {w}"))["modelled_time_s"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(time(&row), time("kmaf"), "{w}");
    assert_ne!(
        w["recommended"],
        row.as_str(),
        "a plan is not a policy to recommend"
    );
    // On a machine without its nodes, the plan is refused, naming the node and the rule.
    let out = numalens(&[
        "simulate",
        master.to_str().unwrap(),
        "--topology",
        "sandybridge-2s",
        "--plan",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(
        e.contains("does not have") && e.contains("machine-b"),
        "{e}"
    );
    // Writing it again replaces the earlier plan.
    let again = numalens(&[
        "plan",
        master.to_str().unwrap(),
        "--policy",
        "interleave",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(again.status.success(), "{}", text(&again.stderr));
}

#[test]
fn bad_input_says_what_to_change() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic::synthetic_profile(dir.path(), 4000);
    let p = profile.to_str().unwrap();
    let out = numalens(&["simulate", p, "--policy", "best"]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(
        e.contains("unknown policy `best`") && e.contains("carrefour"),
        "{e}"
    );
    let out = numalens(&["simulate", p, "--topology", "machine-z"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("machine-b"),
        "{}",
        text(&out.stderr)
    );
    let list = numalens(&["simulate", p, "--policy", "list"]);
    assert!(text(&list.stdout).contains("marathe-hop"));
    let out = numalens(&["simulate", p, "--threads-per-node", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // A policy parameter that does not exist is named with the group's parameters.
    let out = numalens(&["simulate", p, "--policy-param", "kmaf.age=0"]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(e.contains("kmaf.age=0") && e.contains("age_shift"), "{e}");
    // One that does is written into the plan it shaped.
    let plan = dir.path().join("kmaf-online.json");
    let out = numalens(&[
        "plan",
        p,
        "--policy",
        "kmaf-online",
        "--policy-param",
        "kmaf.age_shift=3",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written: Value = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    assert_eq!(
        written["policy"]["parameters"]["kmaf"]["age_shift"], 3,
        "{written}"
    );
    // A file that is not a plan is refused, named.
    let out = numalens(&["simulate", p, "--plan", "/etc/hostname"]);
    assert_eq!(out.status.code(), Some(2));
    let e = text(&out.stderr);
    assert!(e.contains("/etc/hostname") && e.contains("not JSON"), "{e}");
    // A plan never overwrites a file that is not a plan.
    let source = dir.path().join("main.c");
    std::fs::write(&source, "int main(void) { return 0; }\n").unwrap();
    let out = numalens(&[
        "plan",
        p,
        "--policy",
        "interleave",
        "-o",
        source.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&source).unwrap(),
        "int main(void) { return 0; }\n"
    );
}

#[test]
fn a_faults_only_profile_says_what_to_record() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("faults.numalens");
    let out = numalens(&[
        "record",
        "--backend",
        "faults",
        "-o",
        profile.to_str().unwrap(),
        "sh",
        "-c",
        "exit 0",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = numalens(&["simulate", profile.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.contains("no access counts") && e.contains("--backend inst"),
        "{e}"
    );
    // First touch and interleave need no counts: a plan can still be made.
    let plan = dir.path().join("p.json");
    let out = numalens(&[
        "plan",
        profile.to_str().unwrap(),
        "--policy",
        "interleave",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = numalens(&[
        "plan",
        profile.to_str().unwrap(),
        "--policy",
        "kmaf",
        "-o",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
}
