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

/// A workload and the arguments that shrink it for a test run.
pub type SmallRun = (&'static str, &'static [(&'static str, u64)]);

/// private-blocks and stencil at the sizes every exactness test runs them at.
pub const PRIVATE_BLOCKS_SMALL: SmallRun = (
    "private-blocks",
    &[("n", 49152), ("threads", 3), ("iters", 2)],
);
pub const STENCIL_SMALL: SmallRun = (
    "stencil",
    &[("rows", 64), ("cols", 512), ("threads", 2), ("iters", 2)],
);
