//! Where the program's pages were: the runtimes' exit queries and the recorder's periodic scans
//! as `page_nodes` rows, and what the exit queries say of the page sizes.

use std::collections::{BTreeSet, HashMap};

use numalens_format::{PageNodes, ProfileWriter};
use numalens_preload::events::Event;

use crate::objects::ProcessView;
use crate::pagesize::{self, PageSizes, ThpMode};
use crate::raw::{PerfEvent, RawRecording, ScannedRun};

/// The page size of every faulted region, from the faults, the mappings and the exit query.
pub fn page_sizes(raw: &RawRecording, views: &[ProcessView], thp: ThpMode) -> PageSizes {
    let anonymous_maps = raw.maps.mappings().into_iter().filter_map(|seen| {
        let m = &seen.mapping;
        let anonymous = m.path.is_empty() || m.path == "[heap]" || m.path == "[stack]";
        (anonymous && m.perms.ends_with('p')).then_some((seen.pid, m.start, m.end))
    });
    let anonymous_mmaps = raw.tasks.iter().filter_map(|t| match t {
        PerfEvent::Mmap {
            pid,
            start,
            len,
            path,
            flags,
            ..
        } if (path.is_empty() || path.starts_with("//anon"))
            && *flags & libc::MAP_SHARED as u32 == 0 =>
        {
            Some((*pid, *start, start.saturating_add(*len)))
        }
        _ => None,
    });
    let anonymous = pagesize::anonymous_by_pid(anonymous_maps.chain(anonymous_mmaps));
    let faulted: BTreeSet<(u32, u64)> = raw
        .faults
        .iter()
        .map(|f| (f.pid, f.address & !(pagesize::HUGE_PAGE - 1)))
        .collect();
    let residency = exit_residency(views, &faulted);
    PageSizes::infer(
        &raw.faults,
        &pagesize::Evidence {
            mode: thp,
            base_page: raw.page_size,
            page_sizes_sampled: raw.sampler.as_ref().is_some_and(|s| s.page_sizes),
            anonymous: &anonymous,
            residency: &residency,
        },
    )
}

/// What the runtimes' exit queries say of each faulted huge-page region (`(pid, region start)`
/// in `faulted`): pages present and untouched.
pub fn exit_residency(
    views: &[ProcessView],
    faulted: &BTreeSet<(u32, u64)>,
) -> HashMap<(u32, u64), pagesize::Residency> {
    let mut residency = HashMap::new();
    for view in views {
        for (_, event) in &view.page_nodes {
            if let Event::PageNodes {
                first_page,
                count,
                node,
                page_size,
            } = *event
            {
                let present = node >= 0;
                if present || node == -(libc::ENOENT as i64) {
                    pagesize::add_residency(
                        &mut residency,
                        faulted,
                        (view.pid, first_page),
                        count,
                        page_size,
                        present,
                    );
                }
            }
        }
    }
    residency
}

/// Writes the `page_nodes` rows of a process's exit query.
pub fn write_exit_query(
    writer: &mut ProfileWriter,
    view: &ProcessView,
    origin: u64,
) -> numalens_format::Result<()> {
    for row in exit_page_nodes(view, origin) {
        writer.push_page_nodes(row)?;
    }
    Ok(())
}

/// The `page_nodes` rows of a process's exit query.
pub fn exit_page_nodes(view: &ProcessView, origin: u64) -> impl Iterator<Item = PageNodes> + '_ {
    view.page_nodes.iter().filter_map(move |(t, event)| {
        let Event::PageNodes {
            first_page,
            count,
            node,
            page_size,
        } = *event
        else {
            return None;
        };
        Some(page_nodes_row(
            t.saturating_sub(origin),
            view.pid,
            (first_page, count, page_size),
            node,
            "exit",
        ))
    })
}

/// Writes the `page_nodes` rows of the periodic scans.
pub fn write_scans(
    writer: &mut ProfileWriter,
    scans: &[ScannedRun],
    origin: u64,
) -> numalens_format::Result<()> {
    for s in scans {
        writer.push_page_nodes(page_nodes_row(
            s.time_ns.saturating_sub(origin),
            s.pid,
            (s.start, s.pages, s.page_size),
            s.node as i64,
            "scan",
        ))?;
    }
    Ok(())
}

/// A `page_nodes` row from a `move_pages` answer: a node, or a negative errno.
fn page_nodes_row(
    time_ns: u64,
    pid: u32,
    (start, pages, page_size): (u64, u64, u64),
    answer: i64,
    source: &str,
) -> PageNodes {
    // Linux's errnos are 1..=4095; a log from a damaged or hostile process may hold anything.
    const MAX_ERRNO: i64 = 4095;
    let (node, status) = match answer {
        n if n == -(libc::ENOENT as i64) => (None, "untouched".to_string()),
        n if n >= 0 => match u32::try_from(n) {
            Ok(node) => (Some(node), String::new()),
            Err(_) => (None, format!("answer {n} is not a node number")),
        },
        n if n >= -MAX_ERRNO => (
            None,
            std::io::Error::from_raw_os_error(-n as i32).to_string(),
        ),
        n => (None, format!("answer {n} is not an error number")),
    };
    PageNodes {
        time_ns,
        pid,
        start,
        pages,
        page_size,
        node,
        status,
        source: source.into(),
    }
}
