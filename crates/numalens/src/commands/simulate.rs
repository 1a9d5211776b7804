//! `numalens simulate`: every placement policy on a machine model, side by side.

use anyhow::Result;
use std::path::Path;

use numalens_place::plan::Plan;
use numalens_place::{Machine, Policy, policies::POLICIES};

use super::report::print_out;
use super::topology::use_color;
use super::whatif_setup::{Setup, place_error};
use crate::cli::SimulateArgs;
use crate::exit::UsageError;

pub fn run(args: SimulateArgs) -> Result<()> {
    if args.policies.iter().any(|p| p == "list") {
        return print_out(&policy_list());
    }
    let policies = if args.policies.is_empty() {
        Policy::all()
    } else {
        args.policies
            .iter()
            .map(|p| Policy::from_name(p).map_err(place_error))
            .collect::<Result<Vec<_>>>()?
    };
    // Read before the profile, which can take seconds: a wrong file is said at once.
    let plans = args
        .plans
        .iter()
        .map(|path| read_plan(path))
        .collect::<Result<Vec<_>>>()?;
    let setup = Setup::new(&args.profile, &args.what_if)?;
    for (path, plan) in args.plans.iter().zip(&plans) {
        check_plan(path, &plan.1, &setup.machine)?;
    }
    let computed = numalens_place::whatif::what_if_with_plans(
        &setup.accesses,
        &setup.machine,
        &policies,
        &plans,
        &setup.params,
    )
    .map_err(place_error)?;
    let mut table = computed.table;
    table.notes.splice(0..0, setup.notes);
    if args.json {
        print_out(&(serde_json::to_string_pretty(&table)? + "\n"))
    } else {
        print_out(&numalens_report::render_what_if(&table, use_color()))
    }
}

/// A plan file, named as given, refused when the machine lacks one of its nodes.
fn read_plan(path: &Path) -> Result<(String, Plan)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("--plan {}: cannot read it: {e}", path.display())))?;
    let plan = Plan::from_json_str(&text, path).map_err(|e| UsageError(e.to_string()))?;
    Ok((path.display().to_string(), plan))
}

/// Refuses a plan that names a node `machine` does not have.
fn check_plan(path: &Path, plan: &Plan, machine: &Machine) -> Result<()> {
    plan.check_machine(machine, path).map_err(|e| {
        UsageError(format!(
            "{e}: simulate it on the machine it was made for (`{}`) with `--topology`, or edit \
             its nodes",
            plan.topology.name
        ))
    })?;
    Ok(())
}

/// The policies with a line each.
pub fn policy_list() -> String {
    let width = POLICIES.iter().map(|p| p.1.len()).max().unwrap_or(0);
    POLICIES
        .iter()
        .map(|(_, name, what)| format!("{name:width$}  {what}\n"))
        .collect()
}
