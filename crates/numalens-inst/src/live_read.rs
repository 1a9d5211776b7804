//! The hooks' `.samples` files read while the program runs, so that after its end only what
//! they gained since is left to read and merge (docs/RECORD.md, "Assembling the sampled stream
//! live"). Each file is read from where the last read stopped up to its first record not
//! finished yet (a record is finished when its last byte says so, written last). The samples
//! older than every sample still to come are merged in time order at once; the others wait per
//! file. [`LiveSampleFiles::finish`] gives exactly what [`crate::files::read_inst_dir`] gives
//! after the run: the same files, each read from the offset reached, the same merge.
//!
//! What is still to come: a thread's samples are in time order (one thread, one clock), so a
//! file's next one is no older than the last one read, or than the file's creation
//! (`start_ns`) when none was; a file created after the directory was listed holds only
//! samples taken after the listing. A thread whose next record slot was still untouched when
//! read after the listing had not taken its next sample's time then: the hooks mark a slot as
//! being written before they read the clock. Ties are merged in file order, as after the run.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{Ordering, fence};

use crate::files::InstSample;
use crate::files::{
    HEADER_SIZE, InstData, MAGIC_SAMPLES, SAMPLE_SIZE, find_inst_files, parse_header,
    read_inst_dir, read_inst_dir_after, sample_from,
};
use crate::sample_files::{ReadBefore, Released, add_code, merge_sorted_into};

/// Bytes read at a time from one file.
const BLOCK: usize = 4096 * SAMPLE_SIZE;

/// What was read of each `.samples` file of a directory so far.
#[derive(Debug, Default)]
pub struct LiveSampleFiles {
    /// In file-name order, the order ties are merged in.
    files: BTreeMap<PathBuf, LiveFile>,
    block: Vec<u8>,
    released: Released,
    /// A file's samples were out of time order (a damaged file): what was merged may be
    /// wrong, and everything is read again at the end.
    unordered: bool,
}

#[derive(Debug)]
struct LiveFile {
    /// Closed once its thread has ended and its last records were read: a program that
    /// creates thousands of threads does not hold thousands of descriptors in the recorder.
    file: Option<File>,
    pid: u32,
    tid: u32,
    /// No sample of the file is older than this: its last sample read, or its creation.
    next_no_older: u64,
    /// The thread was seen blocked in a system call at this time, before the last read: its
    /// next sample is no older (a sample's record is finished before the hooks return).
    blocked_at: Option<u64>,
    /// The slot after its last finished record was found untouched by a read after this time:
    /// its next sample is no older (the hooks mark the slot before they read the clock).
    untouched_at: Option<u64>,
    /// Its samples not merged yet.
    read: ReadBefore,
}

impl LiveSampleFiles {
    /// Reads what the `.samples` files in `dir` gained since the last call (the directory is
    /// listed anew: a thread's file appears when it first samples), and merges what no sample
    /// still to come can precede.
    pub fn read_new(&mut self, dir: &Path) {
        let listed_ns = monotonic_ns();
        let mut unready = false;
        for path in find_inst_files(dir).1 {
            if let std::collections::btree_map::Entry::Vacant(slot) = self.files.entry(path) {
                match open_live(slot.key()) {
                    Some(f) => {
                        slot.insert(f);
                    }
                    // Its header is not written yet: its samples may go back to its creation.
                    None => unready = true,
                }
            }
        }
        self.block.resize(BLOCK, 0);
        for f in self.files.values_mut() {
            if f.file.is_none() {
                continue;
            }
            // Asked before the read: a thread gone then has written its last record, so what
            // the read finds is all its file will hold, and it no longer bounds the merge (a
            // thread that ended early would otherwise hold back every later sample).
            let ended = !thread_exists(f.pid, f.tid);
            // Seen blocked after the listing: no later than then, an earlier bound is safe.
            f.blocked_at = blocked_in_system_call(f.pid, f.tid).then_some(listed_ns);
            // Nothing read now may precede what was merged before (checked, not assumed).
            let read = read_finished(f, &mut self.block, self.released.below);
            self.unordered |= !read.ordered;
            f.untouched_at = read.untouched_at;
            if ended {
                f.file = None;
            }
        }
        if unready || self.unordered {
            return;
        }
        let below = self
            .files
            .values()
            .filter(|f| f.file.is_some())
            .map(|f| {
                let seen_idle = f.blocked_at.max(f.untouched_at);
                seen_idle.map_or(f.next_no_older, |at| at.max(f.next_no_older))
            })
            .fold(self.unlisted_after(dir, listed_ns), u64::min);
        self.release_below(below);
    }

    /// No file that is not read yet holds a sample older than this: a thread's file exists
    /// before its first sample is taken, so a file missing from a listing holds only samples
    /// taken after it. Listed again at the end of a read (which may take a while at the lowest
    /// priority), the directory usually shows no file that the reads did not open.
    fn unlisted_after(&self, dir: &Path, listed_ns: u64) -> u64 {
        let relisted_ns = monotonic_ns();
        let all_read = find_inst_files(dir)
            .1
            .iter()
            .all(|p| self.files.contains_key(p));
        if all_read { relisted_ns } else { listed_ns }
    }

    /// Merges every file's samples older than `below` after those merged before.
    fn release_below(&mut self, below: u64) {
        if below <= self.released.below {
            return;
        }
        // Merged straight from each file's queue: each sample is copied once more, not thrice.
        let ready: Vec<&[InstSample]> = self
            .files
            .values()
            .map(|f| {
                let n = f.read.samples.partition_point(|s| s.time_ns < below);
                &f.read.samples[..n]
            })
            .collect();
        let counts: Vec<usize> = ready.iter().map(|r| r.len()).collect();
        merge_sorted_into(&ready, &mut self.released.samples);
        for (f, n) in self.files.values_mut().zip(counts) {
            f.read.samples.drain(..n);
        }
        self.released.below = below;
    }

    /// Samples read so far.
    pub fn held(&self) -> usize {
        let waiting: usize = self.files.values().map(|f| f.read.samples.len()).sum();
        self.released.samples.len() + waiting
    }

    /// Samples merged so far.
    pub fn merged(&self) -> usize {
        self.released.samples.len()
    }

    /// Everything in `dir`, as [`crate::files::read_inst_dir`] reads it, with what was read
    /// and merged live taken as done: to be called once the program has ended. Also says how
    /// many samples were merged live, 0 when what was read live could not be used (a damaged or
    /// replaced file) and everything was read again.
    pub fn finish(self, dir: &Path) -> (InstData, usize) {
        if self.unordered {
            return (read_inst_dir(dir), 0);
        }
        let merged = self.merged();
        let before: HashMap<PathBuf, ReadBefore> = self
            .files
            .into_iter()
            .map(|(path, f)| (path, f.read))
            .collect();
        match read_inst_dir_after(dir, before, self.released) {
            Some(data) => (data, merged),
            None => (read_inst_dir(dir), 0),
        }
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC is the hooks' clock.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Whether the thread still exists. Only a definite "no such thread" says it ended: a wrong
/// answer would cost the live merge, not the profile, since the end checks that nothing read
/// after it is older than what was merged.
fn thread_exists(pid: u32, tid: u32) -> bool {
    match std::fs::metadata(format!("/proc/{pid}/task/{tid}")) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// Whether the thread is blocked in a system call (a main thread in `pthread_join`, a worker
/// waiting for work): between taking a sample's time and finishing its record the hooks make
/// none, so such a thread has no sample in flight. The clock's calls are left out: where the
/// vDSO falls back to them, the sample's time is taken inside one. Wrong answers cost the live
/// merge only (the end checks what was merged).
fn blocked_in_system_call(pid: u32, tid: u32) -> bool {
    // The reading thread itself is always in the `read` of its own file.
    // SAFETY: getpid and gettid have no preconditions.
    if unsafe { (libc::getpid() as u32, libc::gettid() as u32) } == (pid, tid) {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")) else {
        return false;
    };
    let number = text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<i64>().ok());
    number.is_some_and(|n| {
        n >= 0
            && ![
                libc::SYS_clock_gettime,
                libc::SYS_gettimeofday,
                libc::SYS_time,
            ]
            .contains(&n)
    })
}

fn open_live(path: &Path) -> Option<LiveFile> {
    let mut file = File::open(path).ok()?;
    let mut header = vec![0u8; HEADER_SIZE];
    file.read_exact(&mut header).ok()?;
    let h = parse_header(&header, MAGIC_SAMPLES).ok()?;
    let meta = file.metadata().ok()?;
    (h.record_size as usize == SAMPLE_SIZE).then(|| LiveFile {
        file: Some(file),
        pid: h.pid,
        tid: h.tid,
        next_no_older: h.start_ns,
        blocked_at: None,
        untouched_at: None,
        read: ReadBefore {
            identity: (meta.dev(), meta.ino()),
            offset: HEADER_SIZE as u64,
            samples: Vec::new(),
            code: Default::default(),
        },
    })
}

/// What one read of a file found.
struct FileRead {
    /// The records read are in time order after those read before, and none is older than
    /// the floor.
    ordered: bool,
    /// The slot after the last finished record was read after this time and found untouched
    /// (its `valid` byte 0): the thread had not started its next sample then.
    untouched_at: Option<u64>,
}

/// Whether a record marked finished holds its fields. The copy of a block runs while the hooks
/// write: a record whose fields were copied before the hooks wrote them and whose `valid` byte
/// after (the copy preempted in between) reads finished with the slot's zeros. A finished
/// sample's time, address and weight are never 0, and an unused slot is all zeros, so such a
/// record is read again next time, whole.
fn fields_written(r: &[u8]) -> bool {
    let nonzero = |range: std::ops::Range<usize>| r[range].iter().any(|&b| b != 0);
    nonzero(0..8) && nonzero(8..16) && nonzero(24..28)
}

/// Reads the finished records from the file's offset on, up to the first unfinished one.
fn read_finished(f: &mut LiveFile, block: &mut [u8], floor: u64) -> FileRead {
    let mut read = FileRead {
        ordered: true,
        untouched_at: None,
    };
    let Some(file) = f.file.as_ref() else {
        return read;
    };
    loop {
        // Every slot read below is read after this clock reading (the hooks' side of this is
        // their fence between marking a slot and reading the clock).
        let reading_ns = monotonic_ns();
        fence(Ordering::SeqCst);
        let Ok(n) = file.read_at(block, f.read.offset) else {
            return read;
        };
        let first = f.read.samples.len();
        if first == f.read.samples.capacity()
            && let Ok(meta) = file.metadata()
        {
            // Room for what the file holds now at once, as the after-the-run read makes it:
            // growing by doubling would copy every sample again.
            let records = meta.len().saturating_sub(f.read.offset) as usize / SAMPLE_SIZE;
            f.read.samples.reserve(records.max(BLOCK / SAMPLE_SIZE));
        }
        // Up to the first record being written, or the file's unused tail: the rest next time.
        let finished = block[..n]
            .chunks_exact(SAMPLE_SIZE)
            .take_while(|r| r[31] == 1 && fields_written(r))
            .map(|r| sample_from(f.pid, f.tid, r));
        f.read.samples.extend(finished);
        let new = &f.read.samples[first..];
        let whole = new.len();
        f.read.offset += (whole * SAMPLE_SIZE) as u64;
        add_code(&mut f.read.code, new);
        if let Some(last) = new.last() {
            let least = f.next_no_older.max(floor);
            read.ordered &= new[0].time_ns >= least && new.is_sorted_by_key(|s| s.time_ns);
            f.next_no_older = f.next_no_older.max(last.time_ns);
        }
        if whole * SAMPLE_SIZE < block.len() {
            // A slot the file holds (not its end: the hooks may be growing it) and untouched.
            let next = block[..n].chunks_exact(SAMPLE_SIZE).nth(whole);
            read.untouched_at = next.is_some_and(|r| r[31] == 0).then_some(reading_ns);
            return read;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::read_inst_dir;
    use crate::tail::tests::{header, record};

    /// This process and thread: a thread that exists, as a running program's do.
    fn me() -> (u32, u32) {
        (std::process::id(), thread_id())
    }

    fn thread_id() -> u32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u32 }
    }

    /// The id of a thread that is running, and what ends it.
    fn other_thread() -> (
        u32,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let (tid_to, tid_from) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            tid_to.send(thread_id()).unwrap();
            let _ = stopped.recv();
        });
        (tid_from.recv().unwrap(), stop, handle)
    }

    fn write(path: &Path, records: &[(u64, bool)]) {
        write_for(path, me(), records);
    }

    /// Records finished (`true`) or being written (`false`: marked, as the hooks mark a slot
    /// before they read the clock).
    fn write_for(path: &Path, (pid, tid): (u32, u32), records: &[(u64, bool)]) {
        let mut bytes = header(pid, tid);
        for (t, finished) in records {
            let mut r = record(*t, 0x1000 + t, *finished);
            if !finished {
                r[31] = 2;
            }
            // The last instruction is only in the record read at the end.
            r[16..24].copy_from_slice(&(0x400000 + t / 10).to_le_bytes());
            bytes.extend(r);
        }
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_record_copied_before_its_fields_were_written_is_read_again_whole() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("inst-7-8-1-0.samples");
        let (pid, tid) = me();
        let mut bytes = header(pid, tid);
        bytes.extend(record(10, 0x1010, true));
        // Torn: the `valid` byte copied after the hooks finished, the fields before.
        let mut torn = vec![0u8; SAMPLE_SIZE];
        torn[31] = 1;
        bytes.extend(&torn);
        std::fs::write(&a, &bytes).unwrap();
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        assert_eq!(live.held(), 1, "the torn record is not taken");
        let mut bytes = header(pid, tid);
        bytes.extend(record(10, 0x1010, true));
        bytes.extend(record(20, 0x1020, true));
        std::fs::write(&a, &bytes).unwrap();
        live.read_new(dir.path());
        assert_eq!(live.held(), 2);
        let (live, _) = live.finish(dir.path());
        assert_eq!(live.samples, read_inst_dir(dir.path()).samples);
    }

    #[test]
    fn what_was_read_live_and_the_rest_give_the_after_the_run_read() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("inst-7-8-1-0.samples");
        let b = dir.path().join("inst-7-9-1-0.samples");
        write(&a, &[(10, true), (20, true), (0, false)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        assert_eq!(live.held(), 2);
        assert_eq!(live.merged(), 1, "20 may come again; 10 cannot");
        // The unfinished record is finished, one is left unfinished in the middle (a thread
        // killed while writing it), more follow; another thread's file appears.
        write(
            &a,
            &[(10, true), (20, true), (30, true), (0, false), (50, true)],
        );
        let (other, stop, handle) = other_thread();
        write_for(&b, (me().0, other), &[(25, true), (40, true)]);
        live.read_new(dir.path());
        drop(stop);
        handle.join().unwrap();
        assert_eq!(live.held(), 5, "stops at the unfinished record");
        assert_eq!(
            live.merged(),
            3,
            "below 30, the least of the files' last samples"
        );
        let after = read_inst_dir(dir.path());
        let (live, merged) = live.finish(dir.path());
        assert_eq!(merged, 3);
        assert_eq!(live.samples, after.samples);
        assert_eq!(live.samples.len(), 6);
        assert_eq!(live.problems, after.problems);
        assert_eq!(live.sample_every, after.sample_every);
        let mut code: Vec<(u32, u64)> = live.sample_code.unwrap().into_iter().collect();
        code.sort();
        let mut expected: Vec<(u32, u64)> = after.samples.iter().map(|s| (s.pid, s.ip)).collect();
        expected.sort();
        expected.dedup();
        assert_eq!(code, expected);
        assert_eq!(code.len(), 5, "{code:x?}");
        assert!(after.sample_code.is_none(), "not gathered after the run");
    }

    #[test]
    fn a_running_thread_whose_next_slot_is_untouched_no_longer_holds_the_merge_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("inst-7-8-1-0.samples");
        let b = dir.path().join("inst-7-9-1-0.samples");
        // The hooks' files are sized ahead: after the last record, untouched slots.
        let mut bytes = header(me().0, me().1);
        for t in [10u64, 20] {
            let mut r = record(t, 0x1000 + t, true);
            r[16..24].copy_from_slice(&(0x400000 + t / 10).to_le_bytes());
            bytes.extend(r);
        }
        bytes.extend(vec![0u8; 4 * SAMPLE_SIZE]);
        std::fs::write(&a, bytes).unwrap();
        // This one ends at its last record: it may be growing, so it holds the merge at 40.
        write(&b, &[(30, true), (40, true)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        assert_eq!(live.merged(), 3, "below 40: a's 20 bounds nothing");
        // Once a's slot is marked as being written, its time may be as old as its last sample.
        write(&a, &[(10, true), (20, true), (0, false)]);
        write(&b, &[(30, true), (40, true), (50, true)]);
        live.read_new(dir.path());
        assert_eq!(live.merged(), 3, "a's 20 bounds the merge again");
        let after = read_inst_dir(dir.path());
        let (data, merged) = live.finish(dir.path());
        assert_eq!((data.samples, merged), (after.samples, 3));
    }

    #[test]
    fn files_not_opened_are_bounded_by_a_listing_after_the_reads_only_when_it_shows_none() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("inst-7-8-1-0.samples"), &[(10, true)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        let listed = monotonic_ns();
        assert!(
            live.unlisted_after(dir.path(), listed) > listed,
            "no file left to open"
        );
        // A thread's file made since: its samples may be as old as the first listing.
        write(&dir.path().join("inst-7-9-1-0.samples"), &[(20, true)]);
        assert_eq!(live.unlisted_after(dir.path(), listed), listed);
    }

    #[test]
    fn a_file_out_of_time_order_leaves_the_merge_to_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("inst-7-8-1-0.samples");
        write(&a, &[(10, true), (40, true)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        // A damaged record goes back before what could have been merged.
        write(&a, &[(10, true), (40, true), (5, true), (60, true)]);
        live.read_new(dir.path());
        let after = read_inst_dir(dir.path());
        let times: Vec<u64> = after.samples.iter().map(|s| s.time_ns).collect();
        assert_eq!(times, [5, 10, 40, 60], "sorted after the run");
        let (data, merged) = live.finish(dir.path());
        assert_eq!((data.samples, merged), (after.samples, 0));
    }

    #[test]
    fn a_file_replaced_after_the_live_read_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("inst-7-8-1-0.samples");
        write(&a, &[(10, true), (20, true)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        std::fs::remove_file(&a).unwrap();
        write(&a, &[(5, true)]);
        let times: Vec<u64> = live
            .finish(dir.path())
            .0
            .samples
            .iter()
            .map(|s| s.time_ns)
            .collect();
        assert_eq!(times, [5]);
    }

    #[test]
    fn a_thread_that_ended_no_longer_holds_the_merge_back() {
        let dir = tempfile::tempdir().unwrap();
        let (ended, stop, handle) = other_thread();
        drop(stop);
        handle.join().unwrap();
        let a = dir.path().join("inst-7-8-1-0.samples");
        let b = dir.path().join("inst-7-9-1-0.samples");
        write_for(&a, (me().0, ended), &[(10, true), (20, true)]);
        write(&b, &[(30, true), (40, true)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        assert_eq!(
            live.merged(),
            3,
            "below 40: the ended thread's 20 bounds nothing"
        );
        assert!(live.files[&a].file.is_none(), "its file is closed");
        let after = read_inst_dir(dir.path());
        let (data, merged) = live.finish(dir.path());
        assert_eq!((data.samples, merged), (after.samples, 3));
    }

    #[test]
    fn a_thread_blocked_in_a_system_call_no_longer_holds_the_merge_back() {
        let dir = tempfile::tempdir().unwrap();
        let (waiting, stop, handle) = other_thread();
        // Until it is seen in its system call (receiving from a channel).
        let syscall = format!("/proc/{}/task/{waiting}/syscall", me().0);
        while !blocked_in_system_call(me().0, waiting) {
            assert!(std::path::Path::new(&syscall).exists());
            std::thread::yield_now();
        }
        let a = dir.path().join("inst-7-8-1-0.samples");
        let b = dir.path().join("inst-7-9-1-0.samples");
        write_for(&a, (me().0, waiting), &[(10, true), (20, true)]);
        write(&b, &[(30, true), (40, true)]);
        let mut live = LiveSampleFiles::default();
        live.read_new(dir.path());
        drop(stop);
        handle.join().unwrap();
        assert_eq!(
            live.merged(),
            3,
            "below 40: the waiting thread's 20 bounds nothing"
        );
        let after = read_inst_dir(dir.path());
        let (data, merged) = live.finish(dir.path());
        assert_eq!((data.samples, merged), (after.samples, 3));
    }
}
