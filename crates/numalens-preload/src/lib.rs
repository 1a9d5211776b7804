//! The preload runtime: `libnumalens.so`, the C runtime under `runtime/` that is preloaded into
//! the recorded program (allocations, threads, mappings, page nodes at exit), embedded in the
//! numalens binary and installed in a cache directory ([`runtime`]), and the reader of the event
//! logs it writes ([`events`], the mirror of `runtime/include/numalens_events.h`).

pub mod events;
pub mod events_tail;
pub mod runtime;
