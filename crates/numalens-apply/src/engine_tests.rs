//! The engine fed by hand-made page-fault samples (a pid with no process: the mover's moves
//! fail without touching anything).

use std::collections::BTreeSet;

use super::*;

/// A 4-node machine whose nodes have CPUs 0-5, 6-11, …: a fault's CPU says its node.
fn engine(policy: Policy) -> (Engine, Vec<u32>) {
    engine_moving(policy, MigrateOptions::default())
}

fn engine_moving(policy: Policy, migrate: MigrateOptions) -> (Engine, Vec<u32>) {
    let mut params = Params::default();
    params.spm.observe_windows = 3;
    let topology = numalens_topology::presets::preset("machine-b").unwrap();
    let first_cpus = topology.nodes.iter().map(|n| n.cpus[0]).collect();
    let machine = Machine::from_topology(&topology);
    let opts = EngineOptions {
        policy,
        epoch_ns: 1_000_000,
        params,
        migrate,
        soft_dirty: false,
        nice: None,
    };
    (Engine::new(opts, machine, &topology), first_cpus)
}

fn fault(tid: u32, cpu: u32, address: u64, time_ns: u64) -> Fault {
    Fault {
        // A pid with no such process: the mover's moves fail without touching anything.
        pid: u32::MAX / 2,
        tid,
        time_ns,
        address,
        cpu,
        mapped_page_size: 0,
        ip: 0,
    }
}

fn tick(e: &mut Engine, now_ns: u64, faults: &[Fault]) -> Vec<Migration> {
    tick_with(e, now_ns, faults, &[])
}

fn tick_with(
    e: &mut Engine,
    now_ns: u64,
    faults: &[Fault],
    accesses: &[MemorySample],
) -> Vec<Migration> {
    let live = BTreeSet::new();
    e.tick(LiveView {
        now_ns,
        origin_ns: 0,
        live: &live,
        faults,
        accesses,
        inst_dir: None,
        events_dir: None,
    })
}

/// A load or store sample of the `pmu` backend, standing for `weight` accesses.
fn memory_sample(tid: u32, cpu: u32, address: u64, time_ns: u64, kind: SampleKind) -> MemorySample {
    MemorySample {
        pid: u32::MAX / 2,
        tid,
        time_ns,
        address,
        cpu: Some(cpu),
        ip: 0,
        kind,
        weight: 500,
        data_source: numalens_format::DataSource::Unknown,
        latency: None,
        node: None,
        page_size: None,
        snoop: None,
    }
}

#[test]
fn pmu_samples_are_accesses_the_policy_acts_on() {
    // Thread 1 on node 0 touches 64 pages first; thread 2 on node 3 then loads and stores
    // them, seen only by the PMU's samples (no fault of its own): with them the policy moves
    // the pages, without them it has nothing to go on.
    for fed in [true, false] {
        let (mut e, cpus) = engine(Policy::Spm);
        let first: Vec<Fault> = (0..64).map(|p| fault(1, cpus[0], p * 4096, 1)).collect();
        tick(&mut e, 0, &first);
        let mut now = 0;
        for epoch in 0..6u64 {
            now += 1_000_000;
            let uses: Vec<MemorySample> = (0..64)
                .flat_map(|p| [SampleKind::Load, SampleKind::Store].map(|k| (p, k)))
                .map(|(p, k)| memory_sample(2, cpus[3], p * 4096 + 8, now, k))
                .collect();
            let fed_now: &[MemorySample] = if fed { &uses } else { &[] };
            tick_with(&mut e, now + epoch, &[], fed_now);
        }
        e.finish(now + 10_000_000);
        assert_eq!(e.stats.pages_tracked, 64);
        if fed {
            assert_eq!(e.stats.samples, 64 + 6 * 128, "{:?}", e.stats);
            assert!(e.stats.requested >= 64, "{:?}", e.stats);
        } else {
            assert_eq!(e.stats.requested, 0, "{:?}", e.stats);
        }
    }
}

#[test]
fn pages_used_from_another_node_are_sent_there_by_the_policy() {
    let (mut e, cpus) = engine(Policy::Spm);
    // Thread 1 on node 0 touches 64 pages first; thread 2 on node 3 then uses them, over
    // and over, for several epochs.
    let mut now = 0;
    let first: Vec<Fault> = (0..64).map(|p| fault(1, cpus[0], p * 4096, 1)).collect();
    tick(&mut e, now, &first);
    for epoch in 0..6u64 {
        now += 1_000_000;
        let uses: Vec<Fault> = (0..64)
            .flat_map(|p| (0..4).map(move |_| p))
            .map(|p| fault(2, cpus[3], p * 4096, now))
            .collect();
        tick(&mut e, now + epoch, &uses);
    }
    e.finish(now + 10_000_000);
    assert!(e.stats.epochs >= 5, "{:?}", e.stats);
    assert!(
        e.stats.requested >= 64,
        "the policy asked to move the pages: {:?}",
        e.stats
    );
    // The process does not exist: the mover said so instead of moving anything.
    assert_eq!(e.stats.moved, 0);
    assert_eq!(e.stats.pages_tracked, 64);
}

#[test]
fn a_long_run_keeps_state_by_pages_not_by_epochs() {
    let (mut e, cpus) = engine(Policy::Carrefour);
    // Carrefour on whatever the traffic, and every page used from another node each epoch.
    e.opts.params.carrefour.maptu_min = 0.0;
    e.opts.params.carrefour.ping_pong_guard = false;
    // The largest state of the first thousand epochs and of the next thousand.
    let mut peaks = [0u64; 2];
    for epoch in 0..2_000u64 {
        let now = epoch * 1_000_000;
        let faults: Vec<Fault> = (0..32)
            .flat_map(|p| [p, p])
            .map(|p| fault(1, cpus[(epoch % 4) as usize], 0x1000 * p, now))
            .collect();
        tick(&mut e, now, &faults);
        let half = &mut peaks[(epoch / 1_000) as usize];
        *half = (*half).max(e.state_bytes());
    }
    e.finish(2_000_000_000);
    assert_eq!(e.stats.pages_tracked, 32);
    assert!(
        e.stats.requested > 1_000,
        "the policy kept deciding: {:?}",
        e.stats
    );
    assert!(
        peaks[1] <= peaks[0],
        "the state grew with epochs: {peaks:?}"
    );
}

#[test]
fn nothing_is_decided_before_an_epoch_has_passed() {
    let (mut e, cpus) = engine(Policy::Carrefour);
    let rows = tick(&mut e, 0, &[fault(1, cpus[0], 0x1000, 0)]);
    assert!(rows.is_empty());
    assert_eq!(e.stats.epochs, 0);
    tick(&mut e, 2_000_000, &[]);
    assert_eq!(e.stats.epochs, 1);
}

/// What the engine keeps per tracked page (page indices, the policy's state, the backlog, the
/// mover's guard), measured on its tables after every epoch of a run over 64 Ki pages: threads
/// on all four nodes, each page used by one thread on another node than its first toucher's,
/// and one page in eight used from every node.
#[test]
fn the_engine_keeps_at_most_16_bytes_a_tracked_page() {
    const PAGES: u64 = 1 << 16;
    for policy in [Policy::Carrefour, Policy::KmafOnline, Policy::Spm] {
        let (mut e, cpus) = engine(policy);
        e.opts.params.carrefour.maptu_min = 0.0;
        let touch: Vec<Fault> = (0..PAGES)
            .map(|p| {
                fault(
                    1 + (p / 64 % 4) as u32,
                    cpus[(p / 64 % 4) as usize],
                    p << 12,
                    1,
                )
            })
            .collect();
        tick(&mut e, 0, &touch);
        let mut peak = 0;
        for epoch in 1..6u64 {
            let now = epoch * 1_000_000;
            let mut uses = Vec::new();
            for p in 0..PAGES {
                let owner = (p / 64 + 1) % 4;
                let users = if p % 8 == 0 { 0..4 } else { owner..owner + 1 };
                for node in users {
                    let f = fault(10 + node as u32, cpus[node as usize], p << 12, now);
                    uses.extend([f, f, f]);
                }
            }
            tick(&mut e, now, &uses);
            peak = peak.max(e.state_bytes());
        }
        e.finish(10_000_000);
        assert_eq!(e.stats.pages_tracked, PAGES, "{policy:?}");
        assert!(
            e.stats.requested > 0,
            "{policy:?} moved nothing: {:?}",
            e.stats
        );
        let per_page = peak as f64 / PAGES as f64;
        assert!(per_page <= 16.0, "{policy:?}: {per_page:.2} bytes a page");
    }
}

#[test]
fn the_backlog_is_handed_over_in_small_jobs_between_epochs() {
    let (mut e, cpus) = engine(Policy::Spm);
    // Eight jobs' pages placed by thread 1 on node 0, then used by thread 2 on node 3 only.
    let job = crate::job_size::START_PAGES as u64;
    let pages = 8 * job;
    let first: Vec<Fault> = (0..pages).map(|p| fault(1, cpus[0], p << 12, 1)).collect();
    tick(&mut e, 0, &first);
    let mut now = 0;
    while e.moves.waiting() == 0 && e.stats.epochs < 10 {
        now += 1_000_000;
        let uses: Vec<Fault> = (0..pages)
            .flat_map(|p| [p, p])
            .map(|p| fault(2, cpus[3], p << 12, now))
            .collect();
        tick(&mut e, now, &uses);
    }
    // The round's moves, less the jobs sent at once (one being made by each mover, one
    // waiting).
    let decided = e.moves.waiting() as u64 + (e.mover.movers() as u64 + 1) * job;
    assert!(decided >= pages, "SPM moved few pages: {:?}", e.stats);
    // Within the same epoch, each turn of the loop hands over what the mover has finished.
    let epochs = e.stats.epochs;
    for turn in 1..=200 {
        if e.moves.waiting() == 0 && !e.mover.busy() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        tick(&mut e, now + turn, &[]);
    }
    assert_eq!(e.stats.epochs, epochs);
    assert_eq!(e.moves.waiting(), 0);
    e.finish(now + 1_000);
    assert_eq!((e.stats.requested, e.stats.unmade), (decided, 0));
}

/// `pages` pages of this process, written, and registered with the engine's page table, each
/// with a move to node position 0 waiting in the backlog (this host's node 0: moved in place).
fn own_pages_waiting(e: &mut Engine, pages: usize) -> (*mut libc::c_void, usize) {
    let len = pages * 4096;
    let (_, base) = crate::migrate::tests::own_pages(pages, pages);
    let first = base as u64 / e.page_size;
    for p in 0..pages {
        e.pages.index(std::process::id(), first + p as u64);
    }
    e.moves.grow_to(e.pages.len());
    for page in 0..pages as u32 {
        e.moves.request(page, 0, 100);
    }
    (base, len)
}

/// Ticks within one epoch (no decision) until the backlog and the movers are done, or 5 s.
fn drain(e: &mut Engine) {
    for turn in 0..2_500u64 {
        if e.moves.waiting() == 0 && !e.mover.busy() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        tick(e, turn, &[]);
    }
}

#[test]
fn moves_over_the_rate_limit_are_made_later_not_dropped() {
    // 4 MB/s: a full budget holds 976 pages; 1,500 waiting. What the budget does not allow
    // now waits and is made as the budget refills (about half a second), none dropped.
    let migrate = MigrateOptions {
        rate_limit_mb_per_s: 4.0,
        move_in_place: true,
        ..MigrateOptions::default()
    };
    let (mut e, _) = engine_moving(Policy::Carrefour, migrate);
    e.opts.epoch_ns = u64::MAX / 4;
    let (base, len) = own_pages_waiting(&mut e, 1_500);
    drain(&mut e);
    e.finish(10_000_000_000);
    unsafe { libc::munmap(base, len) };
    assert_eq!((e.stats.moved, e.stats.unmade), (1_500, 0), "{:?}", e.stats);
    assert!(e.stats.move_calls >= 2, "{:?}", e.stats);
}

#[test]
fn each_mover_takes_its_own_job() {
    // Three movers: three jobs being made and one waiting, each of the job size, where one
    // mover had one job being made and one waiting.
    let migrate = MigrateOptions {
        movers: 3,
        ..MigrateOptions::default()
    };
    let (mut e, _) = engine_moving(Policy::Carrefour, migrate);
    e.opts.epoch_ns = u64::MAX / 4;
    let job = e.job_size.pages();
    // Ten jobs' pages of a process that does not exist: taken, not moved.
    for number in 0..10 * job as u64 {
        e.pages.index(u32::MAX / 2, number);
    }
    e.moves.grow_to(e.pages.len());
    for page in 0..e.pages.len() as u32 {
        e.moves.request(page, 1, 7);
    }
    tick(&mut e, 0, &[]);
    assert_eq!(e.mover.in_flight(), 4);
    assert_eq!(e.moves.waiting(), 6 * job);
    drain(&mut e);
    e.finish(1_000);
    assert_eq!((e.stats.requested, e.stats.moved), (10 * job as u64, 0));
}

#[test]
fn the_engine_s_thread_takes_its_nice_value_at_its_first_turn() {
    // On a thread of its own (the recorder's loop): a higher nice value needs no privilege.
    let (asked, got, stats) = std::thread::spawn(|| {
        let now = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let asked = (now + 3).min(19);
        let (mut e, _) = engine(Policy::Carrefour);
        e.opts.nice = Some(asked);
        tick(&mut e, 1_000, &[]);
        let got = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        (asked, got, e.stats.nice.clone())
    })
    .join()
    .unwrap();
    assert_eq!(got, asked);
    assert_eq!(stats, Some((asked, Ok(()))));
}
