//! Precise memory samples as the kernel writes them, read the same way whether they come from a
//! perf.data file (`numalens import`) or from the live sampler's rings (`numalens record
//! --backend pmu`): the sample record's fields ([`sample`]), the data source ([`data_src`]),
//! AMD IBS op registers ([`ibs`]), Arm SPE packets from an AUX buffer ([`spe`]), the node of a
//! physical address ([`physical`]), and the [`Access`](crate::raw::Access) they
//! make ([`access`]).

pub mod access;
pub mod bytes;
pub mod cpu_threads;
pub mod data_src;
pub mod ibs;
pub mod physical;
pub mod sample;
pub mod spe;
pub mod spe_access;
