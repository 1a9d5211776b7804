//! Writing a workload's source out and compiling it with a given compiler command.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::{HEADERS, Workload};

/// The line (1-based) of `source` carrying the `/* @object NAME */` marker: the allocating line
/// of a heap or mmap object, which the allocation site's line must equal.
pub fn marker_line(workload: &str, source: &str, object: &str) -> Result<u32> {
    let marker = format!("/* @object {object} */");
    let lines: Vec<usize> = source
        .lines()
        .enumerate()
        .filter(|(_, line)| line.contains(&marker))
        .map(|(i, _)| i + 1)
        .collect();
    match lines.as_slice() {
        [line] => Ok(*line as u32),
        [] => Err(Error::Marker {
            workload: workload.into(),
            message: format!("no line carries the marker {marker}"),
        }),
        many => Err(Error::Marker {
            workload: workload.into(),
            message: format!("the marker {marker} is on several lines: {many:?}"),
        }),
    }
}

/// Writes the workload's source and headers into `out_dir` and compiles it with `compiler`
/// (e.g. `["gcc"]` or `["/path/numalens", "cc"]`) and the manifest's flags. Returns the
/// executable's path, `out_dir/<name>`.
pub fn build(workload: &Workload, compiler: &[OsString], out_dir: &Path) -> Result<PathBuf> {
    let manifest = workload.manifest()?;
    let (program, compiler_args) = compiler.split_first().ok_or_else(|| Error::BadArgs {
        workload: workload.name.into(),
        message: "the compiler command is empty (give e.g. [\"gcc\"])".into(),
    })?;
    fs::create_dir_all(out_dir).map_err(|source| io(out_dir, source))?;
    let source = out_dir.join(&manifest.source);
    for (name, text) in HEADERS
        .iter()
        .chain([&(manifest.source.as_str(), workload.source)])
    {
        let path = out_dir.join(name);
        fs::write(&path, text).map_err(|source| io(&path, source))?;
    }
    let exe = out_dir.join(workload.name);
    let mut command = Command::new(program);
    command
        .args(compiler_args)
        .args(&manifest.flags)
        .arg("-o")
        .arg(&exe)
        .arg(&source);
    let shown = format!("{command:?}");
    let output = command.output().map_err(|source| Error::CompilerMissing {
        command: program.to_string_lossy().into(),
        source,
    })?;
    if !output.status.success() {
        return Err(Error::BuildFailed {
            workload: workload.name.into(),
            command: shown,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into(),
        });
    }
    Ok(exe)
}

/// The checksum of a workload's result line (`<name> checksum=<hex> …`).
pub fn parse_checksum(stdout: &str) -> Option<u64> {
    stdout
        .split_whitespace()
        .find_map(|word| word.strip_prefix("checksum="))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.into(),
        source,
    }
}
