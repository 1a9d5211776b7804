//! The compiler wrappers `numalens cc`, `numalens c++` and `numalens fortran`: the real compiler,
//! with ThreadSanitizer's instrumentation turned on and numalens' runtime linked in place of
//! ThreadSanitizer's own.
//!
//! - Compiling: `-fsanitize=thread -g` (the accesses become calls to `__tsan_*`; debug
//!   information names objects and code), and for gcc `-fno-builtin-memcpy/-memmove/-memset`:
//!   gcc expands those builtins inline without instrumenting them, so they would go uncounted.
//! - Linking: our archive goes after the user's inputs (an archive only serves symbols still
//!   undefined where it stands). gcc adds `-ltsan` before the inputs: a directory holding an
//!   empty `libtsan.a` is put first on the library path so that it resolves to nothing; clang is
//!   told not to link its runtime (`-fno-sanitize-link-runtime`). Both get
//!   `-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset` so the program's own calls to those are
//!   counted as range accesses (shared libraries keep theirs).
//!
//! - OpenMP (`-fopenmp`) passes through: the parallel regions are outlined into functions of the
//!   program and instrumented like the rest; the OpenMP runtime (gcc's libgomp, clang's libomp)
//!   is an uninstrumented shared library. LLVM's libomp makes no ThreadSanitizer calls itself and
//!   needs no symbol beyond the `__tsan_*` ones. At start-up it tries to load its OMPT tool
//!   `libarcher.so` (race detection for OpenMP under ThreadSanitizer), which turns itself on only
//!   if the program exports `RunningOnValgrind`, as ThreadSanitizer's runtime does: ours does
//!   not define it, so Archer, even when found, stops at once and none of its `Annotate*` calls
//!   run. The runtime must keep it that way; nothing is added for OpenMP here.
//!
//! - Inlined hooks: the accesses' fast path becomes code of the program itself.
//!   - With clang, when it can link with link-time optimisation, C and C++ builds get `-flto`
//!     (compiling and linking) and link the access hooks as LLVM bitcode, then the rest of the
//!     runtime, so the full-LTO link inlines each hook's fast path into the instrumented code
//!     ([`super::inline`]). `-fno-lto` among the arguments turns it off.
//!   - With gcc (C, C++ and Fortran), a gcc plugin replaces each access call with the fast path
//!     right after gcc's instrumentation ([`super::gcc_plugin`]); it needs gcc's plugin headers.
//!
//!   `NUMALENS_INST_INLINE=0` turns both off. When either cannot be built, the hooks are calls,
//!   as above.
//!
//! The archives are embedded in the binary and written once to a cache directory named by their
//! hash, like the preloaded runtime.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::inline::{self, REST_ARCHIVE, REST_ARCHIVE_NAME};
use super::llvm_plugin;
use super::{calls_mark, gcc_plugin, per_compiler};
use numalens_preload::runtime::{RuntimeError, install_file, install_in_cache};

/// The instrumentation runtime archive, as built by `build.rs`.
pub const INST_ARCHIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libnumalens_inst.a"));

/// Which wrapper: the language decides the default compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    C,
    Cxx,
    Fortran,
}

impl Language {
    /// The environment variable naming the real compiler, and its default. Not `CC`/`CXX`/`FC`:
    /// those usually name this wrapper.
    pub fn compiler_variable(self) -> (&'static str, &'static str) {
        match self {
            Language::C => ("NUMALENS_CC", "cc"),
            Language::Cxx => ("NUMALENS_CXX", "c++"),
            Language::Fortran => ("NUMALENS_FC", "gfortran"),
        }
    }

    pub fn compiler(self) -> OsString {
        let (var, default) = self.compiler_variable();
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.into())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Gcc,
    Clang,
}

/// gcc or clang, from `COMPILER --version`.
pub fn compiler_family(compiler: &OsStr) -> std::io::Result<Family> {
    Ok(compiler_version(compiler)?.0)
}

/// The family and the `--version` text of a compiler.
fn compiler_version(compiler: &OsStr) -> std::io::Result<(Family, String)> {
    let out = Command::new(compiler).arg("--version").output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let family = if text.contains("clang") {
        Family::Clang
    } else {
        Family::Gcc
    };
    Ok((family, text))
}

/// What a compiler invocation does, from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invocation {
    /// Only asks something (`--version`, `-dumpversion`, `-print-*`, no inputs): passed through.
    Query,
    /// Compiles, preprocesses or checks, without linking (`-c`, `-S`, `-E`, `-M`, `-MM`,
    /// `-fsyntax-only`).
    CompileOnly,
    /// Links (possibly compiling first).
    Link,
}

pub fn classify(args: &[OsString]) -> Invocation {
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let no_link = ["-c", "-S", "-E", "-M", "-MM", "-fsyntax-only"];
    if args.iter().any(|a| no_link.contains(a)) {
        return Invocation::CompileOnly;
    }
    let takes_value = [
        "-o", "-x", "-I", "-L", "-D", "-U", "-MF", "-MT", "-MQ", "-include",
    ];
    let mut inputs = 0;
    let mut skip = false;
    for a in &args {
        if skip {
            skip = false;
            continue;
        }
        if takes_value.contains(a) {
            skip = true;
        } else if !a.starts_with('-') || *a == "-" || a.starts_with("-l") || a.starts_with("-Wl,") {
            inputs += 1;
        }
    }
    if inputs == 0 {
        Invocation::Query
    } else {
        Invocation::Link
    }
}

/// The environment variable that turns inlined hooks off (`0`, `off`, `no` or `false`).
pub const INLINE_VARIABLE: &str = "NUMALENS_INST_INLINE";

/// How the hooks reach the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hooks<'a> {
    /// One call per access, to the native archive.
    Calls,
    /// Inlined by clang's full link-time optimisation from this bitcode archive of the hooks.
    Inlined(&'a Path),
    /// Written into the program by this gcc plugin; the rest are calls to the native archive.
    Plugin(&'a Path),
}

/// The full command line for `compiler` given the user's `args`; `lib_dir` holds the archives.
pub fn wrapped_args(
    family: Family,
    invocation: Invocation,
    hooks: Hooks<'_>,
    args: &[OsString],
    lib_dir: &Path,
) -> Vec<OsString> {
    if invocation == Invocation::Query {
        return args.to_vec();
    }
    let mut out: Vec<OsString> = vec!["-fsanitize=thread".into(), "-g".into()];
    if let Hooks::Inlined(_) = hooks {
        // Before the user's arguments, so that a `-flto=thin` of theirs still wins (the hooks
        // are then calls again: ThinLTO does not import from full-LTO modules).
        out.push("-flto".into());
    }
    if let Hooks::Plugin(plugin) = hooks {
        out.extend(gcc_plugin::compile_flags(plugin));
    }
    if family == Family::Gcc {
        out.extend(
            [
                "-fno-builtin-memcpy",
                "-fno-builtin-memmove",
                "-fno-builtin-memset",
            ]
            .map(Into::into),
        );
    }
    out.extend(args.iter().cloned());
    if invocation == Invocation::Link {
        match family {
            Family::Gcc => {
                let mut l = OsString::from("-L");
                l.push(lib_dir);
                out.push(l);
            }
            Family::Clang => out.push("-fno-sanitize-link-runtime".into()),
        }
        // A `-x LANG` of the user's applies to every file after it: ours are objects.
        if args
            .iter()
            .any(|a| a.to_str().is_some_and(|a| a.starts_with("-x")))
        {
            out.extend(["-x", "none"].map(OsString::from));
        }
        match hooks {
            Hooks::Calls | Hooks::Plugin(_) => out.push(lib_dir.join(ARCHIVE_NAME).into()),
            Hooks::Inlined(bitcode) => {
                out.push(bitcode.into());
                out.push(lib_dir.join(REST_ARCHIVE_NAME).into());
            }
        }
        out.push("-Wl,--wrap=memcpy,--wrap=memmove,--wrap=memset".into());
    }
    out
}

pub const ARCHIVE_NAME: &str = "libnumalens_inst.a";

/// The hash of the archives and of the inlined hooks' sources: names their cache directory.
/// `build.rs` computes it, so a wrapper call does not hash the megabyte again.
pub fn archive_hash() -> &'static str {
    env!("NUMALENS_INST_HASH")
}

/// An archive with no members: what gcc's `-ltsan` finds.
const EMPTY_ARCHIVE: &[u8] = b"!<arch>\n";

/// Writes the archives (`libnumalens_inst.a`, the rest archive for inlined hooks, and an empty
/// `libtsan.a` for gcc's `-ltsan`) to `<base>/inst-<hash16>/` unless there already; returns the
/// directory.
pub fn install_archive_in(base: &Path) -> Result<PathBuf, RuntimeError> {
    let dir = base.join(format!("inst-{}", archive_hash()));
    install_file(&dir, ARCHIVE_NAME, INST_ARCHIVE)?;
    install_file(&dir, REST_ARCHIVE_NAME, REST_ARCHIVE)?;
    install_file(&dir, "libtsan.a", EMPTY_ARCHIVE)?;
    Ok(dir)
}

/// The archive's directory in the user's cache (or the temporary directory).
pub fn archive_dir() -> Result<PathBuf, RuntimeError> {
    install_in_cache(install_archive_in)
}

/// The command `numalens cc|c++|fortran ARGS` runs.
pub fn wrapper_command(language: Language, args: &[OsString]) -> Result<Command, String> {
    let compiler = language.compiler();
    let (var, _) = language.compiler_variable();
    let invocation = classify(args);
    if invocation == Invocation::Query {
        return Ok(passed_through(&compiler, args));
    }
    let (family, version) = compiler_version(&compiler).map_err(|e| {
        format!(
            "cannot run the compiler `{}`: {e}; install it or name another one with {var}",
            compiler.to_string_lossy()
        )
    })?;
    // Compiling asks whether the hooks are inlined too, which needs the archives' directory:
    // the plugin and the bitcode are built there.
    let could_inline = !per_compiler::turned_off(std::env::var_os(INLINE_VARIABLE).as_deref())
        && match family {
            Family::Gcc => true,
            Family::Clang => language != Language::Fortran && inline::lto_allowed(args),
        };
    let lib_dir = if invocation == Invocation::Link || could_inline {
        archive_dir().map_err(|e| format!("cannot write the instrumentation runtime: {e}"))?
    } else {
        PathBuf::new()
    };
    let inliner = match family {
        _ if !could_inline => Err(why_not_inlined(family, language)),
        Family::Gcc => gcc_plugin::plugin_for(&compiler, &version, &lib_dir),
        Family::Clang => inline::inlined_hooks(&compiler, &version, &lib_dir),
    };
    let hooks = match (&inliner, family) {
        (Err(_), _) => Hooks::Calls,
        (Ok(plugin), Family::Gcc) => Hooks::Plugin(plugin),
        (Ok(bitcode), Family::Clang) => Hooks::Inlined(bitcode),
    };
    let mut cmd = Command::new(&compiler);
    cmd.args(wrapped_args(family, invocation, hooks, args, &lib_dir));
    if let (Invocation::Link, Err(why)) = (invocation, &inliner) {
        cmd.args(calls_mark::marker_object(&compiler, &lib_dir, why));
    }
    if let Hooks::Inlined(_) = hooks {
        // Without it the hooks are inlined all the same (said once, when it cannot be built).
        if let Ok(plugin) = llvm_plugin::plugin_for(&compiler, &version, &lib_dir) {
            cmd.arg(llvm_plugin::compile_flag(&plugin));
        }
    }
    Ok(cmd)
}

/// Why the hooks are calls when inlining was not even tried.
fn why_not_inlined(family: Family, language: Language) -> String {
    if per_compiler::turned_off(std::env::var_os(INLINE_VARIABLE).as_deref()) {
        format!("{INLINE_VARIABLE} turned inlined hooks off")
    } else if family == Family::Clang && language == Language::Fortran {
        "clang's Fortran builds get no inlined hooks; build with gfortran and gcc's plugin".into()
    } else {
        "clang inlines the hooks by full link-time optimisation, which -fno-lto, -flto=thin or \
         -S turned off"
            .into()
    }
}

fn passed_through(compiler: &OsStr, args: &[OsString]) -> Command {
    let mut cmd = Command::new(compiler);
    cmd.args(args);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(|s| OsString::from(*s)).collect()
    }

    /// The wrapper's arguments for `args`, with the runtime's archives in /cache/inst-x.
    fn wrapped(family: Family, invocation: Invocation, hooks: Hooks, args: &[&str]) -> Vec<String> {
        wrapped_args(
            family,
            invocation,
            hooks,
            &os(args),
            Path::new("/cache/inst-x"),
        )
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect()
    }

    #[test]
    fn invocations_are_told_apart() {
        assert_eq!(classify(&os(&["--version"])), Invocation::Query);
        assert_eq!(classify(&os(&["-dumpversion"])), Invocation::Query);
        assert_eq!(
            classify(&os(&["-c", "a.c", "-o", "a.o"])),
            Invocation::CompileOnly
        );
        assert_eq!(classify(&os(&["-E", "a.c"])), Invocation::CompileOnly);
        assert_eq!(classify(&os(&["a.c", "-o", "a"])), Invocation::Link);
        assert_eq!(classify(&os(&["a.o", "b.o", "-lm"])), Invocation::Link);
        assert_eq!(classify(&os(&["-o", "x"])), Invocation::Query);
    }

    #[test]
    fn gcc_links_the_archive_instead_of_libtsan_and_wraps_memory_functions() {
        let a = wrapped(
            Family::Gcc,
            Invocation::Link,
            Hooks::Calls,
            &["a.c", "-o", "a"],
        );
        assert_eq!(a[0], "-fsanitize=thread");
        assert!(a.contains(&"-fno-builtin-memset".to_string()));
        assert!(a.contains(&"-L/cache/inst-x".to_string()));
        assert!(a.contains(&"/cache/inst-x/libnumalens_inst.a".to_string()));
        assert!(a.last().unwrap().contains("--wrap=memcpy"));
        let c = wrapped(
            Family::Gcc,
            Invocation::CompileOnly,
            Hooks::Calls,
            &["-c", "a.c"],
        );
        assert!(!c.iter().any(|s| s.starts_with("-L")));
    }

    #[test]
    fn clang_gets_the_archive_instead_of_its_runtime() {
        let a = wrapped(Family::Clang, Invocation::Link, Hooks::Calls, &["a.o"]);
        assert!(a.contains(&"-fno-sanitize-link-runtime".to_string()));
        assert!(a.contains(&"/cache/inst-x/libnumalens_inst.a".to_string()));
        assert!(!a.contains(&"-fno-builtin-memset".to_string()));
        assert!(!a.contains(&"-flto".to_string()));
    }

    #[test]
    fn inlined_hooks_compile_and_link_with_lto_against_the_bitcode_archive() {
        let bitcode = Path::new("/cache/inst-x/lto-1/libnumalens_inst_hooks.a");
        let c = wrapped(
            Family::Clang,
            Invocation::CompileOnly,
            Hooks::Inlined(bitcode),
            &["-c", "a.c", "-flto=thin"],
        );
        // Ours comes first, so the user's own -flto=... wins.
        let ours = c.iter().position(|a| a == "-flto").expect("-flto");
        assert!(ours < c.iter().position(|a| a == "-flto=thin").unwrap());
        assert!(!c.iter().any(|a| a.contains("libnumalens_inst")));
        let l = wrapped(
            Family::Clang,
            Invocation::Link,
            Hooks::Inlined(bitcode),
            &["a.o", "-o", "a"],
        );
        assert!(l.contains(&"-flto".to_string()));
        // The hooks' bitcode, then the rest of the runtime, after the program's inputs.
        let at = |s: &str| {
            l.iter()
                .position(|a| a == s)
                .unwrap_or_else(|| panic!("{s}"))
        };
        assert!(at("a.o") < at("/cache/inst-x/lto-1/libnumalens_inst_hooks.a"));
        assert!(
            at("/cache/inst-x/lto-1/libnumalens_inst_hooks.a")
                < at("/cache/inst-x/libnumalens_inst_rest.a")
        );
        assert!(!l.contains(&"/cache/inst-x/libnumalens_inst.a".to_string()));
        assert!(l.contains(&"-fno-sanitize-link-runtime".to_string()));
    }

    #[test]
    fn the_archives_install_once() {
        let d = tempfile::tempdir().unwrap();
        let a = install_archive_in(d.path()).unwrap();
        assert_eq!(install_archive_in(d.path()).unwrap(), a);
        assert_eq!(fs::read(a.join("libtsan.a")).unwrap(), EMPTY_ARCHIVE);
        assert_eq!(fs::read(a.join(ARCHIVE_NAME)).unwrap(), INST_ARCHIVE);
        assert_eq!(&INST_ARCHIVE[..8], b"!<arch>\n");
        assert_eq!(fs::read(a.join(REST_ARCHIVE_NAME)).unwrap(), REST_ARCHIVE);
        // The hash build.rs made is the one of everything the directory is built from.
        let mut all = [INST_ARCHIVE, REST_ARCHIVE].concat();
        for (_, text) in inline::SOURCES {
            all.extend_from_slice(text.as_bytes());
        }
        assert_eq!(
            archive_hash(),
            numalens_preload::runtime::content_hash(&all)
        );
    }
}
