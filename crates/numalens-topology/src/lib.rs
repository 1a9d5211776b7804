//! The NUMA machine model of numalens.
//!
//! A [`Topology`] describes nodes (with or without CPUs), CPUs, SLIT distances and, when known,
//! latencies, memory-controller bandwidths and the interconnect's links and routes. It comes from
//! the running kernel (sysfs), from a named preset, or from a JSON file; every number that is not
//! read from the kernel says where it comes from ([`Provenance`]).

pub mod cpulist;
mod model;

pub use model::*;
