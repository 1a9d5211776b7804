//! Modern machines: published figures where they exist, marked assumptions where not.

use super::builder::{Builder, GIB, assumed, derived, published, qty};
use super::description;
use crate::{LatencyUnit, Provenance, Topology};

const GENOA_LOCAL: f64 = 125.0;
const GENOA_REMOTE: f64 = 200.0;

fn genoa_local() -> Provenance {
    published(
        "≈120–130 ns published for Genoa NPS1 (Rome NPS1 ≈ 122 ns measured); 125 ns, the middle of the range",
    )
}

fn genoa_remote() -> Provenance {
    assumed("cross-socket assumed 1.6× local (middle of the assumed 1.5–1.8× range): 200 ns")
}

fn genoa(name: &str, nodes: u32) -> Builder {
    let per_node = 96 / (nodes / 2);
    Builder::new(
        name,
        description(name),
        assumed("AMD EPYC 9654 assumed: 96 cores, 12 DDR5 channels per socket"),
        nodes,
        per_node,
        2,
    )
    .cores_per_package(96)
    .cores_per_llc(Some(8))
    .ghz(
        2.4,
        assumed("EPYC 9654 base clock (the SKU is an assumption)"),
    )
    .memory(384 * GIB / u64::from(nodes / 2), Some("DRAM"))
}

pub(super) fn epyc_genoa_2s() -> Topology {
    genoa("epyc-genoa-2s", 2)
        .mc_bandwidth(460_800.0, published("12 × DDR5-4800 per socket = 460.8 GB/s, theoretical"))
        .links(
            &[(0, 1)],
            Some(qty(
                256_000.0,
                derived("4 xGMI links, 512 GB/s between sockets (theoretical, both directions): 256 GB/s per direction"),
            )),
            None,
            &published("2-socket Genoa: sockets joined by xGMI"),
        )
        .latency_matrix(
            LatencyUnit::Ns,
            vec![vec![GENOA_LOCAL, GENOA_REMOTE], vec![GENOA_REMOTE, GENOA_LOCAL]],
            assumed("local published, remote assumed: see entry_provenance"),
        )
        .latency_entry_provenance(|i, j| if i == j { genoa_local() } else { genoa_remote() })
        .build()
}

/// Node position → socket for the 8-node presets (4 nodes per socket).
fn same_socket(i: usize, j: usize) -> bool {
    i / 4 == j / 4
}

fn tiered(local: f64, socket: f64, remote: f64) -> Vec<Vec<f64>> {
    (0..8)
        .map(|i| {
            (0..8)
                .map(|j| match (i == j, same_socket(i, j)) {
                    (true, _) => local,
                    (false, true) => socket,
                    (false, false) => remote,
                })
                .collect()
        })
        .collect()
}

pub(super) fn epyc_genoa_2s_nps4() -> Topology {
    genoa("epyc-genoa-2s-nps4", 8)
        .mc_bandwidth(
            115_200.0,
            derived("1/4 of 460.8 GB/s per socket (12 × DDR5-4800, theoretical)"),
        )
        .latency_matrix(
            LatencyUnit::Ns,
            tiered(116.0, 133.0, GENOA_REMOTE),
            assumed("local derived, other tiers assumed: see entry_provenance"),
        )
        .latency_entry_provenance(|i, j| match (i == j, same_socket(i, j)) {
            (true, _) => {
                derived("NPS4 local ≈ 7 % below NPS1 (Rome: 113 vs 122 ns): 125 ns × 0.93 ≈ 116 ns")
            }
            (false, true) => {
                assumed("intra-socket quadrant assumed 1.15× local (middle of 1.1–1.2×): 133 ns")
            }
            (false, false) => genoa_remote(),
        })
        .build()
}

pub(super) fn xeon_spr_2s_snc4() -> Topology {
    let source = assumed("Xeon Platinum 8480+ assumed: 56 cores, 8 DDR5 channels per socket, SNC4");
    Builder::new(
        "xeon-spr-2s-snc4",
        description("xeon-spr-2s-snc4"),
        source,
        8,
        14,
        2,
    )
    .cores_per_package(56)
    // The L3 is shared by the whole socket even when SNC splits its memory into 4 nodes.
    .cores_per_llc(Some(56))
    .ghz(
        2.0,
        assumed("Xeon Platinum 8480+ base clock (the SKU is an assumption)"),
    )
    .memory(128 * GIB, Some("DRAM"))
    .mc_bandwidth(
        76_800.0,
        derived("8 × DDR5-4800 = 307.2 GB/s per socket (theoretical) ÷ 4 SNC nodes"),
    )
    .latency_matrix(
        LatencyUnit::Ns,
        tiered(110.0, 126.5, 161.7),
        assumed(
            "local assumed 110 ns; intra-socket cross-tile assumed 1.15× (middle of 1.1–1.2×) \
                 = 126.5 ns; cross-socket 1.47× (middle of the 1.44–1.50× measured with MLC on \
                 Xeon E7, assumed to carry over) = 161.7 ns",
        ),
    )
    .build()
}

pub(super) fn cxl_tier() -> Topology {
    let cxl_bw = || {
        qty(
            63_000.0,
            derived(
                "CXL on PCIe 5.0 ×16: 32 GT/s × 16 lanes × 128/130 ≈ 63 GB/s per direction; stores may not scale with threads",
            ),
        )
    };
    let source = assumed("a generic 32-core socket with DRAM plus one CXL Type-3 memory expander");
    Builder::new("cxl-tier", description("cxl-tier"), source, 1, 32, 2)
        .ghz(2.0, assumed("2.0 GHz nominal clock"))
        .memory(256 * GIB, Some("DRAM"))
        .mc_bandwidth(
            307_200.0,
            assumed("8 × DDR5-4800 = 307.2 GB/s, theoretical"),
        )
        .memory_only_node(256 * GIB, "CXL", cxl_bw())
        .links(
            &[(0, 1)],
            Some(cxl_bw()),
            None,
            &assumed("the expander hangs off the socket's PCIe 5.0 ×16 port"),
        )
        .latency_matrix(
            LatencyUnit::Ns,
            vec![vec![110.0, 190.0], vec![190.0, 110.0]],
            assumed("local assumed, CXL derived: see entry_provenance"),
        )
        .latency_entry_provenance(|i, j| match (i, j) {
            (0, 0) => assumed("local DRAM latency assumed 110 ns"),
            (0, 1) => derived(
                "110 ns local + 80 ns (middle of the +70–90 ns published for CXL memory) = 190 ns",
            ),
            _ => assumed(
                "node 1 has no CPUs: its row mirrors row 0 and only feeds the SLIT distances",
            ),
        })
        .build()
}
