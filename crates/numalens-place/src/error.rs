//! Errors of planning and simulation, each saying what to change.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlaceError {
    #[error("unknown policy `{name}`; the policies are: {}", known.join(", "))]
    UnknownPolicy { name: String, known: Vec<String> },
    #[error(
        "the profile has first touches but no access counts, which `{policy}` needs: record with \
         `--backend inst` (a build with `numalens cc`), with `perf mem record` and `numalens \
         import` where the machine has precise sampling, or with the kernel's NUMA balancing on a \
         multi-node machine (its hint \
         faults are sampled accesses); `first-touch` and `interleave` work without counts"
    )]
    NoCounts { policy: String },
    #[error("the profile has no accesses: nothing to place (was the program's run empty?)")]
    NoAccesses,
    #[error("machine `{machine}` has no node with memory")]
    NoMemory { machine: String },
    #[error("{path}: {problem}")]
    Plan { path: PathBuf, problem: String },
    #[error(transparent)]
    Format(#[from] numalens_format::FormatError),
}

pub type Result<T, E = PlaceError> = std::result::Result<T, E>;
