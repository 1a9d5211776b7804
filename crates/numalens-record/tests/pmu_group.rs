//! The `pmu` backend's grouped events (Intel's `mem-loads` led by `mem-loads-aux`) run for real
//! with software events standing in for both: a counting `task-clock` leader and the page-fault
//! event as the sampled member, inherited by the program's threads. Not a hardware validation:
//! what it checks is that a member whose counting leader follows the task tree samples as it
//! would alone.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use common::launched::run_to_end;
use numalens_assemble::perf_sample::access::EventMeaning;
use numalens_assemble::raw::PerfEvent;
use numalens_format::SampleKind;
use numalens_record::faults::online_cpus;
use numalens_record::launch::{LaunchSpec, launch};
use numalens_record::pmu_events::LiveEvent;
use perf_event_open_sys::bindings as sys;

#[test]
fn a_member_led_by_a_counting_event_samples_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faults_progs/two_halves.c");
    let exe = dir.path().join("two_halves");
    let built = Command::new("gcc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(built.success());
    let out = dir.path().join("out.txt");
    let member = LiveEvent {
        name: "page-faults led by task-clock".into(),
        perf_type: sys::PERF_TYPE_SOFTWARE,
        config: [sys::PERF_COUNT_SW_PAGE_FAULTS as u64, 0, 0],
        leader_config: Some([sys::PERF_COUNT_SW_TASK_CLOCK as u64, 0, 0]),
        precise_ip: 0,
        raw: false,
        cpus: None,
        meaning: EventMeaning {
            ibs: false,
            default_kind: SampleKind::Load,
            fixed_period: 1,
        },
        spe: None,
    };
    let spec = LaunchSpec {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            format!("exec {} 16 > {}", exe.display(), out.display()).into(),
        ],
        env: vec![],
        sample_cpus: Some(online_cpus().unwrap()),
        precise: Some(vec![member]),
        ring_pages: 1024,
    };
    let (status, events) = run_to_end(launch(&spec).unwrap());
    assert_eq!(status.code(), Some(3));
    // The program prints its buffer's start and length first.
    let printed = std::fs::read_to_string(&out).unwrap();
    let header: Vec<&str> = printed.lines().next().unwrap().split_whitespace().collect();
    let start = u64::from_str_radix(header[1].trim_start_matches("0x"), 16).unwrap();
    let bytes: u64 = header[2].parse().unwrap();
    let in_buffer = |a: u64| (start..start + bytes).contains(&a);
    let sampled: BTreeSet<u64> = events
        .iter()
        .filter_map(|e| match e {
            PerfEvent::Access(a) if in_buffer(a.address) => Some(a.address & !4095),
            _ => None,
        })
        .collect();
    let faulted: BTreeSet<u64> = events
        .iter()
        .filter_map(|e| match e {
            PerfEvent::Fault(f) if in_buffer(f.address) => Some(f.address & !4095),
            _ => None,
        })
        .collect();
    assert_eq!(
        sampled.len() as u64,
        bytes / 4096,
        "every page of the buffer"
    );
    assert_eq!(sampled, faulted, "the page-fault ring of the same run");
}
