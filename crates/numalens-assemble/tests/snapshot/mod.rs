//! Stable text dumps of a profile, compared with the stored snapshots under `tests/snapshots/`.
//! `UPDATE_SNAPSHOTS=1 cargo test -p numalens-assemble` writes them instead of comparing.

use std::fmt::Debug;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use numalens_assemble::Summary;
use numalens_format::{
    CodeLocation, Migration, Object, PageNodes, PageStat, Profile, Row, Sample, SiteFrame, Thread,
};

/// Fields of `meta.json` that say when and with which build the profile was written, not what
/// the recording holds.
const UNPINNED_META: [&str; 2] = ["numalens_version", "end_unix_ns"];

/// The profile at `dir` as text: its meta, the recorder's summary and every table, one row a
/// line in the order written. `recording` (the stored input) is written `<recording>`, so the
/// dump does not depend on where the sources are.
pub fn dump(dir: &Path, summary: &Summary, recording: &Path) -> String {
    let profile = Profile::open(dir).unwrap();
    let mut meta = serde_json::to_value(profile.meta()).unwrap();
    for field in UNPINNED_META {
        meta.as_object_mut().unwrap().remove(field);
    }
    let mut text = String::new();
    writeln!(
        text,
        "# meta\n{}",
        serde_json::to_string_pretty(&meta).unwrap()
    )
    .unwrap();
    writeln!(text, "# summary\n{summary:#?}").unwrap();
    table::<Sample>(&profile, &mut text);
    table::<Thread>(&profile, &mut text);
    table::<Object>(&profile, &mut text);
    table::<SiteFrame>(&profile, &mut text);
    table::<CodeLocation>(&profile, &mut text);
    table::<PageStat>(&profile, &mut text);
    table::<PageNodes>(&profile, &mut text);
    table::<Migration>(&profile, &mut text);
    text.replace(&recording.display().to_string(), "<recording>")
}

fn table<R: Row + Debug>(profile: &Profile, text: &mut String) {
    let rows = profile.read_all::<R>().unwrap();
    writeln!(text, "# {} ({} rows)", R::TABLE, rows.len()).unwrap();
    for row in rows {
        writeln!(text, "{row:?}").unwrap();
    }
}

/// Compares `text` with the snapshot `name`, or writes it when `UPDATE_SNAPSHOTS` is set.
pub fn check(name: &str, text: &str) {
    let path = snapshot_path(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; write it with UPDATE_SNAPSHOTS=1 cargo test -p numalens-assemble",
            path.display()
        )
    });
    if stored != text {
        let new = path.with_extension("new");
        std::fs::write(&new, text).unwrap();
        panic!(
            "{name}: the profile differs from its snapshot {}; the new one is in {} (`diff` them). \
             If the change is meant, run UPDATE_SNAPSHOTS=1 cargo test -p numalens-assemble",
            path.display(),
            new.display()
        );
    }
}

fn snapshot_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"))
}
