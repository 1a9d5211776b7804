use super::*;
use crate::{ProvenanceKind, from_json_str};

fn all() -> Vec<Topology> {
    list()
        .iter()
        .map(|(name, _)| preset(name).unwrap())
        .collect()
}

#[test]
fn the_ten_presets_exist() {
    let names: Vec<_> = list().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "machine-a",
            "machine-b",
            "machine-c",
            "opteron-4n-marathe",
            "altix-4",
            "sandybridge-2s",
            "epyc-genoa-2s",
            "epyc-genoa-2s-nps4",
            "xeon-spr-2s-snc4",
            "cxl-tier"
        ]
    );
    for (name, desc) in list() {
        assert!(!desc.is_empty(), "{name} has no description");
        assert_eq!(preset(name).unwrap().name, name);
    }
}

#[test]
fn every_preset_validates_and_round_trips() {
    for t in all() {
        t.validate().unwrap_or_else(|e| panic!("{}: {e}", t.name));
        let back = from_json_str(&t.to_json_pretty(), &t.name).unwrap();
        assert_eq!(back, t, "{} does not round-trip", t.name);
    }
}

#[test]
fn every_preset_has_qemu_compatible_distances() {
    for t in all() {
        let d = t
            .distances
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no distances", t.name));
        for (i, row) in d.values.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                assert!(
                    if i == j {
                        v == 10
                    } else {
                        (11..=254).contains(&v)
                    },
                    "{}: [{i}][{j}] = {v}",
                    t.name
                );
            }
        }
    }
}

#[test]
fn every_number_states_its_source() {
    for t in all() {
        assert!(!t.source.source.is_empty());
        if let Some(lat) = &t.latency {
            assert!(!lat.provenance.source.is_empty(), "{}", t.name);
        }
        for link in &t.links {
            assert!(!link.provenance.source.is_empty(), "{}", t.name);
        }
    }
}

#[test]
fn machine_a_has_one_two_hop_pair() {
    let t = preset("machine-a").unwrap();
    assert_eq!(t.hops(0, 3), Some(2));
    assert_eq!(t.hops(3, 0), Some(2));
    assert_eq!(t.hops(0, 1), Some(1));
    let lat = t.latency.as_ref().unwrap();
    assert_eq!(lat.values[0], vec![261.0, 286.0, 286.0, 377.0]);
    assert_eq!(
        t.distances.as_ref().unwrap().values[0],
        vec![10, 11, 11, 14]
    );
    assert!(
        t.links
            .iter()
            .all(|l| l.provenance.kind == ProvenanceKind::Assumed)
    );
    assert_eq!(t.cpu_count(), 16);
}

#[test]
fn machine_b_is_fully_connected_with_a_narrow_link() {
    let t = preset("machine-b").unwrap();
    assert_eq!(t.links.len(), 6);
    assert_eq!(t.diameter(), Some(1));
    let narrow = t.links.iter().find(|l| (l.a, l.b) == (0, 3)).unwrap();
    assert_eq!(narrow.width_bits, Some(8));
    assert_eq!(narrow.bandwidth_mbps.as_ref().unwrap().value, 2100.0);
    assert_eq!(t.cpus.iter().map(|c| c.package).max(), Some(1));
}

#[test]
fn machine_c_has_the_asymmetric_route_and_diameter_two() {
    let t = preset("machine-c").unwrap();
    assert_eq!(t.hops(3, 7), Some(2));
    assert_eq!(t.hops(7, 3), Some(1));
    assert_eq!(t.route(3, 7), Some(vec![3, 4, 7]));
    assert_eq!(t.diameter(), Some(2));
    let ids = t.node_ids();
    let hops: Vec<u32> = ids
        .iter()
        .flat_map(|&a| ids.iter().map(move |&b| (a, b)))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| t.hops(a, b).unwrap())
        .collect();
    assert!(hops.contains(&1) && hops.contains(&2));
    let lat = t.latency.as_ref().unwrap();
    assert_eq!(lat.values[3][7], 337.0);
    assert_eq!(lat.values[7][3], 232.0);
    // 17 links: 4 intra-package, 4 ring, 8 chords, 3-7.
    assert_eq!(t.links.len(), 17);
}

#[test]
fn marathe_matrix_is_verbatim_and_the_ring_has_two_hop_diagonals() {
    let t = preset("opteron-4n-marathe").unwrap();
    let lat = t.latency.as_ref().unwrap();
    assert_eq!(lat.unit, LatencyUnit::Ns);
    assert_eq!(lat.values[2], vec![179.0, 141.0, 102.0, 141.0]);
    assert_eq!(t.hops(0, 2), Some(2));
    assert_eq!(t.hops(1, 3), Some(2));
    assert_eq!(t.cpu_count(), 4);
}

#[test]
fn modern_presets_have_the_stated_shape() {
    let genoa = preset("epyc-genoa-2s-nps4").unwrap();
    assert_eq!(genoa.nodes.len(), 8);
    assert_eq!(genoa.cpu_count(), 384);
    assert!(genoa.latency.as_ref().unwrap().entry_provenance.is_some());
    let spr = preset("xeon-spr-2s-snc4").unwrap();
    assert_eq!(spr.nodes.len(), 8);
    assert_eq!(spr.cpu_count(), 224);
    let cxl = preset("cxl-tier").unwrap();
    assert!(cxl.nodes[1].cpus.is_empty());
    assert_eq!(cxl.nodes[1].memory_kind.as_deref(), Some("CXL"));
    let sb = preset("sandybridge-2s").unwrap();
    assert!(sb.latency.is_none());
    assert_eq!(sb.cpu_count(), 32);
    assert_eq!(
        sb.nodes[0].cpus,
        [(0..8).collect::<Vec<u32>>(), (16..24).collect()].concat()
    );
}

#[test]
fn cycles_convert_to_nanoseconds() {
    let t = preset("machine-a").unwrap();
    let (ns, p) = t.latency_ns().unwrap();
    assert!((ns[0][0] - 104.4).abs() < 1e-9);
    assert!(p.source.contains("2.5 GHz"));
}

#[test]
fn unknown_preset_lists_the_known_names() {
    let err = preset("machine-d").unwrap_err().to_string();
    assert!(err.contains("unknown preset `machine-d`"), "{err}");
    assert!(err.contains("did you mean `machine-a`?"), "{err}");
    for (name, _) in list() {
        assert!(err.contains(name), "{err}");
    }
}
