//! Objects of last resort: the mappings seen in `/proc/PID/maps` and those the kernel reported,
//! for addresses no tracked object covers.

use std::collections::{HashMap, HashSet};

use numalens_format::{Label, ObjectKind};

use crate::attribute::ObjectSpec;
use crate::procmaps::SeenMapping;
use crate::raw::PerfEvent;

/// The heap outside tracked objects.
const HEAP: &str = "[heap] (allocations below --min-object)";

/// A heap of one of glibc's other malloc arenas (those of threads) outside tracked objects.
const THREAD_HEAP: &str = "[thread heap] (allocations below --min-object)";

/// The largest size of such a heap (glibc's `HEAP_MAX_SIZE` on 64-bit machines): each is mapped
/// on its own, aligned to this size, readable and writable as far as it has grown and reserved
/// without access for the rest.
const THREAD_HEAP_MAX: u64 = 64 << 20;

/// The mappings seen in `/proc/PID/maps` as objects of last resort ([`mapped_object`]), glibc's
/// thread heaps told from other anonymous mappings by their layout: like `[heap]`, the pages
/// the program's small allocations share with a tracked object are theirs when they hold most
/// of them (`inst.rs`), where an anonymous mapping always lost to the tracked object.
pub fn mapped_objects(seen: &[SeenMapping]) -> Vec<ObjectSpec> {
    let glibc: HashSet<u32> = seen
        .iter()
        .filter(|s| is_glibc(&s.mapping.path))
        .map(|s| s.pid)
        .collect();
    let reserved: HashSet<(u32, u64, u64)> = seen
        .iter()
        .filter(|s| s.mapping.path.is_empty() && s.mapping.perms.starts_with("---"))
        .map(|s| (s.pid, s.mapping.start, s.mapping.end))
        .collect();
    seen.iter()
        .map(|s| {
            let mut o = mapped_object(s);
            if glibc.contains(&s.pid) && is_thread_heap(s, &reserved) {
                (o.kind, o.name) = (ObjectKind::Heap, THREAD_HEAP.to_string());
            }
            o
        })
        .collect()
}

/// An anonymous read-write mapping at a multiple of [`THREAD_HEAP_MAX`], either that large or
/// followed by a reserved mapping up to that size (`reserved`: pid, start, end).
fn is_thread_heap(s: &SeenMapping, reserved: &HashSet<(u32, u64, u64)>) -> bool {
    let m = &s.mapping;
    let Some(full) = m.start.checked_add(THREAD_HEAP_MAX) else {
        return false;
    };
    m.path.is_empty()
        && m.perms.starts_with("rw")
        && m.start.is_multiple_of(THREAD_HEAP_MAX)
        && m.end > m.start
        && (m.end == full || (m.end < full && reserved.contains(&(s.pid, m.end, full))))
}

/// A mapping seen in `/proc/PID/maps`, as an object of last resort. It is taken to exist for the
/// whole run: snapshots are periodic, so their times only bound when it appeared.
pub fn mapped_object(seen: &SeenMapping) -> ObjectSpec {
    let m = &seen.mapping;
    let (kind, name) = match m.path.as_str() {
        "[heap]" => (ObjectKind::Heap, HEAP.to_string()),
        "[stack]" => (ObjectKind::Stack, "[stack] (main thread)".to_string()),
        "" => (
            ObjectKind::Mmap,
            format!("anonymous mapping {:#x} ({})", m.start, m.perms),
        ),
        p if p.starts_with('[') => (ObjectKind::Unknown, p.to_string()),
        p if m.perms.contains('x') => (ObjectKind::Code, p.to_string()),
        p => (ObjectKind::File, p.to_string()),
    };
    ObjectSpec {
        pid: seen.pid,
        kind,
        name,
        start: m.start,
        size: m.end - m.start,
        alloc_ns: 0,
        free_ns: None,
        alloc_tid: None,
        site_key: None,
        tracked: false,
    }
}

/// The mappings the kernel reported ([`reported_object`]), glibc's thread heaps told apart: the
/// kernel reports the heap's reservation (no access, twice its largest size unless the first
/// try landed aligned) and then its read-write part at an aligned start, again at each growth.
pub fn reported_objects(tasks: &[PerfEvent]) -> Vec<ObjectSpec> {
    let glibc: HashSet<u32> = tasks
        .iter()
        .filter_map(|t| match t {
            PerfEvent::Mmap { pid, path, .. } if is_glibc(path) => Some(*pid),
            _ => None,
        })
        .collect();
    let reservations: Vec<(u32, u64, u64)> = tasks
        .iter()
        .filter_map(|t| match t {
            PerfEvent::Mmap {
                pid,
                start,
                len,
                prot: 0,
                path,
                ..
            } if is_anonymous(path) && *len >= THREAD_HEAP_MAX => {
                Some((*pid, *start, start.saturating_add(*len)))
            }
            _ => None,
        })
        .collect();
    tasks
        .iter()
        .filter_map(|t| {
            let mut o = reported_object(t)?;
            if o.kind == ObjectKind::Mmap
                && glibc.contains(&o.pid)
                && in_thread_heap_reservation(&o, &reservations)
            {
                (o.kind, o.name) = (ObjectKind::Heap, THREAD_HEAP.to_string());
            }
            Some(o)
        })
        .collect()
}

/// `o` starts at a multiple of [`THREAD_HEAP_MAX`], within a reservation (pid, start, end) that
/// holds that much from there and is at most twice as large.
fn in_thread_heap_reservation(o: &ObjectSpec, reservations: &[(u32, u64, u64)]) -> bool {
    let Some(full) = o.start.checked_add(THREAD_HEAP_MAX) else {
        return false;
    };
    o.start.is_multiple_of(THREAD_HEAP_MAX)
        && o.size <= THREAD_HEAP_MAX
        && reservations.iter().any(|&(pid, from, to)| {
            pid == o.pid && from <= o.start && full <= to && to - from <= 2 * THREAD_HEAP_MAX
        })
}

/// The process runs glibc's allocator: its C library is mapped (a statically linked program, or
/// another language's runtime such as Go's, whose heap arenas are also 64 MiB-aligned
/// reservations grown in place, is not taken for it).
fn is_glibc(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("libc.so") || (name.starts_with("libc-2.") && name.ends_with(".so"))
}

fn is_anonymous(path: &str) -> bool {
    path.is_empty() || path.starts_with("//anon") || path.starts_with("/dev/zero")
}

/// A mapping the kernel reported (perf MMAP2, data mappings included), as an object of last
/// resort from the moment it was made: it covers what the program maps before the runtime starts
/// and between two maps snapshots.
pub fn reported_object(task: &PerfEvent) -> Option<ObjectSpec> {
    let PerfEvent::Mmap {
        pid,
        start,
        len,
        prot,
        path,
        time_ns,
        ..
    } = task
    else {
        return None;
    };
    let (kind, name) = if is_anonymous(path) {
        (ObjectKind::Mmap, format!("anonymous mapping {start:#x}"))
    } else if path == "[heap]" {
        // The kernel reports the heap again at each `brk` that grows it.
        (ObjectKind::Heap, HEAP.to_string())
    } else if path.starts_with('[') {
        (ObjectKind::Unknown, path.clone())
    } else if prot & libc::PROT_EXEC as u32 != 0 {
        (ObjectKind::Code, path.clone())
    } else {
        (ObjectKind::File, path.clone())
    };
    Some(ObjectSpec {
        pid: *pid,
        kind,
        name,
        start: *start,
        size: *len,
        alloc_ns: *time_ns,
        free_ns: None,
        alloc_tid: None,
        site_key: None,
        tracked: false,
    })
}

/// One object per mapping that grew: a heap grown by `brk` (or a mapping grown by `mremap` in
/// place) is reported, and seen in the maps snapshots, once per size, all from one start. As
/// separate objects they made a wall of overlapping rows (1 241 `[heap]` objects for one heap
/// of a real program) and every later stage paid for each. The one kept spans the largest size
/// from the earliest time. The kernel reports a heap's first `brk` as an anonymous mapping (the
/// heap is named only once it has grown past its start), so an anonymous mapping starting where
/// a heap starts is that heap.
pub fn merge_grown(mut objects: Vec<ObjectSpec>) -> Vec<ObjectSpec> {
    let heaps: HashMap<(u32, u64), (String, u64)> = objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Heap && !o.tracked)
        .map(|o| ((o.pid, o.start), (o.name.clone(), o.size)))
        .collect();
    for o in &mut objects {
        if o.kind != ObjectKind::Mmap || o.tracked {
            continue;
        }
        match heaps.get(&(o.pid, o.start)) {
            // A thread heap's own reservation, when glibc's first try landed aligned: what is
            // readable is what the maps showed. A larger mapping from that start (two heaps
            // side by side, merged into one) stays a mapping: the heap answers for its part.
            Some((name, size)) if name == THREAD_HEAP && o.size <= THREAD_HEAP_MAX => {
                (o.kind, o.name, o.size) = (ObjectKind::Heap, name.clone(), o.size.min(*size));
            }
            Some((name, _)) if name != THREAD_HEAP => {
                (o.kind, o.name) = (ObjectKind::Heap, name.clone());
            }
            _ => {}
        }
    }
    let mut merged: Vec<ObjectSpec> = Vec::with_capacity(objects.len());
    // Each mapping where it first appeared, so the order (and the ids) of the others stay.
    let mut at: HashMap<(u32, u64, u8, String), usize> = HashMap::new();
    for o in objects {
        let key = (o.pid, o.start, o.kind.code(), o.name.clone());
        match at.get(&key) {
            Some(&i) => {
                let kept = &mut merged[i];
                kept.size = kept.size.max(o.size);
                kept.alloc_ns = kept.alloc_ns.min(o.alloc_ns);
            }
            None => {
                at.insert(key, merged.len());
                merged.push(o);
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap(size: u64, alloc_ns: u64) -> ObjectSpec {
        ObjectSpec {
            pid: 7,
            kind: ObjectKind::Heap,
            name: HEAP.into(),
            start: 0x1000,
            size,
            alloc_ns,
            free_ns: None,
            alloc_tid: None,
            site_key: None,
            tracked: false,
        }
    }

    #[test]
    fn a_grown_heap_is_one_object_of_its_largest_size() {
        let mut other = heap(0x1000, 5);
        other.start = 0x9000;
        let merged = merge_grown(vec![
            heap(0x3000, 30),
            heap(0x1000, 10),
            other,
            heap(0x2000, 20),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!((merged[0].size, merged[0].alloc_ns), (0x3000, 10));
        assert_eq!(merged[1].start, 0x9000);
    }

    fn seen(start: u64, end: u64, perms: &str) -> SeenMapping {
        SeenMapping {
            pid: 7,
            mapping: crate::procmaps::Mapping {
                start,
                end,
                perms: perms.into(),
                offset: 0,
                path: String::new(),
            },
            first_seen_ns: 1,
            last_seen_ns: 2,
        }
    }

    #[test]
    fn glibcs_thread_heaps_are_heaps_and_other_anonymous_mappings_are_not() {
        let at = 0x7f55_6400_0000; // a multiple of 64 MiB
        let max = THREAD_HEAP_MAX;
        let mut libc = seen(0x7f77_0000_0000, 0x7f77_0002_8000, "r-xp");
        libc.mapping.path = "/usr/lib/x86_64-linux-gnu/libc.so.6".into();
        let layout = [
            // A thread's heap grown to 132 KiB, the rest of its 64 MiB reserved.
            seen(at, at + 0x21000, "rw-p"),
            seen(at + 0x21000, at + max, "---p"),
            // One grown to its largest size.
            seen(at + max, at + 2 * max, "rw-p"),
            // A large allocation's own mapping that happens to be aligned, and one that is not.
            seen(at + 4 * max, at + 4 * max + 0x80_0000, "rw-p"),
            seen(at + 0x1000, at + 0x1000 + max, "rw-p"),
            // Reserved after it, but not up to the aligned size: a thread's stack and guard.
            seen(at + 6 * max, at + 6 * max + 0x1000, "rw-p"),
            seen(at + 6 * max + 0x1000, at + 6 * max + 0x2000, "---p"),
            // At the top of the address space (no panic).
            seen(u64::MAX - 0xfff, u64::MAX, "rw-p"),
        ];
        // Without glibc in the process (a Go program's heap arenas look the same), none is.
        let without: Vec<ObjectKind> = mapped_objects(&layout).iter().map(|o| o.kind).collect();
        assert!(
            without.iter().all(|k| *k == ObjectKind::Mmap),
            "{without:?}"
        );
        let objects = mapped_objects(&[&layout[..], &[libc]].concat());
        let kinds: Vec<(ObjectKind, bool)> = objects
            .iter()
            .map(|o| (o.kind, o.name == THREAD_HEAP))
            .collect();
        assert_eq!(
            kinds,
            [
                (ObjectKind::Heap, true),
                (ObjectKind::Mmap, false),
                (ObjectKind::Heap, true),
                (ObjectKind::Mmap, false),
                (ObjectKind::Mmap, false),
                (ObjectKind::Mmap, false),
                (ObjectKind::Mmap, false),
                (ObjectKind::Mmap, false),
                (ObjectKind::Code, false),
            ]
        );
        // The arena's reservation, reported by the kernel when it was made, at the heap's start
        // (glibc's first try, at the address after the previous heap, landed): it is that
        // thread heap, not the main heap, and as large as the maps showed.
        let mut reservation = objects[0].clone();
        (reservation.kind, reservation.name) = (ObjectKind::Mmap, "anonymous mapping".into());
        reservation.size = max;
        let merged = merge_grown(vec![objects[0].clone(), reservation]);
        assert_eq!(merged.len(), 1, "{merged:?}");
        assert_eq!(
            (merged[0].name.as_str(), merged[0].size),
            (THREAD_HEAP, 0x21000)
        );
    }

    fn reported(start: u64, len: u64, prot: i32) -> PerfEvent {
        PerfEvent::Mmap {
            pid: 7,
            tid: 8,
            start,
            len,
            pgoff: start,
            prot: prot as u32,
            flags: 0x22,
            path: "//anon".into(),
            time_ns: start & 0xfff,
        }
    }

    #[test]
    fn a_thread_heap_the_kernel_reported_is_a_heap() {
        let max = THREAD_HEAP_MAX;
        let at = 0x7f6d_2c00_0000; // a multiple of 64 MiB
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let mut glibc = reported(0x7f77_0000_0000, 0x28000, libc::PROT_READ | libc::PROT_EXEC);
        if let PerfEvent::Mmap { path, .. } = &mut glibc {
            *path = "/usr/lib/x86_64-linux-gnu/libc.so.6".into();
        }
        let layout = [
            // The reservation, unaligned, twice the largest size; then the read-write part at
            // the aligned start inside it, grown once.
            reported(at - 0x320_0000, 2 * max, 0),
            reported(at, 0x21000, rw),
            reported(at, 0x22000, rw),
            // Aligned, but in no reservation: a large allocation's own mapping.
            reported(at + 4 * max, 0x10_0000, rw),
            // Aligned inside a reservation far larger than a heap's: not glibc's.
            reported(at + 8 * max, 8 * max, 0),
            reported(at + 8 * max, 0x1000, rw),
        ];
        let without = reported_objects(&layout);
        assert!(
            without.iter().all(|o| o.name != THREAD_HEAP),
            "no glibc: {without:?}"
        );
        let objects = reported_objects(&[&layout[..], &[glibc]].concat());
        let heaps: Vec<bool> = objects.iter().map(|o| o.name == THREAD_HEAP).collect();
        assert_eq!(heaps, [false, true, true, false, false, false, false]);
        let merged = merge_grown(objects);
        let heap = merged.iter().find(|o| o.name == THREAD_HEAP).unwrap();
        assert_eq!((heap.start, heap.size), (at, 0x22000));
        // Two heaps side by side, the lower one grown to its largest size: the kernel merges
        // them into one read-write mapping, which stays a mapping beside the heap.
        let mut merged_pair = heap.clone();
        (merged_pair.kind, merged_pair.name) = (ObjectKind::Mmap, "anonymous mapping".into());
        merged_pair.size = max + 0x21000;
        let kept = merge_grown(vec![heap.clone(), merged_pair]);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert_eq!(
            (kept[1].kind, kept[1].size),
            (ObjectKind::Mmap, max + 0x21000)
        );
    }

    #[test]
    fn the_heaps_first_report_as_an_anonymous_mapping_is_the_heap() {
        let mut first = heap(0x21000, 5);
        first.kind = ObjectKind::Mmap;
        first.name = "anonymous mapping 0x1000".into();
        let merged = merge_grown(vec![first, heap(0x42000, 40)]);
        assert_eq!(merged.len(), 1);
        assert_eq!(
            (merged[0].name.as_str(), merged[0].kind),
            (HEAP, ObjectKind::Heap)
        );
        assert_eq!((merged[0].size, merged[0].alloc_ns), (0x42000, 5));
    }
}
