//! The NUMA machine model of numalens.
//!
//! A [`Topology`] describes nodes (with or without CPUs), CPUs, SLIT distances and, when known,
//! latencies, memory-controller bandwidths and the interconnect's links and routes. It comes from
//! the running kernel ([`from_sysfs`], [`host`]), from a named preset ([`presets::preset`]), or
//! from a JSON file ([`load_json_file`]); every number that is not read from the kernel says
//! where it comes from ([`Provenance`]).

pub mod cpulist;
mod error;
mod json;
mod model;
pub mod presets;
mod render;
mod routes;
mod sysfs;
mod validate;

pub use error::TopologyError;
pub use json::{check_cpu_lists, from_json_str, load_json_file};
pub use model::*;
pub use render::render_text;
pub use sysfs::{from_sysfs, host};
pub use validate::{LOCAL_DISTANCE, MAX_DISTANCE};
