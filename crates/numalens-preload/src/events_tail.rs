//! Counting the objects of a running program from the runtime's event logs as they grow, for the
//! status line. Reads only what was appended since the last look, record by record.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::events::{RECORD_SIZE, RecordKind, find_event_logs};

/// Objects recorded so far in every log of a directory.
#[derive(Default)]
pub struct ObjectCounter {
    /// Per log: the offset of the first record not read yet (a record boundary).
    offsets: HashMap<PathBuf, u64>,
    pub objects: u64,
}

impl ObjectCounter {
    /// Reads what the logs in `dir` gained since the last call.
    pub fn update(&mut self, dir: &Path) {
        let Ok(logs) = find_event_logs(dir) else {
            return;
        };
        for path in logs {
            let offset = self
                .offsets
                .get(&path)
                .copied()
                .unwrap_or(RECORD_SIZE as u64);
            if let Some((new_offset, objects)) = count_from(&path, offset) {
                self.objects += objects;
                self.offsets.insert(path, new_offset);
            }
        }
    }
}

/// Objects in the whole records from `offset` on, and the offset after the last whole record.
fn count_from(path: &Path, offset: u64) -> Option<(u64, u64)> {
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let mut at = 0;
    let mut objects = 0;
    while at + RECORD_SIZE <= bytes.len() {
        let kind = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let payload = u16::from_le_bytes([bytes[at + 2], bytes[at + 3]]) as usize;
        let end = at + (1 + payload) * RECORD_SIZE;
        if end > bytes.len() {
            break;
        }
        let is_object = [RecordKind::Alloc, RecordKind::Realloc, RecordKind::Mmap]
            .iter()
            .any(|k| *k as u16 == kind);
        objects += is_object as u64;
        at = end;
    }
    Some((offset + at as u64, objects))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: RecordKind, payload: u16) -> Vec<u8> {
        let mut r = vec![0u8; RECORD_SIZE * (1 + payload as usize)];
        r[..2].copy_from_slice(&(kind as u16).to_le_bytes());
        r[2..4].copy_from_slice(&payload.to_le_bytes());
        r
    }

    #[test]
    fn counts_appended_records_once_and_waits_for_whole_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events-1.bin");
        let mut bytes = vec![0u8; RECORD_SIZE]; // header
        bytes.extend(record(RecordKind::Alloc, 0));
        bytes.extend(record(RecordKind::Site, 2));
        bytes.extend(record(RecordKind::Mmap, 0));
        let partial = record(RecordKind::Alloc, 1);
        bytes.extend(&partial[..RECORD_SIZE]);
        std::fs::write(&path, &bytes).unwrap();
        let mut counter = ObjectCounter::default();
        counter.update(dir.path());
        assert_eq!(counter.objects, 2);
        counter.update(dir.path());
        assert_eq!(counter.objects, 2, "nothing counted twice");
        bytes.extend(&partial[RECORD_SIZE..]);
        bytes.extend(record(RecordKind::Free, 0));
        std::fs::write(&path, &bytes).unwrap();
        counter.update(dir.path());
        assert_eq!(counter.objects, 3);
    }
}
