//! The simulator's part of the report: every policy on the placement's machine, the predicted
//! effect of each finding's fix, and, on a what-if machine, the placement figures themselves
//! (they are the simulator's first-touch run, so the report and `numalens simulate` agree).

use numalens_format::Profile;
use numalens_place::fixes::{Fix, predict};
use numalens_place::load::{LoadOptions, load};
use numalens_place::{Machine, Params, PlaceError, Policy, Schedule, simulate};

use crate::error::Result;
use crate::model::{PlacementReport, ReportModel};
use crate::placement::Placement;

/// Adds the what-if table and the findings' predictions to `model`.
pub(crate) fn add(model: &mut ReportModel, profile: &Profile, placement: &Placement) -> Result<()> {
    if model.analysis.accesses == 0 {
        return Ok(());
    }
    let accesses = load(profile, &LoadOptions::default()).map_err(place_error)?;
    let machine = Machine::from_topology(&placement.machine);
    let params = Params::default();
    let computed = match numalens_place::what_if(&accesses, &machine, &Policy::all(), &params) {
        Ok(c) => c,
        Err(PlaceError::NoCounts { .. } | PlaceError::NoAccesses | PlaceError::NoMemory { .. }) => {
            return Ok(());
        }
        Err(e) => return Err(place_error(e)),
    };
    if placement.mode == "what-if"
        && let Some((_, first_touch)) = computed.schedules.iter().find(|(p, _)| p == "first-touch")
    {
        set_figures(
            &mut model.placement,
            &accesses,
            &machine,
            first_touch,
            &params,
        );
    }
    for finding in &mut model.findings {
        if let Some(fix) = Fix::of_advice(&finding.advice) {
            finding.predicted = predict(&accesses, &machine, &params, fix, &[finding.object.id]);
        }
    }
    model.what_if = Some(computed.table);
    Ok(())
}

/// The placement's local and remote accesses, loads and traffic, as simulated.
fn set_figures(
    report: &mut PlacementReport,
    accesses: &numalens_place::Accesses,
    machine: &Machine,
    first_touch: &Schedule,
    params: &Params,
) {
    let outcome = simulate(accesses, machine, first_touch, &params.model);
    let n = machine.node_count();
    let local = (0..n).fold(0u64, |s, i| s.saturating_add(outcome.traffic[i][i]));
    let all = outcome
        .traffic
        .iter()
        .flatten()
        .fold(0u64, |s, v| s.saturating_add(*v));
    report.local = local;
    report.remote = all.saturating_sub(local);
    report.accesses = all.saturating_add(report.unknown);
    report.local_ratio = outcome.local_access_ratio;
    report.imbalance = outcome.imbalance;
    for (i, load) in report.load.iter_mut().enumerate() {
        if let Some(v) = outcome.node_accesses.get(i) {
            load.accesses = *v;
        }
    }
    report.traffic = outcome.traffic;
}

fn place_error(e: PlaceError) -> crate::error::AnalyzeError {
    match e {
        PlaceError::Format(f) => f.into(),
        other => crate::error::AnalyzeError::Simulation(other.to_string()),
    }
}
