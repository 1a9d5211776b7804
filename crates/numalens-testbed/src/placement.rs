//! What a placement achieved in a guest, measured from the profile of the run (bench/vm-placement):
//! exact access counts (`page_stats`), where each page really was over time (`page_nodes`: the
//! periodic scans and the exit query, which see every move, numalens' and the kernel's alike),
//! where each thread ran (the CPUs of its page-fault samples), and numalens' own moves
//! (`migrations`). Then the simulator's modelled memory time of that measured placement.
//!
//! Estimator: each (thread, page) exact count is local in the share of that pair's sampled
//! accesses (the `inst` stream, 1 in N accesses, with times) that found the page on the
//! thread's node at that time; a pair without samples (under N accesses) is judged by the
//! page's node at the end of the run.

use std::collections::HashMap;
use std::path::Path;

use numalens_format::{Migration, PageNodes, PageStat, Profile, Sample, SampleKind};
use numalens_place::layout::{Layout, Move, Schedule};
use numalens_place::load::{LoadOptions, load};
use numalens_place::{Machine, Model};

/// One run's measured placement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// Local access ratio of the exact counts.
    pub lar: f64,
    /// Standard deviation over mean of the accesses each memory node served.
    pub imbalance: f64,
    /// Pages numalens moved (`migrations` rows of the engine, result ok).
    pub pages_migrated: u64,
    /// For runs whose pages moved: seconds from the first sample to the first scan interval
    /// after which the local ratio of the sampled accesses stays within 0.05 of its final value.
    pub time_to_good_s: Option<f64>,
    /// The simulator's memory time of the measured placement, seconds.
    pub modelled_s: f64,
    pub accesses: u64,
}

/// Where each page of each process was, in time order: (time, node).
type Timeline = HashMap<(u32, u64), Vec<(u64, u32)>>;

struct Run {
    page_size: u64,
    cpu_node: HashMap<u32, u32>,
    thread_node: HashMap<(u32, u32), u32>,
    pages: Timeline,
    samples: Vec<Sample>,
}

impl Run {
    fn read(profile: &Profile) -> Result<Run, String> {
        let meta = profile.meta();
        let topology = meta
            .topology
            .as_ref()
            .ok_or("the profile has no recorded topology")?;
        let cpu_node: HashMap<u32, u32> = topology
            .nodes
            .iter()
            .flat_map(|n| n.cpus.iter().map(move |c| (*c, n.id)))
            .collect();
        let samples: Vec<Sample> = profile.read_all().map_err(|e| e.to_string())?;
        let thread_node = majority_nodes(&samples, &cpu_node);
        let page_size = meta.page_size.max(1);
        let scans: Vec<PageNodes> = profile.read_all().map_err(|e| e.to_string())?;
        Ok(Run {
            page_size,
            cpu_node,
            thread_node,
            pages: timeline(&scans, page_size),
            samples,
        })
    }

    /// The page's node at `t`: the latest answer at or before it, else the first one after.
    fn node_at(&self, pid: u32, page: u64, t: u64) -> Option<u32> {
        let steps = self.pages.get(&(pid, page))?;
        let i = steps.partition_point(|(time, _)| *time <= t);
        steps.get(i.saturating_sub(1)).map(|(_, n)| *n)
    }

    fn final_node(&self, pid: u32, page: u64) -> Option<u32> {
        self.pages.get(&(pid, page))?.last().map(|(_, n)| *n)
    }
}

/// Each thread's node: where most of its page-fault samples were taken.
fn majority_nodes(samples: &[Sample], cpu_node: &HashMap<u32, u32>) -> HashMap<(u32, u32), u32> {
    let mut votes: HashMap<(u32, u32), HashMap<u32, u64>> = HashMap::new();
    for s in samples {
        if let Some(node) = s.cpu.and_then(|c| cpu_node.get(&c)) {
            *votes
                .entry((s.pid, s.tid))
                .or_default()
                .entry(*node)
                .or_default() += 1;
        }
    }
    votes
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.into_iter().max_by_key(|(n, c)| (*c, u32::MAX - n))?.0)))
        .collect()
}

fn timeline(scans: &[PageNodes], page_size: u64) -> Timeline {
    let mut pages: Timeline = HashMap::new();
    for run in scans {
        let Some(node) = run.node else { continue };
        let per = (run.page_size / page_size).max(1);
        for p in 0..run.pages.saturating_mul(per) {
            let page = run.start / page_size + p;
            pages
                .entry((run.pid, page))
                .or_default()
                .push((run.time_ns, node));
        }
    }
    for steps in pages.values_mut() {
        steps.sort_unstable();
    }
    pages
}

/// Measures the run of `dir`; `migrated_by_kernel` adds the kernel's own migrations (vmstat).
pub fn measure(dir: &Path) -> Result<Measured, String> {
    let profile = Profile::open(dir).map_err(|e| e.to_string())?;
    let run = Run::read(&profile)?;
    let counts: Vec<PageStat> = profile.read_all().map_err(|e| e.to_string())?;
    let migrations: Vec<Migration> = profile.read_migrations().map_err(|e| e.to_string())?;
    let (lar, imbalance, accesses) = exact_locality(&run, &counts);
    Ok(Measured {
        lar,
        imbalance,
        pages_migrated: migrations
            .iter()
            .filter(|m| m.result == "ok" && m.policy != "plan")
            .map(|m| m.len / run.page_size)
            .sum(),
        time_to_good_s: time_to_good(&run),
        modelled_s: modelled(&profile, &run)?,
        accesses,
    })
}

fn is_access(s: &Sample) -> bool {
    matches!(s.kind, SampleKind::Load | SampleKind::Store)
}

/// (LAR, imbalance, accesses) of the exact counts.
fn exact_locality(run: &Run, counts: &[PageStat]) -> (f64, f64, u64) {
    // Per (pid, tid, page): sampled weight seen on each node.
    let mut seen: HashMap<(u32, u32, u64), HashMap<u32, u64>> = HashMap::new();
    for s in run.samples.iter().filter(|s| is_access(s)) {
        let page = s.address / run.page_size;
        if let Some(node) = run.node_at(s.pid, page, s.time_ns) {
            *seen
                .entry((s.pid, s.tid, page))
                .or_default()
                .entry(node)
                .or_default() += u64::from(s.weight.max(1));
        }
    }
    let mut served: HashMap<u32, f64> = run.cpu_node.values().map(|n| (*n, 0.0)).collect();
    let (mut local, mut total) = (0.0f64, 0u64);
    for c in counts {
        let n = c.reads.saturating_add(c.writes);
        let page = c.page / run.page_size;
        let thread = run.thread_node.get(&(c.pid, c.tid)).copied();
        let shares: Vec<(u32, f64)> = match seen.get(&(c.pid, c.tid, page)) {
            Some(by_node) => {
                let sum: u64 = by_node.values().sum();
                by_node
                    .iter()
                    .map(|(node, w)| (*node, *w as f64 / sum as f64))
                    .collect()
            }
            None => run
                .final_node(c.pid, page)
                .map(|n| (n, 1.0))
                .into_iter()
                .collect(),
        };
        for (node, share) in shares {
            *served.entry(node).or_default() += n as f64 * share;
            if Some(node) == thread {
                local += n as f64 * share;
            }
        }
        total = total.saturating_add(n);
    }
    let loads: Vec<f64> = served.values().copied().collect();
    let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
    let var = loads.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / loads.len().max(1) as f64;
    let imbalance = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
    (local / total.max(1) as f64, imbalance, total)
}

/// When the sampled accesses' local ratio reached its final level and stayed there.
fn time_to_good(run: &Run) -> Option<f64> {
    let mut times: Vec<u64> = run.pages.values().flatten().map(|(t, _)| *t).collect();
    times.sort_unstable();
    times.dedup();
    let accesses: Vec<&Sample> = run.samples.iter().filter(|s| is_access(s)).collect();
    let first = accesses.iter().map(|s| s.time_ns).min()?;
    // Scan intervals with their sampled local ratio.
    let mut windows: Vec<(u64, f64)> = Vec::new();
    for pair in times.windows(2) {
        let inside: Vec<&&Sample> = accesses
            .iter()
            .filter(|s| s.time_ns >= pair[0] && s.time_ns < pair[1])
            .collect();
        if inside.len() < 20 {
            continue;
        }
        let local = inside
            .iter()
            .filter(|s| {
                let page = s.address / run.page_size;
                run.thread_node.get(&(s.pid, s.tid)) == run.node_at(s.pid, page, s.time_ns).as_ref()
            })
            .count();
        windows.push((pair[0], local as f64 / inside.len() as f64));
    }
    let last = windows.last()?.1;
    let good_from = windows
        .iter()
        .rposition(|(_, lar)| (lar - last).abs() > 0.05)
        .map_or(0, |i| i + 1);
    windows
        .get(good_from)
        .map(|(t, _)| t.saturating_sub(first) as f64 / 1e9)
}

/// The simulator on the measured placement: threads where they ran, pages where the scans
/// found them at each window's end.
fn modelled(profile: &Profile, run: &Run) -> Result<f64, String> {
    let accesses = load(profile, &LoadOptions::default()).map_err(|e| e.to_string())?;
    let topology = profile.meta().topology.as_ref().ok_or("no topology")?;
    let machine = Machine::from_topology(topology);
    let position = |node: u32| machine.nodes.iter().position(|n| *n == node).unwrap_or(0);
    let thread_node: Vec<usize> = accesses
        .threads
        .iter()
        .map(|t| {
            run.thread_node
                .get(&(t.pid, t.tid))
                .map_or(0, |n| position(*n))
        })
        .collect();
    let w = &accesses.windows;
    let node_at_end = |page: &numalens_place::accesses::Page, k: usize| {
        let end = w.start_ns + w.length_ns * (k as u64 + 1);
        run.node_at(page.pid, page.number, end).map(position)
    };
    let windows = w.cells.len().max(1);
    let initial: Vec<usize> = accesses
        .pages
        .iter()
        .map(|p| node_at_end(p, 0).unwrap_or(0))
        .collect();
    let mut current = initial.clone();
    let mut moves = vec![Vec::new(); windows];
    for (k, step) in moves.iter_mut().enumerate().take(windows).skip(1) {
        for (i, p) in accesses.pages.iter().enumerate() {
            if let Some(node) = node_at_end(p, k)
                && node != current[i]
            {
                step.push(Move::migrate(i as u32, node));
                current[i] = node;
            }
        }
    }
    // The simulator applies moves[w] at the end of window w: shift so that a move seen at the
    // end of window k is in effect from window k on.
    let mut shifted: Vec<Vec<Move>> = moves.into_iter().skip(1).collect();
    shifted.push(Vec::new());
    let schedule = Schedule {
        initial: Layout {
            thread_node,
            page_node: initial,
            replicated: Vec::new(),
        },
        moves: shifted,
        thread_moves: vec![Vec::new(); windows],
        spilled_pages: 0,
        notes: Vec::new(),
    };
    Ok(numalens_place::simulate(&accesses, &machine, &schedule, &Model::default()).modelled_time_s)
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
