//! `numalens plan`: one policy's placement as a plan file a later run applies.

use std::path::Path;

use anyhow::{Context, Result};
use numalens_place::layout::spread_threads;
use numalens_place::plan::{BuildId, PlanSource, from_schedule, read_build_id};
use numalens_place::policies::{self, Input};
use numalens_place::{Policy, Schedule};

use super::report::print_out;
use super::simulate::policy_list;
use super::whatif_setup::{Setup, place_error};
use crate::cli::PlanArgs;
use crate::exit::UsageError;

pub fn run(args: PlanArgs) -> Result<()> {
    if args.policy == "list" {
        return print_out(&policy_list());
    }
    let policy = Policy::from_name(&args.policy).map_err(place_error)?;
    check_output(&args.output)?;
    let setup = Setup::new(&args.profile, &args.what_if)?;
    let schedule = schedule(&setup, policy)?;
    let params = policy_parameters(&setup.params, policy)?;
    let source = PlanSource {
        profile: args.profile.display().to_string(),
        command: setup.profile.meta().command.clone(),
        build_ids: build_ids(&setup.profile.meta().command),
    };
    let mut plan = from_schedule(
        &setup.accesses,
        &setup.machine,
        &schedule,
        policy,
        params,
        source,
    );
    plan.notes.extend(setup.notes);
    std::fs::write(&args.output, plan.to_json_pretty())
        .with_context(|| format!("cannot write the plan to {}", args.output.display()))?;
    eprintln!(
        "numalens: {} plan for {} written to {}",
        policy.name(),
        setup.machine.name,
        args.output.display()
    );
    Ok(())
}

/// The parameters the policy used: its own and the simulator's.
fn policy_parameters(params: &numalens_place::Params, policy: Policy) -> Result<serde_json::Value> {
    let all = serde_json::to_value(params)?;
    let own = match policy {
        Policy::Kmaf | Policy::KmafOnline => Some("kmaf"),
        Policy::Carrefour => Some("carrefour"),
        Policy::Spm => Some("spm"),
        Policy::Tiering => Some("tiering"),
        _ => None,
    };
    let mut out = serde_json::Map::new();
    if let Some(key) = own {
        out.insert(key.into(), all[key].clone());
    }
    out.insert("model".into(), all["model"].clone());
    Ok(serde_json::Value::Object(out))
}

/// The policy's schedule; the oracle's needs every other policy's first.
fn schedule(setup: &Setup, policy: Policy) -> Result<Schedule> {
    if !setup.accesses.has_counts() && policy.needs_counts() {
        return Err(numalens_place::PlaceError::NoCounts {
            policy: policy.name().to_string(),
        }
        .into());
    }
    if policy == Policy::Oracle {
        let computed = numalens_place::what_if(
            &setup.accesses,
            &setup.machine,
            &[Policy::Oracle],
            &setup.params,
        )
        .map_err(place_error)?;
        let found = computed.schedules.into_iter().find(|(p, _)| p == "oracle");
        return Ok(found.expect("the oracle was asked for").1);
    }
    let (threads, _) = spread_threads(&setup.accesses, &setup.machine, setup.params.spread);
    let input = Input {
        accesses: &setup.accesses,
        machine: &setup.machine,
        threads: &threads,
        params: &setup.params,
    };
    policies::run(policy, &input).map_err(place_error)
}

/// Refuses to overwrite anything but an earlier plan.
fn check_output(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(UsageError(format!(
            "-o {}: is a directory; give a file name",
            path.display()
        ))
        .into());
    }
    if let Ok(text) = std::fs::read_to_string(path) {
        if !text.contains("\"plan_version\"") {
            return Err(UsageError(format!(
                "-o {}: the file exists and is not a numalens plan; give another name or remove it",
                path.display()
            ))
            .into());
        }
    } else if path.exists() {
        return Err(UsageError(format!(
            "-o {}: the file exists and is not a numalens plan; give another name or remove it",
            path.display()
        ))
        .into());
    }
    Ok(())
}

/// The build id of the recorded program, when its file is still there.
fn build_ids(command: &[String]) -> Vec<BuildId> {
    let Some(program) = command.first() else {
        return Vec::new();
    };
    let path = which(program);
    match path.as_deref().and_then(read_build_id) {
        Some(id) => vec![BuildId {
            module: path.map(|p| p.display().to_string()).unwrap_or_default(),
            build_id: id,
        }],
        None => Vec::new(),
    }
}

/// A command name as the shell would find it.
fn which(program: &str) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        return Some(Path::new(program).to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}
