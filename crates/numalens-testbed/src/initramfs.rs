//! The guest's root file system: a `newc` cpio archive (the format the kernel unpacks into its
//! initial rootfs) holding busybox, the requested host binaries with their shared-library closure,
//! extra files, the init script and the scenario.
//!
//! The archive is written here rather than by `cpio(1)` so the file list and its order are
//! ours (reproducible archives, hence stable cache keys) and testable without running anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// One entry of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File { data: Vec<u8>, executable: bool },
    Symlink(String),
}

/// Archive contents keyed by absolute guest path; a BTreeMap puts parents before children.
#[derive(Debug, Default, Clone)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    pub fn new() -> Archive {
        let mut a = Archive::default();
        for d in ["/bin", "/dev", "/proc", "/sys", "/tmp", "/etc", "/out"] {
            a.add_dir(d);
        }
        a
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.get(path)
    }

    pub fn add_dir(&mut self, path: &str) {
        let mut cur = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            cur.push('/');
            cur.push_str(part);
            self.entries.entry(cur.clone()).or_insert(Entry::Dir);
        }
    }

    pub fn add_bytes(&mut self, path: &str, data: Vec<u8>, executable: bool) {
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.add_dir(parent);
        }
        self.entries
            .insert(path.to_string(), Entry::File { data, executable });
    }

    pub fn add_symlink(&mut self, path: &str, target: &str) {
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.add_dir(parent);
        }
        self.entries
            .insert(path.to_string(), Entry::Symlink(target.to_string()));
    }

    /// Copies a host file (following symlinks) to `guest_path`.
    pub fn add_host_file(&mut self, host: &Path, guest_path: &str) -> Result<(), Error> {
        let data = std::fs::read(host).map_err(Error::io(format!("reading {}", host.display())))?;
        let executable = is_executable(host);
        self.add_bytes(guest_path, data, executable);
        Ok(())
    }

    /// Copies a host executable to `/bin/<name>` and every shared library it needs (with the
    /// dynamic loader) to the same absolute path as on the host, where the loader looks.
    /// With `strip`, debug sections are left out (a release numalens shrinks from ~75 to ~11 MB,
    /// which saves about a second of boot under emulation); without `strip(1)` on the host the
    /// binary goes in as it is.
    pub fn add_binary(&mut self, host: &Path, strip: bool) -> Result<(), Error> {
        let name = host
            .file_name()
            .ok_or_else(|| Error::Initramfs(format!("{} has no file name", host.display())))?
            .to_string_lossy()
            .into_owned();
        match strip.then(|| stripped(host)).flatten() {
            Some(data) => self.add_bytes(&format!("/bin/{name}"), data, true),
            None => self.add_host_file(host, &format!("/bin/{name}"))?,
        }
        self.add_closure(host)
    }

    fn add_closure(&mut self, host: &Path) -> Result<(), Error> {
        for lib in shared_libraries(host)? {
            let guest = lib.display().to_string();
            if !self.entries.contains_key(&guest) {
                self.add_host_file(&lib, &guest)?;
            }
        }
        Ok(())
    }

    /// Copies a host shared object (an `LD_PRELOAD` runtime, a plugin) to `/lib/<name>`, with the
    /// libraries it needs in turn.
    pub fn add_library(&mut self, host: &Path) -> Result<(), Error> {
        let name = host
            .file_name()
            .ok_or_else(|| Error::Initramfs(format!("{} has no file name", host.display())))?
            .to_string_lossy()
            .into_owned();
        self.add_host_file(host, &format!("/lib/{name}"))?;
        self.add_closure(host)
    }

    /// The `newc` cpio archive, uncompressed (the kernel takes it as is; no compressor needed).
    pub fn to_cpio(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (ino, (path, entry)) in self.entries.iter().enumerate() {
            let name = path.trim_start_matches('/');
            let (mode, data): (u32, &[u8]) = match entry {
                Entry::Dir => (0o040755, &[]),
                Entry::File { data, executable } => {
                    (if *executable { 0o100755 } else { 0o100644 }, data)
                }
                Entry::Symlink(target) => (0o120777, target.as_bytes()),
            };
            write_record(&mut out, ino as u32 + 1, mode, name, data);
        }
        write_record(&mut out, 0, 0, "TRAILER!!!", &[]);
        out
    }
}

fn write_record(out: &mut Vec<u8>, ino: u32, mode: u32, name: &str, data: &[u8]) {
    let nlink = if mode & 0o040000 != 0 { 2 } else { 1 };
    // Fields: ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor
    // namesize check. mtime 0 keeps archives byte-identical across builds.
    let fields = [
        ino,
        mode,
        0,
        0,
        nlink,
        0,
        data.len() as u32,
        0,
        0,
        0,
        0,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The binary without debug sections, or None when `strip` is not available or fails.
fn stripped(host: &Path) -> Option<Vec<u8>> {
    let out = std::env::temp_dir().join(format!(
        "numalens-vm-strip-{}-{}",
        std::process::id(),
        host.file_name()?.to_string_lossy()
    ));
    let ok = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&out)
        .arg(host)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let data = if ok { std::fs::read(&out).ok() } else { None };
    let _ = std::fs::remove_file(&out);
    data
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Shared libraries of a host executable, from `ldd`. A static executable has none.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, Error> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(Error::io("running ldd"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if text.contains("not a dynamic executable") || err.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(Error::Initramfs(format!(
            "ldd {} failed: {}",
            binary.display(),
            err.trim()
        )));
    }
    parse_ldd(&text)
}

/// Parses `ldd` output: `libx.so => /path (0x..)`, `/lib64/ld-linux-x86-64.so.2 (0x..)`,
/// `linux-vdso.so.1 (0x..)` (in the kernel, nothing to copy) and `libx.so => not found`.
pub fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, Error> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.contains("not found") {
            return Err(Error::Initramfs(format!("missing shared library: {line}")));
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_gives_libraries_and_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        let libs = parse_ldd(text).unwrap();
        assert_eq!(
            libs,
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        let err = parse_ldd("\tlibnuma.so.1 => not found\n").unwrap_err();
        assert!(err.to_string().contains("libnuma"));
    }

    #[test]
    fn archive_lists_parents_and_is_valid_newc() {
        let mut a = Archive::new();
        a.add_bytes("/usr/lib/x/libfoo.so", b"abc".to_vec(), false);
        a.add_symlink("/bin/sh", "busybox");
        let paths: Vec<&str> = a.paths().collect();
        let lib = paths
            .iter()
            .position(|p| *p == "/usr/lib/x/libfoo.so")
            .unwrap();
        assert!(paths.iter().position(|p| *p == "/usr/lib/x").unwrap() < lib);
        let cpio = a.to_cpio();
        assert!(cpio.starts_with(b"070701"));
        assert_eq!(cpio.len() % 4, 0);
        let trailer = b"TRAILER!!!\0";
        assert!(cpio.windows(trailer.len()).any(|w| w == trailer));
        assert_eq!(a.to_cpio(), cpio, "archives are reproducible");
    }

    #[test]
    fn host_binary_brings_its_libraries() {
        // /bin/sh exists on every Linux host this runs on and is almost always dynamic.
        let mut a = Archive::new();
        a.add_binary(Path::new("/bin/sh"), true).unwrap();
        assert!(a.get("/bin/sh").is_some());
        let libs = shared_libraries(Path::new("/bin/sh")).unwrap();
        for lib in libs {
            assert!(a.get(&lib.display().to_string()).is_some(), "{lib:?}");
        }
    }
}
