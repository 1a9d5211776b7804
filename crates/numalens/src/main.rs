//! `numalens`: the command-line interface. Parsing and dispatch only; the work is in the
//! pipeline crates.

mod cli;
mod commands;
mod exit;

use std::process::ExitCode;

use clap::Parser;

/// Runs before Rust's start-up replaces closed standard descriptors with /dev/null, so that a
/// recorded program started without one sees it closed, as it would natively.
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STANDARD_FDS: extern "C" fn() =
    numalens_record::std_fds::note_closed_standard_fds;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => exit::report(&error),
    }
}
