//! `numalens report` as a user runs it: on a real recorded program, as text and JSON, and on
//! profiles that are missing, too new, truncated, or asked for what they do not hold.

mod common;
#[path = "support/synthetic.rs"]
mod synthetic;

use common::{numalens, text};
use std::path::{Path, PathBuf};
use std::process::Command;
use synthetic::synthetic_profile;

use serde_json::Value;

/// Two worker threads each first-touch their own half of a heap array; the first also
/// initialises a static array.
const HALVES_C: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BYTES (8 << 20)
static char lookup_table[1 << 20];
static char *halves;

static void *worker(void *arg)
{
    long half = (long)arg;
    memset(halves + half * (BYTES / 2), 1, BYTES / 2);
    if (half == 0)
        memset(lookup_table, 2, sizeof lookup_table);
    return NULL;
}

int main(void)
{
    halves = malloc(BYTES);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return halves[BYTES - 1] + lookup_table[7] == 3 ? 0 : 1;
}
"#;

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Compiles `HALVES_C` and records it; returns the profile directory.
fn record_halves(dir: &Path) -> PathBuf {
    let source = dir.join("halves.c");
    std::fs::write(&source, HALVES_C).unwrap();
    let exe = dir.join("halves");
    let built = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o", arg(&exe), arg(&source)])
        .status()
        .unwrap();
    assert!(built.success(), "compiling halves.c");
    let profile = dir.join("halves.numalens");
    let run = numalens(&["record", "-o", arg(&profile), arg(&exe)]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    profile
}

/// Line number of the first line of `HALVES_C` containing `needle`.
fn source_line(needle: &str) -> usize {
    1 + HALVES_C.lines().position(|l| l.contains(needle)).unwrap()
}

fn object<'a>(json: &'a Value, name: &str) -> &'a Value {
    let objects = json["objects"].as_array().unwrap();
    objects
        .iter()
        .find(|o| o["name"].as_str().unwrap().contains(name))
        .unwrap_or_else(|| panic!("no object `{name}` in {objects:#?}"))
}

/// First touches of `object` by logical thread id.
fn touches_by(object: &Value, thread: u64) -> u64 {
    let touchers = object["first_touchers"].as_array().unwrap();
    let of = touchers.iter().find(|t| t["thread"] == thread);
    of.map_or(0, |t| t["count"].as_u64().unwrap())
}

#[test]
fn report_of_a_recorded_program_names_objects_sites_and_first_touchers() {
    let dir = tempfile::tempdir().unwrap();
    let profile = record_halves(dir.path());
    let out = numalens(&["report", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let json_out = numalens(&["report", "--json", arg(&profile)]);
    assert!(json_out.status.success(), "{}", text(&json_out.stderr));
    let json: Value = serde_json::from_slice(&json_out.stdout).unwrap();

    // The heap array: its allocation site, and each worker first-touching its half.
    let line = source_line("halves = malloc");
    let heap = object(&json, &format!("halves.c:{line}"));
    assert_eq!(heap["kind"], "heap");
    assert!(
        report.contains(&format!(
            "main {}:{line} by T0",
            arg(&dir.path().join("halves.c"))
        )),
        "{report}"
    );
    let (t1, t2) = (touches_by(heap, 1), touches_by(heap, 2));
    // The page holding the boundary between halves, and the first page (which the allocator
    // writes its header into), may go either way.
    assert!(
        (1022..=1026).contains(&t1) && (1022..=1026).contains(&t2),
        "{heap:#}"
    );
    assert!(t1 + t2 >= 2046, "{heap:#}");
    assert!(report.contains(&format!("T1 {t1}")) && report.contains(&format!("T2 {t2}")));
    let resident: u64 = heap["pages"]["by_node"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["count"].as_u64().unwrap())
        .sum();
    assert!((2048..=2049).contains(&resident), "{heap:#}");

    // The static array, by its symbol, first touched by the first worker only.
    let table = object(&json, "lookup_table");
    assert_eq!(
        (table["kind"].as_str(), table["size"].as_u64()),
        (Some("static"), Some(1 << 20))
    );
    assert!((256..=257).contains(&touches_by(table, 1)), "{table:#}");
    assert_eq!(touches_by(table, 0) + touches_by(table, 2), 0, "{table:#}");
    assert!(report.contains("lookup_table [static] 1.0 MiB"), "{report}");

    // The workers' start routine, by name and the line of its entry (its opening brace).
    let worker = format!(
        "worker (halves.c:{})",
        source_line("static void *worker") + 1
    );
    for t in json["threads"].as_array().unwrap() {
        let expected = (t["logical_id"] != 0).then_some(worker.as_str());
        assert_eq!(t["start_function"].as_str(), expected, "{t:#}");
    }
    assert!(report.contains(&worker), "{report}");

    assert_json_matches_text(&json, &report);
}

/// A profile of page faults alone (this machine: one node, no hinting faults) says first what it
/// cannot tell, and gives no verdict it cannot support: no sharing class, main user, finding or
/// what-if from first touches.
#[test]
fn a_profile_of_page_faults_says_what_it_cannot_tell_and_how_to_see_it() {
    let dir = tempfile::tempdir().unwrap();
    let profile = record_halves(dir.path());
    let report = text(&numalens(&["report", arg(&profile)]).stdout);
    let limits = report
        .find("What this profile cannot tell")
        .unwrap_or_else(|| panic!("{report}"));
    assert!(limits < report.find("Findings (0").unwrap(), "{report}");
    assert!(report.contains("numalens cc"), "{report}");
    assert!(!report.contains("nothing wrong"), "{report}");
    assert!(!report.contains(" private "), "{report}");
    let json: Value =
        serde_json::from_slice(&numalens(&["report", "--json", arg(&profile)]).stdout).unwrap();
    let remedies = json["analysis"]["limits"]["remedies"].as_array().unwrap();
    assert!(remedies.len() >= 2, "{remedies:?}");
    assert!(json["findings"].as_array().unwrap().is_empty());
    assert!(json["what_if"].is_null());
    let heap = object(&json, "halves.c");
    assert_eq!(heap["access"]["sharing"], "unknown", "{heap:#}");
    assert!(heap["access"]["main_user"].is_null(), "{heap:#}");
    // What it can tell stays: who first touched the pages.
    assert!(!heap["access"]["first_toucher"].is_null(), "{heap:#}");
}

/// Every number the text shows for objects and threads comes from the same model as the JSON.
fn assert_json_matches_text(json: &Value, report: &str) {
    assert_eq!(json["profile"]["backend"]["name"], "faults");
    assert_eq!(json["profile"]["completeness"]["complete"], true);
    let total = json["totals"]["samples"]["total"].as_u64().unwrap();
    assert!(
        report.contains(&format!("samples     {total} (")),
        "{report}"
    );
    for (rank, o) in json["objects"].as_array().unwrap().iter().enumerate() {
        let head = format!(
            "{}. {} [{}]",
            rank + 1,
            o["name"].as_str().unwrap(),
            o["kind"].as_str().unwrap()
        );
        let line = report
            .lines()
            .find(|l| l.contains(&head))
            .unwrap_or_else(|| panic!("{head}"));
        let counts = format!(
            "{} first touches, {} samples",
            o["samples"]["first_touch"], o["samples"]["total"]
        );
        assert!(line.contains(&counts), "{line} vs {counts}");
    }
    for t in json["threads"].as_array().unwrap() {
        let name = format!("T{}", t["logical_id"]);
        let row = report
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("no row for {name}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], t["tid"].to_string());
        assert!(
            cells.contains(&t["samples"]["total"].to_string().as_str()),
            "{row}"
        );
    }
}

#[test]
fn filters_top_and_thread() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let out = numalens(&[
        "report",
        "--json",
        "--top",
        "2",
        "--thread",
        "3",
        arg(&profile),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["objects"].as_array().unwrap().len(), 2);
    let threads = json["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0]["logical_id"], 3);
    assert_eq!(
        json["totals"]["samples"]["total"],
        threads[0]["samples"]["total"]
    );

    let out = numalens(&["report", "--object", "block[1]", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("1. block[1] [heap]"), "{report}");
    assert!(!report.contains("2. "), "{report}");
}

#[test]
fn missing_profile_is_an_error_naming_it() {
    let out = numalens(&["report", "/nonexistent/run.numalens"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("/nonexistent/run.numalens") && err.contains("does not exist"),
        "{err}"
    );
}

#[test]
fn newer_major_version_is_refused_with_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let meta_path = profile.join("meta.json");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["format_version"] = "9.0".into();
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    let out = numalens(&["report", arg(&profile)]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("meta.json") && err.contains("9.0") && err.contains("upgrade"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// The profile was complete when written: a table cut short afterwards is damage, not an
/// interrupted recording.
#[test]
fn truncated_table_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(profile.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["completeness"]["complete"], true);
    let samples = profile.join("samples.parquet");
    let bytes = std::fs::read(&samples).unwrap();
    std::fs::write(&samples, &bytes[..bytes.len() / 2]).unwrap();
    let out = numalens(&["report", arg(&profile)]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(arg(&samples)) && err.contains("truncated"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("interrupted"), "{err}");
}

#[test]
fn unknown_object_or_thread_is_a_usage_error_with_what_exists() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let out = numalens(&["report", "--object", "blok[2]", arg(&profile)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("`blok[2]`") && err.contains("`block[2]`"),
        "{err}"
    );
    let out = numalens(&["report", "--thread", "99", arg(&profile)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("logical ids in the profile: 0, 1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn findings_come_first_and_json_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(dir.path(), 2000);
    let out = numalens(&["report", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let findings = report.find("Findings (").expect("a findings section");
    assert!(
        findings < report.find("Object accesses").unwrap(),
        "{report}"
    );
    assert!(
        report.contains("Placement (what-if on machine-a)"),
        "{report}"
    );
    let out = numalens(&["report", "--json", "--topology", "machine-b", arg(&profile)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["model_version"], 2);
    assert_eq!(json["placement"]["topology"], "machine-b");
    assert_eq!(json["placement"]["mode"], "what-if");
    let accesses = json["analysis"]["accesses"].as_u64().unwrap();
    let placed = json["placement"]["accesses"].as_u64().unwrap();
    assert_eq!(accesses, placed);
    assert!(json["findings"].is_array());
    // Load and store samples are access data: nothing is withheld.
    assert!(json["analysis"]["limits"].is_null());
    let out = numalens(&["report", "--topology", "nosuch", arg(&profile)]);
    assert_eq!(out.status.code(), Some(2));
}
