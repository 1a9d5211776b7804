//! `perf_mem_data_src` (include/uapi/linux/perf_event.h): what the PMU said of a sampled access —
//! load or store, the level that served it, snoop result, remote or local — as numalens' labels.
//!
//! Bit fields (from bit 0): `mem_op` 5, `mem_lvl` 14, `mem_snoop` 5, `mem_lock` 2, `mem_dtlb` 7,
//! `mem_lvl_num` 4, `mem_remote` 1, `mem_snoopx` 2, `mem_blk` 3, `mem_hops` 3.

use numalens_format::{DataSource, SampleKind, Snoop};

const OP_LOAD: u64 = 0x02;
const OP_STORE: u64 = 0x04;

// mem_lvl, the older encoding (still filled by Intel's PEBS decoding).
const LVL_HIT: u64 = 0x02;
const LVL_MISS: u64 = 0x04;
const LVL_L1: u64 = 0x08;
const LVL_LFB: u64 = 0x10;
const LVL_L2: u64 = 0x20;
const LVL_L3: u64 = 0x40;
const LVL_LOC_RAM: u64 = 0x80;
const LVL_REM_RAM1: u64 = 0x100;
const LVL_REM_RAM2: u64 = 0x200;
const LVL_REM_CCE1: u64 = 0x400;
const LVL_REM_CCE2: u64 = 0x800;

// mem_lvl_num, the newer encoding (AMD IBS, Arm SPE, recent Intel), with mem_remote beside it.
const NUM_L1: u64 = 0x1;
const NUM_L2: u64 = 0x2;
const NUM_L3: u64 = 0x3;
const NUM_L4: u64 = 0x4;
const NUM_CXL: u64 = 0x9;
const NUM_ANY_CACHE: u64 = 0xb;
const NUM_LFB: u64 = 0xc;
const NUM_RAM: u64 = 0xd;
const NUM_PMEM: u64 = 0xe;

const SNOOP_NONE: u64 = 0x02;
const SNOOP_HIT: u64 = 0x04;
const SNOOP_MISS: u64 = 0x08;
const SNOOP_HITM: u64 = 0x10;
// mem_snoopx, bits 38-39.
const SNOOPX_FWD: u64 = 0x01;
const SNOOPX_PEER: u64 = 0x02;

/// The fields of a data source numalens uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemSource {
    /// `Load`, `Store`, or `None` when the PMU did not say (prefetches, unknown).
    pub kind: Option<SampleKind>,
    pub source: DataSource,
    /// The line was modified in another core's cache (a HITM snoop): true sharing or false
    /// sharing between threads.
    pub hitm: bool,
}

fn field(value: u64, shift: u32, bits: u32) -> u64 {
    (value >> shift) & ((1 << bits) - 1)
}

/// Decodes a `perf_mem_data_src` value.
pub fn decode(value: u64) -> MemSource {
    let op = field(value, 0, 5);
    let kind = if op & OP_LOAD != 0 {
        Some(SampleKind::Load)
    } else if op & OP_STORE != 0 {
        Some(SampleKind::Store)
    } else {
        None
    };
    let lvl = field(value, 5, 14);
    let snoop = field(value, 19, 5);
    let num = field(value, 33, 4);
    let remote = field(value, 37, 1) != 0;
    let source = from_level_number(num, remote, lvl).unwrap_or_else(|| from_level_bits(lvl));
    MemSource {
        kind,
        source,
        hitm: snoop & SNOOP_HITM != 0,
    }
}

/// What the coherence snoop found, from `mem_snoop` and `mem_snoopx`; `None` when the PMU did
/// not say (`PERF_MEM_SNOOP_NA` alone, or nothing). A modified line (HITM) says the most and
/// wins over the other bits; a forward or peer transfer (a clean line from another cache) over a
/// plain hit.
pub fn snoop(value: u64) -> Option<Snoop> {
    let snoop = field(value, 19, 5);
    let snoopx = field(value, 38, 2);
    Some(if snoop & SNOOP_HITM != 0 {
        Snoop::Hitm
    } else if snoopx & SNOOPX_FWD != 0 {
        Snoop::Forward
    } else if snoopx & SNOOPX_PEER != 0 {
        Snoop::Peer
    } else if snoop & SNOOP_HIT != 0 {
        Snoop::Hit
    } else if snoop & SNOOP_MISS != 0 {
        Snoop::Miss
    } else if snoop & SNOOP_NONE != 0 {
        Snoop::None
    } else {
        return None;
    })
}

/// The level from `mem_lvl_num` and `mem_remote`, when the PMU filled them and the access hit
/// there (a miss at a level says where it was not served).
fn from_level_number(num: u64, remote: bool, lvl: u64) -> Option<DataSource> {
    if lvl & LVL_MISS != 0 && lvl & LVL_HIT == 0 && !matches!(num, NUM_RAM | NUM_PMEM | NUM_CXL) {
        return None;
    }
    let cache = |local| {
        if remote {
            DataSource::RemoteCache
        } else {
            local
        }
    };
    Some(match num {
        NUM_L1 | NUM_LFB => cache(DataSource::L1),
        NUM_L2 => cache(DataSource::L2),
        NUM_L3 | NUM_L4 | NUM_ANY_CACHE => cache(DataSource::L3),
        NUM_RAM | NUM_PMEM | NUM_CXL if remote => DataSource::RemoteDram,
        NUM_RAM | NUM_PMEM | NUM_CXL => DataSource::LocalDram,
        _ => return None,
    })
}

/// The level from the `mem_lvl` bits: the first level the access hit.
fn from_level_bits(lvl: u64) -> DataSource {
    if lvl & LVL_HIT == 0 {
        return DataSource::Unknown;
    }
    if lvl & (LVL_L1 | LVL_LFB) != 0 {
        DataSource::L1
    } else if lvl & LVL_L2 != 0 {
        DataSource::L2
    } else if lvl & LVL_L3 != 0 {
        DataSource::L3
    } else if lvl & LVL_LOC_RAM != 0 {
        DataSource::LocalDram
    } else if lvl & (LVL_REM_RAM1 | LVL_REM_RAM2) != 0 {
        DataSource::RemoteDram
    } else if lvl & (LVL_REM_CCE1 | LVL_REM_CCE2) != 0 {
        DataSource::RemoteCache
    } else {
        DataSource::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(op: u64, lvl: u64, snoop: u64, num: u64, remote: u64) -> u64 {
        op | lvl << 5 | snoop << 19 | num << 33 | remote << 37
    }

    #[test]
    fn the_levels_of_both_encodings_become_labels() {
        let load_l3_hit = encode(OP_LOAD, LVL_HIT | LVL_L3, 0x02, 0, 0);
        assert_eq!(decode(load_l3_hit).source, DataSource::L3);
        assert_eq!(decode(load_l3_hit).kind, Some(SampleKind::Load));
        let remote_ram = encode(OP_LOAD, LVL_HIT | LVL_REM_RAM1, 0x02, 0, 0);
        assert_eq!(decode(remote_ram).source, DataSource::RemoteDram);
        let hitm = encode(OP_LOAD, LVL_HIT | LVL_REM_CCE1, SNOOP_HITM, 0, 0);
        assert_eq!(decode(hitm).source, DataSource::RemoteCache);
        assert!(decode(hitm).hitm);
        // AMD/Arm style: the level number with the remote bit.
        assert_eq!(
            decode(encode(OP_LOAD, LVL_HIT, 0, NUM_RAM, 1)).source,
            DataSource::RemoteDram
        );
        assert_eq!(
            decode(encode(OP_LOAD, LVL_HIT, 0, NUM_RAM, 0)).source,
            DataSource::LocalDram
        );
        assert_eq!(
            decode(encode(OP_LOAD, LVL_HIT, 0, NUM_L2, 1)).source,
            DataSource::RemoteCache
        );
        assert_eq!(
            decode(encode(OP_LOAD, LVL_HIT, 0, NUM_L2, 0)).source,
            DataSource::L2
        );
    }

    #[test]
    fn a_miss_or_no_level_says_unknown_and_stores_are_stores() {
        let store_l1_miss = encode(OP_STORE, LVL_MISS | LVL_L1, 0, 0, 0);
        assert_eq!(decode(store_l1_miss).kind, Some(SampleKind::Store));
        assert_eq!(decode(store_l1_miss).source, DataSource::Unknown);
        assert_eq!(
            decode(encode(OP_STORE, LVL_MISS, 0, NUM_L1, 0)).source,
            DataSource::Unknown
        );
        // What perf writes for an event without a memory data source: PERF_MEM_NA.
        let na = encode(0x01, 0x01, 0x01, 0xf, 0) | 0x01 << 24 | 0x01 << 26;
        let d = decode(na);
        assert_eq!(
            (d.kind, d.source, d.hitm),
            (None, DataSource::Unknown, false)
        );
        assert_eq!(snoop(na), None);
    }

    #[test]
    fn the_snoop_says_hitm_forward_peer_hit_miss_or_nothing() {
        let remote_hitm = encode(OP_LOAD, LVL_HIT | LVL_REM_CCE1, SNOOP_HITM, 0, 0);
        assert_eq!(snoop(remote_hitm), Some(Snoop::Hitm));
        // A local HITM in the level-number encoding: L3, not remote.
        let local_hitm = encode(OP_LOAD, LVL_HIT, SNOOP_HITM, NUM_L3, 0);
        assert_eq!(snoop(local_hitm), Some(Snoop::Hitm));
        assert_eq!(decode(local_hitm).source, DataSource::L3);
        // Intel's L3 hit with a clean line forwarded: snoop HIT beside snoopx FWD.
        let forward = encode(OP_LOAD, LVL_HIT | LVL_L3, SNOOP_HIT, 0, 0) | SNOOPX_FWD << 38;
        assert_eq!(snoop(forward), Some(Snoop::Forward));
        assert!(!decode(forward).hitm);
        let peer = encode(OP_LOAD, LVL_HIT, 0x01, NUM_ANY_CACHE, 1) | SNOOPX_PEER << 38;
        assert_eq!(snoop(peer), Some(Snoop::Peer));
        assert_eq!(
            snoop(encode(OP_LOAD, LVL_HIT | LVL_L3, SNOOP_HIT, 0, 0)),
            Some(Snoop::Hit)
        );
        assert_eq!(
            snoop(encode(OP_LOAD, LVL_HIT | LVL_LOC_RAM, SNOOP_MISS, 0, 0)),
            Some(Snoop::Miss)
        );
        assert_eq!(
            snoop(encode(OP_LOAD, LVL_HIT | LVL_L1, SNOOP_NONE, 0, 0)),
            Some(Snoop::None)
        );
        // Bits above the snoop fields (mem_lock, mem_dtlb, mem_blk, mem_hops) do not leak in.
        let noisy = encode(OP_LOAD, LVL_HIT | LVL_L1, SNOOP_NONE, 0, 0) | 0x3f << 24 | 0x3f << 40;
        assert_eq!(snoop(noisy), Some(Snoop::None));
    }
}
