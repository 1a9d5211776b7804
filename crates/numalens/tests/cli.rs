//! The `numalens` binary, run as a user runs it: outputs, exit statuses and error messages.

mod common;

use common::{numalens, text};
use std::path::Path;

#[test]
fn host_topology_as_table_and_json() {
    let out = numalens(&["topology"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("Nodes") && table.contains("Distances"),
        "{table}"
    );
    assert!(
        !table.contains('\u{1b}'),
        "no colour when not on a terminal"
    );

    let out = numalens(&["topology", "--json"]);
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!json["nodes"].as_array().unwrap().is_empty());
}

#[test]
fn preset_list_names_every_preset() {
    let out = numalens(&["topology", "--preset", "list"]);
    assert!(out.status.success());
    let list = text(&out.stdout);
    for name in [
        "machine-a",
        "machine-b",
        "machine-c",
        "opteron-4n-marathe",
        "altix-4",
        "sandybridge-2s",
        "epyc-genoa-2s",
        "epyc-genoa-2s-nps4",
        "xeon-spr-2s-snc4",
        "cxl-tier",
    ] {
        assert!(
            list.lines().any(|l| l.starts_with(name)),
            "{name} missing from:\n{list}"
        );
    }
}

#[test]
fn unknown_preset_is_a_usage_error_listing_the_known_ones() {
    let out = numalens(&["topology", "--preset", "machine-z"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("machine-z") && err.contains("machine-a") && err.contains("cxl-tier"),
        "{err}"
    );
}

#[test]
fn preset_json_round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = numalens(&["topology", "--preset", "machine-c", "--json"]);
    assert!(out.status.success());
    let file = dir.path().join("c.json");
    std::fs::write(&file, &out.stdout).unwrap();
    let again = numalens(&["topology", "--topology", file.to_str().unwrap(), "--json"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&out.stdout), text(&again.stdout));
    let table = numalens(&["topology", "--topology", file.to_str().unwrap()]);
    assert!(text(&table.stdout).contains("machine-c"));
}

#[test]
fn malformed_topology_file_names_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let out = numalens(&["topology", "--preset", "machine-a", "--json"]);
    let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["nodes"][1]["cpus"] = serde_json::json!(true);
    let file = dir.path().join("bad.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = numalens(&["topology", "--topology", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("nodes[1].cpus") && err.contains("bad.json"),
        "{err}"
    );
}

#[test]
fn missing_topology_file_is_reported() {
    let out = numalens(&["topology", "--topology", "/nonexistent/t.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/t.json"));
}

#[test]
fn bad_command_lines_exit_2() {
    assert_eq!(numalens(&["frobnicate"]).status.code(), Some(2));
    let both = numalens(&["topology", "--preset", "machine-a", "--topology", "x.json"]);
    assert_eq!(both.status.code(), Some(2));
}

/// `numalens demo ARGS…` without colours, building in `cache` (not the user's cache), with
/// extra environment.
fn demo(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_numalens"))
        .arg("demo")
        .args(args)
        .env("NO_COLOR", "1")
        .env("XDG_CACHE_HOME", cache)
        .envs(env.iter().copied())
        .output()
        .expect("run numalens demo")
}

fn meta(profile: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(profile.join("meta.json")).unwrap()).unwrap()
}

#[test]
fn demo_builds_records_and_analyses_the_default_workload_and_can_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("demo.numalens");
    let html = dir.path().join("demo.html");
    let (p, h) = (profile.to_str().unwrap(), html.to_str().unwrap());
    let manifest = numalens_workloads::find("master-init")
        .unwrap()
        .manifest()
        .unwrap();
    assert!(!manifest.findings.is_empty());
    // The second run replaces the first, and places threads and pages on the machine asked for.
    for what_if in [None, Some("machine-b")] {
        let mut args = vec!["-o", p, "--html", h];
        args.extend(what_if.map(|m| ["--preset", m]).into_iter().flatten());
        let out = demo(dir.path(), &args, &[]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stderr}");
        assert!(stdout.starts_with(&text(&numalens(&["topology"]).stdout)));
        assert!(stderr.contains("with the inst backend"), "{stderr}");
        // The workload's own output is progress (stderr), not a result.
        assert!(stderr.contains("master-init checksum="), "{stderr}");
        assert!(!stdout.contains("checksum="), "{stdout}");
        // The analysis' findings, not the line saying what the workload is built to show.
        let start = stdout.find("\nFindings (").expect("a findings section");
        let end = stdout
            .find(" is built to show")
            .expect("what the workload shows");
        let findings = &stdout[start..end];
        for finding in &manifest.findings {
            assert!(
                findings.contains(&finding.id),
                "{} missing:\n{stdout}",
                finding.id
            );
        }
        assert!(stdout.contains(p) && stdout.contains(h), "{stdout}");
        // Every placement policy side by side, and the fix's predicted effect in the finding.
        assert!(
            stdout.contains("What-if on") && stdout.contains("oracle (limit)"),
            "{stdout}"
        );
        assert!(findings.contains("is predicted to"), "{stdout}");
        if let Some(machine) = what_if {
            assert!(
                stdout.contains(&format!("what-if on {machine}")),
                "{stdout}"
            );
        }
    }
    let meta = meta(&profile);
    assert_eq!(meta["backend"]["name"], "inst");
    assert_eq!(meta["backend"]["settings"]["inst_mode"], "both");
    assert!(meta["tables"]["page_stats"]["rows"].as_u64().unwrap() > 1000);
    // The hooks' sampled accesses, which a share of lost ring records leaves out.
    let inst_samples = meta["backend"]["settings"]["inst_samples"]
        .as_u64()
        .unwrap();
    assert!(inst_samples > 0 && inst_samples < meta["tables"]["samples"]["rows"].as_u64().unwrap());
    assert_eq!(meta["completeness"]["complete"], true);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.len() > 20_000);
    assert!(page.contains("<svg") && page.contains(&manifest.findings[0].id));
}

#[test]
fn demo_lists_its_workloads_and_rejects_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = demo(dir.path(), &["--workload", "list"], &[]);
    assert!(out.status.success());
    let list = text(&out.stdout);
    for w in numalens_workloads::WORKLOADS {
        let line = list.lines().find(|l| l.starts_with(w.name)).unwrap();
        for finding in w.manifest().unwrap().findings {
            assert!(line.contains(&finding.id), "{line}");
        }
    }
    let presets = text(&demo(dir.path(), &["--preset", "list"], &[]).stdout);
    assert!(
        presets.lines().any(|l| l.starts_with("machine-a ")),
        "{presets}"
    );
    let out = demo(dir.path(), &["--workload", "master-start"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("master-start") && err.contains("master-init") && err.contains("list"),
        "{err}"
    );
}

#[test]
fn demo_falls_back_to_page_faults_when_the_compiler_cannot_instrument() {
    let dir = tempfile::tempdir().unwrap();
    // A C compiler without ThreadSanitizer support.
    let cc = dir.path().join("cc-without-tsan");
    std::fs::write(
        &cc,
        "#!/bin/sh\nfor a; do [ \"$a\" = -fsanitize=thread ] && \
         { echo \"cc: error: -fsanitize=thread is not supported\" >&2; exit 1; }; done\n\
         exec gcc \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let profile = dir.path().join("f.numalens");
    let html = dir.path().join("f.html");
    let out = demo(
        dir.path(),
        &[
            "-o",
            profile.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ],
        &[("NUMALENS_CC", cc.to_str().unwrap())],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("-fsanitize=thread is not supported") && err.contains("faults backend"),
        "{err}"
    );
    let meta = meta(&profile);
    let backend = meta["backend"]["name"].as_str().unwrap();
    // `none` where perf is denied: the demo then says so.
    assert!(
        backend == "faults" || (backend == "none" && err.contains("only")),
        "{backend}"
    );
    assert!(meta["tables"]["page_stats"]["rows"].as_u64().unwrap_or(0) == 0);
    assert!(html.exists());
}

#[test]
fn demo_without_a_compiler_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("n.numalens");
    let out = demo(
        dir.path(),
        &["-o", profile.to_str().unwrap()],
        &[("NUMALENS_CC", "/no/such/cc")],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("/no/such/cc")
            && err.contains("apt-get install gcc")
            && err.contains("NUMALENS_CC"),
        "{err}"
    );
    assert!(!profile.exists());
}

#[test]
fn demo_refuses_to_replace_something_else() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("precious");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("data.txt"), "keep me").unwrap();
    let out = demo(dir.path(), &["-o", other.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("choose another --output"));
    assert!(other.join("data.txt").exists());

    let page = dir.path().join("notes.html");
    std::fs::write(&page, "<html>my notes</html>").unwrap();
    let profile = dir.path().join("d.numalens");
    let out = demo(
        dir.path(),
        &[
            "-o",
            profile.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("choose another --html"));
    assert_eq!(
        std::fs::read_to_string(&page).unwrap(),
        "<html>my notes</html>"
    );
    assert!(!profile.exists());
}

#[test]
fn record_returns_the_program_status_and_writes_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.numalens");
    let o = out.to_str().unwrap();
    let run = numalens(&[
        "record",
        "-o",
        o,
        "sh",
        "-c",
        "head -c 3000000 /dev/zero | wc -c; exit 3",
    ]);
    assert_eq!(run.status.code(), Some(3), "{}", text(&run.stderr));
    assert!(
        text(&run.stdout).contains("3000000"),
        "the program's output passes through"
    );
    let err = text(&run.stderr);
    assert!(
        err.contains("profile written to") && err.contains("first touches"),
        "{err}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["completeness"]["exit"]["code"], 3);
    assert!(meta["tables"]["samples"]["rows"].as_u64().unwrap() > 0);

    let again = numalens(&["record", "-o", o, "sh", "-c", "touch ran"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("already exists"));
}

#[test]
fn record_of_a_missing_program_exits_127() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.numalens");
    let run = numalens(&["record", "-o", out.to_str().unwrap(), "/no/such/program"]);
    assert_eq!(run.status.code(), Some(127));
    assert!(
        text(&run.stderr).contains("/no/such/program"),
        "{}",
        text(&run.stderr)
    );
    assert!(!out.exists(), "no half-made profile is left behind");
}

#[test]
fn page_scan_interval_is_checked_and_scans_are_written() {
    let out = numalens(&["record", "--page-scan-interval", "soon", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not a duration like 500ms or 2s"));
    let out = numalens(&["record", "--page-scan-interval", "0.1ms", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("at least 1ms"));

    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("sleep.numalens");
    let out = numalens(&[
        "record",
        "--page-scan-interval",
        "20ms",
        "-o",
        profile.to_str().unwrap(),
        "sleep",
        "0.3",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = numalens_format::Profile::open(&profile)
        .unwrap()
        .read_all::<numalens_format::PageNodes>()
        .unwrap();
    let scans: std::collections::BTreeSet<u64> = rows
        .iter()
        .filter(|r| r.source == "scan")
        .map(|r| r.time_ns)
        .collect();
    assert!(scans.len() >= 5, "{} scans", scans.len());
}
