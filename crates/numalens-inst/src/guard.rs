//! A process that outlives the recorder to empty the hooks' directory in `/dev/shm`.
//!
//! A directory in `/dev/shm` lives until someone removes it: a recorder killed by SIGKILL or the
//! OOM killer cannot. So the recorder forks this guard before the program starts, and the guard
//! makes the directory itself: there is no moment when the directory exists unguarded. It holds
//! the read end of a pipe whose only write end is the recorder's: it reads the program's pid from
//! it, then waits for end of file, which comes when the recorder closes it or dies in any way.
//! If the directory is still there then, the recorder did not finish: the guard waits for the
//! program to end (its hooks write into the files until then), moves the files into the
//! profile's events directory, where `numalens recover` reads them, and removes the directory.
//!
//! The recorder has threads, so after `fork` the guard may only make async-signal-safe calls: it
//! uses raw system calls on descriptors and names prepared before the fork, and never allocates.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The recorder's side of a running guard.
#[derive(Debug)]
pub struct Guard {
    pid: libc::pid_t,
    /// Closed to tell the guard the recording is over.
    pipe: Option<OwnedFd>,
}

impl Guard {
    /// Forks a guard that makes the directory `shm_dir` (mode 0700) and, if the recorder dies,
    /// moves its files to `events_dir`. An error when the directory could not be made.
    pub fn start(shm_dir: &Path, events_dir: &Path) -> std::io::Result<Guard> {
        let shm = CString::new(shm_dir.as_os_str().as_bytes())?;
        let events = CString::new(events_dir.as_os_str().as_bytes())?;
        let (read, write) = pipe()?;
        let (ready_read, ready_write) = pipe()?;
        let fds = GuardFds {
            pipe: read.as_raw_fd(),
            ready: ready_write.as_raw_fd(),
        };
        // SAFETY: the child runs only `guard_main`, which makes async-signal-safe calls only.
        let pid = match unsafe { libc::fork() } {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => guard_main(fds, &shm, &events),
            pid => pid,
        };
        drop((read, ready_write));
        let guard = Guard {
            pid,
            pipe: Some(write),
        };
        // The guard answers once it has made and locked the directory (0), or failed to (errno).
        let mut answer = [0u8; 4];
        // SAFETY: reading into a local buffer from a pipe we own.
        let n = unsafe { libc::read(ready_read.as_raw_fd(), answer.as_mut_ptr().cast(), 4) };
        match (n, i32::from_le_bytes(answer)) {
            (4, 0) => Ok(guard),
            (4, errno) => {
                guard.stop();
                Err(std::io::Error::from_raw_os_error(errno))
            }
            _ => {
                guard.stop();
                Err(std::io::Error::other("the guard process ended at once"))
            }
        }
    }

    /// Tells the guard which process writes the files, so that it waits for its end.
    pub fn watch(&self, program: u32) {
        if let Some(pipe) = &self.pipe {
            let pid = program.to_le_bytes();
            // SAFETY: writing 4 bytes from a local buffer into a pipe we own.
            unsafe { libc::write(pipe.as_raw_fd(), pid.as_ptr().cast(), pid.len()) };
        }
    }

    /// Ends the guard (the recorder has removed the directory itself) and reaps it.
    pub fn stop(mut self) {
        self.pipe = None;
        // SAFETY: the guard is our child; a null status pointer is allowed.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The guard's ends of its two pipes.
#[derive(Clone, Copy)]
struct GuardFds {
    /// The program's pid, then end of file when the recorder is done or dead.
    pipe: libc::c_int,
    /// Where the guard says whether it made the directory.
    ready: libc::c_int,
}

/// The guard's whole life. Never returns.
fn guard_main(fds: GuardFds, shm: &CStr, events: &CStr) -> ! {
    // SAFETY: async-signal-safe calls on values prepared before the fork.
    unsafe {
        // Ctrl-C or a hang-up reaching the whole process group must not end the guard first.
        for signal in [
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGHUP,
            libc::SIGTERM,
            libc::SIGPIPE,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        // Nothing of the recorder stays open here: not its output (a pipe someone reads to its
        // end), not the write end of our own pipe.
        let dev_null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            libc::dup2(dev_null, fd);
        }
        // The lock says the directory is looked after: another recording's sweep of stale
        // directories leaves it alone while the program it belongs to still runs.
        let made = libc::mkdir(shm.as_ptr(), 0o700) == 0;
        let lock = libc::open(shm.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        let locked = made && lock >= 0 && libc::flock(lock, libc::LOCK_EX) == 0;
        let answer = if locked { 0 } else { errno().max(1) };
        libc::write(fds.ready, answer.to_le_bytes().as_ptr().cast(), 4);
        if answer != 0 {
            if made {
                libc::rmdir(shm.as_ptr());
            }
            libc::_exit(0);
        }
        close_all_but([fds.pipe, lock]);
        let program = read_program(fds.pipe);
        // Still there by its name: the recorder did not get to remove it.
        let dir = libc::open(shm.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        if dir >= 0 {
            if let Some(pidfd) = program {
                let mut p = libc::pollfd {
                    fd: pidfd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                while libc::poll(&mut p, 1, -1) < 0 {}
            }
            let to = libc::open(events.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            move_files(dir, to);
            libc::rmdir(shm.as_ptr());
        }
        libc::_exit(0)
    }
}

/// Closes every descriptor from 3 up except the two in `keep`.
unsafe fn close_all_but(keep: [libc::c_int; 2]) {
    let (low, high) = (keep[0].min(keep[1]), keep[0].max(keep[1]));
    // SAFETY: close_range on descriptors of this process only.
    unsafe {
        let mut ok = true;
        for (first, last) in [(3, low - 1), (low + 1, high - 1)] {
            if first <= last {
                ok &= libc::syscall(libc::SYS_close_range, first, last, 0u32) == 0;
            }
        }
        ok &= libc::syscall(libc::SYS_close_range, high + 1, u32::MAX, 0u32) == 0;
        if !ok {
            // Before Linux 5.9: one by one, up to the descriptor limit.
            let limit = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 20) as libc::c_int;
            for fd in (3..limit).filter(|fd| !keep.contains(fd)) {
                libc::close(fd);
            }
        }
    }
}

/// Reads the program's pid until end of file; a pidfd on the program, if one came.
unsafe fn read_program(pipe: libc::c_int) -> Option<libc::c_int> {
    let mut pidfd = None;
    let mut buf = [0u8; 4];
    loop {
        // SAFETY: reading into a local buffer.
        let n = unsafe { libc::read(pipe, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 4 && pidfd.is_none() {
            // Opened while the recorder lives: the program is its unreaped child, so the pid
            // still names it.
            // SAFETY: pidfd_open takes a pid and flags.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, i32::from_le_bytes(buf), 0) };
            pidfd = (fd >= 0).then_some(fd as libc::c_int);
        } else if n == 0 || (n < 0 && errno() != libc::EINTR) {
            return pidfd;
        }
    }
}

fn errno() -> libc::c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Copies every file of `from` into `to` (when `to` is open) and unlinks it from `from`.
unsafe fn move_files(from: libc::c_int, to: libc::c_int) {
    let mut entries = [0u8; 4096];
    loop {
        // Entries are unlinked as they are read: each pass reads the directory from its start.
        // SAFETY: from is an open directory; entries is a local buffer.
        let n = unsafe {
            libc::lseek(from, 0, libc::SEEK_SET);
            libc::syscall(
                libc::SYS_getdents64,
                from,
                entries.as_mut_ptr(),
                entries.len(),
            )
        };
        if n <= 0 {
            return;
        }
        let mut moved = 0;
        let mut at = 0usize;
        while at < n as usize {
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name.
            let reclen = u16::from_ne_bytes([entries[at + 16], entries[at + 17]]) as usize;
            let name = &entries[at + 19..at + reclen];
            // SAFETY: the kernel ends every name with a NUL inside its record.
            let name = unsafe { CStr::from_ptr(name.as_ptr().cast()) };
            at += reclen;
            if name == c"." || name == c".." {
                continue;
            }
            // SAFETY: descriptors and a NUL-terminated name.
            unsafe {
                if to >= 0 && !copy_file(from, to, name) {
                    libc::unlinkat(to, name.as_ptr(), 0);
                }
                libc::unlinkat(from, name.as_ptr(), 0);
            }
            moved += 1;
        }
        if moved == 0 {
            return;
        }
    }
}

/// Copies `name` from the directory `from` into `to`; false if it could not be copied whole.
unsafe fn copy_file(from: libc::c_int, to: libc::c_int, name: &CStr) -> bool {
    // SAFETY: descriptors and a NUL-terminated name; sendfile between two regular files.
    unsafe {
        let src = libc::openat(from, name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if src < 0 {
            return false;
        }
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
        let dst = libc::openat(to, name.as_ptr(), flags, 0o600);
        let mut ok = dst >= 0;
        while ok {
            let n = libc::sendfile(dst, src, std::ptr::null_mut(), 1 << 30);
            ok = n >= 0 || errno() == libc::EINTR;
            if n == 0 {
                break;
            }
        }
        libc::close(src);
        if dst >= 0 {
            libc::close(dst);
        }
        ok
    }
}

/// True when a guard looks after `dir` (it holds the directory's lock).
pub fn is_guarded(dir: &Path) -> bool {
    let Ok(file) = std::fs::File::open(dir) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; the lock goes with it when it is closed.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pipe closed with the directory still there is what a recorder's death looks like.
    #[test]
    fn an_abandoned_directory_is_moved_once_the_program_has_ended() {
        let shm = tempfile::tempdir().unwrap();
        let events = tempfile::tempdir().unwrap();
        let staged = shm.path().join("staged");
        let guard = Guard::start(&staged, events.path()).unwrap();
        assert!(
            is_guarded(&staged),
            "the guard made and locked the directory"
        );
        std::fs::write(staged.join("inst-1-1-0-0.pages"), vec![7u8; 200_000]).unwrap();
        std::fs::write(staged.join("inst-1-1-0-0.samples"), b"samples").unwrap();
        let mut program = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        guard.watch(program.id());
        let started = std::time::Instant::now();
        guard.stop();
        assert!(
            started.elapsed() >= std::time::Duration::from_millis(250),
            "the guard waited for the program"
        );
        program.wait().unwrap();
        assert!(!staged.exists(), "the directory is gone");
        let moved = std::fs::read(events.path().join("inst-1-1-0-0.pages")).unwrap();
        assert_eq!(moved, vec![7u8; 200_000]);
        let moved = std::fs::read(events.path().join("inst-1-1-0-0.samples")).unwrap();
        assert_eq!(moved, b"samples");
    }

    #[test]
    fn a_directory_the_recorder_removed_is_left_alone() {
        let shm = tempfile::tempdir().unwrap();
        let events = tempfile::tempdir().unwrap();
        let staged = shm.path().join("staged");
        let guard = Guard::start(&staged, events.path()).unwrap();
        std::fs::remove_dir(&staged).unwrap();
        guard.stop();
        assert_eq!(std::fs::read_dir(events.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_an_error() {
        let shm = tempfile::tempdir().unwrap();
        let taken = shm.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        let err = Guard::start(&taken, shm.path()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(taken.exists(), "a directory it did not make is not removed");
    }
}
