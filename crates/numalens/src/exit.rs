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
    eprintln!("numalens: error: {}", message(error));
    if error.downcast_ref::<UsageError>().is_some() {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text the message before it
/// already includes (library errors often print their source in their own message).
fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        /// Like the format crate's errors: the source in the message and as the source.
        #[derive(Debug)]
        struct Includes(std::io::Error);
        impl fmt::Display for Includes {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "meta.json: {}", self.0)
            }
        }
        impl std::error::Error for Includes {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let denied = || std::io::Error::from_raw_os_error(libc::EACCES);
        let error = anyhow::Error::new(Includes(denied()));
        let text = message(&error);
        assert_eq!(text.matches("Permission denied").count(), 1, "{text}");
        let wrapped = anyhow::Error::new(denied()).context("reading meta.json");
        assert_eq!(
            message(&wrapped),
            format!("reading meta.json: {}", denied())
        );
    }
}
