//! `numalens simulate`: every placement policy on a machine model, side by side.

use anyhow::Result;
use numalens_place::{Policy, policies::POLICIES};

use super::report::print_out;
use super::topology::use_color;
use super::whatif_setup::{Setup, place_error};
use crate::cli::SimulateArgs;

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
    let setup = Setup::new(&args.profile, &args.what_if)?;
    let computed =
        numalens_place::what_if(&setup.accesses, &setup.machine, &policies, &setup.params)
            .map_err(place_error)?;
    let mut table = computed.table;
    table.notes.splice(0..0, setup.notes);
    if args.json {
        print_out(&(serde_json::to_string_pretty(&table)? + "\n"))
    } else {
        print_out(&numalens_report::render_what_if(&table, use_color()))
    }
}

/// The policies with a line each.
pub fn policy_list() -> String {
    let width = POLICIES.iter().map(|p| p.1.len()).max().unwrap_or(0);
    POLICIES
        .iter()
        .map(|(_, name, what)| format!("{name:width$}  {what}\n"))
        .collect()
}
