//! Reading every thread's `.samples` file after the program ended, in one time order.
//!
//! A sampled run leaves tens of MiB of samples per thread, all read while the user waits for the
//! profile. Three things keep that short: each file is read through a small reused buffer
//! rather than whole (a fresh buffer of the file's size costs a page fault per 4 KiB and an
//! unmap that interrupts every other CPU), the files are read on all cores, and the threads'
//! samples, each already in time order, are merged rather than sorted again.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::files::{
    HEADER_SIZE, InstFileError, InstHeader, InstSample, MAGIC_SAMPLES, SAMPLE_SIZE, bad,
    parse_header, sample_from,
};

/// Bytes read at a time: a whole number of records, small enough to stay in cache.
const BLOCK: usize = 4096 * SAMPLE_SIZE;

/// Reads a `.samples` file: its header and every finished sample.
pub fn read_samples_file(path: &Path) -> Result<(InstHeader, Vec<InstSample>), InstFileError> {
    read_samples_file_after(path, None).map(|(h, samples, _)| (h, samples))
}

/// What was read of a `.samples` file while the program ran (`live_read`): the samples before
/// `offset`, all finished, from the file whose device and inode were `identity`.
#[derive(Debug)]
pub(crate) struct ReadBefore {
    pub identity: (u64, u64),
    pub offset: u64,
    pub samples: Vec<InstSample>,
    /// The distinct (pid, ip) of `samples`.
    pub code: HashSet<(u32, u64)>,
}

/// The samples of every file strictly older than `below`, merged while the program ran: the
/// start of what the merge of all of them gives.
#[derive(Debug, Default)]
pub(crate) struct Released {
    pub samples: Vec<InstSample>,
    pub below: u64,
}

/// A file's samples, and the distinct (pid, ip) of them when they were gathered as it was read
/// (the file was read live before).
pub(crate) type FileSamples = (InstHeader, Vec<InstSample>, Option<HashSet<(u32, u64)>>);

/// Adds the distinct (pid, ip) of `samples` to `code`: runs of one instruction skip the set.
pub(crate) fn add_code(code: &mut HashSet<(u32, u64)>, samples: &[InstSample]) {
    let mut last = None;
    for s in samples {
        if last != Some((s.pid, s.ip)) {
            last = Some((s.pid, s.ip));
            code.insert((s.pid, s.ip));
        }
    }
}

/// [`read_samples_file`], taking the samples before `before.offset` from `before` when the file
/// is still the one read then; the rest is read as a whole file is.
pub(crate) fn read_samples_file_after(
    path: &Path,
    before: Option<ReadBefore>,
) -> Result<FileSamples, InstFileError> {
    let io = |source| InstFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let len = meta.len() as usize;
    let mut header = Vec::with_capacity(HEADER_SIZE);
    (&mut file)
        .take(HEADER_SIZE as u64)
        .read_to_end(&mut header)
        .map_err(io)?;
    let h = parse_header(&header, MAGIC_SAMPLES).map_err(|p| bad(path, p))?;
    if h.record_size as usize != SAMPLE_SIZE {
        return Err(bad(
            path,
            format!("unexpected sample size {}", h.record_size),
        ));
    }
    let same_file = |b: &ReadBefore| {
        use std::os::unix::fs::MetadataExt;
        b.identity == (meta.dev(), meta.ino()) && b.offset <= meta.len()
    };
    let (mut samples, code) = match before.filter(|b| same_file(b)) {
        Some(b) => {
            file.seek(SeekFrom::Start(b.offset)).map_err(io)?;
            let mut samples = b.samples;
            samples.reserve(len.saturating_sub(b.offset as usize) / SAMPLE_SIZE);
            (samples, Some(b.code))
        }
        // The file's size bounds the records; unwritten records of a sparse file are never
        // touched.
        None => (
            Vec::with_capacity(len.saturating_sub(HEADER_SIZE) / SAMPLE_SIZE),
            None,
        ),
    };
    let read_before = samples.len();
    let mut block = vec![0u8; BLOCK];
    loop {
        let filled = fill(&mut file, &mut block).map_err(io)?;
        // A partial record at the end is an unfinished one, as in a whole-file read.
        let finished = block[..filled]
            .chunks_exact(SAMPLE_SIZE)
            .filter(|r| r[31] == 1)
            .map(|r| sample_from(h.pid, h.tid, r));
        samples.extend(finished);
        if filled < BLOCK {
            let code = code.map(|mut code| {
                add_code(&mut code, &samples[read_before..]);
                code
            });
            return Ok((h, samples, code));
        }
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn fill(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

type SamplesFile = Result<FileSamples, InstFileError>;

/// Reads each file after what was read of it before (all of it without), in parallel over the
/// machine's cores; results in the order given.
pub(crate) fn read_samples_files_after(
    work: Vec<(PathBuf, Option<ReadBefore>)>,
) -> Vec<SamplesFile> {
    on_all_cores(work, |(p, b)| read_samples_file_after(&p, b))
}

/// `f` of each item, in parallel over the machine's cores (items dealt out in turn); results in
/// the order given.
pub(crate) fn on_all_cores<T: Send, R: Send>(work: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(work.len());
    if workers <= 1 {
        return work.into_iter().map(f).collect();
    }
    let mut shares: Vec<Vec<(usize, T)>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, item) in work.into_iter().enumerate() {
        shares[i % workers].push((i, item));
    }
    let f = &f;
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                s.spawn(move || {
                    share
                        .into_iter()
                        .map(|(i, item)| (i, f(item)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("reading a file does not panic"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The samples of every file in one time order, ties in file order: what a stable sort of the
/// files' samples one after the other gives. Each thread's file is in time order (one clock,
/// one writer), so a merge does it in one pass without a sort's scratch copy; a file out of
/// order (a damaged one) falls back to the sort.
pub fn merge_by_time(files: Vec<Vec<InstSample>>) -> Vec<InstSample> {
    let mut merged = Vec::new();
    merge_by_time_after(&files, &mut merged);
    merged
}

/// [`merge_by_time`] appended to `merged` (whose samples precede all of `files`'): the rest
/// of a live merge goes straight after it, not through a copy of its own.
pub(crate) fn merge_by_time_after(files: &[Vec<InstSample>], merged: &mut Vec<InstSample>) {
    let total: usize = files.iter().map(Vec::len).sum();
    merged.reserve_exact(total);
    if !files.iter().all(|f| f.is_sorted_by_key(|s| s.time_ns)) {
        let first = merged.len();
        files.iter().for_each(|f| merged.extend_from_slice(f));
        merged[first..].sort_by_key(|s| s.time_ns);
        return;
    }
    let slices: Vec<&[InstSample]> = files.iter().map(Vec::as_slice).collect();
    merge_sorted_into(&slices, merged);
}

/// Appends the samples of `files`, each in time order, to `merged` in one time order, ties in
/// the order of `files`.
pub(crate) fn merge_sorted_into(files: &[&[InstSample]], merged: &mut Vec<InstSample>) {
    let mut next = vec![0usize; files.len()];
    let mut heads: BinaryHeap<Reverse<(u64, usize)>> = files
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.first().map(|s| Reverse((s.time_ns, i))))
        .collect();
    while let Some(Reverse((_, i))) = heads.pop() {
        // Take the file's run up to the next file's head at once: threads' samples interleave
        // in long stretches.
        let bound = heads.peek().map(|Reverse(k)| *k);
        let file = files[i];
        let start = next[i];
        let run = file[start..]
            .iter()
            .position(|s| bound.is_some_and(|b| (s.time_ns, i) > b))
            .unwrap_or(file.len() - start);
        merged.extend_from_slice(&file[start..start + run]);
        next[i] = start + run;
        if let Some(s) = file.get(next[i]) {
            heads.push(Reverse((s.time_ns, i)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tid: u32, time_ns: u64) -> InstSample {
        InstSample {
            pid: 1,
            tid,
            time_ns,
            address: 0,
            ip: 0,
            weight: 1,
            size: 8,
            is_write: false,
        }
    }

    fn stable_sorted(files: &[Vec<InstSample>]) -> Vec<InstSample> {
        let mut all: Vec<InstSample> = files.concat();
        all.sort_by_key(|s| s.time_ns);
        all
    }

    #[test]
    fn merging_gives_what_a_stable_sort_gives_ties_included() {
        let files = vec![
            vec![sample(1, 1), sample(1, 3), sample(1, 3), sample(1, 9)],
            vec![],
            vec![sample(2, 0), sample(2, 3), sample(2, 4), sample(2, 9)],
            vec![sample(3, 3), sample(3, 10)],
        ];
        assert_eq!(merge_by_time(files.clone()), stable_sorted(&files));
    }

    #[test]
    fn a_file_out_of_order_is_sorted() {
        let files = vec![
            vec![sample(1, 5), sample(1, 2)],
            vec![sample(2, 3), sample(2, 4)],
        ];
        assert_eq!(merge_by_time(files.clone()), stable_sorted(&files));
    }
}
