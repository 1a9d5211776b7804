//! The `inst` backend on real programs built by `numalens cc`/`c++`/`fortran`:
//! - every ground-truth workload computes what it computes natively, and its profile's exact
//!   counts equal the manifest's analytically known reads and writes per object and logical
//!   thread, with the right first toucher on every page;
//! - atomics keep their semantics; counts stay exact across fork, signal handlers and SIGKILL;
//!   C++, Fortran and clang builds count exactly; sampled mode's weights add up;
//! - programs that cannot be recorded this way get an error saying how to rebuild;
//! - a file system that fills up stops the hooks' files, not the program.

mod common;
mod inst_build;
mod inst_common;
mod prerequisites;

use inst_build::{allocated_at, build_with, marker, object_at, prog, weighted};
use inst_common::{PRIVATE_BLOCKS_SMALL, STENCIL_SMALL, SmallRun, code_locations, logical_threads};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_format::{Object, PageStat, Profile, Sample, SampleKind, SiteFrame, Thread};
use numalens_workloads::{ExpectedObject, ObjectKind, WORKLOADS, Workload, build, expected};

const PAGE: u64 = 4096;

fn numalens_cc() -> Vec<OsString> {
    vec![env!("CARGO_BIN_EXE_numalens").into(), "cc".into()]
}

fn checksum(program: &Path, args: &[OsString]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .expect("run workload");
    assert!(
        out.status.success(),
        "{} failed: {out:?}",
        program.display()
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The profile objects standing for a manifest object: the allocations at its marker line, or
/// the static symbol of its name.
fn instances<'a>(
    w: &Workload,
    want: &ExpectedObject,
    objects: &'a [Object],
    frames: &[SiteFrame],
) -> Vec<&'a Object> {
    match want.kind {
        ObjectKind::Static => objects.iter().filter(|o| o.name == want.name).collect(),
        _ => {
            let line = w.marker_line(&want.name).unwrap();
            allocated_at(objects, frames, &format!("{}.c", w.name), line)
        }
    }
}

/// A workload recorded with the exact backend: what the findings check needs.
struct Recorded {
    program: PathBuf,
    args: Vec<OsString>,
    min_object: u64,
    profile: PathBuf,
}

/// `numalens cc`, with `NUMALENS_CC` naming the real compiler when one is given (as a build
/// would say `CC="env NUMALENS_CC=clang numalens cc"`).
fn numalens_cc_with(compiler: Option<&str>) -> Vec<OsString> {
    let mut cmd: Vec<OsString> = match compiler {
        Some(c) => vec!["env".into(), format!("NUMALENS_CC={c}").into()],
        None => Vec::new(),
    };
    cmd.extend(numalens_cc());
    cmd
}

/// Builds `w` natively with gcc and instrumented by `numalens cc` over `compiler` (the default
/// compiler when `None`), runs it with the manifest's arguments (`overrides` changed) and checks
/// the instrumented program computes what the native one does and its exact counts are the
/// manifest's.
fn check_workload(
    w: &Workload,
    compiler: Option<&str>,
    overrides: &[(&str, u64)],
    dir: &Path,
) -> Recorded {
    let manifest = w.manifest().unwrap();
    let native = build(w, &[OsString::from("gcc")], &dir.join("native")).unwrap();
    let inst = build(w, &numalens_cc_with(compiler), &dir.join("inst")).unwrap_or_else(|e| {
        panic!(
            "{e}\n(missing compiler or OpenMP runtime? `make deps` installs clang and libomp-dev)"
        )
    });
    let args = numalens_workloads::args(&manifest, overrides).unwrap();
    let want = expected(&manifest, overrides).unwrap();
    // An instrumented program run on its own computes the same thing.
    assert_eq!(
        checksum(&inst, &args),
        checksum(&native, &args),
        "{}",
        w.name
    );

    let min_object = want
        .iter()
        .map(|o| (o.bytes / o.instances.max(1)).clamp(1, 4096))
        .min()
        .unwrap_or(4096);
    let profile_dir = dir.join("p.numalens");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_numalens"));
    cmd.args(["record", "--backend", "inst", "--inst-mode", "exact"])
        .arg(format!("--min-object={min_object}"))
        .arg("-o")
        .arg(&profile_dir)
        .arg(&inst)
        .args(&args);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        w.name,
        common::text(&out.stderr)
    );
    let recorded = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        recorded,
        checksum(&native, &args),
        "{} under record",
        w.name
    );

    let profile = Profile::open(&profile_dir).unwrap();
    let objects = profile.read_all::<Object>().unwrap();
    let frames = profile.read_all::<SiteFrame>().unwrap();
    let logical = logical_threads(&profile);
    let stats = profile.read_all::<PageStat>().unwrap();
    for o in &want {
        let found = instances(w, o, &objects, &frames);
        assert_eq!(
            found.len() as u64,
            o.instances.max(1),
            "{}: instances of {}",
            w.name,
            o.name
        );
        let ids: HashMap<u64, &Object> = found.iter().map(|x| (x.object_id, *x)).collect();
        // Counts are per page. A page holds one large object, whose rows carry its id; objects
        // smaller than a page share pages, so their counts are those of the pages they lie on.
        let pages: std::collections::HashSet<u64> = found
            .iter()
            .flat_map(|x| (x.start / PAGE..(x.start + x.size).div_ceil(PAGE)).map(|p| p * PAGE))
            .collect();
        let small = o.instances > 1;
        let belongs = |s: &PageStat| {
            if small {
                pages.contains(&s.page)
            } else {
                s.object_id.is_some_and(|id| ids.contains_key(&id))
            }
        };
        let mut reads = vec![0u64; o.reads.len()];
        let mut writes = vec![0u64; o.writes.len()];
        // page -> (earliest first access, its logical thread)
        let mut first: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
        for s in stats.iter().filter(|s| belongs(s)) {
            let t = logical[&s.tid] as usize;
            assert!(
                t < reads.len(),
                "{}: unexpected thread {t} on {}",
                w.name,
                o.name
            );
            reads[t] += s.reads;
            writes[t] += s.writes;
            let e = first.entry(s.page).or_insert((s.first_access_ns, t as u32));
            if s.first_access_ns < e.0 {
                *e = (s.first_access_ns, t as u32);
            }
        }
        assert_eq!(reads, o.reads, "{}: reads of {} per thread", w.name, o.name);
        assert_eq!(
            writes, o.writes,
            "{}: writes of {} per thread",
            w.name, o.name
        );
        if o.instances <= 1 {
            let start = found[0].start & !(PAGE - 1);
            for (page, (_, toucher)) in &first {
                let index = (page - start) / PAGE;
                assert_eq!(
                    u64::from(*toucher),
                    o.first_toucher(index),
                    "{}: first toucher of page {index} of {}",
                    w.name,
                    o.name
                );
            }
        } else {
            assert!(
                first
                    .values()
                    .all(|(_, t)| u64::from(*t) == o.first_toucher(0))
            );
        }
    }
    Recorded {
        program: inst,
        args,
        min_object,
        profile: profile_dir,
    }
}

/// The findings `numalens report --json` gives for a profile of `w`, as (finding id, object):
/// the manifest's name for the object when it is one of the manifest's, else the profile's name.
fn reported_findings(profile: &Path, w: &Workload) -> FindingSet {
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .arg("report")
        .arg("--json")
        .arg(profile)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let model: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = Profile::open(profile).unwrap();
    let objects = p.read_all::<Object>().unwrap();
    let frames = p.read_all::<SiteFrame>().unwrap();
    let manifest = w.manifest().unwrap();
    let mut names: HashMap<u64, String> = HashMap::new();
    for o in expected(&manifest, &[]).unwrap() {
        for x in instances(w, &o, &objects, &frames) {
            names.insert(x.object_id, o.name.clone());
        }
    }
    // Every finding says what it rests on: the profile's accesses and the thresholds passed.
    let data = match model["analysis"]["access_source"].as_str() {
        Some("page_stats") => "exact-counts",
        _ => "load-store-samples",
    };
    for f in model["findings"].as_array().expect("findings in the model") {
        assert!(
            !f["rests_on"].as_str().unwrap_or_default().is_empty(),
            "{f}"
        );
        assert_eq!(f["basis"]["data"][0]["kind"], data, "{f}");
        assert!(f["basis"]["data"][0]["count"].as_u64().unwrap() > 0, "{f}");
        assert!(!f["basis"]["tests"].as_array().unwrap().is_empty(), "{f}");
    }
    model["findings"]
        .as_array()
        .expect("findings in the model")
        .iter()
        .map(|f| {
            let id = f["object"]["id"].as_u64().unwrap_or(u64::MAX);
            let object = names.get(&id).cloned().unwrap_or_else(|| {
                format!(
                    "(not in the manifest) {}",
                    f["object"]["name"].as_str().unwrap_or("?")
                )
            });
            (f["id"].as_str().unwrap_or("?").to_string(), object)
        })
        .collect()
}

/// (finding id, object) pairs.
type FindingSet = BTreeSet<(String, String)>;

/// (true positives, reported, expected) over the suite.
fn score(runs: &[(FindingSet, FindingSet)]) -> (usize, usize, usize) {
    runs.iter().fold((0, 0, 0), |(tp, got, want), (g, e)| {
        (
            tp + g.intersection(e).count(),
            got + g.len(),
            want + e.len(),
        )
    })
}

#[test]
fn every_workload_gives_its_ground_truth_counts_and_findings() {
    let dir = tempfile::tempdir().unwrap();
    let (mut exact, mut sampled) = (Vec::new(), Vec::new());
    for w in WORKLOADS {
        // At its default 1 M increments per thread the false-sharing workload's threads overlap
        // for a few milliseconds only, and on a loaded 2-core machine the store samples missed
        // the writers' alternation in 1 run of 12 (and this test's recall then fell below 0.9);
        // four times longer, 0 of 12.
        let overrides: &[(&str, u64)] = match w.name {
            "false-sharing" => &[("n", 16_777_216)],
            _ => &[],
        };
        let run = check_workload(w, None, overrides, &dir.path().join(w.name));
        let want: FindingSet = w
            .manifest()
            .unwrap()
            .findings
            .iter()
            .map(|f| (f.id.clone(), f.object.clone()))
            .collect();
        // Exact counts carry no write times: false sharing is only ever a candidate there.
        let want_exact: FindingSet = want
            .iter()
            .map(|(id, object)| match id.as_str() {
                "false-sharing" => ("false-sharing-candidate".to_string(), object.clone()),
                _ => (id.clone(), object.clone()),
            })
            .collect();
        exact.push((reported_findings(&run.profile, w), want_exact));
        // The same program with the sampled backend at its default rate.
        let profile = dir.path().join(w.name).join("sampled.numalens");
        let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
            .args(["record", "--backend", "inst", "--inst-mode", "sampled"])
            .arg(format!("--min-object={}", run.min_object))
            .arg("-o")
            .arg(&profile)
            .arg(&run.program)
            .args(&run.args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        sampled.push((reported_findings(&profile, w), want));
    }
    let mut misses = String::new();
    for (name, runs) in [("exact", &exact), ("sampled", &sampled)] {
        let (tp, got, want) = score(runs);
        eprintln!(
            "findings, {name} backend: precision {tp}/{got}, recall {tp}/{want} over {} workloads",
            runs.len()
        );
        for (w, (got, want)) in WORKLOADS.iter().zip(runs.iter()) {
            let wrong: Vec<_> = got.difference(want).collect();
            let missed: Vec<_> = want.difference(got).collect();
            if !wrong.is_empty() || !missed.is_empty() {
                let line = format!("  {name}, {}: wrong {wrong:?}, missed {missed:?}\n", w.name);
                eprint!("{line}");
                misses.push_str(&line);
            }
        }
    }
    // Samples at the default rate: nine findings in ten right, and nine expected in ten found.
    let (tp, got, want) = score(&sampled);
    assert!(
        10 * tp >= 9 * got && 10 * tp >= 9 * want,
        "sampled backend: precision {tp}/{got}, recall {tp}/{want}, below 0.9:\n{misses}"
    );
    let wrong: Vec<String> = WORKLOADS
        .iter()
        .zip(&exact)
        .filter(|(_, (got, want))| got != want)
        .map(|(w, (got, want))| format!("{}: reported {got:?}, expected {want:?}", w.name))
        .collect();
    assert!(
        wrong.is_empty(),
        "exact backend findings:\n{}",
        wrong.join("\n")
    );
    // With the times of store samples, false sharing is confirmed and gets its fix.
    for (w, (got, want)) in WORKLOADS.iter().zip(&sampled) {
        for f in want.iter().filter(|(id, _)| id == "false-sharing") {
            assert!(
                got.contains(f),
                "{}: sampled backend reported {got:?}, expected {f:?}",
                w.name
            );
        }
    }
}

/// clang's OpenMP is LLVM's libomp, not libgomp: its threads, barriers and outlined regions
/// differ, and libomp looks for a ThreadSanitizer runtime (through its Archer tool) when it
/// starts. Built by `numalens cc` over clang, the OpenMP workloads still compute what gcc's
/// native builds compute and count exactly what their manifests say, per thread and object.
#[test]
fn clang_openmp_builds_give_the_ground_truth_counts() {
    let dir = tempfile::tempdir().unwrap();
    // Every OpenMP workload, small, on 2 to 4 threads.
    let runs: [SmallRun; 5] = [
        ("master-init", &[("n", 65536), ("threads", 4), ("iters", 2)]),
        PRIVATE_BLOCKS_SMALL,
        STENCIL_SMALL,
        (
            "hotspot",
            &[
                ("keys", 16384),
                ("range", 16384),
                ("threads", 4),
                ("iters", 2),
            ],
        ),
        ("phases", &[("n", 32768), ("threads", 4), ("iters", 2)]),
    ];
    let openmp: Vec<&str> = WORKLOADS
        .iter()
        .filter(|w| w.manifest().unwrap().flags.iter().any(|f| f == "-fopenmp"))
        .map(|w| w.name)
        .collect();
    assert_eq!(
        runs.map(|r| r.0).iter().collect::<BTreeSet<_>>(),
        openmp.iter().collect::<BTreeSet<_>>(),
        "the OpenMP workloads"
    );
    for (name, overrides) in runs {
        let w = numalens_workloads::find(name).unwrap();
        let run = check_workload(w, Some("clang"), overrides, &dir.path().join(name));
        // It really is clang's build, on LLVM's OpenMP runtime.
        let image = std::fs::read(&run.program).unwrap();
        let holds = |s: &[u8]| image.windows(s.len()).any(|x| x == s);
        assert!(holds(b"clang version"), "{name}: not built by clang");
        assert!(holds(b"libomp.so"), "{name}: not linked with libomp");
    }
}

fn record_inst(
    dir: &Path,
    mode: &str,
    program: &Path,
    args: &[&str],
) -> (std::process::Output, PathBuf) {
    let profile = dir.join(format!("{mode}.numalens"));
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "inst", "--inst-mode", mode, "-o"])
        .arg(&profile)
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    (out, profile)
}

/// Exact (reads, writes) per (pid, logical thread) on the objects allocated at `source:line`.
fn exact_counts(profile: &Path, source: &str, line: u32) -> BTreeMap<(u32, u32), (u64, u64)> {
    let profile = Profile::open(profile).unwrap();
    let objects = profile.read_all::<Object>().unwrap();
    let frames = profile.read_all::<SiteFrame>().unwrap();
    let ids: Vec<u64> = allocated_at(&objects, &frames, source, line)
        .iter()
        .map(|o| o.object_id)
        .collect();
    assert!(!ids.is_empty(), "no object allocated at {source}:{line}");
    let logical: HashMap<(u32, u32), u32> = profile
        .read_all::<Thread>()
        .unwrap()
        .iter()
        .map(|t| ((t.pid, t.tid), t.logical_id))
        .collect();
    let mut counts = BTreeMap::new();
    for s in profile.read_all::<PageStat>().unwrap() {
        if s.object_id.is_some_and(|id| ids.contains(&id)) {
            let e: &mut (u64, u64) = counts.entry((s.pid, logical[&(s.pid, s.tid)])).or_default();
            e.0 += s.reads;
            e.1 += s.writes;
        }
    }
    counts
}

fn run_native(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn atomics_compute_what_they_compute_natively_with_gcc_and_clang() {
    let dir = tempfile::tempdir().unwrap();
    let source = prog("atomics.c");
    let native = dir.path().join("native");
    let built = Command::new("gcc")
        .args(["-O2", "-pthread"])
        .arg(&source)
        .arg("-o")
        .arg(&native)
        .arg("-latomic")
        .status()
        .unwrap();
    assert!(built.success());
    let want = run_native(&native, &[]);
    assert!(want.contains("a8="), "{want}");
    for compiler in ["gcc", "clang"] {
        // clang leaves 16-byte atomics to libatomic, uninstrumented.
        let inst = build_with(
            "cc",
            Some(compiler),
            &source,
            &dir.path().join(compiler),
            &["-latomic"],
        );
        assert_eq!(run_native(&inst, &[]), want, "{compiler}, hooks inactive");
        let (out, _) = record_inst(
            &dir.path().join(compiler.to_string() + "-rec"),
            "both",
            &inst,
            &[],
        );
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        assert_eq!(common::text(&out.stdout), want, "{compiler}, recorded");
    }
}

#[test]
fn counts_stay_exact_across_fork_signals_and_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let source = prog("lifecycle.c");
    let line = marker(&source, "array");
    let n: u64 = 1 << 18;
    let arg = n.to_string();
    for compiler in ["gcc", "clang"] {
        let d = dir.path().join(compiler);
        std::fs::create_dir_all(&d).unwrap();
        // The program finds pages that share a cache slot with the array's by the runtime's hash.
        let runtime = concat!(env!("CARGO_MANIFEST_DIR"), "/../numalens-inst/runtime");
        let (inst, include) = (format!("-I{runtime}/inst"), format!("-I{runtime}/include"));
        let program = build_with(
            "cc",
            Some(compiler),
            &source,
            &d.join("lifecycle"),
            &[&inst, &include],
        );

        let (out, profile) = record_inst(&d.join("fork"), "exact", &program, &["fork", &arg]);
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        let counts = exact_counts(&profile, "lifecycle.c", line);
        let per_process: Vec<(u64, u64)> = counts.values().copied().collect();
        // The parent wrote the array; its copy in the child was read twice.
        assert_eq!(per_process.len(), 2, "{compiler}: {counts:?}");
        assert!(per_process.contains(&(0, n)), "{compiler}: {counts:?}");
        assert!(per_process.contains(&(2 * n, 0)), "{compiler}: {counts:?}");

        let (out, profile) = record_inst(&d.join("signal"), "exact", &program, &["signal", &arg]);
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        assert!(common::text(&out.stdout).contains("ticks>0=1"));
        // The handler bumps other objects; the main loop's counts of the array stay exact.
        let counts = exact_counts(&profile, "lifecycle.c", line);
        assert_eq!(
            counts.values().copied().collect::<Vec<_>>(),
            [(n, 32 * n)],
            "{compiler}"
        );

        let (out, profile) = record_inst(&d.join("kill"), "exact", &program, &["kill", &arg]);
        assert_eq!(
            out.status.code(),
            Some(128 + 9),
            "{}",
            common::text(&out.stderr)
        );
        let printed = common::text(&out.stdout);
        let start: u64 = printed.split_whitespace().nth(1).unwrap().parse().unwrap();
        let rows = Profile::open(&profile)
            .unwrap()
            .read_all::<PageStat>()
            .unwrap();
        let (reads, writes) = rows
            .iter()
            .filter(|s| (start..start + 8 * n).contains(&s.page))
            .fold((0, 0), |(r, w), s| (r + s.reads, w + s.writes));
        assert_eq!(
            (reads, writes),
            (0, 3 * n),
            "{compiler}: counts survive SIGKILL"
        );
        let meta = std::fs::read_to_string(profile.join("meta.json")).unwrap();
        assert!(meta.contains("\"complete\": false") || meta.contains("\"complete\":false"));
    }
}

#[test]
fn cxx_and_fortran_builds_count_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let n: u64 = 1 << 18;

    let source = prog("vec.cc");
    let program = build_with("c++", None, &source, &dir.path().join("vec"), &[]);
    let (out, profile) = record_inst(dir.path(), "exact", &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    assert_eq!(common::text(&out.stdout).trim(), format!("{} 4", 4 * n));
    let counts = exact_counts(&profile, "vec.cc", marker(&source, "shared"));
    let by_thread: Vec<(u32, (u64, u64))> = counts.iter().map(|((_, t), c)| (*t, *c)).collect();
    assert_eq!(
        by_thread,
        [
            (0, (0, n)),
            (1, (n, 0)),
            (2, (n, 0)),
            (3, (n, 0)),
            (4, (n, 0))
        ]
    );

    let source = prog("sweep.f90");
    let program = build_with("fortran", None, &source, &dir.path().join("sweep"), &[]);
    let (out, profile) = record_inst(&dir.path().join("f"), "exact", &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let counts = exact_counts(&profile, "sweep.f90", marker(&source, "field"));
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [(3 * n, n)]);
}

/// `sites.c` built with gcc's plugin and recorded in `mode`: its source, its profile and the
/// tallies it printed of its own accesses, (array, reads, writes).
fn record_sites(
    dir: &Path,
    mode: &str,
    compiler: Option<&str>,
) -> (PathBuf, PathBuf, Vec<(String, u64, u64)>) {
    let source = prog("sites.c");
    let program = build_with("cc", compiler, &source, &dir.join("sites"), &[]);
    let (out, profile) = record_inst(dir, mode, &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let tallies = common::text(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("result"))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (
                fields[0].to_string(),
                fields[1].parse().unwrap(),
                fields[2].parse().unwrap(),
            )
        })
        .collect();
    (source, profile, tallies)
}

/// gcc's plugin keeps each access site's counts of its current page in registers while a loop
/// nest runs: counts held there must all reach the pages, whichever way a loop is left, with
/// more sites than it keeps, pages that change at every access, short loops called many times
/// and a signal handler counting in the same page cache meanwhile.
#[test]
fn counts_held_in_registers_reach_their_pages() {
    check_exact_sites(None);
}

/// The same program built by clang with LLVM's pass: its runs of accesses are counted by the
/// hooks as they were, moved to the end of each run.
#[test]
fn clangs_runs_of_accesses_are_all_counted() {
    assert_stepped_by_the_llvm_pass();
    check_exact_sites(Some("clang"));
}

fn check_exact_sites(compiler: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let (source, profile, tallies) = record_sites(dir.path(), "exact", compiler);
    for (array, reads, writes) in &tallies {
        let counts = exact_counts(&profile, "sites.c", marker(&source, array));
        let total = counts
            .values()
            .fold((0u64, 0u64), |a, c| (a.0 + c.0, a.1 + c.1));
        if compiler == Some("clang") && array == "wide" {
            // clang carries the sliding window's values from one iteration to the next in
            // registers: fewer loads than the source's, each counted.
            assert!(total.0 > 0 && total.0 < *reads, "{array}: {total:?}");
            assert_eq!(total.1, *writes, "{array}: writes");
            continue;
        }
        assert_eq!(total, (*reads, *writes), "{array}: (reads, writes)");
    }
    assert_eq!(tallies.len(), 9, "{tallies:?}");
}

/// In a loop copy for threads that only sample, gcc's plugin steps a countdown once per block
/// and replays the block's accesses only when a sample falls due: each sample must still land
/// on the access whose step ran the countdown out, so each array's weighted samples add up to
/// its own accesses, in a block that reads two arrays and writes a third.
#[test]
fn samples_stepped_per_block_land_on_their_accesses() {
    check_sampled_sites(None);
}

/// LLVM's pass steps the countdowns once per run of accesses in clang builds, and replays the
/// run's hooks when a sample falls due in it: the same check.
#[test]
fn samples_stepped_per_run_in_clang_builds_land_on_their_accesses() {
    assert_stepped_by_the_llvm_pass();
    check_sampled_sites(Some("clang"));
}

/// A run of accesses that ends at its function's return: LLVM's pass moves the run's hooks to
/// its end, where the last one must not become a tail call, whose sample would name the caller.
#[test]
fn samples_of_a_run_ending_at_a_return_name_its_function() {
    assert_stepped_by_the_llvm_pass();
    let dir = tempfile::tempdir().unwrap();
    let source = prog("run_at_return.c");
    let program = build_with("cc", Some("clang"), &source, &dir.path().join("run"), &[]);
    let (out, profile) = record_inst(dir.path(), "sampled", &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let p = Profile::open(&profile).unwrap();
    let locations = code_locations(&p);
    let function = |s: &Sample| {
        s.ip.and_then(|ip| locations.get(&ip))
            .and_then(|c| c.function.clone())
            .unwrap_or_default()
    };
    let cells = object_at(&p, "run_at_return.c", "cells");
    let stores: Vec<String> = p
        .read_all::<Sample>()
        .unwrap()
        .iter()
        .filter(|s| s.kind == SampleKind::Store && s.object_id == Some(cells))
        .map(function)
        .collect();
    // Six million stores: about 5,900 samples.
    assert!(stores.len() > 3_000, "{} store samples", stores.len());
    let elsewhere: BTreeMap<&str, usize> = stores
        .iter()
        .filter(|f| f.as_str() != "store_pair")
        .fold(BTreeMap::new(), |mut m, f| {
            *m.entry(f.as_str()).or_default() += 1;
            m
        });
    assert!(elsewhere.is_empty(), "of {}: {elsewhere:?}", stores.len());
}

/// A run of 16-byte accesses (a loop clang vectorises) steps the countdowns by two words per
/// access, as each hook does: sampled weights add up to the exact counts of the same program.
#[test]
fn a_vectorised_runs_samples_weigh_what_its_accesses_count() {
    assert_stepped_by_the_llvm_pass();
    let dir = tempfile::tempdir().unwrap();
    let source = prog("vector_run.c");
    let program = build_with("cc", Some("clang"), &source, &dir.path().join("vec"), &[]);
    let (out, exact) = record_inst(dir.path(), "exact", &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let (out, sampled) = record_inst(dir.path(), "sampled", &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let p = Profile::open(&sampled).unwrap();
    for (array, kind) in [
        ("a", SampleKind::Load),
        ("b", SampleKind::Load),
        ("c", SampleKind::Store),
    ] {
        let line = marker(&source, array);
        let counts = exact_counts(&exact, "vector_run.c", line);
        let (reads, writes) = counts.values().fold((0, 0), |t, c| (t.0 + c.0, t.1 + c.1));
        let expected = if kind == SampleKind::Load {
            reads
        } else {
            writes
        } as f64;
        let id = object_at(&p, "vector_run.c", array);
        let weighted = weighted(&p, id).get(&kind).copied().unwrap_or(0);
        // 2.6 M words an array: about 2,500 samples.
        let error = (weighted as f64 - expected).abs() / expected;
        assert!(error < 0.15, "{array} {kind:?}: {weighted} vs {expected}");
    }
}

/// Compiles sites.c alone with clang through the wrapper: the bitcode object must name the
/// countdown the pass steps, which the program itself never mentions.
fn assert_stepped_by_the_llvm_pass() {
    let dir = tempfile::tempdir().unwrap();
    let object = dir.path().join("sites.o");
    let built = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["cc", "-O2", "-c"])
        .arg(prog("sites.c"))
        .arg("-o")
        .arg(&object)
        .env("NUMALENS_CC", "clang")
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", common::text(&built.stderr));
    let bytes = std::fs::read(&object).unwrap();
    assert!(
        bytes.windows(17).any(|w| w == b"nl_countdown_read"),
        "the LLVM pass did not run (LLVM's development files missing? tests/install-deps \
         installs them): {}",
        common::text(&built.stderr)
    );
}

fn check_sampled_sites(compiler: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let (source, profile, tallies) = record_sites(dir.path(), "sampled", compiler);
    let p = Profile::open(&profile).unwrap();
    let mut checked = 0;
    for (array, reads, writes) in &tallies {
        let by_kind = weighted(&p, object_at(&p, "sites.c", array));
        // clang loads `wide` fewer times than the source says (see check_exact_sites): the
        // exact counts of the same program are what its samples stand for.
        let reads = match (compiler, array.as_str()) {
            (Some("clang"), "wide") => {
                let (out, exact) = record_inst(dir.path(), "exact", &dir.path().join("sites"), &[]);
                assert!(out.status.success(), "{}", common::text(&out.stderr));
                let counts = exact_counts(&exact, "sites.c", marker(&source, array));
                counts.values().map(|c| c.0).sum()
            }
            _ => *reads,
        };
        for (kind, expected) in [(SampleKind::Load, reads), (SampleKind::Store, *writes)] {
            let expected = expected as f64;
            // Half a million accesses or more: about 500 samples, 4.5 % standard deviation.
            if expected < 500_000.0 {
                continue;
            }
            let weighted = by_kind.get(&kind).copied().unwrap_or(0);
            let error = (weighted as f64 - expected).abs() / expected;
            assert!(error < 0.2, "{array} {kind:?}: {weighted} vs {expected}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked} checked: {tallies:?}");
}

/// Under `--max-sample-rate` a busy thread takes far fewer samples, and their weights, which
/// grow with the thread's interval, still add up to the accesses it made.
#[test]
fn a_sampling_cap_keeps_weights_adding_up() {
    let dir = tempfile::tempdir().unwrap();
    let source = prog("sites.c");
    let program = build_with("cc", None, &source, &dir.path().join("sites"), &[]);
    let profile = dir.path().join("capped.numalens");
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "inst", "--inst-mode", "both"])
        .args(["--max-sample-rate", "1000", "-o"])
        .arg(&profile)
        .arg(&program)
        // Twelve times the sweeps: a thread's first 8,192 samples are never capped.
        .arg("12")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let p = Profile::open(&profile).unwrap();
    let exact: u64 = p
        .read_all::<PageStat>()
        .unwrap()
        .iter()
        .map(|s| s.reads + s.writes)
        .sum();
    let samples: Vec<Sample> = p
        .read_all::<Sample>()
        .unwrap()
        .into_iter()
        .filter(|s| matches!(s.kind, SampleKind::Load | SampleKind::Store))
        .collect();
    let weighted: u64 = samples.iter().map(|s| u64::from(s.weight)).sum();
    let heaviest = samples.iter().map(|s| s.weight).max().unwrap_or(0);
    // About 470 M accesses: 460,000 samples at one per 1024, the 8,192 free ones and a few
    // thousand more under the cap.
    assert!(
        exact > 400_000_000 && (samples.len() as u64) < exact / 1024 / 4,
        "{} samples for {exact} accesses",
        samples.len()
    );
    assert!(heaviest >= 8 * 1024, "the interval grew: {heaviest}");
    let error = (weighted as f64 - exact as f64).abs() / exact as f64;
    assert!(
        error < 0.06,
        "weights {weighted} vs {exact} accesses ({} samples)",
        samples.len()
    );
}

#[test]
fn sampled_weights_add_up_to_the_exact_counts() {
    let dir = tempfile::tempdir().unwrap();
    let source = prog("vec.cc");
    let n = (1u64 << 18) as f64;
    let program = build_with("c++", None, &source, &dir.path().join("vec"), &[]);
    let (out, profile) = record_inst(dir.path(), "sampled", &program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let p = Profile::open(&profile).unwrap();
    assert!(
        p.read_all::<PageStat>().unwrap().is_empty(),
        "sampled mode counts no pages"
    );
    let objects = p.read_all::<Object>().unwrap();
    let frames = p.read_all::<SiteFrame>().unwrap();
    let shared = allocated_at(&objects, &frames, "vec.cc", marker(&source, "shared"))[0].object_id;
    let logical = logical_threads(&p);
    // A sample names the instruction of the program that made the access, not the hook.
    let code = code_locations(&p);
    let mut weight: BTreeMap<(u32, bool), u64> = BTreeMap::new();
    for s in p.read_all::<Sample>().unwrap() {
        if s.object_id == Some(shared) && matches!(s.kind, SampleKind::Load | SampleKind::Store) {
            let at = &code[&s.ip.expect("a sampled access has its ip")];
            let (function, file) = (at.function.as_deref(), at.file.as_deref());
            assert!(
                at.module.ends_with("/vec")
                    && function.is_some_and(|f| !f.starts_with("__tsan"))
                    && file.is_some_and(|f| !f.contains("runtime/inst")),
                "{at:?}"
            );
        }
        assert!(matches!(
            s.kind,
            SampleKind::Load | SampleKind::Store | SampleKind::FirstTouch | SampleKind::Fault
        ));
        if s.object_id == Some(shared) && matches!(s.kind, SampleKind::Load | SampleKind::Store) {
            assert_eq!(s.weight, 1024);
            *weight
                .entry((logical[&s.tid], s.kind == SampleKind::Store))
                .or_default() += u64::from(s.weight);
        }
    }
    // Each reader's n loads, and the main thread's n stores, within 10 % (the sampling
    // intervals are random around 1024: about 2 % standard deviation here).
    let mut expect = vec![((0, true), n)];
    expect.extend((1..=4).map(|t| ((t, false), n)));
    for (key, want) in expect {
        let got = weight.get(&key).copied().unwrap_or(0) as f64;
        assert!(
            (got - want).abs() < 0.1 * want,
            "{key:?}: {got} vs {want}; {weight:?}"
        );
    }
}

#[test]
fn programs_that_cannot_be_recorded_this_way_say_how_to_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = record_inst(dir.path(), "exact", Path::new("/bin/true"), &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = common::text(&out.stderr);
    assert!(
        err.contains("not built with numalens' instrumentation")
            && err.contains("CC=\"numalens cc\""),
        "{err}"
    );

    let tsan = dir.path().join("tsan");
    let built = Command::new("gcc")
        .args(["-O2", "-fsanitize=thread"])
        .arg(prog("atomics.c"))
        .arg("-o")
        .arg(&tsan)
        .status()
        .unwrap();
    assert!(built.success());
    let (out, _) = record_inst(&dir.path().join("t"), "exact", &tsan, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(common::text(&out.stderr).contains("libtsan"));

    // Queries pass through untouched.
    let out = common::numalens(&["cc", "--version"]);
    assert!(out.status.success());
    assert!(!common::text(&out.stdout).is_empty());
}

/// A file system that fills up stops the hooks' files, not the program: each segment's space is
/// allocated before it is mapped (a store into a mapped page without room is a SIGBUS), and the
/// files say they stopped, which the recorder reports. The program runs on a 64 KiB tmpfs of a
/// mount namespace of its own, with a sample at every access.
#[test]
fn a_full_file_system_stops_the_files_not_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let (small, kept) = (dir.path().join("small"), dir.path().join("kept"));
    std::fs::create_dir(&small).unwrap();
    std::fs::create_dir(&kept).unwrap();
    let probe = Command::new("unshare")
        .args(["-Urm", "sh", "-c", "mount -t tmpfs -o size=64k none \"$0\""])
        .arg(&small)
        .output();
    let remedy = match &probe {
        Err(e) => format!("running unshare failed ({e}): install the `util-linux` package"),
        Ok(o) => format!(
            "`unshare -Urm` then mount was refused ({}): allow user namespaces \
             (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, the container's \
             seccomp profile)",
            common::text(&o.stderr).trim()
        ),
    };
    let mounted = probe.as_ref().is_ok_and(|o| o.status.success());
    if !prerequisites::require(mounted, "a tmpfs in a user namespace", &remedy) {
        return;
    }
    let program = build_with("c++", None, &prog("vec.cc"), &dir.path().join("vec"), &[]);
    // The files are copied out before the namespace, and its tmpfs, go.
    let script =
        "mount -t tmpfs -o size=64k none \"$1\" && \"$0\"; s=$?; cp \"$1\"/inst-* \"$2\"; exit $s";
    let run = Command::new("unshare")
        .args(["-Urm", "sh", "-c", script])
        .args([&program, &small, &kept])
        .env("NUMALENS_DIR", &small)
        .env("NUMALENS_INST", "both")
        .env("NUMALENS_INST_EVERY", "1")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{:?}: {}",
        run.status,
        common::text(&run.stderr)
    );
    let data = numalens_inst::files::read_inst_dir(&kept);
    assert!(!data.samples.is_empty(), "the samples that fitted are kept");
    for what in ["page counts", "samples"] {
        assert!(
            data.problems
                .iter()
                .any(|p| p.contains(&format!("could not record more {what}"))),
            "{what}: {:?}",
            data.problems
        );
    }
}

/// Copies a workload's sources (and the suite's Makefile) into `dir`.
fn copy_workload_sources(dir: &Path) {
    let workloads = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
    for name in ["master-init.c", "wl.h", "wl_threads.h", "Makefile"] {
        std::fs::copy(workloads.join(name), dir.join(name)).unwrap();
    }
}

fn assert_records_exactly(program: &Path, dir: &Path) {
    let (out, profile) = record_inst(dir, "exact", program, &[]);
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let rows = Profile::open(&profile)
        .unwrap()
        .read_all::<PageStat>()
        .unwrap();
    assert!(rows.iter().map(|r| r.writes).sum::<u64>() >= 1 << 20);
}

#[test]
fn builds_driven_by_make_and_cmake_use_the_wrapper() {
    let numalens_cc = format!("{} cc", env!("CARGO_BIN_EXE_numalens"));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    copy_workload_sources(&src);

    let made = Command::new("make")
        .arg(format!("CC={numalens_cc}"))
        .arg("master-init")
        .current_dir(&src)
        .output()
        .expect("run make");
    assert!(made.status.success(), "{}", common::text(&made.stderr));
    assert_records_exactly(&src.join("master-init"), &dir.path().join("make"));

    std::fs::write(
        src.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.13)\nproject(probe C)\nfind_package(OpenMP REQUIRED)\n\
         add_executable(master-init master-init.c)\n\
         target_link_libraries(master-init OpenMP::OpenMP_C)\n",
    )
    .unwrap();
    let build = dir.path().join("build");
    std::fs::create_dir(&build).unwrap();
    for step in [
        vec!["cmake", "-DCMAKE_BUILD_TYPE=Release", "../src"],
        vec!["make"],
    ] {
        let out = Command::new(step[0])
            .args(&step[1..])
            .env("CC", &numalens_cc)
            .current_dir(&build)
            .output()
            .unwrap_or_else(|e| panic!("{} ({e}); `make deps` installs cmake", step[0]));
        assert!(out.status.success(), "{}", common::text(&out.stderr));
    }
    assert_records_exactly(&build.join("master-init"), &dir.path().join("cmake"));
}
