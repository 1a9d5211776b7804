//! What can go wrong, each error saying what to change.

use std::path::PathBuf;

/// An error of the workload suite: a bad manifest, argument or formula, or a failed build.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("no workload named '{name}' (the workloads are: {known})")]
    UnknownWorkload { name: String, known: String },
    #[error("workloads/{workload}.toml: {message}")]
    Manifest { workload: String, message: String },
    #[error("workloads/{workload}.toml: {field} of '{object}' = \"{formula}\": {message}")]
    Formula {
        workload: String,
        object: String,
        field: &'static str,
        formula: String,
        message: String,
    },
    #[error("{workload}: no argument '{name}' (its arguments are: {known})")]
    UnknownArg {
        workload: String,
        name: String,
        known: String,
    },
    #[error("{workload}: {message}")]
    BadArgs { workload: String, message: String },
    #[error("{workload}.c: {message}")]
    Marker { workload: String, message: String },
    #[error(
        "cannot run the compiler '{command}': {source} (install gcc, or pass another compiler)"
    )]
    CompilerMissing {
        command: String,
        source: std::io::Error,
    },
    #[error("building {workload} failed ({status}): {command}\n{stderr}")]
    BuildFailed {
        workload: String,
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
