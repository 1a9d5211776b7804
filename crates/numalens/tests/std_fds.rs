//! A program started with a standard descriptor closed sees it closed under `numalens record`
//! too: `cat <&-` fails to read as it does natively, `ls >&-` fails to write, and neither reads
//! or writes something else in its place.

use std::process::{Command, Output};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `sh -c SCRIPT` with `$0` the numalens binary, `$1` a profile path in a fresh directory.
fn shell(script: &str) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_numalens"))
        .arg(dir.path().join("p.numalens"))
        .env("NO_COLOR", "1")
        .output()
        .expect("sh runs");
    (out, dir)
}

/// Runs `command` with `redirect` natively and recorded: same exit status, same complaint.
fn same_as_native(command: &str, redirect: &str) {
    let (native, _) = shell(&format!("exec {command} {redirect}"));
    assert_ne!(
        native.status.code(),
        Some(0),
        "{command} {redirect} fails natively"
    );
    let (recorded, _) = shell(&format!(
        "exec \"$0\" record -o \"$1\" {command} {redirect}"
    ));
    assert_eq!(
        recorded.status.code(),
        native.status.code(),
        "{command} {redirect}: native stderr {}, recorded stderr {}",
        text(&native.stderr),
        text(&recorded.stderr)
    );
    assert!(
        text(&recorded.stderr).contains("Bad file descriptor"),
        "{command} {redirect}: {}",
        text(&recorded.stderr)
    );
}

#[test]
#[ignore = "fails: the recorder's Rust start-up opens /dev/null on a closed standard descriptor and the program inherits it"]
fn a_closed_stdin_stays_closed() {
    same_as_native("cat", "<&-");
}

#[test]
#[ignore = "fails: as for stdin, and the runtime's log would then take descriptor 1"]
fn a_closed_stdout_stays_closed() {
    same_as_native("ls /", ">&-");
}
