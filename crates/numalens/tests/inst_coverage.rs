//! What exact counts cannot see is said: a stack array the compiler kept local is first touched
//! (a fault) but never counted, and the report's coverage names it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{numalens, text};
use serde_json::Value;

#[test]
fn pages_touched_but_never_counted_are_named_in_the_coverage() {
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/inst_progs/local_array.c");
    let exe = dir.path().join("local_array");
    let built = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["cc", "-O2", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));
    let profile = dir.path().join("p.numalens");
    let (p, e) = (profile.to_str().unwrap(), exe.to_str().unwrap());
    let run = numalens(&[
        "record",
        "--backend",
        "inst",
        "--inst-mode",
        "exact",
        "-o",
        p,
        e,
    ]);
    assert!(run.status.success(), "{}", text(&run.stderr));

    let json: Value = serde_json::from_slice(&numalens(&["report", "--json", p]).stdout).unwrap();
    let coverage = &json["analysis"]["coverage"];
    let uncounted = coverage["uncounted"].as_array().unwrap();
    let pages_of = |name: &str| {
        uncounted
            .iter()
            .find(|o| o["name"] == name)
            .and_then(|o| o["pages"].as_u64())
            .unwrap_or(0)
    };
    // 2 MiB is 512 pages; the page holding the array's end may also hold counted frames.
    for stack in ["stack[T1]", "stack[T2]"] {
        assert!((500..=520).contains(&pages_of(stack)), "{coverage:#}");
    }
    // The shared array is counted on every page its workers touched.
    assert!(
        uncounted
            .iter()
            .all(|o| !o["name"].as_str().unwrap().contains("local_array.c")),
        "{coverage:#}"
    );
    let touched = coverage["touched_pages"].as_u64().unwrap();
    assert!(touched >= 2048, "{coverage:#}");
    let report = text(&numalens(&["report", p]).stdout);
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("coverage"));
    assert!(line.is_some_and(|l| l.contains("stack[T1] 5")), "{report}");
}
