//! Hostile programs (tests/hostile_progs/): programs that close or dup2 every descriptor, exec
//! through every variant, take over their signals, lower their limits, run out of descriptors,
//! make raw clone3 threads, unshare, filter their own system calls, daemonise or fork behind
//! libc's back. Each runs natively and under `numalens record`, each in a fresh directory: what
//! the program does (its files byte for byte, its stdout and stderr, its exit status) must be the
//! same, and the profile must be complete or say what it lacks.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use numalens_format::{Object, ObjectKind, PageStat, Profile};

/// What a program did that anyone can see.
#[derive(PartialEq)]
struct Behaviour {
    status: Option<i32>,
    stdout: String,
    stderr: String,
    files: BTreeMap<String, Vec<u8>>,
}

/// Files as their sizes and beginnings: a runtime's binary log in one of them is kilobytes long.
impl std::fmt::Debug for Behaviour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: BTreeMap<&String, String> = self
            .files
            .iter()
            .map(|(name, bytes)| {
                let head = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
                (name, format!("{} bytes: {head:?}", bytes.len()))
            })
            .collect();
        f.debug_struct("Behaviour")
            .field("status", &self.status)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .field("files", &files)
            .finish()
    }
}

/// `meta.json`'s completeness.
struct Completeness {
    complete: bool,
    reasons: Vec<String>,
}

fn progs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile_progs")
}

/// Builds `NAME.c` with gcc, or instrumented with `numalens cc` when `inst`.
fn build(dir: &Path, name: &str, inst: bool) -> PathBuf {
    let out = dir.join(if inst {
        format!("{name}-inst")
    } else {
        name.into()
    });
    let source = progs().join(format!("{name}.c"));
    let mut args = vec!["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread"];
    args.extend([source.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let built = if inst {
        common::numalens(&[&["cc"], args.as_slice()].concat())
    } else {
        Command::new("gcc").args(&args).output().expect("run gcc")
    };
    assert!(
        built.status.success(),
        "{name}: {}",
        common::text(&built.stderr)
    );
    out
}

/// Every file a run left in its directory (the profile's directory left out).
fn files_in(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            let name = e.file_name().to_string_lossy().into_owned();
            files.insert(name, std::fs::read(e.path()).unwrap());
        }
    }
    files
}

/// The program's own stderr lines: `numalens record` adds its summary lines to the same stream.
fn program_lines(stderr: &[u8]) -> String {
    common::text(stderr)
        .lines()
        .filter(|l| !l.starts_with("numalens: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Waits (up to 10 s) until `file` exists in `dir`: for programs whose work outlives them.
fn wait_for(dir: &Path, file: Option<&str>) {
    let Some(file) = file else { return };
    let until = Instant::now() + Duration::from_secs(10);
    while !dir.join(file).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Environment given to both runs: the runtime's debug messages on (they go to stderr, where a
/// program that reused descriptor 2 must not find them); nothing natively.
const ENV: [(&str, &str); 1] = [("NUMALENS_DEBUG", "1")];

fn run_native(work: &Path, exe: &Path, args: &[&str], wait: Option<&str>) -> Behaviour {
    std::fs::create_dir(work).unwrap();
    let out = Command::new(exe)
        .args(args)
        .envs(ENV)
        .current_dir(work)
        .output()
        .unwrap();
    wait_for(work, wait);
    Behaviour {
        status: out.status.code(),
        stdout: common::text(&out.stdout),
        stderr: program_lines(&out.stderr),
        files: files_in(work),
    }
}

fn run_recorded(
    work: &Path,
    profile: &Path,
    exe: &Path,
    args: &[&str],
    wait: Option<&str>,
) -> (Behaviour, Completeness) {
    std::fs::create_dir(work).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_numalens"));
    cmd.args(["record", "-o"]).arg(profile);
    if exe.to_string_lossy().ends_with("-inst") {
        cmd.args(["--backend", "inst"]);
    }
    let out = cmd
        .arg(exe)
        .args(args)
        .current_dir(work)
        .envs(ENV)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    wait_for(work, wait);
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(profile.join("meta.json"))
            .unwrap_or_else(|e| panic!("{}: {e}: {}", exe.display(), common::text(&out.stderr))),
    )
    .unwrap();
    let c = &meta["completeness"];
    let completeness = Completeness {
        complete: c["complete"].as_bool().unwrap(),
        reasons: c["reasons"]
            .as_array()
            .map(|r| r.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default(),
    };
    let behaviour = Behaviour {
        status: out.status.code(),
        stdout: common::text(&out.stdout),
        stderr: program_lines(&out.stderr),
        files: files_in(work),
    };
    (behaviour, completeness)
}

/// Runs `exe ARGS` both ways in `dir`; asserts the same behaviour and returns the recording's
/// completeness and profile.
fn same_behaviour_in(
    dir: &Path,
    exe: &Path,
    args: &[&str],
    wait: Option<&str>,
) -> (Completeness, PathBuf) {
    let native = run_native(&dir.join("native"), exe, args, wait);
    let profile = dir.join("p.numalens");
    let (recorded, completeness) = run_recorded(&dir.join("recorded"), &profile, exe, args, wait);
    assert_eq!(
        recorded,
        native,
        "{} {args:?}: the program behaved differently under numalens",
        exe.display()
    );
    (completeness, profile)
}

fn same_behaviour(exe: &Path, args: &[&str], wait: Option<&str>) -> Completeness {
    let d = tempfile::tempdir().unwrap();
    same_behaviour_in(d.path(), exe, args, wait).0
}

/// The profile holds the work of `churn()` (hostile.h): its 3000 blocks of 100000 bytes as
/// objects, and with `inst` the exact counts of their writes.
fn assert_recorded_churn(what: &str, profile: &Path, inst: bool) {
    let p = Profile::open(profile).unwrap();
    let blocks = p
        .read_all::<Object>()
        .unwrap()
        .iter()
        .filter(|o| o.size == 100_000)
        .count();
    assert!(
        blocks >= 3000,
        "{what}: {blocks} of the 3000 blocks recorded"
    );
    if inst {
        let writes: u64 = p
            .read_all::<PageStat>()
            .unwrap()
            .iter()
            .map(|s| s.writes)
            .sum();
        assert!(
            writes >= 3000 * 100_000 / 8,
            "{what}: {writes} words written counted"
        );
    }
}

fn assert_complete(what: &str, c: &Completeness) {
    assert!(c.complete, "{what}: profile incomplete: {:?}", c.reasons);
}

/// Both backends: the plain build, and the build by `numalens cc` recorded with `--backend inst`;
/// each profile complete and holding the program's work.
fn both_backends(name: &str, args: &[&str]) {
    let d = tempfile::tempdir().unwrap();
    for inst in [false, true] {
        let exe = build(d.path(), name, inst);
        let runs = d.path().join(format!("runs-{inst}"));
        std::fs::create_dir(&runs).unwrap();
        let (c, profile) = same_behaviour_in(&runs, &exe, args, None);
        let what = format!("{name} {args:?} inst={inst}");
        assert_complete(&what, &c);
        assert_recorded_churn(&what, &profile, inst);
    }
}

#[test]
fn closing_every_descriptor_leaves_the_programs_files_and_the_profile_whole() {
    both_backends("close_all", &[]);
}

#[test]
fn dup2_onto_every_descriptor_leaves_the_programs_files_and_the_profile_whole() {
    both_backends("dup2_all", &[]);
}

#[test]
fn closing_every_descriptor_behind_libcs_back_leaves_the_programs_files_whole() {
    for how in ["raw", "close_range", "closefrom"] {
        both_backends("close_range_raw", &[how]);
    }
}

#[test]
fn a_program_started_without_stdin_keeps_its_exact_counts() {
    both_backends("stdin_closed", &[]);
}

#[test]
fn every_exec_variant_keeps_the_profile_complete() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "exec_all", false);
    for variant in [
        "execl",
        "execlp",
        "execle",
        "execv",
        "execvp",
        "execvpe",
        "execve",
        "fexecve",
        "execveat",
        "posix_spawn",
        "posix_spawnp",
        "vfork",
        // 300 vfork children exec'd: the parent's address space grows by nothing, as natively.
        "vfork-many",
    ] {
        let c = same_behaviour(&exe, &[variant], None);
        assert_complete(variant, &c);
    }
}

#[test]
fn a_program_that_takes_over_every_signal_behaves_the_same() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "signals", false);
    assert_complete("signals", &same_behaviour(&exe, &[], None));
}

#[test]
fn tiny_resource_limits_change_nothing_for_the_program() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "rlimits", false);
    for what in ["nofile", "as", "fsize", "watch", "full"] {
        let c = same_behaviour(&exe, &[what], None);
        assert_complete(what, &c);
    }
    // The hooks' files stop growing at the program's RLIMIT_FSIZE instead of killing it with
    // SIGXFSZ, and the profile says what that cost.
    let inst = build(d.path(), "rlimits", true);
    // Each new thread's files are opened under a raised RLIMIT_NOFILE: the program setting and
    // reading its own limit meanwhile sees only its own values.
    assert_complete(
        "inst watch-nofile",
        &same_behaviour(&inst, &["watch-nofile"], None),
    );
    // The hooks' files grow while the program sets its largest file size to and fro: never past
    // a limit it set (which would kill it with SIGXFSZ).
    same_behaviour(&inst, &["watch"], None);
    // With every descriptor used up to the hard limit, a new thread cannot make its count files:
    // the program behaves the same, and the profile says that thread counted nothing.
    let c = same_behaviour(&inst, &["full"], None);
    assert!(
        c.reasons
            .iter()
            .any(|r| r.contains("1 thread could not create the inst backend's count files")),
        "inst full: {:?}",
        c.reasons
    );
    let runs = tempfile::tempdir().unwrap();
    let (c, _) = same_behaviour_in(runs.path(), &inst, &["fsize"], None);
    assert!(
        c.complete || c.reasons.iter().any(|r| r.contains("RLIMIT_FSIZE")),
        "inst fsize: {:?}",
        c.reasons
    );
}

#[test]
fn a_program_that_runs_out_of_descriptors_gets_as_many_as_natively() {
    both_backends("exhaust", &[]);
}

#[test]
#[cfg(target_arch = "x86_64")] // the program makes its clone3 call in x86-64 assembly
fn raw_clone3_threads_and_unshare_behave_the_same() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "clone3_thread", false);
    assert_complete("clone3", &same_behaviour(&exe, &[], None));
}

#[test]
fn a_seccomp_filter_against_the_runtime_changes_nothing_for_the_program() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "seccomp", false);
    let c = same_behaviour(&exe, &[], None);
    // Its own file as descriptor 2: the runtime's message about stopping must not go there.
    same_behaviour(&exe, &["own-stderr"], None);
    let native = Command::new(&exe).current_dir(d.path()).output().unwrap();
    if !common::text(&native.stdout).starts_with("filter 0 0,") {
        eprintln!("no seccomp filters here: only the program's side was checked");
        return;
    }
    // The filter forbids the runtime's writes: the profile cannot be complete, and says why.
    assert!(!c.complete);
    assert!(
        c.reasons
            .iter()
            .any(|r| r
                .contains("the runtime could not write its event log (Operation not permitted")),
        "{:?}",
        c.reasons
    );
}

#[test]
fn a_daemon_writes_the_same_files_and_its_child_is_recorded_to_its_end() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "daemon", false);
    // The recording lasts until the daemon's child exits, so the profile is complete and holds
    // the child's work.
    let runs = tempfile::tempdir().unwrap();
    let (c, profile) = same_behaviour_in(runs.path(), &exe, &[], Some("daemon.out"));
    assert_complete("daemon", &c);
    assert_recorded_churn("daemon", &profile, false);
}

/// A killed program keeps the sites of its large objects: they were written out when allocated,
/// not left in a buffer that only an exit path writes.
#[test]
fn a_killed_program_keeps_the_allocation_sites_of_its_large_objects() {
    let d = tempfile::tempdir().unwrap();
    for inst in [false, true] {
        let exe = build(d.path(), "killed", inst);
        let runs = d.path().join(format!("runs-{inst}"));
        std::fs::create_dir(&runs).unwrap();
        let what = format!("killed inst={inst}");
        let native = run_native(&runs.join("native"), &exe, &[], None);
        let profile = runs.join("p.numalens");
        let (recorded, c) = run_recorded(&runs.join("recorded"), &profile, &exe, &[], None);
        // The recorder reports a killed program as a shell does: 128 + the signal.
        assert_eq!(
            (native.status, recorded.status),
            (None, Some(137)),
            "{what}"
        );
        assert_eq!(recorded.stdout, native.stdout, "{what}");
        assert!(!c.complete, "{what}: a killed run is incomplete");
        assert!(
            c.reasons.iter().any(|r| r.contains("signal 9")),
            "{what}: {:?}",
            c.reasons
        );
        let objects = Profile::open(&profile)
            .unwrap()
            .read_all::<Object>()
            .unwrap();
        let grid = objects.iter().find(|o| o.size == 8 << 20);
        assert!(
            grid.is_some_and(|o| o.name.contains("make_grid")),
            "{what}: the grid is {:?}",
            grid.map(|o| &o.name)
        );
    }
}

#[test]
fn the_runtimes_own_statics_are_not_the_programs_objects() {
    let d = tempfile::tempdir().unwrap();
    for inst in [false, true] {
        let exe = build(d.path(), "statics", inst);
        let profile = d.path().join(format!("statics-{inst}.numalens"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_numalens"));
        cmd.args(["record", "--min-object", "64", "-o"])
            .arg(&profile);
        if inst {
            cmd.args(["--backend", "inst"]);
        }
        let out = cmd.arg(&exe).output().unwrap();
        assert!(out.status.success(), "{}", common::text(&out.stderr));
        let objects = Profile::open(&profile)
            .unwrap()
            .read_all::<Object>()
            .unwrap();
        let statics: Vec<&str> = objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Static)
            .map(|o| o.name.as_str())
            .collect();
        for own in ["program_table", "program_small"] {
            assert!(
                statics.contains(&own),
                "inst={inst}: no {own} in {statics:?}"
            );
        }
        let runtimes: Vec<&&str> = statics.iter().filter(|n| n.starts_with("nl_")).collect();
        assert!(
            runtimes.is_empty(),
            "inst={inst}: the runtime's {runtimes:?}"
        );
    }
}

/// Distinct processes among the profile's objects of `size` bytes.
fn processes_with_objects_of(profile: &Path, size: u64) -> BTreeMap<u32, usize> {
    let mut pids = BTreeMap::new();
    for o in Profile::open(profile)
        .unwrap()
        .read_all::<Object>()
        .unwrap()
    {
        if o.size == size {
            *pids.entry(o.pid).or_default() += 1;
        }
    }
    pids
}

/// Whether the kernel empties MADV_WIPEONFORK pages in a fork child (Linux 4.14), which is how
/// the runtimes see a fork no handler of theirs ran for.
fn kernel_wipes_on_fork() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (4, 14)
}

#[test]
fn forks_behind_libcs_back_neither_hang_nor_write_into_the_parents_log() {
    if !kernel_wipes_on_fork() {
        eprintln!("this kernel has no MADV_WIPEONFORK: forks behind libc's back are not seen");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    for (how, inst) in [("raw", false), ("raw", true), ("_Fork", false)] {
        let exe = build(d.path(), "fork_behind", inst);
        let runs = d.path().join(format!("runs-{how}-{inst}"));
        std::fs::create_dir(&runs).unwrap();
        // forks.out says how many children hung: none natively, so none under numalens either.
        let (c, profile) = same_behaviour_in(&runs, &exe, &[how], None);
        let what = format!("{how} inst={inst}");
        assert_complete(&what, &c);
        // Each of the 20 children's 2000 blocks are its own, beside the parent's thread's many
        // (a child also holds the block that thread had at the fork).
        let pids = processes_with_objects_of(&profile, 100_000);
        let children = pids.values().filter(|n| (2000..=2001).contains(*n)).count();
        assert_eq!(children, 20, "{what}: blocks per process {pids:?}");
        // Named by their allocation site: a child that could not list its modules (that could
        // hang it) is given its parent's.
        let unnamed: Vec<String> = Profile::open(&profile)
            .unwrap()
            .read_all::<Object>()
            .unwrap()
            .into_iter()
            .filter(|o| o.size == 100_000 && !o.name.contains("fork_behind.c:"))
            .map(|o| o.name)
            .take(3)
            .collect();
        assert!(unnamed.is_empty(), "{what}: {unnamed:?}");
        if inst {
            let p = Profile::open(&profile).unwrap();
            let counted: std::collections::BTreeSet<u32> = p
                .read_all::<PageStat>()
                .unwrap()
                .iter()
                .filter(|s| s.writes > 0)
                .map(|s| s.pid)
                .collect();
            assert!(counted.len() >= 21, "{what}: exact counts of {counted:?}");
        }
    }
}

#[test]
fn a_program_that_calls_daemon_3_is_recorded_to_its_end_and_complete() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "fork_behind", false);
    let runs = tempfile::tempdir().unwrap();
    let (c, profile) = same_behaviour_in(runs.path(), &exe, &["daemon"], Some("daemon.out"));
    // The first process leaves by daemon(3)'s _exit(0): that is no missing exit path.
    assert_complete("daemon(3)", &c);
    assert_recorded_churn("daemon(3)", &profile, false);
    // The child's blocks are the child's: not written into its parent's log.
    let blocks = processes_with_objects_of(&profile, 100_000);
    let threads = Profile::open(&profile)
        .unwrap()
        .read_all::<numalens_format::Thread>()
        .unwrap();
    let processes: std::collections::BTreeSet<u32> = threads.iter().map(|t| t.pid).collect();
    assert_eq!(processes.len(), 2, "{processes:?}");
    let first = threads.iter().min_by_key(|t| t.create_ns).unwrap().pid;
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    assert!(
        !blocks.contains_key(&first),
        "{blocks:?}, first process {first}"
    );
}

#[test]
fn a_fork_child_under_inst_keeps_nothing_of_its_parents_count_files() {
    let d = tempfile::tempdir().unwrap();
    let exe = build(d.path(), "fork_behind", true);
    let runs = tempfile::tempdir().unwrap();
    // kept.out says how many of the parent's files the child has mapped: none natively.
    let (c, _) = same_behaviour_in(runs.path(), &exe, &["kept"], None);
    assert_complete("kept", &c);
    // A fork handler of the program's that runs in the child before the runtime's own writes
    // handler_page again: counted nowhere, not into the parent's counts.
    let profile = d.path().join("handler.numalens");
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "inst", "-o"])
        .arg(&profile)
        .arg(&exe)
        .arg("handler")
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let p = Profile::open(&profile).unwrap();
    let objects = p.read_all::<Object>().unwrap();
    let page = objects.iter().find(|o| o.name == "handler_page").unwrap();
    // The parent's 512 writes, and none of the child's (nor any of the child's counted at all).
    let writes: Vec<u64> = p
        .read_all::<PageStat>()
        .unwrap()
        .into_iter()
        .filter(|s| s.page == page.start)
        .map(|s| s.writes)
        .collect();
    assert_eq!(writes, [512]);
}
