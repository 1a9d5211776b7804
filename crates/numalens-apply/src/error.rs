//! Why a placement cannot start: each message says what to change.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The plan is for another machine.
    #[error("{0}")]
    Topology(String),
    /// The plan is for another build of the program.
    #[error(
        "the plan {plan} was made for another build of `{program}` (build id {planned}; this one is \
         {actual}): its allocation sites may have moved. Record this build and make a new plan, or \
         pass --force to apply the rules that still match"
    )]
    OtherBuild {
        plan: PathBuf,
        program: String,
        planned: String,
        actual: String,
    },
    /// `--pid`: the process cannot be placed.
    #[error("{0}")]
    Attach(String),
    #[error("cannot write the rules file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}
