//! One module per subcommand.

mod demo;
mod export;
mod html_target;
mod import;
mod plan;
mod record;
mod recover;
mod report;
mod run;
mod run_online;
mod simulate;
mod topology;
mod whatif_setup;
mod wrapper;

use crate::cli::{Cli, Command};

pub fn run(cli: Cli) -> anyhow::Result<()> {
    // A run killed with its guard left the kernel's NUMA balancing switched off: put it back.
    let state = numalens_apply::balancing::default_state_dir();
    if let Some(said) = numalens_apply::balancing::repair_stale(&state) {
        eprintln!("numalens: {said}");
    }
    match cli.command {
        Command::Topology(args) => topology::run(args),
        Command::Record(args) => record::run(args),
        Command::Report(args) => report::run(args),
        Command::Recover(args) => recover::run(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Run(args) => run::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Cc(args) => wrapper::run(wrapper::Language::C, args),
        Command::Cxx(args) => wrapper::run(wrapper::Language::Cxx, args),
        Command::Fortran(args) => wrapper::run(wrapper::Language::Fortran, args),
    }
}
