//! Where an HTML report may be written: a new file, or an earlier numalens report, and never
//! inside a profile directory. `report --html` and `demo --html` both check here, before any
//! work, so a mistyped path costs nothing (the profile's own `meta.json`, a source file);
//! `export` checks its output directory against profiles here too.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::exit::UsageError;

/// The mark `numalens_report::html::render` puts in the head of every report.
const GENERATOR_MARK: &str = "<meta name=\"generator\" content=\"numalens";

/// How much of an existing file is read to find the mark (it is in the head).
const HEAD_BYTES: u64 = 4096;

/// Refuses (a usage error naming `option`) a target that is a directory, lies inside a profile
/// directory, or exists and is not an earlier numalens HTML report.
pub fn check(path: &Path, option: &str) -> Result<(), UsageError> {
    let shown = path.display();
    if path.is_dir() {
        return Err(UsageError(format!(
            "{option} {shown}: is a directory; give the name of the HTML file to write"
        )));
    }
    if let Some(profile) = enclosing_profile(path) {
        return Err(UsageError(format!(
            "{option} {shown}: is inside the profile directory {}, whose files only \
             `numalens record` writes; write the report outside it (e.g. {option} {}.html)",
            profile.display(),
            profile.with_extension("").display()
        )));
    }
    match path.symlink_metadata() {
        Err(_) => Ok(()),
        Ok(_) if is_numalens_report(path) => Ok(()),
        Ok(_) => Err(UsageError(format!(
            "{option} {shown}: exists and is not a numalens HTML report, so it is left as it \
             is; choose another {option} file (or remove this one first)"
        ))),
    }
}

/// The first profile directory among the directories that would hold `path`.
fn enclosing_profile(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    profile_at_or_above(absolute.parent()?)
}

/// `dir` if it is a profile directory, else the first of its ancestors that is one. Symbolic
/// links are resolved where the directories exist, so `link/x` is judged where it goes.
pub fn profile_at_or_above(dir: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(dir).ok()?;
    let existing = absolute.ancestors().find(|d| d.exists())?;
    let resolved = existing.canonicalize().ok()?;
    let rest = absolute.strip_prefix(existing).ok()?;
    resolved
        .join(rest)
        .ancestors()
        .find(|d| is_profile_dir(d))
        .map(Path::to_path_buf)
}

/// A directory `numalens record` wrote: its `meta.json` beside a table or the events directory.
fn is_profile_dir(dir: &Path) -> bool {
    dir.join("meta.json").is_file()
        && ["samples.parquet", "objects.parquet", ".events"]
            .iter()
            .any(|name| dir.join(name).exists())
}

fn is_numalens_report(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = Vec::new();
    if file.take(HEAD_BYTES).read_to_end(&mut head).is_err() {
        return false;
    }
    String::from_utf8_lossy(&head).contains(GENERATOR_MARK)
}
