//! Random valid topologies survive JSON → parse unchanged.

use numalens_topology::{
    Cpu, DistanceMatrix, LatencyMatrix, LatencyUnit, Link, Node, Provenance, ProvenanceKind,
    Quantity, Route, TOPOLOGY_SCHEMA_VERSION, Topology, from_json_str,
};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = ProvenanceKind> {
    prop_oneof![
        Just(ProvenanceKind::Measured),
        Just(ProvenanceKind::Published),
        Just(ProvenanceKind::Assumed),
        Just(ProvenanceKind::DerivedFromSlit),
        Just(ProvenanceKind::Derived),
    ]
}

fn provenance() -> impl Strategy<Value = Provenance> {
    (kind(), "[a-zA-Z0-9 ,.×→-]{0,20}").prop_map(|(k, s)| Provenance::new(k, s))
}

/// Positive finite numbers, including ones that are not short decimals.
fn positive() -> impl Strategy<Value = f64> {
    prop_oneof![(1u32..100_000).prop_map(f64::from), 1e-3f64..1e6]
}

fn quantity() -> impl Strategy<Value = Quantity> {
    (positive(), provenance()).prop_map(|(value, provenance)| Quantity { value, provenance })
}

/// Sparse, sorted node ids with disjoint CPU sets (some nodes memory-only).
fn nodes() -> impl Strategy<Value = Vec<Node>> {
    proptest::collection::btree_set(0u32..64, 1..6)
        .prop_flat_map(|ids| {
            let n = ids.len();
            let per_node = proptest::collection::vec(
                (
                    proptest::collection::btree_set(0u32..16, 0..5),
                    proptest::option::of(1u64..1 << 40),
                    proptest::option::of(quantity()),
                    proptest::option::of(prop_oneof![
                        Just("DRAM".to_string()),
                        Just("CXL".to_string())
                    ]),
                ),
                n,
            );
            (Just(ids), per_node)
        })
        .prop_map(|(ids, per_node)| {
            ids.into_iter()
                .zip(per_node)
                .enumerate()
                .map(|(pos, (id, (cpus, memory_bytes, bw, kind)))| Node {
                    id,
                    // Offsetting by position keeps CPU sets disjoint.
                    cpus: cpus.into_iter().map(|c| pos as u32 * 16 + c).collect(),
                    memory_bytes,
                    memory_bandwidth_mbps: bw,
                    memory_kind: kind,
                })
                .collect()
        })
}

fn topology() -> impl Strategy<Value = Topology> {
    nodes()
        .prop_flat_map(|nodes| {
            let n = nodes.len();
            let distances = proptest::collection::vec(proptest::collection::vec(11u32..=254, n), n);
            let latency = (
                proptest::collection::vec(proptest::collection::vec(positive(), n), n),
                any::<bool>(),
                provenance(),
                proptest::option::of(proptest::collection::vec(
                    proptest::collection::vec(provenance(), n),
                    n,
                )),
            );
            (
                Just(nodes),
                proptest::option::of((distances, provenance())),
                proptest::option::of(latency),
                proptest::option::of(quantity()),
                proptest::option::of("[a-z ]{0,30}"),
                provenance(),
                proptest::collection::vec(
                    (
                        0..n,
                        0..n,
                        proptest::option::of(quantity()),
                        proptest::option::of(1u32..64),
                    ),
                    0..6,
                ),
                any::<u8>(),
            )
        })
        .prop_map(
            |(nodes, distances, latency, ghz, description, source, links, cpu_seed)| {
                let ids: Vec<u32> = nodes.iter().map(|n| n.id).collect();
                let distances = distances.map(|(mut values, provenance)| {
                    for (i, row) in values.iter_mut().enumerate() {
                        row[i] = 10;
                    }
                    DistanceMatrix { values, provenance }
                });
                let latency =
                    latency.map(
                        |(values, cycles, provenance, entry_provenance)| LatencyMatrix {
                            unit: if cycles {
                                LatencyUnit::Cycles
                            } else {
                                LatencyUnit::Ns
                            },
                            values,
                            provenance,
                            entry_provenance,
                        },
                    );
                let links = dedup_links(&ids, links);
                // A route along the first link, when there is one, exercises route parsing.
                let routes = links
                    .first()
                    .map(|l: &Link| Route {
                        from: l.a,
                        to: l.b,
                        path: vec![l.a, l.b],
                        provenance: l.provenance.clone(),
                    })
                    .into_iter()
                    .collect();
                let cpus = cpus_of(&nodes, cpu_seed);
                Topology {
                    schema: TOPOLOGY_SCHEMA_VERSION,
                    name: "random".into(),
                    description,
                    source,
                    cpu_ghz: ghz,
                    nodes,
                    cpus,
                    distances,
                    latency,
                    links,
                    routes,
                }
            },
        )
}

fn dedup_links(ids: &[u32], raw: Vec<(usize, usize, Option<Quantity>, Option<u32>)>) -> Vec<Link> {
    let mut links: Vec<Link> = Vec::new();
    for (i, j, bw, width) in raw {
        let (a, b) = (ids[i.min(j)], ids[i.max(j)]);
        if a != b && !links.iter().any(|l| l.a == a && l.b == b) {
            links.push(Link {
                a,
                b,
                bandwidth_mbps: bw,
                width_bits: width,
                provenance: Provenance::new(ProvenanceKind::Assumed, "random"),
            });
        }
    }
    links
}

/// A CPU layout for some of the nodes' CPUs (`cpus[]` may omit CPUs), varying with `seed`.
fn cpus_of(nodes: &[Node], seed: u8) -> Vec<Cpu> {
    let mut cpus: Vec<Cpu> = nodes
        .iter()
        .flat_map(|n| n.cpus.iter().map(move |&id| (n.id, id)))
        .filter(|(_, id)| (id + u32::from(seed)) % 3 != 0)
        .map(|(node, id)| Cpu {
            id,
            node,
            package: node / 2,
            core: id / 2,
            llc: seed.is_multiple_of(2).then_some(id),
        })
        .collect();
    cpus.sort_by_key(|c| c.id);
    cpus
}

proptest! {
    #[test]
    fn valid_topologies_round_trip(t in topology()) {
        t.validate().unwrap();
        let text = t.to_json_pretty();
        let back = from_json_str(&text, "roundtrip").unwrap();
        prop_assert_eq!(back, t);
    }
}
