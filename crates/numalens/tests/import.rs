//! `numalens import` as a user meets it: a real perf recording imported and reported, and
//! files that are not perf recordings refused with what to do.

mod common;

use std::path::Path;
use std::process::Command;

use common::{numalens, text};

/// `perf ARGS… -o DATA -- sh -c "a little work"`, which must succeed.
fn perf_record(args: &[String], data: &Path, bytes: u64) {
    let work = format!("head -c {bytes} /dev/zero | sort >/dev/null");
    let out = Command::new("perf")
        .args(args)
        .arg("-o")
        .arg(data)
        .args(["--", "sh", "-c", &work])
        .output()
        .expect("perf is installed (tests/install-deps)");
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// `numalens import DATA -o PROFILE`.
fn import(data: &Path, profile: &Path) -> std::process::Output {
    numalens(&[
        "import",
        data.to_str().unwrap(),
        "-o",
        profile.to_str().unwrap(),
    ])
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[test]
fn a_perf_recording_is_imported_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    perf_record(
        &strings(&["record", "-q", "-e", "page-faults", "-c", "1", "-d"]),
        &data,
        4_000_000,
    );
    let profile = dir.path().join("sh.numalens");
    let imported = import(&data, &profile);
    let said = text(&imported.stderr);
    assert!(imported.status.success(), "{said}");
    assert!(said.contains("event page-faults:"), "{said}");
    assert!(said.contains("profile written to"), "{said}");
    // The report reads it; page faults alone say what they cannot tell.
    let report = numalens(&["report", profile.to_str().unwrap()]);
    let shown = text(&report.stdout);
    assert!(report.status.success(), "{}", text(&report.stderr));
    assert!(shown.contains("backend     faults"), "{shown}");
    assert!(shown.contains("What this profile cannot tell"), "{shown}");
    // The same output again is refused rather than overwritten.
    let again = import(&data, &profile);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("exists"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn files_that_cannot_be_imported_are_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let missing = numalens(&["import", &out("none.data"), "-o", &out("a.numalens")]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("cannot open"),
        "{}",
        text(&missing.stderr)
    );

    std::fs::write(dir.path().join("text.data"), "not a recording\n").unwrap();
    let text_file = numalens(&["import", &out("text.data"), "-o", &out("b.numalens")]);
    assert_eq!(text_file.status.code(), Some(2));
    assert!(
        text(&text_file.stderr).contains("is not a perf.data file"),
        "{}",
        text(&text_file.stderr)
    );

    // A recording without data addresses (cpu-clock without -d): nothing to place.
    let data = dir.path().join("clock.data");
    perf_record(
        &strings(&["record", "-q", "-e", "cpu-clock"]),
        &data,
        1_000_000,
    );
    let no_address = numalens(&["import", data.to_str().unwrap(), "-o", &out("c.numalens")]);
    assert_eq!(no_address.status.code(), Some(2));
    let said = text(&no_address.stderr);
    assert!(
        said.contains("no sample in the file has a data address"),
        "{said}"
    );
    assert!(said.contains("cpu-clock"), "{said}");
    assert!(!dir.path().join("c.numalens").exists());
}

/// A synthetic PEBS-layout file (not a hardware recording): what the report says of its data
/// sources and latencies is what the test wrote, counted independently here.
#[test]
fn the_report_shows_where_accesses_were_served_and_the_measured_latency() {
    use numalens_import::write::*;
    const HEAP: u64 = 0x7f00_0000_0000;
    const BLOCK: u64 = 128 << 20;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("mem.data");
    let mut w = PerfDataWriter::new();
    let loads = w.event(mem_loads_event(100, vec![1]));
    // Two nodes: CPUs 0-1 and blocks 0-7 on node 0, CPUs 2-3 and blocks 8-15 on node 1.
    two_node_sections(&mut w, BLOCK);
    w.comm(10, 10, "mem", 0);
    w.mmap2(10, HEAP, 64 << 20, 0, 3, 0x22, "//anon", 0);
    // Local RAM from node 0's CPUs at 200 cycles, remote RAM (node 1's memory) at 400.
    let (local, remote) = (0x6810_1042u64, 0x6810_2042u64);
    let mut expected = [(0u64, 0u64); 2];
    for i in 0..1000u64 {
        let far = i % 4 == 0;
        expected[far as usize].0 += 1;
        w.sample(
            loads,
            &SampleFields {
                ip: 0x1000,
                pid: 10,
                tid: 10,
                time: 1_000 + i,
                id: 1,
                addr: HEAP + i * 64,
                cpu: (i % 2) as u32,
                period: 100,
                weight: weight_struct(if far { 400 } else { 200 }, 0, 0),
                data_src: if far { remote } else { local },
                phys_addr: if far { 9 * BLOCK } else { BLOCK } + i * 64,
                ..SampleFields::default()
            },
        );
    }
    w.write_to(&data).unwrap();
    let profile = dir.path().join("mem.numalens");
    let imported = import(&data, &profile);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    let report = numalens(&["report", "--json", profile.to_str().unwrap()]);
    let model: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let d = &model["data_sources"];
    assert_eq!(d["totals"]["local_dram"], expected[0].0 * 100);
    assert_eq!(d["totals"]["remote_dram"], expected[1].0 * 100);
    assert!(
        d["objects"][0]["name"]
            .as_str()
            .unwrap()
            .contains("0x7f0000000000")
    );
    let pairs = d["node_pairs"].as_array().unwrap();
    let pair = |m: u64| {
        pairs
            .iter()
            .find(|p| p["cpu_node"] == 0 && p["memory_node"] == m)
            .unwrap()
    };
    assert_eq!(pair(0)["mean_cycles"], 200);
    assert_eq!(pair(1)["mean_cycles"], 400);
    assert_eq!(pair(1)["samples"], expected[1].0);
    let shown = text(&numalens(&["report", profile.to_str().unwrap()]).stdout);
    assert!(shown.contains("Where accesses were served"), "{shown}");
    assert!(shown.contains("250 cyc"), "{shown}");
    // The HTML report has the section, and its table of contents links to it.
    let html = dir.path().join("mem.html");
    let rendered = numalens(&[
        "report",
        profile.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(rendered.status.success(), "{}", text(&rendered.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<section id=\"data-sources\">"));
    assert!(page.contains("href=\"#data-sources\""));
    assert!(
        page.contains("<td>400 cyc</td>"),
        "the remote pair's latency"
    );
}

/// The `perf record` line `--backend pmu` suggests runs, here with a software event in place of
/// the precise one this machine lacks, and what it records imports.
#[test]
fn the_suggested_perf_record_line_runs_and_imports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("suggested.data");
    let mut args = numalens_record::pmu::perf_record_args("page-faults");
    args.extend(strings(&["-q", "-c", "1"]));
    perf_record(&args, &data, 2_000_000);
    let profile = dir.path().join("suggested.numalens");
    let imported = import(&data, &profile);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    // Every fault knows its CPU, so a first touch knows its node.
    let p = numalens_format::Profile::open(&profile).unwrap();
    let samples = p.read_all::<numalens_format::Sample>().unwrap();
    assert!(!samples.is_empty() && samples.iter().all(|s| s.cpu.is_some()));
    assert!(
        p.meta().completeness.complete,
        "{:?}",
        p.meta().completeness
    );
}
