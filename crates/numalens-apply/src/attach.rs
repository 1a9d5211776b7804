//! `numalens run --pid PID --policy P`: the online engine on a process that is already running
//! (a database, a server), which was not started under numalens and need not be rebuilt. Its
//! threads are sampled with page-fault events (one per thread; threads they start later are
//! inherited), soft-dirty write faults make its writes visible, and the engine decides and moves
//! as it does for a program it started. It runs until the process ends or numalens gets SIGINT
//! or SIGTERM (the process is left running), and writes a profile with what it did.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use numalens_assemble::raw::{Fault, PerfEvent};
use numalens_format::{Completeness, Migration, ProfileWriter};
use numalens_record::record::{LiveHook, LiveView, monotonic_ns};
use numalens_record::sampler::Sampler;

use crate::engine::Engine;
use crate::error::ApplyError;

/// `CAP_SYS_NICE`: moving another user's pages (`move_pages`) and threads.
const CAP_SYS_NICE: u32 = 23;

/// How an attached run ended.
#[derive(Debug)]
pub struct Attached {
    pub migrations: u64,
    pub faults: u64,
    pub threads: usize,
    pub wall: Duration,
    /// `the process exited`, or the signal that stopped numalens.
    pub ended: String,
}

/// Refuses a process numalens may not move, naming what is missing.
pub fn check_may_move(pid: u32) -> Result<(), ApplyError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| ApplyError::Attach(format!("--pid {pid}: no such process")))?;
    let owner = field(&status, "Uid:").and_then(|v| v.split_whitespace().next()?.parse().ok());
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if owner == Some(me) || has_capability(CAP_SYS_NICE) {
        return Ok(());
    }
    Err(ApplyError::Attach(format!(
        "--pid {pid} belongs to user {} and numalens runs as user {me}: moving another user's \
         pages and threads needs CAP_SYS_NICE (run numalens as root, or give it the capability \
         with `setcap cap_sys_nice+ep`)",
        owner.map_or("?".into(), |o: u32| o.to_string())
    )))
}

fn field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
}

fn has_capability(cap: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    field(&status, "CapEff:")
        .and_then(|v| u64::from_str_radix(v, 16).ok())
        .is_some_and(|mask| mask & (1 << cap) != 0)
}

/// The process's threads now.
fn threads(pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    tids
}

/// Runs `engine` on process `pid` until it ends or numalens is interrupted; writes the profile
/// `output` with the engine's actions (`migrations`).
pub fn attach(
    pid: u32,
    engine: &mut Engine,
    output: &Path,
    meta: numalens_format::Meta,
) -> Result<Attached, ApplyError> {
    check_may_move(pid)?;
    let cpus = numalens_record::faults::online_cpus().map_err(|e| attach_error(pid, e))?;
    let tids = threads(pid);
    let mut samplers = Vec::new();
    for tid in &tids {
        // Threads that end meanwhile are simply not sampled.
        if let Ok(s) = Sampler::faults(*tid as i32, &cpus, 64)
            && s.enable().is_ok()
        {
            samplers.push(s);
        }
    }
    if samplers.is_empty() {
        return Err(ApplyError::Attach(format!(
            "--pid {pid}: the kernel refused page-fault sampling of its threads (lower \
             kernel.perf_event_paranoid, or run as root)"
        )));
    }
    numalens_record::signals::install();
    let started = Instant::now();
    let origin = meta.clock.origin_ns;
    let live: BTreeSet<u32> = [pid].into();
    let mut rows: Vec<Migration> = Vec::new();
    let mut total_faults = 0u64;
    let ended = loop {
        std::thread::sleep(Duration::from_millis(50));
        let mut faults: Vec<Fault> = Vec::new();
        for s in &mut samplers {
            s.drain(|e| {
                if let PerfEvent::Fault(f) = e {
                    faults.push(f);
                }
            });
        }
        faults.sort_by_key(|f| f.time_ns);
        total_faults += faults.len() as u64;
        rows.extend(engine.tick(LiveView {
            now_ns: monotonic_ns(),
            origin_ns: origin,
            live: &live,
            faults: &faults,
            accesses: &[],
            inst_dir: None,
            events_dir: None,
        }));
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break "the process exited".to_string();
        }
        if let Some(signal) = numalens_record::signals::interrupted() {
            break format!("numalens got signal {signal}; the process runs on");
        }
    };
    rows.extend(engine.finish(monotonic_ns()));
    write_profile(output, meta, &rows, &ended)?;
    Ok(Attached {
        migrations: rows.len() as u64,
        faults: total_faults,
        threads: tids.len(),
        wall: started.elapsed(),
        ended,
    })
}

fn write_profile(
    output: &Path,
    meta: numalens_format::Meta,
    rows: &[Migration],
    ended: &str,
) -> Result<(), ApplyError> {
    let io =
        |e: numalens_format::FormatError| ApplyError::Attach(format!("{}: {e}", output.display()));
    let mut writer = ProfileWriter::create(output, meta).map_err(io)?;
    for row in rows {
        writer.push_migration(row.clone()).map_err(io)?;
    }
    writer
        .finish(Completeness {
            complete: false,
            exit: None,
            reasons: vec![format!(
                "attached to a running process (--pid): only the engine's actions are recorded; {ended}"
            )],
        })
        .map_err(io)?;
    Ok(())
}

fn attach_error(pid: u32, e: std::io::Error) -> ApplyError {
    ApplyError::Attach(format!("--pid {pid}: {e}"))
}

/// The `meta.json` of an attached run's profile.
pub fn meta(
    pid: u32,
    policy: &str,
    topology: &numalens_topology::Topology,
) -> numalens_format::Meta {
    let mut settings = std::collections::BTreeMap::new();
    settings.insert("attached_pid".to_string(), pid.into());
    settings.insert("policy".to_string(), policy.into());
    let opts = numalens_assemble::AssembleOptions {
        topology: Some(topology.clone()),
        min_object: 0,
        backend: "faults",
        backend_settings: settings,
        numa_balancing: None,
        thp: numalens_assemble::pagesize::ThpMode::host(),
        recovered: None,
    };
    let start = (
        numalens_format::meta::unix_now_ns(),
        numalens_record::record::monotonic_ns(),
    );
    numalens_assemble::profile_meta(vec!["--pid".into(), pid.to_string()], start, &opts)
}

/// `PID.numalens`, numbered when taken.
pub fn default_output(pid: u32) -> PathBuf {
    let mut path = PathBuf::from(format!("pid{pid}.numalens"));
    let mut n = 2;
    while path.exists() {
        path = PathBuf::from(format!("pid{pid}.{n}.numalens"));
        n += 1;
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_process_is_said_so() {
        let e = check_may_move(u32::MAX / 2).unwrap_err().to_string();
        assert!(e.contains("no such process"), "{e}");
    }

    #[test]
    fn our_own_process_may_be_moved() {
        check_may_move(std::process::id()).unwrap();
    }

    #[test]
    fn the_threads_of_a_process_are_listed() {
        let tids = threads(std::process::id());
        assert!(tids.contains(&std::process::id()));
    }
}
