//! `numalens cc` with a language given by `-x`, as build systems and quick experiments use it:
//! the program is instrumented, whether its source is a file or standard input (`-x c -`), and
//! `record --backend inst` counts it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const SOURCE: &str = "#include <stdlib.h>\n\
    #include <string.h>\n\
    int main(void) { char *p = malloc(1 << 20); memset(p, 1, 1 << 20); return p[4095] - 1; }\n";

/// `numalens cc -O1 ARGS… -o EXE` with `SOURCE` on its standard input; true when it built.
fn numalens_cc(args: &[&str], exe: &Path) -> bool {
    let mut cc = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .arg("cc")
        .arg("-O1")
        .args(args)
        .arg("-o")
        .arg(exe)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("numalens cc runs");
    cc.stdin
        .take()
        .unwrap()
        .write_all(SOURCE.as_bytes())
        .unwrap();
    cc.wait().unwrap().success()
}

fn records_with_inst(dir: &Path, exe: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(["record", "--backend", "inst", "-o"])
        .arg(dir.join("p.numalens"))
        .arg(exe)
        .env("NO_COLOR", "1")
        .output()
        .expect("numalens record runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_source_on_stdin_is_instrumented() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("from_stdin");
    assert!(
        numalens_cc(&["-x", "c", "-"], &exe),
        "numalens cc builds it"
    );
    records_with_inst(dir.path(), &exe);
}

#[test]
fn a_language_given_with_x_applies_to_the_users_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("prog.c");
    std::fs::write(&source, SOURCE).unwrap();
    let exe = dir.path().join("prog");
    assert!(
        numalens_cc(&["-x", "c", source.to_str().unwrap()], &exe),
        "numalens cc builds it (the runtime's archive is not compiled as C)"
    );
    records_with_inst(dir.path(), &exe);
}
