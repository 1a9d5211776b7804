//! The committed seeds and earlier findings of a fuzz target, for the regression tests of the
//! crates whose readers the targets fuzz; each includes this file with `#[path]`.

use std::path::{Path, PathBuf};

/// Every file of `fuzz/seeds/TARGET`, in name order; panics when there is none.
pub fn seed_inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no inputs in {}", dir.display());
    files
}
