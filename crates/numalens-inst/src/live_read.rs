//! The hooks' `.samples` files read while the program runs, so that after its end only what
//! they gained since the last read is left to read (docs/RECORD.md, "Assembling the sampled
//! stream live"). Each file is read from where the last read stopped up to its first record
//! not finished yet (a record is finished when its last byte says so, written last); the
//! samples are kept per file, and [`LiveSampleFiles::finish`] gives exactly what
//! [`crate::files::read_inst_dir`] gives after the run: the same files, each read from the
//! offset reached, the same merge.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::files::{
    HEADER_SIZE, InstData, MAGIC_SAMPLES, SAMPLE_SIZE, find_inst_files, parse_header,
    read_inst_dir_after, sample_from,
};
use crate::sample_files::{ReadBefore, add_code};

/// Bytes read at a time from one file.
const BLOCK: usize = 4096 * SAMPLE_SIZE;

/// What was read of each `.samples` file of a directory so far.
#[derive(Debug, Default)]
pub struct LiveSampleFiles {
    files: HashMap<PathBuf, LiveFile>,
    block: Vec<u8>,
}

#[derive(Debug)]
struct LiveFile {
    file: File,
    pid: u32,
    tid: u32,
    read: ReadBefore,
}

impl LiveSampleFiles {
    /// Reads what the `.samples` files in `dir` gained since the last call (the directory is
    /// listed anew: a thread's file appears when it first samples).
    pub fn read_new(&mut self, dir: &Path) {
        for path in find_inst_files(dir).1 {
            if !self.files.contains_key(&path)
                && let Some(f) = open_live(&path)
            {
                self.files.insert(path.clone(), f);
            }
        }
        self.block.resize(BLOCK, 0);
        for f in self.files.values_mut() {
            read_finished(f, &mut self.block);
        }
    }

    /// Samples read so far.
    pub fn held(&self) -> usize {
        self.files.values().map(|f| f.read.samples.len()).sum()
    }

    /// Everything in `dir`, as [`crate::files::read_inst_dir`] reads it, with what was read
    /// live taken as read: to be called once the program has ended.
    pub fn finish(self, dir: &Path) -> InstData {
        let before = self
            .files
            .into_iter()
            .map(|(path, f)| (path, f.read))
            .collect();
        read_inst_dir_after(dir, before)
    }
}

fn open_live(path: &Path) -> Option<LiveFile> {
    let mut file = File::open(path).ok()?;
    let mut header = vec![0u8; HEADER_SIZE];
    file.read_exact(&mut header).ok()?;
    let h = parse_header(&header, MAGIC_SAMPLES).ok()?;
    let meta = file.metadata().ok()?;
    (h.record_size as usize == SAMPLE_SIZE).then(|| LiveFile {
        file,
        pid: h.pid,
        tid: h.tid,
        read: ReadBefore {
            identity: (meta.dev(), meta.ino()),
            offset: HEADER_SIZE as u64,
            samples: Vec::new(),
            code: Default::default(),
        },
    })
}

/// Reads the finished records from the file's offset on, up to the first unfinished one.
fn read_finished(f: &mut LiveFile, block: &mut [u8]) {
    loop {
        let Ok(n) = f.file.read_at(block, f.read.offset) else {
            return;
        };
        let first = f.read.samples.len();
        // Up to the first record being written, or the file's unused tail: the rest next time.
        let finished = block[..n]
            .chunks_exact(SAMPLE_SIZE)
            .take_while(|r| r[31] == 1)
            .map(|r| sample_from(f.pid, f.tid, r));
        f.read.samples.extend(finished);
        let whole = f.read.samples.len() - first;
        f.read.offset += (whole * SAMPLE_SIZE) as u64;
        add_code(&mut f.read.code, &f.read.samples[first..]);
        if whole * SAMPLE_SIZE < block.len() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::read_inst_dir;
    use crate::tail::tests::{header, record};

    fn write(path: &Path, records: &[(u64, bool)]) {
        let mut bytes = header(7, 8);
        for (t, valid) in records {
            let mut r = record(*t, 0x1000 + t, *valid);
            // The last instruction is only in the record read at the end.
            r[16..24].copy_from_slice(&(0x400000 + t / 10).to_le_bytes());
            bytes.extend(r);
        }
        std::fs::write(path, bytes).unwrap();
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
        // The unfinished record is finished, one is left unfinished in the middle (a thread
        // killed while writing it), more follow; another thread's file appears.
        write(
            &a,
            &[(10, true), (20, true), (30, true), (0, false), (50, true)],
        );
        write(&b, &[(15, true), (40, true)]);
        live.read_new(dir.path());
        assert_eq!(live.held(), 5, "stops at the unfinished record");
        let after = read_inst_dir(dir.path());
        let live = live.finish(dir.path());
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
            .samples
            .iter()
            .map(|s| s.time_ns)
            .collect();
        assert_eq!(times, [5]);
    }
}
