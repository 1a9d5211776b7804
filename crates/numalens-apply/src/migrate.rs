//! Pages moved for real: `move_pages(2)` in batches, for the online engine. Pages already on
//! their target node and pages never touched are skipped (asked first, in the same batches);
//! a rate limit in MB/s defers what is over budget to the next epoch instead of sleeping;
//! per-page errors are counted, never fatal. What was done becomes `migrations` rows,
//! consecutive pages with the same outcome in one row. (The ping-pong guard is the engine's,
//! which knows pages by index: `page_moves.rs`.)

use std::collections::BTreeMap;
use std::time::Instant;

use numalens_format::Migration;

/// `MPOL_MF_MOVE`: move pages used by this process only (shared pages stay).
const MPOL_MF_MOVE: libc::c_int = 1 << 1;

/// Mover threads by default: one. Several (`--movers`) copy on several CPUs at once; in the
/// emulated 4-node test bed four did not place master-init's pages sooner (docs/PLACEMENT.md),
/// so the default stays one until a machine shows the gain.
pub const DEFAULT_MOVERS: usize = 1;
/// Fewest pages a call gets when a job is shared among movers: on kernels that flush the TLB
/// once per call (6.4 and later), splitting a small job would multiply the flushes.
const MIN_PAGES_PER_SHARED_CALL: usize = 256;

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
    /// Threads making `move_pages` calls at once. Each call copies its pages on the CPU that
    /// makes it, one page after the other, where the kernel's own balancing migrates on the
    /// faulting threads, all of them at once.
    pub movers: usize,
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
    pub deferred: u64,
    pub moved: u64,
    /// Per-page refusals by errno name.
    pub failed: BTreeMap<String, u64>,
    /// An error of the whole call (the process is gone, not ours to move).
    pub call_error: Option<String>,
    pub syscalls: u64,
    pub rows: Vec<Migration>,
}

pub struct Migrator {
    opts: MigrateOptions,
    page_size: u64,
    /// Token bucket: bytes that may be moved now, refilled with wall time.
    budget: f64,
    refilled: Instant,
}

/// Where to move one page: (page address, node).
pub type Request = (u64, u32);

impl Migrator {
    pub fn new(opts: MigrateOptions, page_size: u64) -> Migrator {
        Migrator {
            budget: opts.rate_limit_mb_per_s * 1e6,
            opts,
            page_size,
            refilled: Instant::now(),
        }
    }

    /// Moves `requests` of process `pid`; `policy` and `reason` label the rows, `time_ns` is
    /// their time since the clock origin.
    pub fn migrate(
        &mut self,
        pid: u32,
        epoch: u64,
        requests: &[Request],
        label: (&str, &str),
        time_ns: u64,
    ) -> Outcome {
        let mut out = Outcome {
            epoch,
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
        let mut todo: Vec<(Request, i32)> = Vec::new();
        for (r, at) in requests.iter().copied().zip(now) {
            let untouched = at == -libc::ENOENT;
            let in_place = at == r.1 as i32;
            out.untouched += u64::from(untouched);
            out.already_in_place += u64::from(in_place);
            if self.opts.move_in_place || !(untouched || in_place) {
                todo.push((r, at));
            }
        }
        let allowed = self.take_budget(todo.len());
        out.deferred = (todo.len() - allowed) as u64;
        todo.truncate(allowed);
        self.move_batches(pid, &todo, &mut out, label, time_ns);
        out
    }

    fn take_budget(&mut self, pages: usize) -> usize {
        let rate = self.opts.rate_limit_mb_per_s * 1e6;
        if rate <= 0.0 {
            return pages;
        }
        let elapsed = self.refilled.elapsed().as_secs_f64();
        self.refilled = Instant::now();
        // At most one second of budget piles up while nothing is moved.
        self.budget = (self.budget + elapsed * rate).min(rate);
        let fit = (self.budget / self.page_size as f64).floor().max(0.0) as usize;
        let allowed = pages.min(fit);
        self.budget -= (allowed as u64 * self.page_size) as f64;
        allowed
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

    fn move_batches(
        &mut self,
        pid: u32,
        todo: &[(Request, i32)],
        out: &mut Outcome,
        label: (&str, &str),
        time_ns: u64,
    ) {
        let size = chunk_pages(todo.len(), self.opts.batch_pages, self.opts.movers);
        let chunks: Vec<&[(Request, i32)]> = todo.chunks(size).collect();
        let answers = crate::parallel_moves::run(&chunks, self.opts.movers, |chunk| {
            let pages: Vec<u64> = chunk.iter().map(|(r, _)| r.0).collect();
            let nodes: Vec<i32> = chunk.iter().map(|(r, _)| r.1 as i32).collect();
            let mut status = vec![0i32; chunk.len()];
            move_pages(pid, &pages, Some(&nodes), &mut status).map(|()| status)
        });
        let mut rows = Rows::new(pid, label, time_ns, self.page_size);
        for (chunk, answer) in chunks.iter().zip(answers) {
            out.syscalls += 1;
            let status = match answer {
                Ok(status) => status,
                Err(e) => {
                    // The whole call failed (e.g. the process ended): said once, never fatal;
                    // its pages count as deferred, what other calls moved keeps its rows.
                    out.call_error.get_or_insert_with(|| call_error(pid, e));
                    out.deferred += chunk.len() as u64;
                    continue;
                }
            };
            for (((address, to), from), got) in chunk.iter().map(|(r, f)| (*r, *f)).zip(status) {
                let result = if got >= 0 {
                    out.moved += 1;
                    "ok".to_string()
                } else {
                    let name = numalens_assemble::placements::errno_name(-got);
                    *out.failed.entry(name.clone()).or_default() += 1;
                    name
                };
                rows.push(address, u32::try_from(from).ok(), to, result);
            }
        }
        out.rows = rows.finish();
    }
}

/// Pages per `move_pages` call: at most `batch`, and few enough that `movers` threads all get
/// a share of a move, but not fewer than [`MIN_PAGES_PER_SHARED_CALL`].
fn chunk_pages(pages: usize, batch: usize, movers: usize) -> usize {
    let share = pages.div_ceil(movers.max(1)).max(MIN_PAGES_PER_SHARED_CALL);
    share.clamp(1, batch.max(1))
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
mod tests;
