//! The threads table: the runtime's view (logical ids, start routines) completed by the kernel's
//! (perf COMM/FORK/EXIT records), which also covers threads the runtime cannot see.

use std::collections::{BTreeMap, HashMap};

use numalens_format::{ProfileWriter, Thread};

use crate::objects::ProcessView;
use crate::raw::PerfEvent;

/// Writes one row per thread seen by the runtime or the kernel; returns the count.
pub fn write_threads(
    writer: &mut ProfileWriter,
    views: &[ProcessView],
    tasks: &[PerfEvent],
    origin: u64,
) -> numalens_format::Result<u64> {
    let mut names: HashMap<u32, String> = HashMap::new();
    // tid → the thread that created it (forked it, for a process's first thread).
    let mut creator: HashMap<u32, u32> = HashMap::new();
    // (pid, tid) → (start, exit, parent tid), from the kernel's records.
    type KernelThread = (u64, Option<u64>, Option<u32>);
    let mut kernel: BTreeMap<(u32, u32), KernelThread> = BTreeMap::new();
    for task in tasks {
        match task {
            PerfEvent::Comm { tid, name, .. } => {
                names.insert(*tid, name.clone());
            }
            PerfEvent::Fork {
                pid,
                tid,
                ptid,
                time_ns,
                ..
            } => {
                kernel.insert((*pid, *tid), (*time_ns, None, Some(*ptid)));
                if ptid != tid {
                    creator.insert(*tid, *ptid);
                }
            }
            PerfEvent::Exit { pid, tid, time_ns } => {
                kernel.entry((*pid, *tid)).or_insert((0, None, None)).1 = Some(*time_ns);
            }
            _ => {}
        }
    }
    // A thread keeps its creator's name until it sets its own, and the kernel reports only changes:
    // a process that forked without exec is named after the thread that forked it.
    let name_of = |pid: u32, tid: u32| {
        let mut at = pid;
        let mut name = names.get(&tid).or_else(|| names.get(&pid));
        // Bounded: a damaged record set may make a cycle.
        for _ in 0..64 {
            if name.is_some() {
                break;
            }
            let Some(parent) = creator.get(&at) else {
                break;
            };
            at = *parent;
            name = names.get(&at);
        }
        name.cloned()
    };
    let mut rows = Vec::new();
    for view in views {
        for t in &view.threads {
            let exit = t
                .exit_ns
                .or_else(|| kernel.get(&(view.pid, t.tid)).and_then(|k| k.1));
            kernel.remove(&(view.pid, t.tid));
            rows.push(Thread {
                pid: view.pid,
                tid: t.tid,
                logical_id: t.logical_id,
                name: name_of(view.pid, t.tid),
                start_routine: (t.start_routine != 0).then_some(t.start_routine),
                create_ns: t.start_ns.saturating_sub(origin),
                exit_ns: exit.map(|e| e.saturating_sub(origin)),
                parent_tid: t.parent_tid.or_else(|| creator.get(&t.tid).copied()),
            });
        }
    }
    // Threads only the kernel saw (no runtime in that process): logical ids by creation order.
    let mut next_logical: HashMap<u32, u32> = HashMap::new();
    for row in &rows {
        let next = next_logical.entry(row.pid).or_default();
        *next = (*next).max(row.logical_id + 1);
    }
    for ((pid, tid), (start, exit, parent)) in kernel {
        let logical = next_logical.entry(pid).or_default();
        rows.push(Thread {
            pid,
            tid,
            logical_id: *logical,
            name: name_of(pid, tid),
            start_routine: None,
            create_ns: start.saturating_sub(origin),
            exit_ns: exit.map(|e| e.saturating_sub(origin)),
            parent_tid: parent.filter(|p| *p != tid),
        });
        *logical += 1;
    }
    let count = rows.len() as u64;
    for row in rows {
        writer.push_thread(row)?;
    }
    Ok(count)
}
