//! The recorder's live pass: while the program runs, a thread at the lowest priority
//! (`SCHED_IDLE`: it runs only on a CPU the program leaves idle) reads the `inst` hooks' sample
//! files every 100 ms, so that after the program's end only what they gained since is left to
//! read (docs/RECORD.md, "Assembling the sampled stream live"). What it read is handed to the
//! assembly, which gives the profile the after-the-run read gives.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::thread::Thread;
use std::time::Duration;

use numalens_inst::live_read::LiveSampleFiles;

/// How often the files are read.
const EVERY: Duration = Duration::from_millis(100);

/// How long the end waits for a round still running at `SCHED_IDLE` (when the pass cannot be
/// given its priority back) before it reads everything itself, as without the pass.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// Turns the live pass off (`0`), for comparisons with the after-the-run read.
pub const ENV_OFF: &str = "NUMALENS_LIVE_PASS";

/// The running pass.
pub struct LivePass {
    stop: Arc<AtomicBool>,
    /// The pass thread's kernel id (0 until it has started).
    tid: Arc<AtomicI32>,
    thread: Thread,
    /// What the pass read, sent when it stops.
    done: Receiver<LiveSampleFiles>,
}

impl LivePass {
    /// Starts reading `dir`, unless the environment turns the pass off.
    pub fn start(dir: PathBuf) -> Option<LivePass> {
        if std::env::var_os(ENV_OFF).is_some_and(|v| v == "0") {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let tid = Arc::new(AtomicI32::new(0));
        let own_tid = tid.clone();
        let (send, done) = channel();
        let handle = std::thread::Builder::new()
            .name("numalens-live".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                own_tid.store(unsafe { libc::gettid() }, Ordering::Release);
                set_policy(0, libc::SCHED_IDLE);
                let mut files = LiveSampleFiles::default();
                while !stopped.load(Ordering::Acquire) {
                    files.read_new(&dir);
                    std::thread::park_timeout(EVERY);
                }
                // The end may have stopped waiting: then nobody takes it.
                let _ = send.send(files);
            })
            .ok()?;
        Some(LivePass {
            stop,
            tid,
            thread: handle.thread().clone(),
            done,
        })
    }

    /// Stops the pass (the program has ended) and gives what it read. The pass goes back to
    /// the normal priority first: the program no longer needs the CPUs, and at `SCHED_IDLE` a
    /// round in progress on a loaded machine would hold the end for as long as other work kept
    /// every CPU busy (seconds, under parallel builds). An unprivileged user may not leave
    /// `SCHED_IDLE` (`RLIMIT_NICE`); then the end waits a moment only and otherwise reads every
    /// file itself (`None`: the after-the-run read, which gives the same profile), leaving the
    /// pass to end on its own.
    pub fn finish(self) -> Option<LiveSampleFiles> {
        // Before the stop: until it sees the stop the pass cannot end, so its id is still its.
        let tid = self.tid.load(Ordering::Acquire);
        let normal = tid != 0 && set_policy(tid, libc::SCHED_OTHER);
        self.stop.store(true, Ordering::Release);
        self.thread.unpark();
        if normal {
            return self.done.recv().ok();
        }
        self.done.recv_timeout(IDLE_WAIT).ok()
    }
}

/// Scheduling policy `policy` for thread `tid` (0: the calling thread): `SCHED_IDLE` while the
/// program runs, so its threads always come first. Refused (a seccomp filter, `RLIMIT_NICE`),
/// the pass keeps its priority, which changes nothing it writes. Whether it was set.
fn set_policy(tid: libc::pid_t, policy: libc::c_int) -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for SCHED_IDLE and SCHED_OTHER (priority 0);
    // `tid` is 0 or a thread of this process that has not ended (it runs until told to stop).
    unsafe { libc::sched_setscheduler(tid, policy, &param) == 0 }
}
