//! Reading a whole event log: the header checked, the records split, a torn tail dropped.

use std::path::{Path, PathBuf};

use super::decode::{u16_at, u32_at, u64_at};
use super::{FileHeader, MAGIC, RECORD_SIZE, Record, RecordKind, TimedEvent, VERSION};

/// A whole event log.
#[derive(Clone, Debug)]
pub struct EventLog {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its header.
    pub header: FileHeader,
    /// Records of known kinds, in file order.
    pub records: Vec<Record>,
    /// The file ended inside a record (the process was killed mid-write); it was dropped.
    pub truncated: bool,
    /// Records of kinds this reader does not know, skipped.
    pub unknown_records: u64,
}

/// Why a log could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventsError {
    /// Reading failed.
    #[error("cannot read event log {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Not a numalens event log.
    #[error("{path} is not a numalens event log (bad magic or shorter than its header)")]
    BadMagic {
        /// The file.
        path: PathBuf,
    },
    /// Written by a newer runtime.
    #[error(
        "{path} is event-log version {version}, newer than this numalens reads ({VERSION}); upgrade numalens"
    )]
    NewerVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// A version-1 file whose record size is not 64.
    #[error("{path} has record size {size}, expected {RECORD_SIZE}")]
    BadRecordSize {
        /// The file.
        path: PathBuf,
        /// The size found.
        size: u32,
    },
}

/// Reads and parses the event log at `path`.
pub fn read_event_log(path: impl AsRef<Path>) -> Result<EventLog, EventsError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| EventsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_event_log(&bytes, path)
}

/// Parses an event log held in memory; `path` only names it in errors.
pub fn parse_event_log(bytes: &[u8], path: &Path) -> Result<EventLog, EventsError> {
    if bytes.len() < RECORD_SIZE || &bytes[..8] != MAGIC {
        return Err(EventsError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    let version = u32_at(bytes, 8);
    if version > VERSION || version == 0 {
        return Err(EventsError::NewerVersion {
            path: path.to_path_buf(),
            version,
        });
    }
    let record_size = u32_at(bytes, 12);
    if record_size as usize != RECORD_SIZE {
        return Err(EventsError::BadRecordSize {
            path: path.to_path_buf(),
            size: record_size,
        });
    }
    let header = FileHeader {
        version,
        record_size,
        pid: u32_at(bytes, 16),
        ppid: u32_at(bytes, 20),
        start_ns: u64_at(bytes, 24),
        page_size: u32_at(bytes, 32),
        min_object: u32_at(bytes, 36),
        exec_count: u64_at(bytes, 40),
        write_errno: u32_at(bytes, 48),
        inst_uncounted: u32_at(bytes, 52),
    };
    let body = &bytes[RECORD_SIZE..];
    let mut chunks = body.chunks_exact(RECORD_SIZE);
    let mut truncated = !chunks.remainder().is_empty();
    let mut records = Vec::new();
    let mut unknown_records = 0;
    while let Some(r) = chunks.next() {
        let payload_n = usize::from(u16_at(r, 2));
        if chunks.len() < payload_n {
            truncated = true;
            break;
        }
        let payload: Vec<[u8; RECORD_SIZE]> = chunks
            .by_ref()
            .take(payload_n)
            .map(|p| p.try_into().expect("64 bytes"))
            .collect();
        let kind = u16_at(r, 0);
        if RecordKind::from_u16(kind).is_none() {
            unknown_records += 1;
            continue;
        }
        records.push(Record {
            kind,
            tid: u32_at(r, 4),
            time_ns: u64_at(r, 8),
            a: u64_at(r, 16),
            b: u64_at(r, 24),
            c: u64_at(r, 32),
            d: u64_at(r, 40),
            e: u64_at(r, 48),
            f: u64_at(r, 56),
            payload,
        });
    }
    Ok(EventLog {
        path: path.to_path_buf(),
        header,
        records,
        truncated,
        unknown_records,
    })
}

/// The event logs (`events-*.bin`) in a directory, sorted by name.
pub fn find_event_logs(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>, EventsError> {
    let dir = dir.as_ref();
    let io = |source| EventsError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let p = e.map_err(io)?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("events-") && name.ends_with(".bin") {
            v.push(p);
        }
    }
    v.sort();
    Ok(v)
}

impl EventLog {
    /// The decoded events, in file order.
    pub fn events(&self) -> impl Iterator<Item = TimedEvent> + '_ {
        self.records.iter().filter_map(|r| {
            Some(TimedEvent {
                tid: r.tid,
                time_ns: r.time_ns,
                event: r.decode()?,
            })
        })
    }

    /// Whether the log ends with the runtime's clean-exit record.
    pub fn has_end(&self) -> bool {
        self.records
            .iter()
            .any(|r| r.kind == RecordKind::End as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;

    fn header(version: u32) -> Vec<u8> {
        let mut h = vec![0u8; RECORD_SIZE];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&version.to_le_bytes());
        h[12..16].copy_from_slice(&64u32.to_le_bytes());
        h[16..20].copy_from_slice(&42u32.to_le_bytes());
        h
    }

    fn record(kind: u16, payload: u16, a: u64) -> Vec<u8> {
        let mut r = vec![0u8; RECORD_SIZE];
        r[..2].copy_from_slice(&kind.to_le_bytes());
        r[2..4].copy_from_slice(&payload.to_le_bytes());
        r[16..24].copy_from_slice(&a.to_le_bytes());
        r
    }

    #[test]
    fn torn_tail_and_unknown_kinds() {
        let mut f = header(1);
        f.extend(record(2, 0, 0x1000));
        f.extend(record(999, 1, 0));
        f.extend([0u8; 64]);
        f.extend(record(17, 0, 0));
        f.extend(record(14, 1, 7));
        f.extend([0u8; 10]);
        let log = parse_event_log(&f, Path::new("x.bin")).unwrap();
        assert_eq!(log.header.pid, 42);
        assert!(log.truncated);
        assert_eq!(log.unknown_records, 1);
        let ev: Vec<_> = log.events().map(|e| e.event).collect();
        assert_eq!(ev, vec![Event::Free { address: 0x1000 }, Event::End]);
    }

    #[test]
    fn errors_name_the_file() {
        let e = parse_event_log(b"garbage", Path::new("/t/a.bin")).unwrap_err();
        assert!(e.to_string().contains("/t/a.bin"), "{e}");
        let e = parse_event_log(&header(9), Path::new("/t/b.bin")).unwrap_err();
        assert!(matches!(e, EventsError::NewerVersion { version: 9, .. }));
        assert!(e.to_string().contains("/t/b.bin") && e.to_string().contains("upgrade"));
    }

    #[test]
    fn kinds_round_trip() {
        for k in RecordKind::ALL {
            assert_eq!(RecordKind::from_u16(k as u16), Some(k));
        }
        assert_eq!(RecordKind::from_u16(0), None);
        assert_eq!(RecordKind::from_u16(23), None);
    }
}
