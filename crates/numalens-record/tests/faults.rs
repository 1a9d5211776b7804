//! The page-fault sampler on real programs: every first touch is seen, from the right thread.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::launched::run_to_end;
use numalens_assemble::raw::PerfEvent;
use numalens_record::faults::online_cpus;
use numalens_record::launch::{LaunchError, LaunchSpec, launch};

fn compile(dir: &Path, source: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/faults_progs")
        .join(source);
    let exe = dir.join(source.trim_end_matches(".c"));
    let status = Command::new("gcc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc runs");
    assert!(status.success(), "compiling {source}");
    exe
}

fn spec(program: &Path, args: &[&str]) -> LaunchSpec {
    LaunchSpec {
        program: program.into(),
        args: args.iter().map(Into::into).collect(),
        env: vec![],
        sample_cpus: Some(online_cpus().unwrap()),
        precise: None,
        ring_pages: 1024,
    }
}

#[test]
fn every_page_of_each_half_is_first_touched_by_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(dir.path(), "two_halves.c");
    let mut spec = spec(&exe, &["16"]);
    let out = dir.path().join("out.txt");
    spec.program = "sh".into();
    spec.args = vec![
        "-c".into(),
        format!("exec {} 16 > {}", exe.display(), out.display()).into(),
    ];
    let (status, events) = run_to_end(launch(&spec).unwrap());
    assert_eq!(status.code(), Some(3), "exit status is the program's");
    let printed = std::fs::read_to_string(&out).unwrap();
    let mut lines = printed.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let start = u64::from_str_radix(header[1].trim_start_matches("0x"), 16).unwrap();
    let bytes: u64 = header[2].parse().unwrap();
    let mut tid_of_half = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        tid_of_half.insert(f[3].parse::<u64>().unwrap(), f[1].parse::<u32>().unwrap());
    }
    let mut first_toucher: BTreeMap<u64, u32> = BTreeMap::new();
    let mut lost = 0;
    for e in &events {
        match e {
            PerfEvent::Fault(f) if (start..start + bytes).contains(&f.address) => {
                first_toucher.entry(f.address & !4095).or_insert(f.tid);
            }
            PerfEvent::Lost { count } => lost += count,
            _ => {}
        }
    }
    assert_eq!(lost, 0);
    assert_eq!(
        first_toucher.len() as u64,
        bytes / 4096,
        "every page faulted once at least"
    );
    for (page, tid) in first_toucher {
        let half = (page - start) / (bytes / 2);
        assert_eq!(tid, tid_of_half[&half], "page {page:#x}");
    }
    let names: BTreeSet<_> = events
        .iter()
        .filter_map(|e| match e {
            PerfEvent::Comm {
                name, exec: true, ..
            } => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert!(names.contains("two_halves"), "{names:?}");
}

#[test]
fn missing_and_non_executable_programs_get_shell_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let err = launch(&spec(Path::new("/no/such/program"), &[]))
        .err()
        .unwrap();
    assert!(matches!(err, LaunchError::NotFound { .. }), "{err}");
    assert_eq!(err.exit_status(), 127);
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "not a program").unwrap();
    let err = launch(&spec(&file, &[])).err().unwrap();
    assert_eq!(err.exit_status(), 126, "{err}");
}
