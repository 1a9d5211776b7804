//! Command-line definitions (clap derive). Options are turned into plain values by the commands.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// numalens: where a program's memory accesses go on a NUMA machine, what is wrong with that
/// placement, and how to fix it.
#[derive(Debug, Parser)]
#[command(
    name = "numalens",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the NUMA topology of this machine, of a preset, or of a JSON file.
    Topology(TopologyArgs),
    /// Run a program and record where its memory accesses go into a profile.
    Record(RecordArgs),
    /// Show what a profile says: findings, top objects, threads, memory nodes, how the run went.
    Report(ReportArgs),
    /// Write the profile of a recording whose recorder was killed, from what it left on disk.
    Recover(RecoverArgs),
    /// Turn a perf.data recording (`perf mem record`, `perf c2c record`, `perf record -d`) into
    /// a profile.
    Import(ImportArgs),
    /// Write the aggregated tables of a profile's analysis as CSV or JSON files.
    Export(ExportArgs),
    /// Predict what each placement policy would give on a NUMA machine, side by side.
    Simulate(SimulateArgs),
    /// Write a placement plan (JSON, docs/PLAN.md) made by one policy, for a later run to apply.
    Plan(PlanArgs),
    /// Run a program with its memory and threads placed: a plan applied as objects appear
    /// (`--plan`), or an online policy moving pages while it runs (`--policy`); also records it.
    Run(RunArgs),
    /// Run the main job on a bundled example and write a profile.
    Demo(DemoArgs),
    /// C compiler wrapper: builds for `record --backend inst` (e.g. `make CC="numalens cc"`).
    #[command(name = "cc", disable_help_flag = true)]
    Cc(WrapperArgs),
    /// C++ compiler wrapper: builds for `record --backend inst` (`CXX="numalens c++"`).
    #[command(name = "c++", disable_help_flag = true)]
    Cxx(WrapperArgs),
    /// Fortran compiler wrapper: builds for `record --backend inst` (`FC="numalens fortran"`).
    #[command(name = "fortran", disable_help_flag = true)]
    Fortran(WrapperArgs),
}

/// Where a topology comes from: this machine unless a preset or a file is given.
#[derive(Debug, Args)]
pub struct TopologySource {
    /// A built-in machine model; `--preset list` lists them.
    #[arg(long, value_name = "NAME", conflicts_with = "topology")]
    pub preset: Option<String>,
    /// A topology JSON file (see docs/TOPOLOGY.md).
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub source: TopologySource,
    /// Print JSON (the topology schema) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Where the accesses come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// The best the program and machine allow: `inst` for a program built with `numalens cc`,
    /// else `pmu` where the CPU has a precise memory event, else page faults (allocation
    /// tracking only if perf is denied).
    Auto,
    /// Page-fault sampling (perf software event): works in VMs and containers.
    Faults,
    /// Allocation and thread tracking only, no access samples.
    None,
    /// Every access of a program built with `numalens cc`/`c++`/`fortran`: exact per-page counts
    /// and/or sampled accesses (see --inst-mode), plus page faults when perf allows.
    Inst,
    /// Precise hardware sampling of loads and stores with their data source, latency and node
    /// (Intel PEBS load latency and stores, AMD IBS op, Arm SPE through its AUX area), plus
    /// page faults for first touches.
    Pmu,
}

/// What the `inst` backend records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InstModeArg {
    /// Per-thread reads, writes and first access of every page.
    Exact,
    /// Every Nth access of each thread (--sample-every) as a sample.
    Sampled,
    /// Both.
    Both,
}

/// Arguments handed to the real compiler, with the instrumentation flags added.
#[derive(Debug, Args)]
pub struct WrapperArgs {
    /// Compiler arguments, passed through.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub recording: RecordingArgs,
    /// The program to run, then its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub command: Vec<std::ffi::OsString>,
}

/// The online engine's thread's nice value unless `--engine-nice` says otherwise: measured in
/// the emulated 4-node guest, where the engine at the program's priority took its 200 ms
/// epochs up to 2.6 s late (docs/PLACEMENT.md).
pub const DEFAULT_ENGINE_NICE: i32 = -10;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("placement").required(true).args(["plan", "policy"])))]
pub struct RunArgs {
    /// Apply this plan (from `numalens plan`): each object rule when its object is allocated
    /// (statics before main), each thread rule when its thread starts.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Place online while the program runs: carrefour, kmaf, spm or tiering.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// The online engine on this running process instead of a program started here.
    #[arg(long, value_name = "PID", requires = "policy", conflicts_with = "plan")]
    pub pid: Option<u32>,
    /// Apply a plan made for another build of the program or another machine (nodes mapped by
    /// position): only the rules that still match take effect.
    #[arg(long)]
    pub force: bool,
    /// The kernel's own NUMA balancing during the run: `off` switches it off and restores it
    /// afterwards (needs root), `keep` leaves it as it is.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = KernelBalancingArg::Keep)]
    pub kernel_balancing: KernelBalancingArg,
    /// How often the online engine decides (e.g. `500ms`, `1s`).
    #[arg(long, value_name = "DURATION", value_parser = duration, default_value = "1s")]
    pub epoch: std::time::Duration,
    /// Most the online engine migrates, in MB per second (0: no limit).
    #[arg(long, value_name = "MB_PER_S", default_value_t = 512.0)]
    pub rate_limit: f64,
    /// Mover threads of the online engine, each taking its own jobs (the most used pages
    /// first) and making their `move_pages` calls, so that several calls are made at once
    /// (each copies its pages on the CPU it runs on); the rate limit is one budget for all. A
    /// plan's timed moves use one.
    #[arg(long, value_name = "N", default_value_t = numalens_apply::migrate::DEFAULT_MOVERS as u16,
          value_parser = clap::value_parser!(u16).range(1..=64), conflicts_with = "plan")]
    pub movers: u16,
    /// The nice value of the online engine's thread (the recorder's loop: it reads the samples,
    /// decides at each epoch and hands the movers their jobs), -20 to 19. Below the current one
    /// needs CAP_SYS_NICE (root); refused, the engine runs at numalens' own and says so. The
    /// program's threads and the movers keep theirs. At the program's priority, the engine's
    /// turns wait behind the program's busy threads and its epochs come late (docs/PLACEMENT.md).
    #[arg(long, value_name = "NICE", allow_hyphen_values = true, default_value_t = DEFAULT_ENGINE_NICE,
          value_parser = clap::value_parser!(i32).range(-20..=19), conflicts_with = "plan")]
    pub engine_nice: i32,
    /// The nice value of the online engine's mover threads (-20 to 19; below numalens' own
    /// needs CAP_SYS_NICE, refused they keep numalens' own). Not set: numalens' own.
    #[arg(long, value_name = "NICE", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19), conflicts_with = "plan")]
    pub mover_nice: Option<i32>,
    /// A parameter of the online policy, e.g. `carrefour.maptu_min=5` (its DRAM-rate gate, in
    /// accesses per µs) or `spm.observe_windows=10` (epochs observed before SPM's round);
    /// repeatable. docs/POLICIES.md lists them.
    #[arg(long = "policy-param", value_name = "GROUP.FIELD=VALUE")]
    pub policy_params: Vec<String>,
    #[command(flatten)]
    pub recording: RecordingArgs,
    /// The program to run, then its arguments.
    #[arg(
        required_unless_present = "pid",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]..."
    )]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelBalancingArg {
    Off,
    Keep,
}

/// How a program is recorded (`numalens record` and `numalens run`).
#[derive(Debug, Args)]
pub struct RecordingArgs {
    /// Where accesses come from.
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Profile directory to write (default: PROGRAM.numalens, numbered if it exists).
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Allocations of at least this many bytes are tracked with their call site (a number, or
    /// with a k, m or g suffix as in `NUMALENS_MIN_OBJECT`: `64k`).
    #[arg(long, value_name = "BYTES", default_value = "4096", value_parser = byte_size)]
    pub min_object: u64,
    /// Use this libnumalens.so instead of the embedded one.
    #[arg(long, value_name = "PATH")]
    pub runtime: Option<PathBuf>,
    /// Do not preload the runtime: page faults only, no objects or threads from the program.
    #[arg(long)]
    pub no_runtime: bool,
    /// Pages of ring buffer per CPU and event for samples (a power of two). The default, 1 MiB,
    /// recorded a million 4 KiB first touches from two threads without a loss even at 64 pages
    /// with both cores busy; each page costs about 0.7 us to set up before the program starts.
    /// `--backend pmu` opens two or three events per CPU: a program that faults in hundreds of
    /// thousands of pages a second may want 1024.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = power_of_two)]
    pub ring_pages: usize,
    /// Also ask where every data page of the program is at this interval while it runs (e.g.
    /// `500ms`, `2s`), to see pages move; a scan costs about 50 ms of CPU per GiB of memory.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    pub page_scan_interval: Option<std::time::Duration>,
    /// With `--backend pmu` (or `auto` choosing it) only: one sample per this many events
    /// (default: 500 loads or stores over 30 cycles on Intel, 65536 cycles on AMD IBS, 65536
    /// operations on Arm SPE).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_period: Option<u64>,
    /// With `--backend inst` (or `auto` on a build with `numalens cc`) only: exact counts,
    /// samples, or both (default: both).
    #[arg(long, value_enum, value_name = "MODE")]
    pub inst_mode: Option<InstModeArg>,
    /// With `--backend inst` (or `auto` on a build with `numalens cc`) only: one sample per this
    /// many accesses of each thread, on average (default: 1024).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub sample_every: Option<u32>,
    /// With `--backend inst` (or `auto` on a build with `numalens cc`) only: at most this many
    /// samples per second in each process, shared among its threads that sample, after each
    /// thread's first 8192; a thread that samples faster than its share doubles its interval
    /// until it is under, and each sample says how many accesses it stands for (default:
    /// 100000; 0: every --sample-every accesses always)
    #[arg(long, value_name = "PER_SECOND")]
    pub max_sample_rate: Option<u32>,
}

/// `250ms`, `2s`, `1.5s`: a positive duration of at least a millisecond.
fn duration(text: &str) -> Result<std::time::Duration, String> {
    let bad = || format!("`{text}` is not a duration like 500ms or 2s");
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(bad());
    };
    let seconds = number.parse::<f64>().map_err(|_| bad())? * scale;
    if !(seconds.is_finite() && seconds >= 1e-3) {
        return Err(format!("`{text}`: the interval must be at least 1ms"));
    }
    std::time::Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{text}` is too long"))
}

/// A size in bytes: digits, then optionally `k`, `m` or `g` (either case) for KiB, MiB, GiB. The
/// runtime reads `NUMALENS_MIN_OBJECT` the same way (`nl_parse_u64` in runtime/src/config.c), so
/// both take the same values.
fn byte_size(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a size in bytes like 4096, 64k or 1m");
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let shift = match &text[digits.len()..] {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        _ => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is too large"))?;
    value
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// Most ring pages per CPU: 1 GiB of 4 KiB pages. Far beyond it the kernel's refusal
/// ("Cannot allocate memory" from the first CPU's ring) did not say which option to change.
const MAX_RING_PAGES: usize = 1 << 18;

fn power_of_two(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > MAX_RING_PAGES => Err(format!(
            "`{text}` pages per CPU is more than the {MAX_RING_PAGES} allowed (1 GiB); the \
             default, 256, rarely loses a sample"
        )),
        Ok(n) if n.is_power_of_two() => Ok(n),
        _ => Err(format!("`{text}` is not a power of two (e.g. 256, 1024)")),
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The perf.data file (recorded with data addresses: `perf mem record`, `perf c2c record`,
    /// `perf record -d -e EVENT`, page faults included).
    #[arg(value_name = "PERF_DATA")]
    pub input: PathBuf,
    /// Profile directory to write (default: the file's name with `.numalens`).
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Mappings of at least this many bytes are objects of their own (a number, or with a k, m
    /// or g suffix: `64k`).
    #[arg(long, value_name = "BYTES", default_value = "4096", value_parser = byte_size)]
    pub min_object: u64,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The directory of the unfinished recording (`numalens report` names it).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The profile directory that `numalens record` wrote.
    #[arg(value_name = "PROFILE")]
    pub profile: PathBuf,
    /// Print the report model as JSON (see docs/REPORT.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the self-contained HTML report (findings, tables, charts) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// List at most this many objects.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub top: usize,
    /// Only objects with this name (exact, or else containing it) and their samples.
    #[arg(long, value_name = "NAME")]
    pub object: Option<String>,
    /// Only samples of the thread with this logical id (0 = main thread).
    #[arg(long, value_name = "N")]
    pub thread: Option<u32>,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// The machine the analysis places threads and pages on, and the sharing granularity.
#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// What-if machine: a preset name (`numalens topology --preset list`) or a topology JSON
    /// file (default: the recorded placement on a multi-node machine, else machine-a).
    #[arg(long, value_name = "PRESET|FILE")]
    pub topology: Option<String>,
    /// Block size of the thread communication matrix, a multiple of the page size (default: one
    /// page).
    #[arg(long, value_name = "BYTES")]
    pub block_size: Option<u64>,
}

/// What the policies are given: the machine, how threads spread, how time is cut.
#[derive(Debug, Args)]
pub struct WhatIfArgs {
    /// The machine: a preset name (`numalens topology --preset list`) or a topology JSON file
    /// (default: the recorded machine when it has several nodes, else machine-a).
    #[arg(long, value_name = "PRESET|FILE")]
    pub topology: Option<String>,
    /// Put N threads on each node before the next one (default: spread each process's threads
    /// evenly over the nodes with CPUs).
    #[arg(long, value_name = "N")]
    pub threads_per_node: Option<usize>,
    /// Length of the windows online policies decide at the end of, in milliseconds (default:
    /// the run's length / 32, between 1 ms and 1 s).
    #[arg(long, value_name = "MS")]
    pub window_ms: Option<f64>,
    /// A policy parameter, e.g. `kmaf.age_shift=0` (online kMAF's NUMA vectors never aged) or
    /// `spm.observe_windows=10`; repeatable, as `numalens run --policy-param`.
    /// docs/POLICIES.md lists them.
    #[arg(long = "policy-param", value_name = "GROUP.FIELD=VALUE")]
    pub policy_params: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The profile directory that `numalens record` wrote.
    #[arg(value_name = "PROFILE")]
    pub profile: PathBuf,
    /// Policies to simulate (repeat, or separate with commas; default: all). `first-touch`,
    /// the reference, is always included. `--policy list` lists them.
    #[arg(long = "policy", value_name = "POLICY", value_delimiter = ',')]
    pub policies: Vec<String>,
    /// A plan (`numalens plan`, possibly edited by hand) to simulate beside the policies, as a
    /// run that applies it would place the pages (repeat for several).
    #[arg(long = "plan", value_name = "FILE")]
    pub plans: Vec<PathBuf>,
    #[command(flatten)]
    pub what_if: WhatIfArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The profile directory that `numalens record` wrote.
    #[arg(value_name = "PROFILE")]
    pub profile: PathBuf,
    /// The policy that makes the plan (`--policy list` lists them).
    #[arg(long, value_name = "POLICY")]
    pub policy: String,
    #[command(flatten)]
    pub what_if: WhatIfArgs,
    /// Where to write the plan.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

/// Formats `numalens export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Csv,
    Json,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The profile directory that `numalens record` wrote.
    #[arg(value_name = "PROFILE")]
    pub profile: PathBuf,
    /// One file per table: `.csv` or `.json`.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Directory to write the tables into (created if missing).
    #[arg(short, long, value_name = "DIR", default_value = ".")]
    pub output: PathBuf,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The bundled workload to build, record and analyse; `--workload list` lists them with
    /// their pattern.
    #[arg(long, value_name = "NAME", default_value = "master-init")]
    pub workload: String,
    /// Profile directory to write (a previous demo profile there is replaced).
    #[arg(
        short,
        long,
        value_name = "DIR",
        default_value = "numalens-demo.numalens"
    )]
    pub output: PathBuf,
    /// HTML report to write (a previous numalens report there is replaced).
    #[arg(long, value_name = "FILE", default_value = "numalens-demo.html")]
    pub html: PathBuf,
    /// The what-if machine the analysis places threads and pages on (default: this machine
    /// when it has several nodes, else machine-a).
    #[command(flatten)]
    pub source: TopologySource,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn preset_and_file_conflict() {
        let parsed =
            Cli::try_parse_from(["numalens", "topology", "--preset", "a", "--topology", "f"]);
        assert!(parsed.is_err());
    }

    #[test]
    fn record_takes_the_program_and_its_own_flags_verbatim() {
        let cli =
            Cli::try_parse_from(["numalens", "record", "-o", "p", "./app", "-o", "--x"]).unwrap();
        let Command::Record(args) = cli.command else {
            panic!("not record")
        };
        assert_eq!(
            args.recording.output.as_deref(),
            Some(std::path::Path::new("p"))
        );
        assert_eq!(args.command, ["./app", "-o", "--x"]);
        assert!(Cli::try_parse_from(["numalens", "record"]).is_err());
        assert!(Cli::try_parse_from(["numalens", "record", "--ring-pages", "3", "x"]).is_err());
        let huge = (MAX_RING_PAGES * 2).to_string();
        assert!(Cli::try_parse_from(["numalens", "record", "--ring-pages", &huge, "x"]).is_err());
        let most = MAX_RING_PAGES.to_string();
        assert!(Cli::try_parse_from(["numalens", "record", "--ring-pages", &most, "x"]).is_ok());
    }

    #[test]
    fn sizes_take_the_runtime_s_suffixes() {
        assert_eq!(byte_size("4096"), Ok(4096));
        assert_eq!(byte_size("64k"), Ok(64 << 10));
        assert_eq!(byte_size("1M"), Ok(1 << 20));
        assert_eq!(byte_size("2g"), Ok(2 << 30));
        for bad in ["", "k", "1kb", "-1", "1.5k", " 1", "1 k", "0x10"] {
            assert!(byte_size(bad).is_err(), "{bad:?}");
        }
        assert!(
            byte_size("99999999999999999999")
                .unwrap_err()
                .contains("too large")
        );
        assert!(byte_size("17179869184g").unwrap_err().contains("too large"));
    }

    #[test]
    fn durations_are_checked_not_panicked_on() {
        assert_eq!(duration("500ms"), Ok(std::time::Duration::from_millis(500)));
        assert_eq!(duration("2s"), Ok(std::time::Duration::from_secs(2)));
        assert!(duration("1e300s").unwrap_err().contains("too long"));
        assert!(duration("infs").is_err() && duration("NaNs").is_err());
    }

    #[test]
    fn report_flags_parse() {
        let cli = Cli::try_parse_from(["numalens", "report", "p.numalens"]).unwrap();
        let Command::Report(args) = cli.command else {
            panic!("not report")
        };
        assert_eq!((args.top, args.json), (20, false));
        let cli = Cli::try_parse_from([
            "numalens", "report", "p", "--json", "--top", "3", "--object", "a", "--thread", "2",
        ])
        .unwrap();
        let Command::Report(args) = cli.command else {
            panic!("not report")
        };
        assert_eq!((args.top, args.json, args.thread), (3, true, Some(2)));
        assert_eq!(args.object.as_deref(), Some("a"));
        assert!(Cli::try_parse_from(["numalens", "report"]).is_err());
        assert!(Cli::try_parse_from(["numalens", "report", "p", "--top", "x"]).is_err());
    }

    #[test]
    fn topology_flags_parse() {
        let cli = Cli::try_parse_from(["numalens", "topology", "--preset", "machine-a", "--json"])
            .unwrap();
        let Command::Topology(args) = cli.command else {
            panic!("not topology")
        };
        assert_eq!(args.source.preset.as_deref(), Some("machine-a"));
        assert!(args.json);
    }
}
