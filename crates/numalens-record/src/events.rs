//! Event log of the runtime (being written).
