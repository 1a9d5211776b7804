//! Periodic page → node scans of the running program (`--page-scan-interval`): the recorder asks
//! the kernel with `move_pages(pid, …, NULL, status)` where each page of the program's data
//! mappings is, so placement over time is known (NUMA balancing moving pages, a program's own
//! `mbind`/`move_pages`). Answers are kept as runs of consecutive pages with the same answer.

use numalens_assemble::procmaps::Mapping;
use numalens_assemble::raw::ScannedRun;

/// Pages per `move_pages` call: bounds the recorder's buffers (12 bytes a page).
const BATCH_PAGES: usize = 16 * 1024;

/// Mappings whose pages are the program's data: private, writable, anonymous or a file's
/// writable data (`.data` copies, `.bss`).
pub fn is_data_mapping(m: &Mapping) -> bool {
    let private_writable = m.perms.starts_with("rw") && m.perms.ends_with('p');
    let special = m.path.starts_with('[') && m.path != "[heap]" && m.path != "[stack]";
    private_writable && !special
}

/// Queries every page of the data mappings of `pid`; an error (the process is gone) ends the
/// scan with what was gathered.
pub fn scan_process(
    pid: u32,
    mappings: &[Mapping],
    page_size: u64,
    time_ns: u64,
    out: &mut Vec<ScannedRun>,
) {
    let mut pages: Vec<u64> = Vec::with_capacity(BATCH_PAGES);
    let mut status: Vec<i32> = vec![0; BATCH_PAGES];
    for m in mappings.iter().filter(|m| is_data_mapping(m)) {
        let mut at = m.start;
        while at < m.end {
            pages.clear();
            while at < m.end && pages.len() < BATCH_PAGES {
                pages.push(at);
                at += page_size;
            }
            if query(pid, &pages, &mut status[..pages.len()]).is_err() {
                return;
            }
            for (page, node) in pages.iter().zip(&status) {
                push_page(out, pid, *page, page_size, *node, time_ns);
            }
        }
    }
}

fn push_page(out: &mut Vec<ScannedRun>, pid: u32, page: u64, size: u64, node: i32, time: u64) {
    if let Some(last) = out.last_mut()
        && last.pid == pid
        && last.time_ns == time
        && last.node == node
        && last.start + last.pages * size == page
    {
        last.pages += 1;
        return;
    }
    out.push(ScannedRun {
        time_ns: time,
        pid,
        start: page,
        pages: 1,
        page_size: size,
        node,
    });
}

/// `move_pages` with no target nodes: fills `status` with each page's node or `-errno`.
fn query(pid: u32, pages: &[u64], status: &mut [i32]) -> std::io::Result<()> {
    // SAFETY: pages and status hold pages.len() entries each; nodes is NULL (query only).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            pid as libc::c_long,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            std::ptr::null::<libc::c_int>(),
            status.as_mut_ptr(),
            0 as libc::c_int,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_assemble::procmaps::parse_maps;

    #[test]
    fn data_mappings_are_private_writable_and_not_special() {
        let maps = parse_maps(
            "55d0-55e0 r-xp 00000000 08:01 12 /usr/bin/app\n\
             55f0-5600 rw-p 00010000 08:01 12 /usr/bin/app\n\
             5600-5700 rw-p 00000000 00:00 0 [heap]\n\
             7f00-7f10 rw-p 00000000 00:00 0 \n\
             7f10-7f20 rw-s 00000000 00:05 3 /dev/shm/x\n\
             7ffd-7ffe rw-p 00000000 00:00 0 [stack]\n\
             7fff-8000 r--p 00000000 00:00 0 [vvar]\n",
        );
        let data: Vec<_> = maps.iter().filter(|m| is_data_mapping(m)).collect();
        let starts: Vec<u64> = data.iter().map(|m| m.start).collect();
        assert_eq!(starts, vec![0x55f0, 0x5600, 0x7f00, 0x7ffd]);
    }

    #[test]
    fn own_pages_are_found_on_a_node_and_untouched_ones_are_not() {
        let page = crate::perf::page_size() as u64;
        let len = 64 * page as usize;
        // SAFETY: a fresh private anonymous mapping, unmapped at the end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        // mmap reports failure as MAP_FAILED, not null.
        assert_ne!(
            base,
            libc::MAP_FAILED,
            "{}",
            std::io::Error::last_os_error()
        );
        let base = base as *mut u8;
        for i in 0..16 {
            // SAFETY: within the mapping.
            unsafe { base.add(i * page as usize).write(1) };
        }
        let start = base as u64;
        let mapping = Mapping {
            start,
            end: start + len as u64,
            perms: "rw-p".into(),
            offset: 0,
            path: String::new(),
        };
        let mut runs = Vec::new();
        scan_process(std::process::id(), &[mapping], page, 7, &mut runs);
        // SAFETY: unmapping what was mapped above.
        unsafe { libc::munmap(base.cast(), len) };
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!((runs[0].start, runs[0].pages), (start, 16));
        assert!(runs[0].node >= 0);
        assert_eq!(runs[1].pages, 48);
        assert_eq!(runs[1].node, -libc::ENOENT);
        assert!(runs.iter().all(|r| r.time_ns == 7 && r.page_size == page));
    }
}
