//! The `libnumalens` runtime, embedded in the binary and written out where `LD_PRELOAD` can use
//! it.
//!
//! `build.rs` compiles the C runtime (`runtime/`) into a shared object; its bytes are part of this
//! crate ([`RUNTIME_SO`]) so that `cargo install` gives a working recorder with no resource files.
//! [`runtime_path`] writes them once to `$XDG_CACHE_HOME/numalens/runtime-<hash16>/` (or
//! `~/.cache/...`), atomically, and returns the path; the hash of the bytes names the directory,
//! so different builds never overwrite each other's runtime and a running program never sees a
//! half-written file. See `docs/RUNTIME.md` for what the runtime does.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The runtime shared object, as built by `build.rs`.
pub const RUNTIME_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libnumalens.so"));

/// File name of the runtime inside its cache directory.
pub const RUNTIME_FILE_NAME: &str = "libnumalens.so";

/// Why the runtime could not be made available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// `--runtime PATH` (or equivalent) names a file that does not exist.
    #[error("runtime override {path} does not exist (give the path of a libnumalens.so)")]
    OverrideMissing {
        /// The path given.
        path: PathBuf,
    },
    /// `--runtime PATH` names a file that is not a numalens runtime (it would run the program
    /// without writing a log, and the profile would have no objects).
    #[error(
        "{path} is not a numalens runtime ({why}); give a libnumalens.so built by numalens, or \
         leave --runtime out to use the embedded one"
    )]
    NotARuntime {
        /// The path given.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// Neither the cache directory nor a temporary directory could hold the runtime.
    #[error("cannot write the runtime to {path}: {source}")]
    Io {
        /// The file or directory that failed.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// First 16 hex digits of a 64-bit FNV-1a hash of `bytes`: names the cache directory of an
/// embedded file, so different builds never overwrite each other's.
pub fn content_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The hash of the embedded runtime: names its cache directory. `build.rs` computes it, so a
/// recording does not hash the runtime's bytes at start.
pub fn runtime_hash() -> &'static str {
    env!("NUMALENS_RUNTIME_HASH")
}

/// The path of a runtime to preload: `override_path` if given (it must exist), else the embedded
/// runtime written once to the cache directory, or to a temporary directory if the cache is not
/// writable.
pub fn runtime_path(override_path: Option<&Path>) -> Result<PathBuf, RuntimeError> {
    if let Some(p) = override_path {
        return check_runtime(p).map(|()| p.to_path_buf());
    }
    install_in_cache(install_runtime_in)
}

/// Checks that `path` is a numalens runtime: an ELF shared library that reads `NUMALENS_DIR` and
/// writes event logs (their magic is in it). Anything else would be preloaded, write nothing,
/// and leave a profile without objects that says it is complete.
pub fn check_runtime(path: &Path) -> Result<(), RuntimeError> {
    let not_ours = |why: &str| RuntimeError::NotARuntime {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    if !path.is_file() {
        return Err(RuntimeError::OverrideMissing {
            path: path.to_path_buf(),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| RuntimeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // e_type at offset 16: 3 is ET_DYN (shared libraries, and position-independent programs).
    if bytes.len() < 18 || &bytes[..4] != b"\x7fELF" {
        return Err(not_ours("not an ELF file"));
    }
    if u16::from_le_bytes([bytes[16], bytes[17]]) != 3 {
        return Err(not_ours("not a shared library"));
    }
    let holds = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    if !holds(b"NUMALENS_DIR") || !holds(crate::events::MAGIC) {
        return Err(not_ours("a library that writes no numalens event log"));
    }
    Ok(())
}

/// Runs `install` on `<cache>/numalens`, or, if that fails, on a per-user temporary directory.
pub fn install_in_cache<T>(
    install: impl Fn(&Path) -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    if let Some(cache) = cache_dir()
        && let Ok(done) = install(&cache.join("numalens"))
    {
        return Ok(done);
    }
    install(&std::env::temp_dir().join(format!("numalens-{}", uid_tag())))
}

/// Writes the embedded runtime to `<base>/runtime-<hash16>/libnumalens.so` unless an identical
/// file is there already; returns its path.
pub fn install_runtime_in(base: &Path) -> Result<PathBuf, RuntimeError> {
    let dir = base.join(format!("runtime-{}", runtime_hash()));
    install_file(&dir, RUNTIME_FILE_NAME, RUNTIME_SO)
}

/// Writes `bytes` to `dir/name` unless a file of that size is there already; returns its path.
/// The file is written to a temporary name in the same directory and renamed into place, so
/// concurrent callers and readers only see whole files.
pub fn install_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, RuntimeError> {
    let path = dir.join(name);
    if fs::metadata(&path).is_ok_and(|m| m.len() == bytes.len() as u64) {
        return Ok(path);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RuntimeError::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    fs::rename(&tmp, &path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io(&path)(e)
    })?;
    Ok(path)
}

/// The user's cache directory: `$XDG_CACHE_HOME`, else `~/.cache`.
pub fn cache_dir() -> Option<PathBuf> {
    let non_empty = |v: std::ffi::OsString| (!v.is_empty()).then(|| PathBuf::from(v));
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(non_empty)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(non_empty)
                .map(|h| h.join(".cache"))
        })
}

/// Keeps users' temporary directories apart on shared machines.
fn uid_tag() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_runtime_is_a_shared_object() {
        assert_eq!(&RUNTIME_SO[..4], b"\x7fELF");
        assert_eq!(runtime_hash().len(), 16);
        // The hash made at build time is the one of the bytes embedded.
        assert_eq!(runtime_hash(), content_hash(RUNTIME_SO));
        assert_eq!(content_hash(b"a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn install_is_idempotent_and_whole() {
        let d = tempfile::tempdir().unwrap();
        let a = install_runtime_in(d.path()).unwrap();
        let b = install_runtime_in(d.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(fs::read(&a).unwrap(), RUNTIME_SO);
        assert!(
            a.parent()
                .unwrap()
                .ends_with(format!("runtime-{}", runtime_hash()))
        );
    }

    #[test]
    fn override_must_exist() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nope.so");
        assert!(matches!(
            runtime_path(Some(&missing)),
            Err(RuntimeError::OverrideMissing { .. })
        ));
        let present = install_runtime_in(d.path()).unwrap();
        assert_eq!(runtime_path(Some(&present)).unwrap(), present);
    }

    #[test]
    fn override_must_be_a_numalens_runtime() {
        let d = tempfile::tempdir().unwrap();
        let text = d.path().join("notes.so");
        std::fs::write(&text, "not a library").unwrap();
        let program = Path::new("/bin/true");
        for other in [text.as_path(), program] {
            let err = runtime_path(Some(other)).unwrap_err();
            assert!(matches!(err, RuntimeError::NotARuntime { .. }), "{err}");
            assert!(err.to_string().contains("not a numalens runtime"), "{err}");
        }
    }
}
