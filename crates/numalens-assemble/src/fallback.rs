//! Objects of last resort: the mappings seen in `/proc/PID/maps` and those the kernel reported,
//! for addresses no tracked object covers.

use std::collections::{HashMap, HashSet};

use numalens_format::{Label, ObjectKind};

use crate::attribute::ObjectSpec;
use crate::procmaps::SeenMapping;
use crate::raw::PerfEvent;

/// The heap outside tracked objects.
const HEAP: &str = "[heap] (allocations below --min-object)";

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
    let anonymous = path.is_empty() || path.starts_with("//anon") || path.starts_with("/dev/zero");
    let (kind, name) = if anonymous {
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
    let heaps: HashSet<(u32, u64)> = objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Heap && !o.tracked)
        .map(|o| (o.pid, o.start))
        .collect();
    for o in &mut objects {
        if o.kind == ObjectKind::Mmap && !o.tracked && heaps.contains(&(o.pid, o.start)) {
            o.kind = ObjectKind::Heap;
            o.name = HEAP.to_string();
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
