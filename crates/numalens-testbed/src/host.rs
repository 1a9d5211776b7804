//! What the host must provide: QEMU, a static busybox, and a Debian kernel, installed through
//! apt-get when missing, and a cache directory that keeps the kernel and initramfs archives
//! between runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::Error;
use crate::framing::hex;
use crate::qemu::QEMU;

/// Debian packages the test bed runs on.
pub const PACKAGES: &[&str] = &["qemu-system-x86", "busybox-static", "cpio"];
/// Where busybox-static installs busybox.
pub const BUSYBOX: &str = "/bin/busybox";

/// `$NUMALENS_VM_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/numalens/vm`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NUMALENS_VM_CACHE") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
            PathBuf::from(home).join(".cache")
        });
    base.join("numalens").join("vm")
}

pub(crate) fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

fn busybox_is_static() -> bool {
    Path::new(BUSYBOX).is_file()
        && crate::initramfs::shared_libraries(Path::new(BUSYBOX))
            .map(|l| l.is_empty())
            .unwrap_or(false)
}

/// Installs the missing packages with apt-get, or says how to.
pub fn ensure_tools() -> Result<(), Error> {
    let mut missing = Vec::new();
    if !on_path(QEMU) {
        missing.push("qemu-system-x86");
    }
    if !busybox_is_static() {
        missing.push("busybox-static");
    }
    if !on_path("ldd") {
        missing.push("libc-bin");
    }
    if missing.is_empty() {
        return Ok(());
    }
    apt_install(&missing)?;
    if on_path(QEMU) && busybox_is_static() {
        Ok(())
    } else {
        Err(Error::MissingTool(format!(
            "{} still missing after apt-get install",
            missing.join(" ")
        )))
    }
}

/// `apt-get install`, retrying once after `apt-get update` (a fresh machine has no lists).
pub fn apt_install(packages: &[&str]) -> Result<(), Error> {
    let how = format!(
        "install them with: apt-get update && apt-get install -y {}",
        packages.join(" ")
    );
    if !on_path("apt-get") {
        return Err(Error::MissingTool(format!(
            "{} (no apt-get here); {how}",
            packages.join(" ")
        )));
    }
    if !is_root() {
        return Err(Error::MissingTool(format!(
            "{} (not root, cannot install); {how}",
            packages.join(" ")
        )));
    }
    eprintln!("testbed: installing {}", packages.join(" "));
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            // Our stdout carries test lines; apt's progress goes to stderr.
            .stdout(std::process::Stdio::from(std::io::stderr()))
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if install() {
        return Ok(());
    }
    let _ = Command::new("apt-get")
        .args(["update", "-q"])
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status();
    if install() {
        Ok(())
    } else {
        Err(Error::MissingTool(format!(
            "apt-get install {} failed; {how}",
            packages.join(" ")
        )))
    }
}

pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Stores `data` in the cache under its SHA-256 and returns the path; an archive with the same
/// contents is written once and reused.
pub fn cache_by_content(kind: &str, ext: &str, data: &[u8]) -> Result<PathBuf, Error> {
    let dir = cache_dir().join(kind);
    std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let path = dir.join(format!("{}.{ext}", hex(&Sha256::digest(data))));
    if !path.is_file() {
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, data).map_err(Error::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(Error::io("renaming cached archive"))?;
        prune(&dir, CACHE_KEEP);
    }
    Ok(path)
}

/// Archives kept per kind: every changed test binary makes a new one, so old ones are dropped.
pub const CACHE_KEEP: usize = 16;

/// Removes all but the `keep` most recently modified files of `dir`.
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, path) in files.into_iter().skip(keep) {
        let _ = std::fs::remove_file(path);
    }
}
