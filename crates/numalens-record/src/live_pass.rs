//! The recorder's live pass: while the program runs, a thread at the lowest priority
//! (`SCHED_IDLE`: it runs only on a CPU the program leaves idle) reads the `inst` hooks' sample
//! files every 100 ms, so that after the program's end only what they gained since is left to
//! read (docs/RECORD.md, "Assembling the sampled stream live"). What it read is handed to the
//! assembly, which gives the profile the after-the-run read gives.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use numalens_inst::live_read::LiveSampleFiles;

/// How often the files are read.
const EVERY: Duration = Duration::from_millis(100);

/// Turns the live pass off (`0`), for comparisons with the after-the-run read.
pub const ENV_OFF: &str = "NUMALENS_LIVE_PASS";

/// The running pass.
pub struct LivePass {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<LiveSampleFiles>,
}

impl LivePass {
    /// Starts reading `dir`, unless the environment turns the pass off.
    pub fn start(dir: PathBuf) -> Option<LivePass> {
        if std::env::var_os(ENV_OFF).is_some_and(|v| v == "0") {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("numalens-live".into())
            .spawn(move || {
                lowest_priority();
                let mut files = LiveSampleFiles::default();
                while !stopped.load(Ordering::Acquire) {
                    files.read_new(&dir);
                    std::thread::park_timeout(EVERY);
                }
                files
            })
            .ok()?;
        Some(LivePass { stop, thread })
    }

    /// Stops the pass (the program has ended) and gives what it read.
    pub fn finish(self) -> Option<LiveSampleFiles> {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        self.thread.join().ok()
    }
}

/// `SCHED_IDLE` for the calling thread: the program's threads always come first. Refused (a
/// seccomp filter), the pass runs at the normal priority, which changes nothing it writes.
fn lowest_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for SCHED_IDLE.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
}
