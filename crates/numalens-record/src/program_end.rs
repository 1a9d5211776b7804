//! The program's end as the live recorder sees it: its exit status, reaped on a thread of its
//! own while the profile is written, and the recording's times.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use numalens_assemble::ProgramEnd;
use numalens_format::{Overhead, ProgramExit};

/// The program's exit status and the recording's times.
pub struct ProgramEnding {
    /// Final once [`ProgramEnding::wait_for_exit`] has returned.
    pub exit: std::process::ExitStatus,
    /// Until the program was reaped; final once [`ProgramEnding::wait_for_exit`] has returned.
    pub wall: Duration,
    /// When the program was reaped; final once [`ProgramEnding::wait_for_exit`] has returned.
    pub ended: Instant,
    /// The recorder's own CPU time while the program ran.
    pub running_cpu: Duration,
    /// The program's end, when `run` returned while the kernel was still tearing it down.
    pub reaper: Option<Reaper>,
}

/// Waits, on a thread of its own, for a program whose every task has exited but whose memory
/// the kernel is still freeing (a second or more for tens of GiB): the profile is written
/// meanwhile, instead of after.
pub struct Reaper(std::thread::JoinHandle<std::io::Result<(std::process::ExitStatus, Instant)>>);

impl Reaper {
    pub(crate) fn start(mut child: std::process::Child) -> Reaper {
        Reaper(std::thread::spawn(move || {
            let status = child.wait()?;
            Ok((status, Instant::now()))
        }))
    }
}

impl ProgramEnding {
    /// Waits until the program is reaped, for its exit status and wall time.
    pub fn wait_for_exit(&mut self) -> std::io::Result<()> {
        if let Some(Reaper(handle)) = self.reaper.take() {
            let (exit, ended) = handle.join().map_err(|_| {
                std::io::Error::other("the thread waiting for the program failed")
            })??;
            self.exit = exit;
            self.wall += ended.saturating_duration_since(self.ended);
            self.ended = ended;
        }
        Ok(())
    }

    /// Waits until the program is reaped; its exit status and the recording's overhead, the
    /// profile's writing counted from `writing_started` (or the program's end, if later).
    pub fn program_end(&mut self, writing_started: Instant) -> std::io::Result<ProgramEnd> {
        self.wait_for_exit()?;
        Ok(ProgramEnd {
            exit: Some(ProgramExit {
                code: self.exit.code(),
                signal: self.exit.signal(),
            }),
            overhead: Some(Overhead {
                slowdown: None,
                recorder_cpu_s: Some(own_cpu_time().as_secs_f64()),
                running_cpu_s: Some(self.running_cpu.as_secs_f64()),
                program_wall_s: Some(self.wall.as_secs_f64()),
                writing_wall_s: Some(writing_started.max(self.ended).elapsed().as_secs_f64()),
            }),
        })
    }
}

/// User + system CPU time of the recorder process so far.
pub fn own_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}
