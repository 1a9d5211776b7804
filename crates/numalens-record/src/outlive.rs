//! Processes of the program that outlive its first one (a daemon's child): the recording goes on
//! until they have exited, or until a signal to the recorder stops it. With sampling rings, the
//! rings' hang-up tells when every task is gone; without them, the runtime's logs name the
//! processes, and a process that still holds its log open still runs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Instant;

use numalens_assemble::raw::Outlived;
use numalens_preload::events::find_event_logs;

use crate::ring_drain::RingDrain;

/// The first process's end, while others of the program may still run.
pub(crate) struct FirstExit {
    pub status: ExitStatus,
    reaped: Instant,
    /// Other processes of the program were running after it.
    outlived: bool,
    stopped_early: bool,
    still_running: Vec<u32>,
}

impl FirstExit {
    pub fn new(status: ExitStatus) -> Self {
        FirstExit {
            status,
            reaped: Instant::now(),
            outlived: false,
            stopped_early: false,
            still_running: Vec::new(),
        }
    }

    /// True when the recording should end now: no other process runs, or `stop` (a signal to
    /// the recorder) says so, and then the ones still running are kept for the summary.
    pub fn ends(&mut self, others: Others<'_>, stop: bool) -> bool {
        let running = others.running();
        self.outlived |= running.is_some();
        if running.is_some() && !stop {
            return false;
        }
        self.stopped_early = running.is_some();
        self.still_running = running.unwrap_or_default();
        true
    }

    /// What the summary says, when other processes outlived the first one.
    pub fn outlived(self, processes_seen: u64) -> Option<Outlived> {
        self.outlived.then(|| Outlived {
            processes: processes_seen,
            after_first: self.reaped.elapsed(),
            stopped_early: self.stopped_early,
            still_running: self.still_running,
        })
    }
}

/// Where to learn which processes of the program still run.
pub(crate) struct Others<'a> {
    pub rings: Option<&'a RingDrain>,
    /// Processes the rings' FORK records named, as long as they exist.
    pub live: &'a BTreeSet<u32>,
    pub events_dir: &'a Path,
}

impl Others<'_> {
    /// The processes still running (possibly not all named), or `None` when none runs.
    fn running(&self) -> Option<Vec<u32>> {
        let named: Vec<u32> = match self.rings {
            Some(s) if s.ended() => return None,
            // An EXIT record may have been lost: a pid is named only while it exists.
            Some(_) => self.live.iter().copied().filter(|p| exists(*p)).collect(),
            None => holding_their_log(self.events_dir),
        };
        (self.rings.is_some() || !named.is_empty()).then_some(named)
    }
}

/// True while `pid` exists (a zombie included, and a process whose main thread has exited while
/// its other threads run on).
pub(crate) fn exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// Processes with a runtime log (`events-PID…bin`) in `dir` that still hold a file of `dir`
/// open: the runtime keeps its log open until the process ends, so an exited process (or a new
/// one that got its pid) holds none.
///
/// A child just forked has no log of its own yet: until it opens one it holds only its parent's,
/// so when the parent has exited and no named process is left, every process is looked at.
fn holding_their_log(dir: &Path) -> Vec<u32> {
    let Ok(dir) = dir.canonicalize() else {
        return Vec::new();
    };
    let logs = find_event_logs(&dir).unwrap_or_default();
    let pids: BTreeSet<u32> = logs.iter().filter_map(|p| log_pid(p)).collect();
    let named: Vec<u32> = pids
        .into_iter()
        .filter(|p| holds_file_in(*p, &dir))
        .collect();
    if named.is_empty() {
        return any_holding_file_in(&dir);
    }
    named
}

/// Every process but the recorder that holds a file of `dir`.
fn any_holding_file_in(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let recorder = std::process::id();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != recorder && holds_file_in(*pid, dir))
        .collect()
}

/// Processes that wrote a runtime log into `dir`.
pub(crate) fn logged_processes(dir: &Path) -> u64 {
    let logs = find_event_logs(dir).unwrap_or_default();
    let pids: BTreeSet<u32> = logs.iter().filter_map(|p| log_pid(p)).collect();
    pids.len() as u64
}

/// The pid in a log's name: `events-PID.bin`, `events-PID-e1.bin`, `events-PID.2.bin`.
fn log_pid(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?.strip_prefix("events-")?;
    let end = name.find(|c: char| !c.is_ascii_digit())?;
    name[..end].parse().ok()
}

/// Whether `pid` has a file of `dir` open, or mapped (a log written through a mapping).
fn holds_file_in(pid: u32, dir: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let open = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|target: PathBuf| target.starts_with(dir));
    open || std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|maps| {
        maps.lines()
            .filter_map(|l| l.split_once('/').map(|(_, path)| Path::new("/").join(path)))
            .any(|path| path.starts_with(dir))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_from_log_names() {
        for (name, pid) in [
            ("events-123.bin", Some(123)),
            ("events-45-e1.bin", Some(45)),
            ("events-6.2.bin", Some(6)),
            ("events-.bin", None),
            ("other-7.bin", None),
        ] {
            assert_eq!(log_pid(Path::new(name)), pid, "{name}");
        }
    }
}
