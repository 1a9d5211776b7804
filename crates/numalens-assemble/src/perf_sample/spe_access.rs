//! The access an Arm SPE record stands for, the same whether its packets came from a perf.data
//! file's `PERF_RECORD_AUXTRACE` (`numalens import`) or from the live sampler's AUX buffer
//! (`numalens record --backend pmu`). What the packets do not say — the thread when there is no
//! context packet, the CPU, the time on the recording's clock — comes from the record that
//! delivered them.

use super::physical::PhysicalNodes;
use super::spe::{self, SpeRecord};
use crate::raw::Access;

/// Where a record was taken, as the delivering record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeOrigin {
    pub pid: u32,
    pub tid: u32,
    pub cpu: Option<u32>,
    pub time_ns: u64,
}

/// How the records of one event are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeMeaning {
    /// Operations a sample stands for (the event's interval).
    pub interval: u64,
    /// The data source packet has the Neoverse encoding (`spe::neoverse_data_source`).
    pub neoverse: bool,
}

/// The load or store `r` stands for; `None` for another operation or one without a data
/// address.
pub fn access(
    r: &SpeRecord,
    origin: SpeOrigin,
    meaning: SpeMeaning,
    physical: &PhysicalNodes,
) -> Option<Access> {
    let kind = r.kind()?;
    let address = r.data_virtual.filter(|&a| a != 0)?;
    Some(Access {
        pid: origin.pid,
        tid: origin.tid,
        time_ns: origin.time_ns,
        address,
        cpu: origin.cpu,
        ip: r.pc.unwrap_or(0),
        kind,
        weight: meaning.interval.clamp(1, u64::from(u32::MAX)) as u32,
        data_source: spe::data_source(r, meaning.neoverse),
        latency: r
            .total_latency
            .filter(|&l| l > 0)
            .map(|l| l.min(u64::from(u32::MAX)) as u32),
        node: r.data_physical.and_then(|p| physical.node_of(p)),
        page_size: None,
        // The packets say where an access was served, not what a snoop found (no HITM).
        snoop: None,
    })
}

/// Whether a record is one [`access`] takes: a load or store with a data address.
pub fn is_access(r: &SpeRecord) -> bool {
    r.kind().is_some() && r.data_virtual.unwrap_or(0) != 0
}
