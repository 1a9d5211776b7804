//! Recording the fault-injection worker and killing its recorder, shared by the recovery tests.
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use numalens_assemble::spill::SPILL_FILE;
use numalens_format::EVENTS_DIR;

/// Rounds of the worker: about half a second of program under the recorder.
pub const ROUNDS: &str = "40";

/// How long a program whose recorder was killed may take to end.
const PROGRAM_END: Duration = Duration::from_secs(30);

pub fn numalens() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_numalens"));
    cmd.env("NO_COLOR", "1");
    cmd
}

/// `numalens ARGS…` to completion: status, stdout, stderr.
pub fn run(args: &[&std::ffi::OsStr]) -> (ExitStatus, String, String) {
    let out = numalens().args(args).output().expect("run numalens");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status, text(&out.stdout), text(&out.stderr))
}

/// The worker built natively with gcc, or with `numalens cc` for the inst backend.
pub fn build_worker(dir: &Path, inst: bool) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fault_progs/worker.c");
    let exe = dir.join(if inst { "worker-inst" } else { "worker" });
    let mut cmd = if inst {
        let mut c = numalens();
        c.arg("cc");
        c
    } else {
        Command::new("gcc")
    };
    let out = cmd
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .expect("run the compiler");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What the worker writes when nothing disturbs it.
pub fn native_output(worker: &Path, dir: &Path) -> String {
    let out = dir.join("native.out");
    let status = Command::new(worker).arg(&out).arg(ROUNDS).status().unwrap();
    assert_eq!(status.code(), Some(3));
    std::fs::read_to_string(out).unwrap()
}

/// When a recorder is killed (SIGKILL).
#[derive(Debug, Clone, Copy)]
pub enum KillAt {
    /// This long after it started.
    After(Duration),
    /// This long after the program started (wrote its start marker): a loaded machine can
    /// take longer than that to start the recorder and the program.
    AfterProgramStart(Duration),
    /// Once the recorder's spill (`.events/recorder.spill`) holds this many bytes: what a
    /// recovery must find, whatever the machine's load did to the recorder's turns.
    SpillAtLeast(u64),
    /// This long after the program wrote its output: while the profile is written.
    AfterProgram(Duration),
}

/// One recording of the worker, killed (SIGKILL) at `kill` unless it ended first.
pub struct Recording {
    pub recorder_pid: u32,
    /// The recorder's status: the program's own (3) when it finished, else the kill.
    pub status: ExitStatus,
    pub killed: bool,
    pub profile: PathBuf,
    /// The program's output file and its start marker.
    pub out: PathBuf,
}

pub fn record(
    worker: &Path,
    backend: &str,
    profile: &Path,
    out: &Path,
    kill: Option<KillAt>,
) -> Recording {
    record_with(
        record_command(worker, backend, profile, out),
        profile,
        out,
        kill,
    )
}

/// `numalens record --backend BACKEND -o PROFILE WORKER OUT ROUNDS`.
pub fn record_command(worker: &Path, backend: &str, profile: &Path, out: &Path) -> Command {
    let mut cmd = numalens();
    cmd.args(["record", "--backend", backend, "-o"])
        .arg(profile)
        .arg(worker)
        .arg(out)
        .arg(ROUNDS);
    cmd
}

/// Runs `cmd` (a recording of the worker), killed 300 ms after the program started, and checks
/// that it was killed and that the program wrote `native`, what it writes undisturbed.
pub fn killed_mid_run(cmd: Command, profile: &Path, out: &Path, native: &str) -> Recording {
    killed_at(
        cmd,
        profile,
        out,
        native,
        KillAt::AfterProgramStart(Duration::from_millis(300)),
    )
}

/// [`killed_mid_run`], killed at `kill`.
pub fn killed_at(
    cmd: Command,
    profile: &Path,
    out: &Path,
    native: &str,
    kill: KillAt,
) -> Recording {
    let rec = record_with(cmd, profile, out, Some(kill));
    assert!(
        rec.killed,
        "the recording ended before it was killed: make ROUNDS larger"
    );
    assert_eq!(rec.program_output().as_deref(), Some(native));
    rec
}

/// Runs `cmd` (a recording), killed at `kill` unless it ended first. Its output goes
/// nowhere: a pipe would stay open as long as the program outlives its killed recorder.
pub fn record_with(
    mut cmd: Command,
    profile: &Path,
    out: &Path,
    kill: Option<KillAt>,
) -> Recording {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start numalens record");
    let started = Instant::now();
    let mut program_started: Option<Instant> = None;
    let mut program_ended: Option<Instant> = None;
    let mut killed = false;
    let marker = started_marker(out);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if program_started.is_none() && marker.exists() {
            program_started = Some(Instant::now());
        }
        if program_ended.is_none() && out.exists() {
            program_ended = Some(Instant::now());
        }
        let due = match kill {
            None => false,
            Some(KillAt::After(d)) => started.elapsed() >= d,
            Some(KillAt::AfterProgramStart(d)) => program_started.is_some_and(|t| t.elapsed() >= d),
            Some(KillAt::SpillAtLeast(bytes)) => {
                let spill = profile.join(EVENTS_DIR).join(SPILL_FILE);
                std::fs::metadata(spill).is_ok_and(|m| m.len() >= bytes)
            }
            Some(KillAt::AfterProgram(d)) => program_ended.is_some_and(|t| t.elapsed() >= d),
        };
        if due {
            child.kill().unwrap();
            killed = true;
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    Recording {
        recorder_pid: child.id(),
        status,
        killed,
        profile: profile.to_path_buf(),
        out: out.to_path_buf(),
    }
}

impl Recording {
    /// Whether the program was started (it writes its marker first thing).
    pub fn program_started(&self) -> bool {
        started_marker(&self.out).exists()
    }

    /// The program's output once it has ended, or None if it never started. Panics if it
    /// started and did not finish in time.
    pub fn program_output(&self) -> Option<String> {
        let waiting = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&self.out) {
                return Some(text);
            }
            if waiting.elapsed() > Duration::from_secs(2) && !self.program_started() {
                return None;
            }
            assert!(
                waiting.elapsed() < PROGRAM_END,
                "the program started but never wrote {}",
                self.out.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The recorder's `/dev/shm` directories still there after `wait` (its guard moves them
    /// once the program has ended).
    pub fn shm_left_after(&self, wait: Duration) -> Vec<PathBuf> {
        let waiting = Instant::now();
        loop {
            let left = shm_dirs_of(self.recorder_pid);
            if left.is_empty() || waiting.elapsed() > wait {
                return left;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

pub fn started_marker(out: &Path) -> PathBuf {
    let mut name = OsString::from(out.as_os_str());
    name.push(".started");
    PathBuf::from(name)
}

/// The inst staging directories of the recorder with pid `recorder`.
pub fn shm_dirs_of(recorder: u32) -> Vec<PathBuf> {
    let prefix = format!("numalens-inst-{recorder}-");
    std::fs::read_dir("/dev/shm")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}
