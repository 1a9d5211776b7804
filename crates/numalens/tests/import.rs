//! `numalens import` and `record --backend pmu` as a user meets them: a real perf recording
//! imported and reported, files that are not perf recordings refused with what to do, and the
//! `pmu` backend saying what this machine lacks.

mod common;

use std::process::Command;

use common::{numalens, text};

#[test]
fn a_perf_recording_is_imported_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    let out = Command::new("perf")
        .args(["record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", "head -c 4000000 /dev/zero | sort >/dev/null"])
        .output()
        .expect("perf is installed (tests/install-deps)");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let profile = dir.path().join("sh.numalens");
    let imported = numalens(&["import", data.to_str().unwrap(), "-o", profile.to_str().unwrap()]);
    let said = text(&imported.stderr);
    assert!(imported.status.success(), "{said}");
    assert!(said.contains("event page-faults:"), "{said}");
    assert!(said.contains("profile written to"), "{said}");
    // The report reads it; page faults alone say what they cannot tell.
    let report = numalens(&["report", profile.to_str().unwrap()]);
    let shown = text(&report.stdout);
    assert!(report.status.success(), "{}", text(&report.stderr));
    assert!(shown.contains("backend     faults"), "{shown}");
    assert!(shown.contains("What this profile cannot tell"), "{shown}");
    // The same output again is refused rather than overwritten.
    let again = numalens(&["import", data.to_str().unwrap(), "-o", profile.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("exists"), "{}", text(&again.stderr));
}

#[test]
fn files_that_cannot_be_imported_are_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let missing = numalens(&["import", &out("none.data"), "-o", &out("a.numalens")]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("cannot open"), "{}", text(&missing.stderr));

    std::fs::write(dir.path().join("text.data"), "not a recording\n").unwrap();
    let text_file = numalens(&["import", &out("text.data"), "-o", &out("b.numalens")]);
    assert_eq!(text_file.status.code(), Some(2));
    assert!(
        text(&text_file.stderr).contains("is not a perf.data file"),
        "{}",
        text(&text_file.stderr)
    );

    // A recording without data addresses (cpu-clock without -d): nothing to place.
    let data = dir.path().join("clock.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o"])
        .arg(&data)
        .args(["--", "sh", "-c", "head -c 1000000 /dev/zero | sort >/dev/null"])
        .output()
        .unwrap();
    assert!(rec.status.success(), "{}", text(&rec.stderr));
    let no_address = numalens(&["import", data.to_str().unwrap(), "-o", &out("c.numalens")]);
    assert_eq!(no_address.status.code(), Some(2));
    let said = text(&no_address.stderr);
    assert!(said.contains("no sample in the file has a data address"), "{said}");
    assert!(said.contains("cpu-clock"), "{said}");
    assert!(!dir.path().join("c.numalens").exists());
}

#[test]
fn the_pmu_backend_says_what_this_machine_offers() {
    let run = numalens(&["record", "--backend", "pmu", "--", "true"]);
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    match numalens_record::pmu::host() {
        Err(_) => {
            assert!(
                said.contains("no hardware PMU") || said.contains("no precise memory event"),
                "{said}"
            );
            assert!(said.contains("--backend faults"), "{said}");
        }
        Ok(events) => {
            assert!(said.contains(&events[0].name()), "{said}");
            assert!(said.contains("numalens import"), "{said}");
        }
    }
}
