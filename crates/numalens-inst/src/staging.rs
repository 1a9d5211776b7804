//! Where the hooks' files live while the program runs.
//!
//! The hooks store every count and sample straight into shared file mappings. On a disk file
//! system each page of them first faults to be marked dirty (2–3 µs, plus a page-fault sample
//! for the recorder), and the kernel writes them back while the program runs; in memory
//! (tmpfs) a store is a store. On hotspot, whose samples land on a page every 128 of them, the
//! recording ran 0.138 s over its countdown-only time at `--sample-every 256` with the files on
//! disk, 0.042 s with them in `/dev/shm` (docs/INST.md). So the files go to a directory of
//! their own in `/dev/shm` when it is a tmpfs with room to spare, else beside the other event
//! files in the profile. Either way they survive the program being killed. The directory is
//! removed when the recording is dropped (`NUMALENS_KEEP_EVENTS` copies its files into the
//! profile's events directory first). A recorder that is itself killed cannot remove it: its
//! guard process (`guard.rs`) then moves the files into the events directory, for `numalens
//! recover`, once the program has ended. One whose guard was killed as well is removed by the
//! next recording.

use std::path::{Path, PathBuf};

use super::guard::{self, Guard};

/// The memory file system the files go to when it can take them.
const SHM: &str = "/dev/shm";
/// Free space `/dev/shm` must have: far more than a long run writes (32 bytes per sample, 1600
/// per 64 touched pages of each thread), so that a container's small one is passed over. A
/// run that still fills it loses what came after (the profile says so), never the program.
const MIN_FREE: u64 = 1 << 30;
/// Names of the directories, followed by the recorder's pid and a time stamp.
const PREFIX: &str = "numalens-inst-";

/// The directory the hooks write into (`NUMALENS_INST_DIR`).
#[derive(Debug)]
pub struct InstStaging {
    dir: PathBuf,
    /// Ours to remove (in `/dev/shm`), not the profile's own events directory.
    owned: bool,
    /// The profile's events directory, where `NUMALENS_KEEP_EVENTS` keeps the files.
    events_dir: PathBuf,
    /// Moves the files into the events directory and removes ours if the recorder dies.
    guard: Option<Guard>,
}

impl InstStaging {
    /// A fresh directory in `/dev/shm` if it is a tmpfs with room, else `events_dir`.
    pub fn new(events_dir: &Path) -> InstStaging {
        Self::new_in(Path::new(SHM), events_dir)
    }

    fn new_in(shm: &Path, events_dir: &Path) -> InstStaging {
        remove_stale(shm);
        if is_roomy_tmpfs(shm) {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            let dir = shm.join(format!("{PREFIX}{}-{stamp}", std::process::id()));
            // The guard makes the directory: without one, it could outlive a killed recorder.
            if let Ok(guard) = Guard::start(&dir, events_dir) {
                return InstStaging {
                    dir,
                    owned: true,
                    events_dir: events_dir.to_path_buf(),
                    guard: Some(guard),
                };
            }
        }
        InstStaging {
            dir: events_dir.to_path_buf(),
            owned: false,
            events_dir: events_dir.to_path_buf(),
            guard: None,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Tells the guard the program's pid: if the recorder dies, it waits for the program's end.
    pub fn watch(&self, program: u32) {
        if let Some(guard) = &self.guard {
            guard.watch(program);
        }
    }

    /// True when the files are in memory, not in the profile's directory.
    pub fn in_memory(&self) -> bool {
        self.owned
    }
}

impl Drop for InstStaging {
    /// Removes the directory; with `NUMALENS_KEEP_EVENTS` set, its files are first copied into
    /// the profile's events directory, which is then kept with everything else.
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if std::env::var_os("NUMALENS_KEEP_EVENTS").is_some() {
            for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                let _ = std::fs::copy(entry.path(), self.events_dir.join(entry.file_name()));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(guard) = self.guard.take() {
            guard.stop();
        }
    }
}

/// Whether `dir` is a writable tmpfs with at least [`MIN_FREE`] bytes free.
fn is_roomy_tmpfs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: an all-zero statfs is a valid value to be written over.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path and st a statfs to fill.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    // SAFETY: c is a NUL-terminated path.
    let writable = unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0;
    let free = (st.f_bavail as u64).saturating_mul(st.f_bsize as u64);
    st.f_type == libc::TMPFS_MAGIC && writable && free >= MIN_FREE
}

/// The staging directories made by the recorder with pid `recorder`.
pub fn directories_of(recorder: u32) -> Vec<PathBuf> {
    let prefix = format!("{PREFIX}{recorder}-");
    std::fs::read_dir(SHM)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(|e| e.path())
        .collect()
}

/// Removes the directories of recorders that are no longer running (killed before they could).
fn remove_stale(shm: &Path) {
    let Ok(entries) = std::fs::read_dir(shm) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() && !guard::is_guarded(&entry.path()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goes_to_dev_shm_when_it_is_a_roomy_tmpfs_and_cleans_up() {
        let events = tempfile::tempdir().unwrap();
        if !is_roomy_tmpfs(Path::new(SHM)) {
            eprintln!("SKIPPED: {SHM} is not a tmpfs with 1 GiB free here");
            return;
        }
        let dir = {
            let staging = InstStaging::new(events.path());
            assert!(staging.in_memory());
            assert!(staging.dir().starts_with(SHM));
            std::fs::write(staging.dir().join("inst-1-1-0-0.samples"), b"x").unwrap();
            staging.dir().to_path_buf()
        };
        assert!(!dir.exists(), "dropped, the staging directory is removed");
    }

    #[test]
    fn a_disk_directory_is_passed_over_and_the_events_directory_kept() {
        let events = tempfile::tempdir().unwrap();
        let disk = tempfile::tempdir().unwrap();
        {
            let staging = InstStaging::new_in(disk.path(), events.path());
            assert!(!staging.in_memory());
            assert_eq!(staging.dir(), events.path());
        }
        assert!(events.path().exists(), "the profile's own directory stays");
    }

    #[test]
    fn directories_of_recorders_that_are_gone_are_removed() {
        let shm = tempfile::tempdir().unwrap();
        // No process has pid 4194304 + 1: above the kernel's largest pid_max.
        let dead = shm.path().join(format!("{PREFIX}4194305-1"));
        let alive = shm.path().join(format!("{PREFIX}{}-1", std::process::id()));
        let other = shm.path().join("numalens-something-else");
        for d in [&dead, &alive, &other] {
            std::fs::create_dir(d).unwrap();
        }
        remove_stale(shm.path());
        assert!(!dead.exists());
        assert!(alive.exists());
        assert!(other.exists());
    }
}
