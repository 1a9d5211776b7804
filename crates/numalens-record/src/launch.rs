//! Starting the profiled program: the recorder learns the child's pid before it execs, attaches
//! the sampler to it (enabled by the exec itself), then lets it exec.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};

use crate::pmu_events::LiveEvent;
use crate::sampler::{Sampler, SamplerError};

/// What to run and how to sample it.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Extra environment variables for the program (the runtime's settings, LD_PRELOAD).
    pub env: Vec<(OsString, OsString)>,
    /// CPUs to open sampling rings on; `None` records without a sampler.
    pub sample_cpus: Option<Vec<u32>>,
    /// The `pmu` backend's precise events; `None` samples page faults.
    pub precise: Option<Vec<LiveEvent>>,
    pub ring_pages: usize,
}

/// A running program and its sampler.
pub struct Launched {
    pub child: Child,
    pub sampler: Option<Sampler>,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    #[error("{program}: command not found")]
    NotFound { program: String },
    #[error("{program}: permission denied (is it executable?)")]
    NotExecutable { program: String },
    #[error("{program}: is a directory; give the program inside it to run")]
    IsDirectory { program: String },
    #[error("{program}: cannot start: {source}")]
    Spawn { program: String, source: io::Error },
    #[error(transparent)]
    Sampler(#[from] SamplerError),
}

impl LaunchError {
    /// The shell's exit status for a program that could not be started.
    pub fn exit_status(&self) -> i32 {
        match self {
            LaunchError::NotFound { .. } => 127,
            LaunchError::NotExecutable { .. } | LaunchError::IsDirectory { .. } => 126,
            _ => 1,
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Starts the program. With sampling, the child stops before exec until the sampler is attached,
/// so not a single fault of the program is missed.
pub fn launch(spec: &LaunchSpec) -> Result<Launched, LaunchError> {
    let program = spec.program.to_string_lossy().into_owned();
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)));
    // SAFETY: close_in_child only loads an atomic and calls close.
    unsafe {
        command.pre_exec(|| {
            crate::std_fds::close_in_child();
            Ok(())
        });
    }
    let Some(cpus) = spec.sample_cpus.clone() else {
        let child = command.spawn().map_err(|e| spawn_error(&program, e))?;
        return Ok(Launched {
            child,
            sampler: None,
        });
    };
    let spawn_failed = |e| LaunchError::Spawn {
        program: program.clone(),
        source: e,
    };
    let (pid_read, pid_write) = pipe().map_err(spawn_failed)?;
    let (go_read, go_write) = pipe().map_err(spawn_failed)?;
    let (child_pid_fd, child_go_fd) = (pid_write.as_raw_fd(), go_read.as_raw_fd());
    let (parent_pid_fd, parent_go_fd) = (pid_read.as_raw_fd(), go_write.as_raw_fd());
    // SAFETY: the closure only calls async-signal-safe functions (getpid, close, write, read,
    // errno) and allocates nothing: another thread of the recorder may have held the allocator's
    // lock at the fork.
    unsafe {
        command.pre_exec(move || {
            // The recorder's ends, which the fork copied: with the child holding the write end of
            // `go` itself, a recorder killed now would leave it waiting forever.
            libc::close(parent_pid_fd);
            libc::close(parent_go_fd);
            let pid = libc::getpid().to_le_bytes();
            libc::write(child_pid_fd, pid.as_ptr().cast(), pid.len());
            let mut go = [0u8; 1];
            let read = loop {
                let n = libc::read(child_go_fd, go.as_mut_ptr().cast(), 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if read != 1 || go[0] != b'g' {
                // An error made of an errno holds no allocation (a message would be boxed), and
                // only the errno reaches the recorder anyway: spawn reports it, after the sampler's
                // own error, which says why.
                return Err(io::Error::from_raw_os_error(libc::ECANCELED));
            }
            Ok(())
        });
    }
    let ring_pages = spec.ring_pages;
    let precise = spec.precise.clone();
    let attach = std::thread::spawn(move || {
        attach_when_ready(pid_read, go_write, |pid| match &precise {
            Some(events) => Sampler::precise(pid, &cpus, ring_pages, events),
            None => Sampler::faults(pid, &cpus, ring_pages),
        })
    });
    let spawned = command.spawn();
    drop((pid_write, go_read));
    let sampler = attach.join().expect("attach thread does not panic");
    match (spawned, sampler) {
        (Ok(child), Some(Ok(sampler))) => Ok(Launched {
            child,
            sampler: Some(sampler),
        }),
        (_, Some(Err(e))) => Err(LaunchError::Sampler(e)),
        (Err(e), _) => Err(spawn_error(&program, e)),
        (Ok(mut child), None) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(spawn_failed(io::Error::other(
                "the program started without reporting its pid",
            )))
        }
    }
}

/// Reads the child's pid, opens the sampler on it, and tells the child to go on (or not).
fn attach_when_ready(
    pid_read: OwnedFd,
    go_write: OwnedFd,
    open: impl FnOnce(i32) -> Result<Sampler, SamplerError>,
) -> Option<Result<Sampler, SamplerError>> {
    let mut pid = [0u8; 4];
    // SAFETY: reading into a local buffer from a pipe we own.
    let n = unsafe { libc::read(pid_read.as_raw_fd(), pid.as_mut_ptr().cast(), 4) };
    if n != 4 {
        return None; // the child never reached pre_exec (fork failed)
    }
    let sampler = open(i32::from_le_bytes(pid));
    let go = if sampler.is_ok() { b"g" } else { b"x" };
    // SAFETY: writing one byte to a pipe we own.
    unsafe { libc::write(go_write.as_raw_fd(), go.as_ptr().cast(), 1) };
    Some(sampler)
}

fn spawn_error(program: &str, e: io::Error) -> LaunchError {
    let program = program.to_string();
    match e.kind() {
        io::ErrorKind::NotFound => LaunchError::NotFound { program },
        // execve says EACCES for a directory too; the shell says what it is, and so do we.
        io::ErrorKind::PermissionDenied if std::path::Path::new(&program).is_dir() => {
            LaunchError::IsDirectory { program }
        }
        io::ErrorKind::PermissionDenied => LaunchError::NotExecutable { program },
        _ => LaunchError::Spawn { program, source: e },
    }
}

/// Waits for the program's exit without reaping it, when no page-fault ring can tell: through a
/// pidfd (Linux 5.3+), which becomes readable when the process exits, else by sleeping.
pub struct ExitWatch(Option<OwnedFd>);

impl ExitWatch {
    pub fn new(pid: u32) -> Self {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: a non-negative result is a fresh descriptor that nothing else owns.
        ExitWatch((fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
    }

    /// Returns when the process has exited, a signal arrived, or `timeout_ms` passed. Without a
    /// pidfd it sleeps at most 20 ms, so an exit is still noticed within that.
    pub fn wait(&self, timeout_ms: i32) {
        match &self.0 {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, for the duration of the call.
                unsafe { libc::poll(&mut p, 1, timeout_ms) };
            }
            None => std::thread::sleep(std::time::Duration::from_millis(
                timeout_ms.clamp(0, 20) as u64
            )),
        }
    }
}
