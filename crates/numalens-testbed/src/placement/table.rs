//! The conditions of `bench/vm-placement`, what each run came to (measured, not available,
//! failed), the table and the targets.
//!
//! A guest's results directory holds one directory per workload, and in it, per condition
//! `STEM`: `STEM.numalens` (the profile), `STEM.status` (the exit status of the command),
//! `STEM.txt` (its output), `STEM.cpus` (the `thread_cpus` file); `linux.vmstat` has
//! `numa_pages_migrated` before and after the Linux run; `simulate.txt` is `numalens simulate`
//! of the first-touch profile, whose `Best policy:` line is numalens' recommendation.

use std::fmt::Write as _;
use std::path::Path;

/// One condition: its file stem and its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    pub stem: &'static str,
    pub label: &'static str,
    pub online: bool,
}

const fn cond(stem: &'static str, label: &'static str, online: bool) -> Condition {
    Condition {
        stem,
        label,
        online,
    }
}

/// The conditions, in the table's order (the recommendation's own row comes last).
pub const CONDITIONS: &[Condition] = &[
    cond("first-touch", "first-touch", false),
    cond("interleave", "interleave all", false),
    cond("linux", "Linux NUMA balancing", false),
    cond("plan-marathe-hop", "plan marathe-hop", false),
    cond("plan-kmaf", "plan kmaf", false),
    cond("plan-oracle", "plan oracle", false),
    cond("online-carrefour", "online carrefour", true),
    cond("online-kmaf", "online kmaf", true),
    cond("online-spm", "online spm", true),
];

/// What the recommendation's row is, for a policy name of `numalens simulate`: the stem of the
/// condition that already ran it, else `recommended` (the bench ran it as its own condition).
pub fn recommended_stem(policy: &str) -> &'static str {
    match policy {
        "first-touch" => "first-touch",
        "marathe-hop" => "plan-marathe-hop",
        "kmaf" => "plan-kmaf",
        "oracle" => "plan-oracle",
        "carrefour" => "online-carrefour",
        "kmaf-online" => "online-kmaf",
        "spm" => "online-spm",
        _ => "recommended",
    }
}

/// `Best policy: NAME (…)` of `numalens simulate`'s output.
pub fn recommendation(simulate_output: &str) -> Option<String> {
    let line = simulate_output
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("Best policy:"))?;
    let name = line.split_whitespace().next()?;
    Some(name.trim_end_matches(['.', ',']).to_string())
}

/// One run's measured placement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub lar: Option<f64>,
    pub imbalance: Option<f64>,
    /// Exact accesses of the run.
    pub accesses: u64,
    /// Pages the online engine moved (its `migrations` rows with result `ok`).
    pub numalens_moved_pages: u64,
    /// Page moves the scans saw (any mover).
    pub moves_seen: u64,
    pub time_to_good_s: Option<f64>,
    /// The simulator's memory time of the measured placement.
    pub modelled_s: f64,
    /// `kernel.numa_balancing` during the run, as the profile recorded it.
    pub numa_balancing: Option<u32>,
    pub program_wall_s: Option<f64>,
    pub exit_code: Option<i32>,
    pub notes: Vec<String>,
}

/// What one condition came to.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    Measured(Box<Measured>),
    /// The command said the feature is not there (`numalens run --policy` before the engine).
    Unavailable(String),
    /// It ran and failed, or it could not be measured: why.
    Failed(String),
}

/// A table row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub workload: String,
    pub stem: String,
    pub label: String,
    pub online: bool,
    pub outcome: RunOutcome,
    /// Pages the kernel migrated during the run (`numa_pages_migrated` delta), Linux's row only.
    pub kernel_migrated: Option<u64>,
}

impl Row {
    pub fn measured(&self) -> Option<&Measured> {
        match &self.outcome {
            RunOutcome::Measured(m) => Some(m),
            _ => None,
        }
    }
}

/// What the files of a condition say when it has no measurable profile: unavailable (exit 2,
/// "not available"), failed, or not run.
pub fn without_profile(status: Option<i32>, output: &str, why_not_run: Option<&str>) -> RunOutcome {
    let last = output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    match status {
        Some(2) if output.contains("not available") => {
            RunOutcome::Unavailable("engine not available".into())
        }
        Some(code) => RunOutcome::Failed(format!("exit {code}: {last}")),
        None => RunOutcome::Failed(why_not_run.unwrap_or("not run").to_string()),
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `numa_pages_migrated` before and after (two numbers), or the delta (one).
pub fn vmstat_delta(text: &str) -> Option<u64> {
    let numbers: Vec<u64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    match numbers[..] {
        [delta] => Some(delta),
        [before, after, ..] => after.checked_sub(before),
        _ => None,
    }
}

/// Measures a profile directory, given its `thread_cpus` file when there is one.
pub type MeasureFn<'a> = &'a dyn Fn(&Path, Option<&Path>) -> Result<Measured, String>;

/// The row of condition `stem` in a workload's directory.
pub fn condition_row(workload: &str, dir: &Path, c: Condition, measure: MeasureFn<'_>) -> Row {
    let file = |ext: &str| dir.join(format!("{}.{ext}", c.stem));
    let profile = file("numalens");
    let status = read(&file("status")).and_then(|s| s.trim().parse::<i32>().ok());
    let output = read(&file("txt")).unwrap_or_default();
    let cpus = file("cpus");
    let unavailable = status == Some(2) && output.contains("not available");
    let outcome = if profile.join("meta.json").exists() && !unavailable {
        match measure(&profile, cpus.exists().then_some(cpus.as_path())) {
            Ok(mut m) => {
                if let Some(code) = status.filter(|c| *c != 0) {
                    m.notes.push(format!("the command exited with {code}"));
                }
                RunOutcome::Measured(Box::new(m))
            }
            Err(e) => RunOutcome::Failed(format!("not measurable: {e}")),
        }
    } else {
        let why = read(&file("why")).or_else(|| {
            let guest = read(&dir.join("guest-failure.txt"))?;
            Some(format!("the guest failed: {}", guest.trim()))
        });
        without_profile(status, &output, why.as_deref().map(str::trim))
    };
    let kernel_migrated = (c.stem == "linux")
        .then(|| read(&dir.join("linux.vmstat")).and_then(|t| vmstat_delta(&t)))
        .flatten();
    Row {
        workload: workload.to_string(),
        stem: c.stem.to_string(),
        label: c.label.to_string(),
        online: c.online,
        outcome,
        kernel_migrated,
    }
}

/// The rows of one workload's directory: every condition, then the recommendation's (the row
/// of the condition that ran the recommended policy, or its own run).
pub fn workload_rows(workload: &str, dir: &Path, measure: MeasureFn<'_>) -> Vec<Row> {
    let mut rows: Vec<Row> = CONDITIONS
        .iter()
        .map(|c| condition_row(workload, dir, *c, measure))
        .collect();
    let best = read(&dir.join("simulate.txt")).and_then(|t| recommendation(&t));
    let recommended = match best {
        Some(policy) => {
            let stem = recommended_stem(&policy);
            let mut row = match rows.iter().find(|r| r.stem == stem) {
                Some(same) => Row {
                    label: format!("recommended: {policy} (= {})", same.label),
                    ..same.clone()
                },
                None => Row {
                    label: format!("recommended: {policy}"),
                    ..condition_row(workload, dir, cond(stem, "recommended", false), measure)
                },
            };
            row.stem = "recommended".into();
            // Its own row, not one more online run for the targets.
            row.online = false;
            row
        }
        None => Row {
            workload: workload.to_string(),
            stem: "recommended".into(),
            label: "recommended".into(),
            online: false,
            outcome: RunOutcome::Failed("no recommendation (`numalens simulate` failed)".into()),
            kernel_migrated: None,
        },
    };
    rows.push(recommended);
    rows
}

/// Ties within this many points of LAR count as reached: the estimator's resolution.
pub const LAR_TOLERANCE: f64 = 0.005;

/// A recommended placement more than this much slower (modelled) than first touch is worse.
pub const WORSE_TOLERANCE: f64 = 0.02;

fn find<'a>(rows: &'a [Row], workload: &str, stem: &str) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.workload == workload && r.stem == stem)
}

fn measured<'a>(rows: &'a [Row], workload: &str, stem: &str) -> Option<&'a Measured> {
    find(rows, workload, stem).and_then(Row::measured)
}

fn cell(text: &str) -> String {
    text.replace('|', "/").replace('\n', " ")
}

/// The table of one guest, as markdown (it reads as well on a terminal).
pub fn render(title: &str, rows: &[Row]) -> String {
    let mut out = format!(
        "## {title}\n\nMeasured placement (exact counts × where threads and pages were over \
         time), and the simulator's memory time of that placement on the recorded machine.\n\n\
         | workload | condition | LAR | imbalance | pages migrated | moves seen by scans | \
         time to good | modelled | vs first-touch |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        let ft = measured(rows, &r.workload, "first-touch").map(|m| m.modelled_s);
        let cells: Vec<String> = match &r.outcome {
            RunOutcome::Measured(m) => {
                let moved = match r.kernel_migrated {
                    Some(k) => format!("{k} (kernel)"),
                    None if r.stem == "linux" => "? (kernel)".into(),
                    None => m.numalens_moved_pages.to_string(),
                };
                // Time to good placement where something moved pages while the program ran.
                let dynamic = if r.stem == "linux" || r.label.contains("Linux") {
                    r.kernel_migrated.unwrap_or(0) > 0 || m.moves_seen > 0
                } else {
                    m.numalens_moved_pages > 0
                };
                vec![
                    m.lar.map_or("-".into(), |l| format!("{:.1} %", l * 100.0)),
                    m.imbalance.map_or("-".into(), |i| format!("{i:.2}")),
                    moved,
                    m.moves_seen.to_string(),
                    match m.time_to_good_s {
                        Some(t) if dynamic => format!("{t:.2} s"),
                        _ => "-".into(),
                    },
                    format!("{:.3} s", m.modelled_s),
                    ft.filter(|_| m.modelled_s > 0.0)
                        .map_or("-".into(), |f| format!("{:.2}×", f / m.modelled_s)),
                ]
            }
            RunOutcome::Unavailable(why) => {
                let mut v = vec![format!("n/a ({why})")];
                v.resize(7, String::new());
                v
            }
            RunOutcome::Failed(why) => {
                let mut v = vec![format!("failed: {}", cell(why))];
                v.resize(7, String::new());
                v
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            r.workload,
            cell(&r.label),
            cells.join(" | ")
        );
    }
    let notes: Vec<String> = rows
        .iter()
        .filter_map(|r| Some((r, r.measured()?)))
        .flat_map(|(r, m)| {
            let mut notes = m.notes.clone();
            if r.stem == "linux" && m.numa_balancing != Some(1) {
                notes.push(format!(
                    "kernel.numa_balancing was {:?} during the run, not 1",
                    m.numa_balancing
                ));
            }
            if r.stem != "linux" && m.numa_balancing.is_some_and(|b| b != 0) {
                notes.push(format!(
                    "kernel.numa_balancing was {} during the run",
                    m.numa_balancing.unwrap_or(0)
                ));
            }
            notes
                .into_iter()
                .map(move |n| format!("- {} / {}: {n}", r.workload, r.label))
        })
        .collect();
    if let Some((noise, runs)) = modelled_noise(rows) {
        let _ = writeln!(
            out,
            "\nRun-to-run noise of the modelled time: the {runs} run(s) whose measured placement \
             is first touch's model within {:.1} % of it.",
            noise * 100.0
        );
    }
    if !notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in notes {
            let _ = writeln!(out, "{n}");
        }
    }
    out
}

/// Two runs whose measured placements agree: LAR within [`LAR_TOLERANCE`], imbalance within
/// 0.02, and no page moved by numalens or the kernel in the second.
fn same_placement(run: &Row, m: &Measured, first_touch: &Measured) -> bool {
    let close = |a: Option<f64>, b: Option<f64>, d: f64| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= d,
        _ => false,
    };
    run.stem != "linux"
        && m.numalens_moved_pages == 0
        && close(m.lar, first_touch.lar, LAR_TOLERANCE)
        && close(m.imbalance, first_touch.imbalance, 0.02)
}

/// Run-to-run noise of the modelled time: the largest relative difference from first touch's
/// among the other runs of the guest whose measured placement is first touch's (same
/// placement, another run: the difference is the recorded timing's, e.g. threads progressing
/// unevenly under emulation), with the number of such runs. `None` without any.
pub fn modelled_noise(rows: &[Row]) -> Option<(f64, usize)> {
    let mut deviations = Vec::new();
    for r in rows.iter().filter(|r| r.stem != "first-touch") {
        let (Some(m), Some(ft)) = (r.measured(), measured(rows, &r.workload, "first-touch")) else {
            continue;
        };
        if same_placement(r, m, ft) && ft.modelled_s > 0.0 {
            deviations.push((m.modelled_s / ft.modelled_s - 1.0).abs());
        }
    }
    let max = deviations
        .iter()
        .copied()
        .fold(None, |a: Option<f64>, d| Some(a.map_or(d, |a| a.max(d))))?;
    Some((max, deviations.len()))
}

/// Met, not met, or not measurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    NotMet,
    NotApplicable,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Met => "met",
            Verdict::NotMet => "not met",
            Verdict::NotApplicable => "n/a",
        })
    }
}

/// One target's verdict with its evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
}

/// The online rows of a workload that were measured.
fn online<'a>(rows: &'a [Row], workload: &str) -> Vec<(&'a Row, &'a Measured)> {
    rows.iter()
        .filter(|r| r.workload == workload && r.online)
        .filter_map(|r| Some((r, r.measured()?)))
        .collect()
}

/// Why a workload's online rows are all missing: the first one's reason.
fn online_missing(rows: &[Row], workload: &str) -> String {
    let reason = rows
        .iter()
        .filter(|r| r.workload == workload && r.online)
        .find_map(|r| match &r.outcome {
            RunOutcome::Unavailable(why) => Some(why.clone()),
            RunOutcome::Failed(why) => Some(format!("failed: {why}")),
            RunOutcome::Measured(_) => None,
        });
    reason.unwrap_or_else(|| "not run".into())
}

/// The targets, on the rows of one guest:
/// 1. on master-init, private-blocks and stencil, numalens' best online policy (highest LAR)
///    reaches Linux's LAR and 0.9 × the oracle plan's (ties within [`LAR_TOLERANCE`]);
/// 2. on shared-hot-rw, its best online policy (lowest imbalance) has a lower node imbalance
///    than first touch;
/// 3. on no workload is the recommended policy's measured placement worse than first touch:
///    its modelled time more than [`WORSE_TOLERANCE`] or the guest's run-to-run noise
///    ([`modelled_noise`]), whichever is larger, above first touch's.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    let has = |w: &str| rows.iter().any(|r| r.workload == w);
    for w in ["master-init", "private-blocks", "stencil"]
        .into_iter()
        .filter(|w| has(w))
    {
        let name = format!("{w}: best online LAR ≥ Linux's and ≥ 0.9 × oracle plan's");
        let best = online(rows, w)
            .into_iter()
            .filter_map(|(r, m)| Some((r, m.lar?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let linux = measured(rows, w, "linux").and_then(|m| m.lar);
        let oracle = measured(rows, w, "plan-oracle").and_then(|m| m.lar);
        let (verdict, detail) = match (best, linux, oracle) {
            (None, _, _) => (Verdict::NotApplicable, online_missing(rows, w)),
            (Some((r, b)), Some(l), Some(o)) => (
                if b + LAR_TOLERANCE >= l && b + LAR_TOLERANCE >= 0.9 * o {
                    Verdict::Met
                } else {
                    Verdict::NotMet
                },
                format!(
                    "{} {:.1} % vs Linux {:.1} % and 0.9 × oracle {:.1} %{}",
                    r.label,
                    b * 100.0,
                    l * 100.0,
                    0.9 * o * 100.0,
                    if b + LAR_TOLERANCE >= l.max(0.9 * o) && b < l.max(0.9 * o) {
                        format!(
                            " (below by less than {:.1} points: a tie)",
                            LAR_TOLERANCE * 100.0
                        )
                    } else {
                        String::new()
                    }
                ),
            ),
            _ => (
                Verdict::NotApplicable,
                "Linux's or the oracle plan's run is missing".into(),
            ),
        };
        out.push(Target {
            name,
            verdict,
            detail,
        });
    }
    if has("shared-hot-rw") {
        let w = "shared-hot-rw";
        let best = online(rows, w)
            .into_iter()
            .filter_map(|(r, m)| Some((r, m.imbalance?)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let ft = measured(rows, w, "first-touch").and_then(|m| m.imbalance);
        let (verdict, detail) = match (best, ft) {
            (None, _) => (Verdict::NotApplicable, online_missing(rows, w)),
            (Some((r, b)), Some(f)) => (
                if b < f { Verdict::Met } else { Verdict::NotMet },
                format!("{} {b:.2} vs first-touch {f:.2}", r.label),
            ),
            (Some(_), None) => (Verdict::NotApplicable, "first-touch run missing".into()),
        };
        out.push(Target {
            name: format!("{w}: best online node imbalance < first-touch's"),
            verdict,
            detail,
        });
    }
    let noise = modelled_noise(rows);
    let tolerance = noise.map_or(WORSE_TOLERANCE, |(n, _)| n.max(WORSE_TOLERANCE));
    let mut workloads: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    let mut worse = Vec::new();
    let mut beyond_strict = Vec::new();
    let mut judged = Vec::new();
    let mut missing = Vec::new();
    for w in workloads {
        match (
            find(rows, w, "recommended"),
            measured(rows, w, "first-touch"),
        ) {
            (Some(r), Some(f)) => match r.measured() {
                Some(m) => {
                    let ratio = m.modelled_s / f.modelled_s.max(1e-12);
                    let policy = r.label.trim_start_matches("recommended: ");
                    judged.push(format!("{w} {policy} {:.2}×", 1.0 / ratio.max(1e-12)));
                    let slower = format!("{w} ({policy}: {:+.1} %)", (ratio - 1.0) * 100.0);
                    if ratio > 1.0 + tolerance {
                        worse.push(slower);
                    } else if ratio > 1.0 + WORSE_TOLERANCE {
                        beyond_strict.push(slower);
                    }
                }
                None => missing.push(w.to_string()),
            },
            _ => missing.push(w.to_string()),
        }
    }
    let verdict = if !worse.is_empty() {
        Verdict::NotMet
    } else if judged.is_empty() {
        Verdict::NotApplicable
    } else {
        Verdict::Met
    };
    let mut detail = if worse.is_empty() {
        format!("speedups vs first-touch: {}", judged.join(", "))
    } else {
        format!("worse on {}", worse.join(", "))
    };
    if !beyond_strict.is_empty() {
        let _ = write!(
            detail,
            "; slower than first-touch by more than {:.0} % but within the noise: {}",
            WORSE_TOLERANCE * 100.0,
            beyond_strict.join(", ")
        );
    }
    if !missing.is_empty() {
        let _ = write!(detail, "; not measured on {}", missing.join(", "));
    }
    let basis = match noise {
        Some((n, runs)) => format!(
            "{:.1} % tolerance: {:.0} % or the run-to-run noise, {:.1} % over {runs} run(s) \
             whose measured placement is first touch's",
            tolerance * 100.0,
            WORSE_TOLERANCE * 100.0,
            n * 100.0
        ),
        None => format!("{:.0} % tolerance", tolerance * 100.0),
    };
    out.push(Target {
        name: format!(
            "recommended policy never worse than first-touch (modelled time of the measured \
             placement; {basis})"
        ),
        verdict,
        detail,
    });
    out
}

/// The targets as text lines.
pub fn render_targets(targets: &[Target]) -> String {
    let mut out = String::from("\nTargets:\n");
    for t in targets {
        let _ = writeln!(out, "- {}: {} — {}", t.verdict, t.name, t.detail);
    }
    out
}
