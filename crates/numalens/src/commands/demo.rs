//! `numalens demo`: the main job, end to end, on a bundled ground-truth workload. It builds the
//! workload with `numalens cc` (or plain `cc` when instrumentation is impossible), records it with
//! the best backend available, analyses the profile, writes the HTML report next to it and prints
//! the findings. Progress goes to stderr, results to stdout.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command as Process;

use anyhow::{Context, Result, bail};
use clap::Parser;
use numalens_analyze::{Options, ReportModel, WhatIf, analyze};
use numalens_format::Profile;
use numalens_inst::InstOptions;
use numalens_inst::toolchain::Language;
use numalens_record::launch::LaunchError;
use numalens_record::record::{RecordError, RecordOptions, SampleSource};
use numalens_record::sampler::SamplerError;
use numalens_record::session::{Recorded, record};
use numalens_workloads::{Manifest, WORKLOADS, Workload};

use super::html_target;
use super::topology::{load, use_color};
use crate::cli::{Cli, Command, DemoArgs};
use crate::exit::UsageError;

pub fn run(args: DemoArgs) -> Result<()> {
    if args.workload == "list" {
        print_workloads()?;
        return Ok(());
    }
    if args.source.preset.as_deref() == Some("list") {
        for (name, about) in numalens_topology::presets::list() {
            println!("{name:<20}  {about}");
        }
        return Ok(());
    }
    let workload = numalens_workloads::find(&args.workload)
        .map_err(|e| UsageError(format!("--workload: {e}; `--workload list` describes them")))?;
    let manifest = workload.manifest()?;
    let host = numalens_topology::host().context("reading this machine's topology from /sys")?;
    print!("{}", numalens_topology::render_text(&host, use_color()));
    io::stdout().flush()?;
    let what_if = what_if(&args)?;
    html_target::check(&args.html, "--html")?;
    replace_previous_demo(&args.output)?;

    let built = build(workload, &work_dir(workload.name))?;
    let recorded = record_workload(&built, &manifest, &args.output)?;
    let profile = Profile::open(&recorded.profile)?;
    let model = analyze(
        &profile,
        &Options {
            what_if,
            ..Options::default()
        },
    )?;
    std::fs::write(&args.html, numalens_report::html::render(&model))
        .with_context(|| format!("writing the HTML report to {}", args.html.display()))?;
    print_results(&args, &manifest, &model, host.nodes.len())
}

/// `--preset`/`--topology`: the machine the analysis places threads and pages on instead of the
/// recorded one.
fn what_if(args: &DemoArgs) -> Result<Option<WhatIf>> {
    let source = &args.source;
    let Some(name) = source
        .preset
        .clone()
        .or_else(|| source.topology.as_ref().map(|p| p.display().to_string()))
    else {
        return Ok(None);
    };
    Ok(Some(WhatIf {
        name,
        topology: load(source)?,
    }))
}

/// Each workload with the findings it is built to produce and what it does.
fn print_workloads() -> Result<()> {
    let width = WORKLOADS.iter().map(|w| w.name.len()).max().unwrap_or(0);
    let mut rows = Vec::new();
    for w in WORKLOADS {
        let manifest = w.manifest()?;
        let ids: Vec<&str> = manifest.findings.iter().map(|f| f.id.as_str()).collect();
        let pattern = if ids.is_empty() {
            "no finding (ideal placement)".to_string()
        } else {
            ids.join(", ")
        };
        rows.push((w.name, pattern, manifest.summary));
    }
    let pattern_width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let mut out = io::stdout().lock();
    for (name, pattern, summary) in rows {
        writeln!(out, "{name:<width$}  {pattern:<pattern_width$}  {summary}")?;
    }
    Ok(())
}

/// The demo may be run again and again: it replaces its own previous output, nothing else.
fn replace_previous_demo(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    match Profile::open(dir) {
        Ok(profile) if is_demo_profile(profile.meta()) => std::fs::remove_dir_all(dir)
            .with_context(|| format!("removing the previous demo profile {}", dir.display())),
        _ => Err(UsageError(format!(
            "{} exists and is not a previous demo profile; choose another --output",
            dir.display()
        ))
        .into()),
    }
}

/// A profile of a workload the demo built (`…/numalens/demo/<workload>/<variant>/<workload>`),
/// or of the synthetic generator earlier versions of the demo used.
fn is_demo_profile(meta: &numalens_format::Meta) -> bool {
    let Some(program) = meta.command.first().map(Path::new) else {
        return false;
    };
    let built_here = program.file_name().is_some_and(|name| {
        WORKLOADS.iter().any(|w| name == w.name)
            && program
                .ancestors()
                .nth(3)
                .is_some_and(|d| d.ends_with("numalens/demo"))
    });
    built_here || meta.backend.name == "synthetic"
}

/// Where the demo builds: `$XDG_CACHE_HOME/numalens/demo/<workload>` (or `~/.cache`, or the
/// temporary directory). Kept, so the sources the findings point at can be opened.
fn work_dir(workload: &str) -> PathBuf {
    numalens_preload::runtime::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("numalens")
        .join("demo")
        .join(workload)
}

struct Built {
    program: PathBuf,
    /// Built with `numalens cc`, so the `inst` backend can run it.
    instrumented: bool,
}

/// Builds with `numalens cc` (this binary's own wrapper); when the compiler cannot instrument,
/// with the plain compiler, which the `faults` backend can still record.
fn build(workload: &Workload, dir: &Path) -> Result<Built> {
    let compiler = Language::C.compiler();
    let shown = compiler.to_string_lossy().into_owned();
    let (var, _) = Language::C.compiler_variable();
    if let Err(e) = Process::new(&compiler).arg("--version").output() {
        bail!(
            "the demo builds a C program, and the C compiler `{shown}` cannot be run ({e}): \
             install one (e.g. `apt-get install gcc`) or name it with {var}"
        );
    }
    let me = std::env::current_exe().context("finding the numalens executable")?;
    eprintln!(
        "numalens: building {} with `numalens cc` (the {shown} compiler with access \
         instrumentation) in {}",
        workload.name,
        dir.display()
    );
    let wrapper = [me.into_os_string(), "cc".into()];
    match numalens_workloads::build(workload, &wrapper, &dir.join("inst")) {
        Ok(program) => {
            return Ok(Built {
                program,
                instrumented: true,
            });
        }
        Err(e) => eprintln!(
            "numalens: `numalens cc` cannot build it, so the inst backend cannot be used: {}\n\
             numalens: building with plain `{shown}` instead, for the faults backend",
            first_lines(&e, 4)
        ),
    }
    let program = numalens_workloads::build(workload, &[compiler], &dir.join("native"))?;
    Ok(Built {
        program,
        instrumented: false,
    })
}

/// The first `n` lines of an error (a failed build's message ends with the compiler's output).
fn first_lines(e: &numalens_workloads::Error, n: usize) -> String {
    let text = e.to_string();
    text.lines().take(n).collect::<Vec<_>>().join("\n  ")
}

/// Records with `inst` (exact page counts and sampled accesses) when the program is
/// instrumented, else with `faults`; without perf, allocations and threads only.
fn record_workload(built: &Built, manifest: &Manifest, output: &Path) -> Result<Recorded> {
    let args = numalens_workloads::args(manifest, &[])?;
    let mut opts = record_options(manifest)?;
    opts.program = built.program.clone().into_os_string();
    opts.args = args;
    opts.output = output.to_path_buf();
    if built.instrumented {
        opts.inst = Some(InstOptions::default());
        eprintln!(
            "numalens: recording with the inst backend (every access: exact reads and writes \
             per thread and page, plus sampled loads and stores)"
        );
    } else {
        eprintln!(
            "numalens: recording with the faults backend (first touches seen as page faults; \
             accesses themselves are not seen without instrumentation)"
        );
    }
    let command: Vec<String> = std::iter::once(&opts.program)
        .chain(&opts.args)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("numalens: running {}", command.join(" "));
    let recorded = {
        let _redirect = StdoutToStderr::new()?;
        match record(&opts) {
            Err(RecordError::Launch(LaunchError::Sampler(e @ SamplerError::Denied(_)))) => {
                eprintln!("numalens: {e}\nnumalens: recording allocations and threads only");
                opts.source = SampleSource::None;
                record(&opts)
            }
            other => other,
        }
    }?;
    for note in &recorded.notes {
        eprintln!("numalens: note: {note}");
    }
    if !recorded.exit.success() {
        bail!(
            "{} failed under the recorder ({}); its profile is in {}",
            manifest.name,
            recorded.exit,
            recorded.profile.display()
        );
    }
    let s = &recorded.summary;
    eprintln!(
        "numalens: recorded {} samples, {} exact page counts, {} objects, {} threads",
        s.samples, s.exact_pages, s.objects, s.threads
    );
    Ok(recorded)
}

/// The manifest's `record_options`, read as `numalens record` reads its command line, so they
/// mean what they mean there.
fn record_options(manifest: &Manifest) -> Result<RecordOptions> {
    let line = ["numalens", "record"]
        .into_iter()
        .map(String::from)
        .chain(manifest.record_options.iter().cloned())
        .chain([manifest.name.clone()]);
    let cli = Cli::try_parse_from(line).map_err(|e| {
        anyhow::anyhow!(
            "workloads/{}.toml: record_options {:?}: {}",
            manifest.name,
            manifest.record_options,
            e.render().to_string().trim()
        )
    })?;
    let Command::Record(args) = cli.command else {
        unreachable!("parsed as a record command line")
    };
    let mut opts = RecordOptions::new(manifest.name.clone(), Vec::new(), PathBuf::new());
    opts.min_object = args.recording.min_object;
    opts.ring_pages = args.recording.ring_pages;
    opts.page_scan_interval = args.recording.page_scan_interval;
    opts.status_line = true;
    Ok(opts)
}

/// While alive, descriptor 1 is stderr: the recorded program inherits our descriptors, and its
/// own output (a checksum line) is progress, not a result of the demo.
struct StdoutToStderr {
    saved: OwnedFd,
}

impl StdoutToStderr {
    fn new() -> io::Result<Self> {
        io::stdout().flush()?;
        let saved = io::stdout().as_fd().try_clone_to_owned()?;
        // SAFETY: both descriptors are open; dup2 only replaces descriptor 1.
        if unsafe { libc::dup2(2, 1) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        let _ = io::stdout().flush();
        // SAFETY: `saved` is an open descriptor we own; dup2 only replaces descriptor 1.
        unsafe { libc::dup2(self.saved.as_raw_fd(), 1) };
    }
}

/// The findings (the text report's own section), the placement they assume, the what-if table
/// of every placement policy, and where the profile and the HTML report are.
fn print_results(
    args: &DemoArgs,
    manifest: &Manifest,
    model: &ReportModel,
    host_nodes: usize,
) -> Result<()> {
    let text = numalens_report::render_text(model, use_color());
    let mut out = io::stdout().lock();
    write!(out, "{}", findings_section(&text))?;
    let built_for: Vec<String> = manifest
        .findings
        .iter()
        .map(|f| format!("{} on {}", f.id, f.object))
        .collect();
    let built_for = if built_for.is_empty() {
        "no finding (its placement is already ideal)".to_string()
    } else {
        built_for.join(", ")
    };
    writeln!(
        out,
        "\n{} ({}) is built to show: {built_for}",
        manifest.name, manifest.summary
    )?;
    let p = &model.placement;
    let asked = args.source.preset.is_some() || args.source.topology.is_some();
    if p.mode == "what-if" && host_nodes <= 1 && !asked {
        writeln!(
            out,
            "This machine has one NUMA node, so the analysis uses the what-if machine {} \
             ({} nodes):\n  threads  {}\n  pages    {}",
            p.topology,
            p.nodes.len(),
            p.thread_rule,
            p.page_rule
        )?;
    } else {
        writeln!(
            out,
            "Placement: {} on {} ({}).",
            p.mode, p.topology, p.reason
        )?;
    }
    if let Some(w) = &model.what_if {
        write!(out, "{}", numalens_report::render_what_if(w, use_color()))?;
    }
    writeln!(out, "\nProfile      {}", args.output.display())?;
    writeln!(out, "HTML report  {}", args.html.display())?;
    writeln!(
        out,
        "Everything else: numalens report {}",
        args.output.display()
    )?;
    out.flush()?;
    Ok(())
}

/// The findings section of the text report: its heading, then every line up to the next
/// heading (headings are the only lines that start in the first column).
fn findings_section(text: &str) -> String {
    let starts_a_section = |l: &str| l.starts_with(|c: char| !c.is_whitespace());
    let mut lines = text
        .lines()
        .skip_while(|l| !(starts_a_section(l) && l.contains("Findings (")));
    let Some(heading) = lines.next() else {
        return text.to_string();
    };
    let mut out = format!("\n{heading}\n");
    for line in lines.take_while(|l| !starts_a_section(l)) {
        out.push_str(line);
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}
