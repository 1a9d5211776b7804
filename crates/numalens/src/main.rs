//! `numalens`: the command-line interface. Parsing and dispatch only; the work is in the
//! pipeline crates.

mod cli;
mod commands;
mod exit;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => exit::report(&error),
    }
}
