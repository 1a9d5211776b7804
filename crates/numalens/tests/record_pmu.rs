//! `numalens record --backend pmu`.
//!
//! This machine has no precise memory event, so the live path is run with
//! `NUMALENS_PMU_STAND_IN=page-faults`: the software page-fault event in place of the hardware
//! one, with the same sample fields, rings, inheritance, decoding, spill and assembly. These
//! tests are a stand-in for the hardware event, not a validation of PEBS or IBS: what the
//! hardware alone says (data source, latency) is not checked by them. The test that drives the
//! real event runs only where sysfs lists one, and says so when it skips.

mod recover_common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Output;

use numalens_format::{DataSource, Profile, Sample, SampleKind};
use recover_common::*;

const STAND_IN: (&str, &str) = ("NUMALENS_PMU_STAND_IN", "page-faults");
const PAGES_PER_STRIPE: u64 = 2000;

fn build_stripes(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pmu_progs/stripes.c");
    let exe = dir.join("stripes");
    let out = std::process::Command::new("gcc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .expect("run gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn record_stripes(dir: &Path, extra: &[&str], stand_in: bool) -> (Output, PathBuf) {
    let exe = build_stripes(dir);
    let profile = dir.join("stripes.numalens");
    let mut cmd = numalens();
    cmd.args(["record", "-o"])
        .arg(&profile)
        .args(extra)
        .arg(&exe);
    if stand_in {
        cmd.env(STAND_IN.0, STAND_IN.1);
    }
    (cmd.output().expect("run numalens record"), profile)
}

/// The program's own account: each thread's id and the address range it wrote (`stripe`), and
/// the forked child's pid and the range it wrote again (`child`).
fn told(stdout: &[u8], what: &str) -> Vec<(u32, u64, u64)> {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix(what)?.trim_start().split(' ');
            Some((
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
            ))
        })
        .collect()
}

fn stripes(stdout: &[u8]) -> Vec<(u32, u64, u64)> {
    let found = told(stdout, "stripe ");
    assert_eq!(found.len(), 4, "{}", String::from_utf8_lossy(stdout));
    found
}

/// (tid, page) of the rows of `kind` inside the stripes, the child's left out.
fn pages_of(
    samples: &[Sample],
    kind: SampleKind,
    stripes: &[(u32, u64, u64)],
    child: u32,
) -> BTreeSet<(u32, u64)> {
    samples
        .iter()
        .filter(|s| s.kind == kind && s.pid != child)
        .filter(|s| {
            stripes
                .iter()
                .any(|&(_, lo, hi)| (lo..hi).contains(&s.address))
        })
        .map(|s| (s.tid, s.address / 4096))
        .collect()
}

/// The NUMA nodes of this machine, as sysfs lists them.
fn host_nodes() -> BTreeSet<u32> {
    std::fs::read_dir("/sys/devices/system/node")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .collect()
}

#[test]
fn stand_in_samples_are_the_pages_each_thread_says_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (out, profile) = record_stripes(dir.path(), &["--backend", "pmu"], true);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("stand-in") && said.contains("--backend pmu"),
        "{said}"
    );
    let stripes = stripes(&out.stdout);
    let (child, child_lo, child_hi) = told(&out.stdout, "child ")[0];
    let p = Profile::open(&profile).unwrap();
    assert_eq!(p.meta().backend.name, "pmu");
    let settings = &p.meta().backend.settings;
    assert!(
        settings["event"].as_str().unwrap().contains("stand-in"),
        "{settings:?}"
    );
    assert!(settings.contains_key("latency_field"));
    let samples = p.read_all::<Sample>().unwrap();

    // Every page of a stripe is sampled once as a load (period 1, one fault per page), by the
    // thread the program says wrote it, and nothing else of the stripes is.
    let loads = pages_of(&samples, SampleKind::Load, &stripes, child);
    for &(tid, lo, hi) in &stripes {
        let expected: BTreeSet<(u32, u64)> = (lo / 4096..hi / 4096).map(|pg| (tid, pg)).collect();
        let got: BTreeSet<(u32, u64)> = loads
            .iter()
            .filter(|&&(_, pg)| (lo / 4096..hi / 4096).contains(&pg))
            .copied()
            .collect();
        assert_eq!(got, expected, "stripe of thread {tid}");
    }
    let in_stripes = |s: &&Sample| {
        stripes
            .iter()
            .any(|&(_, lo, hi)| (lo..hi).contains(&s.address))
    };
    let parent_loads: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.kind == SampleKind::Load && s.pid != child)
        .filter(in_stripes)
        .collect();
    assert_eq!(
        parent_loads.len() as u64,
        4 * PAGES_PER_STRIPE,
        "one sample per page"
    );

    // The page-fault ring of the same run, a separate event, saw the same first touches.
    assert_eq!(
        pages_of(&samples, SampleKind::FirstTouch, &stripes, child),
        loads
    );
    // A software event has no data source: the kernel says "not available" and so do the rows.
    assert!(
        samples
            .iter()
            .filter(|s| s.kind == SampleKind::Load)
            .all(|s| s.data_source == DataSource::Unknown
                && s.latency.is_none()
                && s.cpu.is_some())
    );
    assert!(
        p.meta().completeness.complete,
        "{:?}",
        p.meta().completeness
    );

    // The child, inherited, writes the first stripe again: a load per page, of its pid. Its pages
    // are present (copy-on-write), so the kernel gives their physical address and the memory
    // blocks their node; a first touch has no physical page yet, so its node is unknown.
    let child_loads: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.kind == SampleKind::Load && s.pid == child)
        .filter(|s| (child_lo..child_hi).contains(&s.address))
        .collect();
    assert_eq!(child_loads.len() as u64, PAGES_PER_STRIPE);
    if settings["physical_addresses"] == serde_json::json!(true) {
        let nodes = host_nodes();
        assert!(
            child_loads
                .iter()
                .all(|s| s.node.is_some_and(|n| nodes.contains(&n))),
            "nodes {nodes:?}"
        );
    } else {
        assert!(child_loads.iter().all(|s| s.node.is_none()));
    }
    assert!(parent_loads.iter().all(|s| s.node.is_none()));
    // The loads are attributed to the program's mapping like the faults.
    assert!(parent_loads.iter().all(|s| s.object_id.is_some()));

    let report = numalens().arg("report").arg(&profile).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
}

/// Beside load and store samples, the page faults say who placed each page and nothing more: a
/// first-touched page that a load sample also hit is one access, not two. With the stand-in
/// every page of a stripe has both a first touch and a load (the same fault, from two events),
/// so a report that counted faults as accesses would show each stripe's accesses doubled.
#[test]
fn first_touches_are_not_accesses_beside_load_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (out, profile) = record_stripes(dir.path(), &["--backend", "pmu"], true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stripes = stripes(&out.stdout);
    let report = numalens()
        .args(["report", "--json"])
        .arg(&profile)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let (child, ..) = told(&out.stdout, "child ")[0];
    let lo = stripes.iter().map(|s| s.1).min().unwrap();
    let hi = stripes.iter().map(|s| s.2).max().unwrap();
    let mapping = m["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| {
            let start = o["start"].as_u64().unwrap();
            let end = start + o["size"].as_u64().unwrap();
            start <= lo && hi <= end && o["pid"].as_u64() != Some(u64::from(child))
        })
        .unwrap_or_else(|| panic!("no object holds the stripes: {}", m["objects"]));
    let pages = 4 * PAGES_PER_STRIPE;
    assert_eq!(mapping["samples"]["first_touch"].as_u64(), Some(pages));
    let access = &mapping["access"];
    assert_eq!(
        access["accesses"].as_u64(),
        Some(pages),
        "{}",
        access["users"]
    );
    assert_eq!(access["reads"].as_u64(), Some(pages));
    assert_eq!(access["unknown_direction"].as_u64(), Some(0));
    for user in access["users"].as_array().unwrap() {
        assert_eq!(user["accesses"].as_u64(), Some(PAGES_PER_STRIPE), "{user}");
    }
    // The first touches still say who placed each page.
    let touchers: Vec<u64> = mapping["first_touchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["count"].as_u64().unwrap())
        .collect();
    assert_eq!(touchers, vec![PAGES_PER_STRIPE; 4]);
    assert_eq!(
        access["first_toucher"]["count"].as_u64(),
        Some(PAGES_PER_STRIPE)
    );
    // The whole run's accesses, and the placement's (the simulator's on this one-node machine),
    // are the load samples.
    let loads = m["totals"]["samples"]["load"].as_u64().unwrap();
    assert!(m["totals"]["samples"]["first_touch"].as_u64().unwrap() >= pages);
    assert_eq!(m["analysis"]["accesses"].as_u64(), Some(loads));
    assert_eq!(m["placement"]["accesses"].as_u64(), Some(loads));
}

/// Without privileges (perf_event_paranoid 2 here), the kernel refuses kernel-mode samples and
/// physical addresses: the open steps back and the profile says what it kept. Run as the user
/// `nobody` when the tests run as root; elsewhere the test says it is skipped.
#[test]
fn an_unprivileged_recording_steps_back_and_says_so() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok());
    if !root || paranoid != Some(2) || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!(
            "skipped: needs root (to run as nobody), setpriv and perf_event_paranoid 2 \
             (root: {root}, paranoid: {paranoid:?})"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let exe = build_stripes(dir.path());
    let profile = dir.path().join("nobody.numalens");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "pmu", "-o"])
        .arg(&profile)
        .arg(&exe)
        .env(STAND_IN.0, STAND_IN.1)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // Each refusal is named with what allows it: the setting, its value here, the capabilities.
    for what in ["physical addresses", "kernel-mode samples"] {
        let note = said
            .lines()
            .find(|l| l.starts_with("numalens: note: the kernel refused") && l.contains(what))
            .unwrap_or_else(|| panic!("no note on {what}: {said}"));
        assert!(
            note.contains("kernel.perf_event_paranoid 1 or lower — it is 2 here —")
                && note.contains("CAP_PERFMON")
                && note.contains("CAP_SYS_ADMIN"),
            "{note}"
        );
    }
    let p = Profile::open(&profile).unwrap();
    let settings = &p.meta().backend.settings;
    assert_eq!(settings["kernel_mode_samples"], serde_json::json!(false));
    assert_eq!(settings["physical_addresses"], serde_json::json!(false));
    assert_eq!(
        settings["physical_addresses_denied"],
        serde_json::json!(true)
    );
    let stripes = stripes(&out.stdout);
    let (child, ..) = told(&out.stdout, "child ")[0];
    let samples = p.read_all::<Sample>().unwrap();
    let loads = pages_of(&samples, SampleKind::Load, &stripes, child);
    assert_eq!(loads.len() as u64, 4 * PAGES_PER_STRIPE);
    assert!(
        samples
            .iter()
            .all(|s| s.node.is_none() || s.kind == SampleKind::FirstTouch)
    );
}

#[test]
fn stand_in_period_is_kept_and_weights_the_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (out, profile) = record_stripes(
        dir.path(),
        &["--backend", "pmu", "--sample-period", "10"],
        true,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stripes = stripes(&out.stdout);
    let p = Profile::open(&profile).unwrap();
    assert_eq!(
        p.meta().backend.settings["sample_period"],
        serde_json::json!([10])
    );
    let samples = p.read_all::<Sample>().unwrap();
    let (child, ..) = told(&out.stdout, "child ")[0];
    let loads = pages_of(&samples, SampleKind::Load, &stripes, child).len() as u64;
    // One fault in ten is sampled, the program's other faults included: about a tenth of the
    // stripes' pages, each standing for ten faults.
    let all = 4 * PAGES_PER_STRIPE;
    assert!(
        (all / 10 - all / 50..=all / 10 + all / 50).contains(&loads),
        "{loads}"
    );
    assert!(
        samples
            .iter()
            .filter(|s| s.kind == SampleKind::Load)
            .all(|s| s.weight == 10)
    );
}

#[test]
fn a_killed_stand_in_recording_is_recovered_with_its_spilled_samples() {
    let dir = tempfile::tempdir().unwrap();
    let worker = build_worker(dir.path(), false);
    let native = native_output(&worker, dir.path());
    let profile = dir.path().join("killed.numalens");
    let out = dir.path().join("recorded.out");
    let mut cmd = record_command(&worker, "pmu", &profile, &out);
    cmd.env(STAND_IN.0, STAND_IN.1);
    // Killed once the spill holds some of the run (the loop writes it every 100 ms of its own
    // turns, which a loaded machine delays). The two rings are drained in turns of their own:
    // at 64 KiB a loaded machine's spill once held the stand-in's loads and none of the
    // page-fault ring's first touches yet; 256 KiB is several writes of both.
    killed_at(
        cmd,
        &profile,
        &out,
        &native,
        KillAt::SpillAtLeast(256 * 1024),
    );
    // The program has written its output; its exit may still be under way.
    let waiting = std::time::Instant::now();
    let (status, stderr) = loop {
        let (status, _, stderr) = run(&["recover".as_ref(), profile.as_os_str()]);
        if status.success()
            || !stderr.contains("is still running")
            || waiting.elapsed() > std::time::Duration::from_secs(10)
        {
            break (status, stderr);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{stderr}");
    let p = Profile::open(&profile).unwrap();
    assert!(!p.meta().completeness.complete);
    assert_eq!(p.meta().backend.name, "pmu");
    let samples = p.read_all::<Sample>().unwrap();
    let by_kind = samples.iter().fold(HashMap::new(), |mut m, s| {
        *m.entry(s.kind).or_insert(0u64) += 1;
        m
    });
    // The worker's two threads write a fresh 4 MiB mapping every round: the spill holds their
    // loads, and first touches and faults from the other ring; none would mean it lost them.
    let loads = by_kind.get(&SampleKind::Load).copied().unwrap_or(0);
    assert!(loads > 100, "{by_kind:?}");
    let threads = |kind| -> BTreeSet<u32> {
        samples
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.tid)
            .collect()
    };
    assert_eq!(threads(SampleKind::Load).len(), 2, "both workers");
    assert_eq!(threads(SampleKind::Load), threads(SampleKind::FirstTouch));
}

/// Where sysfs lists a precise memory event, the real one is recorded; elsewhere the test says
/// why it does nothing.
#[test]
fn the_hardware_event_is_recorded_where_the_machine_has_one() {
    let devices = Path::new("/sys/bus/event_source/devices");
    let intel = ["cpu", "cpu_core", "cpu_atom"]
        .iter()
        .any(|p| devices.join(p).join("events/mem-loads").exists());
    let amd = devices.join("ibs_op").exists();
    let spe = std::fs::read_dir(devices)
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("arm_spe"))
        })
        .unwrap_or(false);
    if !(intel || amd || spe) {
        eprintln!(
            "skipped: no precise memory event in {} (no mem-loads, ibs_op or arm_spe): the \
             hardware path is not run on this machine; the stand-in tests cover the rest",
            devices.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, profile) = record_stripes(dir.path(), &["--backend", "pmu"], false);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let samples = Profile::open(&profile)
        .unwrap()
        .read_all::<Sample>()
        .unwrap();
    let memory: Vec<&Sample> = samples
        .iter()
        .filter(|s| matches!(s.kind, SampleKind::Load | SampleKind::Store))
        .collect();
    assert!(!memory.is_empty(), "{said}");
    assert!(
        memory.iter().any(|s| s.data_source != DataSource::Unknown),
        "{said}"
    );
}

#[test]
fn without_a_precise_event_pmu_says_what_is_missing() {
    let run = numalens()
        .args(["record", "--backend", "pmu", "--", "true"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stderr);
    match numalens_record::pmu_live::choose_hardware(None) {
        Err(_) => {
            assert_eq!(run.status.code(), Some(2), "{said}");
            assert!(said.contains("--backend faults"), "{said}");
        }
        Ok(events) => assert!(said.contains(&events[0].name), "{said}"),
    }
    // auto records here all the same, with what the machine has.
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("auto.numalens");
    let auto = numalens()
        .args(["record", "-o"])
        .arg(&profile)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        auto.status.success(),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    let backend = Profile::open(&profile).unwrap().meta().backend.name.clone();
    let expected = if numalens_record::pmu_live::choose_hardware(None).is_ok() {
        "pmu"
    } else {
        "faults"
    };
    assert_eq!(backend, expected);
}

/// The stand-in variable takes one value: any other is an error that names it, under `pmu` and
/// `auto` alike, before anything runs.
#[test]
fn an_unknown_stand_in_is_refused_naming_the_value_it_takes() {
    for backend in ["pmu", "auto"] {
        let dir = tempfile::tempdir().unwrap();
        let run = numalens()
            .args(["record", "--backend", backend, "-o"])
            .arg(dir.path().join("p.numalens"))
            .args(["--", "true"])
            .env(STAND_IN.0, "mem-loads")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{backend}: {said}");
        assert!(
            said.contains("NUMALENS_PMU_STAND_IN=mem-loads") && said.contains("`page-faults`"),
            "{backend}: {said}"
        );
        assert!(!dir.path().join("p.numalens").exists());
    }
}

/// `--backend auto` records with what the machine has: the test stand-in is left out, and it
/// says so.
#[test]
fn auto_leaves_the_stand_in_out_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("auto.numalens");
    let run = numalens()
        .args(["record", "-o"])
        .arg(&profile)
        .args(["--", "true"])
        .env(STAND_IN.0, STAND_IN.1)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{said}");
    assert!(said.contains("test stand-in"), "{said}");
    let meta = Profile::open(&profile).unwrap().meta().clone();
    let hardware = numalens_record::pmu_live::choose_hardware(None).is_ok();
    assert_eq!(meta.backend.name, if hardware { "pmu" } else { "faults" });
    let event = meta.backend.settings.get("event").and_then(|e| e.as_str());
    assert!(!event.unwrap_or("").contains("stand-in"), "{event:?}");
}
