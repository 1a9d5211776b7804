//! `numalens-vm-placement`: the table of bench/vm-placement. Reads the runs a guest brought back
//! (`RESULTS/<workload>/<condition>.numalens`, `<workload>/linux.vmstat` with the kernel's
//! migrated pages, `<workload>/simulate.txt` with numalens' recommendation), measures each
//! placement (numalens_testbed::placement) and prints one row per workload and condition, the
//! issue's targets met or not, and the same table as markdown.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Parser;
use numalens_testbed::placement::{Measured, measure};

/// The conditions, in the table's order: (file stem, label).
const CONDITIONS: &[(&str, &str)] = &[
    ("first-touch", "first-touch"),
    ("interleave", "interleave all"),
    ("linux", "Linux NUMA balancing"),
    ("plan-marathe-hop", "plan marathe-hop"),
    ("plan-kmaf", "plan kmaf"),
    ("plan-oracle", "plan oracle"),
    ("online-carrefour", "online carrefour"),
    ("online-kmaf", "online kmaf"),
    ("online-spm", "online spm"),
    ("recommended", "recommended"),
];

#[derive(Parser, Debug)]
#[command(about = "Measure the placements a bench/vm-placement guest brought back")]
struct Args {
    /// The guest's results directory.
    results: PathBuf,
    /// The guest's name, for the title.
    #[arg(long, default_value = "guest")]
    guest: String,
    /// Also write the table as markdown here.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

struct Row {
    workload: String,
    condition: &'static str,
    measured: Result<Measured, String>,
    kernel_migrated: Option<u64>,
}

fn main() {
    let args = Args::parse();
    let mut rows = Vec::new();
    let mut recommended = BTreeMap::new();
    for workload in workloads(&args.results) {
        let dir = args.results.join(&workload);
        recommended.insert(workload.clone(), recommendation(&dir));
        for (stem, label) in CONDITIONS {
            let profile = dir.join(format!("{stem}.numalens"));
            if !profile.exists() {
                continue;
            }
            rows.push(Row {
                workload: workload.clone(),
                condition: label,
                measured: measure(&profile),
                kernel_migrated: (*stem == "linux")
                    .then(|| read_number(&dir.join("linux.vmstat")))
                    .flatten(),
            });
        }
    }
    let table = render(&args.guest, &rows, &recommended);
    print!("{table}");
    let targets = targets(&rows);
    print!("{targets}");
    if let Some(path) = &args.markdown {
        let _ = std::fs::write(path, format!("{table}\n{targets}"));
    }
}

fn workloads(results: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(results)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("first-touch.numalens").exists())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .collect();
    names.sort();
    names
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `Best policy: NAME (…)` of `numalens simulate`.
fn recommendation(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("simulate.txt")).ok()?;
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Best policy:"))?;
    Some(
        line.split(':')
            .nth(1)?
            .split_whitespace()
            .next()?
            .to_string(),
    )
}

fn render(guest: &str, rows: &[Row], recommended: &BTreeMap<String, Option<String>>) -> String {
    let mut out = format!(
        "\n{guest}: measured placement (exact counts × page locations over time), modelled time \
         of that placement\n\n| workload | condition | LAR | imbalance | pages migrated | \
         time to good | modelled | vs first-touch |\n|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        let ft = rows
            .iter()
            .find(|x| x.workload == r.workload && x.condition == "first-touch")
            .and_then(|x| x.measured.as_ref().ok())
            .map(|m| m.modelled_s);
        let label = match (r.condition, recommended.get(&r.workload).cloned().flatten()) {
            ("recommended", Some(p)) => format!("recommended ({p})"),
            (c, _) => c.to_string(),
        };
        let _ = match &r.measured {
            Ok(m) => writeln!(
                out,
                "| {} | {label} | {:.1} % | {:.2} | {} | {} | {:.1} ms | {} |",
                r.workload,
                m.lar * 100.0,
                m.imbalance,
                match r.kernel_migrated {
                    Some(k) => format!("{k} (kernel)"),
                    None => m.pages_migrated.to_string(),
                },
                m.time_to_good_s
                    .filter(|_| m.pages_migrated > 0)
                    .map_or("-".into(), |t| format!("{t:.2} s")),
                m.modelled_s * 1e3,
                ft.map_or("-".into(), |f| format!(
                    "{:.2}×",
                    f / m.modelled_s.max(1e-12)
                )),
            ),
            Err(e) => writeln!(out, "| {} | {label} | n/a: {e} | | | | | |", r.workload),
        };
    }
    out
}

fn lar(rows: &[Row], workload: &str, condition: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.workload == workload && r.condition == condition)
        .and_then(|r| r.measured.as_ref().ok())
        .map(|m| m.lar)
}

fn targets(rows: &[Row]) -> String {
    let mut out = String::from("\nTargets\n");
    for w in ["master-init", "private-blocks", "stencil"] {
        let best = ["online carrefour", "online kmaf", "online spm"]
            .iter()
            .filter_map(|c| lar(rows, w, c).map(|l| (c, l)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let linux = lar(rows, w, "Linux NUMA balancing");
        let oracle = lar(rows, w, "plan oracle");
        let verdict = match (best, linux, oracle) {
            (Some((c, b)), Some(l), Some(o)) => format!(
                "{}: best online {c} {:.1} % vs Linux {:.1} % and 0.9 × oracle {:.1} %",
                if b >= l && b >= 0.9 * o {
                    "met"
                } else {
                    "not met"
                },
                b * 100.0,
                l * 100.0,
                0.9 * o * 100.0
            ),
            _ => "n/a (a run is missing)".into(),
        };
        let _ = writeln!(out, "- {w}: {verdict}");
    }
    let imbalance = |c: &str| {
        rows.iter()
            .find(|r| r.workload == "shared-hot-rw" && r.condition == c)
            .and_then(|r| r.measured.as_ref().ok())
            .map(|m| m.imbalance)
    };
    let best_online = ["online carrefour", "online kmaf", "online spm"]
        .iter()
        .filter_map(|c| imbalance(c))
        .min_by(f64::total_cmp);
    let _ = match (best_online, imbalance("first-touch")) {
        (Some(o), Some(f)) => writeln!(
            out,
            "- shared-hot-rw imbalance: {}: best online {o:.2} vs first-touch {f:.2}",
            if o < f { "met" } else { "not met" }
        ),
        _ => writeln!(out, "- shared-hot-rw imbalance: n/a"),
    };
    let mut worse = Vec::new();
    for r in rows.iter().filter(|r| r.condition == "recommended") {
        let ft = rows
            .iter()
            .find(|x| x.workload == r.workload && x.condition == "first-touch")
            .and_then(|x| x.measured.as_ref().ok());
        if let (Ok(m), Some(f)) = (&r.measured, ft)
            && m.modelled_s > f.modelled_s * 1.001
        {
            worse.push(r.workload.clone());
        }
    }
    let _ = writeln!(
        out,
        "- recommended never worse than first-touch (modelled time of the measured placement): {}",
        if worse.is_empty() {
            "met".to_string()
        } else {
            format!("not met on {}", worse.join(", "))
        }
    );
    out
}
