//! Errors of the profile format. Every variant names the file and says what is wrong.

use std::path::PathBuf;

/// Why a profile could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: not a numalens profile (no meta.json); give the `NAME.numalens` directory that `numalens record` wrote"
    )]
    NotAProfile { path: PathBuf },
    #[error("{path}: {problem}")]
    Meta { path: PathBuf, problem: String },
    /// `meta.json` is the one written when the recording started: no table was ever finished.
    #[error("{}", unfinished_message(path, *recoverable))]
    Unfinished { path: PathBuf, recoverable: bool },
    #[error(
        "{path}: written in profile format {found}, but this numalens (v{tool}) reads format {supported}.x at most; upgrade numalens to read it"
    )]
    NewerVersion {
        path: PathBuf,
        found: String,
        supported: u32,
        tool: &'static str,
    },
    #[error(
        "{path}: table `{table}` is missing; the profile is incomplete or was not written by numalens"
    )]
    MissingTable { path: PathBuf, table: &'static str },
    #[error("{path}: {problem}")]
    Table { path: PathBuf, problem: String },
    #[error("{path}: column `{column}`: {problem}")]
    Column {
        path: PathBuf,
        column: String,
        problem: String,
    },
}

impl FormatError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FormatError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn table(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        FormatError::Table {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

fn unfinished_message(path: &std::path::Path, recoverable: bool) -> String {
    let dir = path.display();
    if recoverable {
        format!(
            "{dir}: this recording was not finished (the recorder was killed, or is still running): run `numalens recover {dir}`"
        )
    } else {
        format!(
            "{dir}: this recording was not finished and left nothing to recover from (its `.events` directory is gone); record the program again"
        )
    }
}

pub type Result<T, E = FormatError> = std::result::Result<T, E>;
