//! A decoded memory sample as an [`Access`]: its own fields (data source, weight, physical
//! address) first, an IBS op's registers for what they lack.

use numalens_format::{DataSource, SampleKind};

use super::ibs::{self, IbsAccess};
use super::physical::PhysicalNodes;
use super::sample::Sample;
use crate::raw::Access;

/// What the event that took a sample says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventMeaning {
    /// An AMD `ibs_op` event: its raw registers say what the sample's other fields may not.
    pub ibs: bool,
    /// Load or store when the data source does not say.
    pub default_kind: SampleKind,
    /// The sampling period, when the sample does not carry its own.
    pub fixed_period: u64,
}

/// The sample's data address, from its own field or else its IBS registers, with what those
/// registers say.
pub fn data_address(
    m: &EventMeaning,
    s: &Sample<'_>,
    big_endian: bool,
) -> Option<(u64, Option<IbsAccess>)> {
    let ibs = m
        .ibs
        .then(|| s.raw.and_then(|raw| ibs::decode(raw, big_endian)))
        .flatten();
    let address = s.addr.filter(|&a| a != 0).or(ibs.map(|i| i.address))?;
    Some((address, ibs))
}

/// The access a memory sample stands for, when it has a data address.
pub fn access(
    m: &EventMeaning,
    s: &Sample<'_>,
    big_endian: bool,
    physical: &PhysicalNodes,
) -> Option<Access> {
    let (address, ibs) = data_address(m, s, big_endian)?;
    let mut a = access_of_fields(m, s, physical, address);
    if let Some(i) = ibs {
        // A kernel that does not decode IBS itself (before 6.1) still writes the data source
        // field when it is asked for: "not available", which says nothing.
        let told = s
            .data_src
            .map(super::data_src::decode)
            .is_some_and(|m| m.kind.is_some() || m.source != DataSource::Unknown);
        if !told {
            (a.kind, a.data_source) = (i.kind, i.source);
        }
        a.latency = a.latency.or(i.latency);
        a.node = a.node.or(i.phys.and_then(|p| physical.node_of(p)));
    }
    Some(a)
}

fn access_of_fields(
    m: &EventMeaning,
    s: &Sample<'_>,
    physical: &PhysicalNodes,
    address: u64,
) -> Access {
    let source = s.data_src.map(super::data_src::decode);
    let weight = s
        .period
        .unwrap_or(m.fixed_period)
        .clamp(1, u64::from(u32::MAX)) as u32;
    Access {
        pid: s.pid.unwrap_or(0),
        tid: s.tid.unwrap_or(0),
        time_ns: s.time.unwrap_or(0),
        address,
        cpu: s.cpu,
        ip: s.ip.unwrap_or(0),
        kind: source.and_then(|m| m.kind).unwrap_or(m.default_kind),
        weight,
        data_source: source.map_or(DataSource::Unknown, |m| m.source),
        latency: s
            .weight
            .map(|w| w.latency())
            .filter(|&l| l > 0)
            .map(|l| l.min(u64::from(u32::MAX)) as u32),
        node: s.phys_addr.and_then(|p| physical.node_of(p)),
        page_size: s.data_page_size.and_then(|p| u32::try_from(p).ok()),
        snoop: s.data_src.and_then(super::data_src::snoop),
    }
}
