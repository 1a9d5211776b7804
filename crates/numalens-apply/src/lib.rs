//! Placement for real (docs/PLACEMENT.md): a plan compiled into the rules the runtime applies as
//! objects and threads appear (`rules`, `statics`, read back by `outcome`), the online engine
//! that moves pages and threads while the program runs (`engine`, on a running process
//! `attach`), a plan's timed moves made during its run (`timed`), batched page migration on threads of its own (`migrate`, `worker`, jobs sized by
//! the calls' time in `job_size`), threads
//! moved (`threads`), and the kernel's own NUMA balancing switched off for a run and always
//! restored (`balancing`).

pub mod attach;
pub mod balancing;
pub mod engine;
pub mod error;
mod job_size;
pub mod migrate;
pub mod outcome;
pub mod page_moves;
pub mod page_table;
pub mod rules;
pub mod statics;
pub mod threads;
pub mod timed;
pub mod worker;

pub use error::ApplyError;
