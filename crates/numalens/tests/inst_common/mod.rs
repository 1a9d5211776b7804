//! Reading an instrumented recording's profile, shared by the `inst` tests.

use std::collections::HashMap;

use numalens_format::{CodeLocation, Profile, Thread};

/// Thread id → logical thread (creation order) of every thread in the profile.
pub fn logical_threads(profile: &Profile) -> HashMap<u32, u32> {
    profile
        .read_all::<Thread>()
        .unwrap()
        .iter()
        .map(|t| (t.tid, t.logical_id))
        .collect()
}

/// The code location of every sampled instruction address.
pub fn code_locations(profile: &Profile) -> HashMap<u64, CodeLocation> {
    profile
        .read_all::<CodeLocation>()
        .unwrap()
        .into_iter()
        .map(|c| (c.ip, c))
        .collect()
}
