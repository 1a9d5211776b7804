//! The pieces the tests' access models are built from, written once: threads of one process,
//! pages one thread placed, cells, and exact counts over equal windows.

use crate::accesses::{Accesses, Cell, CountSource, ObjectInfo, Page, ThreadInfo, Windows};

/// `n` threads of process `pid`, with thread ids from `first_tid` on, in creation order.
pub(crate) fn threads(pid: u32, first_tid: u32, n: u32) -> Vec<ThreadInfo> {
    (0..n)
        .map(|t| ThreadInfo {
            pid,
            tid: first_tid + t,
            logical_id: t,
            name: None,
        })
        .collect()
}

/// Pages 0..`count` of process 1, each placed by the first touch of thread `toucher`.
pub(crate) fn pages_placed_by(count: u32, toucher: u32) -> Vec<Page> {
    (0..count)
        .map(|p| Page {
            pid: 1,
            number: u64::from(p),
            first_toucher: Some(toucher),
            ..Page::default()
        })
        .collect()
}

/// `reads` and `writes` of `thread` to `page` (no accesses of unknown direction).
pub(crate) fn cell(page: u32, thread: u32, reads: u64, writes: u64) -> Cell {
    Cell {
        page,
        thread,
        reads,
        writes,
        other: 0,
    }
}

/// Exact counts of 4 KiB pages in windows of `length_ns` from time 0, one window per element
/// of `cells`.
pub(crate) fn exact(
    threads: Vec<ThreadInfo>,
    objects: Vec<ObjectInfo>,
    pages: Vec<Page>,
    length_ns: u64,
    cells: Vec<Vec<Cell>>,
) -> Accesses {
    let windows = Windows {
        start_ns: 0,
        length_ns,
        cells,
    };
    Accesses::from_cells(4096, CountSource::Exact, threads, objects, pages, windows)
}
