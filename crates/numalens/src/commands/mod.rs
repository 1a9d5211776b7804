//! One module per subcommand.

mod demo;
mod topology;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Topology(args) => topology::run(args),
        Command::Demo(args) => demo::run(args),
    }
}
