//! Pages moved for real: `move_pages(2)` in batches, for the online engine. Pages already on
//! their target node and pages never touched are skipped (asked first, in the same batches);
//! a rate limit in MB/s, one budget however many movers share it ([`Budget`]), defers what is
//! over budget instead of sleeping; per-page errors are counted, never fatal. The pages that may
//! be tried again (deferred, or refused for a reason that passes: [`Again`]) are listed for the
//! engine to put back in its backlog. What was done becomes `migrations` rows, consecutive pages
//! with the same outcome in one row. (The ping-pong guard is the engine's, which knows pages by
//! index: `page_moves.rs`.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use numalens_format::Migration;

/// `MPOL_MF_MOVE`: move pages used by this process only (shared pages stay).
const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// Mover threads by default: four, each taking its own jobs from the engine's backlog, so that
/// four `move_pages` calls are made at once. A call has a cost of its own that calls made at
/// once overlap: in the emulated 4-node guest four callers moved 2.8x one's pages a second
/// (1,024 pages per call), and online kMAF placed master-init's pages better with four movers
/// in each run than with one (docs/PLACEMENT.md). Threads with no job wait, idle.
pub const DEFAULT_MOVERS: usize = 4;

#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// Most bytes moved per second (0: no limit).
    pub rate_limit_mb_per_s: f64,
    /// Pages per `move_pages` call.
    pub batch_pages: usize,
    /// A page the engine moved this many times (at most 3) within `ping_pong_epochs` (at most
    /// 63; 0: no guard) is not moved again: applied by the engine before the moves reach the
    /// mover (`page_moves.rs`).
    pub ping_pong_moves: u8,
    pub ping_pong_epochs: u64,
    /// Pages already on their node, or never touched, are moved all the same, so that the
    /// kernel answers for each (a plan's timed moves); else they are skipped.
    pub move_in_place: bool,
    /// Mover threads, each making its own jobs' `move_pages` calls: each call copies its pages
    /// on the CPU that makes it, one page after the other, where the kernel's own balancing
    /// migrates on the faulting threads, all of them at once.
    pub movers: usize,
    /// The nice value each mover thread takes when it starts (`None`: the engine's own at the
    /// time, numalens' by default).
    pub mover_nice: Option<i32>,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            rate_limit_mb_per_s: 512.0,
            batch_pages: 1024,
            ping_pong_moves: 2,
            ping_pong_epochs: 4,
            move_in_place: false,
            movers: DEFAULT_MOVERS,
            mover_nice: None,
        }
    }
}

/// What one call did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The epoch the moves were asked at.
    pub epoch: u64,
    pub requested: u64,
    pub already_in_place: u64,
    pub untouched: u64,
    /// Pages whose address was no longer mapped when asked (`EFAULT`: the program unmapped or
    /// freed them since the move was decided): not moved, counted apart.
    pub unmapped: u64,
    pub deferred: u64,
    pub moved: u64,
    /// Per-page refusals by errno name.
    pub failed: BTreeMap<String, u64>,
    /// An error of the whole call (the process is gone, not ours to move).
    pub call_error: Option<String>,
    pub syscalls: u64,
    /// The process whose pages these are.
    pub pid: u32,
    /// Requests that may be tried again, by their position in the requests, and why.
    pub again: Vec<(usize, Again)>,
    /// Each moving call: its pages and how long it took (ns).
    pub move_calls: Vec<(usize, u64)>,
    pub rows: Vec<Migration>,
}

/// Why a page not moved may be moved by trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// Over the rate limit's budget: not tried.
    Deferred,
    /// Refused for a reason that passes (`EBUSY`, `EAGAIN`, `ENOMEM`, or the whole call so).
    Transient,
}

/// Whether a page refused with `errno`, or a call refused so, may be moved by trying again: a
/// page locked or under I/O, a page reference held for a moment, a node short of free pages.
fn passes(errno: i32) -> bool {
    matches!(
        errno,
        libc::EBUSY | libc::EAGAIN | libc::ENOMEM | libc::EINTR
    )
}

/// The rate limit as a token bucket of bytes, refilled with wall time (at most one second of
/// budget piles up while nothing is moved); shared by every mover, so that the limit holds for
/// all of them together.
pub struct Budget {
    rate: f64,
    state: Mutex<(f64, Instant)>,
}

impl Budget {
    /// A full bucket for `mb_per_s` MB/s (0: no limit).
    pub fn new(mb_per_s: f64) -> Budget {
        let rate = mb_per_s * 1e6;
        Budget {
            rate,
            state: Mutex::new((rate, Instant::now())),
        }
    }

    fn refilled(&self) -> std::sync::MutexGuard<'_, (f64, Instant)> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = s.1.elapsed().as_secs_f64();
        s.1 = Instant::now();
        s.0 = (s.0 + elapsed * self.rate).min(self.rate);
        s
    }

    /// Pages of `page_size` bytes the budget allows now, without taking them (`usize::MAX`
    /// without a limit).
    pub fn pages_now(&self, page_size: u64) -> usize {
        if self.rate <= 0.0 {
            return usize::MAX;
        }
        (self.refilled().0 / page_size as f64).floor().max(0.0) as usize
    }

    /// Takes the budget of at most `pages` pages; how many it allowed.
    pub fn take(&self, pages: usize, page_size: u64) -> usize {
        if self.rate <= 0.0 {
            return pages;
        }
        let mut s = self.refilled();
        let fit = (s.0 / page_size as f64).floor().max(0.0) as usize;
        let allowed = pages.min(fit);
        s.0 -= (allowed as u64 * page_size) as f64;
        allowed
    }
}

pub struct Migrator {
    opts: MigrateOptions,
    page_size: u64,
    budget: Arc<Budget>,
}

/// Where to move one page: (page address, node).
pub type Request = (u64, u32);

impl Migrator {
    /// A mover with a rate limit of its own.
    pub fn new(opts: MigrateOptions, page_size: u64) -> Migrator {
        let budget = Arc::new(Budget::new(opts.rate_limit_mb_per_s));
        Migrator::sharing(opts, page_size, budget)
    }

    /// A mover taking its rate limit from `budget`, which other movers share.
    pub fn sharing(opts: MigrateOptions, page_size: u64, budget: Arc<Budget>) -> Migrator {
        Migrator {
            opts,
            page_size,
            budget,
        }
    }

    /// Pages per `move_pages` call from now on.
    pub fn set_batch_pages(&mut self, pages: usize) {
        self.opts.batch_pages = pages.max(1);
    }

    /// Moves `requests` of process `pid`; `policy` and `reason` label the rows, `time_ns` is
    /// now, since the clock origin: a moved page's row carries the time its call ended (when
    /// the page had moved), an unmapped page's the time it was asked about.
    pub fn migrate(
        &mut self,
        pid: u32,
        epoch: u64,
        requests: &[Request],
        label: (&str, &str),
        time_ns: u64,
    ) -> Outcome {
        let begun = Instant::now();
        let mut out = Outcome {
            epoch,
            pid,
            requested: requests.len() as u64,
            ..Outcome::default()
        };
        let addresses: Vec<u64> = requests.iter().map(|r| r.0).collect();
        let now = match self.query(pid, &addresses, &mut out) {
            Ok(now) => now,
            Err(e) => {
                out.call_error = Some(e);
                return out;
            }
        };
        // (request's position, the request, where the page is now)
        let mut todo: Vec<(usize, Request, i32)> = Vec::new();
        let mut gone: Vec<(usize, Request, i32)> = Vec::new();
        for (i, (r, at)) in requests.iter().copied().zip(now).enumerate() {
            let untouched = at == -libc::ENOENT;
            let in_place = at == r.1 as i32;
            // The query and the move find the address's mapping alike: a move of an address
            // the query found unmapped would be refused with `EFAULT` too, at the cost of a
            // moving call.
            let unmapped = at == -libc::EFAULT;
            out.untouched += u64::from(untouched);
            out.already_in_place += u64::from(in_place);
            out.unmapped += u64::from(unmapped);
            if unmapped && !self.opts.move_in_place {
                gone.push((i, r, at));
            } else if self.opts.move_in_place || !(untouched || in_place) {
                todo.push((i, r, at));
            }
        }
        let unmapped = gone;
        let allowed = self.take_budget(todo.len());
        out.deferred = (todo.len() - allowed) as u64;
        let over = todo.split_off(allowed);
        out.again = over.iter().map(|t| (t.0, Again::Deferred)).collect();
        let mut rows = Rows::new(pid, label, time_ns, self.page_size);
        for (_, (address, to), _) in unmapped {
            rows.push(address, None, to, "EFAULT".to_string());
        }
        self.move_batches(&mut rows, &todo, &mut out, (time_ns, begun));
        out.rows = rows.finish();
        out
    }

    fn take_budget(&mut self, pages: usize) -> usize {
        self.budget.take(pages, self.page_size)
    }

    /// Node of each page now (negative: -errno), batched.
    fn query(&self, pid: u32, addresses: &[u64], out: &mut Outcome) -> Result<Vec<i32>, String> {
        let mut nodes = Vec::with_capacity(addresses.len());
        for chunk in addresses.chunks(self.opts.batch_pages.max(1)) {
            let mut status = vec![0i32; chunk.len()];
            out.syscalls += 1;
            move_pages(pid, chunk, None, &mut status).map_err(|e| call_error(pid, e))?;
            nodes.extend(status);
        }
        Ok(nodes)
    }

    /// The moving calls; each call's rows carry the time it ended, when its pages had moved
    /// (`began`: the job's start, since the clock origin and as an instant).
    fn move_batches(
        &mut self,
        rows: &mut Rows,
        todo: &[(usize, Request, i32)],
        out: &mut Outcome,
        began: (u64, Instant),
    ) {
        let pid = out.pid;
        let (time_ns, begun) = began;
        for chunk in todo.chunks(self.opts.batch_pages.max(1)) {
            let pages: Vec<u64> = chunk.iter().map(|(_, r, _)| r.0).collect();
            let nodes: Vec<i32> = chunk.iter().map(|(_, r, _)| r.1 as i32).collect();
            let mut status = vec![0i32; chunk.len()];
            let started = Instant::now();
            let answer = move_pages(pid, &pages, Some(&nodes), &mut status);
            out.move_calls
                .push((chunk.len(), started.elapsed().as_nanos() as u64));
            rows.time_ns = time_ns + begun.elapsed().as_nanos() as u64;
            out.syscalls += 1;
            if let Err(e) = answer {
                // The whole call failed (e.g. the process ended): said once, never fatal; its
                // pages count as deferred, tried again if the refusal passes.
                if e.raw_os_error().is_some_and(passes) {
                    out.again
                        .extend(chunk.iter().map(|t| (t.0, Again::Transient)));
                }
                out.call_error.get_or_insert_with(|| call_error(pid, e));
                out.deferred += chunk.len() as u64;
                continue;
            }
            for ((i, (address, to), from), got) in chunk.iter().copied().zip(status) {
                let result = if got >= 0 {
                    out.moved += 1;
                    "ok".to_string()
                } else {
                    if passes(-got) {
                        out.again.push((i, Again::Transient));
                    }
                    let name = numalens_assemble::placements::errno_name(-got);
                    *out.failed.entry(name.clone()).or_default() += 1;
                    name
                };
                rows.push(address, u32::try_from(from).ok(), to, result);
            }
        }
    }
}

/// `move_pages(pid, …)`: with `nodes`, moves; without, asks where the pages are.
fn move_pages(
    pid: u32,
    pages: &[u64],
    nodes: Option<&[i32]>,
    status: &mut [i32],
) -> std::io::Result<()> {
    let ptrs: Vec<*mut libc::c_void> = pages.iter().map(|p| *p as *mut libc::c_void).collect();
    // SAFETY: every array has `pages.len()` elements and lives through the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            ptrs.as_ptr(),
            nodes.map_or(std::ptr::null(), |n| n.as_ptr()),
            status.as_mut_ptr(),
            MPOL_MF_MOVE,
        )
    };
    // A positive answer counts pages not moved; their status says why.
    if r >= 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn call_error(pid: u32, e: std::io::Error) -> String {
    match e.raw_os_error() {
        // The kernel says EINVAL too of a process whose memory is already gone as it exits.
        Some(libc::EINVAL) if exiting(pid) => format!("process {pid} was exiting"),
        Some(libc::EINVAL) | Some(libc::ENODEV) => format!(
            "move_pages on process {pid}: a target node is not allowed (not online, no memory, or \
             outside the process's cpuset): {e}"
        ),
        Some(libc::ESRCH) => format!("process {pid} has ended"),
        Some(libc::EPERM) => format!(
            "moving the pages of process {pid} needs CAP_SYS_NICE (it belongs to another user)"
        ),
        _ => format!("move_pages on process {pid}: {e}"),
    }
}

/// Whether `pid` has no memory left (it is exiting, or gone): its maps are empty or unreadable.
fn exiting(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).map_or(true, |m| m.is_empty())
}

/// Consecutive pages with the same from, to and result become one row.
struct Rows<'a> {
    pid: u32,
    label: (&'a str, &'a str),
    time_ns: u64,
    page_size: u64,
    rows: Vec<Migration>,
}

impl<'a> Rows<'a> {
    fn new(pid: u32, label: (&'a str, &'a str), time_ns: u64, page_size: u64) -> Rows<'a> {
        Rows {
            pid,
            label,
            time_ns,
            page_size,
            rows: Vec::new(),
        }
    }

    fn push(&mut self, address: u64, from: Option<u32>, to: u32, result: String) {
        if let Some(last) = self.rows.last_mut()
            && last.time_ns == self.time_ns
            && last.start + last.len == address
            && last.from_node == from
            && last.to_node == to
            && last.result == result
        {
            last.len += self.page_size;
            return;
        }
        self.rows.push(Migration {
            time_ns: self.time_ns,
            pid: self.pid,
            start: address,
            len: self.page_size,
            from_node: from,
            to_node: to,
            policy: self.label.0.to_string(),
            reason: self.label.1.to_string(),
            result,
        });
    }

    fn finish(self) -> Vec<Migration> {
        self.rows
    }
}

#[cfg(test)]
#[path = "migrate_tests.rs"]
pub(crate) mod tests;
