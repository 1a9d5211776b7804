//! The kernel's own NUMA balancing (`kernel.numa_balancing`) switched off for a run
//! (`numalens run --kernel-balancing off`) and always put back. See docs/BALANCING.md.
//!
//! Three layers, so that no way numalens can end leaves the machine changed:
//!
//! 1. [`BalancingSwitch::restore`], or its `Drop`, puts the value back when the run ends (the
//!    program's exit or crash, a SIGINT/SIGTERM the run forwards, a panic that unwinds).
//! 2. A guard process forked before the value changes puts it back when numalens dies without
//!    doing so (SIGKILL, the OOM killer, an abort). It holds one end of a socket pair whose
//!    other end only numalens holds: end of file means numalens is gone, one byte means it
//!    restored the value itself. As a second signal it notices being reparented, so a copy of
//!    numalens's end leaked into some forked helper cannot keep it waiting. It is in a session
//!    of its own and ignores SIGINT/SIGTERM/SIGHUP, so a Ctrl-C to the terminal or a
//!    `killall numalens` cannot take it down before numalens.
//! 3. A state file, written before the value changes and removed once it is back, lets
//!    [`repair_stale`] (run by every numalens command) put the value back when numalens and its
//!    guard were both killed.
//!
//! The guard and [`repair_stale`] act on behalf of a process that is gone, possibly much later:
//! they put the value back only while it is still the 0 numalens wrote, never over a value
//! someone set since.

use std::ffi::{CStr, CString};
use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The setting's file.
pub const SYSCTL: &str = "/proc/sys/kernel/numa_balancing";
const SYSCTL_C: &CStr = c"/proc/sys/kernel/numa_balancing";
/// The state file's name in the state directory.
pub const STATE_FILE: &str = "numa_balancing.json";
/// The state file of earlier numalens versions ("VALUE PID START"): still repaired, so that a
/// run killed under one is put right too.
const LEGACY_STATE_FILE: &str = "numa_balancing.state";
/// How often the guard checks that numalens is still its parent, in ms.
const GUARD_POLL_MS: libc::c_int = 200;
/// The guard's name in `ps` (15 bytes at most), so it is not mistaken for numalens itself.
const GUARD_NAME: &CStr = c"nl-balancing";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BalancingError {
    /// EACCES or EPERM on the sysctl.
    #[error(
        "switching off kernel.numa_balancing needs root (CAP_SYS_ADMIN); run as root or use \
         --kernel-balancing keep"
    )]
    NeedsRoot,
    #[error("this kernel has no NUMA balancing ({SYSCTL} does not exist)")]
    Absent,
    #[error(
        "kernel.numa_balancing does not take {0} on this kernel (0 off, 1 normal, 2 memory \
         tiering, 3 both; 2 and 3 need Linux 5.18 or later)"
    )]
    Invalid(u32),
    /// The state file is there: a run that is still alive switched the setting off.
    #[error(
        "{} says another numalens run switched kernel.numa_balancing off and has not put it \
         back yet; use --kernel-balancing keep, or remove the file if no numalens run is left",
        .0.display()
    )]
    InUse(PathBuf),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// `--kernel-balancing off|keep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelBalancing {
    /// Switched off for the run, put back afterwards (needs root).
    Off,
    /// Left as it is; the kernel's hinting faults are then one of the engine's signals.
    #[default]
    Keep,
}

impl KernelBalancing {
    pub const NAMES: [&'static str; 2] = ["off", "keep"];

    pub fn from_name(name: &str) -> Option<KernelBalancing> {
        match name {
            "off" => Some(KernelBalancing::Off),
            "keep" => Some(KernelBalancing::Keep),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KernelBalancing::Off => "off",
            KernelBalancing::Keep => "keep",
        }
    }

    /// What the mode asks of the run: `Off` switches off ([`switch_off`]), `Keep` nothing.
    pub fn apply(self, state_dir: &Path) -> Result<Option<BalancingSwitch>, BalancingError> {
        match self {
            KernelBalancing::Off => switch_off(state_dir),
            KernelBalancing::Keep => Ok(None),
        }
    }
}

/// The setting now; `None` on a kernel without NUMA balancing.
pub fn current() -> Option<u32> {
    std::fs::read_to_string(SYSCTL).ok()?.trim().parse().ok()
}

/// Writes the setting.
pub fn set(value: u32) -> Result<(), BalancingError> {
    // Not `fs::write`: it would try to create the file on a kernel without it.
    let mut file = OpenOptions::new()
        .write(true)
        .open(SYSCTL)
        .map_err(|e| sysctl_error(e, value))?;
    file.write_all(format!("{value}\n").as_bytes())
        .map_err(|e| sysctl_error(e, value))
}

fn sysctl_error(e: std::io::Error, value: u32) -> BalancingError {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => BalancingError::NeedsRoot,
        Some(libc::ENOENT) => BalancingError::Absent,
        Some(libc::EINVAL) => BalancingError::Invalid(value),
        _ => BalancingError::Io {
            what: format!("writing {value} to {SYSCTL}"),
            source: e,
        },
    }
}

/// What a value means, for messages.
pub fn mode_name(value: u32) -> &'static str {
    match value {
        0 => "off",
        1 => "normal",
        2 => "memory tiering",
        3 => "normal and memory tiering",
        _ => "unknown",
    }
}

/// Why [`switch_off`] had nothing to do, given the value it found ([`current`]).
pub fn why_not_switched(found: Option<u32>) -> String {
    match found {
        None => format!("this kernel has no NUMA balancing (no {SYSCTL}): nothing to switch off"),
        Some(0) => "kernel.numa_balancing is 0 (off) already: nothing to switch off".into(),
        Some(v) => format!("kernel.numa_balancing is {v} ({})", mode_name(v)),
    }
}

/// `/run/numalens` when this user may write there (root), else `numalens-EUID` in the
/// temporary directory. Nothing is created here: every command looks, only a switch writes.
pub fn default_state_dir() -> PathBuf {
    let run = Path::new("/run/numalens");
    if writable(run) || (!run.exists() && writable(Path::new("/run"))) {
        return run.to_path_buf();
    }
    std::env::temp_dir().join(format!("numalens-{}", euid()))
}

/// The state file in a state directory.
pub fn state_file(state_dir: &Path) -> PathBuf {
    state_dir.join(STATE_FILE)
}

fn writable(path: &Path) -> bool {
    let Ok(path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path.
    unsafe { libc::access(path.as_ptr(), libc::W_OK) == 0 }
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The setting switched off for a run; [`restore`](BalancingSwitch::restore) or dropping it
/// puts the value found back, and a guard process does if numalens dies first.
#[derive(Debug)]
pub struct BalancingSwitch {
    original: u32,
    state_file: PathBuf,
    /// `None` once restored.
    guard: Option<Guard>,
}

/// Switches NUMA balancing off: writes the state file, forks the guard, writes 0. `None` when
/// there is nothing to switch off (0 already, or no such setting; [`why_not_switched`] says
/// which). Callable from any thread: the guard watches the process, not the thread. Run
/// [`repair_stale`] first (every command does), or a stale state file gives
/// [`BalancingError::InUse`].
pub fn switch_off(state_dir: &Path) -> Result<Option<BalancingSwitch>, BalancingError> {
    let Some(original) = current().filter(|&v| v != 0) else {
        return Ok(None);
    };
    // Refuse a user who may not write it before anything is forked or written.
    OpenOptions::new()
        .write(true)
        .open(SYSCTL)
        .map_err(|e| sysctl_error(e, 0))?;
    let state_file = publish(state_dir, &Record::now(original))?;
    let guard = Guard::spawn(original, &state_file).inspect_err(|_| {
        let _ = std::fs::remove_file(&state_file);
    })?;
    let mut switch = BalancingSwitch {
        original,
        state_file,
        guard: Some(guard),
    };
    if let Err(e) = set(0) {
        switch.release();
        return Err(e);
    }
    Ok(Some(switch))
}

impl BalancingSwitch {
    /// The value found, which will be put back.
    pub fn original(&self) -> u32 {
        self.original
    }

    pub fn state_file(&self) -> &Path {
        &self.state_file
    }

    /// The guard process (for diagnostics).
    pub fn guard_pid(&self) -> Option<u32> {
        self.guard.as_ref().map(|g| g.pid as u32)
    }

    /// Puts the value found back, removes the state file and ends the guard.
    pub fn restore(mut self) -> Result<(), BalancingError> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<(), BalancingError> {
        let Some(guard) = self.guard.take() else {
            return Ok(());
        };
        let result = set(self.original);
        if result.is_ok() {
            let _ = std::fs::remove_file(&self.state_file);
        }
        // On failure the guard gets end of file and tries once more; if it fails too the
        // state file stays and the next command tries again, and says so.
        guard.finish(result.is_ok());
        result
    }

    /// Nothing was switched after all (0 could not be written): undo the rest.
    fn release(&mut self) {
        if let Some(guard) = self.guard.take() {
            let _ = std::fs::remove_file(&self.state_file);
            guard.finish(true);
        }
    }
}

impl Drop for BalancingSwitch {
    fn drop(&mut self) {
        let _ = self.restore_now();
    }
}

/// What the state file says.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    original: u32,
    pid: u32,
    /// `/proc/PID/stat` start time in clock ticks: tells numalens from a later process that got
    /// its pid. 0 when unknown.
    start_time: u64,
    /// The kernel's boot id: after a reboot the setting is the boot's, not ours to put back.
    boot_id: Option<String>,
    /// When the setting was switched off, seconds since the epoch; 0 when unknown.
    since: u64,
}

impl Record {
    fn now(original: u32) -> Record {
        let pid = std::process::id();
        Record {
            original,
            pid,
            start_time: process_state(pid).map_or(0, |s| s.1),
            boot_id: boot_id(),
            since: unix_now(),
        }
    }

    fn to_json(&self) -> String {
        let json = serde_json::json!({
            "setting": "kernel.numa_balancing",
            "original": self.original,
            "pid": self.pid,
            "start_time": self.start_time,
            "boot_id": self.boot_id,
            "since_unix_s": self.since,
        });
        format!("{json:#}\n")
    }

    fn from_json(text: &str) -> Option<Record> {
        let json: serde_json::Value = serde_json::from_str(text).ok()?;
        let number = |key: &str| json.get(key).and_then(|v| v.as_u64());
        Some(Record {
            original: u32::try_from(number("original")?).ok()?,
            pid: u32::try_from(number("pid")?).ok()?,
            start_time: number("start_time").unwrap_or(0),
            boot_id: json.get("boot_id").and_then(|v| v.as_str()).map(Into::into),
            since: number("since_unix_s").unwrap_or(0),
        })
    }

    /// An earlier version's "VALUE PID START".
    fn from_legacy(text: &str) -> Option<Record> {
        let mut words = text.split_whitespace().map(str::parse::<u64>);
        let (original, pid) = (words.next()?.ok()?, words.next()?.ok()?);
        Some(Record {
            original: u32::try_from(original).ok()?,
            pid: u32::try_from(pid).ok()?,
            start_time: words.next().and_then(Result::ok).unwrap_or(0),
            boot_id: None,
            since: 0,
        })
    }
}

/// Writes the state file whole or not at all, and only if there is none: a second run must not
/// take over a live run's record.
fn publish(state_dir: &Path, record: &Record) -> Result<PathBuf, BalancingError> {
    let io = |what: String| move |source| BalancingError::Io { what, source };
    make_state_dir(state_dir)?;
    let path = state_file(state_dir);
    let scratch = state_dir.join(format!(".{STATE_FILE}.{}", record.pid));
    std::fs::write(&scratch, record.to_json())
        .map_err(io(format!("writing {}", scratch.display())))?;
    let linked = std::fs::hard_link(&scratch, &path);
    let _ = std::fs::remove_file(&scratch);
    match linked {
        Ok(()) => Ok(path),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(BalancingError::InUse(path)),
        Err(e) => Err(io(format!("writing {}", path.display()))(e)),
    }
}

/// Makes the directory (0700), and refuses one that belongs to someone else: its state file
/// would decide what a later command writes into the kernel.
fn make_state_dir(dir: &Path) -> Result<(), BalancingError> {
    let io = |source| BalancingError::Io {
        what: format!("state directory {}", dir.display()),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    let owner = std::fs::metadata(dir).map_err(io)?.uid();
    if owner != euid() {
        return Err(io(std::io::Error::other(format!(
            "owned by uid {owner}, not by this user"
        ))));
    }
    Ok(())
}

/// The guard as numalens sees it.
#[derive(Debug)]
struct Guard {
    pid: libc::pid_t,
    /// Our end of the socket pair: a byte says "restored", closing it says "gone".
    tell: OwnedFd,
}

/// Everything the guard needs, made before the fork: after it the child may only make
/// async-signal-safe calls (the parent may have threads), so it must not allocate.
struct GuardPlan<'a> {
    socket: libc::c_int,
    parent: libc::pid_t,
    fd_limit: libc::c_int,
    state: &'a CStr,
    value: &'a [u8],
}

impl Guard {
    fn spawn(original: u32, state_file: &Path) -> Result<Guard, BalancingError> {
        let io = |source| BalancingError::Io {
            what: "starting the guard process".into(),
            source,
        };
        let state = CString::new(state_file.as_os_str().as_bytes())
            .map_err(|e| io(std::io::Error::new(ErrorKind::InvalidInput, e)))?;
        let value = format!("{original}\n").into_bytes();
        let (tell, theirs) = socket_pair().map_err(io)?;
        let plan = GuardPlan {
            socket: theirs.as_raw_fd(),
            // SAFETY: getpid and sysconf have no preconditions.
            parent: unsafe { libc::getpid() },
            fd_limit: unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(1024, 1 << 20) as _,
            state: &state,
            value: &value,
        };
        // SAFETY: the child runs only `guard_main`, which makes async-signal-safe calls only.
        match unsafe { libc::fork() } {
            -1 => Err(io(std::io::Error::last_os_error())),
            // SAFETY: in the freshly forked child, as `guard_main` requires.
            0 => unsafe { guard_main(&plan) },
            pid => Ok(Guard { pid, tell }),
        }
    }

    /// Tells the guard the value is back (`restored`) or leaves it to it, and reaps it: no
    /// guard outlives a normal restore.
    fn finish(self, restored: bool) {
        if restored {
            // SAFETY: sending one byte from a local on a socket we own; MSG_NOSIGNAL because a
            // guard killed by someone must not turn into a SIGPIPE here.
            unsafe {
                libc::send(
                    self.tell.as_raw_fd(),
                    c"d".as_ptr().cast(),
                    1,
                    libc::MSG_NOSIGNAL,
                )
            };
        }
        drop(self.tell);
        // SAFETY: the guard is our child; a null status pointer is allowed.
        while unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) } < 0
            && errno() == libc::EINTR
        {}
    }
}

/// A socket pair rather than a pipe: the same end of file when one side goes, and no SIGPIPE.
fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The guard's whole life.
///
/// # Safety
/// Only in the child of `fork`, which must never return to the parent's code.
unsafe fn guard_main(plan: &GuardPlan) -> ! {
    // SAFETY: async-signal-safe calls on values prepared before the fork.
    unsafe {
        // Out of the terminal's process group and session: Ctrl-C, Ctrl-\ and a hang-up go to
        // numalens and the program, not here. Ignored as well for a signal sent by name.
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
        libc::prctl(libc::PR_SET_NAME, GUARD_NAME.as_ptr());
        // Holds no mount busy, and nothing of numalens's open: not its output (someone may read
        // it to its end), not a copy of numalens's end of our own socket.
        libc::chdir(c"/".as_ptr());
        keep_only_socket(plan.socket, plan.fd_limit);
        if numalens_gone(plan.parent) {
            put_back(plan);
        }
        libc::_exit(0)
    }
}

/// Moves the socket to descriptor 0 and closes every other one.
unsafe fn keep_only_socket(socket: libc::c_int, fd_limit: libc::c_int) {
    // SAFETY: descriptors of this process only.
    unsafe {
        if socket != 0 {
            libc::dup2(socket, 0);
        }
        if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
            // Before Linux 5.9: one by one.
            for fd in 1..fd_limit {
                libc::close(fd);
            }
        }
    }
}

/// Waits for numalens's word on descriptor 0: `false` when it restored the value itself,
/// `true` when it is gone (end of file, or this guard was given another parent).
unsafe fn numalens_gone(parent: libc::pid_t) -> bool {
    let mut socket = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: poll, getppid and read on our own descriptor and locals.
        unsafe {
            let ready = libc::poll(&mut socket, 1, GUARD_POLL_MS);
            if libc::getppid() != parent {
                return true;
            }
            if ready > 0 {
                let mut byte = 0u8;
                match libc::read(0, (&raw mut byte).cast(), 1) {
                    1 => return false,
                    0 => return true,
                    _ if errno() == libc::EINTR => {}
                    // A broken socket: the parent check alone decides from here.
                    _ => socket.fd = -1,
                }
            }
        }
    }
}

/// The guard's restore: the value found, if the setting is still the 0 numalens wrote; the
/// state file is removed unless writing failed (then the next command tries).
unsafe fn put_back(plan: &GuardPlan) {
    // SAFETY: open/read/write/close/unlink on paths and buffers prepared before the fork.
    unsafe {
        if sysctl_is_zero() {
            let fd = libc::open(SYSCTL_C.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return;
            }
            let n = libc::write(fd, plan.value.as_ptr().cast(), plan.value.len());
            libc::close(fd);
            if n != plan.value.len() as isize {
                return;
            }
        }
        libc::unlink(plan.state.as_ptr());
    }
}

/// Async-signal-safe `current() == Some(0)`.
unsafe fn sysctl_is_zero() -> bool {
    let mut text = [0u8; 8];
    // SAFETY: reading into a local buffer.
    let n = unsafe {
        let fd = libc::open(SYSCTL_C.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::read(fd, text.as_mut_ptr().cast(), text.len());
        libc::close(fd);
        n
    };
    n >= 1 && text[0] == b'0' && (n == 1 || !text[1].is_ascii_digit())
}

fn errno() -> libc::c_int {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Puts back a setting left at 0 by a numalens run that was killed together with its guard,
/// and says what it did; `None` when there was nothing to repair. Run by every numalens
/// command at startup. A run still alive (its pid with the recorded start time) is left alone;
/// a record from before a reboot, or a setting someone changed since, is only forgotten.
pub fn repair_stale(state_dir: &Path) -> Option<String> {
    [STATE_FILE, LEGACY_STATE_FILE]
        .iter()
        .find_map(|name| repair_one(&state_dir.join(name)))
}

fn repair_one(path: &Path) -> Option<String> {
    let record = read_record(path)?;
    if running(record.pid, record.start_time) {
        return None;
    }
    let other_boot = record.boot_id.is_some() && record.boot_id != boot_id();
    if other_boot || current() != Some(0) {
        let _ = std::fs::remove_file(path);
        return None;
    }
    let (pid, original) = (record.pid, record.original);
    let when = match record.since {
        0 => String::new(),
        since => format!(", {} ago", ago(unix_now().saturating_sub(since))),
    };
    Some(match set(original) {
        Ok(()) => {
            let _ = std::fs::remove_file(path);
            format!(
                "kernel.numa_balancing was left at 0 by a numalens run (pid {pid}{when}) that was \
                 killed together with its guard; it is {original} again, as that run found it"
            )
        }
        Err(e) => format!(
            "a numalens run (pid {pid}{when}) that was killed left kernel.numa_balancing at 0, \
             and it could not be put back to {original}: {e}"
        ),
    })
}

/// The state file, if it is there, ours (another user's file must not decide what we write
/// into the kernel) and readable.
fn read_record(path: &Path) -> Option<Record> {
    if std::fs::metadata(path).ok()?.uid() != euid() {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => Record::from_json(&text),
        _ => Record::from_legacy(&text),
    }
}

/// Whether `pid` is still the process that started at `start_time` (any, when 0) and has not
/// exited (a zombie has).
fn running(pid: u32, start_time: u64) -> bool {
    process_state(pid).is_some_and(|(state, start)| {
        !matches!(state, b'Z' | b'X') && (start_time == 0 || start == start_time)
    })
}

/// A process's state letter and start time, from `/proc/PID/stat`.
fn process_state(pid: u32) -> Option<(u8, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = *fields.next()?.as_bytes().first()?;
    // Field 3 is the state, field 22 the start time.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A duration in seconds as people say it.
fn ago(seconds: u64) -> String {
    match seconds {
        0..120 => format!("{seconds} s"),
        120..7200 => format!("{} min", seconds / 60),
        7200..172_800 => format!("{} h", seconds / 3600),
        _ => format!("{} days", seconds / 86_400),
    }
}

/// Without the sysctl: the real one is tested in `tests/balancing.rs`, a test binary of its
/// own, so that those tests never run at the same time as other tests of this crate that write
/// the setting.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_by_name() {
        for name in KernelBalancing::NAMES {
            assert_eq!(KernelBalancing::from_name(name).unwrap().name(), name);
        }
        assert_eq!(KernelBalancing::from_name("on"), None);
        assert_eq!(KernelBalancing::default(), KernelBalancing::Keep);
        let dir = Path::new("/nonexistent/numalens");
        assert!(KernelBalancing::Keep.apply(dir).unwrap().is_none());
    }

    #[test]
    fn the_state_file_reads_back() {
        let record = Record::now(2);
        assert_eq!(record.pid, std::process::id());
        assert!(record.start_time > 0 && record.since > 0);
        assert_eq!(Record::from_json(&record.to_json()), Some(record));
        let legacy = Record::from_legacy("1 4242 98765\n").unwrap();
        assert_eq!(
            (legacy.original, legacy.pid, legacy.start_time),
            (1, 4242, 98765)
        );
        assert!(Record::from_json("{\"original\": 1}").is_none());
        assert!(Record::from_legacy("x").is_none());
    }

    #[test]
    fn a_running_process_is_known_by_its_start_time() {
        let me = std::process::id();
        let (state, start) = process_state(me).unwrap();
        assert!(state.is_ascii_uppercase());
        assert!(running(me, start) && running(me, 0));
        assert!(!running(me, start + 1), "the pid reused by another process");
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        assert!(!running(pid, 0));
    }

    #[test]
    fn another_users_state_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        make_state_dir(&dir.path().join("a/b")).unwrap();
        if euid() == 0 {
            // SAFETY: chown of our own temporary directory.
            let path = CString::new(dir.path().as_os_str().as_bytes()).unwrap();
            assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
            let e = make_state_dir(dir.path()).unwrap_err();
            assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        }
    }

    #[test]
    fn messages() {
        assert!(
            BalancingError::NeedsRoot
                .to_string()
                .contains("needs root (CAP_SYS_ADMIN); run as root or use --kernel-balancing keep")
        );
        assert!(why_not_switched(None).contains("no NUMA balancing"));
        assert!(why_not_switched(Some(0)).contains("already"));
        assert_eq!(ago(59), "59 s");
        assert_eq!(ago(3600), "60 min");
        assert_eq!(ago(3 * 86_400), "3 days");
    }
}
