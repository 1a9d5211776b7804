//! The placement policies: each a pure, deterministic function of the run's accesses, the
//! machine and its parameters, giving a [`Schedule`]. One implementation each, used by
//! `numalens plan`, `numalens simulate`, the report's findings and the online engine. Formulas,
//! sources and defaults: docs/POLICIES.md.

mod carrefour;
mod compact;
mod first_touch;
mod hot_blocks;
mod interleave;
mod kmaf;
#[cfg(test)]
mod kmaf_ageing_tests;
mod kmaf_online;
mod marathe;
#[cfg(test)]
mod memory_tests;
mod object_options;
mod online;
#[cfg(test)]
mod online_tests;
mod oracle;
mod per_object;
mod set_param;
mod spm;
mod spread;
mod tier_users;
mod tiering;

pub use carrefour::CarrefourParams;
pub(crate) use first_touch::layout as first_touch_layout;
pub use interleave::{interleave_nodes, weighted_interleave_weights};
pub use kmaf::{KmafDecision, KmafParams, dominates, kmaf_decide, locality_move, map_threads};
pub use marathe::{marathe_hop_node, marathe_uniform_node};
pub use online::{Step, StepInput, Stepper};
pub use oracle::{OracleReport, lower_bound_s, with_candidates as oracle_with_candidates};
pub use spm::SpmParams;
pub use tiering::TieringParams;

use serde::Serialize;

use crate::accesses::Accesses;
use crate::error::PlaceError;
use crate::layout::{Schedule, ThreadSpread};
use crate::machine::Machine;
use crate::sim::Model;

/// Every policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    FirstTouch,
    Interleave,
    InterleaveWeighted,
    MaratheUniform,
    MaratheHop,
    Kmaf,
    KmafOnline,
    Carrefour,
    Spm,
    Tiering,
    PerObject,
    Oracle,
}

/// Name, one-line description.
pub const POLICIES: &[(Policy, &str, &str)] = &[
    (
        Policy::FirstTouch,
        "first-touch",
        "Linux's default: a page lives where the thread that touched it first ran",
    ),
    (
        Policy::Interleave,
        "interleave",
        "pages round-robin over the nodes with memory, by page number",
    ),
    (
        Policy::InterleaveWeighted,
        "interleave-weighted",
        "round-robin weighted by each node's memory bandwidth (Linux's weighted interleave)",
    ),
    (
        Policy::MaratheUniform,
        "marathe-uniform",
        "Marathe et al. Eq. 1: each page on the node that accessed it most",
    ),
    (
        Policy::MaratheHop,
        "marathe-hop",
        "Marathe et al. Eq. 2: each page on the node with the lowest Σ accesses × latency",
    ),
    (
        Policy::Kmaf,
        "kmaf",
        "kMAF: thread mapping over the communication matrix, then locality or balance by exclusivity",
    ),
    (
        Policy::KmafOnline,
        "kmaf-online",
        "kMAF deciding page by page as the run's windows go by, from first touch",
    ),
    (
        Policy::Carrefour,
        "carrefour",
        "Carrefour: global gates each window, then per page migrate, replicate or interleave",
    ),
    (
        Policy::Spm,
        "spm",
        "SPM: after an observation window, each sampled page to its majority node",
    ),
    (
        Policy::Tiering,
        "tiering",
        "memory tiers: hot pages in the fast nodes within their capacity, promoted and demoted over time",
    ),
    (
        Policy::PerObject,
        "per-object",
        "numalens: each object gets the placement the simulator finds best for it (a rule a plan states exactly)",
    ),
    (
        Policy::Oracle,
        "oracle",
        "the best placement the model finds knowing every access: the limit to compare with",
    ),
];

impl Policy {
    pub fn name(self) -> &'static str {
        POLICIES
            .iter()
            .find(|(p, _, _)| *p == self)
            .map_or("?", |(_, n, _)| n)
    }

    pub fn from_name(name: &str) -> Result<Policy, PlaceError> {
        POLICIES
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(p, _, _)| *p)
            .ok_or_else(|| PlaceError::UnknownPolicy {
                name: name.to_string(),
                known: POLICIES.iter().map(|(_, n, _)| n.to_string()).collect(),
            })
    }

    pub fn all() -> Vec<Policy> {
        POLICIES.iter().map(|(p, _, _)| *p).collect()
    }

    /// True for policies that decide while the run goes on (their moves happen at window ends).
    pub fn is_online(self) -> bool {
        matches!(
            self,
            Policy::KmafOnline | Policy::Carrefour | Policy::Spm | Policy::Tiering
        )
    }

    /// True when the policy needs access counts (not only first touches).
    pub fn needs_counts(self) -> bool {
        !matches!(
            self,
            Policy::FirstTouch | Policy::Interleave | Policy::InterleaveWeighted
        )
    }
}

/// Every policy's parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Params {
    /// How threads are spread when the policy does not map them itself.
    #[serde(skip)]
    pub spread: ThreadSpread,
    pub kmaf: KmafParams,
    pub carrefour: CarrefourParams,
    pub spm: SpmParams,
    pub tiering: TieringParams,
    pub model: Model,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            spread: ThreadSpread::Even,
            kmaf: KmafParams::default(),
            carrefour: CarrefourParams::default(),
            spm: SpmParams::default(),
            tiering: TieringParams::default(),
            model: Model::default(),
        }
    }
}

/// What every policy is given.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    pub accesses: &'a Accesses,
    pub machine: &'a Machine,
    /// The default thread mapping (node position per thread).
    pub threads: &'a [usize],
    pub params: &'a Params,
}

/// Runs `policy`.
pub fn run(policy: Policy, input: &Input) -> Result<Schedule, PlaceError> {
    if input.machine.memory_nodes().is_empty() {
        return Err(PlaceError::NoMemory {
            machine: input.machine.name.clone(),
        });
    }
    let schedule = match policy {
        Policy::FirstTouch => first_touch::schedule(input),
        Policy::Interleave => interleave::schedule(input, false),
        Policy::InterleaveWeighted => interleave::schedule(input, true),
        Policy::MaratheUniform => marathe::schedule(input, false),
        Policy::MaratheHop => marathe::schedule(input, true),
        Policy::Kmaf => kmaf::schedule(input),
        Policy::KmafOnline => kmaf_online::schedule(input),
        Policy::Carrefour => carrefour::schedule(input),
        Policy::Spm => spm::schedule(input),
        Policy::Tiering => tiering::schedule(input),
        Policy::PerObject => per_object::schedule(input),
        Policy::Oracle => oracle::schedule(input)?.0,
    };
    Ok(schedule)
}
