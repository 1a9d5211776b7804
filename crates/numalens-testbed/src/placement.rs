//! What a placement achieved in a guest, measured from the profile of the run
//! (`bench/vm-placement`, binary `numalens-vm-placement`), and the simulator's memory time of
//! that measured placement.
//!
//! ## What is observed ([`observed`])
//!
//! - **Accesses**: the exact per-(thread, page) counts of the `inst` backend (`page_stats`), and
//!   its sampled stream (`load`/`store` samples, one in N accesses of each thread, with times).
//! - **Where each page was**: the `page_nodes` table (the recorder's periodic `move_pages`
//!   scans, `--page-scan-interval`, and the runtime's exit query), which sees every move,
//!   numalens' and the kernel's alike, plus numalens' own moves at their exact times (the
//!   `migrations` rows of the online engine with result `ok`). A page is, at time t, where the
//!   latest observation at or before t put it (before its first one: where that one put it).
//! - **Where each thread ran**: the CPU of its samples, mapped to nodes with the profile's
//!   recorded topology. The `inst` stream's samples carry no CPU, so these are the page-fault
//!   samples (first touches, faults, NUMA-balancing hints), and the `thread_cpus` file the
//!   bench writes beside each run (`bench/vm/thread_cpus.c`: each thread's CPU from
//!   `/proc/PID/task/TID/stat` every 50 ms, on the profile's clock). A thread is, at time t, on
//!   the node of its latest observation at or before t (before its first one: that one's).
//!
//! ## The estimator ([`locality`])
//!
//! Each exact count is spread over time, then judged at each instant it is spread to. A
//! (thread, page) pair's reads are spread as that pair's `load` samples are, its writes as its
//! `store` samples (as all its samples when it has none of that kind). A pair without samples
//! (fewer accesses than the sampling period, typically) is spread as the thread's samples on
//! the same block of [`locality::BLOCK_PAGES`] pages at or after the pair's first access are
//! (the thread was working there then), else as all the thread's samples from its first access
//! on, else put at its first access. At each instant the access is **local** when the thread's
//! node equals the page's node; it is **served** by the page's node. The local access ratio
//! (LAR) is local / judged (accesses whose thread and page nodes are both known; the judged
//! share is reported); the **imbalance** is the standard deviation over the mean of the
//! accesses each memory node served. At most [`locality::MAX_POINTS`] instants per pair are
//! evaluated (evenly chosen among its samples).
//!
//! **Time to good placement**: the run is cut at the scans; each interval's LAR is its judged
//! accesses' local share. The final level is the LAR of the last quarter of the intervals
//! that hold at least a fifth of the median interval's accesses; the placement is good from
//! the first scan after which every such interval stays within 5 % (relative) of that level.
//!
//! ## Modelled time ([`modelled`])
//!
//! The profile's accesses are loaded as `numalens simulate` loads them (`numalens_place::load`:
//! per page and thread, in windows, exact counts spread as the samples are), and a
//! `numalens_place::Schedule` is built from the measured placement: each page and thread on
//! the node it was at the middle of each window, a move wherever that changes. The simulator
//! replays it on the profile's recorded machine (`Machine::from_topology`): the memory time of
//! what really happened, comparable across conditions.

pub mod locality;
pub mod modelled;
pub mod observed;
pub mod table;

pub use locality::{Locality, Window};
pub use observed::{AccessSample, ExactCount, Observed, Steps};
pub use table::{Condition, Measured, RunOutcome};

use std::path::Path;

use numalens_format::{Migration, PageStat, Profile, Sample};

/// Measures the run recorded in `dir`; `cpus` is the `thread_cpus` file written beside it.
pub fn measure(dir: &Path, cpus: Option<&Path>) -> Result<Measured, String> {
    let profile = Profile::open(dir).map_err(|e| e.to_string())?;
    let cpu_lines = match cpus {
        Some(path) => std::fs::read_to_string(path).unwrap_or_default(),
        None => String::new(),
    };
    let rows: Vec<PageStat> = profile.read_all().map_err(|e| e.to_string())?;
    if rows.is_empty() {
        return Err("the profile has no exact counts (record with --backend inst)".into());
    }
    let all_samples: Vec<Sample> = profile.read_all().map_err(|e| e.to_string())?;
    let first_exact = rows.iter().map(|c| c.first_access_ns).min();
    let observed = Observed::read(&profile, &all_samples, first_exact, &cpu_lines)?;
    let counts: Vec<ExactCount> = rows
        .iter()
        .map(|c| ExactCount::from_row(c, observed.page_size))
        .collect();
    let samples = observed::access_samples(&all_samples, observed.page_size);
    drop(all_samples);
    let locality = locality::measure(&observed, &samples, &counts);
    let migrations: Vec<Migration> = profile.read_migrations().map_err(|e| e.to_string())?;
    let modelled = modelled::simulate(&profile, &observed)?;
    let meta = profile.meta();
    let mut notes = modelled.notes;
    let judged = locality.judged_share();
    if judged < 0.99 {
        notes.push(format!(
            "{:.1} % of the accesses judged (thread or page node unknown for the rest)",
            judged * 100.0
        ));
    }
    if !meta.completeness.complete {
        notes.push(format!(
            "profile incomplete: {}",
            meta.completeness.reasons.join("; ")
        ));
    }
    Ok(Measured {
        lar: locality.lar(),
        imbalance: locality.imbalance(&observed.memory_nodes),
        accesses: locality.accesses,
        numalens_moved_pages: numalens_moved_pages(&migrations, observed.page_size),
        moves_seen: observed.moves_seen,
        time_to_good_s: locality::time_to_good(&locality.windows, observed.start_ns),
        modelled_s: modelled.seconds,
        numa_balancing: meta.numa_balancing.as_ref().map(|b| b.mode),
        program_wall_s: meta.overhead.as_ref().and_then(|o| o.program_wall_s),
        exit_code: meta.completeness.exit.as_ref().and_then(|e| e.code),
        notes,
    })
}

/// Pages numalens itself moved: the online engine's `migrations` rows with result `ok` (a
/// plan's rows are its `mbind`s at allocation, not moves).
pub fn numalens_moved_pages(migrations: &[Migration], page_size: u64) -> u64 {
    migrations
        .iter()
        .filter(|m| m.result == "ok" && m.policy != "plan")
        .map(|m| m.len.div_ceil(page_size.max(1)))
        .sum()
}

#[cfg(test)]
mod tests;
