//! The runtime's event logs read as they grow, while the program runs: objects counted for the
//! status line ([`ObjectCounter`]), and the events themselves for what acts on them live
//! ([`EventTail`]). Each reads only what was appended since the last look, whole records only.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::events::{RECORD_SIZE, RecordKind, TimedEvent, find_event_logs, parse_event_log};

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
    let whole = read_whole(path, offset)?;
    let mut at = 0;
    let mut objects = 0;
    while at < whole.len() {
        let kind = u16::from_le_bytes([whole[at], whole[at + 1]]);
        let payload = u16::from_le_bytes([whole[at + 2], whole[at + 3]]) as usize;
        let is_object = [RecordKind::Alloc, RecordKind::Realloc, RecordKind::Mmap]
            .iter()
            .any(|k| *k as u16 == kind);
        objects += is_object as u64;
        at += (1 + payload) * RECORD_SIZE;
    }
    Some((offset + whole.len() as u64, objects))
}

/// The events appended to every log of a directory since the last call, with the pid of the
/// process each log belongs to.
#[derive(Default)]
pub struct EventTail {
    /// Per log: its header (the first record) and the offset of the first record not read yet.
    logs: HashMap<PathBuf, (Vec<u8>, u64)>,
}

impl EventTail {
    /// New events of each log in `dir`, in file order per log; a log whose header is not
    /// readable yet is tried again next time.
    pub fn read_new(&mut self, dir: &Path) -> Vec<(u32, TimedEvent)> {
        let Ok(paths) = find_event_logs(dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for path in paths {
            if !self.logs.contains_key(&path) {
                match header(&path) {
                    Some(h) => self.logs.insert(path.clone(), (h, RECORD_SIZE as u64)),
                    None => continue,
                };
            }
            let (head, offset) = self.logs.get_mut(&path).expect("inserted above");
            let Some(whole) = read_whole(&path, *offset) else {
                continue;
            };
            *offset += whole.len() as u64;
            let mut log_bytes = head.clone();
            log_bytes.extend_from_slice(&whole);
            if let Ok(log) = parse_event_log(&log_bytes, &path) {
                let pid = log.header.pid;
                out.extend(log.events().map(|e| (pid, e)));
            }
        }
        out
    }
}

/// The log's header record, once it is all there.
fn header(path: &Path) -> Option<Vec<u8>> {
    let mut head = vec![0u8; RECORD_SIZE];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    Some(head)
}

/// The whole records from `offset` on (a record with all its payload records): a record still
/// being appended waits for the next look.
fn read_whole(path: &Path, offset: u64) -> Option<Vec<u8>> {
    let mut file = std::fs::File::open(path).ok()?;
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let mut at = 0;
    while at + RECORD_SIZE <= bytes.len() {
        let payload = u16::from_le_bytes([bytes[at + 2], bytes[at + 3]]) as usize;
        let end = at + (1 + payload) * RECORD_SIZE;
        if end > bytes.len() {
            break;
        }
        at = end;
    }
    bytes.truncate(at);
    Some(bytes)
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

    #[test]
    fn events_come_once_with_their_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events-42.bin");
        let mut bytes = vec![0u8; RECORD_SIZE];
        bytes[..8].copy_from_slice(crate::events::MAGIC);
        bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        bytes[12..16].copy_from_slice(&(RECORD_SIZE as u32).to_le_bytes());
        bytes[16..20].copy_from_slice(&42u32.to_le_bytes());
        let mut alloc = record(RecordKind::Alloc, 0);
        alloc[16..24].copy_from_slice(&0x5000u64.to_le_bytes());
        bytes.extend(&alloc);
        let free = record(RecordKind::Free, 0);
        bytes.extend(&free[..10]);
        std::fs::write(&path, &bytes).unwrap();
        let mut tail = EventTail::default();
        let first = tail.read_new(dir.path());
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].0, 42);
        assert!(matches!(
            first[0].1.event,
            crate::events::Event::Alloc {
                address: 0x5000,
                ..
            }
        ));
        bytes.extend(&free[10..]);
        std::fs::write(&path, &bytes).unwrap();
        let second = tail.read_new(dir.path());
        assert_eq!(second.len(), 1, "{second:?}");
        assert!(matches!(
            second[0].1.event,
            crate::events::Event::Free { .. }
        ));
        assert!(tail.read_new(dir.path()).is_empty());
    }
}
