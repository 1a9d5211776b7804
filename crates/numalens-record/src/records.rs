//! The perf records other than samples that every sampler's rings carry (task names, forks,
//! exits, mappings, losses), decoded the same way whatever event the ring belongs to. Only the
//! `sample_id` trailer that `sample_id_all` appends differs with the event's `sample_type`.

use numalens_assemble::perf_sample::sample::{CPU, ID, IDENTIFIER, STREAM_ID, TID, TIME};
use numalens_assemble::raw::PerfEvent;
use perf_event_open_sys::bindings as sys;

/// The `sample_id` trailer of non-sample records: its size and where its time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    bytes: usize,
    /// Bytes from the end of the record to the start of the time field.
    time_from_end: usize,
}

impl Trailer {
    /// The trailer of an event sampled with `sample_type` (which must include `TIME`): pid and
    /// tid, time, id, stream id, cpu, identifier, each present when the sample has it.
    pub fn of(sample_type: u64) -> Trailer {
        let words = |bits: &[u64]| bits.iter().filter(|&&b| sample_type & b != 0).count() * 8;
        let after_time = words(&[ID, STREAM_ID, CPU, IDENTIFIER]);
        Trailer {
            bytes: words(&[TID, TIME]) + after_time,
            time_from_end: after_time + 8,
        }
    }

    fn time(&self, bytes: &[u8]) -> Option<u64> {
        let at = bytes.len().checked_sub(self.time_from_end)?;
        Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    }
}

/// Little-endian field reader over one record.
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    /// The fields of `bytes`, a record with its 8-byte header.
    pub(crate) fn after_header(bytes: &'a [u8]) -> Self {
        Fields { bytes, at: 8 }
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        let v = self.bytes.get(self.at..self.at + 8)?;
        self.at += 8;
        Some(u64::from_le_bytes(v.try_into().ok()?))
    }
    pub(crate) fn u32_pair(&mut self) -> Option<(u32, u32)> {
        let v = self.u64()?;
        Some((v as u32, (v >> 32) as u32))
    }
    /// A NUL-padded string occupying the record up to the trailing sample_id fields.
    fn string(&mut self, trailer: usize) -> Option<String> {
        let end = self.bytes.len().checked_sub(trailer)?;
        let raw = self.bytes.get(self.at..end)?;
        self.at = end;
        let len = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
        Some(String::from_utf8_lossy(&raw[..len]).into_owned())
    }
}

/// The record's type, from its header.
pub fn kind(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(0..4)?.try_into().ok()?))
}

/// Decodes a record that is not a sample (header included); `None` for kinds we do not use or
/// malformed ones.
pub fn decode_task(bytes: &[u8], trailer: Trailer) -> Option<PerfEvent> {
    let kind = kind(bytes)?;
    let misc = u16::from_le_bytes(bytes.get(4..6)?.try_into().ok()?);
    let mut f = Fields::after_header(bytes);
    match kind {
        sys::PERF_RECORD_LOST => {
            let _id = f.u64()?;
            Some(PerfEvent::Lost { count: f.u64()? })
        }
        sys::PERF_RECORD_COMM => {
            let (pid, tid) = f.u32_pair()?;
            let name = f.string(trailer.bytes)?;
            let time_ns = trailer.time(bytes)?;
            let exec = misc & sys::PERF_RECORD_MISC_COMM_EXEC as u16 != 0;
            Some(PerfEvent::Comm {
                pid,
                tid,
                name,
                exec,
                time_ns,
            })
        }
        sys::PERF_RECORD_FORK | sys::PERF_RECORD_EXIT => {
            let (pid, ppid) = f.u32_pair()?;
            let (tid, ptid) = f.u32_pair()?;
            let time_ns = f.u64()?;
            Some(if kind == sys::PERF_RECORD_FORK {
                PerfEvent::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                    time_ns,
                }
            } else {
                PerfEvent::Exit { pid, tid, time_ns }
            })
        }
        sys::PERF_RECORD_MMAP2 => {
            let (pid, tid) = f.u32_pair()?;
            let (start, len, pgoff) = (f.u64()?, f.u64()?, f.u64()?);
            f.at += 16; // maj, min, ino (or build id)
            f.at += 8; // ino_generation
            let (prot, flags) = f.u32_pair()?;
            let path = f.string(trailer.bytes)?;
            let time_ns = trailer.time(bytes)?;
            Some(PerfEvent::Mmap {
                pid,
                tid,
                start,
                len,
                pgoff,
                prot,
                flags,
                path,
                time_ns,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailer_follows_the_sample_type() {
        let faults = Trailer::of(TID | TIME | CPU);
        assert_eq!((faults.bytes, faults.time_from_end), (24, 16));
        let precise = Trailer::of(TID | TIME | CPU | IDENTIFIER);
        assert_eq!((precise.bytes, precise.time_from_end), (32, 24));
        // A COMM record of the precise sampler: header, pid, tid, name, then the trailer.
        let mut bytes = vec![0u8; 8];
        bytes[0..4].copy_from_slice(&sys::PERF_RECORD_COMM.to_le_bytes());
        bytes.extend(7u32.to_le_bytes());
        bytes.extend(8u32.to_le_bytes());
        bytes.extend(b"worker\0\0");
        for word in [7u64 | 8 << 32, 12345, 1, 99] {
            bytes.extend(word.to_le_bytes());
        }
        let event = decode_task(&bytes, precise).unwrap();
        assert_eq!(
            event,
            PerfEvent::Comm {
                pid: 7,
                tid: 8,
                name: "worker".into(),
                exec: false,
                time_ns: 12345
            }
        );
    }
}
