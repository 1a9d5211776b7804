//! The `inst` backend against the ground-truth workloads: every workload, built with
//! `numalens cc` and recorded with `--backend inst`, must compute what it computes natively, and
//! its profile's exact counts must equal the manifest's analytically known reads and writes per
//! object and logical thread, with the right first toucher on every page.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use numalens_format::{Object, PageStat, Profile, SiteFrame, Thread};
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
            let source = format!("{}.c", w.name);
            let sites: Vec<u64> = frames
                .iter()
                .filter(|f| {
                    f.line == Some(line) && f.file.as_deref().is_some_and(|p| p.ends_with(&source))
                })
                .map(|f| f.site_key)
                .collect();
            objects
                .iter()
                .filter(|o| o.site_key.is_some_and(|k| sites.contains(&k)))
                .collect()
        }
    }
}

fn check_workload(w: &Workload, dir: &Path) {
    let manifest = w.manifest().unwrap();
    let native = build(w, &[OsString::from("gcc")], &dir.join("native")).unwrap();
    let inst = build(w, &numalens_cc(), &dir.join("inst")).unwrap();
    let args = numalens_workloads::args(&manifest, &[]).unwrap();
    let want = expected(&manifest, &[]).unwrap();
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
    let logical: HashMap<u32, u32> = profile
        .read_all::<Thread>()
        .unwrap()
        .iter()
        .map(|t| (t.tid, t.logical_id))
        .collect();
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
}

#[test]
fn exact_counts_match_every_workloads_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    for w in WORKLOADS {
        check_workload(w, &dir.path().join(w.name));
    }
}
