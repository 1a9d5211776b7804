//! A forked child shares its parent's memory copy-on-write until it execs: its first writes to
//! the parent's heap, stack and data place new pages of the parent's objects. The child's own log
//! starts empty at the fork, and the kernel reports no mappings for what the child inherited, so
//! the parent's live objects are copied to the child for the time from the fork to its exec (or
//! its end).

use std::collections::{HashMap, HashSet};

use numalens_format::ObjectKind;

use crate::attribute::ObjectSpec;
use crate::raw::{Fault, PerfEvent};

/// Adds, for every new process that took faults, copies of the objects its parent had live at
/// the fork. Forks are taken in time order, so a grandchild inherits what its parent inherited.
pub fn inherit_objects(objects: &mut Vec<ObjectSpec>, tasks: &[PerfEvent], faults: &[Fault]) {
    let faulting: HashSet<u32> = faults.iter().map(|f| f.pid).collect();
    let mut forks: Vec<(u64, u32, u32)> = tasks
        .iter()
        .filter_map(|t| match t {
            PerfEvent::Fork {
                pid,
                ppid,
                tid,
                time_ns,
                ..
            } if pid == tid && pid != ppid && faulting.contains(pid) => {
                Some((*time_ns, *ppid, *pid))
            }
            _ => None,
        })
        .collect();
    forks.sort();
    let image_end = image_ends(tasks);
    for (fork_ns, parent, child) in forks {
        let end = image_end
            .get(&child)
            .and_then(|ends| ends.iter().copied().find(|t| *t > fork_ns));
        let inherited: Vec<ObjectSpec> = objects
            .iter()
            .filter(|o| o.pid == parent && o.alloc_ns <= fork_ns)
            .filter(|o| o.free_ns.is_none_or(|f| f > fork_ns))
            .map(|o| ObjectSpec {
                pid: child,
                alloc_ns: fork_ns,
                free_ns: end,
                ..o.clone()
            })
            .collect();
        objects.extend(inherited);
    }
}

/// The main thread's stack exists from the start of its program image, but the runtime can only
/// report it from its constructor on, after the loader and libc start-up touched it: date it back
/// to the image's exec.
pub fn backdate_main_stacks(objects: &mut [ObjectSpec], tasks: &[PerfEvent]) {
    let mut execs: HashMap<u32, Vec<u64>> = HashMap::new();
    for t in tasks {
        if let PerfEvent::Comm {
            pid,
            exec: true,
            time_ns,
            ..
        } = t
        {
            execs.entry(*pid).or_default().push(*time_ns);
        }
    }
    for o in objects.iter_mut() {
        if !(o.tracked && o.kind == ObjectKind::Stack && o.name == "stack[T0]") {
            continue;
        }
        let image_start = execs
            .get(&o.pid)
            .and_then(|times| times.iter().filter(|t| **t <= o.alloc_ns).max());
        if let Some(start) = image_start {
            o.alloc_ns = *start;
        }
    }
}

/// Per process, the times its image ended: each exec and its exit.
fn image_ends(tasks: &[PerfEvent]) -> HashMap<u32, Vec<u64>> {
    let mut ends: HashMap<u32, Vec<u64>> = HashMap::new();
    for t in tasks {
        match t {
            PerfEvent::Comm {
                pid,
                exec: true,
                time_ns,
                ..
            } => ends.entry(*pid).or_default().push(*time_ns),
            PerfEvent::Exit { pid, tid, time_ns } if pid == tid => {
                ends.entry(*pid).or_default().push(*time_ns)
            }
            _ => {}
        }
    }
    for times in ends.values_mut() {
        times.sort();
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(pid: u32, start: u64, alloc_ns: u64, free_ns: Option<u64>) -> ObjectSpec {
        ObjectSpec {
            pid,
            kind: ObjectKind::Heap,
            name: format!("o{start:x}"),
            start,
            size: 4096,
            alloc_ns,
            free_ns,
            alloc_tid: Some(pid),
            site_key: Some(7),
            tracked: true,
        }
    }

    fn fault(pid: u32) -> Fault {
        Fault {
            pid,
            tid: pid,
            time_ns: 50,
            address: 0,
            cpu: 0,
            mapped_page_size: 0,
            ip: 0,
        }
    }

    #[test]
    fn a_child_gets_the_objects_live_at_its_fork_until_it_execs() {
        let mut objects = vec![
            object(10, 0x1000, 1, None),
            object(10, 0x2000, 2, Some(5)),
            object(10, 0x3000, 30, None),
        ];
        let fork = |pid, ppid, time_ns| PerfEvent::Fork {
            pid,
            ppid,
            tid: pid,
            ptid: ppid,
            time_ns,
        };
        let tasks = vec![
            fork(11, 10, 20),
            PerfEvent::Comm {
                pid: 11,
                tid: 11,
                name: "child".into(),
                exec: true,
                time_ns: 60,
            },
            fork(12, 11, 40),
            fork(13, 10, 45),
        ];
        inherit_objects(&mut objects, &tasks, &[fault(11), fault(12)]);
        let copies: Vec<(u32, u64, u64, Option<u64>)> = objects[3..]
            .iter()
            .map(|o| (o.pid, o.start, o.alloc_ns, o.free_ns))
            .collect();
        // 11 inherits the object live at 20 until its exec at 60; 12 inherits it from 11; 13
        // took no faults and inherits nothing.
        assert_eq!(
            copies,
            vec![(11, 0x1000, 20, Some(60)), (12, 0x1000, 40, None)]
        );
        assert_eq!(objects[3].site_key, Some(7));
    }
}
