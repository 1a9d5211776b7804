//! Placement for real: a plan compiled into the rules the runtime applies as objects and threads
//! appear (`rules`), the online engine that moves pages and threads while the program runs
//! (`engine`, in progress), batched page migration (`mover`), and the kernel's own NUMA balancing switched off
//! for a run and always restored (`balancing`). See docs/PLACEMENT.md.

pub mod attach;
pub mod balancing;
pub mod engine;
pub mod error;
pub mod kernel_balancing;
pub mod migrate;
pub mod mover;
pub mod rules;
pub mod statics;

pub mod outcome;
pub mod threads;
pub mod worker;

pub use error::ApplyError;
