//! The JSON shape of the report model, as `numalens report --json` prints it, on the fixture.
//! A change to this snapshot is a change to the documented model (docs/REPORT.md).

mod common;

use numalens_analyze::{Options, analyze};
use numalens_format::Profile;

#[test]
fn report_model_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.numalens");
    common::write_fixture(&path);
    let mut model = analyze(&Profile::open(&path).unwrap(), &Options::default()).unwrap();
    // What changes from run to run or with the format's minor version, not with the model.
    let p = &mut model.profile;
    p.path = "fixture.numalens".into();
    p.end_unix_ns = Some(p.start_unix_ns + 1_000_000);
    p.format_version = "1.x".into();
    p.numalens_version = "x.y.z".into();
    p.table_rows.retain(|_, rows| *rows > 0);
    insta::assert_json_snapshot!(model);
}

/// The model of each stored fixture profile (tests/fixtures, written by
/// `cargo run -p numalens-analyze --example fixture_profiles -- tests/fixtures`).
#[test]
fn fixture_profile_models() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    for name in ["master-init", "stencil", "many-small"] {
        let path = std::path::Path::new(dir).join(format!("{name}.numalens"));
        let options = Options {
            top: 3,
            ..Options::default()
        };
        let mut model = analyze(&Profile::open(&path).unwrap(), &options).unwrap();
        let p = &mut model.profile;
        p.path = format!("{name}.numalens");
        p.end_unix_ns = Some(p.start_unix_ns + 1_000_000);
        p.numalens_version = "x.y.z".into();
        insta::assert_json_snapshot!(format!("fixture_{name}"), model);
    }
}
