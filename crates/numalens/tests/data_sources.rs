//! HITM, measured against modelled latency, and the findings that rest on the PMU's
//! measurement, from a synthetic perf.data file in the kernel's PEBS layout (written by the
//! test, not a hardware recording) imported and reported as a user would.

mod common;

use std::path::Path;

use common::{numalens, text};
use numalens_import::write::*;
use serde_json::Value;

const PID: u32 = 10;
const BLOCK: u64 = 128 << 20;
/// One anonymous mapping (an object) per pattern.
const REMOTE: u64 = 0x7f00_0000_0000;
const FALSE_SHARED: u64 = 0x7f10_0000_0000;
const FEW: u64 = 0x7f20_0000_0000;
const TRUE_SHARED: u64 = 0x7f30_0000_0000;
const PERIOD: u64 = 100;

// perf_mem_data_src values (op | mem_lvl << 5 | mem_snoop << 19, dTLB bits above).
const LOCAL_RAM: u64 = 0x6810_1042;
const REMOTE_RAM: u64 = 0x6810_2042;
/// Load, L3 hit, snoop HITM: a local HITM.
const L3_HITM: u64 = 0x6880_0842;
/// Load, remote cache (1 hop) hit, snoop HITM: a remote HITM.
const REMOTE_CACHE_HITM: u64 = 0x6880_8042;
/// Store, L1 hit, no snoop result.
const STORE_L1: u64 = 0x6800_0144;

struct Written {
    remote_loads: u64,
    local_hitm: u64,
    remote_hitm: u64,
}

fn write_file(path: &Path) -> Written {
    let mut w = PerfDataWriter::new();
    let loads = w.event(mem_loads_event(PERIOD, vec![1]));
    two_node_sections(&mut w, BLOCK);
    for tid in [PID, PID + 1, PID + 2] {
        w.comm(PID, tid, "shared", 0);
    }
    for start in [REMOTE, FALSE_SHARED, FEW, TRUE_SHARED] {
        w.mmap2(PID, start, 64 << 20, 0, 3, 0x22, "//anon", 0);
    }
    let mut out = Written {
        remote_loads: 0,
        local_hitm: 0,
        remote_hitm: 0,
    };
    let mut sample =
        |tid: u32, time: u64, addr: u64, cpu: u32, data_src: u64, lat: u32, node: u64| {
            w.sample(
                loads,
                &SampleFields {
                    ip: 0x1000,
                    pid: PID,
                    tid,
                    time,
                    id: 1,
                    addr,
                    cpu,
                    period: PERIOD,
                    weight: weight_struct(lat, 0, 0),
                    data_src,
                    phys_addr: (1 + node * 8) * BLOCK + (addr & 0xfff_ffff),
                    ..SampleFields::default()
                },
            );
        };
    for i in 0..400u64 {
        let t = 1_000_000 + i * 10_000;
        // Thread 10 on node 0's CPU 0: 3 in 5 of its loads from node 1's memory.
        let far = i % 5 < 3;
        out.remote_loads += u64::from(far);
        let (src, lat) = if far {
            (REMOTE_RAM, 400)
        } else {
            (LOCAL_RAM, 200)
        };
        sample(PID, t, REMOTE + i * 64, 0, src, lat, u64::from(far));
        if i < 10 {
            sample(PID, t + 1, FEW + i * 64, 0, REMOTE_RAM, 400, 1);
            out.remote_loads += 1;
        }
        if i < 100 {
            // Thread 11 writes word 0 of a line, thread 12 reads word 1 of it 500 ns later and
            // finds it modified in thread 11's cache (same node: L3 HITM).
            let line = FALSE_SHARED + i * 64;
            sample(PID + 1, t + 100, line, 1, STORE_L1, 0, 0);
            sample(PID + 2, t + 600, line + 8, 1, L3_HITM, 90, 0);
            out.local_hitm += 1;
            // The same on one word, across nodes: thread 12 on node 1 reads what thread 11 wrote.
            let word = TRUE_SHARED + i * 64;
            sample(PID + 1, t + 1_000, word, 1, STORE_L1, 0, 0);
            sample(PID + 2, t + 1_500, word, 2, REMOTE_CACHE_HITM, 300, 0);
            out.remote_hitm += 1;
        }
    }
    w.write_to(path).unwrap();
    out
}

fn imported(dir: &Path) -> (std::path::PathBuf, Written) {
    let data = dir.join("c2c.data");
    let written = write_file(&data);
    let profile = dir.join("c2c.numalens");
    let out = numalens(&[
        "import",
        data.to_str().unwrap(),
        "-o",
        profile.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (profile, written)
}

fn findings_of(model: &Value, start: u64) -> Vec<&Value> {
    let name = format!("{start:#x}");
    model["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["object"]["name"].as_str().unwrap().contains(&name))
        .collect()
}

fn ids(findings: &[&Value]) -> Vec<String> {
    findings
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn hitm_and_measured_findings_come_from_the_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (profile, written) = imported(dir.path());
    let report = numalens(&["report", "--json", profile.to_str().unwrap()]);
    assert!(report.status.success(), "{}", text(&report.stderr));
    let model: Value = serde_json::from_slice(&report.stdout).unwrap();
    let d = &model["data_sources"];
    // HITM, local and remote, counted as written (weighted by the period).
    assert_eq!(d["totals"]["hitm_local"], written.local_hitm * PERIOD);
    assert_eq!(d["totals"]["hitm_remote"], written.remote_hitm * PERIOD);
    assert_eq!(d["totals"]["remote_dram"], written.remote_loads * PERIOD);
    let thread = |tid: u32| {
        d["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == tid)
            .unwrap()
    };
    assert_eq!(
        thread(PID + 2)["counts"]["hitm_remote"],
        written.remote_hitm * PERIOD
    );
    assert_eq!(thread(PID + 1)["counts"]["hitm_local"], 0);

    // The object with 60 % of its memory accesses remote: a finding resting on the measurement.
    let remote = findings_of(&model, REMOTE);
    let measured = remote
        .iter()
        .find(|f| f["id"] == "measured-remote")
        .expect("the measured remote share fires");
    assert!(measured["rests_on"].as_str().unwrap().contains("measured"));
    let evidence = |f: &Value, key: &str| {
        f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["key"] == key)
            .map(|e| e["value"].as_f64().unwrap())
    };
    assert!((evidence(measured, "measured_remote_share").unwrap() - 0.6).abs() < 1e-9);
    assert_eq!(evidence(measured, "measured_remote_cycles"), Some(400.0));
    assert_eq!(
        evidence(measured, "measured_local_dram_cycles"),
        Some(200.0)
    );
    // Ten samples, all remote: below the documented minimum, so no finding.
    assert!(
        !ids(&findings_of(&model, FEW)).contains(&"measured-remote".to_string()),
        "{:?}",
        ids(&findings_of(&model, FEW))
    );
    // HITM after another thread's store to another word of the line, and to the same word.
    let false_shared = ids(&findings_of(&model, FALSE_SHARED));
    assert!(
        false_shared.contains(&"hitm-false-sharing".into()),
        "{false_shared:?}"
    );
    assert!(!false_shared.contains(&"hitm-true-sharing".into()));
    let true_shared = ids(&findings_of(&model, TRUE_SHARED));
    assert!(
        true_shared.contains(&"hitm-true-sharing".into()),
        "{true_shared:?}"
    );
    assert!(!true_shared.contains(&"hitm-false-sharing".into()));
    // Every finding says what it rests on; only those resting on the measurement say so.
    for f in model["findings"].as_array().unwrap() {
        let id = f["id"].as_str().unwrap();
        let kind = f["basis"]["data"][0]["kind"].as_str().unwrap();
        let expected = match id {
            "measured-remote" => "data-source-samples",
            "hitm-false-sharing" | "hitm-true-sharing" => "hitm-samples",
            _ => "load-store-samples",
        };
        assert_eq!(kind, expected, "{f}");
        assert!(!f["basis"]["tests"].as_array().unwrap().is_empty(), "{f}");
        let words = f["rests_on"].as_str().unwrap();
        assert_eq!(
            words.contains("measured") || words.contains("HITM"),
            expected != "load-store-samples",
            "{f}"
        );
    }
    // The measured findings are listed with their object's site group, as the others are.
    let groups = model["groups"].as_array().unwrap();
    let listed = [
        (REMOTE, "place-near-users"),
        (FALSE_SHARED, "pad-per-thread-data"),
        (TRUE_SHARED, "per-thread-copies"),
    ];
    for (start, advice) in listed {
        let f = findings_of(&model, start)[0];
        let group = groups
            .iter()
            .find(|g| {
                g["members"]
                    .as_array()
                    .unwrap()
                    .contains(&f["object"]["id"])
            })
            .unwrap_or_else(|| panic!("{start:#x} has a group"));
        let advices = group["advice"].as_array().unwrap();
        assert!(advices.iter().any(|a| a == advice), "{group}");
    }

    // Measured latency beside the model's, in their own units: an import has no clock.
    let pairs = d["node_pairs"].as_array().unwrap();
    let pair = |c: u64, m: u64| {
        pairs
            .iter()
            .find(|p| p["cpu_node"] == c && p["memory_node"] == m)
            .unwrap()
    };
    assert_eq!(pair(0, 1)["mean_cycles"], 400);
    let (local, far) = (
        pair(0, 0)["modelled_ns"].as_f64().unwrap(),
        pair(0, 1)["modelled_ns"].as_f64().unwrap(),
    );
    assert!(far > local && local > 0.0, "{local} {far}");
    assert!(pair(0, 1)["measured_ns"].is_null());
    let units = d["model"]["units"].as_str().unwrap();
    assert!(units.starts_with("no recorded CPU clock"), "{units}");

    // Text and HTML show the HITM columns, the model's latency and what findings rest on.
    let shown = text(&numalens(&["report", profile.to_str().unwrap()]).stdout);
    assert!(shown.contains("HITM remote"), "{shown}");
    assert!(shown.contains("rests on"), "{shown}");
    // A row of the objects table, not the finding's fix line: the object and its advice.
    let row = |text: &str, start: u64, advice: &str| {
        let name = format!("{start:#x}");
        text.lines()
            .any(|l| l.contains(&name) && l.contains(advice))
    };
    for (start, advice) in listed {
        assert!(row(&shown, start, advice), "{start:#x} {advice}: {shown}");
    }
    assert!(shown.contains(&format!("{far:.0} ns")), "{shown}");
    let html = dir.path().join("c2c.html");
    let rendered = numalens(&[
        "report",
        profile.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(rendered.status.success(), "{}", text(&rendered.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<th>HITM remote</th>"));
    assert!(
        page.contains("<td>400 cyc</td>"),
        "the measured remote pair"
    );
    assert!(
        page.contains(&format!("<td>{far:.0} ns</td>")),
        "the modelled pair"
    );
    assert!(page.contains("rests on"));
    assert!(page.contains("of them remote as the PMU measured"));
    for (start, advice) in listed {
        assert!(row(&page, start, advice), "{start:#x} {advice}");
    }
}
