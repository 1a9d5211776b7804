//! The seeds and earlier findings of the `topology_json` fuzz target (`fuzz/seeds/`), read the
//! way the target reads them: each finding stays fixed, and the seeds still read.

#[path = "../../../fuzz/seed_inputs.rs"]
mod seeds;

#[test]
fn topology_json_inputs_read_without_panicking() {
    let mut read = 0;
    for path in seeds::seed_inputs("topology_json") {
        let bytes = std::fs::read(path).unwrap();
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        if let Ok(t) = numalens_topology::from_json_str(text, "seed.json") {
            let _ = numalens_topology::render_text(&t, true);
            let _ = t.derived_latency_from_slit(80.0);
        }
        read += 1;
    }
    assert!(read > 0, "no topology_json seed is UTF-8");
}
