//! Exit statuses: 2 when the command line must change, 1 when the work failed.

use std::fmt;
use std::process::ExitCode;

/// An error in what the user asked for (an unknown preset, conflicting options): exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Prints the error chain on stderr and picks the exit status.
pub fn report(error: &anyhow::Error) -> ExitCode {
    eprintln!("numalens: error: {error:#}");
    if error.downcast_ref::<UsageError>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
