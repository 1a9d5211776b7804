//! A topology JSON document (`--topology FILE`, the topology embedded in `meta.json`): parsed,
//! validated, and, when valid, routed and rendered as `numalens topology` does.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(topology) = numalens_topology::from_json_str(text, "fuzz.json") else {
        return;
    };
    let _ = numalens_topology::render_text(&topology, true);
    let _ = topology.latency_ns();
    let _ = topology.derived_latency_from_slit(80.0);
    let ids = topology.node_ids();
    for &a in ids.iter().take(8) {
        for &b in ids.iter().take(8) {
            let _ = topology.hops(a, b);
        }
    }
    let again = numalens_topology::from_json_str(&topology.to_json_pretty(), "again.json");
    assert_eq!(
        again.ok().as_ref(),
        Some(&topology),
        "a valid topology round-trips"
    );
});
