//! `numalens report --html` as a user runs it: a ground-truth workload built with `numalens cc`
//! and recorded with the exact backend, its report written as HTML and opened in headless
//! Chromium. The page must load with no console error, no uncaught exception and no network
//! fetch, hold every section and its charts, and sort its tables; a screenshot is kept.
//!
//! Chromium is installed with apt-get when it is missing (CI machines start with toolchains
//! only); the test fails, naming what to install, when that is not possible.

mod common;
#[path = "../../numalens-analyze/examples/fixture_profiles.rs"]
#[allow(dead_code)]
mod fixture_profiles;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{numalens, text};
use serde_json::Value;

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Builds master-init (thread 0 initialises the grid each thread then updates in its own block)
/// with the exact instrumentation and records it.
fn record_master_init(dir: &Path) -> PathBuf {
    let workload = numalens_workloads::find("master-init").unwrap();
    let cc: Vec<OsString> = vec![env!("CARGO_BIN_EXE_numalens").into(), "cc".into()];
    let program = numalens_workloads::build(workload, &cc, &dir.join("build")).unwrap();
    let profile = dir.join("master-init.numalens");
    let out = numalens(&[
        "record",
        "--backend",
        "inst",
        "-o",
        arg(&profile),
        arg(&program),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    profile
}

/// The Chromium binary, installed with apt-get when missing.
fn chromium() -> PathBuf {
    let find = || {
        ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .find_map(|name| which(name))
    };
    if let Some(found) = find() {
        return found;
    }
    let installed = Command::new("sh")
        .args([
            "-c",
            "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium",
        ])
        .status()
        .is_ok_and(|s| s.success());
    find().unwrap_or_else(|| {
        panic!(
            "the HTML report test needs Chromium: install the `chromium` package \
             (`make browser-deps`); apt-get install {}",
            if installed {
                "gave no chromium binary"
            } else {
                "failed"
            }
        )
    })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
}

fn headless(browser: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
    ]);
    c
}

/// Watches the page from before its own script runs: errors, failed or blocked loads, console
/// errors; then, once loaded, what the page holds and whether sorting works. The verdict is
/// written into the DOM, which `--dump-dom` prints.
const PROBE: &str = r##"<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<script>
(function () {
  var problems = [];
  window.addEventListener("error", function (e) {
    problems.push("error: " + (e.message || (e.target && (e.target.src || e.target.href)) || "resource"));
  }, true);
  window.addEventListener("unhandledrejection", function (e) { problems.push("rejection: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function (e) { problems.push("blocked: " + e.blockedURI); });
  var consoleError = console.error;
  console.error = function () { problems.push("console.error: " + Array.prototype.join.call(arguments, " ")); consoleError.apply(console, arguments); };
  window.addEventListener("load", function () {
    var r = { problems: problems };
    r.sections = Array.prototype.map.call(document.querySelectorAll("main > section"), function (s) { return s.id; });
    r.svgs = document.querySelectorAll("svg").length;
    r.figures = Array.prototype.map.call(document.querySelectorAll("figure.chart"), function (f) {
      return { title: f.querySelector("figcaption b").textContent, svg: !!f.querySelector("svg"),
               rects: f.querySelectorAll("svg rect").length, guide: !!f.querySelector(".guide") };
    });
    r.findings = Array.prototype.map.call(document.querySelectorAll(".finding .pattern"), function (p) { return p.textContent; });
    r.restsOn = Array.prototype.map.call(document.querySelectorAll(".finding"), function (f) {
      var row = Array.prototype.find.call(f.querySelectorAll("table.facts tr"), function (tr) {
        return tr.cells[0].textContent === "rests on";
      });
      var box = row ? row.cells[1].getBoundingClientRect() : null;
      return row ? { text: row.cells[1].innerText, width: box.width, height: box.height } : null;
    });
    r.groups = Array.prototype.map.call(document.querySelectorAll(".finding-group"), function (g) {
      var members = g.querySelectorAll(".members > .finding");
      return { title: g.querySelector("h3").textContent, members: members.length,
               shown: Array.prototype.every.call(members, function (m) { return m.getBoundingClientRect().height > 0; }),
               first: members.length ? members[0].querySelector("h3").textContent : "" };
    });
    r.resources = performance.getEntriesByType("resource").length;
    var table = document.querySelector("#objects table.sortable");
    var head = Array.prototype.find.call(table.tHead.rows[0].cells, function (th) { return th.textContent === "size"; });
    var column = Array.prototype.indexOf.call(table.tHead.rows[0].cells, head);
    head.click();
    r.sorted = Array.prototype.map.call(table.tBodies[0].rows, function (row) { return parseFloat(row.cells[column].getAttribute("data-v")); });
    var out = document.createElement("pre");
    out.id = "probe-result";
    var mark = "@@ver" + "dict@@";
    out.textContent = mark + JSON.stringify(r) + mark;
    document.body.appendChild(out);
  });
})();
</script>
"##;

/// Opens `html` with the probe in the browser; returns the probe's verdict.
fn probe(browser: &Path, html: &str, dir: &Path) -> Value {
    let probed = html.replacen("<head>\n", &format!("<head>\n{PROBE}"), 1);
    assert_ne!(probed, html, "no <head> to put the probe in");
    let page = dir.join("probed.html");
    std::fs::write(&page, probed).unwrap();
    let out = headless(browser)
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = text(&out.stdout);
    let verdict = dom
        .split("@@verdict@@")
        .nth(1)
        .unwrap_or_else(|| panic!("the probe gave no verdict: {}", text(&out.stderr)));
    // The DOM is printed as HTML: its text is escaped.
    let verdict = verdict
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&verdict).unwrap()
}

/// A full-page screenshot of the report as it is, kept under the target directory; returns the
/// browser's log of the page's console.
fn screenshot(browser: &Path, report: &Path) -> (PathBuf, String) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("master-init.png");
    let _ = std::fs::remove_file(&png);
    let out = headless(browser)
        .args([
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,6000",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", report.display()))
        .output()
        .unwrap();
    assert!(png.is_file(), "no screenshot: {}", text(&out.stderr));
    std::fs::copy(report, dir.join("master-init.html")).unwrap();
    (png, text(&out.stderr))
}

#[test]
fn the_html_report_of_a_recorded_program_loads_cleanly_with_every_section_and_chart() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let profile = record_master_init(dir.path());
    let report = dir.path().join("report.html");
    let out = numalens(&["report", arg(&profile), "--html", arg(&report)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The text report still goes to stdout.
    assert!(
        text(&out.stdout).contains("master-init"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).contains(arg(&report)));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.len() < numalens_report::html::MAX_BYTES);

    let verdict = probe(&browser, &html, dir.path());
    assert_eq!(verdict["problems"], serde_json::json!([]), "{verdict:#}");
    assert_eq!(verdict["resources"], 0, "the page fetched something");
    let sections: Vec<&str> = verdict["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        sections,
        [
            "summary",
            "findings",
            "topology",
            "what-if",
            "objects",
            "object-details",
            "threads",
            "communication",
            "traffic",
            "timelines"
        ]
    );
    // master-init's known finding, first and most costly.
    assert_eq!(
        verdict["findings"][0], "first-touch-mismatch",
        "{verdict:#}"
    );
    // What it rests on, rendered on the page: the exact counts and the threshold it passed.
    let rests_on = &verdict["restsOn"][0];
    let shown = rests_on["text"].as_str().unwrap_or_default();
    assert!(shown.contains("exact counted accesses"), "{verdict:#}");
    assert!(shown.contains("mismatched access share"), "{verdict:#}");
    assert!(rests_on["width"].as_f64().unwrap() > 0.0, "{rests_on}");
    assert!(rests_on["height"].as_f64().unwrap() > 0.0, "{rests_on}");
    let figures = verdict["figures"].as_array().unwrap();
    let titled = |prefix: &str| {
        figures
            .iter()
            .find(|f| f["title"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no chart `{prefix}` in {figures:#?}"))
    };
    for title in [
        "Access distribution of",
        "First touch per page",
        "Accesses by thread and memory node",
        "Thread × thread communication",
        "Node traffic matrix",
        "Accesses of each thread over time",
        "Reads and writes per object",
        "Policies side by side",
    ] {
        let f = titled(title);
        assert_eq!(f["svg"], true, "{f}");
        assert_eq!(f["guide"], true, "{f}");
    }
    // The grid's distribution: cells of four threads beside the legend's bands.
    assert!(titled("Access distribution of")["rects"].as_u64().unwrap() > 24 + 4);
    // A click on "size" sorted the objects largest first.
    let sorted: Vec<f64> = verdict["sorted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(
        sorted.len() > 1 && sorted.windows(2).all(|w| w[0] >= w[1]),
        "{sorted:?}"
    );

    let (png, log) = screenshot(&browser, &report);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console output: {console:#?}");
    println!("screenshot of the HTML report: {}", png.display());
}

#[test]
fn findings_of_arrays_allocated_in_one_function_are_one_entry_with_its_instances_below() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("lulesh-like.numalens");
    fixture_profiles::allocated_in_one_function()
        .write(&profile)
        .unwrap();
    let report = dir.path().join("report.html");
    let out = numalens(&["report", arg(&profile), "--html", arg(&report)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The text report: the group first (its combined cost is the largest), then the lone array.
    let stdout = text(&out.stdout);
    let group = "first-touch-mismatch on 6 objects allocated in \
                 Domain::AllocateNodePersistent(int) (lulesh.h:166\u{2013}172)";
    let at = stdout.find(group).unwrap_or_else(|| panic!("{stdout}"));
    assert!(stdout.contains("Findings (7 in 2 entries"), "{stdout}");
    let lone = stdout.find("first-touch-mismatch m_elemMass").unwrap();
    assert!(at < lone, "{stdout}");
    assert!(stdout[at..lone].contains("1.1 m_zd"), "{stdout}");
    assert!(stdout[at..lone].contains("1.6 m_x"), "{stdout}");
    assert_eq!(stdout[at..lone].matches("rests on").count(), 6, "{stdout}");

    let html = std::fs::read_to_string(&report).unwrap();
    let verdict = probe(&browser, &html, dir.path());
    assert_eq!(verdict["problems"], serde_json::json!([]), "{verdict:#}");
    let groups = verdict["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{verdict:#}");
    let title = groups[0]["title"].as_str().unwrap();
    assert!(
        title.contains("on 6 objects allocated in Domain::AllocateNodePersistent(int) (lulesh.h:166\u{2013}172)"),
        "{title}"
    );
    assert_eq!(groups[0]["members"], 6, "{verdict:#}");
    assert_eq!(groups[0]["shown"], true, "{verdict:#}");
    assert!(
        groups[0]["first"].as_str().unwrap().contains("m_zd"),
        "{verdict:#}"
    );
    // The group, its six instances, and the lone array: each instance keeps its own entry.
    assert_eq!(
        verdict["findings"].as_array().unwrap().len(),
        8,
        "{verdict:#}"
    );
    assert_eq!(verdict["restsOn"].as_array().unwrap().len(), 8);
}

#[test]
fn an_unwritable_html_path_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let profile = record_master_init(dir.path());
    let report = dir.path().join("no-such-dir").join("report.html");
    let out = numalens(&["report", arg(&profile), "--html", arg(&report)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = text(&out.stderr);
    assert!(err.contains(arg(&report)), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The text report was printed all the same.
    assert!(text(&out.stdout).contains("master-init"));
}

/// A profile far larger than the report can show: 512 threads, 40 objects of 2048 pages each
/// touched by 8 threads per page with uneven counts (so no two neighbouring cells look alike),
/// and 3000 one-page objects whose names need escaping.
fn write_large_profile(dir: &Path) {
    use numalens_format::{
        Backend, Clock, Completeness, Host, Meta, Object, ObjectKind, PageStat, ProfileWriter,
        Thread,
    };
    const PID: u32 = 7;
    const PAGES: u64 = 2048;
    let meta = Meta::new(
        vec!["./large".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "box".into(),
            kernel: "6.1.0".into(),
            arch: "x86_64".into(),
        },
        Clock {
            name: "CLOCK_MONOTONIC".into(),
            origin_ns: 0,
        },
    );
    let mut w = ProfileWriter::create(dir, meta).unwrap();
    let threads = 512u32;
    for t in 0..threads {
        w.push_thread(Thread {
            pid: PID,
            tid: 1000 + t,
            logical_id: t,
            name: Some("worker".into()),
            start_routine: None,
            create_ns: t as u64,
            exit_ns: None,
            parent_tid: (t > 0).then_some(1000),
        })
        .unwrap();
    }
    let mix = |x: u64| x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    let big = |i: u64| 0x1000_0000 + i * PAGES * 4096 * 2;
    for i in 0..40u64 {
        w.push_object(Object {
            object_id: i,
            pid: PID,
            kind: ObjectKind::Heap,
            name: format!("grid{i} (solver.c:{})", 100 + i),
            start: big(i),
            size: PAGES * 4096,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: Some(1000),
            site_key: None,
        })
        .unwrap();
    }
    let small = |i: u64| 0x8000_0000 + i * 4096 * 2;
    for i in 0..3000u64 {
        w.push_object(Object {
            object_id: 40 + i,
            pid: PID,
            kind: ObjectKind::Heap,
            name: format!("std::vector<double> & part{i}"),
            start: small(i),
            size: 4096,
            alloc_ns: 0,
            free_ns: None,
            alloc_tid: Some(1000),
            site_key: None,
        })
        .unwrap();
    }
    let stat = |tid: u32, page: u64, reads: u64, object: u64| PageStat {
        pid: PID,
        tid,
        page,
        reads,
        writes: reads / 3,
        first_access_ns: mix(page ^ tid as u64) % 1_000_000,
        object_id: Some(object),
    };
    for i in 0..40u64 {
        for p in 0..PAGES {
            for k in 0..8u64 {
                let t = (mix(i * PAGES + p + k * 7919) % threads as u64) as u32;
                let reads = 1 + mix(p * 31 + k + i) % 5000;
                w.push_page_stat(stat(1000 + t, big(i) + p * 4096, reads, i))
                    .unwrap();
            }
        }
    }
    for i in 0..3000u64 {
        let t = (i % threads as u64) as u32;
        w.push_page_stat(stat(1000 + t, small(i), 10 + i, 40 + i))
            .unwrap();
    }
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    })
    .unwrap();
}

/// Replaces every matrix of the model with one far past any bound the analysis keeps, so the
/// report's own bounds are what keeps its size: 64 × 16384 heatmaps (on the drawn objects), 512 × 4096 timelines,
/// a 1024 × 1024 communication matrix, 64 nodes, 2000 findings.
fn inflate(model: &mut Value) {
    // Stripes `width` columns wide, shifted by one colour level per `row`: merged into bounded
    // cells, neighbouring cells still differ, so few can be drawn as one (the largest output).
    let stripes = |n: usize, row: u64, width: u64| -> Vec<u64> {
        (0..n as u64)
            .map(|i| 1 + (row + i / width) % 23 * 1000)
            .collect()
    };
    let (cols, buckets) = (16_384usize, 4096usize);
    model["analysis"]["time"] = serde_json::json!({"bucket_ns": 1000, "buckets": buckets});
    // The first objects are the ones drawn; the table rows of the others are bounded apart.
    let objects = model["objects"].as_array_mut().unwrap();
    for (i, o) in objects.iter_mut().take(12).enumerate() {
        let Some(a) = o.get_mut("access").filter(|a| !a.is_null()) else {
            continue;
        };
        let salt = i as u64;
        let h = &mut a["heatmap"];
        h["pages"] = (cols as u64 * 4).into();
        h["pages_per_column"] = 4.into();
        h["threads"] = (0..64).collect::<Vec<usize>>().into();
        h["values"] = (0..64)
            .map(|r| stripes(cols, r + salt, 400))
            .collect::<Vec<_>>()
            .into();
        h["page_average"] = stripes(cols, salt, 400).into();
        h["thread_average"] = stripes(64, salt, 1).into();
        h["first_touch"] = (0..cols)
            .map(|c| serde_json::json!({"thread": c % 64, "count": 3, "share": 0.75}))
            .collect::<Vec<_>>()
            .into();
        a["timeline"] = serde_json::json!({
            "threads": (0..512).collect::<Vec<usize>>(),
            "values": (0..512).map(|r| stripes(buckets, r / 16 + salt, 64)).collect::<Vec<_>>(),
        });
    }
    let n = 1024;
    model["communication"]["threads_per_cell"] = 1.into();
    model["communication"]["threads"] = (0..n).map(|t| t % 512).collect::<Vec<usize>>().into();
    model["communication"]["values"] = (0..n)
        .map(|r| stripes(n, r as u64 / 22, 22))
        .collect::<Vec<_>>()
        .into();
    let nodes = 64;
    let p = &mut model["placement"];
    p["nodes"] = (0..nodes).collect::<Vec<u32>>().into();
    p["traffic"] = (0..nodes)
        .map(|r| stripes(nodes as usize, r as u64, 1))
        .collect::<Vec<_>>()
        .into();
    p["load"] = (0..nodes)
        .map(|n| serde_json::json!({"node": n, "accesses": 5, "pages": 1, "threads": 8}))
        .collect::<Vec<_>>()
        .into();
    for t in model["threads"].as_array_mut().unwrap() {
        let objects: Vec<Value> = (0..8)
            .map(|o| serde_json::json!({"object": o, "name": "x", "accesses": 1, "buckets": stripes(buckets, o, 64)}))
            .collect();
        t["access"]["objects"] = objects.into();
    }
    let finding = serde_json::json!({
        "id": "hotspot", "advice": "cyclic-split-schedule",
        "object": {"id": 0, "pid": 7, "name": "grid0 <&>", "kind": "heap", "site": null},
        "summary": "a long summary of the finding, ".repeat(8),
        "evidence": (0..16).map(|k| serde_json::json!({"key": format!("key_{k}_share"), "value": 0.5})).collect::<Vec<_>>(),
        "fix": "the fix", "why": "the reason why",
        "cost": {"accesses": 10, "share": 0.1, "remote": 5},
    });
    model["findings"] = vec![finding; 2000].into();
}

#[test]
fn the_html_report_of_a_large_profile_stays_under_its_size_bound() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("large.numalens");
    write_large_profile(&profile);
    let report = dir.path().join("large.html");
    let out = numalens(&[
        "report",
        arg(&profile),
        "--top",
        "100000",
        "--json",
        "--html",
        arg(&report),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&report).unwrap();
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::copy(&report, kept.join("large.html")).unwrap();
    println!("HTML report of the large profile: {} bytes", html.len());
    assert!(
        html.len() <= numalens_report::html::MAX_BYTES,
        "{}",
        html.len()
    );
    // Every object name is escaped (and the objects table is cut short of the 3040 objects).
    assert!(html.contains("std::vector&lt;double&gt; &amp; part"));
    assert!(!html.contains("std::vector<double>"));

    // The same model with every matrix far past what the analysis would give.
    let mut model: Value = serde_json::from_slice(&out.stdout).unwrap();
    inflate(&mut model);
    let model: numalens_analyze::ReportModel = serde_json::from_value(model).unwrap();
    let html = numalens_report::html::render(&model);
    println!("HTML report of the inflated model: {} bytes", html.len());
    assert!(
        html.len() <= numalens_report::html::MAX_BYTES,
        "{}",
        html.len()
    );
}
