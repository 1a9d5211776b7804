//! `numalens topology`: show a machine model.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use numalens_topology::{Topology, TopologyError, presets, render_text};

use crate::cli::{TopologyArgs, TopologySource};
use crate::exit::UsageError;

pub fn run(args: TopologyArgs) -> Result<()> {
    if args.source.preset.as_deref() == Some("list") {
        print_preset_list(args.json);
        return Ok(());
    }
    let topology = load(&args.source)?;
    if args.json {
        println!("{}", topology.to_json_pretty());
    } else {
        print!("{}", render_text(&topology, use_color()));
    }
    Ok(())
}

/// The topology named by `--preset` or `--topology`, or this machine's.
pub fn load(source: &TopologySource) -> Result<Topology> {
    if let Some(name) = &source.preset {
        return presets::preset(name).map_err(|e| match e {
            TopologyError::UnknownPreset { .. } => UsageError(e.to_string()).into(),
            other => anyhow::Error::new(other),
        });
    }
    if let Some(path) = &source.topology {
        return Ok(numalens_topology::load_json_file(path)?);
    }
    numalens_topology::host().context("reading this machine's topology from /sys")
}

fn print_preset_list(json: bool) {
    let list = presets::list();
    if json {
        let entries: Vec<_> = list
            .iter()
            .map(|(name, about)| serde_json::json!({ "name": name, "description": about }))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&entries).expect("plain JSON")
        );
        return;
    }
    let width = list.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, about) in list {
        println!("{name:<width$}  {about}");
    }
}

/// Colours only on a terminal, and never when `NO_COLOR` is set.
pub fn use_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
