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
    if let Some(exit) = error.downcast_ref::<ExitWith>() {
        if !exit.message.is_empty() {
            eprintln!("numalens: error: {}", exit.message);
        }
        return ExitCode::from(exit.status.clamp(0, 255) as u8);
    }
    eprintln!("numalens: error: {error:#}");
    if error.downcast_ref::<UsageError>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}

/// Exit with a given status (the profiled program's, or the shell's 126/127); an empty message
/// prints nothing.
#[derive(Debug)]
pub struct ExitWith {
    pub status: i32,
    pub message: String,
}

impl fmt::Display for ExitWith {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitWith {}
