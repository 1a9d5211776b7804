//! `numalens-vm-check`: checks a profile that `numalens record` wrote in a test-bed guest against
//! what the recorded program (`record_probe`) printed about itself. Prints one `PASS name` /
//! `FAIL name: why` line per check, like `numalens-vm`; exit status 0 when all passed. A profile
//! or probe output that cannot be read is itself a FAIL line, never a silent pass.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use numalens_testbed::check::probe::ProbeOutput;
use numalens_testbed::check::recorded::Recorded;
use numalens_testbed::check::{Check, balancing, first_touch, run_plan};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Scenario {
    /// `record_probe first-touch`: one thread per node first-touching its own blocks.
    Record,
    /// `record_probe balancing`: hinting faults and NUMA-balancing migrations.
    RecordBalancing,
    /// `numalens run --plan` of an interleave plan on `record_probe first-touch`.
    RunPlan,
}

#[derive(Parser, Debug)]
#[command(about = "Check a profile recorded in a test-bed guest against the probe's own output")]
struct Args {
    #[arg(value_enum)]
    scenario: Scenario,
    /// The profile directory the guest sent back.
    #[arg(long)]
    profile: PathBuf,
    /// What record_probe printed on stdout.
    #[arg(long)]
    probe_output: PathBuf,
    /// The guest's transparent huge page setting: with `always`, and no `page_size` column in
    /// the samples, a first-touch sample may stand for a whole 2 MiB page.
    #[arg(long, value_parser = ["always", "madvise", "never"], default_value = "never")]
    thp: String,
    /// Prefix of the printed test names.
    #[arg(long, default_value = "")]
    label: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let prefix = if args.label.is_empty() {
        String::new()
    } else {
        format!("{}/", args.label)
    };
    let checks = match run(&args) {
        Ok(checks) => checks,
        Err((name, why)) => vec![Check::new(name, false, why)],
    };
    for c in &checks {
        println!("{}", c.line(&prefix));
    }
    if checks.iter().all(|c| c.ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run(args: &Args) -> Result<Vec<Check>, (&'static str, String)> {
    let text = std::fs::read_to_string(&args.probe_output).map_err(|e| {
        (
            "probe-output",
            format!("{}: {e}", args.probe_output.display()),
        )
    })?;
    let probe = ProbeOutput::parse(&text).map_err(|e| ("probe-output", e))?;
    let recorded = Recorded::load(&args.profile).map_err(|e| ("profile-readable", e))?;
    let thp_always = args.thp == "always";
    Ok(match args.scenario {
        Scenario::Record => first_touch::checks(&recorded, &probe, thp_always),
        Scenario::RecordBalancing => balancing::checks(&recorded, &probe, thp_always),
        Scenario::RunPlan => run_plan::checks(&recorded, &probe, probe.threads.len()),
    })
}
