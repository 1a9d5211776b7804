//! `record` names a C program's objects and functions by their symbols: a one-letter C name that
//! also spells a C++ type in the Itanium mangling (`a` is `signed char`, `c` is `char`, `f` is
//! `float`) stays the name the program gave it.

mod common;

use common::record::{Printed, View, build, printed, record_program};
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
