//! A profile of an older minor version (without the columns and tables added since) still reads:
//! added optional columns read as missing values, added tables as empty.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use numalens_format::synth::{SynthConfig, SynthSamples};
use numalens_format::*;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn profile_with_samples(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("v.numalens");
    let samples: Vec<Sample> = SynthSamples::new(SynthConfig::default())
        .take(5_000)
        .collect();
    common::write_samples(&path, &samples);
    path
}

/// Rewrites `table` without `column`, as a writer of an older minor version would have.
fn drop_column(path: &Path, column: &str) {
    let file = File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let schema = batches[0].schema();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|i| schema.field(*i).name() != column)
        .collect();
    let projected = Arc::new(schema.project(&keep).unwrap());
    let mut writer = ArrowWriter::try_new(File::create(path).unwrap(), projected, None).unwrap();
    for batch in batches {
        writer.write(&batch.project(&keep).unwrap()).unwrap();
    }
    writer.close().unwrap();
}

fn set_version(profile: &Path, version: &str) {
    let meta_path = profile.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta_path).unwrap()).unwrap();
    meta["format_version"] = version.into();
    std::fs::write(&meta_path, serde_json::to_string(&meta).unwrap()).unwrap();
}

#[test]
fn a_1_0_profile_reads_with_added_columns_missing_and_added_tables_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = profile_with_samples(dir.path());
    let profile = Profile::open(&path).unwrap();
    drop_column(&profile.table_path::<Sample>(), "page_size");
    std::fs::remove_file(profile.table_path::<CodeLocation>()).unwrap();
    set_version(&path, "1.0");

    let profile = Profile::open(&path).unwrap();
    let samples = profile.read_all::<Sample>().unwrap();
    assert_eq!(samples.len(), 5_000);
    assert!(samples.iter().all(|s| s.page_size.is_none()));
    assert!(samples.iter().all(|s| s.ip.is_some()));
    assert!(profile.read_all::<CodeLocation>().unwrap().is_empty());
    assert_eq!(profile.table_shape::<CodeLocation>().unwrap(), (0, 0));
}

#[test]
fn a_current_profile_missing_a_table_is_an_error_and_required_columns_stay_required() {
    let dir = tempfile::tempdir().unwrap();
    let path = profile_with_samples(dir.path());
    let profile = Profile::open(&path).unwrap();
    std::fs::remove_file(profile.table_path::<CodeLocation>()).unwrap();
    let err = profile.read_all::<CodeLocation>().unwrap_err().to_string();
    assert!(err.contains("table `code_locations` is missing"), "{err}");

    drop_column(&profile.table_path::<Sample>(), "tid");
    let err = profile.read_all::<Sample>().unwrap_err().to_string();
    assert!(err.contains("tid") && err.contains("is missing"), "{err}");
}
