//! The embedded runtime (being written).
