//! The numalens recorder: runs a program under the preload runtime (`numalens-preload`), the
//! `inst` hooks (`numalens-inst`) and the page-fault or precise memory sampler, keeps what the sampler saw (and a
//! copy of it on disk), and has the recording assembled into a profile (`numalens-assemble`).

pub mod aux;
mod drain_priority;
pub mod faults;
pub mod launch;
mod live_pass;
mod outlive;
pub mod perf;
pub mod permission;
pub mod pmu;
pub mod pmu_events;
pub mod pmu_live;
mod program_end;
pub mod record;
mod records;
pub mod recover;
pub mod ring_drain;
pub mod sampler;
pub mod scan;
pub mod session;
pub mod signals;
pub mod spe_event;
pub mod spe_live;
mod status_line;
pub mod std_fds;
pub mod time_order;
pub mod unfinished;
