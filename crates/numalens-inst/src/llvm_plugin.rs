//! The LLVM pass plugin that steps the sampling countdowns once per run of accesses in clang
//! builds whose hooks are inlined by link-time optimisation (`runtime/inst/llvm_plugin.cc` says
//! how; [`super::inline`] inlines the hooks).
//!
//! The plugin is built with the user's own clang against the headers of the LLVM it was built
//! from (`llvm-config` of the same major version; Debian and Ubuntu: `llvm-N-dev`), the first
//! time a wrapper needs it, once per compiler ([`super::per_compiler`]): a plugin loads only into
//! the LLVM it was built for. A small instrumented object is then compiled with it, and must show
//! the pass's work. Without it the hooks are inlined all the same; each access then steps the
//! countdowns itself, and sampled recordings of the real codes of `bench/real` took up to four
//! times as long (docs/INST.md).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::per_compiler::{PerCompiler, compiler_says, plugin_recipe, run, write_sources};
use super::toolchain::{Family, Hooks, Invocation, wrapped_args};

/// The plugin, in a compiler's `llvm-plugin-<hash>` directory.
pub const PLUGIN_NAME: &str = "numalens_llvm.so";

/// The plugin's source and the header it includes.
pub const SOURCES: [(&str, &str); 2] = [
    (
        "llvm_plugin.cc",
        include_str!("../runtime/inst/llvm_plugin.cc"),
    ),
    ("fast_path.h", include_str!("../runtime/inst/fast_path.h")),
];

/// How the plugin is compiled, with LLVM's own flags after: C++ through the user's clang, as a
/// shared object clang loads.
const PLUGIN_FLAGS: [&str; 5] = ["-x", "c++", "-shared", "-fPIC", "-O2"];

/// A block of four accesses and no call: what the pass must have stepped once.
const PROBE_SOURCE: &str = "int nl_probe[4];\nint main(void) { nl_probe[1] = nl_probe[0] + \
                            nl_probe[2]; return nl_probe[3]; }\n";

/// What every compiling command gets with the plugin.
pub fn compile_flag(plugin: &Path) -> OsString {
    let mut flag = OsString::from("-fpass-plugin=");
    flag.push(plugin);
    flag
}

/// The plugin for `compiler` (whose `--version` says `version`), built and checked in `lib_dir`
/// the first time; why not when it cannot be.
pub fn plugin_for(compiler: &OsStr, version: &str, lib_dir: &Path) -> Result<PathBuf, String> {
    let llvm = llvm_config(compiler, version);
    let recipe = plugin_recipe(&PLUGIN_FLAGS, &SOURCES, llvm.as_deref().ok());
    let product = PerCompiler {
        kind: "llvm-plugin",
        compiler,
        version,
        recipe: &recipe,
        product: PLUGIN_NAME,
        without: "sampled recordings step the countdowns at every access",
    };
    product.get(lib_dir, |work| {
        prepare(compiler, llvm?.as_path(), lib_dir, work)
    })
}

/// The `llvm-config` of the LLVM `compiler` (whose `--version` says `version`) was built from,
/// with its headers installed beside it; or why there is none. Found by looking at files only:
/// every compile asks, and the answer is part of the cached plugin's key.
fn llvm_config(compiler: &OsStr, version: &str) -> Result<PathBuf, String> {
    let major = llvm_major(version).unwrap_or_default();
    let missing = || {
        format!(
            "LLVM's development files for clang {major} are not installed (no llvm-config \
             {major} with llvm/Passes/PassPlugin.h; on Debian or Ubuntu: apt-get install \
             llvm-{major}-dev)"
        )
    };
    if major.is_empty() {
        return Err(missing());
    }
    // The compiler's own directory first (Debian's clang is a link into /usr/lib/llvm-N/bin),
    // then the versioned names.
    let beside = std::fs::canonicalize(which(compiler))
        .ok()
        .and_then(|c| c.parent().map(|dir| dir.join("llvm-config")));
    let candidates = [
        beside,
        Some(PathBuf::from(format!(
            "/usr/lib/llvm-{major}/bin/llvm-config"
        ))),
        Some(which(format!("llvm-config-{major}").as_ref())),
    ];
    candidates
        .into_iter()
        .flatten()
        .filter_map(|config| std::fs::canonicalize(config).ok())
        .find(|config| {
            // LLVM installs bin/llvm-config beside include/, which says its version.
            config.parent().and_then(Path::parent).is_some_and(|root| {
                let include = root.join("include/llvm");
                include.join("Passes/PassPlugin.h").is_file()
                    && headers_major(&include).as_deref() == Some(major)
            })
        })
        .ok_or_else(missing)
}

/// The major version LLVM's headers under `include` (…/include/llvm) are of.
fn headers_major(include: &Path) -> Option<String> {
    let config = std::fs::read_to_string(include.join("Config/llvm-config.h")).ok()?;
    config.lines().find_map(|line| {
        let value = line.strip_prefix("#define LLVM_VERSION_MAJOR ")?;
        Some(value.trim().to_string())
    })
}

/// The major version in `clang --version`'s "clang version 14.0.6 …".
fn llvm_major(version: &str) -> Option<&str> {
    let rest = &version[version.find("clang version ")? + "clang version ".len()..];
    let major = rest.split('.').next()?;
    (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit())).then_some(major)
}

/// Where `compiler` is: itself when it names a path, else the first match on `PATH`.
fn which(compiler: &OsStr) -> PathBuf {
    let named = Path::new(compiler);
    if named.components().count() > 1 {
        return named.to_path_buf();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(named))
        .find(|path| path.is_file())
        .unwrap_or_else(|| named.to_path_buf())
}

/// Builds the plugin in `work` and checks it on an instrumented object.
fn prepare(compiler: &OsStr, config: &Path, lib_dir: &Path, work: &Path) -> Result<(), String> {
    write_sources(work, &SOURCES)?;
    let plugin = work.join(PLUGIN_NAME);
    let cxxflags = compiler_says(config.as_os_str(), "--cxxflags");
    run(Command::new(compiler)
        .args(PLUGIN_FLAGS)
        .args(cxxflags.split_whitespace())
        .arg("-I")
        .arg(work)
        .arg(work.join("llvm_plugin.cc"))
        .arg("-o")
        .arg(&plugin)
        .arg("-lstdc++"))?;
    write_sources(work, &[("probe.c", PROBE_SOURCE)])?;
    let object = work.join("probe.o");
    let mut compile = vec![compile_flag(&plugin), "-O2".into(), "-c".into()];
    compile.extend(["-x", "c"].map(OsString::from));
    compile.extend([
        work.join("probe.c").into(),
        "-o".into(),
        object.clone().into(),
    ]);
    let bitcode = work.join("probe-hooks.a");
    let wrapped = wrapped_args(
        Family::Clang,
        Invocation::CompileOnly,
        Hooks::Inlined(&bitcode),
        &compile,
        lib_dir,
    );
    run(Command::new(compiler).args(wrapped))?;
    // The object is LLVM bitcode, whose string table names what the pass declared.
    let compiled = std::fs::read(&object).map_err(|e| format!("{}: {e}", object.display()))?;
    if !compiled
        .windows(b"nl_countdown_read".len())
        .any(|w| w == b"nl_countdown_read")
    {
        return Err("the pass plugin loaded but did not step the probe's accesses".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_is_loaded_with_clangs_own_flag() {
        let flag = compile_flag(Path::new("/cache/llvm-plugin-1/numalens_llvm.so"));
        assert_eq!(flag, "-fpass-plugin=/cache/llvm-plugin-1/numalens_llvm.so");
    }

    /// Without LLVM's headers, the reason says what to install.
    #[test]
    fn missing_development_files_say_which_package_to_install() {
        let why = llvm_config(OsStr::new("false"), "clang version 9999.0.1").unwrap_err();
        assert!(why.contains("apt-get install llvm-9999-dev"), "{why}");
    }

    #[test]
    fn the_major_version_is_read_from_clangs_banner() {
        let debian = "Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu\n";
        assert_eq!(llvm_major(debian), Some("14"));
        assert_eq!(
            llvm_major("clang version 18.1.3 (Fedora 18.1.3-1)"),
            Some("18")
        );
        assert_eq!(llvm_major("gcc (Debian 12.2.0-14) 12.2.0"), None);
    }

    /// An LLVM tree laid out as installed (bin/llvm-config beside include/) is found beside the
    /// compiler, and not once its headers are gone.
    #[test]
    fn llvm_config_is_found_beside_the_compiler_with_its_headers() {
        let root = tempfile::tempdir().unwrap();
        let bin = root.path().join("bin");
        let headers = root.path().join("include/llvm/Passes");
        let config = root.path().join("include/llvm/Config");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&headers).unwrap();
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(bin.join("llvm-config"), "").unwrap();
        std::fs::write(bin.join("clang"), "").unwrap();
        std::fs::write(headers.join("PassPlugin.h"), "").unwrap();
        let major =
            |n: u32| format!("#define LLVM_VERSION_MAJOR {n}\n#define LLVM_VERSION_MINOR 0\n");
        std::fs::write(config.join("llvm-config.h"), major(9998)).unwrap();
        let clang = bin.join("clang");
        let version = "clang version 9998.0.0";
        let found = llvm_config(clang.as_os_str(), version).unwrap();
        assert_eq!(
            found,
            std::fs::canonicalize(bin.join("llvm-config")).unwrap()
        );
        // Headers of another LLVM are not this clang's.
        std::fs::write(config.join("llvm-config.h"), major(9997)).unwrap();
        assert!(llvm_config(clang.as_os_str(), version).is_err());
        std::fs::write(config.join("llvm-config.h"), major(9998)).unwrap();
        std::fs::remove_file(headers.join("PassPlugin.h")).unwrap();
        assert!(llvm_config(clang.as_os_str(), version).is_err());
    }
}
