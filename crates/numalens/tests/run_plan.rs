//! `numalens run --plan` on a real program (tests/run_progs/placed.c), which prints the kernel's
//! memory policy of its heap and static arrays and its CPU count: a plan's rules must reach the
//! kernel (mbind at allocation, statics before main), the run must be recorded and report which
//! rules applied, and bad plans must be refused with what to change.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{numalens, text};

const MPOL_DEFAULT: &str = "0";
const MPOL_BIND: &str = "2";
const MPOL_INTERLEAVE: &str = "3";

fn build(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    build_from(dir, "placed.c", name, extra)
}

fn build_from(dir: &Path, source: &str, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/run_progs")
        .join(source);
    let status = Command::new("cc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(source)
        .args(extra)
        .status()
        .expect("run cc");
    assert!(status.success());
    out
}

/// `grid-mode G table-mode T cpus N` → (G, T).
fn modes(stdout: &str) -> (String, String) {
    let words: Vec<&str> = stdout.split_whitespace().collect();
    let after = |key: &str| {
        let i = words.iter().position(|w| *w == key).expect(key);
        words[i + 1].to_string()
    };
    (after("grid-mode"), after("table-mode"))
}

/// A profile of `program` and a plan of `policy` for `topology` ("host": this machine).
fn plan_for(dir: &Path, program: &Path, policy: &str, topology: &str) -> PathBuf {
    let profile = dir.join("first.numalens");
    if !profile.exists() {
        let out = numalens(&["record", "-o", s(&profile), s(program)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let topology = if topology == "host" {
        let host = dir.join("host.json");
        let out = numalens(&["topology", "--json"]);
        std::fs::write(&host, &out.stdout).unwrap();
        host
    } else {
        PathBuf::from(topology)
    };
    let plan = dir.join(format!("{policy}.json"));
    let out = numalens(&[
        "plan",
        s(&profile),
        "--policy",
        policy,
        "--topology",
        s(&topology),
        "-o",
        s(&plan),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    plan
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_plan_s_rules_reach_the_kernel_and_the_run_says_which_applied() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "placed", &[]);
    let native = Command::new(&program).output().unwrap();
    assert_eq!(
        modes(&text(&native.stdout)),
        (MPOL_DEFAULT.into(), MPOL_DEFAULT.into())
    );

    let plan = plan_for(dir.path(), &program, "interleave", "host");
    let profile = dir.path().join("placed.numalens");
    let out = numalens(&["run", "--plan", s(&plan), "-o", s(&profile), s(&program)]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // One node: the interleave over every node is a bind to node 0.
    assert_eq!(
        modes(&text(&out.stdout)),
        (MPOL_BIND.into(), MPOL_BIND.into()),
        "{stderr}"
    );
    assert!(stderr.contains("`main (placed.c:"), "{stderr}");
    assert!(
        stderr.contains("objects[") && stderr.contains("`table`: 1 placed, 1.0 MiB"),
        "{stderr}"
    );
    // The run is recorded, its placements in the migrations table.
    let rows = numalens_format::Profile::open(&profile)
        .unwrap()
        .read_migrations()
        .unwrap();
    assert!(
        rows.iter()
            .filter(|r| r.policy == "plan" && r.result == "ok")
            .count()
            >= 2
    );
}

#[test]
fn a_plan_for_another_machine_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "placed", &[]);
    let plan = plan_for(dir.path(), &program, "interleave", "machine-b");
    let refused = numalens(&["run", "--plan", s(&plan), s(&program)]);
    assert_eq!(refused.status.code(), Some(2));
    let why = text(&refused.stderr);
    assert!(
        why.contains("machine-b") && why.contains("--force"),
        "{why}"
    );

    let forced = numalens(&[
        "run",
        "--force",
        "--plan",
        s(&plan),
        "-o",
        s(&dir.path().join("f.numalens")),
        s(&program),
    ]);
    let stderr = text(&forced.stderr);
    assert!(forced.status.success(), "{stderr}");
    assert!(stderr.contains("mapped by position"), "{stderr}");
    assert_eq!(
        modes(&text(&forced.stdout)),
        (MPOL_INTERLEAVE.into(), MPOL_INTERLEAVE.into())
    );
}

#[test]
fn a_plan_for_another_build_is_refused_with_both_build_ids() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "placed", &[]);
    let planned = numalens_place::plan::read_build_id(&program).expect("gcc writes build ids");
    let plan = plan_for(dir.path(), &program, "interleave", "host");
    let rebuilt = build(dir.path(), "placed", &["-DANOTHER_BUILD=1", "-O2"]);
    let out = numalens(&["run", "--plan", s(&plan), s(&rebuilt)]);
    assert_eq!(out.status.code(), Some(2));
    let why = text(&out.stderr);
    assert!(
        why.contains("another build") && why.contains("--force"),
        "{why}"
    );
    let now = numalens_place::plan::read_build_id(&rebuilt).unwrap();
    assert!(why.contains(&now) && why.contains(&planned), "{why}");
}

#[test]
fn a_malformed_plan_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let program = build(dir.path(), "placed", &[]);
    let plan = plan_for(dir.path(), &program, "interleave", "host");
    let edited =
        std::fs::read_to_string(&plan)
            .unwrap()
            .replacen("\"node\": 0", "\"node\": \"zero\"", 1);
    std::fs::write(&plan, edited).unwrap();
    let out = numalens(&["run", "--plan", s(&plan), s(&program)]);
    assert_eq!(out.status.code(), Some(2));
    let why = text(&out.stderr);
    assert!(why.contains(s(&plan)) && why.contains("line"), "{why}");
}

/// A plan's timed moves (`migrate_at`, as an online policy's plan has them), added to a plan of
/// tests/run_progs/timed.c: the grid's pages are asked of `move_pages` at their time (on this
/// one-node machine a move to node 0, still answered page by page) and the main thread, which
/// kept itself to CPU 0, is moved back to node 0's CPUs.
#[test]
fn a_plan_s_timed_moves_are_made_during_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let program = build_from(dir.path(), "timed.c", "timed", &[]);
    let plan = plan_for(dir.path(), &program, "interleave", "host");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let objects = value["objects"].as_array_mut().unwrap();
    let grid = objects
        .iter()
        .position(|o| o["name"].as_str().unwrap().starts_with("main (timed.c:"))
        .expect("a rule for the grid");
    // Pages 0-3 and 63 of the grid's 64; page 200 lies beyond it and is left alone.
    objects[grid]["migrate_at"] =
        serde_json::json!([{"time_s": 0.6, "node": 0, "pages": [0, 1, 2, 3, 63, 200]}]);
    let threads = value["threads"].as_array_mut().unwrap();
    let main = threads
        .iter()
        .position(|t| t["logical_id"] == 0)
        .expect("a rule for the main thread");
    threads[main]["migrate_at"] = serde_json::json!([{"time_s": 1.0, "node": 0}]);
    std::fs::write(&plan, serde_json::to_string_pretty(&value).unwrap()).unwrap();

    let profile = dir.path().join("timed.numalens");
    let out = numalens(&[
        "run",
        "--plan",
        s(&plan),
        "-o",
        s(&profile),
        s(&program),
        "2",
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 of 1 timed object moves made: 5 pages asked, 5 placed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 of 1 timed thread moves made"),
        "{stderr}"
    );
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("cpus-before 1 "), "{stdout}");
    assert!(stdout.contains(&format!("cpus-after {all} ")), "{stdout}");

    let rows = numalens_format::Profile::open(&profile)
        .unwrap()
        .read_migrations()
        .unwrap();
    let timed: Vec<_> = rows
        .iter()
        .filter(|r| r.policy == "plan-migrate-at")
        .collect();
    assert_eq!(timed.len(), 2, "pages 0-3, then 63: {timed:?}");
    let page = 4096;
    assert_eq!(timed[0].len, 4 * page);
    assert_eq!(timed[1].start, timed[0].start + 63 * page);
    for r in &timed {
        assert_eq!(
            (r.from_node, r.to_node, r.result.as_str()),
            (Some(0), 0, "ok")
        );
        assert!(
            r.reason == format!("objects[{grid}] migrate_at[0] at 0.60 s"),
            "{}",
            r.reason
        );
        assert!(r.time_ns >= 600_000_000, "made at its time: {r:?}");
    }
}
