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

/// `SOURCE` built by `numalens cc -x c -` as `dir/name`.
fn built_from_stdin(dir: &Path, name: &str) -> std::path::PathBuf {
    let exe = dir.join(name);
    assert!(
        numalens_cc(&["-x", "c", "-"], &exe),
        "numalens cc builds it"
    );
    exe
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
    let exe = built_from_stdin(dir.path(), "from_stdin");
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

/// `numalens record PROGRAM` with the default backend, the profile's backend and the stderr.
fn record_by_default(dir: &Path, exe: &Path, name: &str) -> (String, String) {
    let profile = dir.join(name);
    let out = record_default_with(dir, exe, name, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(profile.join("meta.json")).unwrap()).unwrap();
    (
        meta["backend"]["name"].as_str().unwrap().to_string(),
        stderr,
    )
}

#[test]
fn the_default_backend_counts_the_accesses_of_a_build_with_numalens_cc() {
    let dir = tempfile::tempdir().unwrap();
    let exe = built_from_stdin(dir.path(), "built");
    let (backend, stderr) = record_by_default(dir.path(), &exe, "built.numalens");
    assert_eq!(backend, "inst", "{stderr}");
    assert!(stderr.contains("is built with `numalens cc`"), "{stderr}");
    // The same program built with plain cc: first touches only, and nothing said about it.
    let plain = dir.path().join("plain");
    let mut cc = Command::new("cc")
        .args(["-O1", "-x", "c", "-", "-o"])
        .arg(&plain)
        .stdin(Stdio::piped())
        .spawn()
        .expect("cc runs");
    cc.stdin
        .take()
        .unwrap()
        .write_all(SOURCE.as_bytes())
        .unwrap();
    assert!(cc.wait().unwrap().success());
    let (backend, stderr) = record_by_default(dir.path(), &plain, "plain.numalens");
    assert_eq!(backend, "faults", "{stderr}");
    assert!(!stderr.contains("numalens cc"), "{stderr}");
}

/// `numalens record ARGS… -o DIR/NAME EXE` with the default backend.
fn record_default_with(dir: &Path, exe: &Path, name: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_numalens"))
        .arg("record")
        .args(args)
        .arg("-o")
        .arg(dir.join(name))
        .arg(exe)
        .env("NO_COLOR", "1")
        .output()
        .expect("numalens record runs")
}

#[test]
fn the_default_backend_takes_inst_settings_for_a_build_with_numalens_cc_only() {
    let dir = tempfile::tempdir().unwrap();
    let exe = built_from_stdin(dir.path(), "built");
    let settings = ["--inst-mode", "sampled", "--sample-every", "64"];
    let out = record_default_with(dir.path(), &exe, "built.numalens", &settings);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("built.numalens/meta.json")).unwrap(),
    )
    .unwrap();
    let backend = &meta["backend"];
    assert_eq!(backend["name"], "inst", "{meta}");
    assert_eq!(backend["settings"]["inst_mode"], "sampled", "{meta}");
    assert_eq!(backend["settings"]["sample_every"], 64, "{meta}");
    // A plain build: the settings cannot apply, and the error says why and what to change.
    let plain = dir.path().join("plain");
    std::fs::copy("/bin/true", &plain).unwrap();
    let out = record_default_with(dir.path(), &plain, "plain.numalens", &settings);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("plain is not one. Rebuild it with the compiler wrappers")
            && stderr.contains("; or leave them out"),
        "{stderr}"
    );
    assert!(!dir.path().join("plain.numalens").exists());
}
