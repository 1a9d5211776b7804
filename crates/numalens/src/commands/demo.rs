//! `numalens demo`: the main job on a bundled default. Recording real programs arrives with the
//! recorder; until then the demo shows the machine and writes an example profile from the
//! synthetic generator (marked `backend: synthetic`), then reads it back and summarises it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use numalens_format::synth::{SynthConfig, write_example_profile};
use numalens_format::{Backend, Clock, Host, Meta, Profile, Sample};

use super::topology::{load, use_color};
use crate::cli::DemoArgs;

pub fn run(args: DemoArgs) -> Result<()> {
    let topology = load(&args.source)?;
    print!("{}", numalens_topology::render_text(&topology, use_color()));
    replace_previous_demo(&args.output)?;
    let config = SynthConfig {
        nodes: topology.nodes.len() as u32,
        ..SynthConfig::default()
    };
    let mut meta = Meta::new(
        vec!["numalens".into(), "demo".into()],
        Backend {
            name: "synthetic".into(),
            settings: Default::default(),
        },
        host(),
        Clock {
            name: "synthetic".into(),
            origin_ns: 0,
        },
    );
    meta.topology = Some(topology);
    eprintln!(
        "numalens: writing an example profile of {} synthetic samples to {}",
        args.samples,
        args.output.display()
    );
    write_example_profile(&args.output, config, args.samples, meta)?;
    summarise(&args.output)
}

/// The demo may be run again and again: it replaces its own previous output, nothing else.
fn replace_previous_demo(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    match Profile::open(dir) {
        Ok(profile) if profile.meta().backend.name == "synthetic" => std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous demo profile {}", dir.display())),
        _ => bail!(
            "{} exists and is not a previous demo profile; choose another --output",
            dir.display()
        ),
    }
}

/// Reads the profile back, as every later stage will, and prints what it holds.
fn summarise(dir: &Path) -> Result<()> {
    let profile = Profile::open(dir)?;
    let mut per_thread: BTreeMap<u32, u64> = BTreeMap::new();
    let mut per_node: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    for batch in profile.batches::<Sample>(Some(&["tid", "weight", "node"]), None)? {
        let batch = batch?;
        let tid = batch.column(0).as_primitive::<UInt32Type>();
        let weight = batch.column(1).as_primitive::<UInt32Type>();
        let node = batch.column(2).as_primitive::<UInt32Type>();
        for i in 0..batch.num_rows() {
            *per_thread.entry(tid.value(i)).or_default() += weight.value(i) as u64;
            let node = node.is_valid(i).then(|| node.value(i));
            *per_node.entry(node).or_default() += weight.value(i) as u64;
        }
    }
    println!("\nProfile {}", dir.display());
    for (table, info) in &profile.meta().tables {
        println!("  {table:<11} {:>10} rows", info.rows);
    }
    println!("\nAccesses by thread (sampled × weight):");
    for (tid, accesses) in per_thread {
        println!("  tid {tid:<8} {accesses:>14}");
    }
    println!("\nAccesses by memory node:");
    for (node, accesses) in per_node {
        let node = node.map_or("unknown".to_string(), |n| n.to_string());
        println!("  node {node:<7} {accesses:>14}");
    }
    println!(
        "\nRead it with pandas: pd.read_parquet(\"{}/samples.parquet\")",
        dir.display()
    );
    Ok(())
}

fn host() -> Host {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    Host {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
    }
}
