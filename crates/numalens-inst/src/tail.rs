//! The `inst` sampled stream read while the program runs: each thread's `.samples` file grows
//! by whole records, each marked valid by its last byte once written, so a reader that keeps
//! its offset per file reads only what is new, and stops at a record still being written.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::files::{
    HEADER_SIZE, InstSample, MAGIC_SAMPLES, SAMPLE_SIZE, find_inst_files, parse_header, sample_from,
};

/// Where each `.samples` file was read up to.
#[derive(Debug, Default)]
pub struct SamplesTail {
    files: HashMap<PathBuf, Tail>,
    /// When the directory was last listed: new threads' files are looked for at most every
    /// `RESCAN`, the known ones read at every call through descriptors kept open.
    listed: Option<Instant>,
    buffer: Vec<u8>,
    /// Samples read so far.
    pub read: u64,
}

const RESCAN: Duration = Duration::from_millis(250);

#[derive(Debug)]
struct Tail {
    file: std::fs::File,
    pid: u32,
    tid: u32,
    offset: u64,
}

/// At most this many bytes are read from one file per call: the engine's turn stays short.
const MAX_BYTES_PER_CALL: usize = 4 << 20;

impl SamplesTail {
    /// [`Self::read_new`] with the directory listed now, whenever it was last: every file that
    /// exists at the call is read.
    pub fn read_new_listed(&mut self, dir: &Path) -> Vec<InstSample> {
        self.listed = None;
        self.read_new(dir)
    }

    /// The samples written since the last call, file by file.
    pub fn read_new(&mut self, dir: &Path) -> Vec<InstSample> {
        if self.listed.is_none_or(|t| t.elapsed() >= RESCAN) {
            self.listed = Some(Instant::now());
            for path in find_inst_files(dir).1 {
                if !self.files.contains_key(&path)
                    && let Some(t) = open_tail(&path)
                {
                    self.files.insert(path, t);
                }
            }
        }
        let mut out = Vec::new();
        for tail in self.files.values_mut() {
            read_from(tail, &mut self.buffer, &mut out);
        }
        self.read += out.len() as u64;
        out
    }
}

fn open_tail(path: &Path) -> Option<Tail> {
    let mut header = vec![0u8; HEADER_SIZE];
    let mut file = std::fs::File::open(path).ok()?;
    file.read_exact(&mut header).ok()?;
    let h = parse_header(&header, MAGIC_SAMPLES).ok()?;
    (h.record_size as usize == SAMPLE_SIZE).then_some(Tail {
        file,
        pid: h.pid,
        tid: h.tid,
        offset: HEADER_SIZE as u64,
    })
}

fn read_from(tail: &mut Tail, buffer: &mut Vec<u8>, out: &mut Vec<InstSample>) {
    buffer.resize(MAX_BYTES_PER_CALL, 0);
    let Ok(n) = tail.file.read_at(buffer, tail.offset) else {
        return;
    };
    for r in buffer[..n].chunks_exact(SAMPLE_SIZE) {
        // A record not yet marked valid is being written (or the file's unused tail): later.
        if r[31] != 1 {
            break;
        }
        out.push(sample_from(tail.pid, tail.tid, r));
        tail.offset += SAMPLE_SIZE as u64;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::files::{PAGE_SHIFT, VERSION};

    /// A `.samples` file's header, also for the other readers' tests.
    pub(crate) fn header(pid: u32, tid: u32) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE];
        h[..8].copy_from_slice(MAGIC_SAMPLES);
        for (at, v) in [
            (8, VERSION),
            (12, pid),
            (16, tid),
            (20, PAGE_SHIFT),
            (44, SAMPLE_SIZE as u32),
        ] {
            h[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        h
    }

    /// A sample record of weight 1024.
    pub(crate) fn record(time: u64, address: u64, valid: bool) -> Vec<u8> {
        let mut r = vec![0u8; SAMPLE_SIZE];
        r[..8].copy_from_slice(&time.to_le_bytes());
        r[8..16].copy_from_slice(&address.to_le_bytes());
        r[24..28].copy_from_slice(&1024u32.to_le_bytes());
        r[31] = valid as u8;
        r
    }

    #[test]
    fn only_new_finished_records_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inst-7-8.samples");
        let mut bytes = header(7, 8);
        bytes.extend(record(1, 0x1000, true));
        bytes.extend(record(2, 0x2000, true));
        bytes.extend(record(0, 0, false)); // being written
        std::fs::write(&path, &bytes).unwrap();
        let mut tail = SamplesTail::default();
        let first = tail.read_new(dir.path());
        assert_eq!(
            first.iter().map(|s| s.time_ns).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!((first[0].pid, first[0].tid, first[0].weight), (7, 8, 1024));
        assert!(tail.read_new(dir.path()).is_empty(), "nothing new");
        // The record in progress is finished, and another one follows.
        let at = HEADER_SIZE + 2 * SAMPLE_SIZE;
        bytes.splice(at..at + SAMPLE_SIZE, record(3, 0x3000, true));
        bytes.extend(record(4, 0x4000, true));
        std::fs::write(&path, &bytes).unwrap();
        let second = tail.read_new(dir.path());
        assert_eq!(
            second.iter().map(|s| s.time_ns).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert_eq!(tail.read, 4);
    }

    #[test]
    fn files_that_are_not_sample_files_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("inst-1-1.samples"), b"not a header").unwrap();
        assert!(SamplesTail::default().read_new(dir.path()).is_empty());
    }
}
