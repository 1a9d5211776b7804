//! The migrations table is read and checked when a profile is analysed: a damaged one is an
//! error naming the file, never silently ignored.

mod common;

use std::path::PathBuf;

use numalens_analyze::{Options, analyze};
use numalens_format::{Completeness, Migration, Profile, ProfileWriter};

fn fixture(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("f.numalens");
    common::write_fixture(&path);
    path
}

fn analyse(path: &std::path::Path) -> Result<(), String> {
    let profile = Profile::open(path).map_err(|e| e.to_string())?;
    analyze(&profile, &Options::default())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn a_truncated_migrations_table_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(&dir);
    analyse(&path).unwrap();
    let table = path.join("migrations.parquet");
    let bytes = std::fs::read(&table).unwrap();
    std::fs::write(&table, &bytes[..bytes.len() / 2]).unwrap();
    let e = analyse(&path).unwrap_err();
    assert!(e.contains("migrations.parquet"), "{e}");
}

fn migration(start: u64, len: u64, to_node: u32) -> Migration {
    Migration {
        time_ns: 5,
        pid: common::PID,
        start,
        len,
        from_node: Some(0),
        to_node,
        policy: "test".into(),
        reason: String::new(),
        result: "ok".into(),
    }
}

/// The profile of `rows` as its only migrations, and what reading them says.
fn read_migrations(rows: Vec<Migration>) -> Result<Vec<Migration>, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.numalens");
    let mut meta = common::faults_meta(&["./app"]);
    meta.topology = Some(numalens_topology::presets::preset("machine-a").unwrap());
    let mut w = ProfileWriter::create(&path, meta).unwrap();
    for row in rows {
        w.push_migration(row).unwrap();
    }
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: vec![],
    })
    .unwrap();
    let profile = Profile::open(&path).unwrap();
    profile.read_migrations().map_err(|e| e.to_string())
}

#[test]
fn migration_rows_are_checked() {
    let good = migration(0x1000, 0x2000, 1);
    assert_eq!(read_migrations(vec![good.clone()]).unwrap(), vec![good]);
    let cases = [
        (migration(0x1000, 0, 1), "`len` is 0"),
        (migration(u64::MAX - 10, 0x1000, 1), "runs past the end"),
        (migration(0x1000, 0x1000, 77), "node 77"),
    ];
    for (row, says) in cases {
        let e = read_migrations(vec![migration(0, 4096, 1), row]).unwrap_err();
        assert!(
            e.contains("migrations.parquet") && e.contains("row 1") && e.contains(says),
            "{says}: {e}"
        );
    }
}
