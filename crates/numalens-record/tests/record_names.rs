//! `record` names a C program's objects and functions by their symbols: a one-letter C name that
//! also spells a C++ type in the Itanium mangling (`a` is `signed char`, `c` is `char`, `f` is
//! `float`) stays the name the program gave it. A static's site is the line that defines it.

mod common;

use common::record::{Printed, View, build, line_of, printed, record_program};
use numalens_format::ObjectKind;

#[test]
fn one_letter_c_symbols_keep_their_names() {
    let dir = tempfile::tempdir().unwrap();
    // Without debug information, as STREAM's Makefile builds it: names come from the symbol
    // table alone.
    let exe = build(
        dir.path(),
        "gcc",
        &["short_names.c"],
        "short_names",
        &["-g0"],
    );
    let (recorded, profile) = record_program(dir.path(), &exe, &[]);
    assert_eq!(recorded.exit.code(), Some(0));
    let p = printed(dir.path());
    let view = View::read(&profile);
    let pid = view.threads[0].pid;

    for name in ["a", "b", "c"] {
        let object = view.object_at(pid, p.addr(name));
        assert_eq!(object.kind, ObjectKind::Static, "{name}");
        assert_eq!(object.name, name, "the static array {name}");
    }
    let block = view.object_at(pid, p.addr("d"));
    let site = view.site(block.site_key.expect("the block has a call site"));
    let functions: Vec<_> = site.iter().filter_map(|f| f.function.as_deref()).collect();
    assert_eq!(
        functions.first(),
        Some(&"f"),
        "the block is allocated in f: {functions:?}"
    );
}

/// The one frame of a static's site: no function, the file and line of its definition.
fn definition(view: &View, pid: u32, address: u64, name: &str) -> (String, u32) {
    let object = view.object_at(pid, address);
    assert_eq!(object.kind, ObjectKind::Static, "{name}");
    assert_eq!(object.name, name);
    let key = object
        .site_key
        .unwrap_or_else(|| panic!("{name} has no definition"));
    let site = view.site(key);
    assert_eq!(site.len(), 1, "{name}: {site:?}");
    assert_eq!(site[0].function, None, "{name}");
    let file = site[0].file.clone().expect("a file");
    (file, site[0].line.expect("a line"))
}

#[test]
fn c_statics_are_named_and_defined_where_the_source_says() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", &["statics.c"], "statics", &[]);
    let (recorded, profile) = record_program(dir.path(), &exe, &[]);
    assert_eq!(recorded.exit.code(), Some(0));
    let p = printed(dir.path());
    let view = View::read(&profile);
    let pid = view.threads[0].pid;
    // GCC names a function's static after it with a number: `d.0`.
    for (name, symbol) in [("a", "a"), ("b", "b"), ("c", "c"), ("d", "d.0")] {
        let (file, line) = definition(&view, pid, p.addr(name), symbol);
        assert!(file.ends_with("/record_progs/statics.c"), "{name}: {file}");
        assert_eq!(
            line,
            line_of("statics.c", &format!("defines: {name}")),
            "{name}"
        );
    }
}

#[test]
fn cxx_statics_are_demangled_and_defined_where_the_source_says() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "g++", &["statics.cpp"], "statics", &[]);
    let (recorded, profile) = record_program(dir.path(), &exe, &[]);
    assert_eq!(recorded.exit.code(), Some(0));
    let p = printed(dir.path());
    let view = View::read(&profile);
    let pid = view.threads[0].pid;
    for (name, symbol) in [("field", "solver::field"), ("cells", "solver::Grid::cells")] {
        let (file, line) = definition(&view, pid, p.addr(name), symbol);
        assert!(
            file.ends_with("/record_progs/statics.cpp"),
            "{name}: {file}"
        );
        assert_eq!(
            line,
            line_of("statics.cpp", &format!("defines: {name}")),
            "{name}"
        );
    }
}
