//! What `simulate` and `plan` share: the profile's accesses, the machine, the parameters.

use std::path::Path;

use anyhow::Result;
use numalens_format::Profile;
use numalens_place::load::{LoadOptions, load};
use numalens_place::{Machine, Params, PlaceError, ThreadSpread};
use numalens_topology::{Topology, TopologyError};

use crate::cli::WhatIfArgs;
use crate::exit::UsageError;

/// The machine used when neither `--topology` nor a multi-node recording says.
pub const DEFAULT_PRESET: &str = "machine-a";

pub struct Setup {
    pub profile: Profile,
    pub accesses: numalens_place::Accesses,
    pub machine: Machine,
    pub params: Params,
    /// How the machine was chosen, for the output's notes.
    pub notes: Vec<String>,
}

impl Setup {
    pub fn new(profile: &Path, args: &WhatIfArgs) -> Result<Setup> {
        if args.threads_per_node == Some(0) {
            return Err(UsageError("--threads-per-node must be at least 1".into()).into());
        }
        let window_ns = match args.window_ms {
            Some(ms) if !(ms.is_finite() && ms > 0.0) => {
                return Err(UsageError(format!(
                    "--window-ms must be a positive number of milliseconds, not {ms}"
                ))
                .into());
            }
            Some(ms) => Some(((ms * 1e6) as u64).max(1)),
            None => None,
        };
        let profile = Profile::open(profile)?;
        let (topology, note) = machine_for(&profile, args.topology.as_deref())?;
        let machine = Machine::from_topology(&topology);
        let accesses = load(&profile, &LoadOptions { window_ns })?;
        let mut params = Params {
            spread: args
                .threads_per_node
                .map_or(ThreadSpread::Even, ThreadSpread::PerNode),
            ..Params::default()
        };
        set_policy_params(&mut params, &args.policy_params)?;
        Ok(Setup {
            profile,
            accesses,
            machine,
            params,
            notes: vec![note],
        })
    }
}

/// `--policy-param GROUP.FIELD=VALUE` settings applied to `params`.
pub fn set_policy_params(params: &mut Params, settings: &[String]) -> Result<(), UsageError> {
    for setting in settings {
        let (key, value) = setting.split_once('=').ok_or_else(|| {
            UsageError(format!(
                "--policy-param {setting}: write it as GROUP.FIELD=VALUE"
            ))
        })?;
        params
            .set(key, value)
            .map_err(|e| UsageError(format!("--policy-param {setting}: {e}")))?;
    }
    Ok(())
}

/// The topology asked for, else the recorded one when it has several nodes, else the default
/// preset; with a sentence saying which.
pub fn machine_for(profile: &Profile, asked: Option<&str>) -> Result<(Topology, String)> {
    if let Some(name) = asked {
        if Path::new(name).is_file() {
            let t = numalens_topology::load_json_file(Path::new(name))?;
            return Ok((t, format!("machine: {name} (--topology)")));
        }
        let t = numalens_topology::presets::preset(name).map_err(|e| match e {
            TopologyError::UnknownPreset { .. } => {
                UsageError(format!("--topology: {e} (or give a topology JSON file)")).into()
            }
            other => anyhow::Error::new(other),
        })?;
        return Ok((t, format!("machine: preset {name} (--topology)")));
    }
    match &profile.meta().topology {
        Some(t) if t.nodes.len() > 1 => Ok((
            t.clone(),
            format!("machine: the recorded one ({} nodes)", t.nodes.len()),
        )),
        recorded => {
            let why = if recorded.is_some() {
                "the recorded machine has one node"
            } else {
                "the profile has no recorded topology"
            };
            let t = numalens_topology::presets::preset(DEFAULT_PRESET)?;
            Ok((
                t,
                format!("machine: preset {DEFAULT_PRESET} ({why}; --topology picks another)"),
            ))
        }
    }
}

/// Errors about what was asked for are usage errors.
pub fn place_error(e: PlaceError) -> anyhow::Error {
    match e {
        PlaceError::UnknownPolicy { .. } => UsageError(e.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}
