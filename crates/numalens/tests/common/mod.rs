//! Running the `numalens` binary as a user runs it, shared by the CLI tests.

use std::process::{Command, Output};

/// `numalens ARGS…` without colours, to completion.
pub fn numalens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numalens"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run numalens")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
