//! `numalens run --policy P`: the online engine (numalens-apply's `Engine`) moving pages and
//! threads while the program runs, beside the recorder, which logs what it did in the
//! profile's `migrations` table.

use anyhow::{Context, Result};
use numalens_apply::engine::{Engine, EngineOptions, EngineStats};
use numalens_apply::migrate::MigrateOptions;
use numalens_place::{Machine, Params, Policy};

use crate::cli::RunArgs;
use crate::commands::record::{
    print_summary, program_status, record_options, record_with_fallback,
};
use crate::commands::run::{kernel_balancing, restore};
use crate::exit::{ExitWith, UsageError};

/// The online policies by the names `run --policy` takes.
fn online_policy(name: &str) -> Result<Policy, UsageError> {
    let policy = match name {
        "kmaf" => Policy::KmafOnline,
        other => Policy::from_name(other).map_err(|e| UsageError(e.to_string()))?,
    };
    if !policy.is_online() {
        return Err(UsageError(format!(
            "`{name}` decides after the run, not during it: make a plan with `numalens plan \
             PROFILE --policy {name} -o plan.json` and run it with --plan plan.json; online \
             policies are carrefour, kmaf, spm and tiering"
        )));
    }
    Ok(policy)
}

pub fn launch(args: &RunArgs, policy: &str) -> Result<()> {
    let policy = online_policy(policy)?;
    let options = engine_options(args, policy)?;
    let (opts, backend) = record_options(&args.recording, &args.command)?;
    if backend == crate::cli::BackendArg::None {
        return Err(UsageError(
            "the online engine decides from samples, and `--backend none` takes none: use the \
             default backend (page faults, or a machine's precise memory event), `--backend \
             pmu` where the machine has one, or `--backend inst` for a build with `numalens cc`"
                .into(),
        )
        .into());
    }
    let topology = numalens_topology::host().context("reading this machine's NUMA topology")?;
    let machine = Machine::from_topology(&topology);
    if machine.memory_nodes().len() < 2 {
        eprintln!(
            "numalens: this machine has one memory node: the engine watches but has nowhere to \
             move pages"
        );
    }
    let mut engine = Engine::new(options, machine, &topology);
    let switch = kernel_balancing(args.kernel_balancing)?;
    let recorded = record_with_fallback(opts, backend, Some(&mut engine));
    restore(switch)?;
    let recorded = recorded?;
    print_summary(&recorded);
    print_stats(policy, &engine.stats);
    program_status(&recorded)
}

pub fn attach(args: &RunArgs, policy: &str, pid: u32) -> Result<()> {
    let policy = online_policy(policy)?;
    numalens_apply::attach::check_may_move(pid).map_err(|e| ExitWith {
        status: 2,
        message: e.to_string(),
    })?;
    let topology = numalens_topology::host().context("reading this machine's NUMA topology")?;
    let machine = Machine::from_topology(&topology);
    let mut engine = Engine::new(engine_options(args, policy)?, machine, &topology);
    let output = args
        .recording
        .output
        .clone()
        .unwrap_or_else(|| numalens_apply::attach::default_output(pid));
    let meta = numalens_apply::attach::meta(pid, policy.name(), &topology);
    let switch = kernel_balancing(args.kernel_balancing)?;
    eprintln!(
        "numalens: {} engine on process {pid}; Ctrl-C stops numalens and leaves the process running",
        policy.name()
    );
    let attached = numalens_apply::attach::attach(pid, &mut engine, &output, meta);
    restore(switch)?;
    let attached = attached.map_err(|e| ExitWith {
        status: 1,
        message: e.to_string(),
    })?;
    eprintln!(
        "numalens: {} ({} threads, {:.1} s, {} page-fault samples); actions written to {}",
        attached.ended,
        attached.threads,
        attached.wall.as_secs_f64(),
        attached.faults,
        output.display()
    );
    print_stats(policy, &engine.stats);
    Ok(())
}

/// Soft-dirty write faults where the kernel tracks them; said once where it does not.
fn soft_dirty() -> bool {
    let supported = numalens_apply::engine::soft_dirty_supported();
    if !supported {
        eprintln!(
            "numalens: this kernel does not track soft-dirty pages (CONFIG_MEM_SOFT_DIRTY): the \
             engine sees first touches, the kernel's hinting faults, the PMU's loads and \
             stores with --backend pmu and, for a program built with `numalens cc` and run \
             with --backend inst, its sampled accesses"
        );
    }
    supported
}

/// The policies' parameters with the command line's `--policy-param`s.
fn params(args: &RunArgs) -> Result<Params, UsageError> {
    let mut params = Params::default();
    super::whatif_setup::set_policy_params(&mut params, &args.policy_params)?;
    Ok(params)
}

fn engine_options(args: &RunArgs, policy: Policy) -> Result<EngineOptions, UsageError> {
    if !(args.rate_limit >= 0.0 && args.rate_limit.is_finite()) {
        return Err(UsageError(format!(
            "--rate-limit {}: give MB per second, 0 or more (0: no limit)",
            args.rate_limit
        )));
    }
    Ok(EngineOptions {
        policy,
        epoch_ns: args.epoch.as_nanos() as u64,
        params: params(args)?,
        migrate: MigrateOptions {
            rate_limit_mb_per_s: args.rate_limit,
            movers: usize::from(args.movers),
            mover_nice: args.mover_nice,
            ..MigrateOptions::default()
        },
        soft_dirty: soft_dirty(),
        nice: Some(args.engine_nice),
    })
}

fn print_stats(policy: Policy, s: &EngineStats) {
    let failed: u64 = s.failed.values().sum();
    eprintln!(
        "numalens: {} engine: {} epochs, {} samples, {} pages tracked; {} pages moved ({} already \
         in place, {} deferred by the rate limit, {} frozen by the ping-pong guard, {} failed), \
         {} threads moved; engine CPU {:.1} % of one core (deciding {:.1} ms), memory {}",
        policy.name(),
        s.epochs,
        s.samples,
        s.pages_tracked,
        s.moved,
        s.already_in_place,
        s.deferred,
        s.frozen,
        failed,
        s.thread_moves,
        s.cpu_share() * 100.0,
        s.decide_ns as f64 / 1e6,
        match s.pages_tracked {
            0 => format!("{} KiB", s.peak_state_bytes / 1024),
            _ => format!(
                "{:.1} bytes per tracked page kept between epochs, {} KiB for an epoch's samples",
                s.bytes_per_page(),
                s.peak_epoch_bytes / 1024
            ),
        }
    );
    if s.epochs == 0 {
        eprintln!(
            "numalens: the engine made no decision: the run ended within its first epoch \
             (--epoch), or no samples reached it (a kernel refusing page-fault sampling)"
        );
    }
    if s.move_calls > 0 {
        eprintln!(
            "numalens: {} move_pages calls moving pages, {:.0} ms each on average, jobs of {}-{} \
             pages; {} moves waited again after a job (rate limit, or refused for a reason that \
             passes)",
            s.move_calls,
            s.move_call_ns as f64 / s.move_calls as f64 / 1e6,
            s.job_pages.0,
            s.job_pages.1,
            s.retried
        );
    }
    print_timeline(s);
    if s.unmapped > 0 {
        eprintln!(
            "numalens: {} pages were no longer mapped when their move came (freed or unmapped \
             by the program since the decision; EFAULT): not moved",
            s.unmapped
        );
    }
    if s.unmade > 0 {
        eprintln!(
            "numalens: {} page moves were still waiting for the mover when the program ended",
            s.unmade
        );
    }
    for (why, n) in &s.call_errors {
        eprintln!("numalens: {n} epochs could not move: {why}");
    }
    if !s.failed.is_empty() {
        let why: Vec<String> = s.failed.iter().map(|(e, n)| format!("{n} {e}")).collect();
        eprintln!("numalens: moves the kernel refused: {}", why.join(", "));
    }
}

/// When the policy decided (the epochs that decided moves) and what held the engine's turns
/// back: the moves' rows in the profile say when each job was handed to a mover, and the page
/// scans when its pages landed.
fn print_timeline(s: &EngineStats) {
    let deciding: Vec<String> = s
        .timeline
        .iter()
        .enumerate()
        .filter(|(_, n)| n.decided > 0)
        .map(|(i, n)| format!("epoch {} at {:.2} s: {}", i + 1, n.at_s, n.decided))
        .collect();
    if !deciding.is_empty() {
        eprintln!("numalens: page moves decided: {}", deciding.join(", "));
    }
    match &s.nice {
        Some((nice, Ok(()))) => eprintln!("numalens: the engine's thread ran at nice {nice}"),
        Some((nice, Err(why))) => eprintln!(
            "numalens: the engine's thread could not take nice {nice} ({why}; below numalens' \
             own needs CAP_SYS_NICE): it ran at numalens' own, where its epochs may come late"
        ),
        None => {}
    }
    if s.epochs > 0 {
        let at: Vec<String> = s
            .timeline
            .iter()
            .map(|n| format!("{:.2}", n.at_s))
            .collect();
        eprintln!(
            "numalens: epochs ended at (s on the profile's clock): {}",
            at.join(" ")
        );
        let ms = |ns: u64| ns as f64 / 1e6;
        eprintln!(
            "numalens: engine turns: longest pause between two {:.0} ms (ending at {:.2} s), \
             longest turn {:.0} ms; clearing soft-dirty bits {:.0} ms in all, {:.0} \
             ms at most",
            ms(s.longest_pause_ns),
            s.longest_pause_end_s,
            ms(s.longest_turn_ns),
            ms(s.clear_refs_ns),
            ms(s.clear_refs_most_ns)
        );
    }
}
