//! Hooks inlined by clang's link-time optimisation.
//!
//! clang runs its ThreadSanitizer instrumentation at the end of the per-module pipeline, so with
//! `-flto` the `__tsan_*` calls are in the bitcode the link optimises. When the hooks are bitcode
//! too, the full-LTO link inlines their fast path into the instrumented loops: one call per
//! access becomes a thread-local load and a branch (inactive), or a few more instructions and a
//! counter increment (exact mode). The slow paths stay native code in the rest of the runtime
//! (`libnumalens_inst_rest.a`, built by `build.rs` with the runtime's own compiler), so they
//! remain calls.
//!
//! The hooks are built here, with the user's clang, the first time a wrapper needs them, so their
//! bitcode is always one that clang's LLVM reads, and numalens itself builds without clang: each
//! compiler gets its bitcode archive in `lto-<hash>/` once a small instrumented program has
//! linked against it with `-flto` ([`super::per_compiler`]). If that fails (no linker that reads
//! LLVM bitcode, an LLVM without the options below), the hooks stay calls. Compiling and linking
//! must agree (objects built with `-flto` are bitcode), which the one answer per compiler
//! ensures.
//!
//! Built with `NL_INLINE_HOOKS`, every access hook is `always_inline` (`runtime/inst/inst.h`):
//! inlined at each call, hot or cold, so a sample's instruction address can always be the one
//! its slow path returns to. The hooks are also compiled with `-fsanitize=thread`, every
//! instrumentation of it turned off, because LLVM's inliner otherwise refuses to inline between
//! functions that disagree on `sanitize_thread`. And they carry no debug information: LLVM 14
//! cannot inline a function with debug information at a call without a debug location, which
//! some of the calls its instrumentation inserts are.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::per_compiler::{PerCompiler, compiler_says, run, write_probe, write_sources};
use super::toolchain::{Family, Hooks, Invocation, wrapped_args};

/// The runtime less the inlined hooks, native code, as built by `build.rs`.
pub const REST_ARCHIVE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/libnumalens_inst_rest.a"));
pub const REST_ARCHIVE_NAME: &str = "libnumalens_inst_rest.a";

/// The bitcode archive of the hooks, in a compiler's `lto-<hash>` directory.
pub const BITCODE_ARCHIVE_NAME: &str = "libnumalens_inst_hooks.a";

/// The sources of the inlined hooks (`INLINED` in `build.rs`) and the headers they include.
pub const SOURCES: [(&str, &str); 5] = [
    ("hooks.c", include_str!("../runtime/inst/hooks.c")),
    ("atomics.c", include_str!("../runtime/inst/atomics.c")),
    ("inst.h", include_str!("../runtime/inst/inst.h")),
    ("fast_path.h", include_str!("../runtime/inst/fast_path.h")),
    (
        "numalens_inst.h",
        include_str!("../runtime/include/numalens_inst.h"),
    ),
];

/// How the hooks are compiled to bitcode (the source follows).
const BITCODE_FLAGS: [&str; 19] = [
    "-flto",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-D_GNU_SOURCE",
    "-DNL_INLINE_HOOKS",
    // Inlining needs caller and callee to agree on `sanitize_thread`.
    "-fsanitize=thread",
    "-mllvm",
    "-tsan-instrument-memory-accesses=0",
    "-mllvm",
    "-tsan-instrument-atomics=0",
    "-mllvm",
    "-tsan-instrument-func-entry-exit=0",
    "-mllvm",
    "-tsan-instrument-memintrinsics=0",
    // C even for clang++ (`NUMALENS_CXX`).
    "-x",
    "c",
    "-std=gnu11",
    "-c",
];

/// Whether the user's arguments allow inlined hooks: not with `-fno-lto`, nor for `-S`, whose
/// output would be LLVM assembly instead of the machine's, nor with `-flto=thin` (ThinLTO does
/// not import from the hooks' full-LTO module: they would be calls anyway, and unmarked).
pub fn lto_allowed(args: &[OsString]) -> bool {
    !args
        .iter()
        .any(|a| a == "-fno-lto" || a == "-S" || a == "-flto=thin")
}

/// The bitcode archive of the hooks for `compiler` (whose `--version` says `version`), built and
/// checked in `lib_dir` the first time; why not when it cannot be (the hooks are calls then).
pub fn inlined_hooks(compiler: &OsStr, version: &str, lib_dir: &Path) -> Result<PathBuf, String> {
    // The sources are in the hash of `lib_dir`.
    let recipe = BITCODE_FLAGS.join(" ");
    let product = PerCompiler {
        kind: "lto",
        compiler,
        version,
        recipe: recipe.as_bytes(),
        product: BITCODE_ARCHIVE_NAME,
        without: "the instrumentation hooks stay calls",
    };
    product.get(lib_dir, |work| prepare(compiler, lib_dir, work))
}

/// Compiles the hooks to bitcode in `work`, archives them, and links a probe against them.
fn prepare(compiler: &OsStr, lib_dir: &Path, work: &Path) -> Result<(), String> {
    write_sources(work, &SOURCES)?;
    let mut objects = Vec::new();
    for (name, _) in SOURCES.iter().filter(|(n, _)| n.ends_with(".c")) {
        let object = work.join(name.replace(".c", ".o"));
        run(Command::new(compiler)
            .args(BITCODE_FLAGS)
            .arg(work.join(name))
            .arg("-o")
            .arg(&object))?;
        objects.push(object);
    }
    let archive = work.join(BITCODE_ARCHIVE_NAME);
    run(Command::new(archiver(compiler))
        .arg("rcs")
        .arg(&archive)
        .args(&objects))?;
    let probe = write_probe(work)?;
    let args = [
        OsString::from("-O2"),
        probe.into_os_string(),
        "-o".into(),
        work.join("probe").into_os_string(),
    ];
    run(Command::new(compiler).args(wrapped_args(
        Family::Clang,
        Invocation::Link,
        Hooks::Inlined(&archive),
        &args,
        lib_dir,
    )))
}

/// An archiver that indexes LLVM bitcode: clang's own llvm-ar (`-print-prog-name`), else
/// `llvm-ar`, else `ar` (GNU ar does through LLVM's plugin in `bfd-plugins`, which Debian's
/// clang installs; if it does not, the probe link fails and says so).
fn archiver(compiler: &OsStr) -> OsString {
    let named = compiler_says(compiler, "-print-prog-name=llvm-ar");
    [named.as_str(), "llvm-ar"]
        .into_iter()
        .filter(|c| !c.is_empty())
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or("ar")
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lto_stays_off_when_the_arguments_say_so() {
        assert!(lto_allowed(&[OsString::from("a.c")]));
        assert!(!lto_allowed(&[OsString::from("-fno-lto")]));
        assert!(!lto_allowed(&[OsString::from("-S")]));
    }

    #[test]
    fn the_rest_of_the_runtime_leaves_the_inlined_hooks_out() {
        assert_eq!(&REST_ARCHIVE[..8], b"!<arch>\n");
        let holds = |s: &[u8]| REST_ARCHIVE.windows(s.len()).any(|x| x == s);
        assert!(holds(b"nl_inst_sample"));
        assert!(!holds(b"__tsan_read4"));
        assert!(!holds(b"__tsan_atomic32_load"));
    }
}
