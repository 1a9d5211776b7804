//! Builds the instrumentation runtime into `$OUT_DIR/libnumalens_inst.a`, which
//! `src/toolchain.rs` embeds and links into programs built with `numalens cc`. The compiler is
//! found the way every `-sys` crate finds it (the `cc` crate).
//!
//! A second archive, `$OUT_DIR/libnumalens_inst_rest.a`, holds the runtime less the access hooks:
//! for clang builds with link-time optimisation, the wrappers compile the hooks to LLVM bitcode
//! with the user's clang and link them before it (docs/INST.md, "Inlined hooks").
//!
//! `numalens_fd.h` (the descriptors kept out of the program's reach) is the preload runtime's,
//! shared by both runtimes: its directory comes from `numalens-preload`'s build script.

#[path = "../numalens-preload/build_support/shared.rs"]
mod shared;

use std::env;
use std::path::{Path, PathBuf};

use shared::{c_sources, files_hash};

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let runtime = manifest.join("runtime");
    let shared = PathBuf::from(
        env::var_os("DEP_NUMALENS_INCLUDE")
            .expect("numalens-preload passes on its include directory"),
    );
    println!(
        "cargo:rerun-if-changed={}",
        runtime.join("include").display()
    );
    println!("cargo:rerun-if-changed=build.rs");
    build_inst_archive(&runtime, &shared);
}

/// The instrumentation hooks: a static archive linked into instrumented programs by `numalens
/// cc`, so the hooks are direct calls inside the program and need no preloading.
fn build_inst_archive(runtime: &Path, shared: &Path) {
    let dir = runtime.join("inst");
    println!("cargo:rerun-if-changed={}", dir.display());
    let sources = c_sources(&dir);
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
    inst_build(runtime, shared, &sources).compile("numalens_inst");
    build_inst_rest_archive(runtime, shared, &sources);
    export_inst_hash(runtime);
}

/// `NUMALENS_INST_HASH`: the hash that names the archives' cache directory, over both archives
/// and the sources the wrappers build the inlined hooks from (`SOURCES` in `src/inline.rs`,
/// in that order). Every wrapper call needs it; hashing the megabyte at run time cost each
/// compile a pass over it.
fn export_inst_hash(runtime: &Path) {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let inst = runtime.join("inst");
    let parts = [
        out.join("libnumalens_inst.a"),
        out.join("libnumalens_inst_rest.a"),
        inst.join("hooks.c"),
        inst.join("atomics.c"),
        inst.join("inst.h"),
        inst.join("fast_path.h"),
        runtime.join("include").join("numalens_inst.h"),
    ];
    println!("cargo:rustc-env=NUMALENS_INST_HASH={}", files_hash(&parts));
}

/// The native build of instrumentation runtime sources.
fn inst_build(runtime: &Path, shared: &Path, sources: &[PathBuf]) -> cc::Build {
    let dir = runtime.join("inst");
    let mut build = cc::Build::new();
    build
        .cargo_metadata(false)
        .files(sources)
        .include(runtime.join("include"))
        .include(shared)
        .include(&dir)
        .opt_level(2)
        .debug(true)
        // A hook is a few instructions: a frame-pointer prologue would be a third of them. The
        // hooks never unwind, and a profiler unwinding through one still finds the caller from
        // the return address on top of the stack.
        .force_frame_pointer(false)
        .pic(true)
        .std("gnu11")
        .define("_GNU_SOURCE", None)
        .flag("-fvisibility=hidden")
        // Loops must not become memset/memcpy calls: the program's calls to those are counted.
        .flag("-fno-tree-loop-distribute-patterns")
        .flag("-fno-sanitize=all")
        .warnings(true)
        .extra_warnings(true);
    build
}

/// The sources of the hooks that clang's link-time optimisation inlines: the plain accesses and
/// the atomics. `src/inline.rs` embeds them and builds them as LLVM bitcode with the
/// user's clang; the rest of the runtime is `libnumalens_inst_rest.a`, native code.
const INLINED: [&str; 2] = ["hooks.c", "atomics.c"];

/// `libnumalens_inst_rest.a`: the runtime without the sources in [`INLINED`], linked after their
/// bitcode.
fn build_inst_rest_archive(runtime: &Path, shared: &Path, sources: &[PathBuf]) {
    let rest: Vec<PathBuf> = sources
        .iter()
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| INLINED.iter().any(|i| n == *i))
        })
        .cloned()
        .collect();
    inst_build(runtime, shared, &rest).compile("numalens_inst_rest");
}
