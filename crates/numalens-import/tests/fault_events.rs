//! Real recordings of page faults under two software events at once: the kernel counts a minor
//! fault in `page-faults` and again in `minor-faults`, as two samples; the profile has it once.

mod common;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use numalens_format::Profile;
use numalens_import::{ImportOptions, import};

/// `perf record -c 1 -d` of `dd` (a few hundred faults) with `events`.
fn record(dir: &Path, events: &[&str]) -> PathBuf {
    let data = dir.join(format!("{}.data", events.join("+")));
    let mut args: Vec<&OsStr> = vec!["record".as_ref(), "-q".as_ref()];
    for e in events {
        args.extend(["-e".as_ref(), OsStr::new(e)]);
    }
    args.extend(["-c", "1", "-d", "-o"].map(OsStr::new));
    args.push(data.as_os_str());
    args.extend(["dd", "if=/dev/zero", "of=/dev/null", "bs=4M", "count=4"].map(OsStr::new));
    common::perf(args);
    data
}

/// (tid, time, address) of `perf script`'s samples of `event`.
fn script_samples(data: &Path, event: &str) -> BTreeSet<(u32, u64, u64)> {
    common::perf_script(data, "event,tid,time,addr")
        .iter()
        .filter_map(|line| {
            // perf prints `tid time: event: addr` whatever the order asked.
            let f: Vec<&str> = line.split_whitespace().collect();
            (f[2].trim_end_matches(':') == event).then(|| {
                (
                    f[0].parse().unwrap(),
                    common::script_time_ns(f[1]),
                    u64::from_str_radix(f[3], 16).unwrap(),
                )
            })
        })
        .collect()
}

fn profile_faults(profile: &Path) -> BTreeSet<(u32, u64, u64)> {
    let rows = common::samples(profile);
    let set: BTreeSet<_> = rows.iter().map(|s| (s.tid, s.time_ns, s.address)).collect();
    assert_eq!(set.len(), rows.len(), "one row per fault");
    set
}

#[test]
fn page_faults_beside_minor_faults_are_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path(), &["page-faults", "minor-faults"]);
    let all = script_samples(&data, "page-faults");
    let minor = script_samples(&data, "minor-faults");
    assert!(all.len() > 100, "{} faults", all.len());
    assert!(minor.len() > 100, "{} minor faults", minor.len());

    let profile = dir.path().join("two.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    assert_eq!(imported.faults, all.len() as u64);
    assert_eq!(profile_faults(&profile), all, "the page-faults samples");
    let minor_event = imported
        .events
        .iter()
        .find(|e| e.name.contains("minor"))
        .unwrap();
    assert!(minor_event.counted_elsewhere);
    assert_eq!(minor_event.samples, minor.len() as u64);
    assert!(
        !imported
            .events
            .iter()
            .any(|e| e.name == "page-faults" && e.counted_elsewhere)
    );
    let meta = Profile::open(&profile).unwrap().meta().clone();
    let not_kept = &meta.backend.settings["fault_events_not_kept"];
    assert_eq!(not_kept, &serde_json::json!([minor_event.name]));
}

#[test]
fn minor_and_major_faults_are_both_kept() {
    // They never count the same fault: each is kept (dd's faults are all minor here).
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path(), &["minor-faults", "major-faults"]);
    let minor = script_samples(&data, "minor-faults");
    let major = script_samples(&data, "major-faults");
    let profile = dir.path().join("parts.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    assert!(imported.events.iter().all(|e| !e.counted_elsewhere));
    let both: BTreeSet<_> = minor.union(&major).copied().collect();
    assert_eq!(profile_faults(&profile), both);
}

#[test]
fn faults_in_user_and_in_kernel_mode_are_both_kept() {
    // `:u` and `:k` see different faults (dd's buffer is first touched inside `read`, in the
    // kernel): neither is counted elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path(), &["page-faults:u", "page-faults:k"]);
    let user = script_samples(&data, "page-faults:u");
    let kernel = script_samples(&data, "page-faults:k");
    assert!(
        !user.is_empty() && !kernel.is_empty(),
        "{} {}",
        user.len(),
        kernel.len()
    );
    let profile = dir.path().join("modes.numalens");
    let imported = import(&data, &profile, &ImportOptions { min_object: 4096 }).unwrap();
    assert!(imported.events.iter().all(|e| !e.counted_elsewhere));
    let both: BTreeSet<_> = user.union(&kernel).copied().collect();
    assert_eq!(profile_faults(&profile), both);
}
