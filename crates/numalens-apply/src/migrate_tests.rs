use super::*;
use std::sync::Arc;

const PAGE: u64 = 4096;

fn migrator(rate_mb: f64) -> Migrator {
    Migrator::new(
        MigrateOptions {
            rate_limit_mb_per_s: rate_mb,
            ..MigrateOptions::default()
        },
        PAGE,
    )
}

#[test]
fn neighbouring_pages_with_one_outcome_are_one_row() {
    let mut rows = Rows::new(7, ("spm", "majority"), 5, PAGE);
    rows.push(0x10000, Some(0), 1, "ok".into());
    rows.push(0x11000, Some(0), 1, "ok".into());
    rows.push(0x12000, Some(0), 1, "EBUSY".into());
    rows.push(0x14000, Some(0), 1, "EBUSY".into());
    let rows = rows.finish();
    assert_eq!(rows.len(), 3);
    assert_eq!(
        (rows[0].start, rows[0].len, rows[0].to_node),
        (0x10000, 2 * PAGE, 1)
    );
    assert_eq!((rows[1].result.as_str(), rows[2].start), ("EBUSY", 0x14000));
    assert_eq!(
        (rows[0].pid, rows[0].policy.as_str(), rows[0].time_ns),
        (7, "spm", 5)
    );
}

#[test]
fn the_rate_limit_defers_what_is_over_budget() {
    // 1 MB/s: a full bucket holds 244 pages of 4 KiB.
    let mut m = migrator(1.0);
    assert_eq!(m.take_budget(1000), 244);
    assert_eq!(m.take_budget(1000), 0);
    let mut unlimited = migrator(0.0);
    assert_eq!(unlimited.take_budget(1_000_000), 1_000_000);
}

#[test]
fn small_jobs_share_one_budget() {
    // The engine hands the movers jobs of some hundreds of pages: the bucket spans them, so the
    // rate is the same as with one large job (1 MB/s: 244 pages of 4 KiB).
    let mut m = migrator(1.0);
    let taken: Vec<usize> = (0..3).map(|_| m.take_budget(100)).collect();
    assert_eq!(taken, vec![100, 100, 44]);
}

/// `pages` pages of this process, the first `touched` of them written.
pub(crate) fn own_pages(pages: usize, touched: usize) -> (Vec<u64>, *mut libc::c_void) {
    let len = pages * PAGE as usize;
    // SAFETY: a fresh anonymous private mapping, written only within its length.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    for p in 0..touched {
        unsafe { *(base as *mut u8).add(p * PAGE as usize) = 1 };
    }
    let addresses = (0..pages).map(|p| base as u64 + p as u64 * PAGE).collect();
    (addresses, base)
}

#[test]
fn pages_in_place_and_untouched_pages_are_not_moved() {
    let (addresses, base) = own_pages(16, 8);
    let requests: Vec<Request> = addresses.iter().map(|a| (*a, 0)).collect();
    let out = migrator(0.0).migrate(std::process::id(), 1, &requests, ("t", "r"), 0);
    assert_eq!(out.call_error, None);
    assert_eq!(
        (out.requested, out.already_in_place, out.untouched),
        (16, 8, 8)
    );
    assert_eq!((out.moved, out.rows.len()), (0, 0));
    unsafe { libc::munmap(base, 16 * PAGE as usize) };
}

#[test]
fn a_node_the_machine_lacks_is_an_error_counted_not_a_panic() {
    let (addresses, base) = own_pages(4, 4);
    let requests: Vec<Request> = addresses.iter().map(|a| (*a, 63)).collect();
    let out = migrator(0.0).migrate(std::process::id(), 1, &requests, ("t", "r"), 0);
    assert_eq!(out.moved, 0);
    assert!(
        out.call_error.is_some() || !out.failed.is_empty(),
        "the refusal is said: {out:?}"
    );
    unsafe { libc::munmap(base, 4 * PAGE as usize) };
}

#[test]
fn a_process_that_has_ended_is_said_so() {
    let out = migrator(0.0).migrate(u32::MAX / 2, 1, &[(0x1000, 0)], ("t", "r"), 0);
    assert!(out.call_error.unwrap().contains("has ended"));
}

#[test]
fn moved_in_place_every_page_gets_the_kernel_s_answer() {
    let (addresses, base) = own_pages(16, 8);
    let requests: Vec<Request> = addresses.iter().map(|a| (*a, 0)).collect();
    let mut m = Migrator::new(
        MigrateOptions {
            rate_limit_mb_per_s: 0.0,
            move_in_place: true,
            ..MigrateOptions::default()
        },
        PAGE,
    );
    let out = m.migrate(std::process::id(), 0, &requests, ("t", "r"), 0);
    assert_eq!(out.call_error, None);
    assert_eq!((out.already_in_place, out.untouched), (8, 8));
    // One query and one move.
    assert_eq!(out.syscalls, 2, "{out:?}");
    // The touched pages are on node 0, where they were asked to be; the others never existed.
    assert_eq!(out.moved, 8, "{out:?}");
    assert_eq!(out.failed.get("ENOENT"), Some(&8), "{out:?}");
    let rows: Vec<(u64, Option<u32>, &str)> = out
        .rows
        .iter()
        .map(|r| (r.len / PAGE, r.from_node, r.result.as_str()))
        .collect();
    assert_eq!(rows, [(8, Some(0), "ok"), (8, None, "ENOENT")]);
    unsafe { libc::munmap(base, 16 * PAGE as usize) };
}

#[test]
fn pages_over_budget_are_listed_to_try_again() {
    // 1 MB/s: a full bucket holds 244 pages of 4 KiB; 300 touched pages asked (moved in place
    // so that this one-node host moves them), 20 untouched.
    let (addresses, base) = own_pages(320, 300);
    let requests: Vec<Request> = addresses.iter().map(|a| (*a, 0)).collect();
    let mut m = Migrator::new(
        MigrateOptions {
            rate_limit_mb_per_s: 1.0,
            batch_pages: 100,
            ..MigrateOptions::default()
        },
        PAGE,
    );
    m.opts.move_in_place = true;
    let out = m.migrate(std::process::id(), 0, &requests, ("t", "r"), 0);
    assert_eq!((out.moved, out.deferred), (244, 76), "{out:?}");
    // The requests past the budget, by position, in order.
    let again: Vec<usize> = out.again.iter().map(|a| a.0).collect();
    assert_eq!(again, (244..320).collect::<Vec<_>>());
    assert!(out.again.iter().all(|a| a.1 == Again::Deferred));
    // Each moving call timed: 244 pages in calls of at most 100.
    let calls: Vec<usize> = out.move_calls.iter().map(|c| c.0).collect();
    assert_eq!(calls, [100, 100, 44]);
    assert_eq!(out.pid, std::process::id());
    unsafe { libc::munmap(base, 320 * PAGE as usize) };
}

#[test]
fn movers_take_their_rate_limit_from_one_budget() {
    // Two movers at 1 MB/s together: 244 pages between them, not 244 each.
    let budget = Arc::new(Budget::new(1.0));
    let opts = MigrateOptions {
        rate_limit_mb_per_s: 1.0,
        ..MigrateOptions::default()
    };
    let mut a = Migrator::sharing(opts.clone(), PAGE, Arc::clone(&budget));
    let mut b = Migrator::sharing(opts, PAGE, Arc::clone(&budget));
    assert_eq!(budget.pages_now(PAGE), 244);
    assert_eq!(a.take_budget(200), 200);
    assert_eq!(b.take_budget(200), 44);
    assert_eq!(budget.pages_now(PAGE), 0);
    assert_eq!(Budget::new(0.0).pages_now(PAGE), usize::MAX);
}

#[test]
fn a_refusal_that_passes_is_told_apart_from_one_that_stays() {
    for errno in [libc::EBUSY, libc::EAGAIN, libc::ENOMEM] {
        assert!(passes(errno), "{errno}");
    }
    for errno in [
        libc::EFAULT,
        libc::ENOENT,
        libc::EACCES,
        libc::ESRCH,
        libc::EPERM,
    ] {
        assert!(!passes(errno), "{errno}");
    }
    // A process that has ended: nothing to try again.
    let out = migrator(0.0).migrate(u32::MAX / 2, 1, &[(0x1000, 0)], ("t", "r"), 0);
    assert!(out.again.is_empty(), "{out:?}");
}

#[test]
fn a_process_whose_memory_is_gone_is_said_to_be_exiting() {
    // A zombie: its memory is gone, its pid is still there until it is reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = migrator(0.0).migrate(pid, 1, &[(0x1000, 0)], ("t", "r"), 0);
    child.wait().unwrap();
    assert_eq!(
        out.call_error.as_deref(),
        Some(&*format!("process {pid} was exiting"))
    );
}

#[test]
fn pages_no_longer_mapped_are_counted_apart_and_never_moved() {
    // Eight pages written, the last four unmapped since (as a program freeing its grid while
    // their moves wait): the query answers EFAULT for them, as the move would.
    let (addresses, base) = own_pages(8, 8);
    unsafe {
        libc::munmap(
            (base as *mut u8).add(4 * PAGE as usize).cast(),
            4 * PAGE as usize,
        )
    };
    // Node 1: a move for every mapped page on a machine with two nodes or more; on one node the
    // moving call is refused, which this test does not look at.
    let requests: Vec<Request> = addresses.iter().map(|a| (*a, 1)).collect();
    let out = migrator(0.0).migrate(std::process::id(), 1, &requests, ("t", "r"), 0);
    assert_eq!(out.unmapped, 4, "{out:?}");
    assert_eq!(out.failed.get("EFAULT"), None, "{out:?}");
    // At most one moving call, of the four mapped pages only.
    assert!(out.move_calls.iter().all(|c| c.0 == 4), "{out:?}");
    let unmapped: Vec<(u64, u64, Option<u32>)> = out
        .rows
        .iter()
        .filter(|r| r.result == "EFAULT")
        .map(|r| (r.start, r.len / PAGE, r.from_node))
        .collect();
    assert_eq!(unmapped, [(addresses[4], 4, None)]);
    unsafe { libc::munmap(base, 4 * PAGE as usize) };
}

#[test]
fn a_moved_page_s_row_carries_the_time_its_call_ended() {
    let (addresses, base) = own_pages(64, 64);
    let requests: Vec<Request> = addresses.iter().map(|a| (*a, 0)).collect();
    let mut m = Migrator::new(
        MigrateOptions {
            rate_limit_mb_per_s: 0.0,
            move_in_place: true,
            batch_pages: 16,
            ..MigrateOptions::default()
        },
        PAGE,
    );
    let out = m.migrate(std::process::id(), 0, &requests, ("t", "r"), 1_000);
    assert_eq!((out.moved, out.move_calls.len()), (64, 4), "{out:?}");
    // Each call's rows: at least the job's start plus the calls made until then.
    let mut made = 1_000;
    let mut at = Vec::new();
    for (call, rows) in out.move_calls.iter().zip(out.rows.iter()) {
        made += call.1;
        assert!(rows.time_ns >= made, "{rows:?} before {made}");
        at.push(rows.time_ns);
    }
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    unsafe { libc::munmap(base, 64 * PAGE as usize) };
}
