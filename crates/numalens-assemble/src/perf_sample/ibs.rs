//! AMD IBS op samples from their raw registers (`PERF_SAMPLE_RAW` of an `ibs_op` event): what the
//! kernel's own decoding gives on 6.1+ with `-d` (data address, data source, latency), also for
//! recordings without it. The raw data is a 32-bit capability word, then the registers in MSR
//! order: IbsOpCtl, IbsOpRip, IbsOpData, IbsOpData2, IbsOpData3, IbsDcLinAd, IbsDcPhysAd, …
//! (AMD's Processor Programming Reference, "Instruction Based Sampling").

use numalens_format::{DataSource, SampleKind};

use super::bytes::Bytes;

const OP_DATA2: usize = 3;
const OP_DATA3: usize = 4;
const DC_LIN_AD: usize = 5;
const DC_PHYS_AD: usize = 6;

// IbsOpData3 bits.
const LD_OP: u64 = 1 << 0;
const ST_OP: u64 = 1 << 1;
const DC_MISS: u64 = 1 << 7;
const DC_LIN_ADDR_VALID: u64 = 1 << 17;
const DC_PHY_ADDR_VALID: u64 = 1 << 18;

const L2_MISS: u64 = 1 << 20;

// IbsOpData2: DataSrc in bits 0-2 (and, from Zen 4, DataSrcHi in bits 6-7 above them),
// RmtNode in bit 4.
const DATA_SRC_LOCAL_CACHE: u64 = 2;
const DATA_SRC_DRAM: u64 = 3;
const DATA_SRC_REMOTE_CACHE: u64 = 4;
const RMT_NODE: u64 = 1 << 4;

/// The capability word's bit for Zen 4's IBS extensions (`IBS_CAPS_ZEN4`).
const CAPS_ZEN4: u32 = 1 << 11;
// Zen 4's data sources (the kernel's `IBS_DATA_SRC_EXT_*`).
const EXT_LOCAL_CACHE: u64 = 0x1;
const EXT_NEAR_CCX_CACHE: u64 = 0x2;
const EXT_DRAM: u64 = 0x3;
const EXT_FAR_CCX_CACHE: u64 = 0x5;
const EXT_PMEM: u64 = 0x6;
const EXT_EXTENSION_MEMORY: u64 = 0x8;
const EXT_PEER_AGENT_MEMORY: u64 = 0xc;

/// What one IBS op sample says of its memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbsAccess {
    pub kind: SampleKind,
    pub address: u64,
    pub phys: Option<u64>,
    pub source: DataSource,
    /// DcMissLat: cycles from the miss to the data's return, for loads that missed.
    pub latency: Option<u32>,
}

/// Decodes the raw data of an `ibs_op` sample; `None` for an op that did not access memory or
/// whose data address is not valid.
pub fn decode(raw: &[u8], big_endian: bool) -> Option<IbsAccess> {
    let mut b = Bytes::new(raw, big_endian);
    let caps = b.u32().ok()?;
    let mut regs = [0u64; 7];
    for r in &mut regs {
        *r = b.u64().ok()?;
    }
    let data3 = regs[OP_DATA3];
    let kind = if data3 & ST_OP != 0 {
        SampleKind::Store
    } else if data3 & LD_OP != 0 {
        SampleKind::Load
    } else {
        return None;
    };
    if data3 & DC_LIN_ADDR_VALID == 0 {
        return None;
    }
    let missed = data3 & DC_MISS != 0;
    let latency = ((data3 >> 32) & 0xffff) as u32;
    Some(IbsAccess {
        kind,
        address: regs[DC_LIN_AD],
        phys: (data3 & DC_PHY_ADDR_VALID != 0).then_some(regs[DC_PHYS_AD]),
        source: if caps & CAPS_ZEN4 != 0 {
            zen4_source(kind, data3, regs[OP_DATA2])
        } else {
            source(kind, missed, regs[OP_DATA2])
        },
        latency: (kind == SampleKind::Load && missed && latency > 0).then_some(latency),
    })
}

/// Where the access was served: a hit in the data cache is L1; IbsOpData2 says where a load
/// that missed was served from the data fabric (valid for those only); a miss it does not
/// describe was served by L2.
fn source(kind: SampleKind, missed: bool, data2: u64) -> DataSource {
    if !missed {
        return DataSource::L1;
    }
    if kind != SampleKind::Load {
        return DataSource::Unknown;
    }
    let remote = data2 & RMT_NODE != 0;
    match data2 & 0x7 {
        0 => DataSource::L2,
        DATA_SRC_LOCAL_CACHE if remote => DataSource::RemoteCache,
        DATA_SRC_LOCAL_CACHE => DataSource::L3,
        DATA_SRC_DRAM if remote => DataSource::RemoteDram,
        DATA_SRC_DRAM => DataSource::LocalDram,
        DATA_SRC_REMOTE_CACHE => DataSource::RemoteCache,
        _ => DataSource::Unknown,
    }
}

/// Zen 4 and later: the L2 says itself whether it missed, and DataSrc has two more bits and
/// other meanings (as the kernel decodes them in `perf_ibs_get_mem_lvl`).
fn zen4_source(kind: SampleKind, data3: u64, data2: u64) -> DataSource {
    if data3 & DC_MISS == 0 {
        return DataSource::L1;
    }
    if data3 & L2_MISS == 0 {
        return DataSource::L2;
    }
    if kind != SampleKind::Load {
        return DataSource::Unknown;
    }
    let remote = data2 & RMT_NODE != 0;
    let memory = if remote {
        DataSource::RemoteDram
    } else {
        DataSource::LocalDram
    };
    match (data2 & 0x7) | ((data2 >> 6) & 0x3) << 3 {
        EXT_LOCAL_CACHE | EXT_NEAR_CCX_CACHE => DataSource::L3,
        EXT_FAR_CCX_CACHE => DataSource::RemoteCache,
        EXT_DRAM | EXT_PMEM | EXT_EXTENSION_MEMORY => memory,
        EXT_PEER_AGENT_MEMORY => DataSource::RemoteDram,
        _ => DataSource::Unknown,
    }
}

/// The raw data of an IBS op sample with these registers, as the kernel writes it (tests and
/// benchmarks).
pub fn raw(caps: u32, regs: &[u64; 7]) -> Vec<u8> {
    let mut v = caps.to_le_bytes().to_vec();
    for r in regs {
        v.extend(r.to_le_bytes());
    }
    v
}

/// IbsOpData3 for a load or store at a valid linear (and physical) address.
pub fn op_data3(store: bool, missed: bool, latency: u16) -> u64 {
    let op = if store { ST_OP } else { LD_OP };
    let miss = if missed { DC_MISS } else { 0 };
    op | miss | DC_LIN_ADDR_VALID | DC_PHY_ADDR_VALID | u64::from(latency) << 32
}

/// IbsOpData2 with a data source and the remote-node bit.
pub fn op_data2(data_src: u64, remote: bool) -> u64 {
    (data_src & 0x7) | if remote { RMT_NODE } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load that missed L1 and L2, with IbsOpData2 `data2`, on a Zen 4 or an older part.
    fn missed_load(zen4: bool, data2: u64) -> DataSource {
        let data3 = op_data3(false, true, 100) | L2_MISS;
        let regs = [0x6_fffe, 0x40_0000, 0, data2, data3, 0x1000, 0x2000];
        let caps = if zen4 { CAPS_ZEN4 } else { 0 };
        decode(&raw(caps, &regs), false).unwrap().source
    }

    #[test]
    fn zen4_data_sources_are_read_with_their_high_bits() {
        // The kernel's IBS_DATA_SRC_EXT_* values, DataSrcHi in bits 6-7.
        let ext =
            |v: u64, remote: bool| (v & 0x7) | (v >> 3) << 6 | if remote { RMT_NODE } else { 0 };
        assert_eq!(missed_load(true, ext(0x1, false)), DataSource::L3);
        assert_eq!(missed_load(true, ext(0x5, false)), DataSource::RemoteCache);
        assert_eq!(missed_load(true, ext(0x3, true)), DataSource::RemoteDram);
        assert_eq!(missed_load(true, ext(0x8, false)), DataSource::LocalDram);
        assert_eq!(missed_load(true, ext(0xc, false)), DataSource::RemoteDram);
        // The same bits read the older way.
        assert_eq!(missed_load(false, ext(0x1, false)), DataSource::Unknown);
        assert_eq!(missed_load(false, ext(0x4, false)), DataSource::RemoteCache);
        // Zen 4 says an L2 hit with L2Miss clear, whatever DataSrc holds.
        let data3 = op_data3(false, true, 20);
        let regs = [
            0x6_fffe,
            0x40_0000,
            0,
            ext(0x3, false),
            data3,
            0x1000,
            0x2000,
        ];
        assert_eq!(
            decode(&raw(CAPS_ZEN4, &regs), false).unwrap().source,
            DataSource::L2
        );
    }
}
