//! On the real sysctl (root only; skipped, saying why, elsewhere). Each test puts back the
//! value it found, even when it fails, and they run one at a time.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::*;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Puts the setting back as found when dropped.
struct Found(u32);

impl Drop for Found {
    fn drop(&mut self) {
        let _ = set(self.0);
    }
}

/// The lock and the value found, or why the test cannot run here.
fn usable() -> Option<(std::sync::MutexGuard<'static, ()>, Found)> {
    let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(found) = current() else {
        eprintln!("skipped: this kernel has no kernel.numa_balancing");
        return None;
    };
    if set(found).is_err() {
        eprintln!("skipped: writing kernel.numa_balancing needs root");
        return None;
    }
    Some((lock, Found(found)))
}

fn wait_for(value: u32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        if current() == Some(value) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn switched_off_for_the_run_and_restored_after() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    let switched = switch_off(dir.path()).unwrap().expect("1 is on");
    assert_eq!((current(), switched.old()), (Some(0), 1));
    assert!(dir.path().join(STATE_FILE).exists());
    let guard = switched.guard_pid();
    switched.restore().unwrap();
    assert_eq!(current(), Some(1));
    assert!(!dir.path().join(STATE_FILE).exists());
    // The guard has left (reaped by restore).
    assert!(!Path::new(&format!("/proc/{guard}")).exists());
}

#[test]
fn dropping_the_switch_restores_and_off_stays_off() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    drop(switch_off(dir.path()).unwrap());
    assert_eq!(current(), Some(1));
    set(0).unwrap();
    assert!(
        switch_off(dir.path()).unwrap().is_none(),
        "nothing to switch off"
    );
}

/// Run by the next test in a process of its own: switches off, says so, waits to be killed.
#[test]
#[ignore = "the SIGKILL test's child process"]
fn child_that_switches_off_and_waits() {
    let Some(dir) = std::env::var_os("NL_BALANCING_CHILD") else {
        return;
    };
    let switched = switch_off(Path::new(&dir)).unwrap();
    println!("switched {}", switched.is_some());
    std::thread::sleep(Duration::from_secs(30));
    drop(switched);
}

#[test]
fn the_guard_restores_when_numalens_is_killed() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    set(1).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "kernel_balancing::tests::child_that_switches_off_and_waits",
        ])
        .args(["--ignored", "--nocapture", "--test-threads=1"])
        .env("NL_BALANCING_CHILD", dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints the test's name first, on the same line.
    let said = lines.find_map(|l| l.ok().filter(|l| l.contains("switched")));
    assert!(said.is_some_and(|l| l.ends_with("switched true")));
    assert_eq!(current(), Some(0));
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    assert!(wait_for(1), "the guard put 1 back: {:?}", current());
    assert!(
        !dir.path().join(STATE_FILE).exists(),
        "and removed the state file"
    );
}

#[test]
fn the_next_command_repairs_what_a_killed_run_and_guard_left() {
    let Some((_lock, _found)) = usable() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    std::fs::write(dir.path().join(STATE_FILE), format!("1 {dead} 12345\n")).unwrap();
    set(0).unwrap();
    let said = repair_stale(dir.path()).expect("repaired");
    assert!(said.contains("it is 1 again"), "{said}");
    assert_eq!(current(), Some(1));
    assert!(repair_stale(dir.path()).is_none(), "once");
    // A run still alive (this process) is left alone.
    let me = std::process::id();
    let started = start_time(me).unwrap();
    std::fs::write(dir.path().join(STATE_FILE), format!("1 {me} {started}\n")).unwrap();
    set(0).unwrap();
    assert!(repair_stale(dir.path()).is_none());
    assert_eq!(current(), Some(0));
}
