//! `numalens-vm`: boots one test-bed guest for a numalens topology, runs one scenario script and
//! prints one `PASS name` / `FAIL name: why` line per test the scenario reported (its
//! `$OUT/results.txt`), plus the guest-level checks. Exit status 0 when everything passed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use numalens_testbed::view::differences;
use numalens_testbed::{Guest, GuestOutcome, GuestSpec, ScaleOptions, Scenario, Thp, TopologyView};

#[derive(Parser, Debug)]
#[command(about = "Run a scenario in a QEMU guest with the NUMA layout of a numalens topology")]
struct Args {
    /// Scenario shell script, run by busybox sh in the guest with $OUT for result files.
    scenario: PathBuf,
    /// numalens topology preset (machine-a, machine-b, machine-c, ...).
    #[arg(long, conflicts_with = "topology")]
    preset: Option<String>,
    /// Topology JSON file, as `numalens topology --json` prints it.
    #[arg(long)]
    topology: Option<PathBuf>,
    #[arg(long, value_parser = ["always", "madvise", "never"], default_value = "never")]
    thp: String,
    /// kernel.numa_balancing: 0, 1 or 2.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=2))]
    numa_balancing: u8,
    /// numa_balancing=1 with scan tunables fast enough to see migration in seconds.
    #[arg(long)]
    fast_balancing: bool,
    /// debugfs sched/numa_balancing tunable, NAME=VALUE (repeatable).
    #[arg(long = "tunable", value_name = "NAME=VALUE")]
    tunables: Vec<String>,
    /// Seconds before the guest is killed.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    #[arg(long, default_value_t = 1)]
    vcpus_per_node: u32,
    #[arg(long, default_value_t = 8)]
    max_vcpus: u32,
    #[arg(long, default_value_t = 2048)]
    memory_mib: u64,
    /// Host executable copied to the guest's /bin with its libraries (repeatable).
    #[arg(long = "bin")]
    binaries: Vec<PathBuf>,
    /// Host shared object copied to the guest's /lib with its libraries (repeatable).
    #[arg(long = "lib")]
    libraries: Vec<PathBuf>,
    /// Copy binaries with their debug sections (default: stripped, for a faster boot).
    #[arg(long)]
    no_strip: bool,
    /// HOST_PATH:GUEST_PATH file copied into the guest (repeatable).
    #[arg(long = "file")]
    files: Vec<String>,
    /// Directory receiving the scenario's files and the console log.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Prefix of the printed test names (default: topology name and settings).
    #[arg(long)]
    label: Option<String>,
    /// Compare the guest's `numalens topology --json` ($OUT/topology.json) with the spec.
    #[arg(long)]
    check_topology: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("FAIL {}/guest: {e}", label(&args, None));
            ExitCode::FAILURE
        }
    }
}

fn label(args: &Args, spec: Option<&GuestSpec>) -> String {
    if let Some(l) = &args.label {
        return l.clone();
    }
    let name = spec.map(|s| s.name.clone()).unwrap_or_else(|| {
        args.preset
            .clone()
            .unwrap_or_else(|| "topology".to_string())
    });
    let nb = spec
        .map(|s| s.numa_balancing)
        .unwrap_or(args.numa_balancing);
    format!("{name}/thp-{}/nb-{nb}", args.thp)
}

fn run(args: &Args) -> Result<bool, String> {
    let view = load_topology(args)?;
    let scale = ScaleOptions {
        vcpus_per_node: args.vcpus_per_node,
        max_vcpus: args.max_vcpus,
        memory_mib: args.memory_mib,
    };
    let (spec, notes) = GuestSpec::from_view(&view, &scale).map_err(|e| e.to_string())?;
    let spec = configure(spec, args)?;
    for n in &notes {
        println!("# {}: {n}", spec.name);
    }
    let label = label(args, Some(&spec));
    let scenario = Scenario::from_file(&args.scenario).map_err(|e| e.to_string())?;
    let guest = Guest {
        spec: spec.clone(),
        work_dir: args.out.clone(),
    };
    let outcome = guest.run(&scenario).map_err(|e| e.to_string())?;
    println!(
        "# {label}: boot to scenario {}, whole guest {:.1} s, {} vCPUs, {} MiB; logs in {}",
        outcome
            .boot_time
            .map(|d| format!("{:.1} s", d.as_secs_f64()))
            .unwrap_or_else(|| "unknown".into()),
        outcome.wall_time.as_secs_f64(),
        spec.vcpus(),
        spec.memory_mib(),
        outcome.work_dir.display()
    );
    save_files(&outcome)?;
    Ok(report(args, &spec, &label, &outcome))
}

fn configure(mut spec: GuestSpec, args: &Args) -> Result<GuestSpec, String> {
    spec.thp = match args.thp.as_str() {
        "always" => Thp::Always,
        "madvise" => Thp::Madvise,
        _ => Thp::Never,
    };
    if args.fast_balancing {
        spec.fast_balancing();
    }
    if args.numa_balancing != 0 || !args.fast_balancing {
        spec.numa_balancing = args.numa_balancing;
    }
    for t in &args.tunables {
        let (k, v) = t
            .split_once('=')
            .ok_or_else(|| format!("--tunable {t}: expected NAME=VALUE"))?;
        spec.balancing_tunables.retain(|(name, _)| name != k);
        spec.balancing_tunables.push((k.to_string(), v.to_string()));
    }
    spec.timeout = Duration::from_secs(args.timeout);
    spec.binaries = args.binaries.clone();
    spec.strip_binaries = !args.no_strip;
    spec.libraries = args.libraries.clone();
    for f in &args.files {
        let (h, g) = f
            .split_once(':')
            .ok_or_else(|| format!("--file {f}: expected HOST_PATH:GUEST_PATH"))?;
        spec.files.push((PathBuf::from(h), g.to_string()));
    }
    Ok(spec)
}

fn load_topology(args: &Args) -> Result<TopologyView, String> {
    if let Some(path) = &args.topology {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading topology {}: {e}", path.display()))?;
        return TopologyView::from_json(&text).map_err(|e| e.to_string());
    }
    let preset = args
        .preset
        .as_deref()
        .ok_or("give --preset NAME or --topology FILE")?;
    // The preset error already lists the known presets.
    let topology = numalens_topology::presets::preset(preset)
        .map_err(|e| format!("unknown topology preset {preset:?}: {e}"))?;
    Ok(TopologyView::from_topology(&topology))
}

fn save_files(outcome: &GuestOutcome) -> Result<(), String> {
    let dir = &outcome.work_dir;
    for (name, data) in &outcome.files {
        // Names are relative paths (checked by the framing parser); a profile is a directory.
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, data).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Prints the test lines; true when all passed.
fn report(args: &Args, spec: &GuestSpec, label: &str, outcome: &GuestOutcome) -> bool {
    let mut lines = Vec::new();
    if let Some(results) = outcome.file_text("results.txt") {
        for l in results.lines().filter(|l| !l.trim().is_empty()) {
            let (verdict, rest) = l.split_once(' ').unwrap_or((l, ""));
            lines.push((verdict == "PASS", format!("{label}/{rest}")));
        }
    }
    if args.check_topology {
        lines.push(check_topology(spec, label, outcome));
    }
    if outcome.exit_status != 0 && lines.iter().all(|(ok, _)| *ok) {
        lines.push((
            false,
            format!("{label}/scenario: exit status {}", outcome.exit_status),
        ));
    }
    if lines.is_empty() {
        lines.push((false, format!("{label}/scenario: reported no test")));
    }
    for (ok, text) in &lines {
        println!("{} {text}", if *ok { "PASS" } else { "FAIL" });
    }
    let all_ok = lines.iter().all(|(ok, _)| *ok);
    if !all_ok {
        print_failure_context(outcome);
    }
    all_ok
}

fn check_topology(spec: &GuestSpec, label: &str, outcome: &GuestOutcome) -> (bool, String) {
    let name = format!("{label}/numalens-topology");
    let Some(text) = outcome.file_text("topology.json") else {
        return (false, format!("{name}: the guest wrote no topology.json"));
    };
    match TopologyView::from_json(&text) {
        Ok(actual) => {
            let d = differences(&spec.expected_view(), &actual);
            if d.is_empty() {
                (true, name)
            } else {
                (false, format!("{name}: {}", d.join("; ")))
            }
        }
        Err(e) => (false, format!("{name}: {e}")),
    }
}

fn print_failure_context(outcome: &GuestOutcome) {
    let log = Path::new(&outcome.work_dir).join("console.log");
    println!("# console tail ({}):", log.display());
    for l in outcome.console_tail().lines() {
        println!("#   {l}");
    }
}
