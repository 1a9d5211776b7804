//! `record` on the less common allocation calls (realloc moving a block, aligned allocations,
//! calloc, free(NULL), realloc(NULL, n)) and on OpenMP's static schedule: the right object at the
//! right address for the right time, and the exact first toucher of every page.

mod common;

use common::record::{Printed, View, assert_tracked, build, line_of, printed, record_program};
use numalens_format::{Object, ObjectKind};

const MIB: u64 = 1 << 20;

/// Checks the object's size and that its name is the line of `marker` in allocs.c.
fn check_site(object: &Object, size: u64, marker: &str) {
    let line = line_of("allocs.c", marker);
    assert_eq!(object.kind, ObjectKind::Heap, "{marker}");
    assert_eq!(object.size, size, "{marker}");
    assert!(
        object.name.contains(&format!("main (allocs.c:{line})")),
        "{marker}: {}",
        object.name
    );
}

#[test]
fn realloc_aligned_calloc_and_null_frees_keep_objects_and_first_touchers() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["allocs.c"], "allocs", &[]);
    let (recorded, profile) = record_program(dir.path(), &exe, &[]);
    assert_eq!(recorded.exit.code(), Some(9));
    let p = printed(dir.path());
    let view = View::read(&profile);
    let (main, worker) = (p.num("main") as u32, p.num("worker") as u32);
    let pid = view.thread(main).pid;

    // realloc moved the block: the old object ends where the new one begins, and each keeps its
    // own pages. The 64 KiB copied by realloc are first touched by the main thread again, in the
    // new block; the rest by the worker.
    let (small, grown) = (p.addr("small"), p.addr("grown"));
    assert_ne!(small, grown, "the block moved");
    let old = view.object_at(pid, small);
    check_site(old, 64 * 1024, "site: small");
    let new = view.object_at(pid, grown);
    check_site(new, 8 * MIB, "site: realloc");
    assert_eq!(
        old.free_ns,
        Some(new.alloc_ns),
        "one REALLOC ends one and starts the other"
    );
    view.assert_touched_by(pid, small, 64 * 1024, main, old.object_id);
    view.assert_touched_by(pid, grown, 64 * 1024, main, new.object_id);
    view.assert_touched_by(
        pid,
        grown + 64 * 1024,
        8 * MIB - 64 * 1024,
        worker,
        new.object_id,
    );

    // Aligned blocks are the user's block (not glibc's larger chunk), at the aligned address.
    let aligned = p.addr("aligned");
    assert_eq!(aligned % (2 * MIB), 0);
    let object = view.object_at(pid, aligned);
    check_site(object, 4 * MIB, "site: posix_memalign");
    view.assert_touched_by(pid, aligned, 4 * MIB, worker, object.object_id);
    let aligned2 = p.addr("aligned2");
    assert_eq!(aligned2 % (64 * 1024), 0);
    let object = view.object_at(pid, aligned2);
    check_site(object, MIB, "site: aligned_alloc");
    view.assert_touched_by(pid, aligned2, MIB, worker, object.object_id);

    // calloc of a fresh mapping does not clear it, so the thread that writes it places it.
    assert_eq!(p.num("zeros_ok"), 1);
    let zeroed = p.addr("zeroed");
    let object = view.object_at(pid, zeroed);
    check_site(object, 16 * MIB, "site: calloc");
    view.assert_touched_by(pid, zeroed, 16 * MIB, worker, object.object_id);

    // realloc(NULL, n) is a malloc with its own site.
    let from_null = p.addr("from_null");
    let object = view.object_at(pid, from_null);
    check_site(object, 2 * MIB, "site: realloc_null");
    view.assert_touched_by(pid, from_null, 2 * MIB, worker, object.object_id);

    // free(NULL) ended nothing: every object lives until its own free, after the worker's touches.
    let last_touch = view
        .samples
        .iter()
        .filter(|s| s.tid == worker)
        .map(|s| s.time_ns)
        .max()
        .unwrap();
    for key in ["grown", "aligned", "aligned2", "zeroed", "from_null"] {
        let object = view.object_at(pid, p.addr(key));
        let freed = object.free_ns.unwrap_or_else(|| panic!("{key} freed"));
        assert!(
            freed > last_touch,
            "{key} freed at {freed}, touched until {last_touch}"
        );
    }
    assert!(
        !view
            .objects
            .iter()
            .any(|o| o.pid == pid && o.start == 0 && o.kind == ObjectKind::Heap),
        "no object at address 0"
    );
    assert_tracked("allocs", &recorded, &view);
}

#[test]
fn openmp_static_blocks_are_first_touched_by_their_threads() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "gcc",
        &["omp_blocks.c"],
        "omp_blocks",
        &["-fopenmp"],
    );
    let (recorded, profile) = record_program(dir.path(), &exe, &["32", "4"]);
    assert_eq!(recorded.exit.code(), Some(8));
    let p = printed(dir.path());
    let view = View::read(&profile);
    let (array, bytes) = (p.addr("array"), p.num("bytes"));
    let text = std::fs::read_to_string(dir.path().join("stdout.txt")).unwrap();
    // blockK TID LO HI
    let blocks: Vec<(u32, u64, u64)> = text
        .lines()
        .filter(|l| l.starts_with("block"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(blocks.len(), 4, "{text}");
    let tids: std::collections::BTreeSet<u32> = blocks.iter().map(|b| b.0).collect();
    assert_eq!(tids.len(), 4, "four distinct threads");
    assert_eq!(blocks.iter().map(|b| b.2 - b.1).sum::<u64>(), bytes);
    let pid = view.thread(blocks[0].0).pid;
    let object = view.object_at(pid, array);
    let line = line_of("omp_blocks.c", "site: omp");
    assert!(
        object.name.contains(&format!("omp_blocks.c:{line}")),
        "{}",
        object.name
    );
    assert_eq!(object.size, bytes);
    for &(tid, lo, hi) in &blocks {
        // Pages wholly inside a block: exactly one first toucher, the block's thread.
        view.assert_touched_by(pid, array + lo, hi - lo, tid, object.object_id);
        // libgomp's threads are known to the runtime: logical ids from pthread_create.
        assert!(view.thread(tid).logical_id < 4);
    }
    let pages = view.pages_of(pid, array, bytes);
    assert!(pages.iter().all(|(_, s)| s.is_some()), "every page seen");
    assert_tracked("omp_blocks", &recorded, &view);
}
