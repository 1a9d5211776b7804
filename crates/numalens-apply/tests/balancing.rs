//! `balancing` on the real `kernel.numa_balancing` (root only; skipped, saying why, elsewhere).
//! A test binary of its own, so that no test of another binary writes the setting meanwhile;
//! here the tests take turns, and each puts back the value it found, even when it fails.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use numalens_apply::balancing;
use numalens_apply::balancing::{
    BalancingError, KernelBalancing, current, repair_stale, set, state_file, switch_off,
};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long the guard may take to put the value back once numalens is killed.
const WITHIN: Duration = Duration::from_secs(1);

/// The setting as found, put back when dropped: declared first in a test, dropped last.
struct Found(u32);

impl Drop for Found {
    fn drop(&mut self) {
        let _ = set(self.0);
    }
}

/// The lock and the value found, or why the test cannot run here.
fn usable() -> Option<(MutexGuard<'static, ()>, Found)> {
    let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(found) = current() else {
        eprintln!("skipped: this kernel has no kernel.numa_balancing");
        return None;
    };
    if let Err(e) = set(found) {
        eprintln!("skipped: cannot write kernel.numa_balancing: {e}");
        return None;
    }
    Some((lock, Found(found)))
}

/// Polls `what` until it holds or `limit` has passed.
fn soon(limit: Duration, what: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if what() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Fields of `/proc/PID/stat` from field 3 (the state) on.
fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = text.rsplit_once(')')?.1;
    Some(after.split_whitespace().map(String::from).collect())
}

/// Gone, or a zombie nobody reaps (a container's init may not).
fn gone(pid: u32) -> bool {
    stat(pid).is_none_or(|f| f[0] == "Z")
}

/// Processes a test started, SIGKILLed when dropped if they are still the same processes:
/// before `Found` puts the value back, so that no guard writes after it.
struct KillOnDrop(Vec<(u32, String)>);

impl KillOnDrop {
    fn add(&mut self, pid: u32) {
        let start = stat(pid).map(|f| f[19].clone()).unwrap_or_default();
        self.0.push((pid, start));
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for (pid, start) in &self.0 {
            if stat(*pid).is_some_and(|f| &f[19] == start) {
                // SAFETY: a signal to a process this test started.
                unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
                soon(WITHIN, || gone(*pid));
            }
        }
    }
}

#[test]
fn switched_off_then_restored_exactly_as_found() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for value in [1, 2, 3] {
        if set(value).is_err() {
            eprintln!("this kernel does not take {value}");
            continue;
        }
        let switch = switch_off(dir.path()).unwrap().expect("on");
        assert_eq!((current(), switch.original()), (Some(0), value));
        let record = std::fs::read_to_string(state_file(dir.path())).unwrap();
        let record: serde_json::Value = serde_json::from_str(&record).unwrap();
        assert_eq!(record["original"], value);
        assert_eq!(record["pid"], std::process::id());
        let guard = switch.guard_pid().unwrap();
        switch.restore().unwrap();
        assert_eq!(current(), Some(value));
        assert!(!state_file(dir.path()).exists());
        assert!(gone(guard), "the guard has left and been reaped");
    }
}

#[test]
fn the_guard_is_on_its_own() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    let switch = switch_off(dir.path()).unwrap().unwrap();
    let guard = switch.guard_pid().unwrap();
    let fds = || std::fs::read_dir(format!("/proc/{guard}/fd")).map_or(0, |d| d.count());
    assert!(soon(WITHIN, || fds() == 1), "only its socket: {}", fds());
    // Session (field 6) of its own: the terminal's signals do not reach it.
    assert_eq!(stat(guard).unwrap()[3], guard.to_string());
    let name = std::fs::read_to_string(format!("/proc/{guard}/comm")).unwrap();
    assert_eq!(name.trim(), "nl-balancing");
    // Nor do signals sent by name.
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(guard as i32, signal) };
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(!gone(guard));
    assert_eq!(current(), Some(0));
    switch.restore().unwrap();
    assert_eq!(current(), Some(1));
}

#[test]
fn dropping_the_switch_restores() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    let switch = KernelBalancing::Off.apply(dir.path()).unwrap();
    assert_eq!(current(), Some(0));
    drop(switch);
    assert_eq!(current(), Some(1));
    assert!(!state_file(dir.path()).exists());
}

#[test]
fn nothing_to_switch_off_when_off_already() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(0).unwrap();
    assert!(switch_off(dir.path()).unwrap().is_none());
    assert!(!state_file(dir.path()).exists());
    assert!(balancing::why_not_switched(current()).contains("already"));
}

#[test]
fn a_live_runs_state_file_is_not_taken_over() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    let first = switch_off(dir.path()).unwrap().unwrap();
    assert!(
        repair_stale(dir.path()).is_none(),
        "a live run is left alone"
    );
    set(1).unwrap(); // someone switched it on again meanwhile
    let second = switch_off(dir.path()).unwrap_err();
    assert!(matches!(second, BalancingError::InUse(_)), "{second}");
    first.restore().unwrap();
    assert_eq!(current(), Some(1));
}

/// Run by the SIGKILL tests in a process of their own (the test binary again): switches off,
/// says the guard's pid, waits to be killed. With `NL_BALANCING_LEAK` it first forks a process
/// that keeps a copy of every descriptor, its end of the guard's socket included.
#[test]
#[ignore = "a helper process of the SIGKILL tests"]
fn helper_switches_off_and_waits() {
    let Some(dir) = std::env::var_os("NL_BALANCING_HELPER") else {
        return;
    };
    let switch = switch_off(Path::new(&dir)).unwrap().unwrap();
    let leak = match std::env::var_os("NL_BALANCING_LEAK") {
        // SAFETY: the child only sleeps and leaves, both async-signal-safe.
        Some(_) => match unsafe { libc::fork() } {
            0 => unsafe {
                libc::sleep(30);
                libc::_exit(0)
            },
            pid => pid,
        },
        None => 0,
    };
    println!("nl-helper {} {leak}", switch.guard_pid().unwrap());
    std::thread::sleep(Duration::from_secs(30));
}

struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the helper; its guard's pid and its leaking child's (0 when none).
fn start_helper(dir: &Path, leak: bool) -> (Helper, u32, u32) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "helper_switches_off_and_waits", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env("NL_BALANCING_HELPER", dir)
        .stdout(Stdio::piped());
    if leak {
        command.env("NL_BALANCING_LEAK", "1");
    }
    let mut child = Helper(command.spawn().unwrap());
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    // libtest prints the test's name first, on the same line.
    let said = lines
        .find_map(|l| Some(l.ok()?.split_once("nl-helper ")?.1.to_string()))
        .expect("the helper says its guard's pid");
    let (guard, leaked) = said.split_once(' ').unwrap();
    (child, guard.parse().unwrap(), leaked.parse().unwrap())
}

fn killed_numalens(leak: bool) {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let mut strays = KillOnDrop(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    let (mut helper, guard, leaked) = start_helper(dir.path(), leak);
    strays.add(guard);
    if leaked != 0 {
        strays.add(leaked);
    }
    assert_eq!(current(), Some(0));
    assert!(state_file(dir.path()).exists());
    helper.0.kill().unwrap(); // SIGKILL: no destructor runs
    helper.0.wait().unwrap();
    assert!(soon(WITHIN, || current() == Some(1)), "{:?}", current());
    assert!(soon(WITHIN, || !state_file(dir.path()).exists()));
    assert!(soon(WITHIN, || gone(guard)), "the guard has left");
}

#[test]
fn the_guard_restores_when_numalens_is_killed() {
    killed_numalens(false);
}

#[test]
fn the_guard_restores_even_if_its_socket_leaked_into_another_process() {
    killed_numalens(true);
}

/// Run without the right to write the setting by the next tests: what switch_off says there.
#[test]
#[ignore = "a helper process of the tests without the right"]
fn helper_without_the_right() {
    let Some(dir) = std::env::var_os("NL_BALANCING_UNPRIVILEGED") else {
        return;
    };
    match switch_off(Path::new(&dir)) {
        Err(e) => println!("nl-helper {e}"),
        Ok(s) => println!("nl-helper switched: {}", s.is_some()),
    }
}

/// What the helper says about switching off with the state in `dir`, as `command` (from
/// [`helper_without_the_right`]) runs it; `None` when it could not be run so.
fn refusal(command: &mut Command, dir: &Path) -> Option<String> {
    let output = command
        .args([
            "--exact",
            "helper_without_the_right",
            "--ignored",
            "--nocapture",
        ])
        .env("NL_BALANCING_UNPRIVILEGED", dir)
        .output()
        .ok()?;
    let said = String::from_utf8_lossy(&output.stdout);
    Some(said.split_once("nl-helper ")?.1.lines().next()?.to_string())
}

const REFUSED: &str = "needs root (CAP_SYS_ADMIN); run as root or use --kernel-balancing keep";

#[test]
fn a_user_without_root_is_told_so_and_nothing_changes() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    set(1).unwrap();
    let dir = std::env::temp_dir().join(format!("nl-unprivileged-{}", std::process::id()));
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.uid(65534).gid(65534);
    let Some(said) = refusal(&mut command, &dir) else {
        eprintln!("skipped: this test binary cannot be run as uid 65534");
        return;
    };
    assert!(said.contains(REFUSED), "{said}");
    assert_eq!(current(), Some(1));
    assert!(!dir.exists(), "nothing written before the refusal");
}

/// Root without CAP_SYS_ADMIN may open the file but not write it: the state file and the guard
/// are undone.
#[test]
fn root_without_cap_sys_admin_is_told_so_and_nothing_is_left() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    set(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    const CAP_SYS_ADMIN: libc::c_ulong = 21;
    // SAFETY: prctl only, between fork and exec.
    unsafe {
        command.pre_exec(
            || match libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            },
        )
    };
    let said = refusal(&mut command, dir.path()).unwrap_or_default();
    if said.is_empty() || said.starts_with("switched") {
        eprintln!("skipped: CAP_SYS_ADMIN cannot be dropped here ({said:?})");
        return;
    }
    assert!(said.contains(REFUSED), "{said}");
    assert_eq!(current(), Some(1));
    assert!(!state_file(dir.path()).exists());
}

/// A state file as a run writes it.
fn write_state(dir: &Path, original: u32, pid: u32, start_time: u64, boot_id: &str) {
    let record = serde_json::json!({
        "setting": "kernel.numa_balancing",
        "original": original,
        "pid": pid,
        "start_time": start_time,
        "boot_id": boot_id,
        "since_unix_s": 1_700_000_000u64,
    });
    std::fs::write(state_file(dir), record.to_string()).unwrap();
}

fn this_boot() -> String {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    id.trim().to_string()
}

fn dead_pid() -> u32 {
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    pid
}

#[test]
fn the_next_command_repairs_what_a_killed_run_and_guard_left() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dead = dead_pid();
    write_state(dir.path(), 1, dead, 12345, &this_boot());
    set(0).unwrap();
    let said = repair_stale(dir.path()).expect("repaired");
    assert!(said.contains(&format!("(pid {dead}, ")), "{said}");
    assert!(said.contains("it is 1 again"), "{said}");
    assert_eq!(current(), Some(1));
    assert!(!state_file(dir.path()).exists());
    assert!(repair_stale(dir.path()).is_none(), "once");
}

#[test]
fn a_live_run_is_left_alone_but_a_reused_pid_is_not() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let started: u64 = stat(me).unwrap()[19].parse().unwrap();
    write_state(dir.path(), 1, me, started, &this_boot());
    set(0).unwrap();
    assert!(repair_stale(dir.path()).is_none());
    assert_eq!(current(), Some(0));
    assert!(state_file(dir.path()).exists());
    // The same pid, another start time: another process got the dead run's pid.
    write_state(dir.path(), 1, me, started + 1, &this_boot());
    assert!(repair_stale(dir.path()).is_some());
    assert_eq!(current(), Some(1));
}

#[test]
fn a_record_from_another_boot_or_a_value_changed_since_is_only_forgotten() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let other_boot = "00000000-0000-0000-0000-000000000000";
    write_state(dir.path(), 1, dead_pid(), 1, other_boot);
    set(0).unwrap();
    assert!(repair_stale(dir.path()).is_none());
    assert_eq!(current(), Some(0));
    assert!(!state_file(dir.path()).exists());
    if set(2).is_ok() {
        write_state(dir.path(), 1, dead_pid(), 1, &this_boot());
        assert!(repair_stale(dir.path()).is_none());
        assert_eq!(current(), Some(2), "someone's value since is kept");
        assert!(!state_file(dir.path()).exists());
    }
}

#[test]
fn the_first_versions_state_file_is_repaired_too() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let legacy = dir.path().join("numa_balancing.state");
    std::fs::write(&legacy, format!("1 {} 12345\n", dead_pid())).unwrap();
    set(0).unwrap();
    assert!(repair_stale(dir.path()).is_some_and(|s| s.contains("it is 1 again")));
    assert_eq!(current(), Some(1));
    assert!(!legacy.exists());
}
