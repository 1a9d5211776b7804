//! The numalens recorder: runs a program under the `libnumalens` runtime and the page-fault
//! sampler, and turns what they saw into a profile.

pub mod assemble;
pub mod attribute;
mod attribute_index;
pub mod events;
pub mod events_tail;
pub mod faults;
pub mod inst;
pub mod launch;
mod outlive;
pub mod page_times;
pub mod pagesize;
pub mod perf;
pub mod procmaps;
pub mod record;
pub mod recover;
pub mod runtime;
pub mod scan;
pub mod session;
pub mod signals;
pub mod spill;
pub mod std_fds;
pub mod symbols;
pub mod time_order;
pub mod unfinished;
