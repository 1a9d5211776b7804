//! `record` on allocations made away from the program's own C code: in a library loaded with
//! dlopen() after start, and in C++ through operator new[] and std::vector in std::threads. The
//! sites must name the user's function and line, not the allocator's.

mod common;

use std::path::Path;

use common::record::{Printed, View, assert_tracked, build, line_of, printed, record_program};
use numalens_format::ObjectKind;
use numalens_record::session::Recorded;

#[test]
fn an_allocation_in_a_dlopened_library_is_named_after_the_library_function() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build(
        dir.path(),
        "gcc",
        &["plugin.c"],
        "libplugin.so",
        &["-shared", "-fPIC"],
    );
    let exe = build(
        dir.path(),
        "gcc",
        &["dlopen_main.c"],
        "dlopen_main",
        &["-ldl"],
    );
    let (recorded, profile) = record_program(dir.path(), &exe, &[lib.to_str().unwrap(), "8"]);
    assert_eq!(recorded.exit.code(), Some(4));
    let p = printed(dir.path());
    let view = View::read(&profile);
    let pid = view.thread(p.num("main") as u32).pid;
    let (buffer, bytes) = (p.addr("buffer"), p.num("bytes"));
    let object = view.object_at(pid, buffer);
    assert_eq!((object.kind, object.size), (ObjectKind::Heap, bytes));
    let line = line_of("plugin.c", "site: plugin");
    assert!(
        object
            .name
            .contains(&format!("plugin_fill (plugin.c:{line})")),
        "{}",
        object.name
    );
    let frame = view.frame_in(object, "plugin_fill");
    assert!(frame.module.ends_with("/libplugin.so"), "{}", frame.module);
    assert_eq!(frame.line, Some(line));
    // The library's caller is the next frame: the site goes on into the program.
    let frames = view.site(object.site_key.unwrap());
    assert!(
        frames
            .iter()
            .any(|f| f.module.ends_with("/dlopen_main") && f.function.as_deref() == Some("main")),
        "{frames:#?}"
    );
    view.assert_touched_by(pid, buffer, bytes, p.num("main") as u32, object.object_id);
    assert_tracked("dlopen_main + libplugin.so", &recorded, &view);
}

/// Records cxx_threads; returns the recording's view and, per std::thread, its tid and its two
/// blocks (new[] array, vector data).
fn record_cxx(dir: &Path) -> (Recorded, View, Vec<(u32, u64, u64)>) {
    let exe = build(
        dir,
        "g++",
        &["cxx_threads.cpp"],
        "cxx_threads",
        &["-std=c++17"],
    );
    let (recorded, profile) = record_program(dir, &exe, &[]);
    assert_eq!(recorded.exit.code(), Some(6));
    let p = printed(dir);
    let threads = (0..2)
        .map(|k| {
            (
                p.num(&format!("tid{k}")) as u32,
                p.addr(&format!("samples{k}")),
                p.addr(&format!("counts{k}")),
            )
        })
        .collect();
    (recorded, View::read(&profile), threads)
}

#[test]
fn cxx_new_arrays_and_vectors_in_std_threads_have_objects_and_first_touchers() {
    let dir = tempfile::tempdir().unwrap();
    let (recorded, view, threads) = record_cxx(dir.path());
    let line = line_of("cxx_threads.cpp", "site: new[]");
    for (k, &(tid, samples, counts)) in threads.iter().enumerate() {
        let thread = view.thread(tid);
        let pid = thread.pid;
        assert_eq!(thread.logical_id, k as u32 + 1, "std::thread {k}");
        // new[]: named after the user's function, past operator new[] in libstdc++.
        let object = view.object_at(pid, samples);
        assert_eq!((object.size, object.alloc_tid), (8 << 20, Some(tid)));
        assert!(
            object
                .name
                .contains(&format!("make_samples (cxx_threads.cpp:{line})")),
            "{}",
            object.name
        );
        let frames = view.site(object.site_key.unwrap());
        assert!(
            frames[0].module.contains("libstdc++"),
            "operator new: {frames:#?}"
        );
        let frame = view.frame_in(object, "make_samples");
        assert!(frame.module.ends_with("/cxx_threads"), "{}", frame.module);
        assert_eq!(frame.line, Some(line));
        view.assert_touched_by(pid, samples, 8 << 20, tid, object.object_id);
        // The vector's data: the object, its allocating thread and its first toucher.
        let object = view.object_at(pid, counts);
        assert_eq!((object.size, object.alloc_tid), (4 << 20, Some(tid)));
        assert!(object.site_key.is_some());
        view.assert_touched_by(pid, counts, 4 << 20, tid, object.object_id);
    }
    assert_tracked("cxx_threads", &recorded, &view);
}

#[test]
fn a_vector_s_site_names_the_user_s_function_not_the_inlined_allocator() {
    let dir = tempfile::tempdir().unwrap();
    let (_, view, threads) = record_cxx(dir.path());
    let line = line_of("cxx_threads.cpp", "site: vector");
    for &(tid, _, counts) in &threads {
        let object = view.object_at(view.thread(tid).pid, counts);
        assert!(
            object
                .name
                .contains(&format!("make_counts (cxx_threads.cpp:{line})")),
            "{}",
            object.name
        );
    }
}
