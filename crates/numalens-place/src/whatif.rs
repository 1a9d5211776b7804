//! Every policy on one machine, side by side: what `numalens simulate` prints, the HTML
//! report's what-if section shows and findings quote.

use serde::{Deserialize, Serialize};

use crate::accesses::{Accesses, CountSource};
use crate::error::{PlaceError, Result};
use crate::layout::{Schedule, spread_threads};
use crate::machine::Machine;
use crate::plan::Plan;
use crate::policies::{self, Input, OracleReport, Params, Policy};
use crate::sim::simulate;

/// The least modelled gain over first touch that makes another policy the recommendation.
pub const MIN_RECOMMENDED_GAIN: f64 = 0.01;

/// One policy's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// The policy's name, or `plan: FILE` for a plan simulated beside them.
    pub policy: String,
    /// The plan file, for a plan's row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    pub online: bool,
    pub local_access_ratio: Option<f64>,
    pub imbalance: Option<f64>,
    pub max_link_utilisation: f64,
    pub mean_latency_ns: Option<f64>,
    pub modelled_time_s: f64,
    /// First touch's modelled time over this policy's.
    pub speedup_vs_first_touch: Option<f64>,
    pub pages_migrated: u64,
    pub migration_time_s: f64,
    pub spilled_pages: u64,
    pub bound_by: String,
    pub notes: Vec<String>,
}

/// The what-if table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    pub topology: String,
    pub nodes: Vec<u32>,
    pub count_source: CountSource,
    pub threads: usize,
    pub pages: usize,
    pub windows: usize,
    pub window_s: f64,
    /// Best first; the oracle, a limit rather than a policy to deploy, last.
    pub policies: Vec<PolicyResult>,
    /// The best policy that is neither the oracle nor a plan.
    pub recommended: Option<String>,
    pub oracle: Option<OracleReport>,
    /// What the machine model assumed, and how threads were mapped.
    pub notes: Vec<String>,
}

impl WhatIf {
    pub fn result(&self, policy: Policy) -> Option<&PolicyResult> {
        self.policies.iter().find(|r| r.policy == policy.name())
    }
}

/// The table and the schedules behind it (by policy name, in the table's order).
#[derive(Debug, Clone)]
pub struct Computed {
    pub table: WhatIf,
    pub schedules: Vec<(String, Schedule)>,
}

/// Runs `policies` (first-touch always, as the reference) on `machine`.
pub fn what_if(
    accesses: &Accesses,
    machine: &Machine,
    policies: &[Policy],
    params: &Params,
) -> Result<Computed> {
    what_if_with_plans(accesses, machine, policies, &[], params)
}

/// [`what_if`], with `plans` (each with its file's name, node ids checked against `machine`)
/// simulated beside the policies, as a run that applies them would place the pages.
pub fn what_if_with_plans(
    accesses: &Accesses,
    machine: &Machine,
    policies: &[Policy],
    plans: &[(String, Plan)],
    params: &Params,
) -> Result<Computed> {
    if !accesses.has_counts() {
        let policy = policies
            .iter()
            .find(|p| p.needs_counts())
            .map_or("simulate", |p| p.name());
        return Err(if accesses.pages.is_empty() {
            PlaceError::NoAccesses
        } else {
            PlaceError::NoCounts {
                policy: policy.to_string(),
            }
        });
    }
    let (threads, mut notes) = spread_threads(accesses, machine, params.spread);
    notes.extend(machine.assumptions.iter().cloned());
    if accesses.retimed {
        notes.push(
            "the recording machine had fewer CPUs than the program had threads: windows are \
             each thread's own time, as if every thread had had a CPU from the start"
                .to_string(),
        );
    }
    let input = Input {
        accesses,
        machine,
        threads: &threads,
        params,
    };
    let mut wanted: Vec<Policy> = vec![Policy::FirstTouch];
    for &p in policies {
        if !wanted.contains(&p) {
            wanted.push(p);
        }
    }
    let ask_oracle = wanted.contains(&Policy::Oracle);
    wanted.retain(|p| *p != Policy::Oracle);
    let mut schedules: Vec<(Row, Schedule)> = run_all(&input, &wanted)?
        .into_iter()
        .map(|(p, s)| (Row::Policy(p), s))
        .collect();
    for (name, plan) in plans {
        schedules.push((
            Row::Plan(name.clone()),
            crate::plan::apply::schedule(plan, &input),
        ));
    }
    let mut oracle = None;
    if ask_oracle {
        // The oracle sees every policy, asked for or not, so it is never worse than any.
        let mut candidates = schedules.clone();
        let rest: Vec<Policy> = Policy::all()
            .into_iter()
            .filter(|p| *p != Policy::Oracle && !wanted.contains(p))
            .collect();
        candidates.extend(
            run_all(&input, &rest)?
                .into_iter()
                .map(|(p, s)| (Row::Policy(p), s)),
        );
        let named = candidates.into_iter().map(|(r, s)| (r.name(), s)).collect();
        let (s, report) = policies::oracle_with_candidates(&input, named)?;
        schedules.push((Row::Policy(Policy::Oracle), s));
        oracle = Some(report);
    }
    let mut results: Vec<(PolicyResult, Schedule)> = schedules
        .into_iter()
        .map(|(p, s)| (result(accesses, machine, params, p, &s), s))
        .collect();
    let first_touch = results[0].0.modelled_time_s;
    for (r, _) in &mut results {
        r.speedup_vs_first_touch =
            (r.modelled_time_s > 0.0).then(|| first_touch / r.modelled_time_s);
    }
    results.sort_by(|(a, _), (b, _)| {
        (a.policy == "oracle")
            .cmp(&(b.policy == "oracle"))
            .then(a.modelled_time_s.total_cmp(&b.modelled_time_s))
            .then(order(&a.policy).cmp(&order(&b.policy)))
    });
    let recommended = recommend(results.iter().map(|r| &r.0), first_touch);
    let schedules = results
        .iter()
        .map(|(r, s)| (r.policy.clone(), s.clone()))
        .collect();
    let table = WhatIf {
        topology: machine.name.clone(),
        nodes: machine.nodes.clone(),
        count_source: accesses.source,
        threads: accesses.threads.len(),
        pages: accesses.pages.len(),
        windows: accesses.windows.cells.len(),
        window_s: accesses.windows.length_ns as f64 / 1e9,
        policies: results.into_iter().map(|r| r.0).collect(),
        recommended,
        oracle,
        notes,
    };
    Ok(Computed { table, schedules })
}

/// The best policy (results sorted best first), unless its gain is smaller than the model can
/// tell apart from first touch: that is no reason to move anything, and the default stays.
fn recommend<'a>(
    sorted: impl Iterator<Item = &'a PolicyResult>,
    first_touch_s: f64,
) -> Option<String> {
    let mut sorted = sorted;
    let best = sorted.find(|r| r.policy != "oracle" && r.plan.is_none())?;
    Some(
        if best.modelled_time_s < first_touch_s * (1.0 - MIN_RECOMMENDED_GAIN) {
            best.policy.clone()
        } else {
            Policy::FirstTouch.name().to_string()
        },
    )
}

/// Position in the documented list: ties in time go to the simpler policy.
fn order(name: &str) -> usize {
    policies::POLICIES
        .iter()
        .position(|(_, n, _)| *n == name)
        .unwrap_or(usize::MAX)
}

/// Runs policies two at a time (the machine's cores), in order.
fn run_all(input: &Input, list: &[Policy]) -> Result<Vec<(Policy, Schedule)>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = Vec::new();
    for chunk in list.chunks(workers.max(1)) {
        let done: Vec<Result<Schedule>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&p| scope.spawn(move || policies::run(p, input)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("policies do not panic"))
                .collect()
        });
        for (&p, s) in chunk.iter().zip(done) {
            out.push((p, s?));
        }
    }
    Ok(out)
}

/// A row of the table: a policy's, or a plan's.
#[derive(Debug, Clone)]
enum Row {
    Policy(Policy),
    Plan(String),
}

impl Row {
    fn name(&self) -> String {
        match self {
            Row::Policy(p) => p.name().to_string(),
            Row::Plan(file) => format!("plan: {file}"),
        }
    }
}

fn result(
    accesses: &Accesses,
    machine: &Machine,
    params: &Params,
    row: Row,
    schedule: &Schedule,
) -> PolicyResult {
    let outcome = simulate(accesses, machine, schedule, &params.model);
    PolicyResult {
        policy: row.name(),
        plan: match &row {
            Row::Plan(file) => Some(file.clone()),
            Row::Policy(_) => None,
        },
        online: match row {
            Row::Policy(p) => p.is_online(),
            Row::Plan(_) => !schedule.moves.is_empty(),
        },
        local_access_ratio: outcome.local_access_ratio,
        imbalance: outcome.imbalance,
        max_link_utilisation: outcome.max_link_utilisation,
        mean_latency_ns: outcome.mean_latency_ns,
        modelled_time_s: outcome.modelled_time_s,
        speedup_vs_first_touch: None,
        pages_migrated: outcome.pages_migrated,
        migration_time_s: outcome.migration_time_s,
        spilled_pages: schedule.spilled_pages,
        bound_by: outcome.bound_by.clone(),
        notes: schedule.notes.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tests::private_pages;
    use numalens_topology::presets::preset;

    fn one_node() -> Machine {
        let mut t = preset("machine-b").unwrap();
        t.nodes.truncate(1);
        t.cpus.retain(|c| c.node == 0);
        t.links.clear();
        t.routes.clear();
        t.distances = None;
        if let Some(l) = &mut t.latency {
            l.values = vec![vec![l.values[0][0]]];
            l.entry_provenance = None;
        }
        Machine::from_topology(&t)
    }

    #[test]
    fn on_one_node_every_policy_gives_the_same_result() {
        let mut a = private_pages(4, 16, 1000);
        // Some sharing, so that policies have something to decide.
        for c in a.windows.cells[0].iter_mut().step_by(3) {
            c.thread = (c.thread + 1) % 4;
        }
        let a = Accesses::from_cells(
            a.page_size,
            a.source,
            a.threads.clone(),
            Vec::new(),
            a.pages.clone(),
            a.windows.clone(),
        );
        let w = what_if(&a, &one_node(), &Policy::all(), &Params::default())
            .unwrap()
            .table;
        assert_eq!(w.policies.len(), 12);
        // Nothing gains: the default is the recommendation, whatever the ties' order.
        assert_eq!(w.recommended.as_deref(), Some("first-touch"));
        for r in &w.policies {
            assert_eq!(
                r.modelled_time_s, w.policies[0].modelled_time_s,
                "{}",
                r.policy
            );
            assert_eq!(r.local_access_ratio, Some(1.0));
        }
    }

    #[test]
    fn a_gain_the_model_cannot_tell_from_first_touch_recommends_first_touch() {
        let a = private_pages(4, 16, 1000);
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        let w = what_if(&a, &m, &[Policy::MaratheUniform], &Params::default())
            .unwrap()
            .table;
        let with_time = |policy: &str, s: f64| {
            let mut r = w.policies[0].clone();
            r.policy = policy.to_string();
            r.modelled_time_s = s;
            r
        };
        let oracle = with_time("oracle", 0.5);
        let close = [
            oracle.clone(),
            with_time("spm", 0.995),
            with_time("first-touch", 1.0),
        ];
        assert_eq!(recommend(close.iter(), 1.0).as_deref(), Some("first-touch"));
        let clear = [
            oracle,
            with_time("spm", 0.98),
            with_time("first-touch", 1.0),
        ];
        assert_eq!(recommend(clear.iter(), 1.0).as_deref(), Some("spm"));
    }

    #[test]
    fn the_table_is_the_same_run_after_run_and_lists_first_touch() {
        let a = private_pages(8, 8, 500);
        let m = Machine::from_topology(&preset("machine-c").unwrap());
        let first = what_if(&a, &m, &[Policy::Oracle], &Params::default())
            .unwrap()
            .table;
        assert_eq!(first.policies[0].policy, "first-touch");
        assert_eq!(first.policies.last().unwrap().policy, "oracle");
        for _ in 0..3 {
            let again = what_if(&a, &m, &[Policy::Oracle], &Params::default())
                .unwrap()
                .table;
            assert_eq!(again, first);
        }
    }

    #[test]
    fn first_touches_alone_are_not_counts() {
        let mut a = private_pages(2, 2, 1);
        a.source = CountSource::FirstTouchesOnly;
        let e = what_if(&a, &one_node(), &[Policy::Kmaf], &Params::default()).unwrap_err();
        assert!(e.to_string().contains("`kmaf` needs"), "{e}");
    }
}
