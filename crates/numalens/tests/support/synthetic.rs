//! A small synthetic profile for the report and export tests (the format's example generator:
//! 8 threads, 9 objects).

use std::path::{Path, PathBuf};

use numalens_format::synth::{SynthConfig, example_meta, write_example_profile};

/// Writes `DIR/demo.numalens` with `samples` samples and returns its path.
pub fn synthetic_profile(dir: &Path, samples: u64) -> PathBuf {
    let profile = dir.join("demo.numalens");
    let meta = example_meta("synthetic", "synthetic");
    write_example_profile(&profile, SynthConfig::default(), samples, meta).unwrap();
    profile
}
