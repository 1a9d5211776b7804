//! The runtime preloaded into real programs (tests/progs/), its event logs read back with
//! `events`: allocation functions, C++, threads, OpenMP, mappings, fork/exec, dlopen, crashes,
//! SIGKILL, page nodes at exit, exit statuses, and the inert runtime.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use numalens_preload::events::{AllocFn, Event, EventLog, find_event_logs, read_event_log};
use numalens_preload::runtime::install_runtime_in;

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: PathBuf,
    prog: PathBuf,
    lib: PathBuf,
    cxx: PathBuf,
    omp: PathBuf,
}

fn compile(compiler: &str, args: &[&str], src: &str, out: &Path) {
    let progs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/progs");
    let o = Command::new(compiler)
        .args(["-O0", "-g", "-Wall", "-Wextra"])
        .args(args)
        .arg("-o")
        .arg(out)
        .arg(progs.join(src))
        .args(["-ldl", "-pthread"])
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(
        o.status.success(),
        "{src}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let runtime = install_runtime_in(d).unwrap();
        let f = Fixture {
            runtime,
            prog: d.join("prog"),
            lib: d.join("libnltest.so"),
            cxx: d.join("cxx"),
            omp: d.join("omp"),
            _dir: dir,
        };
        compile("gcc", &[], "prog.c", &f.prog);
        compile("gcc", &["-shared", "-fPIC"], "lib.c", &f.lib);
        compile("g++", &[], "cxx.cpp", &f.cxx);
        compile("gcc", &["-fopenmp"], "omp.c", &f.omp);
        f
    })
}

struct Run {
    out: Output,
    logs: Vec<EventLog>,
    vals: HashMap<String, u64>,
    _dir: tempfile::TempDir,
}

fn command(exe: &Path, args: &[&str], logs: &Path, extra: &[(&str, &str)]) -> Command {
    let mut c = Command::new(exe);
    c.args(args)
        .env("LD_PRELOAD", &fixture().runtime)
        .env("NUMALENS_DIR", logs)
        .env_remove("NUMALENS_MIN_OBJECT")
        .env_remove("NUMALENS_PAGE_NODES")
        .env_remove("NUMALENS_EXEC_COUNT");
    for (k, v) in extra {
        c.env(k, v);
    }
    c
}

fn values(stdout: &[u8]) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        if let Some((k, v)) = line.split_once(' ') {
            let v = v.trim();
            let n = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            };
            if let Some(n) = n {
                m.insert(k.to_string(), n);
            }
        }
    }
    m
}

fn read_logs(dir: &Path) -> Vec<EventLog> {
    find_event_logs(dir)
        .unwrap()
        .iter()
        .map(|p| read_event_log(p).unwrap())
        .collect()
}

fn run(exe: &Path, args: &[&str], extra: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let out = command(exe, args, dir.path(), extra).output().unwrap();
    Run {
        logs: read_logs(dir.path()),
        vals: values(&out.stdout),
        out,
        _dir: dir,
    }
}

fn events(log: &EventLog) -> Vec<Event> {
    log.events().map(|e| e.event).collect()
}

fn alloc_of(log: &EventLog, address: u64) -> Option<(u64, u64, u64, AllocFn)> {
    events(log).into_iter().find_map(|e| match e {
        Event::Alloc {
            address: a,
            size,
            alignment,
            site_id,
            function,
        } if a == address => Some((size, alignment, site_id, function)),
        _ => None,
    })
}

fn freed(log: &EventLog, address: u64) -> bool {
    events(log)
        .iter()
        .any(|e| matches!(e, Event::Free { address: a } if *a == address))
}

fn site_frames(log: &EventLog, id: u64) -> Vec<u64> {
    events(log)
        .into_iter()
        .find_map(|e| match e {
            Event::Site { site_id, frames } if site_id == id => Some(frames),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no SITE {id:#x}"))
}

/// (low, high, path, build id length) of each module.
fn modules(log: &EventLog) -> Vec<(u64, u64, String, usize, bool)> {
    events(log)
        .into_iter()
        .filter_map(|e| match e {
            Event::Module {
                low,
                high,
                path,
                build_id,
                is_main,
                ..
            } => Some((low, high, path, build_id.len(), is_main)),
            _ => None,
        })
        .collect()
}

#[test]
fn allocation_functions_sizes_addresses_and_sites() {
    let f = fixture();
    let r = run(&f.prog, &["alloc"], &[]);
    assert_eq!(r.out.status.code(), Some(3), "exit status preserved");
    assert_eq!(r.logs.len(), 1);
    let log = &r.logs[0];
    assert!(log.has_end() && !log.truncated);
    let v = &r.vals;
    let (size, align, site, func) = alloc_of(log, v["malloc"]).expect("malloc recorded");
    assert_eq!((size, align, func), (100000, 0, AllocFn::Malloc));
    assert_ne!(site, 0);
    let main = modules(log).into_iter().find(|m| m.4).expect("main module");
    assert!(main.2.ends_with("/prog") && main.3 > 0, "{main:?}");
    let frames = site_frames(log, site);
    assert!(
        frames[0] >= main.0 && frames[0] < main.1,
        "innermost frame in the program: {frames:x?} {main:x?}"
    );
    assert_eq!(
        alloc_of(log, v["calloc"]).map(|a| (a.0, a.3)),
        Some((50000, AllocFn::Calloc))
    );
    assert_eq!(alloc_of(log, v["realloc_from"]).map(|a| a.0), Some(5000));
    assert_ne!(v["realloc_from"], v["realloc_to"], "a 4 MiB realloc moves");
    assert!(events(log).iter().any(|e| matches!(e,
        Event::Realloc { address, size, old_address, site_id }
            if *address == v["realloc_to"] && *size == 4 << 20
                && *old_address == v["realloc_from"] && *site_id != 0)));
    let aligned = [
        ("posix_memalign", 20000, 4096, AllocFn::PosixMemalign),
        ("aligned_alloc", 8192, 256, AllocFn::AlignedAlloc),
        ("memalign", 6000, 64, AllocFn::Memalign),
        ("valloc", 10000, 4096, AllocFn::Valloc),
    ];
    for (k, size, align, func) in aligned {
        let a = alloc_of(log, v[k]).unwrap_or_else(|| panic!("{k} recorded"));
        assert_eq!((a.0, a.1, a.3), (size, align, func), "{k}");
        assert_eq!(v[k] % align, 0, "{k} alignment honoured");
    }
    for k in [
        "malloc",
        "calloc",
        "realloc_to",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "valloc",
    ] {
        assert!(freed(log, v[k]), "free of {k}");
    }
    let small: u64 = events(log)
        .iter()
        .map(|e| match e {
            Event::SmallAllocs { count, .. } => *count,
            _ => 0,
        })
        .sum();
    assert!(small >= 1000, "small allocations counted: {small}");
    let ev = events(log);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::ThreadStart { logical_id: 0, .. }))
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Stack { logical_id: 0, size, .. } if *size > 0))
    );
}

#[test]
fn cxx_new_and_delete_reach_malloc() {
    let f = fixture();
    let r = run(&f.cxx, &[], &[]);
    assert!(r.out.status.success());
    let log = &r.logs[0];
    assert_eq!(alloc_of(log, r.vals["new"]).map(|a| a.0), Some(160000));
    assert!(freed(log, r.vals["new"]));
    assert_eq!(alloc_of(log, r.vals["vector"]).map(|a| a.0), Some(200000));
}

#[test]
fn threads_get_logical_ids_in_creation_order_with_start_routines() {
    let f = fixture();
    let r = run(&f.prog, &["threads"], &[]);
    assert!(r.out.status.success());
    let log = &r.logs[0];
    let mut starts = HashMap::new();
    let mut exits = Vec::new();
    for e in log.events() {
        match e.event {
            Event::ThreadStart {
                logical_id,
                start_routine,
                stack_size,
                ..
            } => {
                starts.insert(logical_id, (start_routine, e.tid, stack_size));
            }
            Event::ThreadExit { logical_id } => exits.push(logical_id),
            _ => {}
        }
    }
    for (i, k) in ["routine1", "routine2", "routine3"].iter().enumerate() {
        let (routine, _, stack) = starts[&(i as i64 + 1)];
        assert_eq!(routine, r.vals[*k], "logical {} runs {k}", i + 1);
        assert!(stack > 0);
    }
    exits.sort();
    assert_eq!(
        exits,
        vec![1, 2, 3],
        "return and pthread_exit both end a thread"
    );
    // The 70000-byte allocation was made by logical thread 1.
    let t1 = starts[&1].1;
    assert!(
        log.events()
            .any(|e| e.tid == t1 && matches!(e.event, Event::Alloc { size: 70000, .. }))
    );
}

#[test]
fn openmp_threads_are_seen() {
    let f = fixture();
    let r = run(&f.omp, &[], &[]);
    assert!(
        r.out.status.success(),
        "{}",
        String::from_utf8_lossy(&r.out.stderr)
    );
    let log = &r.logs[0];
    let tids: std::collections::HashSet<u32> = log
        .events()
        .filter(|e| matches!(e.event, Event::Alloc { size: 100000, .. }))
        .map(|e| e.tid)
        .collect();
    assert_eq!(tids.len(), 3);
    // Buffers are written out in registry order at exit, not in thread order.
    let mut logical: Vec<i64> = log
        .events()
        .filter_map(|e| match e.event {
            Event::ThreadStart { logical_id, .. } => Some(logical_id),
            _ => None,
        })
        .collect();
    logical.sort();
    assert_eq!(logical, vec![0, 1, 2]);
    let gomp = modules(log).into_iter().find(|m| m.2.contains("libgomp"));
    assert!(gomp.is_some());
}

#[test]
fn mmap_mremap_munmap() {
    let f = fixture();
    let r = run(&f.prog, &["mmap"], &[]);
    assert!(r.out.status.success());
    let (m, re) = (r.vals["mmap"], r.vals["mremap"]);
    let ev = events(&r.logs[0]);
    assert!(ev.iter().any(|e| matches!(e,
        Event::Mmap { address, length: 1048576, prot: 3, fd: -1, site_id, .. }
            if *address == m && *site_id != 0)));
    assert!(ev.iter().any(|e| matches!(e,
        Event::Mremap { address, length: 2097152, old_address, old_length: 1048576 }
            if *address == re && *old_address == m)));
    assert!(ev.iter().any(|e| matches!(e,
        Event::Munmap { address, length: 2097152 } if *address == re)));
}

#[test]
fn fork_gives_the_child_its_own_log() {
    let f = fixture();
    let r = run(&f.prog, &["fork"], &[]);
    assert!(r.out.status.success());
    assert_eq!(r.vals["child_status"], 5);
    assert_eq!(r.logs.len(), 2);
    let child = r.vals["child"] as u32;
    let (parent_log, child_log): (Vec<_>, Vec<_>) =
        r.logs.iter().partition(|l| l.header.pid != child);
    let (p, c) = (parent_log[0], child_log[0]);
    assert_eq!(c.header.ppid, p.header.pid);
    assert!(events(p).contains(&Event::Fork { child_pid: child }));
    assert!(alloc_of(p, r.vals["parent_malloc"]).is_some());
    assert!(alloc_of(c, r.vals["child_malloc"]).is_some());
    assert!(alloc_of(c, r.vals["parent_malloc"]).is_none());
    assert!(c.has_end() && p.has_end());
    // The child's forking thread is its logical thread 0, and it reports its modules again.
    assert!(
        events(c)
            .iter()
            .any(|e| matches!(e, Event::ThreadStart { logical_id: 0, .. }))
    );
    assert!(modules(c).iter().any(|m| m.4));
}

#[test]
fn fork_exec_chain_is_followed() {
    let f = fixture();
    let r = run(&f.prog, &["forkexec"], &[]);
    assert!(r.out.status.success());
    assert_eq!(
        r.vals["child_status"], 7,
        "the exec'd program's exit status"
    );
    assert_eq!(
        r.logs.len(),
        3,
        "parent, child before exec, child after exec"
    );
    let child = r.vals["child"] as u32;
    let before = r
        .logs
        .iter()
        .find(|l| l.header.pid == child && l.header.exec_count == 0)
        .unwrap();
    let after = r
        .logs
        .iter()
        .find(|l| l.header.pid == child && l.header.exec_count == 1)
        .expect("the runtime followed into the exec'd image");
    assert!(events(before).iter().any(|e| matches!(e,
        Event::Exec { exec_count: 1, path } if path.ends_with("/prog"))));
    assert!(alloc_of(after, r.vals["leaf_malloc"]).is_some());
    assert!(after.has_end());
}

#[test]
fn dlopened_library_is_a_module_and_owns_its_sites() {
    let f = fixture();
    let lib = f.lib.to_str().unwrap();
    let r = run(&f.prog, &["dlopen", lib], &[]);
    assert!(r.out.status.success());
    let log = &r.logs[0];
    let m = modules(log)
        .into_iter()
        .find(|m| m.2 == lib)
        .expect("dlopen'ed module reported");
    let (size, _, site, _) = alloc_of(log, r.vals["lib_alloc"]).unwrap();
    assert_eq!(size, 65536);
    let frames = site_frames(log, site);
    assert!(
        frames[0] >= m.0 && frames[0] < m.1,
        "site points into the library: {frames:x?} {m:x?}"
    );
}

#[test]
fn crash_keeps_records_and_the_signal() {
    let f = fixture();
    let r = run(&f.prog, &["crash"], &[]);
    assert_eq!(
        r.out.status.signal(),
        Some(libc::SIGSEGV),
        "still killed by SIGSEGV"
    );
    let log = &r.logs[0];
    assert!(alloc_of(log, r.vals["before_crash"]).is_some());
    assert!(events(log).iter().any(|e| matches!(e,
        Event::Signal { signal, address: 0, .. } if *signal == libc::SIGSEGV)));
    assert!(!log.has_end());
}

#[test]
fn sigkill_leaves_a_readable_log_without_end() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let mut child = command(&f.prog, &["sleep"], dir.path(), &[])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child.kill().unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.signal(), Some(libc::SIGKILL));
    let logs = read_logs(dir.path());
    let log = &logs[0];
    assert!(!log.has_end());
    let allocs = events(log)
        .iter()
        .filter(|e| matches!(e, Event::Alloc { size: 8192, .. }))
        .count();
    // 3000 allocations; only the last unflushed buffer (< 1024 records) may be lost.
    assert!(allocs >= 1000, "{allocs} allocations survived");
}

#[test]
fn page_nodes_at_exit() {
    let f = fixture();
    let r = run(&f.prog, &["pages"], &[("NUMALENS_PAGE_NODES", "1")]);
    assert!(r.out.status.success());
    let log = &r.logs[0];
    let runs: Vec<(u64, u64, i64, u64)> = events(log)
        .into_iter()
        .filter_map(|e| match e {
            Event::PageNodes {
                first_page,
                count,
                node,
                page_size,
            } => Some((first_page, count, node, page_size)),
            _ => None,
        })
        .collect();
    let len = r.vals["len"];
    let node_of = |addr: u64| {
        runs.iter()
            .find(|(a, n, _, ps)| addr >= *a && addr < a + n * ps)
            .map(|r| r.2)
    };
    for off in (0..len).step_by(4096) {
        assert_eq!(
            node_of(r.vals["touched"] + off),
            Some(0),
            "touched page {off:#x}"
        );
        assert_eq!(
            node_of(r.vals["untouched"] + off),
            Some(-(libc::ENOENT as i64)),
            "untouched page {off:#x}"
        );
    }
    assert!(log.has_end());
}

#[test]
fn runtime_is_inert_without_numalens_dir() {
    let f = fixture();
    let cwd = tempfile::tempdir().unwrap();
    let out = Command::new(&f.prog)
        .arg("alloc")
        .current_dir(cwd.path())
        .env("LD_PRELOAD", &f.runtime)
        .env_remove("NUMALENS_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(values(&out.stdout).contains_key("valloc"));
    assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
    // And the same program with no runtime at all.
    let plain = Command::new(&f.prog).arg("alloc").output().unwrap();
    assert_eq!(plain.status.code(), Some(3));
}

#[test]
fn unwritable_directory_disables_tracing_quietly() {
    let f = fixture();
    let out = command(&f.prog, &["alloc"], Path::new("/nonexistent/numalens"), &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stderr.is_empty());
}
