//! What the wrappers build with the user's own compiler, once per compiler: the hooks' LLVM
//! bitcode for clang ([`super::inline`]) with its pass plugin ([`super::llvm_plugin`]), and the
//! gcc plugin ([`super::gcc_plugin`]). Each is
//! built the first time a wrapper needs it, so it always fits the compiler that uses it, and
//! numalens itself builds without either compiler.
//!
//! Each product lives in `<kind>-<hash>/` beside the archives, the hash taken over the
//! compiler's path, its `--version` and the recipe (flags and sources). The directory appears,
//! by a rename, only once the product is built and checked, so concurrent wrappers (`make -j`)
//! never see half of one. When the build fails, the reason is kept in `<kind>-<hash>.failed`,
//! said once, and the hooks stay calls until that file is removed.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_preload::runtime::content_hash;

/// One product of one compiler.
pub struct PerCompiler<'a> {
    /// `lto`, `llvm-plugin` or `gcc-plugin`: names the directory and the failure file.
    pub kind: &'a str,
    pub compiler: &'a OsStr,
    /// What `COMPILER --version` says.
    pub version: &'a str,
    /// Everything else the product depends on: flags, sources.
    pub recipe: &'a [u8],
    /// The one file kept in the directory.
    pub product: &'a str,
    /// What goes without it, said when it cannot be built.
    pub without: &'a str,
}

impl PerCompiler<'_> {
    /// The product in `lib_dir`, built by `build` in a scratch directory the first time; why not
    /// when it cannot be built (the hooks stay calls then).
    pub fn get(
        &self,
        lib_dir: &Path,
        build: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<PathBuf, String> {
        let mut identity = self.compiler.as_encoded_bytes().to_vec();
        identity.extend_from_slice(self.version.as_bytes());
        identity.extend_from_slice(self.recipe);
        let id = content_hash(&identity);
        let dir = lib_dir.join(format!("{}-{id}", self.kind));
        let product = dir.join(self.product);
        if product.exists() {
            return Ok(product);
        }
        let failed = lib_dir.join(format!("{}-{id}.failed", self.kind));
        if let Ok(why) = std::fs::read_to_string(&failed) {
            return Err(why.trim().to_string());
        }
        let work = lib_dir.join(format!(".{}-{id}-{}", self.kind, std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        let made = std::fs::create_dir_all(&work)
            .map_err(|e| format!("{}: {e}", work.display()))
            .and_then(|()| build(&work));
        let result = match made {
            Ok(()) => {
                for entry in std::fs::read_dir(&work).into_iter().flatten().flatten() {
                    if entry.file_name() != self.product {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
                // Another wrapper running at the same time may have won: its directory is as good.
                let _ = std::fs::rename(&work, &dir);
                if product.exists() {
                    Ok(product)
                } else {
                    Err(format!("{} vanished after it was built", product.display()))
                }
            }
            Err(why) => {
                eprintln!(
                    "numalens: {} with {}: {why} (kept in {}; remove it to try again)",
                    self.without,
                    self.compiler.to_string_lossy(),
                    failed.display()
                );
                let why = why.trim().to_string();
                let _ = std::fs::write(&failed, format!("{why}\n"));
                Err(why)
            }
        };
        let _ = std::fs::remove_dir_all(&work);
        result
    }
}

/// What a compiler plugin is made from: its flags, its sources and the development files it is
/// built against (`None`: not installed). Whether those are installed is part of it: a failure
/// kept because they were missing is not the answer any more once they are there, so the next
/// build tries again instead of keeping the slower hooks until a file is deleted.
pub fn plugin_recipe(
    flags: &[&str],
    sources: &[(&str, &str)],
    built_against: Option<&Path>,
) -> Vec<u8> {
    let mut recipe = flags.join(" ").into_bytes();
    for (_, text) in sources {
        recipe.extend_from_slice(text.as_bytes());
    }
    match built_against {
        Some(path) => recipe.extend_from_slice(path.as_os_str().as_encoded_bytes()),
        None => recipe.extend_from_slice(b"not installed"),
    }
    recipe
}

/// A program whose one load (4 bytes) is instrumented: what each product is checked on.
const PROBE_SOURCE: &str = "int nl_probe_value;\nint main(void) { return nl_probe_value; }\n";

/// Writes the probe program into `work` as `probe.c` and returns its path.
pub fn write_probe(work: &Path) -> Result<PathBuf, String> {
    write_sources(work, &[("probe.c", PROBE_SOURCE)])?;
    Ok(work.join("probe.c"))
}

/// What `COMPILER FLAG` prints (`-print-file-name=…`, `-dumpversion`), trimmed; empty when it
/// cannot be run.
pub fn compiler_says(compiler: &OsStr, flag: &str) -> String {
    Command::new(compiler)
        .arg(flag)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Writes `files` (name, text) into `dir`.
pub fn write_sources(dir: &Path, files: &[(&str, &str)]) -> Result<(), String> {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs `cmd`; on failure, says how it ended and the last lines it printed.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().rev().take(3).collect::<Vec<_>>();
    Err(format!(
        "{cmd:?} exited with {}: {}",
        out.status,
        last.into_iter().rev().collect::<Vec<_>>().join(" / ")
    ))
}

/// Whether the user's setting (`NUMALENS_INST_INLINE`) turns inlined hooks off.
pub fn turned_off(setting: Option<&OsStr>) -> bool {
    setting.and_then(OsStr::to_str).is_some_and(|v| {
        ["0", "off", "no", "false"].contains(&v.trim().to_ascii_lowercase().as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(compiler: &'a str) -> PerCompiler<'a> {
        PerCompiler {
            kind: "thing",
            compiler: OsStr::new(compiler),
            version: "v1",
            recipe: b"-O2",
            product: "out.txt",
            without: "the thing goes",
        }
    }

    #[test]
    fn a_product_is_built_once_and_kept_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut builds = 0;
        for _ in 0..2 {
            let got = spec("cc").get(dir.path(), |work| {
                builds += 1;
                std::fs::write(work.join("scratch.o"), "x").unwrap();
                std::fs::write(work.join("out.txt"), "product").unwrap();
                Ok(())
            });
            let got = got.expect("built");
            assert_eq!(std::fs::read_to_string(&got).unwrap(), "product");
            let kept: Vec<_> = std::fs::read_dir(got.parent().unwrap()).unwrap().collect();
            assert_eq!(kept.len(), 1);
        }
        assert_eq!(builds, 1);
        // Another compiler gets its own.
        assert!(
            spec("c2")
                .get(dir.path(), |w| run(
                    Command::new("touch").arg(w.join("out.txt"))
                ))
                .is_ok()
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    /// A compiler that cannot build it keeps the calls, once, with the reason kept.
    #[test]
    fn a_failed_build_is_remembered_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let got = spec("cc").get(dir.path(), |_| run(&mut Command::new("false")));
        let why_now = got.expect_err("not built");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].starts_with("thing-") && names[0].ends_with(".failed"));
        let why = std::fs::read_to_string(dir.path().join(&names[0])).unwrap();
        assert!(why.contains("exited with"), "{why}");
        let again = spec("cc").get(dir.path(), |_| panic!("not built again"));
        // The kept reason is the one said the first time: the program's mark carries it.
        assert_eq!(again, Err(why_now));
    }

    #[test]
    fn inlining_can_be_turned_off() {
        assert!(!turned_off(None));
        assert!(!turned_off(Some(OsStr::new("1"))));
        for off in ["0", "off", "OFF", "no", "false", " no "] {
            assert!(turned_off(Some(OsStr::new(off))), "{off}");
        }
    }
}
