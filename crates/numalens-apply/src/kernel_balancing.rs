//! The kernel's own NUMA balancing (`kernel.numa_balancing`) switched off for a run and always
//! restored: by the run when it ends (the program's exit, crash, or a SIGINT/SIGTERM the run
//! forwards), by a guard process when numalens itself is killed (SIGKILL), and by the next
//! numalens command when both were killed (a state file says what to put back).
//!
//! The guard is a child forked before the setting changes. It holds the read end of a pipe
//! whose write end only numalens holds: end of file means numalens is gone without restoring,
//! and the guard restores; a byte means numalens restored and the guard just leaves. It ignores
//! the terminal's signals, so a Ctrl-C to the process group cannot take it down first.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

const SYSCTL: &str = "/proc/sys/kernel/numa_balancing";
const STATE_FILE: &str = "numa_balancing.state";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BalancingError {
    #[error(
        "switching off kernel.numa_balancing needs root (CAP_SYS_ADMIN): run numalens as root, or \
         use --kernel-balancing keep"
    )]
    Denied,
    #[error("kernel.numa_balancing: {0}")]
    Io(#[from] std::io::Error),
}

/// The setting now; `None` on a kernel without NUMA balancing.
pub fn current() -> Option<u32> {
    std::fs::read_to_string(SYSCTL).ok()?.trim().parse().ok()
}

/// Writes the setting.
pub fn set(value: u32) -> Result<(), BalancingError> {
    std::fs::write(SYSCTL, value.to_string()).map_err(|e| match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => BalancingError::Denied,
        _ => BalancingError::Io(e),
    })
}

/// Where the state file lives: `/run/numalens` for root (only root can switch the setting),
/// else a directory of the user's in the temporary directory. Nothing is created here: every
/// command looks, only a run that switches the setting off writes.
pub fn default_state_dir() -> PathBuf {
    // SAFETY: geteuid and getuid have no preconditions.
    if unsafe { libc::geteuid() } == 0 && Path::new("/run").is_dir() {
        return PathBuf::from("/run/numalens");
    }
    std::env::temp_dir().join(format!("numalens-{}", unsafe { libc::getuid() }))
}

/// The setting switched off for a run; dropping it restores the old value.
pub struct Switched {
    old: u32,
    state: PathBuf,
    /// The write end of the guard's pipe; a byte on it tells the guard all is done.
    guard: Option<(OwnedFd, libc::pid_t)>,
}

/// Switches NUMA balancing off; `None` when it is off already or the kernel has none.
pub fn switch_off(state_dir: &Path) -> Result<Option<Switched>, BalancingError> {
    let Some(old) = current().filter(|v| *v != 0) else {
        return Ok(None);
    };
    // May it be written at all? Asked before anything is left behind that would need it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(SYSCTL)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => BalancingError::Denied,
            _ => BalancingError::Io(e),
        })?;
    std::fs::create_dir_all(state_dir)?;
    let state = state_dir.join(STATE_FILE);
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    std::fs::write(
        &state,
        format!("{old} {me} {}\n", start_time(me as u32).unwrap_or(0)),
    )?;
    let guard = spawn_guard(old, &state)?;
    let switched = Switched {
        old,
        state,
        guard: Some(guard),
    };
    set(0)?;
    Ok(Some(switched))
}

impl Switched {
    /// The value the run found and will put back.
    pub fn old(&self) -> u32 {
        self.old
    }

    /// Puts the old value back and tells the guard to leave.
    pub fn restore(mut self) -> Result<(), BalancingError> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<(), BalancingError> {
        let result = set(self.old);
        if result.is_ok() {
            let _ = std::fs::remove_file(&self.state);
        }
        if let Some((pipe, pid)) = self.guard.take() {
            let mut file = std::fs::File::from(pipe);
            let _ = file.write_all(b"x");
            drop(file);
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
        }
        result
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        if self.guard.is_some() {
            let _ = self.restore_now();
        }
    }
}

/// Forks the guard. Everything the child needs is made before the fork: after it, the child
/// (of a process that may have threads) calls only async-signal-safe functions.
fn spawn_guard(old: u32, state: &Path) -> Result<(OwnedFd, libc::pid_t), BalancingError> {
    let sysctl = CString::new(SYSCTL).expect("no NUL");
    let state = CString::new(state.as_os_str().as_encoded_bytes())
        .map_err(|_| BalancingError::Io(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    let value = format!("{old}\n").into_bytes();
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: the child only calls async-signal-safe functions and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    if pid == 0 {
        guard_child(fds[0], fds[1], &sysctl, &state, &value);
    }
    // SAFETY: the read end is the child's; the write end is ours alone from here.
    unsafe { libc::close(fds[0]) };
    Ok((unsafe { OwnedFd::from_raw_fd(fds[1]) }, pid))
}

/// The guard: waits for numalens's word or its end, restores in the second case, leaves.
fn guard_child(read: i32, write: i32, sysctl: &CString, state: &CString, value: &[u8]) -> ! {
    // SAFETY: async-signal-safe calls only, on descriptors and buffers made before the fork.
    unsafe {
        libc::close(write);
        libc::setsid();
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        let mut byte = 0u8;
        let n = loop {
            let n = libc::read(read, (&raw mut byte).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break n;
            }
        };
        if n != 1 {
            let fd = libc::open(sysctl.as_ptr(), libc::O_WRONLY);
            if fd >= 0
                && libc::write(fd, value.as_ptr().cast(), value.len()) == value.len() as isize
            {
                libc::unlink(state.as_ptr());
            }
            if fd >= 0 {
                libc::close(fd);
            }
        }
        libc::_exit(0)
    }
}

/// A process's start time (field 22 of `/proc/PID/stat`), to tell it from a later process
/// with the same pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Puts back a setting left switched off by a numalens run whose process and guard were both
/// killed; says what it did. Called by every numalens command.
pub fn repair_stale(state_dir: &Path) -> Option<String> {
    let path = state_dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&path).ok()?;
    let mut words = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    let (old, pid, started) = (words.next()??, words.next()??, words.next()?.unwrap_or(0));
    let alive = start_time(pid as u32).is_some_and(|t| started == 0 || t == started);
    if alive {
        return None;
    }
    let old = u32::try_from(old).ok()?;
    match set(old) {
        Ok(()) => {
            let _ = std::fs::remove_file(&path);
            Some(format!(
                "kernel.numa_balancing was left at 0 by a numalens run (pid {pid}) that was \
                 killed; it is {old} again, as that run found it"
            ))
        }
        Err(e) => Some(format!(
            "a numalens run (pid {pid}) that was killed left kernel.numa_balancing at 0 and it \
             could not be put back to {old}: {e}"
        )),
    }
}

#[cfg(test)]
#[path = "kernel_balancing_tests.rs"]
mod tests;

/// The guard's pid, for the tests.
#[cfg(test)]
impl Switched {
    fn guard_pid(&self) -> libc::pid_t {
        self.guard.as_ref().map_or(0, |g| g.1)
    }
}
