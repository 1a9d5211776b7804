//! Missing, truncated, corrupted and too-new profiles give errors naming the file, never panics.

mod common;

use std::path::Path;

use numalens_format::synth::{SynthConfig, SynthSamples};
use numalens_format::*;

fn written(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("x.numalens");
    let samples: Vec<Sample> = SynthSamples::new(SynthConfig::default())
        .take(120_000)
        .collect();
    common::write_samples(&path, &samples);
    path
}

fn read_samples(path: &Path) -> Result<usize> {
    let profile = Profile::open(path)?;
    let mut rows = 0;
    for batch in profile.batches::<Sample>(None, None)? {
        rows += Sample::from_batch(&batch?, path)?.len();
    }
    Ok(rows)
}

#[test]
fn missing_directory_and_meta() {
    let dir = tempfile::tempdir().unwrap();
    let err = Profile::open(&dir.path().join("nope"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nope") && err.contains("does not exist"),
        "{err}"
    );
    let err = Profile::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("not a numalens profile (no meta.json)"),
        "{err}"
    );
}

#[test]
fn missing_table_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    std::fs::remove_file(path.join("threads.parquet")).unwrap();
    let err = Profile::open(&path)
        .unwrap()
        .read_all::<Thread>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("table `threads` is missing"), "{err}");
}

#[test]
fn newer_major_version_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let meta_path = path.join("meta.json");
    let text = std::fs::read_to_string(&meta_path).unwrap();
    let current = format!("\"format_version\": \"{FORMAT_MAJOR}.{FORMAT_MINOR}\"");
    let newer = text.replace(&current, "\"format_version\": \"2.3\"");
    assert_ne!(text, newer);
    std::fs::write(&meta_path, newer).unwrap();
    let err = Profile::open(&path).unwrap_err().to_string();
    assert!(
        err.contains("format 2.3") && err.contains("format 1.x"),
        "{err}"
    );
    assert!(err.contains("meta.json"), "{err}");
}

#[test]
fn newer_minor_version_with_unknown_fields_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let meta_path = path.join("meta.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    value["format_version"] = "1.7".into();
    value["a_field_from_the_future"] = 5.into();
    std::fs::write(&meta_path, value.to_string()).unwrap();
    assert_eq!(read_samples(&path).unwrap(), 120_000);
}

#[test]
fn corrupted_meta_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let meta_path = path.join("meta.json");
    let text = std::fs::read_to_string(&meta_path).unwrap();
    std::fs::write(&meta_path, &text[..text.len() / 2]).unwrap();
    let err = Profile::open(&path).unwrap_err().to_string();
    assert!(
        err.contains("meta.json") && err.contains("not valid JSON"),
        "{err}"
    );

    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    value["page_size"] = "big".into();
    std::fs::write(&meta_path, value.to_string()).unwrap();
    let err = Profile::open(&path).unwrap_err().to_string();
    assert!(err.contains("field `page_size`"), "{err}");
}

#[test]
fn truncated_table_says_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let table = path.join("samples.parquet");
    let bytes = std::fs::read(&table).unwrap();
    for keep in [0, 3, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&table, &bytes[..keep]).unwrap();
        let err = read_samples(&path).unwrap_err().to_string();
        assert!(
            err.contains("samples.parquet") && err.contains("truncated"),
            "{keep}: {err}"
        );
    }
}

#[test]
fn corrupted_pages_give_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let table = path.join("samples.parquet");
    let original = std::fs::read(&table).unwrap();
    let mut seed = 0x1234_5678_u64;
    for round in 0..40 {
        let mut bytes = original.clone();
        // Flip bytes in the data pages, keep the footer intact.
        for _ in 0..(1 + round % 8) {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = 4 + (seed >> 33) as usize % (bytes.len() / 2);
            bytes[at] ^= 0x5a;
        }
        std::fs::write(&table, &bytes).unwrap();
        if let Err(err) = read_samples(&path) {
            let err = err.to_string();
            assert!(err.contains("samples.parquet"), "{err}");
        }
    }
}

#[test]
fn dropped_writer_leaves_a_readable_incomplete_profile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.numalens");
    {
        let mut writer = ProfileWriter::create(&path, common::meta()).unwrap();
        for s in SynthSamples::new(SynthConfig::default()).take(100_000) {
            writer.push_sample(s).unwrap();
        }
        // Dropped without finish(), as on an error path in a recorder.
    }
    let profile = Profile::open(&path).unwrap();
    assert!(!profile.meta().completeness.complete);
    assert!(!profile.meta().completeness.reasons.is_empty());
    assert_eq!(read_samples(&path).unwrap(), 100_000);
}

#[test]
fn an_existing_profile_is_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path());
    let err = ProfileWriter::create(&path, common::meta())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("a profile already exists"), "{err}");
}

#[test]
fn a_recording_that_never_finished_says_how_to_recover_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.numalens");
    std::fs::create_dir_all(path.join(EVENTS_DIR)).unwrap();
    common::meta().write(&path.join("meta.json")).unwrap();
    let err = Profile::open(&path).unwrap_err().to_string();
    assert!(
        err.contains("not finished") && err.contains("numalens recover"),
        "{err}"
    );
    std::fs::remove_dir(path.join(EVENTS_DIR)).unwrap();
    let err = Profile::open(&path).unwrap_err().to_string();
    assert!(err.contains("nothing to recover"), "{err}");
}

#[test]
fn a_writer_replaces_an_unfinished_meta_but_never_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.numalens");
    std::fs::create_dir_all(&path).unwrap();
    common::meta().write(&path.join("meta.json")).unwrap();
    let writer = ProfileWriter::create(&path, common::meta()).unwrap();
    writer.finish(common::complete()).unwrap();
    assert!(Profile::open(&path).is_ok());
    let err = ProfileWriter::create(&path, common::meta())
        .err()
        .expect("a finished profile is never written over")
        .to_string();
    assert!(err.contains("a profile already exists"), "{err}");
}
