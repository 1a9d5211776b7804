//! Rows of the `samples` and `objects` tables.

use std::collections::{BTreeSet, HashMap};

use numalens_format::{DataSource, Object, ProfileWriter, Sample, SampleKind};
use numalens_topology::Topology;

use crate::Summary;
use crate::attribute::Locator;
use crate::attribute::{Attributions, ObjectSpec};
use crate::raw::{Access, AccessStream, Fault, UNKNOWN_CPU};

/// The page-fault samples with their attribution, as `samples` rows.
pub struct FaultRows<'a> {
    pub faults: &'a [Fault],
    pub attributed: Attributions<'a>,
    pub objects: &'a [ObjectSpec],
    pub cpu_node: &'a HashMap<u32, u32>,
    pub origin: u64,
}

impl FaultRows<'_> {
    pub fn write(
        self,
        writer: &mut ProfileWriter,
        summary: &mut Summary,
    ) -> numalens_format::Result<()> {
        for (fault, a) in self.faults.iter().zip(self.attributed) {
            let first = a.kind == SampleKind::FirstTouch;
            summary.samples += 1;
            if first {
                summary.first_touches += 1;
                summary.first_touches_attributed += a.object.is_some() as u64;
                summary.first_touches_tracked +=
                    a.object.is_some_and(|o| self.objects[o].tracked) as u64;
            }
            writer.push_sample(Sample {
                time_ns: fault.time_ns.saturating_sub(self.origin),
                pid: fault.pid,
                tid: fault.tid,
                cpu: (fault.cpu != UNKNOWN_CPU).then_some(fault.cpu),
                address: fault.address,
                kind: a.kind,
                weight: 1,
                object_id: a.object.map(|o| o as u64),
                // Under Linux's default policy a first touch places the page on the faulting
                // CPU's node.
                node: if first {
                    self.cpu_node.get(&fault.cpu).copied()
                } else {
                    None
                },
                data_source: DataSource::Unknown,
                latency: None,
                ip: Some(fault.ip),
                page_size: Some(a.page_size as u32),
                snoop: None,
            })?;
        }
        Ok(())
    }
}

/// The sampled loads and stores, held (sorted by time) and then streamed, each attributed to
/// the object that held its address then, as `samples` rows.
pub struct AccessRows<'a> {
    pub held: &'a [Access],
    pub stream: Option<Box<dyn AccessStream>>,
    pub objects: &'a [ObjectSpec],
    pub origin: u64,
}

impl AccessRows<'_> {
    /// Writes them; returns how many, and the code addresses of the streamed ones.
    pub fn write(
        self,
        writer: &mut ProfileWriter,
        output: &std::path::Path,
    ) -> numalens_format::Result<(u64, BTreeSet<(u32, u64)>)> {
        let mut locator = Locator::new(self.objects);
        let mut count = 0u64;
        let mut result = Ok(());
        let mut row = |a: Access| {
            locator.advance_to(a.time_ns);
            count += 1;
            let object_id = locator.find(a.pid, a.address).map(|o| o as u64);
            if result.is_ok() {
                result = writer.push_sample(access_row(&a, object_id, self.origin));
            }
        };
        self.held.iter().for_each(|a| row(*a));
        let mut ips = ahash::AHashSet::new();
        let mut last_ip = None;
        let streamed = self.stream.map_or(Ok(()), |stream| {
            stream.for_each(&mut |a: Access| {
                // Runs of samples of one instruction are common: skip the set for repeats.
                if last_ip != Some((a.pid, a.ip)) {
                    last_ip = Some((a.pid, a.ip));
                    ips.insert((a.pid, a.ip));
                }
                row(a)
            })
        });
        result?;
        streamed.map_err(|why| numalens_format::FormatError::Io {
            path: output.to_path_buf(),
            source: std::io::Error::other(why),
        })?;
        Ok((count, ips.into_iter().collect()))
    }
}

fn access_row(a: &Access, object_id: Option<u64>, origin: u64) -> Sample {
    Sample {
        time_ns: a.time_ns.saturating_sub(origin),
        pid: a.pid,
        tid: a.tid,
        cpu: a.cpu,
        address: a.address,
        kind: a.kind,
        weight: a.weight,
        object_id,
        node: a.node,
        data_source: a.data_source,
        latency: a.latency,
        ip: Some(a.ip),
        page_size: a.page_size,
        snoop: a.snoop,
    }
}

/// The node of each CPU of the topology.
pub fn cpu_nodes(topology: Option<&Topology>) -> HashMap<u32, u32> {
    let mut map = HashMap::new();
    for node in topology.map(|t| t.nodes.as_slice()).unwrap_or_default() {
        for cpu in &node.cpus {
            map.insert(*cpu, node.id);
        }
    }
    map
}

/// An `objects` row.
pub fn object_row(id: u64, o: &ObjectSpec, origin: u64) -> Object {
    Object {
        object_id: id,
        pid: o.pid,
        kind: o.kind,
        name: o.name.clone(),
        start: o.start,
        size: o.size,
        alloc_ns: o.alloc_ns.saturating_sub(origin),
        free_ns: o.free_ns.map(|t| t.saturating_sub(origin)),
        alloc_tid: o.alloc_tid,
        site_key: o.site_key,
    }
}
