//! Builds the `libnumalens` C runtime into `$OUT_DIR/libnumalens.so`, which `src/runtime.rs`
//! embeds. The compiler is found the way every `-sys` crate finds it (the `cc` crate); the shared
//! object is a plain shared-object link, which `cc::Build` does not do.
//!
//! The runtime's headers are passed on to the build scripts of the crates that depend on this one
//! (`DEP_NUMALENS_INCLUDE`): the instrumentation runtime of `numalens-inst` shares
//! `numalens_fd.h`.

#[path = "build_support/shared.rs"]
mod shared;

use std::env;
use std::path::PathBuf;

use shared::{c_sources, files_hash};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let runtime = manifest.join("runtime");
    println!("cargo:rerun-if-changed={}", runtime.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        runtime.join("include").display()
    );
    println!("cargo:rerun-if-changed=build.rs");

    let sources = c_sources(&runtime.join("src"));
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
    let so = out.join("libnumalens.so");
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let mut cmd = Command::new(compiler.path());
    cmd.args([
        "-shared",
        "-fPIC",
        "-O2",
        "-g",
        "-fvisibility=hidden",
        "-pthread",
    ])
    .args(["-std=gnu11", "-Wall", "-Wextra", "-D_GNU_SOURCE"])
    .arg("-I")
    .arg(runtime.join("include"))
    .arg("-I")
    .arg(runtime.join("src"))
    .arg("-o")
    .arg(&so)
    .args(&sources)
    .args(["-ldl", "-Wl,-z,defs"]);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {:?}: {e}", compiler.path()));
    if !status.success() {
        panic!("building libnumalens.so failed: {cmd:?} exited with {status}");
    }
    // Names the runtime's cache directory; made here, so a recording does not hash it at start.
    println!(
        "cargo:rustc-env=NUMALENS_RUNTIME_HASH={}",
        files_hash(std::slice::from_ref(&so))
    );
    println!("cargo:include={}", runtime.join("include").display());
}
