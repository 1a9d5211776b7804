//! Shared by the build scripts of `numalens-preload` and `numalens-inst` (a build script cannot
//! depend on another crate's code, so each includes this file by path).

use std::path::{Path, PathBuf};

/// The hash of `parts` one after another: 64-bit FNV-1a in 16 hex digits, as `content_hash` in
/// `numalens-preload`'s `src/runtime.rs` (unit tests of `runtime.rs` and of `numalens-inst`'s
/// `src/toolchain.rs` check that both agree on the embedded files).
pub fn files_hash(parts: &[PathBuf]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        let bytes =
            std::fs::read(part).unwrap_or_else(|e| panic!("cannot read {}: {e}", part.display()));
        for b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The C sources of a runtime directory, sorted so the link line is stable.
pub fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    v.sort();
    v
}
