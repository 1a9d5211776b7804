//! A small synthetic profile for the report and export tests (the format's example generator:
//! 8 threads, 9 objects).

use std::path::{Path, PathBuf};

use numalens_format::synth::{SynthConfig, write_example_profile};
use numalens_format::{Backend, Clock, Host, Meta};

/// Writes `DIR/demo.numalens` with `samples` samples and returns its path.
pub fn synthetic_profile(dir: &Path, samples: u64) -> PathBuf {
    let profile = dir.join("demo.numalens");
    let meta = Meta::new(
        vec!["synthetic".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "h".into(),
            kernel: "k".into(),
            arch: "x86_64".into(),
        },
        Clock {
            name: "synthetic".into(),
            origin_ns: 0,
        },
    );
    write_example_profile(&profile, SynthConfig::default(), samples, meta).unwrap();
    profile
}
