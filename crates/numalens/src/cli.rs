//! Command-line definitions (clap derive). Options are turned into plain values by the commands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// numalens: where a program's memory accesses go on a NUMA machine, what is wrong with that
/// placement, and how to fix it.
#[derive(Debug, Parser)]
#[command(
    name = "numalens",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the NUMA topology of this machine, of a preset, or of a JSON file.
    Topology(TopologyArgs),
    /// Run the main job on a bundled example and write a profile.
    Demo(DemoArgs),
}

/// Where a topology comes from: this machine unless a preset or a file is given.
#[derive(Debug, Args)]
pub struct TopologySource {
    /// A built-in machine model; `--preset list` lists them.
    #[arg(long, value_name = "NAME", conflicts_with = "topology")]
    pub preset: Option<String>,
    /// A topology JSON file (see docs/TOPOLOGY.md).
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub source: TopologySource,
    /// Print JSON (the topology schema) instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Profile directory to write.
    #[arg(
        short,
        long,
        value_name = "DIR",
        default_value = "numalens-demo.numalens"
    )]
    pub output: PathBuf,
    /// Number of samples in the example profile.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub samples: u64,
    #[command(flatten)]
    pub source: TopologySource,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn preset_and_file_conflict() {
        let parsed =
            Cli::try_parse_from(["numalens", "topology", "--preset", "a", "--topology", "f"]);
        assert!(parsed.is_err());
    }

    #[test]
    fn topology_flags_parse() {
        let cli = Cli::try_parse_from(["numalens", "topology", "--preset", "machine-a", "--json"])
            .unwrap();
        let Command::Topology(args) = cli.command else {
            panic!("not topology")
        };
        assert_eq!(args.source.preset.as_deref(), Some("machine-a"));
        assert!(args.json);
    }
}
