//! Building the test programs of `tests/inst_progs` with the wrappers and finding their marked
//! objects in a profile, shared by the `inst` tests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use numalens_format::{Object, Profile, Sample, SampleKind, SiteFrame};

/// A test program's source.
pub fn prog(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/inst_progs")
        .join(name)
}

/// The line holding `@object TAG` in a test program.
pub fn marker(source: &Path, tag: &str) -> u32 {
    let text = std::fs::read_to_string(source).unwrap();
    let needle = format!("@object {tag}");
    text.lines()
        .position(|l| l.contains(&needle))
        .expect("marker") as u32
        + 1
}

/// The objects allocated at `source:line` (any frame of their site).
pub fn allocated_at<'a>(
    objects: &'a [Object],
    frames: &[SiteFrame],
    source: &str,
    line: u32,
) -> Vec<&'a Object> {
    let sites: Vec<u64> = frames
        .iter()
        .filter(|f| f.line == Some(line) && f.file.as_deref().is_some_and(|p| p.ends_with(source)))
        .map(|f| f.site_key)
        .collect();
    objects
        .iter()
        .filter(|o| o.site_key.is_some_and(|k| sites.contains(&k)))
        .collect()
}

/// Builds `source` with `numalens WRAPPER` (cc, c++, fortran); `compiler` overrides the real
/// compiler (e.g. clang).
pub fn build_with(
    wrapper: &str,
    compiler: Option<&str>,
    source: &Path,
    out: &Path,
    extra: &[&str],
) -> PathBuf {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_numalens"));
    cmd.arg(wrapper)
        .args(["-O2", "-pthread"])
        .arg(source)
        .arg("-o")
        .arg(out)
        .args(extra);
    if let Some(c) = compiler {
        cmd.env("NUMALENS_CC", c);
    }
    let built = cmd.output().expect("run the wrapper");
    assert!(
        built.status.success(),
        "numalens {wrapper} {} failed (missing compiler? `make deps` installs gfortran and clang): {}",
        source.display(),
        super::common::text(&built.stderr)
    );
    out.to_path_buf()
}

/// The object allocated at the line of `source` marked `@object TAG`.
pub fn object_at(profile: &Profile, source: &str, tag: &str) -> u64 {
    let objects = profile.read_all::<Object>().unwrap();
    let frames = profile.read_all::<SiteFrame>().unwrap();
    let line = marker(&prog(source), tag);
    allocated_at(&objects, &frames, source, line)
        .first()
        .unwrap_or_else(|| panic!("no object allocated at {source}:{line}"))
        .object_id
}

/// Weighted load and store samples of an object.
pub fn weighted(profile: &Profile, object: u64) -> HashMap<SampleKind, u64> {
    let mut by_kind = HashMap::new();
    for s in profile.read_all::<Sample>().unwrap() {
        if s.object_id == Some(object) {
            *by_kind.entry(s.kind).or_default() += u64::from(s.weight);
        }
    }
    by_kind
}
