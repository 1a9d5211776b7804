//! The seeds and earlier findings of the `topology_json` fuzz target (`fuzz/seeds/`), read the
//! way the target reads them: each finding stays fixed, and the seeds still read.

use std::path::Path;

#[test]
fn topology_json_inputs_read_without_panicking() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/topology_json");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        if let Ok(t) = numalens_topology::from_json_str(text, "seed.json") {
            let _ = numalens_topology::render_text(&t, true);
            let _ = t.derived_latency_from_slit(80.0);
        }
        read += 1;
    }
    assert!(read > 0, "no inputs in {}", dir.display());
}
