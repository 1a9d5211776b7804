// Each test binary uses a part of these.
#![allow(dead_code)]

//! What the import tests share: `perf script` as the independent decoder, and the profile's
//! samples.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use numalens_format::{Profile, Sample};

/// `perf ARGS…`, which must succeed; its standard output.
pub fn perf<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    let out = Command::new("perf")
        .args(args)
        .output()
        .expect("perf is installed (tests/install-deps)");
    assert!(
        out.status.success(),
        "perf failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `perf script` of `file` with `fields`, one line per sample.
pub fn perf_script(file: &Path, fields: &str) -> Vec<String> {
    let args = ["script", "--ns", "-F", fields, "-i"].map(OsStr::new);
    perf(args.into_iter().chain([file.as_os_str()]))
        .lines()
        .map(str::to_string)
        .collect()
}

/// `12345.000123456` (seconds with nanoseconds) as ns.
pub fn script_time_ns(text: &str) -> u64 {
    let text = text.trim_end_matches(':');
    let (s, ns) = text.split_once('.').expect("a time with a fraction");
    s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap()
}

/// The profile's samples with their absolute times (the file's clock).
pub fn samples(profile: &Path) -> Vec<Sample> {
    let p = Profile::open(profile).unwrap();
    let origin = p.meta().clock.origin_ns;
    let mut rows: Vec<Sample> = p.read_all::<Sample>().unwrap();
    for s in &mut rows {
        s.time_ns += origin;
    }
    rows
}
