//! Errors of the test bed. Guest failures carry the tail of the console log, because that is
//! where the reason (a kernel panic, a missing library, a hung scenario) shows.

use std::time::Duration;

/// Number of console lines kept in error messages.
pub const CONSOLE_TAIL_LINES: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("topology cannot be expressed as a QEMU guest: {0}")]
    Topology(String),
    #[error("missing host tool: {0}")]
    MissingTool(String),
    #[error("kernel: {0}")]
    Kernel(String),
    #[error("initramfs: {0}")]
    Initramfs(String),
    #[error("guest timed out after {timeout:?} and was killed; console tail:\n{console_tail}")]
    Timeout {
        timeout: Duration,
        console_tail: String,
    },
    #[error(
        "guest did not reach init within {deadline:?} in {attempts} boots and was killed; \
         console tail of the last boot:\n{console_tail}"
    )]
    BootHang {
        deadline: Duration,
        attempts: u32,
        console_tail: String,
    },
    #[error(
        "guest stopped without reporting an exit status ({reason}); console tail:\n{console_tail}"
    )]
    NoExitStatus {
        reason: String,
        console_tail: String,
    },
    #[error("result channel: {0}")]
    Framing(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}

/// The last `CONSOLE_TAIL_LINES` lines of a console log.
pub fn console_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.len().saturating_sub(CONSOLE_TAIL_LINES);
    lines[start..].join("\n")
}
