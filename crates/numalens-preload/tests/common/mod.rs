//! Helpers shared by the runtime tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn runtime_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime")
}

const SHIMS: [&str; 4] = ["hooks.c", "shims.c", "shims_fd.c", "shims_proc.c"];

/// Compiles runtime/tests/test_core.c with every core source (not the shims) into `dir`.
pub fn build_test_core(dir: &Path) -> PathBuf {
    build_core_test(dir, "test_core")
}

/// Compiles runtime/tests/`NAME`.c with every core source (not the shims) into `dir`/`NAME`.
pub fn build_core_test(dir: &Path, name: &str) -> PathBuf {
    let rt = runtime_dir();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(rt.join("src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .filter(|p| !SHIMS.iter().any(|s| p.ends_with(s)))
        .collect();
    sources.sort();
    let exe = dir.join(name);
    let out = Command::new("gcc")
        .args([
            "-O1",
            "-g",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_GNU_SOURCE",
            "-pthread",
        ])
        .args(["-Wl,--build-id=sha1", "-I"])
        .arg(rt.join("include"))
        .arg("-I")
        .arg(rt.join("src"))
        .arg("-o")
        .arg(&exe)
        .arg(rt.join("tests").join(format!("{name}.c")))
        .args(&sources)
        .arg("-ldl")
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}
