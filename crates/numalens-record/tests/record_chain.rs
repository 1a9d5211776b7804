//! `record` across processes: a program that forks a child which execs another program. The
//! profile must hold both processes, and the exec'd image's objects, sites and threads under its
//! own pid; the exit status travels back through both.

mod common;

use std::os::unix::process::ExitStatusExt;

use common::record::{Printed, View, build, line_of, printed, record_program, shares};
use numalens_format::{ObjectKind, SampleKind};
use numalens_record::record::RecordOptions;
use numalens_record::session::record;

#[test]
fn a_fork_exec_chain_keeps_both_processes_and_the_exec_d_image_s_objects() {
    let dir = tempfile::tempdir().unwrap();
    let parent = build(dir.path(), "gcc", &["chain_parent.c"], "chain_parent", &[]);
    let child = build(dir.path(), "gcc", &["chain_child.c"], "chain_child", &[]);
    let child_arg = child.to_str().unwrap();
    let (recorded, profile) = record_program(dir.path(), &parent, &[child_arg, "8"]);
    assert_eq!(
        recorded.exit.code(),
        Some(17),
        "the child's 7, plus 10 by the parent"
    );
    let p = printed(dir.path());
    let (parent_pid, child_pid) = (p.num("parent") as u32, p.num("child") as u32);
    assert_eq!(p.num("exec_pid") as u32, child_pid, "exec keeps the pid");
    let view = View::read(&profile);

    // Both processes, each thread under its own pid; the exec'd image numbers its threads afresh.
    assert!(view.threads.iter().any(|t| t.pid == parent_pid));
    for (key, logical) in [("half0", 1), ("half1", 2)] {
        let t = view.thread(p.num(key) as u32);
        assert_eq!(t.pid, child_pid, "{key}");
        assert_eq!(t.logical_id, logical, "{key}");
    }
    let main = view
        .threads
        .iter()
        .filter(|t| t.tid == p.num("main") as u32)
        .collect::<Vec<_>>();
    assert!(!main.is_empty() && main.iter().all(|t| t.pid == child_pid));

    // The array: a heap object of the child, named after the exec'd program's own source line.
    let (array, bytes) = (p.addr("array"), p.num("bytes"));
    let object = view.object_at(child_pid, array);
    assert_eq!(object.kind, ObjectKind::Heap);
    assert_eq!(object.size, bytes);
    assert_eq!(object.alloc_tid, Some(p.num("main") as u32));
    let line = line_of("chain_child.c", "site: array");
    assert!(
        object.name.contains(&format!("chain_child.c:{line}")),
        "{}",
        object.name
    );
    let frame = view.frame_in(object, "make_array");
    assert!(frame.module.ends_with("/chain_child"), "{}", frame.module);
    assert_eq!(frame.line, Some(line));
    assert!(frame.file.as_deref().unwrap().ends_with("chain_child.c"));
    assert!(
        object.free_ns.is_some(),
        "freed before the image exited: {object:?}"
    );

    // Each half first touched by its thread, in the child's pid, attributed to the array.
    for half in 0..2u64 {
        let tid = p.num(&format!("half{half}")) as u32;
        let start = array + half * bytes / 2;
        view.assert_touched_by(child_pid, start, bytes / 2, tid, object.object_id);
    }
    assert!(
        !view.samples.iter().any(|s| s.pid == parent_pid
            && (array..array + bytes).contains(&s.address)
            && s.object_id == Some(object.object_id)),
        "no sample of the parent is attributed to the child's array"
    );
    let meta = profile.meta();
    assert!(meta.completeness.complete, "{:?}", meta.completeness);
    assert_eq!(meta.completeness.exit.as_ref().unwrap().code, Some(17));
    // Asserted by the test below, which the fork child's unattributed first touches fail.
    shares("chain_parent + chain_child", &recorded, &view);
}

#[test]
fn a_fork_child_s_first_touches_are_attributed() {
    let dir = tempfile::tempdir().unwrap();
    let parent = build(dir.path(), "gcc", &["chain_parent.c"], "chain_parent", &[]);
    let child = build(dir.path(), "gcc", &["chain_child.c"], "chain_child", &[]);
    let (recorded, profile) = record_program(dir.path(), &parent, &[child.to_str().unwrap(), "8"]);
    let p = printed(dir.path());
    let child_pid = p.num("child") as u32;
    let view = View::read(&profile);
    let lost: Vec<_> = view
        .samples
        .iter()
        .filter(|s| s.pid == child_pid && s.kind == SampleKind::FirstTouch && s.object_id.is_none())
        .map(|s| format!("{:#x} at {}", s.address, s.time_ns))
        .collect();
    assert!(
        lost.is_empty(),
        "first touches of the child without an object: {lost:?}"
    );
    // Three program images (parent, child before its exec, exec'd child) each take a dozen first
    // touches in the loader and libc start-up before the runtime's constructor can see anything
    // (`assert_tracked` in other tests lists such touches): the share of data first touches on tracked
    // objects is just under the single-image 99 %.
    let (_, data) = shares("chain_parent + chain_child", &recorded, &view);
    assert!(data >= 98.5, "{data:.2} % of data first touches tracked");
}

#[test]
fn exit_statuses_and_signals_are_the_program_s() {
    for (script, code, signal) in [
        ("exit 0", Some(0), None),
        ("exit 255", Some(255), None),
        ("kill -TERM $$", None, Some(libc::SIGTERM)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let opts = RecordOptions::new(
            "sh",
            vec!["-c".into(), script.into()],
            dir.path().join("p.numalens"),
        );
        let recorded = record(&opts).unwrap();
        assert_eq!(recorded.exit.code(), code, "{script}");
        assert_eq!(recorded.exit.signal(), signal, "{script}");
        let profile = numalens_format::Profile::open(&recorded.profile).unwrap();
        let exit = profile.meta().completeness.exit.clone().unwrap();
        assert_eq!((exit.code, exit.signal), (code, signal), "{script}");
        assert_eq!(profile.meta().completeness.complete, signal.is_none());
    }
}
