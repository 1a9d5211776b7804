//! Where sampled accesses were served from, per object, thread and (CPU node, memory node) pair,
//! with the PMU's measured latency: a pass of its own over the samples of profiles whose samples
//! carry a data source (the `pmu` backend, `numalens import`). Memory grows with objects,
//! threads and nodes, never with samples.

use std::collections::{BTreeMap, HashMap};

use numalens_format::table::Row;
use numalens_format::{DataSource, Object, Profile, Sample, SampleKind, Snoop, Thread};

use crate::Result;
use crate::hitm::HitmLines;
use crate::model::{
    DataSources, LatencyModel, NodePairLatency, ObjectSources, SourceCounts, ThreadSources,
};
use crate::samples::ThreadKey;

/// At most this many objects are listed, most remote accesses first.
const TOP_OBJECTS: usize = 20;

/// Which samples count: the report's `--object` and `--thread` selections.
pub(crate) struct Selected<'a> {
    pub objects: Option<&'a [bool]>,
    pub threads: Option<&'a [ThreadKey]>,
}

impl Selected<'_> {
    fn keeps(&self, s: &Sample) -> bool {
        let object = match (self.objects, s.object_id) {
            (None, _) => true,
            (Some(sel), Some(id)) => sel.get(id as usize).copied().unwrap_or(false),
            (Some(_), None) => false,
        };
        object && self.threads.is_none_or(|t| t.contains(&(s.pid, s.tid)))
    }
}

fn add(counts: &mut SourceCounts, s: &Sample) {
    let w = u64::from(s.weight.max(1));
    let slot = match s.data_source {
        DataSource::L1 => &mut counts.l1,
        DataSource::L2 => &mut counts.l2,
        DataSource::L3 => &mut counts.l3,
        DataSource::LocalDram => &mut counts.local_dram,
        DataSource::RemoteDram => &mut counts.remote_dram,
        DataSource::RemoteCache => &mut counts.remote_cache,
        DataSource::Unknown => &mut counts.unknown,
    };
    *slot = slot.saturating_add(w);
    counts.known_samples += u64::from(s.data_source != DataSource::Unknown);
    let remote = matches!(
        s.data_source,
        DataSource::RemoteDram | DataSource::RemoteCache
    );
    counts.beyond_cache_samples += u64::from(remote || s.data_source == DataSource::LocalDram);
    if let Some(snoop) = s.snoop {
        counts.snoop_samples += 1;
        // A HITM of unknown source is neither local nor remote, and the shares divide by the
        // accesses of known source.
        if snoop == Snoop::Hitm && s.data_source != DataSource::Unknown {
            let hitm = if remote {
                &mut counts.hitm_remote
            } else {
                &mut counts.hitm_local
            };
            *hitm = hitm.saturating_add(w);
        }
    }
    if let Some(l) = s.latency {
        let l = u64::from(l);
        counts.latency_samples += 1;
        counts.latency_cycles = counts.latency_cycles.saturating_add(l);
        if remote {
            counts.remote_latency_samples += 1;
            counts.remote_latency_cycles = counts.remote_latency_cycles.saturating_add(l);
        } else if s.data_source == DataSource::LocalDram {
            counts.local_dram_latency_samples += 1;
            counts.local_dram_latency_cycles = counts.local_dram_latency_cycles.saturating_add(l);
        }
    }
}

#[derive(Default)]
struct Tally {
    totals: SourceCounts,
    objects: HashMap<u64, SourceCounts>,
    threads: HashMap<ThreadKey, SourceCounts>,
    /// (CPU node, memory node) → (samples, cycles).
    pairs: BTreeMap<(u32, u32), (u64, u64)>,
    /// Samples with a known source or a latency: without one, the section is left out.
    informative: u64,
    hitm: HitmLines,
}

impl Tally {
    fn take(&mut self, s: &Sample, cpu_node: &HashMap<u32, u32>) {
        if !matches!(s.kind, SampleKind::Load | SampleKind::Store) {
            return;
        }
        self.informative += u64::from(s.data_source != DataSource::Unknown || s.latency.is_some());
        add(&mut self.totals, s);
        if let Some(id) = s.object_id {
            add(self.objects.entry(id).or_default(), s);
            if s.snoop == Some(Snoop::Hitm) {
                self.hitm.add_hitm(id, s);
            }
        }
        add(self.threads.entry((s.pid, s.tid)).or_default(), s);
        // Only accesses served by memory are set beside the model's memory latency: cache hits
        // on the same page would pull the mean far below it.
        let from_memory = matches!(
            s.data_source,
            DataSource::LocalDram | DataSource::RemoteDram
        );
        let cpu = s.cpu.and_then(|c| cpu_node.get(&c).copied());
        if let (true, Some(cpu), Some(memory), Some(l)) = (from_memory, cpu, s.node, s.latency) {
            let e = self.pairs.entry((cpu, memory)).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(u64::from(l));
        }
    }
}

/// Keeps the objects the report lists, once the findings have looked at all of them.
pub(crate) fn keep_top_objects(d: &mut DataSources) {
    d.objects.truncate(TOP_OBJECTS);
}

/// The data sources of the selected samples, when some sample has one; `machine` is the
/// topology whose latencies the measured ones are set beside.
pub(crate) fn data_sources(
    profile: &Profile,
    objects: &[Object],
    threads: &[Thread],
    selected: &Selected<'_>,
    machine: &numalens_topology::Topology,
) -> Result<Option<DataSources>> {
    // Only PMU samples carry a source or a latency; other profiles are not read again.
    if profile.meta().backend.name != "pmu" {
        return Ok(None);
    }
    let cpu_node: HashMap<u32, u32> = profile
        .meta()
        .topology
        .iter()
        .flat_map(|t| &t.nodes)
        .flat_map(|n| n.cpus.iter().map(move |c| (*c, n.id)))
        .collect();
    let path = profile.table_path::<Sample>();
    let mut tally = Tally::default();
    for batch in profile.batches::<Sample>(None, None)? {
        for s in Sample::from_batch(&batch?, &path)? {
            if selected.keeps(&s) {
                tally.take(&s, &cpu_node);
            }
        }
    }
    if tally.informative == 0 {
        return Ok(None);
    }
    if !tally.hitm.is_empty() {
        // A second pass, only when some sample found a modified line: the stores to those
        // lines, which the samples' order (by thread) does not put beside the HITM samples.
        for batch in profile.batches::<Sample>(None, None)? {
            for s in Sample::from_batch(&batch?, &path)? {
                if s.kind == SampleKind::Store && selected.keeps(&s) {
                    tally.hitm.add_store(&s);
                }
            }
        }
    }
    let clock = profile
        .meta()
        .topology
        .as_ref()
        .and_then(|t| t.cpu_ghz.as_ref())
        .map(|q| q.value)
        .filter(|g| *g > 0.0);
    let mut report = report(tally, objects, threads);
    report.model = crate::latency::compare(&mut report.node_pairs, machine, clock);
    Ok(Some(report))
}

fn report(mut tally: Tally, objects: &[Object], threads: &[Thread]) -> DataSources {
    let mut sharing = tally.hitm.sharing();
    let mut by_object: Vec<ObjectSources> = tally
        .objects
        .into_iter()
        .filter(|(_, c)| c.known() > 0)
        .map(|(id, counts)| ObjectSources {
            object_id: id,
            name: objects
                .get(id as usize)
                .map_or_else(|| format!("object {id}"), |o| o.name.clone()),
            counts,
            sharing: sharing.remove(&id),
        })
        .collect();
    by_object.sort_by_key(|o| {
        (
            std::cmp::Reverse(o.counts.remote()),
            std::cmp::Reverse(o.counts.known()),
            o.object_id,
        )
    });
    let logical: HashMap<ThreadKey, u32> = threads
        .iter()
        .map(|t| ((t.pid, t.tid), t.logical_id))
        .collect();
    let mut by_thread: Vec<ThreadSources> = tally
        .threads
        .into_iter()
        .filter(|(_, c)| c.known() > 0)
        .map(|((pid, tid), counts)| ThreadSources {
            pid,
            tid,
            logical_id: logical.get(&(pid, tid)).copied(),
            counts,
        })
        .collect();
    by_thread.sort_by_key(|t| (t.pid, t.logical_id.unwrap_or(u32::MAX), t.tid));
    DataSources {
        totals: tally.totals,
        objects: by_object,
        threads: by_thread,
        node_pairs: tally
            .pairs
            .into_iter()
            .map(
                |((cpu_node, memory_node), (samples, cycles))| NodePairLatency {
                    cpu_node,
                    memory_node,
                    samples,
                    mean_cycles: cycles / samples.max(1),
                    measured_ns: None,
                    modelled_ns: None,
                    modelled_cycles: None,
                },
            )
            .collect(),
        model: LatencyModel::default(),
    }
}
