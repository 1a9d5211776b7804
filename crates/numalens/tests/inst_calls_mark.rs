//! A program whose hooks stayed calls says so where the user looks: at record time and in the
//! report's header, with the reason its link recorded; one with inlined hooks says nothing.

mod common;

use std::path::Path;
use std::process::Command;

use common::{numalens, text};

const SOURCE: &str = "#include <stdlib.h>\n#include <string.h>\n\
    int main(void) { char *p = malloc(1 << 20); memset(p, 1, 1 << 20); return p[4095] - 1; }\n";

/// Builds `SOURCE` with `numalens cc`, `NUMALENS_INST_INLINE` set to `inline`.
fn build(dir: &Path, name: &str, inline: &str) -> String {
    let source = dir.join("main.c");
    std::fs::write(&source, SOURCE).unwrap();
    let exe = dir.join(name);
    let built = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["cc", "-O1", "-o"])
        .arg(&exe)
        .arg(&source)
        .env("NUMALENS_INST_INLINE", inline)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built.stderr));
    exe.to_str().unwrap().to_string()
}

/// (record's stderr, the report's text) of `exe`.
fn record_and_report(dir: &Path, exe: &str) -> (String, String) {
    let profile = dir.join(format!("{}.numalens", Path::new(exe).display()));
    let p = profile.to_str().unwrap();
    let run = numalens(&["record", "--backend", "inst", "-o", p, exe]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    (text(&run.stderr), text(&numalens(&["report", p]).stdout))
}

#[test]
fn hooks_left_as_calls_are_said_at_record_time_and_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let calls = build(dir.path(), "calls", "0");
    // Stripping keeps the mark: it is an allocated section, not a symbol.
    let stripped = format!("{calls}.stripped");
    assert!(
        Command::new("strip")
            .args(["-o", &stripped, &calls])
            .status()
            .unwrap()
            .success()
    );
    let (stderr, report) = record_and_report(dir.path(), &stripped);
    let said = "without inlined hooks (NUMALENS_INST_INLINE turned inlined hooks off)";
    assert!(stderr.contains(said), "{stderr}");
    let header: Vec<&str> = report.lines().take(6).collect();
    assert!(
        header.iter().any(|l| l.trim_start().starts_with("hooks")
            && l.contains("calls, not inlined: NUMALENS_INST_INLINE")),
        "{report}"
    );

    // gcc's plugin (installed by tests/install-deps) inlines them: nothing to say.
    let inlined = build(dir.path(), "inlined", "1");
    let (stderr, report) = record_and_report(dir.path(), &inlined);
    assert!(!stderr.contains("inlined hooks"), "{stderr}");
    assert!(!report.contains("not inlined"), "{report}");
}
