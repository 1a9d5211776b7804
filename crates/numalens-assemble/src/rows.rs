//! Rows of the `samples` and `objects` tables.

use std::collections::HashMap;

use numalens_format::{DataSource, Object, ProfileWriter, Sample, SampleKind};
use numalens_topology::Topology;

use crate::Summary;
use crate::attribute::Locator;
use crate::attribute::{Attributions, ObjectSpec};
use crate::raw::{Access, Fault};

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
                cpu: Some(fault.cpu),
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
            })?;
        }
        Ok(())
    }
}

/// The sampled loads and stores (sorted by time), each attributed to the object that held its
/// address then, as `samples` rows; returns how many.
pub fn write_accesses(
    writer: &mut ProfileWriter,
    accesses: &[Access],
    objects: &[ObjectSpec],
    origin: u64,
) -> numalens_format::Result<u64> {
    let mut locator = Locator::new(objects);
    for a in accesses {
        locator.advance_to(a.time_ns);
        writer.push_sample(Sample {
            time_ns: a.time_ns.saturating_sub(origin),
            pid: a.pid,
            tid: a.tid,
            cpu: a.cpu,
            address: a.address,
            kind: a.kind,
            weight: a.weight,
            object_id: locator.find(a.pid, a.address).map(|o| o as u64),
            node: a.node,
            data_source: a.data_source,
            latency: a.latency,
            ip: Some(a.ip),
            page_size: a.page_size,
        })?;
    }
    Ok(accesses.len() as u64)
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
