//! Shared by the build scripts of `numalens-preload` and `numalens-inst` (a build script cannot
//! depend on another crate's code, so each includes this file by path).

use std::path::PathBuf;

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
