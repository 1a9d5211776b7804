//! The gcc plugin that writes the hooks' fast path into gcc's instrumented code
//! (`runtime/inst/gcc_plugin.cc` says how).
//!
//! gcc inserts its ThreadSanitizer calls after inlining, so the hooks stay calls whatever the
//! link does: one call per load and store, and loops that no longer vectorise. With the plugin,
//! the accesses' fast path is code of the program itself, as clang's link-time optimisation makes
//! it ([`super::inline`]), for C, C++ and Fortran alike.
//!
//! The plugin is built with the user's own gcc, against that gcc's plugin headers (Debian and
//! Ubuntu: `gcc-N-plugin-dev`), the first time a wrapper needs it, once per compiler
//! ([`super::per_compiler`]): a plugin loads only into the gcc it was built for. A small
//! instrumented program is then built with it and must link and keep no access call. If any of
//! that fails, the reason is said once and the hooks stay calls.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::per_compiler::{
    PerCompiler, compiler_says, plugin_recipe, run, write_probe, write_sources,
};
use super::toolchain::{Family, Hooks, Invocation, wrapped_args};

/// The plugin, in a compiler's `gcc-plugin-<hash>` directory.
pub const PLUGIN_NAME: &str = "numalens_gcc.so";

/// The plugin's source and the headers it includes.
pub const SOURCES: [(&str, &str); 6] = [
    (
        "gcc_plugin.cc",
        include_str!("../runtime/inst/gcc_plugin.cc"),
    ),
    (
        "gcc_plugin_gimple.h",
        include_str!("../runtime/inst/gcc_plugin_gimple.h"),
    ),
    (
        "gcc_plugin_versions.h",
        include_str!("../runtime/inst/gcc_plugin_versions.h"),
    ),
    (
        "gcc_plugin_registers.h",
        include_str!("../runtime/inst/gcc_plugin_registers.h"),
    ),
    ("fast_path.h", include_str!("../runtime/inst/fast_path.h")),
    (
        "numalens_inst.h",
        include_str!("../runtime/include/numalens_inst.h"),
    ),
];

/// How the plugin is compiled: C++ through the user's gcc driver (which reaches its own
/// `cc1plus`, the one gcc's headers are written for), as a shared object gcc loads.
const PLUGIN_FLAGS: [&str; 7] = [
    "-x",
    "c++",
    "-shared",
    "-fPIC",
    "-O2",
    "-fno-rtti",
    "-fno-exceptions",
];

/// What every compiling or linking command gets with the plugin. The calls to
/// `__tsan_func_entry`/`__tsan_func_exit` are not emitted at all: their hooks do nothing.
pub fn compile_flags(plugin: &Path) -> [OsString; 2] {
    let mut load = OsString::from("-fplugin=");
    load.push(plugin);
    [load, "--param=tsan-instrument-func-entry-exit=0".into()]
}

/// The plugin for `compiler` (whose `--version` says `version`), built and checked in `lib_dir`
/// the first time; why not when it cannot be (the hooks are calls then).
pub fn plugin_for(compiler: &OsStr, version: &str, lib_dir: &Path) -> Result<PathBuf, String> {
    let recipe = recipe(compiler);
    let product = PerCompiler {
        kind: "gcc-plugin",
        compiler,
        version,
        recipe: &recipe,
        product: PLUGIN_NAME,
        without: "the instrumentation hooks stay calls",
    };
    product.get(lib_dir, |work| prepare(compiler, lib_dir, work))
}

/// What the plugin is made from, gcc's plugin headers included.
fn recipe(compiler: &OsStr) -> Vec<u8> {
    plugin_recipe(
        &PLUGIN_FLAGS,
        &SOURCES,
        plugin_headers(compiler).ok().as_deref(),
    )
}

/// gcc's plugin headers, or why there are none.
fn plugin_headers(compiler: &OsStr) -> Result<PathBuf, String> {
    let include = Path::new(&compiler_says(compiler, "-print-file-name=plugin")).join("include");
    if include.join("gcc-plugin.h").exists() {
        return Ok(include);
    }
    Err(format!(
        "gcc's plugin headers are not installed (no {}; on Debian or Ubuntu: \
         apt-get install gcc-{}-plugin-dev)",
        include.join("gcc-plugin.h").display(),
        compiler_says(compiler, "-dumpversion")
    ))
}

/// Builds the plugin in `work` and an instrumented probe with it.
fn prepare(compiler: &OsStr, lib_dir: &Path, work: &Path) -> Result<(), String> {
    let include = plugin_headers(compiler)?;
    write_sources(work, &SOURCES)?;
    let plugin = work.join(PLUGIN_NAME);
    run(Command::new(compiler)
        .args(PLUGIN_FLAGS)
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(work)
        .arg(work.join("gcc_plugin.cc"))
        .arg("-o")
        .arg(&plugin)
        .arg("-lstdc++"))?;
    let probe_source = write_probe(work)?;
    // Compiled alone first: the object names the hooks it calls, and must call no access hook.
    let object = work.join("probe.o");
    let compile = [
        OsString::from("-O2"),
        "-c".into(),
        // C whichever driver (g++ takes a `.c` file for C++).
        "-x".into(),
        "c".into(),
        probe_source.into_os_string(),
        "-o".into(),
        object.clone().into_os_string(),
    ];
    let wrapped = |invocation, args: &[OsString]| {
        wrapped_args(
            Family::Gcc,
            invocation,
            Hooks::Plugin(&plugin),
            args,
            lib_dir,
        )
    };
    run(Command::new(compiler).args(wrapped(Invocation::CompileOnly, &compile)))?;
    let compiled = std::fs::read(&object).map_err(|e| format!("{}: {e}", object.display()))?;
    if compiled.windows(12).any(|w| w == b"__tsan_read4") {
        return Err("the plugin loaded but left the probe's access a call".into());
    }
    let link = [
        object.into_os_string(),
        "-o".into(),
        work.join("probe").into_os_string(),
    ];
    run(Command::new(compiler).args(wrapped(Invocation::Link, &link)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_loaded_and_the_empty_entry_hooks_are_not_called() {
        let flags = compile_flags(Path::new("/cache/gcc-plugin-1/numalens_gcc.so"));
        assert_eq!(flags[0], "-fplugin=/cache/gcc-plugin-1/numalens_gcc.so");
        assert_eq!(flags[1], "--param=tsan-instrument-func-entry-exit=0");
    }

    /// A "compiler" that answers `-print-file-name=plugin` with `dir` and `-dumpversion` with 12.
    fn fake_gcc(dir: &Path) -> PathBuf {
        let script = dir.join("gcc");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\ncase \"$1\" in -print-file-name=plugin) echo {};; *) echo 12;; esac\n",
                dir.join("plugin").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    #[test]
    fn installing_the_headers_makes_a_new_attempt_not_the_failure_kept_before() {
        let dir =
            std::env::temp_dir().join(format!("numalens-plugin-recipe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("plugin/include")).unwrap();
        let gcc = fake_gcc(&dir);
        let without = recipe(gcc.as_os_str());
        assert!(plugin_headers(gcc.as_os_str()).is_err());
        std::fs::write(dir.join("plugin/include/gcc-plugin.h"), "").unwrap();
        let with = recipe(gcc.as_os_str());
        assert!(plugin_headers(gcc.as_os_str()).is_ok());
        assert_ne!(
            without, with,
            "the failure's key must change with the headers"
        );
        assert_eq!(
            with,
            recipe(gcc.as_os_str()),
            "and stay while nothing changes"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Without plugin headers (a compiler that answers nothing), the reason says what to install.
    #[test]
    fn missing_headers_say_which_package_to_install() {
        let why = plugin_headers(OsStr::new("false")).unwrap_err();
        assert!(why.contains("plugin-dev"), "{why}");
    }
}
