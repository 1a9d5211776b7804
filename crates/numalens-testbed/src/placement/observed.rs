//! What a recorded run observed of its placement: where each page and each thread was over
//! time, and its sampled accesses. Built from a profile ([`Observed::read`]) or by hand (tests).

use std::collections::HashMap;

use numalens_format::{Migration, PageNodes, PageStat, Profile, Sample, SampleKind, Thread};

/// A value over time from observations: at t, the latest observation at or before t, else
/// the first one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Steps(Vec<(u64, u32)>);

impl Steps {
    /// From observations in any order; equal times keep their order.
    pub fn new(mut observations: Vec<(u64, u32)>) -> Steps {
        observations.sort_by_key(|(t, _)| *t);
        observations.dedup_by(|later, earlier| later.1 == earlier.1);
        Steps(observations)
    }

    pub fn at(&self, t: u64) -> Option<u32> {
        let i = self.0.partition_point(|(time, _)| *time <= t);
        self.0.get(i.saturating_sub(1)).map(|(_, v)| *v)
    }

    /// Changes of value between consecutive observations.
    pub fn changes(&self) -> u64 {
        self.0.len().saturating_sub(1) as u64
    }

    pub fn observations(&self) -> &[(u64, u32)] {
        &self.0
    }
}

/// One sampled access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessSample {
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    /// Page number (address / page size).
    pub page: u64,
    pub weight: u32,
    pub write: bool,
}

/// The exact accesses of one thread to one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactCount {
    pub pid: u32,
    pub tid: u32,
    /// Page number.
    pub page: u64,
    pub reads: u64,
    pub writes: u64,
    pub first_ns: u64,
}

impl ExactCount {
    pub fn from_row(row: &PageStat, page_size: u64) -> ExactCount {
        ExactCount {
            pid: row.pid,
            tid: row.tid,
            page: row.page / page_size.max(1),
            reads: row.reads,
            writes: row.writes,
            first_ns: row.first_access_ns,
        }
    }
}

/// Where pages and threads were.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub page_size: u64,
    /// Nodes with memory (the imbalance is over them).
    pub memory_nodes: Vec<u32>,
    /// (pid, tid) → node over time.
    pub threads: HashMap<(u32, u32), Steps>,
    /// (pid, page number) → node over time.
    pub pages: HashMap<(u32, u64), Steps>,
    /// Times of the periodic scans, sorted, distinct.
    pub scans: Vec<u64>,
    /// The run's first and last access (sampled, or an exact count's first).
    pub start_ns: u64,
    pub end_ns: u64,
    /// Page moves the scans saw: changes of node between consecutive answers for a page.
    pub moves_seen: u64,
}

impl Observed {
    pub fn page_node(&self, pid: u32, page: u64, t: u64) -> Option<u32> {
        self.pages.get(&(pid, page))?.at(t)
    }

    pub fn thread_node(&self, pid: u32, tid: u32, t: u64) -> Option<u32> {
        self.threads.get(&(pid, tid))?.at(t)
    }

    /// From a profile (its `samples` already read, and its exact counts' earliest first access)
    /// and the `thread_cpus` lines (`TIME_NS TID CPU`, monotonic clock) written beside it
    /// (empty when there are none).
    pub fn read(
        profile: &Profile,
        samples: &[Sample],
        first_exact: Option<u64>,
        thread_cpus: &str,
    ) -> Result<Observed, String> {
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
        let memory_nodes = topology
            .nodes
            .iter()
            .filter(|n| n.memory_bytes != Some(0))
            .map(|n| n.id)
            .collect();
        let page_size = meta.page_size.max(1);
        let err = |e: numalens_format::FormatError| e.to_string();
        let threads: Vec<Thread> = profile.read_all().map_err(err)?;
        let page_nodes: Vec<PageNodes> = profile.read_all().map_err(err)?;
        let migrations: Vec<Migration> = profile.read_migrations().map_err(err)?;
        let mut cpu_seen: Vec<CpuSeen> = samples
            .iter()
            .filter_map(|s| {
                Some(CpuSeen {
                    time_ns: s.time_ns,
                    pid: s.pid,
                    tid: s.tid,
                    cpu: s.cpu?,
                })
            })
            .collect();
        let pid_of: HashMap<u32, u32> = threads.iter().map(|t| (t.tid, t.pid)).collect();
        cpu_seen.extend(parse_thread_cpus(
            thread_cpus,
            meta.clock.origin_ns,
            &pid_of,
        ));
        let accesses = samples
            .iter()
            .filter(|s| matches!(s.kind, SampleKind::Load | SampleKind::Store));
        let start_ns = accesses
            .clone()
            .map(|s| s.time_ns)
            .chain(first_exact)
            .min()
            .unwrap_or(0);
        let end_ns = accesses.map(|s| s.time_ns).max().unwrap_or(start_ns);
        let mut observed = Observed {
            page_size,
            memory_nodes,
            start_ns,
            end_ns,
            ..Observed::default()
        };
        observed.set_threads(&cpu_seen, &cpu_node);
        observed.set_pages(&page_nodes, &migrations);
        Ok(observed)
    }

    /// Thread nodes from CPU observations.
    pub fn set_threads(&mut self, seen: &[CpuSeen], cpu_node: &HashMap<u32, u32>) {
        let mut by: HashMap<(u32, u32), Vec<(u64, u32)>> = HashMap::new();
        for s in seen {
            if let Some(node) = cpu_node.get(&s.cpu) {
                by.entry((s.pid, s.tid))
                    .or_default()
                    .push((s.time_ns, *node));
            }
        }
        self.threads = by.into_iter().map(|(k, v)| (k, Steps::new(v))).collect();
    }

    /// Page nodes from the scans and exit queries, and numalens' own moves (result `ok`, not a
    /// plan's `mbind`) at their times; also the scan times and the moves the scans saw.
    pub fn set_pages(&mut self, page_nodes: &[PageNodes], migrations: &[Migration]) {
        let page_size = self.page_size.max(1);
        let mut by: HashMap<(u32, u64), Vec<(u64, u32)>> = HashMap::new();
        let mut scans: Vec<u64> = Vec::new();
        for run in page_nodes {
            if run.source == "scan" {
                scans.push(run.time_ns);
            }
            let Some(node) = run.node else { continue };
            let per = (run.page_size / page_size).max(1);
            let first = run.start / page_size;
            for p in 0..run.pages.saturating_mul(per) {
                by.entry((run.pid, first + p))
                    .or_default()
                    .push((run.time_ns, node));
            }
        }
        scans.sort_unstable();
        scans.dedup();
        let mut pages: HashMap<(u32, u64), Steps> =
            by.into_iter().map(|(k, v)| (k, Steps::new(v))).collect();
        self.moves_seen = pages.values().map(Steps::changes).sum();
        for m in migrations
            .iter()
            .filter(|m| m.result == "ok" && m.policy != "plan")
        {
            let first = m.start / page_size;
            for p in 0..m.len.div_ceil(page_size) {
                let steps = pages.entry((m.pid, first + p)).or_default();
                let mut all = std::mem::take(&mut steps.0);
                all.push((m.time_ns, m.to_node));
                *steps = Steps::new(all);
            }
        }
        self.pages = pages;
        self.scans = scans;
    }
}

/// A thread seen on a CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSeen {
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
}

/// The lines of a `thread_cpus` file on the profile's clock; threads the profile does not know
/// (`pid_of`: tid → pid) and malformed lines are left out.
pub fn parse_thread_cpus(text: &str, origin_ns: u64, pid_of: &HashMap<u32, u32>) -> Vec<CpuSeen> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace().map(str::parse::<u64>);
            let (Some(Ok(t)), Some(Ok(tid)), Some(Ok(cpu))) = (f.next(), f.next(), f.next()) else {
                return None;
            };
            let tid = u32::try_from(tid).ok()?;
            Some(CpuSeen {
                time_ns: t.checked_sub(origin_ns)?,
                pid: *pid_of.get(&tid)?,
                tid,
                cpu: u32::try_from(cpu).ok()?,
            })
        })
        .collect()
}

/// The `load`/`store` samples among `samples`, in time order per thread.
pub fn access_samples(samples: &[Sample], page_size: u64) -> Vec<AccessSample> {
    let mut out: Vec<AccessSample> = samples
        .iter()
        .filter(|s| matches!(s.kind, SampleKind::Load | SampleKind::Store))
        .map(|s| AccessSample {
            time_ns: s.time_ns,
            pid: s.pid,
            tid: s.tid,
            page: s.address / page_size.max(1),
            weight: s.weight.max(1),
            write: s.kind == SampleKind::Store,
        })
        .collect();
    out.sort_by_key(|s| (s.pid, s.tid, s.time_ns));
    out
}
