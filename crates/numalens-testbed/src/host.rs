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

fn on_path(tool: &str) -> bool {
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

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The kernel package to use: `$NUMALENS_VM_KERNEL_PACKAGE`, else the one Debian's
/// `linux-image-amd64` points at, else the newest already in the cache (offline runs).
pub fn kernel_package() -> Result<String, Error> {
    if let Ok(p) = std::env::var("NUMALENS_VM_KERNEL_PACKAGE") {
        return Ok(p);
    }
    // A fresh machine (or a container with its lists cleaned) has no apt lists yet.
    let mut from_apt = kernel_package_from_apt();
    if from_apt.is_none() && is_root() && on_path("apt-get") {
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(std::process::Stdio::from(std::io::stderr()))
            .status();
        from_apt = kernel_package_from_apt();
    }
    if let Some(p) = from_apt {
        return Ok(p);
    }
    newest_cached_kernel().ok_or_else(|| {
        Error::Kernel(
            "cannot find a kernel package: `apt-cache depends linux-image-amd64` gave none \
             (run apt-get update) and the cache is empty; or set NUMALENS_VM_KERNEL"
                .into(),
        )
    })
}

fn kernel_package_from_apt() -> Option<String> {
    let out = Command::new("apt-cache")
        .args(["depends", "linux-image-amd64"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|d| d.starts_with("linux-image-"))
        .map(str::to_string)
}

fn newest_cached_kernel() -> Option<String> {
    let dir = cache_dir().join("kernels");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("linux-image-"))
        .collect();
    names.sort();
    names.pop()
}

/// Path of the guest kernel: `$NUMALENS_VM_KERNEL`, else the cached `vmlinuz` of
/// [`kernel_package`], fetched with `apt-get download` and `dpkg -x` when not cached yet.
/// The cached image is checked against the SHA-256 recorded when it was extracted.
pub fn kernel() -> Result<PathBuf, Error> {
    if let Some(k) = std::env::var_os("NUMALENS_VM_KERNEL") {
        return Ok(PathBuf::from(k));
    }
    let package = kernel_package()?;
    let dir = cache_dir().join("kernels").join(&package);
    let image = dir.join("vmlinuz");
    let sum_file = dir.join("vmlinuz.sha256");
    if let (Ok(data), Ok(sum)) = (std::fs::read(&image), std::fs::read_to_string(&sum_file)) {
        if hex(&Sha256::digest(&data)) == sum.trim() {
            return Ok(image);
        }
        eprintln!(
            "testbed: cached kernel {} is corrupt, fetching again",
            image.display()
        );
    }
    fetch_kernel(&package, &dir)?;
    let data = std::fs::read(&image).map_err(Error::io("reading extracted kernel"))?;
    std::fs::write(&sum_file, hex(&Sha256::digest(&data)))
        .map_err(Error::io("writing kernel checksum"))?;
    Ok(image)
}

fn fetch_kernel(package: &str, dir: &Path) -> Result<(), Error> {
    eprintln!("testbed: fetching kernel package {package}");
    let work = dir.with_extension("download");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(Error::io("creating kernel download dir"))?;
    run_in(&work, "apt-get", &["download", package])?;
    let deb = std::fs::read_dir(&work)
        .map_err(Error::io("listing kernel download dir"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .ok_or_else(|| Error::Kernel(format!("apt-get download {package} left no .deb")))?;
    run_in(&work, "dpkg", &["-x", &deb.display().to_string(), "x"])?;
    let boot = work.join("x").join("boot");
    let vmlinuz = std::fs::read_dir(&boot)
        .map_err(Error::io("listing extracted /boot"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz"))
        })
        .ok_or_else(|| Error::Kernel(format!("{package} has no /boot/vmlinuz*")))?;
    std::fs::create_dir_all(dir).map_err(Error::io("creating kernel cache dir"))?;
    std::fs::copy(&vmlinuz, dir.join("vmlinuz")).map_err(Error::io("caching kernel"))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

fn run_in(dir: &Path, program: &str, args: &[&str]) -> Result<(), Error> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(Error::io(format!("running {program}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Kernel(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
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
