//! The manifests: each parses and validates, names real objects and ids, and its formulas
//! evaluate for the default and for other arguments.

use std::collections::BTreeSet;

use numalens_workloads::{Error, Manifest, ObjectKind, WORKLOADS, args, expected, patterns};

#[test]
fn every_manifest_parses_and_names_its_workload() {
    for workload in WORKLOADS {
        let manifest = workload.manifest().unwrap();
        assert_eq!(manifest.name, workload.name);
        assert_eq!(manifest.source, format!("{}.c", workload.name));
        assert!(
            manifest.flags.iter().any(|f| f == "-O2"),
            "{}",
            workload.name
        );
    }
}

#[test]
fn every_finding_of_the_vocabulary_has_a_workload() {
    let all: BTreeSet<String> = patterns().into_iter().map(|p| p.finding).collect();
    assert_eq!(all.len(), 9, "docs/FINDINGS.md table: {all:?}");
    // A `…-candidate` is the weaker form of a finding, given when the recording cannot carry
    // its evidence (exact counts have no write times): the workloads declare the finding.
    let (candidates, vocabulary): (BTreeSet<String>, BTreeSet<String>) =
        all.into_iter().partition(|f| f.ends_with("-candidate"));
    for c in &candidates {
        let full = c.trim_end_matches("-candidate");
        assert!(
            vocabulary.contains(full),
            "{c} is the candidate of no finding"
        );
    }
    let covered: BTreeSet<String> = WORKLOADS
        .iter()
        .flat_map(|w| w.manifest().unwrap().findings)
        .map(|f| f.id)
        .collect();
    assert_eq!(covered, vocabulary);
    let ideal = numalens_workloads::find("private-blocks").unwrap();
    assert!(ideal.manifest().unwrap().findings.is_empty());
}

#[test]
fn every_object_is_named_in_its_source() {
    for workload in WORKLOADS {
        for object in workload.manifest().unwrap().objects {
            match object.kind {
                ObjectKind::Heap | ObjectKind::Mmap => {
                    let line = workload.marker_line(&object.name).unwrap() as usize;
                    let text = workload.source.lines().nth(line - 1).unwrap();
                    let calls: &[&str] = if object.kind == ObjectKind::Mmap {
                        &["mmap("]
                    } else {
                        &["memalign(", "alloc("]
                    };
                    let allocates = calls.iter().any(|c| text.contains(c));
                    assert!(allocates, "{}:{line}: {text}", workload.name);
                }
                ObjectKind::Static => assert!(
                    workload.source.contains(&format!("{}[", object.name)),
                    "{}: no static array {}",
                    workload.name,
                    object.name
                ),
            }
        }
    }
}

#[test]
fn formulas_evaluate_for_the_defaults() {
    for workload in WORKLOADS {
        let manifest = workload.manifest().unwrap();
        let threads = manifest.args["threads"] as usize;
        for object in expected(&manifest, &[]).unwrap() {
            assert_eq!(object.reads.len(), threads);
            let accesses: u64 = object.reads.iter().chain(&object.writes).sum();
            assert!(accesses > 0, "{} {}", workload.name, object.name);
            // Every page is first touched by one of the threads.
            assert!(object.first_touchers.iter().all(|&t| t < threads as u64));
            if object.instances == 1 {
                assert_eq!(
                    object.first_touchers.len() as u64,
                    object.bytes.div_ceil(4096)
                );
            }
        }
    }
}

#[test]
fn formulas_follow_other_arguments() {
    let manifest = numalens_workloads::find("stencil")
        .unwrap()
        .manifest()
        .unwrap();
    let objects = expected(&manifest, &[("threads", 2), ("rows", 8), ("iters", 1)]).unwrap();
    let u = &objects[0];
    // 4 rows of 512 per thread: 3 reads per element less one missing edge row, plus the
    // checksum sweep.
    assert_eq!(u.reads, vec![(3 * 4 - 1) * 512 + 4 * 512; 2]);
    assert_eq!(u.writes, vec![2 * 4 * 512; 2]);
    assert_eq!(u.first_touchers, vec![0, 0, 0, 0, 1, 1, 1, 1]);

    let manifest = numalens_workloads::find("master-init")
        .unwrap()
        .manifest()
        .unwrap();
    let grid = &expected(&manifest, &[("threads", 1), ("n", 512)]).unwrap()[0];
    assert_eq!(
        (grid.reads.clone(), grid.writes.clone()),
        (vec![5 * 512], vec![512 + 4 * 512])
    );
}

#[test]
fn program_arguments_come_from_defaults_and_overrides() {
    let manifest = numalens_workloads::find("phases")
        .unwrap()
        .manifest()
        .unwrap();
    let given: Vec<String> = args(&manifest, &[("threads", 2)])
        .unwrap()
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect();
    assert_eq!(given, ["--iters", "4", "--n", "262144", "--threads", "2"]);
}

#[test]
fn bad_arguments_are_refused_with_what_to_change() {
    let manifest = numalens_workloads::find("phases")
        .unwrap()
        .manifest()
        .unwrap();
    let err = args(&manifest, &[("size", 2)]).unwrap_err();
    assert!(matches!(err, Error::UnknownArg { .. }), "{err}");
    assert!(err.to_string().contains("iters, n, threads"), "{err}");
    let err = args(&manifest, &[("n", 1000)]).unwrap_err();
    assert!(err.to_string().contains("multiple of 512"), "{err}");
}

const VALID: &str = r#"
name = "t"
source = "t.c"
summary = "s"
flags = ["-O2"]
[args]
n = 8
threads = 2
[[objects]]
name = "a"
kind = "heap"
bytes = "n * 8"
first_toucher = "0"
reads = "n / threads"
writes = "if(tid == 0, n, 0)"
[[findings]]
id = "first-touch-mismatch"
object = "a"
advice = "parallel-first-touch"
"#;

fn parse_with(from: &str, to: &str) -> Result<Manifest, Error> {
    assert!(VALID.contains(from), "{from}");
    Manifest::parse("t", &VALID.replace(from, to))
}

#[test]
fn validation_names_the_mistake() {
    Manifest::parse("t", VALID).unwrap();
    let cases = [
        (
            "id = \"first-touch-mismatch\"",
            "id = \"slow\"",
            "unknown finding id 'slow'",
        ),
        (
            "\"parallel-first-touch\"",
            "\"interleave\"",
            "takes advice 'parallel-first-touch'",
        ),
        (
            "object = \"a\"",
            "object = \"b\"",
            "object 'b', which is not in [[objects]]",
        ),
        ("\"n / threads\"", "\"m / threads\"", "unknown variable 'm'"),
        (
            "first_toucher = \"0\"",
            "first_toucher = \"tid\"",
            "unknown variable 'tid'",
        ),
        (
            "reads = \"n / threads\"",
            "reads = \"n / (\"",
            "reads of 'a'",
        ),
        ("threads = 2", "cores = 2", "needs `threads`"),
        ("kind = \"heap\"", "kind = \"stack\"", "unknown variant"),
        ("summary", "summry", "unknown field"),
    ];
    for (from, to, says) in cases {
        let err = parse_with(from, to).unwrap_err().to_string();
        assert!(err.contains(says), "{to}: {err}");
    }
}

#[test]
fn negative_counts_are_errors() {
    let manifest = parse_with("\"n / threads\"", "\"n - 100\"").unwrap();
    let err = expected(&manifest, &[]).unwrap_err().to_string();
    assert!(err.contains("negative value -92"), "{err}");
}

#[test]
fn the_makefile_builds_each_workload_with_its_manifests_flags() {
    let makefile = include_str!("../../../workloads/Makefile");
    let group = |var: &str| -> Vec<&str> {
        let line = makefile.lines().find(|l| l.starts_with(var)).unwrap();
        line.split_once(":=")
            .unwrap()
            .1
            .split_whitespace()
            .collect()
    };
    let (openmp, pthreads) = (group("OPENMP"), group("PTHREADS"));
    for workload in WORKLOADS {
        let flags = workload.manifest().unwrap().flags;
        let (in_group, flag) = if openmp.contains(&workload.name) {
            (true, "-fopenmp")
        } else {
            (pthreads.contains(&workload.name), "-pthread")
        };
        assert!(in_group, "{} is not in the Makefile", workload.name);
        assert!(
            flags.iter().any(|f| f == flag),
            "{}: {flags:?}",
            workload.name
        );
    }
}

#[test]
fn small_objects_ask_the_recorder_to_track_them() {
    for workload in WORKLOADS {
        let manifest = workload.manifest().unwrap();
        for object in expected(&manifest, &[]).unwrap() {
            let smallest = object.bytes / object.instances;
            let asks = manifest.record_options.windows(2).any(|w| {
                w[0] == "--min-object" && w[1].parse::<u64>().is_ok_and(|min| min <= smallest)
            });
            assert!(
                smallest >= 4096 || asks,
                "{}: {} has {smallest}-byte instances; set record_options --min-object",
                workload.name,
                object.name
            );
        }
    }
}
