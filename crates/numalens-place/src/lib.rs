//! Placement for numalens: the policies of the literature and an oracle
//! ([`policies`]), the plan format a later run applies ([`plan`]), and the what-if simulator
//! that says what each would give on a machine ([`sim`]).
//!
//! Reads only what earlier stages wrote: a profile (through [`load`]) and a topology. Every
//! policy is a pure, deterministic function; the simulator is too.

pub mod accesses;
pub mod error;
pub mod fixes;
#[cfg(test)]
pub(crate) mod fixture;
pub mod layout;
pub mod load;
pub mod machine;
pub mod plan;
pub mod policies;
pub mod sim;
pub mod whatif;

pub use accesses::{Accesses, CountSource};
pub use error::{PlaceError, Result};
pub use layout::{Layout, Schedule, ThreadSpread};
pub use machine::Machine;
pub use policies::{Params, Policy};
pub use sim::{Model, Outcome, simulate};
pub use whatif::{Computed, PolicyResult, WhatIf, what_if};
