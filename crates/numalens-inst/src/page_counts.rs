//! The `.pages` files' counts, one list per thread with a row per page.

use crate::files::PageCount;

/// Process id, thread id, page address.
pub type PageKey = (u32, u32, u64);

/// One thread's counts, each page once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadPages {
    pub pid: u32,
    pub tid: u32,
    pub pages: Vec<(u64, PageCount)>,
}

/// Every thread's rows one after the other, as (pid, tid, page) and counts.
pub fn rows(threads: &[ThreadPages]) -> impl Iterator<Item = (PageKey, &PageCount)> {
    threads
        .iter()
        .flat_map(|t| t.pages.iter().map(|(page, c)| ((t.pid, t.tid, *page), c)))
}

/// The pages of one `.pages` file.
pub(crate) struct FilePages {
    pub pid: u32,
    pub tid: u32,
    pub pages: Vec<(u64, PageCount)>,
    /// No page is listed twice (the runtime gives each chunk of pages one record; only a damaged
    /// file repeats one).
    pub distinct: bool,
}

/// Adds `c` to `into`: counts saturate (only a damaged file counts past u64), the first access
/// is the earliest.
fn add(into: &mut PageCount, c: &PageCount) {
    into.reads = into.reads.saturating_add(c.reads);
    into.writes = into.writes.saturating_add(c.writes);
    into.first_ns = if into.first_ns == 0 {
        c.first_ns
    } else {
        into.first_ns.min(c.first_ns)
    };
}

/// One list per thread in (pid, tid) order, summed over the files of a thread (several copies of
/// the runtime, or threads that reused a tid). A thread with one file whose pages are distinct,
/// the usual case, keeps the file's list as it is: summing through a map, then copying every row
/// into one list, cost more than everything else the recorder does with a page count.
pub(crate) fn merge(mut files: Vec<FilePages>) -> Vec<ThreadPages> {
    files.sort_by_key(|f| (f.pid, f.tid));
    let mut threads = Vec::new();
    let mut files = files.into_iter().peekable();
    while let Some(first) = files.next() {
        let (pid, tid) = (first.pid, first.tid);
        let mut same = vec![first];
        while let Some(next) = files.next_if(|f| (f.pid, f.tid) == (pid, tid)) {
            same.push(next);
        }
        let pages = match same.pop() {
            Some(only) if same.is_empty() && only.distinct => only.pages,
            last => {
                let mut summed: ahash::AHashMap<u64, PageCount> = ahash::AHashMap::new();
                for (page, c) in same.iter().chain(&last).flat_map(|f| &f.pages) {
                    add(summed.entry(*page).or_default(), c);
                }
                let mut pages: Vec<(u64, PageCount)> = summed.into_iter().collect();
                pages.sort_unstable_by_key(|(page, _)| *page);
                pages
            }
        };
        threads.push(ThreadPages { pid, tid, pages });
    }
    threads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(reads: u64, first_ns: u64) -> PageCount {
        PageCount {
            reads,
            writes: 1,
            first_ns,
        }
    }

    fn file(tid: u32, pages: &[(u64, u64, u64)], distinct: bool) -> FilePages {
        FilePages {
            pid: 7,
            tid,
            pages: pages.iter().map(|&(p, r, t)| (p, count(r, t))).collect(),
            distinct,
        }
    }

    #[test]
    fn a_threads_files_are_summed_and_rows_come_thread_by_thread() {
        let threads = merge(vec![
            file(2, &[(0x1000, 5, 30), (0x2000, 1, 10)], true),
            file(1, &[(0x1000, 2, 20)], true),
            file(2, &[(0x1000, 3, 25)], true),
        ]);
        let keys: Vec<(PageKey, u64, u64, u64)> = rows(&threads)
            .map(|(k, c)| (k, c.reads, c.writes, c.first_ns))
            .collect();
        assert_eq!(
            keys,
            vec![
                ((7, 1, 0x1000), 2, 1, 20),
                ((7, 2, 0x1000), 8, 2, 25),
                ((7, 2, 0x2000), 1, 1, 10),
            ]
        );
    }

    #[test]
    fn a_file_that_repeats_a_page_is_summed_too() {
        let threads = merge(vec![file(
            1,
            &[(0x1000, u64::MAX - 1, 9), (0x1000, 4, 3)],
            false,
        )]);
        assert_eq!(threads.len(), 1);
        assert_eq!(threads[0].pages.len(), 1);
        assert_eq!(threads[0].pages[0].1.reads, u64::MAX);
        assert_eq!(threads[0].pages[0].1.first_ns, 3);
    }
}
