//! The seeds and earlier findings of the `meta_json` and `profile_table` fuzz targets
//! (`fuzz/seeds/`), read the way the targets read them: each finding stays fixed, and the seeds
//! still read.

mod common;
#[path = "../../../fuzz/seed_inputs.rs"]
mod seeds;

use numalens_format::*;
use seeds::seed_inputs;

#[test]
fn meta_json_inputs_read_without_panicking() {
    for path in seed_inputs("meta_json") {
        let bytes = std::fs::read(&path).unwrap();
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = Meta::from_json_str(text, &path);
        }
    }
}

/// The first byte of an input picks the table, the rest is its file.
#[test]
fn profile_table_inputs_read_without_panicking() {
    let mut read = 0;
    for path in seed_inputs("profile_table") {
        let bytes = std::fs::read(&path).unwrap();
        let Some((&which, file)) = bytes.split_first() else {
            continue;
        };
        let dir = tempfile::tempdir().unwrap();
        // A finished profile's meta.json: one that no writer finished is an unfinished recording.
        let mut meta = common::meta();
        meta.completeness = common::complete();
        meta.write(&dir.path().join("meta.json")).unwrap();
        let profile = Profile::open(dir.path()).unwrap();
        let ok = match which % 8 {
            0 => read_table::<Sample>(&profile, file),
            1 => read_table::<Thread>(&profile, file),
            2 => read_table::<SiteFrame>(&profile, file),
            3 => read_table::<Object>(&profile, file),
            4 => read_table::<PageStat>(&profile, file),
            5 => read_table::<Migration>(&profile, file),
            6 => read_table::<PageNodes>(&profile, file),
            _ => read_table::<CodeLocation>(&profile, file),
        };
        read += ok as usize;
        // Inputs on which a Parquet decoder panics: the reader catches the panic and reports
        // the table as corrupted.
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(
            !name.starts_with("decoder-panic-") || !ok,
            "{name} read as a sound table"
        );
        // A page header that declares hundreds of megabytes: refused before the decoder sizes
        // (and fills) a buffer by it.
        if name.starts_with("page-reserve-") {
            let e = profile.read_all::<Object>().unwrap_err().to_string();
            assert!(
                which % 8 == 3 && e.contains("bytes uncompressed from"),
                "{name}: {e}"
            );
        }
    }
    // The seeds cut from real profiles are whole tables; they read.
    assert!(read > 0);
}

fn read_table<R: Row>(profile: &Profile, file: &[u8]) -> bool {
    std::fs::write(profile.table_path::<R>(), file).unwrap();
    let _ = profile.table_shape::<R>();
    let columns: Vec<&str> = R::COLUMNS.iter().take(3).map(|c| c.name).collect();
    let _ = profile.for_each_batch_parallel::<R, _>(&columns, 2, |_| Ok(()));
    profile.read_all::<R>().is_ok()
}
