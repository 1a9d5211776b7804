//! `numalens run`: a program run with its placement applied, offline (`--plan`: the runtime
//! applies the plan's rules as objects and threads appear) or online (`--policy`: the engine
//! moves pages and threads while it runs). Either way the run is recorded, so that it can be
//! reported and compared with the run the plan came from.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use numalens_apply::rules::{self, Compiled};
use numalens_apply::timed::{TimedMoves, TimedStats};
use numalens_place::plan::Plan;
use numalens_record::record::LiveHook;
use numalens_record::session::Recorded;

use numalens_apply::balancing::{self, BalancingSwitch};

use crate::cli::{KernelBalancingArg, RunArgs};
use crate::commands::record::{
    print_summary, program_status, record_options, record_with_fallback,
};
use crate::exit::{ExitWith, UsageError};

pub fn run(args: RunArgs) -> Result<()> {
    match (&args.plan, &args.policy) {
        (Some(plan), None) => run_plan(&args, plan),
        (None, Some(policy)) => match args.pid {
            Some(pid) => crate::commands::run_online::attach(&args, policy, pid),
            None => crate::commands::run_online::launch(&args, policy),
        },
        _ => Err(UsageError("give either --plan FILE or --policy POLICY".into()).into()),
    }
}

fn run_plan(args: &RunArgs, plan_path: &Path) -> Result<()> {
    let text = std::fs::read_to_string(plan_path)
        .map_err(|e| UsageError(format!("cannot read the plan {}: {e}", plan_path.display())))?;
    let plan = Plan::from_json_str(&text, plan_path).map_err(|e| UsageError(e.to_string()))?;
    let (mut opts, backend) = record_options(&args.recording, &args.command)?;
    let program = program_path(Path::new(&opts.program));
    check_build(&plan, plan_path, &program, args.force)?;
    let host = numalens_topology::host().context("reading this machine's NUMA topology")?;
    let nodes = rules::node_map(&plan, &host, args.force).map_err(|e| ExitWith {
        status: 2,
        message: e.to_string(),
    })?;
    let compiled = rules::compile(&plan, &program, &host, &nodes);
    for note in &compiled.notes {
        eprintln!("numalens: {note}");
    }
    let rules_file = write_rules(&compiled)?;
    opts.plan_rules = Some(rules_file.clone());
    let mut timed = TimedMoves::new(&plan, &nodes, &host);
    if let Some(t) = &timed {
        eprintln!(
            "numalens: the plan's timed moves (`migrate_at`: {} of objects' pages, {} of \
             threads) are made as the run goes",
            t.stats.object_moves, t.stats.thread_moves_total
        );
    }
    let switch = kernel_balancing(args.kernel_balancing)?;
    let hook = timed.as_mut().map(|t| t as &mut dyn LiveHook);
    let recorded = record_with_fallback(opts, backend, hook);
    let _ = std::fs::remove_file(&rules_file);
    restore(switch)?;
    let recorded = recorded?;
    print_summary(&recorded);
    report_rules(&plan, &compiled, &recorded);
    if let Some(t) = &timed {
        report_timed(&t.stats);
    }
    program_status(&recorded)
}

/// What the timed moves did.
fn report_timed(s: &TimedStats) {
    let refused: u64 = s.refused.values().sum();
    let mut line = format!(
        "plan: {} of {} timed object moves made: {} pages asked, {} placed ({} were there already), {refused} refused",
        s.object_moves_made, s.object_moves, s.pages_requested, s.pages_placed, s.already_in_place
    );
    if refused > 0 {
        let by: Vec<String> = s.refused.iter().map(|(e, n)| format!("{n} {e}")).collect();
        line += &format!(" ({})", by.join(", "));
    }
    eprintln!("{line}");
    if s.thread_moves_total > 0 {
        eprintln!(
            "plan: {} of {} timed thread moves made, {} refused, {} not made (the run ended first, or their thread was never placed)",
            s.thread_moves, s.thread_moves_total, s.thread_moves_failed, s.thread_moves_unmade
        );
    }
    for (e, n) in &s.call_errors {
        eprintln!("numalens: warning: {e} ({n} times)");
    }
    if s.replications_skipped > 0 {
        eprintln!(
            "plan: {} timed replications skipped (advisory: user space cannot replicate pages)",
            s.replications_skipped
        );
    }
}

/// `--kernel-balancing off`: the kernel's NUMA balancing switched off until [`restore`], and
/// put back by a guard if numalens is killed; `keep` leaves it alone.
pub fn kernel_balancing(mode: KernelBalancingArg) -> Result<Option<BalancingSwitch>> {
    if mode == KernelBalancingArg::Keep {
        return Ok(None);
    }
    let dir = balancing::default_state_dir();
    let switched = balancing::switch_off(&dir).map_err(|e| ExitWith {
        status: 2,
        message: e.to_string(),
    })?;
    match &switched {
        Some(s) => eprintln!(
            "numalens: kernel.numa_balancing switched from {} to 0 for the run",
            s.original()
        ),
        None => eprintln!(
            "numalens: {}",
            balancing::why_not_switched(balancing::current())
        ),
    }
    Ok(switched)
}

/// Puts the kernel's NUMA balancing back as the run found it.
pub fn restore(switched: Option<BalancingSwitch>) -> Result<()> {
    if let Some(s) = switched {
        let old = s.original();
        s.restore()
            .with_context(|| format!("putting kernel.numa_balancing back to {old}"))?;
        eprintln!("numalens: kernel.numa_balancing is {old} again");
    }
    Ok(())
}

/// The program as the launcher will find it: a name without a slash is looked up in PATH.
fn program_path(program: &Path) -> PathBuf {
    if program.components().count() > 1 {
        return program.to_path_buf();
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| program.to_path_buf())
}

/// Refuses a plan made for another build of the program, unless forced.
fn check_build(plan: &Plan, plan_path: &Path, program: &Path, force: bool) -> Result<()> {
    let name = |p: &Path| p.file_name().map(|n| n.to_owned());
    let Some(planned) = plan
        .made_from
        .build_ids
        .iter()
        .find(|b| name(Path::new(&b.module)) == name(program))
    else {
        return Ok(());
    };
    let actual = numalens_place::plan::read_build_id(program).unwrap_or_else(|| "none".into());
    if actual == planned.build_id {
        return Ok(());
    }
    let error = numalens_apply::ApplyError::OtherBuild {
        plan: plan_path.to_path_buf(),
        program: program.display().to_string(),
        planned: planned.build_id.clone(),
        actual,
    };
    if force {
        eprintln!("numalens: warning (--force): {error}");
        return Ok(());
    }
    Err(ExitWith {
        status: 2,
        message: error.to_string(),
    }
    .into())
}

/// The rules file, where the program's processes can read it: a new file (never one that
/// exists, nor a link someone left at the name).
fn write_rules(compiled: &Compiled) -> Result<PathBuf> {
    use std::io::Write;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path =
        std::env::temp_dir().join(format!("numalens-rules-{}-{stamp}.bin", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| f.write_all(&compiled.bytes))
        .with_context(|| format!("cannot write the plan's rules to {}", path.display()))?;
    Ok(path)
}

/// Which rules the run applied, from the profile it wrote; a rule that matched nothing is a
/// warning with the run's closest objects.
fn report_rules(plan: &Plan, compiled: &Compiled, recorded: &Recorded) {
    let read = numalens_format::Profile::open(&recorded.profile).and_then(|p| {
        Ok((
            p.read_migrations()?,
            p.read_all::<numalens_format::Object>()?,
        ))
    });
    let (migrations, objects) = match read {
        Ok(tables) => tables,
        Err(e) => {
            eprintln!("numalens: cannot read back which rules applied: {e}");
            return;
        }
    };
    let outcomes = numalens_apply::outcome::outcomes(plan, compiled, &migrations, &objects);
    for line in numalens_apply::outcome::render(&outcomes, compiled, plan) {
        eprintln!("{line}");
    }
}
