//! Parsing topology JSON: good documents, malformed ones, inconsistent ones.

use numalens_topology::{
    Link, Provenance, ProvenanceKind, Route, TOPOLOGY_SCHEMA_VERSION, Topology, TopologyError,
    from_json_str, load_json_file, presets,
};

const SMALL: &str = r#"{
  "schema": 1,
  "name": "two-node",
  "source": { "kind": "assumed", "source": "test" },
  "nodes": [
    { "id": 0, "cpus": "0-1", "memory_bytes": 1073741824 },
    { "id": 3, "cpus": [3, 2] }
  ],
  "distances": { "values": [[10, 20], [20, 10]], "provenance": { "kind": "measured", "source": "ACPI SLIT via sysfs" } }
}"#;

fn err(text: &str) -> String {
    from_json_str(text, "t.json").unwrap_err().to_string()
}

fn small() -> Topology {
    from_json_str(SMALL, "t.json").unwrap()
}

/// The message of validating a modified small topology.
fn invalid(change: impl FnOnce(&mut Topology)) -> String {
    let mut t = small();
    change(&mut t);
    t.validate().unwrap_err().to_string()
}

fn p() -> Provenance {
    Provenance::new(ProvenanceKind::Assumed, "test")
}

#[test]
fn reads_cpulists_as_strings_or_arrays() {
    let t = small();
    assert_eq!(t.nodes[0].cpus, vec![0, 1]);
    assert_eq!(t.nodes[1].cpus, vec![2, 3]);
    assert_eq!(t.schema, TOPOLOGY_SCHEMA_VERSION);
    // Written back as a cpulist string: the shape the QEMU harness reads.
    let json: serde_json::Value = serde_json::from_str(&t.to_json_pretty()).unwrap();
    assert_eq!(json["nodes"][1]["cpus"], "2-3");
    assert_eq!(json["nodes"][0]["memory_bytes"], 1073741824u64);
    assert_eq!(json["distances"]["values"][0][1], 20);
}

#[test]
fn a_bad_cpulist_names_the_field_and_position() {
    let text = SMALL.replace(r#""cpus": [3, 2]"#, r#""cpus": {"a": 1}"#);
    let e = err(&text);
    assert!(
        e.starts_with("t.json: nodes[1].cpus: expected a CPU list"),
        "{e}"
    );
    assert!(e.contains("(line 7, column"), "{e}");
    let e = err(&SMALL.replace(r#""0-1""#, r#""1-0""#));
    assert!(
        e.contains("nodes[0].cpus: range `1-0` runs backwards"),
        "{e}"
    );
}

#[test]
fn type_errors_and_unknown_fields_name_the_field() {
    let e = err(&SMALL.replace(r#""memory_bytes": 1073741824"#, r#""memory_bytes": "1G""#));
    assert!(
        e.contains("nodes[0].memory_bytes: invalid type: string \"1G\""),
        "{e}"
    );
    let e = err(&SMALL.replace(r#""name""#, r#""nmae""#));
    assert!(e.contains("unknown field `nmae`"), "{e}");
    let e = err(&SMALL.replace(r#""kind": "assumed""#, r#""kind": "guessed""#));
    assert!(e.contains("source.kind: unknown variant `guessed`"), "{e}");
}

#[test]
fn syntax_errors_give_line_and_column() {
    let e = err("{\n  \"name\": \"x\",\n}");
    assert!(e.starts_with("t.json: "), "{e}");
    assert!(e.contains("line 3"), "{e}");
    let e = err(&format!("{SMALL} trailing"));
    assert!(e.contains("trailing characters"), "{e}");
}

#[test]
fn a_newer_schema_says_to_upgrade() {
    let text = SMALL.replace(r#""schema": 1"#, r#""schema": 7, "future_field": true"#);
    let e = from_json_str(&text, "t.json").unwrap_err();
    assert!(
        matches!(e, TopologyError::UnsupportedSchema { found: 7, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("upgrade numalens"), "{e}");
}

#[test]
fn semantic_errors_name_the_field_and_the_origin() {
    let e = err(&SMALL.replace("[[10, 20], [20, 10]]", "[[10, 20], [20, 12]]"));
    assert_eq!(
        e,
        "t.json: distances.values[1][1]: is 12, but a node's distance to itself must be 10"
    );
}

#[test]
fn node_problems() {
    assert!(invalid(|t| t.nodes.clear()).contains("nodes: is empty"));
    let e = invalid(|t| t.nodes.swap(0, 1));
    assert!(
        e.contains("nodes[1].id: node id 0 comes after node id 3"),
        "{e}"
    );
    let e = invalid(|t| t.nodes[1].id = 0);
    assert!(e.contains("node id 0 repeats"), "{e}");
    let e = invalid(|t| t.nodes[1].cpus.push(1));
    assert!(e.contains("nodes[1].cpus: CPU 1 is also on node 0"), "{e}");
}

#[test]
fn cpu_entries_must_agree_with_the_nodes() {
    let cpu = |id, node| numalens_topology::Cpu {
        id,
        node,
        package: 0,
        core: id,
        llc: None,
    };
    let e = invalid(|t| t.cpus = vec![cpu(2, 0)]);
    assert!(e.contains("cpus[0].node: CPU 2 says node 0"), "{e}");
    let e = invalid(|t| t.cpus = vec![cpu(0, 9)]);
    assert!(e.contains("names node 9"), "{e}");
    let e = invalid(|t| t.cpus = vec![cpu(0, 0), cpu(0, 0)]);
    assert!(e.contains("cpus[1].id: CPU 0 is listed twice"), "{e}");
}

#[test]
fn matrices_must_be_square_and_in_range() {
    let e = invalid(|t| {
        t.distances.as_mut().unwrap().values.pop();
    });
    assert!(
        e.contains("distances.values: has 1 rows but there are 2 nodes"),
        "{e}"
    );
    let e = invalid(|t| t.distances.as_mut().unwrap().values[0].push(30));
    assert!(e.contains("distances.values[0]: has 3 entries"), "{e}");
    let e = invalid(|t| t.distances.as_mut().unwrap().values[0][1] = 255);
    assert!(
        e.contains(
            "distances.values[0][1]: is 255; distances between different nodes must be 11..=254"
        ),
        "{e}"
    );
    let e = invalid(|t| {
        let mut lat = t.derived_latency_from_slit(100.0);
        lat.values[1][0] = f64::NAN;
        t.latency = Some(lat);
    });
    assert!(
        e.contains("latency.values[1][0]: is NaN; it must be a positive finite number"),
        "{e}"
    );
    let e = invalid(|t| {
        let mut lat = t.derived_latency_from_slit(100.0);
        lat.values[0][0] = -1.0;
        t.latency = Some(lat);
    });
    assert!(e.contains("latency.values[0][0]: is -1"), "{e}");
}

#[test]
fn links_and_routes_must_name_known_nodes_and_real_links() {
    let link = |a, b| Link {
        a,
        b,
        bandwidth_mbps: None,
        width_bits: None,
        provenance: p(),
    };
    let e = invalid(|t| t.links = vec![link(0, 4)]);
    assert!(
        e.contains("links[0].b: names node 4, which is not in `nodes` ([0, 3])"),
        "{e}"
    );
    let e = invalid(|t| t.links = vec![link(0, 3), link(3, 0)]);
    assert!(e.contains("links[1]: link 3-0 is listed twice"), "{e}");
    let e = invalid(|t| {
        t.links = vec![link(0, 3)];
        t.links[0].bandwidth_mbps = Some(numalens_topology::Quantity::new(
            -5.0,
            ProvenanceKind::Assumed,
            "x",
        ));
    });
    assert!(e.contains("links[0].bandwidth_mbps.value: is -5"), "{e}");
    let route = |path: Vec<u32>| Route {
        from: 0,
        to: 3,
        path,
        provenance: p(),
    };
    let e = invalid(|t| t.routes = vec![route(vec![0, 3])]);
    assert!(
        e.contains("routes[0].path[0]: step 0→3 is not in `links`"),
        "{e}"
    );
    let e = invalid(|t| {
        t.links = vec![link(0, 3)];
        t.routes = vec![route(vec![3, 0])];
    });
    assert!(
        e.contains("routes[0].path: must start at `from` (0) and end at `to` (3)"),
        "{e}"
    );
}

#[test]
fn routes_and_hops_follow_links() {
    let mut t = small();
    assert_eq!(t.hops(0, 3), None, "no link graph: hops unknown");
    assert_eq!(t.hops(0, 0), Some(0));
    assert_eq!(t.hops(0, 1), None, "node 1 does not exist");
    t.links.push(Link {
        a: 3,
        b: 0,
        bandwidth_mbps: None,
        width_bits: None,
        provenance: p(),
    });
    assert_eq!(t.route(0, 3), Some(vec![0, 3]));
    assert_eq!(t.diameter(), Some(1));
}

#[test]
fn slit_derived_latency_scales_the_local_figure() {
    let t = small();
    let lat = t.derived_latency_from_slit(80.0);
    assert_eq!(lat.values, vec![vec![80.0, 160.0], vec![160.0, 80.0]]);
    assert_eq!(lat.provenance.kind, ProvenanceKind::DerivedFromSlit);
    let mut no_slit = t.clone();
    no_slit.distances = None;
    assert_eq!(no_slit.derived_latency_from_slit(80.0).values[0][1], 160.0);
    assert!(t.latency_ns().is_none());
}

#[test]
fn loads_files_and_names_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    let t = presets::preset("cxl-tier").unwrap();
    std::fs::write(&path, t.to_json_pretty()).unwrap();
    assert_eq!(load_json_file(&path).unwrap(), t);
    let e = load_json_file(&dir.path().join("missing.json"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("cannot read ") && e.contains("missing.json"),
        "{e}"
    );
}

#[test]
fn the_example_in_the_docs_is_valid() {
    let doc = include_str!("../../../docs/TOPOLOGY.md");
    let start = doc.find("```json\n").expect("docs have a JSON example") + "```json\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let t = from_json_str(&doc[start..end], "docs/TOPOLOGY.md").unwrap();
    assert_eq!(t.node_ids(), vec![0, 1, 2]);
    assert_eq!(t.hops(1, 2), Some(2));
    assert_eq!(t.hops(2, 1), Some(2));
}

/// A CPU list is expanded into one id per CPU: a range no machine has must be refused before
/// anything is allocated for it, naming the field, not exhaust memory.
#[test]
fn a_huge_cpu_range_is_refused_without_allocating_it() {
    for list in [
        "0-100000000",
        "0-4000000000",
        "0-65535,0-65535",
        "0-4294967295",
    ] {
        let text = SMALL.replace(r#""0-1""#, &format!("\"{list}\""));
        let e = err(&text);
        assert!(
            e.starts_with("t.json: nodes[0].cpus: ") && e.contains("more CPUs than"),
            "{list}: {e}"
        );
    }
    // The largest list allowed still reads.
    let text = SMALL
        .replace(r#""0-1""#, r#""0-1,4-65535""#)
        .replace(r#"[3, 2]"#, r#""2-3""#);
    assert_eq!(from_json_str(&text, "t.json").unwrap().cpu_count(), 65536);
}

/// Matrices and routes grow with the square of the node count: more nodes than Linux can have
/// is refused.
#[test]
fn more_nodes_than_linux_supports_are_refused() {
    let mut t = small();
    t.distances = None;
    t.nodes = (0..1025)
        .map(|id| numalens_topology::Node {
            id,
            cpus: Vec::new(),
            memory_bytes: None,
            memory_bandwidth_mbps: None,
            memory_kind: None,
        })
        .collect();
    let e = t.validate().unwrap_err().to_string();
    assert!(e.contains("nodes: 1025 nodes") && e.contains("1024"), "{e}");
    t.nodes.truncate(1024);
    t.validate().unwrap();
}

/// Each list is bounded, and so is their sum: many nodes with large lists would otherwise expand
/// to far more ids than the document's size suggests, before validation could look at them.
#[test]
fn the_cpu_lists_of_all_nodes_together_are_bounded() {
    let nodes: Vec<String> = (0..3u32)
        .map(|i| {
            format!(
                r#"{{ "id": {i}, "cpus": "{}-{}" }}"#,
                i * 65536,
                i * 65536 + 65535
            )
        })
        .collect();
    let text = format!(
        r#"{{ "name": "big", "source": {{ "kind": "assumed", "source": "test" }}, "nodes": [{}] }}"#,
        nodes.join(", ")
    );
    let e = err(&text);
    assert!(
        e.starts_with("t.json: nodes[1].cpus: ") && e.contains("65536"),
        "{e}"
    );
}
