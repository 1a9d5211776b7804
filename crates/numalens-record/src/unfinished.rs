//! What a recording puts on disk from its start, so that a recorder that dies at any point
//! (SIGKILL, the OOM killer, a crash) leaves a directory `numalens recover` can finish.
//!
//! Before the program starts, the profile directory gets a `meta.json` marked incomplete (the
//! command line, start time, clock origin, backend and the settings known then; the machine's
//! topology follows as soon as it is read), and the events directory a small `recorder` file
//! naming the recorder's process and, once it runs, the program's. Both are named with their
//! start time as well as their pid, so a pid the kernel has given to another process since is
//! not taken for them.

use std::io::Write;
use std::path::Path;

use numalens_format::Meta;

/// The file in the events directory naming the recorder and the program.
pub const RECORDER_FILE: &str = "recorder";

/// Why a recording's `meta.json` says it is incomplete until the profile is written.
pub const IN_PROGRESS: &str = "the recording has not finished: the recorder is still running, or was killed (then `numalens recover DIR` assembles what it left)";

/// A process, named so that a reused pid does not match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub start_ticks: u64,
}

impl ProcessId {
    /// The process `pid` as it is now, if it exists.
    pub fn of(pid: u32) -> Option<ProcessId> {
        Self::with_state(pid).map(|(id, _)| id)
    }

    /// The process and its state letter (`R`, `S`, `Z` …).
    fn with_state(pid: u32) -> Option<(ProcessId, char)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces and parentheses: count from its end.
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = fields.next()?.chars().next()?;
        let start_ticks = fields.nth(18)?.parse().ok()?;
        Some((ProcessId { pid, start_ticks }, state))
    }

    /// True while this very process runs. A zombie has ended: its parent (a killed recorder's
    /// heir) has not reaped it yet.
    pub fn is_alive(&self) -> bool {
        ProcessId::with_state(self.pid)
            .is_some_and(|(now, state)| now == *self && !matches!(state, 'Z' | 'X'))
    }
}

/// What the `recorder` file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Processes {
    pub recorder: Option<ProcessId>,
    pub program: Option<ProcessId>,
}

/// Writes the meta of a recording that has not finished. The profile writer replaces it.
pub fn write_start_meta(output: &Path, meta: &Meta) -> std::io::Result<()> {
    let mut meta = meta.clone();
    meta.completeness.reasons = vec![IN_PROGRESS.into()];
    meta.write(&output.join("meta.json"))
        .map_err(std::io::Error::other)
}

/// Names the recorder (this process) in `events_dir`.
pub fn note_recorder(events_dir: &Path) -> std::io::Result<()> {
    let me = ProcessId::of(std::process::id())
        .ok_or_else(|| std::io::Error::other("/proc/self/stat cannot be read"))?;
    std::fs::write(events_dir.join(RECORDER_FILE), line("recorder", me))
}

/// Adds the program's first process to the `recorder` file. A failure (a full disk) only costs
/// `recover` the check that the program has ended.
pub fn note_program(events_dir: &Path, pid: u32) {
    let Some(program) = ProcessId::of(pid) else {
        return;
    };
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .append(true)
        .open(events_dir.join(RECORDER_FILE))
    {
        let _ = file.write_all(line("program", program).as_bytes());
    }
}

fn line(role: &str, p: ProcessId) -> String {
    format!("{role} {} {}\n", p.pid, p.start_ticks)
}

/// Reads the `recorder` file of `events_dir`; lines it cannot read are skipped.
pub fn read_processes(events_dir: &Path) -> Processes {
    let text = std::fs::read_to_string(events_dir.join(RECORDER_FILE)).unwrap_or_default();
    let mut found = Processes::default();
    for l in text.lines() {
        let mut words = l.split_whitespace();
        let (Some(role), Some(pid), Some(ticks)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let (Ok(pid), Ok(start_ticks)) = (pid.parse(), ticks.parse()) else {
            continue;
        };
        let id = Some(ProcessId { pid, start_ticks });
        match role {
            "recorder" => found.recorder = id,
            "program" => found.program = id,
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorder_file_names_both_processes_and_a_dead_one_is_dead() {
        let dir = tempfile::tempdir().unwrap();
        note_recorder(dir.path()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        note_program(dir.path(), pid);
        let found = read_processes(dir.path());
        assert_eq!(found.recorder.unwrap().pid, std::process::id());
        assert!(found.recorder.unwrap().is_alive());
        let program = found.program.unwrap();
        assert_eq!(program.pid, pid);
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!program.is_alive(), "a zombie has ended");
        child.wait().unwrap();
        assert!(!program.is_alive(), "reaped, the program is gone");
        let reused = ProcessId {
            start_ticks: found.recorder.unwrap().start_ticks + 1,
            ..found.recorder.unwrap()
        };
        assert!(
            !reused.is_alive(),
            "same pid, another start: another process"
        );
    }
}
