//! Built-in machine models: the machines the papers measured on, and modern ones.
//!
//! Every number says where it comes from; `docs/TOPOLOGY.md` tabulates what is published and
//! what is assumed. Values picked inside a published or assumed range say which and why.

mod builder;
mod modern;

use builder::{Builder, GIB, assumed, derived, published, qty};
use modern::{cxl_tier, epyc_genoa_2s, epyc_genoa_2s_nps4, xeon_spr_2s_snc4};

pub use builder::distances_from_latency;

use crate::{LatencyUnit, Topology, TopologyError};

type Make = fn() -> Topology;

const PRESETS: &[(&str, &str, Make)] = &[
    (
        "machine-a",
        "4× AMD Opteron 8380: 4 nodes × 4 cores, partially connected HT1 (Lepers thesis)",
        machine_a,
    ),
    (
        "machine-b",
        "2× AMD Opteron 6164 HE: 4 nodes × 6 cores, fully connected HT3 (Lepers thesis)",
        machine_b,
    ),
    (
        "machine-c",
        "4× AMD Opteron 6174: 8 nodes × 6 cores, partial mesh, asymmetric routes (Lepers thesis)",
        machine_c,
    ),
    (
        "opteron-4n-marathe",
        "4-node AMD Opteron ring, measured asymmetric ns latencies (Marathe et al.)",
        opteron_4n_marathe,
    ),
    (
        "altix-4",
        "SGI Altix, 4 nodes × 2 Itanium 2 CPUs (Marathe et al.)",
        altix_4,
    ),
    (
        "sandybridge-2s",
        "2× Xeon E5 Sandy Bridge-EP: 2 nodes × 8 cores × 2 HT (SPM thesis)",
        sandybridge_2s,
    ),
    (
        "epyc-genoa-2s",
        "2× AMD EPYC Genoa (9654 assumed), NPS1: 2 nodes × 96 cores × 2 SMT",
        epyc_genoa_2s,
    ),
    (
        "epyc-genoa-2s-nps4",
        "2× AMD EPYC Genoa (9654 assumed), NPS4: 8 nodes × 24 cores × 2 SMT",
        epyc_genoa_2s_nps4,
    ),
    (
        "xeon-spr-2s-snc4",
        "2× Xeon Sapphire Rapids (8480+ assumed), SNC4: 8 nodes × 14 cores × 2 HT",
        xeon_spr_2s_snc4,
    ),
    (
        "cxl-tier",
        "1 socket with DRAM (node 0) plus a CPU-less CXL memory expander (node 1)",
        cxl_tier,
    ),
];

/// Preset names with a one-line description each.
pub fn list() -> Vec<(&'static str, &'static str)> {
    PRESETS
        .iter()
        .map(|&(name, desc, _)| (name, desc))
        .collect()
}

/// The preset called `name`.
pub fn preset(name: &str) -> Result<Topology, TopologyError> {
    PRESETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, make)| make())
        .ok_or_else(|| TopologyError::UnknownPreset {
            name: name.to_string(),
            known: PRESETS.iter().map(|(n, _, _)| n.to_string()).collect(),
        })
}

fn description(name: &str) -> &'static str {
    PRESETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or("", |p| p.1)
}

const LEPERS: &str = "Lepers thesis, Table 1.2";
const MARATHE: &str = "Marathe, Thakkar, Mueller, feedback-directed page placement";
const SPM: &str = "Ortiz-Yepes, SPM thesis (TUM 2015)";

fn machine_a() -> Topology {
    let links = assumed(
        "link map assumed: the Lepers thesis says only that nodes 0 and 3 have no direct link \
         (its figure is lost); links 0-1, 0-2, 1-2, 1-3, 2-3 make 0↔3 the only 2-hop pair",
    );
    Builder::new(
        "machine-a",
        description("machine-a"),
        published(&format!("{LEPERS}, machine A")),
        4,
        4,
        1,
    )
    .ghz(2.5, published(LEPERS))
    .memory(8 * GIB, Some("DRAM"))
    .mc_bandwidth(
        7580.0,
        published(&format!("{LEPERS}: memory controller 7580 MB/s")),
    )
    .links(
        &[(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)],
        Some(qty(
            2850.0,
            published(&format!("{LEPERS}: HT1 link 2850 MB/s, 16-bit")),
        )),
        Some(16),
        &links,
    )
    .latency_by_hops(
        LatencyUnit::Cycles,
        &[261.0, 286.0, 377.0],
        published(&format!(
            "{LEPERS}: local 261, 1 hop 286, 2 hops 377 cycles; which pairs are 2 hops apart \
                 follows the assumed link map"
        )),
    )
    .build()
}

fn machine_b() -> Topology {
    let all_but_0_3 = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)];
    let links = published(&format!(
        "{LEPERS}: fully connected; the node 0↔3 link is 8-bit"
    ));
    Builder::new(
        "machine-b",
        description("machine-b"),
        published(&format!("{LEPERS}, machine B")),
        4,
        6,
        1,
    )
    .cores_per_package(12)
    .ghz(1.7, published(LEPERS))
    .memory(12 * GIB, Some("DRAM"))
    .mc_bandwidth(
        5850.0,
        published(&format!("{LEPERS}: memory controller 5850 MB/s")),
    )
    .links(
        &all_but_0_3,
        Some(qty(
            4810.0,
            published(&format!("{LEPERS}: HT3 link 4810 MB/s, 16-bit")),
        )),
        Some(16),
        &links,
    )
    .links(
        &[(0, 3)],
        Some(qty(
            2100.0,
            published(&format!("{LEPERS}: node 0↔3 link 2100 MB/s, 8-bit")),
        )),
        Some(8),
        &links,
    )
    .latency_by_hops(
        LatencyUnit::Cycles,
        &[175.0, 247.0],
        published(&format!("{LEPERS}: local 175, remote 247 cycles")),
    )
    .build()
}

/// The thesis gives machine C's link speeds and one asymmetric route but not its link map: we
/// model packages {0,1},{2,3},{4,5},{6,7} joined by a ring and chords (see docs/TOPOLOGY.md).
fn machine_c() -> Topology {
    let map = assumed(
        "link map assumed (the thesis gives only link speeds and that 3→7 takes 2 hops, 7→3 one): \
         intra-package 0-1,2-3,4-5,6-7; ring 1-2,3-4,5-6,7-0; chords i↔i+3 mod 8; plus 3-7",
    );
    let bw = |mbps: f64, what: &str| Some(qty(mbps, published(&format!("{LEPERS}: {what}"))));
    let chords: Vec<(u32, u32)> = (0..8).map(|i| (i, (i + 3) % 8)).collect();
    Builder::new("machine-c", description("machine-c"), published(&format!("{LEPERS}, machine C")), 8, 6, 1)
        .cores_per_package(12)
        .ghz(2.2, published(LEPERS))
        .memory(32 * GIB, Some("DRAM"))
        .mc_bandwidth(6080.0, published(&format!("{LEPERS}: memory controller 6080 MB/s")))
        .links(&[(0, 1), (2, 3), (4, 5), (6, 7)], bw(4590.0, "4590 MB/s link, 16-bit"), Some(16), &map)
        .links(
            &[(1, 2), (3, 4), (5, 6), (7, 0)],
            bw(3830.0, "3830 MB/s (16-bit link, 8 bits used)"),
            Some(8),
            &map,
        )
        .links(&chords, bw(2550.0, "2550 MB/s link, 8-bit"), Some(8), &map)
        .links(&[(3, 7)], bw(2550.0, "2550 MB/s link, 8-bit"), Some(8), &map)
        .route(
            &[3, 4, 7],
            assumed(&format!(
                "{LEPERS}: 3→7 takes 2 hops although 7→3 takes one (asymmetric routing); the \
                 intermediate node 4 is assumed"
            )),
        )
        .latency_by_hops(
            LatencyUnit::Cycles,
            &[151.0, 232.0, 337.0],
            published(&format!(
                "{LEPERS}: local 151, 1 hop 232, 2 hops 337 cycles; hop counts follow the assumed link map"
            )),
        )
        .build()
}

fn opteron_4n_marathe() -> Topology {
    let t2 = format!("{MARATHE}, Table 2");
    let ring = published(&format!(
        "{MARATHE}, §4.2: four single-core Opteron sockets in a ring (0↔2, 1↔3 two hops)"
    ));
    Builder::new(
        "opteron-4n-marathe",
        description("opteron-4n-marathe"),
        published(&t2),
        4,
        1,
        1,
    )
    .cores_per_llc(None)
    .links(&[(0, 1), (1, 2), (2, 3), (3, 0)], None, None, &ring)
    .latency_matrix(
        LatencyUnit::Ns,
        vec![
            vec![102.0, 138.0, 172.0, 140.0],
            vec![143.0, 107.0, 141.0, 172.0],
            vec![179.0, 141.0, 102.0, 141.0],
            vec![141.0, 175.0, 142.0, 108.0],
        ],
        published(&format!(
            "{t2}: measured ns, rows = CPU node, columns = memory node, kept asymmetric"
        )),
    )
    .build()
}

fn altix_4() -> Topology {
    let t1 = format!("{MARATHE}, Table 1");
    let (local, remote) = (207.0, 430.0);
    let values = (0..4)
        .map(|i| {
            (0..4)
                .map(|j| if i == j { local } else { remote })
                .collect()
        })
        .collect();
    Builder::new(
        "altix-4",
        description("altix-4"),
        published(&format!("{MARATHE}, §4.2")),
        4,
        2,
        1,
    )
    .cores_per_package(1)
    .cores_per_llc(Some(1))
    .ghz(
        1.5,
        published(&format!("{MARATHE}, §4.2: Itanium 2 at 1.5 GHz")),
    )
    .latency_matrix(
        LatencyUnit::Cycles,
        values,
        published(&format!(
            "{t1}: local 207 cycles (sd 121), remote 430 cycles (sd 176); one remote figure \
                 is published, so every remote pair gets it"
        )),
    )
    .build()
}

/// No absolute latency is published for this machine: only the distances are derived, from
/// the end-to-end remote/local ratio of a latency-bound run.
fn sandybridge_2s() -> Topology {
    Builder::new(
        "sandybridge-2s",
        description("sandybridge-2s"),
        published(SPM),
        2,
        8,
        2,
    )
    .cores_per_package(8)
    .ghz(2.6, published(SPM))
    .links(
        &[(0, 1)],
        None,
        None,
        &published(&format!("{SPM}: two sockets joined by QPI")),
    )
    .distances(
        vec![vec![10, 17], vec![17, 10]],
        derived(&format!(
            "{SPM}, distgen (2 threads, random access): all-remote 102.57 s / all-local 61.47 s \
                 = 1.67, taken as the latency ratio: distance 17. No latency is published; use a \
                 SLIT-derived latency with a stated local figure"
        )),
    )
    .build()
}

#[cfg(test)]
mod tests;
