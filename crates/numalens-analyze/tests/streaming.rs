//! The sample pass over many batches and row groups: the same numbers with one worker or
//! several, and every sample counted once.

use numalens_analyze::{Options, analyze};
use numalens_format::Profile;
use numalens_format::synth::{SynthConfig, example_meta, write_example_profile};

/// Just over one row group, so that two workers each read one.
const SAMPLES: u64 = numalens_format::ROW_GROUP_ROWS as u64 + 50_000;

fn synthetic_profile(dir: &std::path::Path) -> Profile {
    let meta = example_meta("synth", "synthetic");
    let config = SynthConfig {
        threads: 4,
        nodes: 2,
        block_bytes: 1 << 20,
        shared_bytes: 1 << 16,
        ..SynthConfig::default()
    };
    write_example_profile(dir, config, SAMPLES, meta).unwrap();
    Profile::open(dir).unwrap()
}

#[test]
fn workers_do_not_change_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let profile = synthetic_profile(&dir.path().join("s.numalens"));
    let with = |workers| {
        let options = Options {
            workers,
            ..Options::default()
        };
        analyze(&profile, &options).unwrap()
    };
    let one = with(1);
    assert_eq!(one, with(2));
    assert_eq!(one.totals.samples.total, SAMPLES);

    // Per object and per thread, every sample counted once.
    let by_object: u64 = one.objects.iter().map(|o| o.samples.total).sum();
    assert_eq!(by_object + one.totals.unattributed.total, SAMPLES);
    let by_thread: u64 = one.threads.iter().map(|t| t.samples.total).sum();
    assert_eq!(by_thread, SAMPLES);
    let by_node: u64 = one.nodes.nodes.iter().map(|n| n.samples).sum();
    assert_eq!(by_node + one.nodes.unknown_node_samples, SAMPLES);
}
