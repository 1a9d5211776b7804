//! The guest's kernel: a Debian kernel package, fetched with apt, unpacked with `dpkg -x` and
//! cached (only its `vmlinuz`, with the SHA-256 it had when it was extracted).
//!
//! By default the kernel is the one the host's own Debian release points at. A guest can also
//! boot another release's kernel (`NUMALENS_VM_KERNEL_SUITE=trixie`): apt then reads that suite
//! through a source list and package lists of the test bed's own, in its cache directory, so the
//! host's apt configuration is never changed; the suite's lists are signed by the host's Debian
//! archive keyring like its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::Error;
use crate::framing::hex;
use crate::host::{cache_dir, is_root, on_path};

/// The keyring Debian's lists are signed with.
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
/// A suite's lists are fetched again when older than this.
const SUITE_LISTS_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// The cache marker naming the suite a cached kernel came from (absent: the host's release).
const SUITE_MARKER: &str = "suite";

/// Path of the guest kernel: `$NUMALENS_VM_KERNEL`, else the cached `vmlinuz` of
/// [`kernel_package`], fetched when not cached yet.
pub fn kernel() -> Result<PathBuf, Error> {
    if let Some(k) = std::env::var_os("NUMALENS_VM_KERNEL") {
        if std::env::var_os("NUMALENS_VM_KERNEL_SUITE").is_some_and(|s| !s.is_empty()) {
            eprintln!("testbed: NUMALENS_VM_KERNEL is set: NUMALENS_VM_KERNEL_SUITE is ignored");
        }
        return Ok(PathBuf::from(k));
    }
    let apt = Apt::from_env()?;
    let package = kernel_package(&apt)?;
    let dir = cache_dir().join("kernels").join(&package);
    let image = dir.join("vmlinuz");
    let sum_file = dir.join("vmlinuz.sha256");
    if let (Ok(data), Ok(sum)) = (std::fs::read(&image), std::fs::read_to_string(&sum_file)) {
        if hex(&Sha256::digest(&data)) == sum.trim() {
            apt.mark_suite(&dir)?;
            return Ok(image);
        }
        eprintln!(
            "testbed: cached kernel {} is corrupt, fetching again",
            image.display()
        );
    }
    fetch_kernel(&apt, &package, &dir)?;
    let data = std::fs::read(&image).map_err(Error::io("reading extracted kernel"))?;
    std::fs::write(&sum_file, hex(&Sha256::digest(&data)))
        .map_err(Error::io("writing kernel checksum"))?;
    apt.mark_suite(&dir)?;
    Ok(image)
}

/// How apt is asked: the host's configuration, or a suite's lists of the test bed's own.
pub struct Apt {
    suite: Option<String>,
    options: Vec<String>,
}

impl Apt {
    /// `$NUMALENS_VM_KERNEL_SUITE` (a Debian suite or codename), else the host's apt.
    pub fn from_env() -> Result<Apt, Error> {
        match std::env::var("NUMALENS_VM_KERNEL_SUITE") {
            Ok(s) if !s.is_empty() => Apt::suite(&s),
            _ => Ok(Apt {
                suite: None,
                options: Vec::new(),
            }),
        }
    }

    /// apt options that read `suite` of Debian's archive from lists under the cache directory.
    pub fn suite(suite: &str) -> Result<Apt, Error> {
        if !suite
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(Error::Kernel(format!(
                "NUMALENS_VM_KERNEL_SUITE={suite:?} is not a Debian suite name (e.g. trixie)"
            )));
        }
        let root = cache_dir().join("apt").join(suite);
        let dir = |d: &str| root.join(d).display().to_string();
        let options = [
            format!("Dir::Etc::SourceList={}", dir("sources.list")),
            format!("Dir::Etc::SourceParts={}", dir("sources.list.d")),
            format!("Dir::State::Lists={}", dir("lists")),
            format!("Dir::Cache={}", dir("cache")),
            // The cache sits in the invoking user's home, which apt's sandbox user cannot enter.
            "APT::Sandbox::User=root".to_string(),
        ];
        Ok(Apt {
            suite: Some(suite.to_string()),
            options: options
                .iter()
                .flat_map(|o| ["-o".to_string(), o.clone()])
                .collect(),
        })
    }

    /// Notes in a cached kernel's directory the suite it serves (also for a package that was
    /// first fetched for the host), so that offline runs of the suite find it.
    fn mark_suite(&self, dir: &Path) -> Result<(), Error> {
        match &self.suite {
            Some(suite) => std::fs::write(dir.join(SUITE_MARKER), suite)
                .map_err(Error::io("writing suite marker")),
            None => Ok(()),
        }
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.args(&self.options);
        c
    }

    /// Writes the suite's source list, fetches its lists when missing or older than a day,
    /// and gives the package `linux-image-amd64` depends on in them.
    fn suite_package(&self) -> Result<Option<String>, Error> {
        let Some(suite) = &self.suite else {
            return Ok(None);
        };
        let root = cache_dir().join("apt").join(suite);
        for d in ["sources.list.d", "lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(root.join(d)).map_err(Error::io("creating apt lists dir"))?;
        }
        let list =
            format!("deb [signed-by={DEBIAN_KEYRING}] http://deb.debian.org/debian {suite} main\n");
        std::fs::write(root.join("sources.list"), list)
            .map_err(Error::io("writing source list"))?;
        let stamp = root.join("updated");
        let fresh = std::fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < SUITE_LISTS_MAX_AGE);
        if fresh && let Some(package) = self.depends_package() {
            return Ok(Some(package));
        }
        eprintln!("testbed: fetching Debian {suite}'s package lists");
        let out = self
            .command("apt-get")
            .args(["update", "-q"])
            .output()
            .map_err(Error::io("running apt-get update"))?;
        if out.status.success() {
            std::fs::write(&stamp, "").map_err(Error::io("writing apt lists stamp"))?;
            Ok(self.depends_package())
        } else {
            Err(Error::Kernel(format!(
                "apt-get update of Debian {suite} (http://deb.debian.org/debian {suite} main) \
                 failed; check the suite name: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// The package `linux-image-amd64` depends on in these lists.
    fn depends_package(&self) -> Option<String> {
        let out = self
            .command("apt-cache")
            .args(["depends", "linux-image-amd64"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Depends: "))
            .find(|d| d.starts_with("linux-image-"))
            .map(str::to_string)
    }
}

/// The kernel package to use: `$NUMALENS_VM_KERNEL_PACKAGE`, else the one Debian's
/// `linux-image-amd64` points at (in the host's lists, or the chosen suite's), else the newest
/// already in the cache from the same source (offline runs).
pub fn kernel_package(apt: &Apt) -> Result<String, Error> {
    if let Ok(p) = std::env::var("NUMALENS_VM_KERNEL_PACKAGE") {
        // A suite's package is fetched through the suite's lists: they must be there.
        if let Err(e) = apt.suite_package() {
            eprintln!("testbed: {e}");
        }
        return Ok(p);
    }
    let mut from_apt = None;
    if apt.suite.is_some() {
        match apt.suite_package() {
            Ok(package) => from_apt = package,
            Err(e) => eprintln!("testbed: {e}"),
        }
    } else {
        from_apt = apt.depends_package();
        // A fresh machine (or a container with its lists cleaned) has no apt lists yet.
        if from_apt.is_none() && is_root() && on_path("apt-get") {
            let _ = Command::new("apt-get")
                .args(["update", "-q"])
                .stdout(std::process::Stdio::from(std::io::stderr()))
                .status();
            from_apt = apt.depends_package();
        }
    }
    if let Some(p) = from_apt {
        return Ok(p);
    }
    newest_cached_kernel(apt.suite.as_deref()).ok_or_else(|| {
        let source = apt.suite.as_deref().unwrap_or("the host's release");
        Error::Kernel(format!(
            "cannot find a kernel package of {source}: `apt-cache depends linux-image-amd64` \
             gave none (run apt-get update) and the cache has none from it; or set \
             NUMALENS_VM_KERNEL"
        ))
    })
}

/// The newest cached kernel that came from `suite` (None: the host's release).
fn newest_cached_kernel(suite: Option<&str>) -> Option<String> {
    let dir = cache_dir().join("kernels");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("linux-image-"))
        .filter(|n| {
            let marker = std::fs::read_to_string(dir.join(n).join(SUITE_MARKER)).ok();
            marker.as_deref().map(str::trim) == suite
        })
        .collect();
    names.sort();
    names.pop()
}

fn fetch_kernel(apt: &Apt, package: &str, dir: &Path) -> Result<(), Error> {
    eprintln!("testbed: fetching kernel package {package}");
    let work = dir.with_extension("download");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(Error::io("creating kernel download dir"))?;
    run_in(&work, apt.command("apt-get").args(["download", package]))?;
    let deb = std::fs::read_dir(&work)
        .map_err(Error::io("listing kernel download dir"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .ok_or_else(|| Error::Kernel(format!("apt-get download {package} left no .deb")))?;
    run_in(
        &work,
        Command::new("dpkg").args(["-x", &deb.display().to_string(), "x"]),
    )?;
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

fn run_in(dir: &Path, command: &mut Command) -> Result<(), Error> {
    let what = format!("{command:?}");
    let out = command
        .current_dir(dir)
        .output()
        .map_err(Error::io(format!("running {what}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Kernel(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_name_is_checked_before_apt_sees_it() {
        assert!(Apt::suite("trixie").is_ok());
        assert!(Apt::suite("bookworm-backports").is_ok());
        for bad in ["trixie main", "../x", "Trixie", "a;b"] {
            let Err(Error::Kernel(msg)) = Apt::suite(bad) else {
                panic!("{bad:?} accepted")
            };
            assert!(msg.contains("not a Debian suite name"), "{msg}");
        }
    }

    #[test]
    fn a_suites_apt_reads_lists_of_its_own() {
        let apt = Apt::suite("trixie").unwrap();
        let joined = apt.options.join(" ");
        let root = cache_dir().join("apt").join("trixie");
        assert!(
            joined.contains(&format!(
                "Dir::State::Lists={}",
                root.join("lists").display()
            )),
            "{joined}"
        );
        assert!(joined.contains("Dir::Etc::SourceList="), "{joined}");
    }
}
