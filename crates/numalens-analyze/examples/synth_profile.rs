//! Writes a synthetic profile for benchmarks: `synth_profile DIR [SAMPLES]` (default 10 M).
//!
//! Samples come from the format's generator (8 threads streaming through private blocks with a
//! shared hot region), with the threads and objects they refer to.

use std::path::Path;

use numalens_format::synth::{SynthConfig, write_example_profile};
use numalens_format::{Backend, Clock, Host, Meta};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: synth_profile DIR [SAMPLES]");
        std::process::exit(2);
    };
    let samples = args
        .get(2)
        .map_or(10_000_000, |n| n.parse().expect("SAMPLES is a number"));
    let meta = Meta::new(
        vec!["synth_profile".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        Host {
            hostname: "bench".into(),
            kernel: "-".into(),
            arch: std::env::consts::ARCH.into(),
        },
        Clock {
            name: "synthetic".into(),
            origin_ns: 0,
        },
    );
    if let Err(e) = write_example_profile(Path::new(dir), SynthConfig::default(), samples, meta) {
        eprintln!("synth_profile: {e}");
        std::process::exit(1);
    }
}
