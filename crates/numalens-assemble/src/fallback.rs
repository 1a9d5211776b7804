//! Objects of last resort: the mappings seen in `/proc/PID/maps` and those the kernel reported,
//! for addresses no tracked object covers.

use numalens_format::ObjectKind;

use crate::attribute::ObjectSpec;
use crate::procmaps::SeenMapping;
use crate::raw::PerfEvent;

/// A mapping seen in `/proc/PID/maps`, as an object of last resort. It is taken to exist for the
/// whole run: snapshots are periodic, so their times only bound when it appeared.
pub fn mapped_object(seen: &SeenMapping) -> ObjectSpec {
    let m = &seen.mapping;
    let (kind, name) = match m.path.as_str() {
        "[heap]" => (
            ObjectKind::Heap,
            "[heap] (allocations below --min-object)".to_string(),
        ),
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
