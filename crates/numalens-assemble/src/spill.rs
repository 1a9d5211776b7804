//! What only the recorder holds, appended to the events directory as it comes, so that a
//! recorder killed while the program runs loses at most its last few hundred milliseconds.
//!
//! The page-fault and memory-access samples, the perf task records (forks, exits, execs, mappings), the lost
//! counts and the `/proc/PID/maps` snapshots live in the recorder's memory until the profile is
//! written. Each is also encoded into a buffer, which is written to `recorder.spill` at every
//! maps snapshot (100 ms): one `write` per interval. `numalens recover` reads the file back;
//! a record cut off by the kill ends the reading there. A write that fails (a full disk) stops
//! the spilling, never the recording.
//!
//! File: the magic `NLSPILL1`, then records `kind: u8, length: u32 LE, payload`. Payloads are
//! little-endian fields in the order of the structs they copy; strings are a `u32` length and
//! UTF-8 bytes.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::procmaps::MapsHistory;
use numalens_format::{DataSource, Label, SampleKind, Snoop};

use crate::raw::{Access, Fault, PerfEvent};

/// The spill file in the events directory.
pub const SPILL_FILE: &str = "recorder.spill";
const MAGIC: &[u8; 8] = b"NLSPILL1";

const FAULT: u8 = 1;
const LOST: u8 = 2;
const COMM: u8 = 3;
const FORK: u8 = 4;
const EXIT: u8 = 5;
const MMAP: u8 = 6;
const MAPS: u8 = 7;
const ACCESS: u8 = 8;

/// An absent `u32` field of an access (its CPU, latency, node, page size).
const NONE_U32: u32 = u32::MAX;

/// The recorder's side: a buffer of encoded records and the file they go to.
#[derive(Default)]
pub struct Spill {
    file: Option<File>,
    buffer: Vec<u8>,
}

impl Spill {
    /// Creates the spill file in `events_dir`; without one (it cannot be created) nothing is
    /// kept.
    pub fn create(events_dir: &Path) -> Spill {
        let file = File::create(events_dir.join(SPILL_FILE))
            .and_then(|mut f| f.write_all(MAGIC).map(|()| f))
            .ok();
        Spill {
            file,
            buffer: Vec::new(),
        }
    }

    /// Adds a perf record.
    pub fn event(&mut self, event: &PerfEvent) {
        if self.file.is_none() {
            return;
        }
        let at = self.begin(kind(event));
        let b = &mut self.buffer;
        match event {
            PerfEvent::Fault(f) => {
                put32(b, f.pid);
                put32(b, f.tid);
                put64(b, f.time_ns);
                put64(b, f.address);
                put32(b, f.cpu);
                put32(b, f.mapped_page_size);
                put64(b, f.ip);
            }
            PerfEvent::Access(a) => put_access(b, a),
            PerfEvent::Lost { count } => put64(b, *count),
            PerfEvent::Comm {
                pid,
                tid,
                name,
                exec,
                time_ns,
            } => {
                put32(b, *pid);
                put32(b, *tid);
                put_str(b, name);
                b.push(*exec as u8);
                put64(b, *time_ns);
            }
            PerfEvent::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time_ns,
            } => {
                for v in [pid, ppid, tid, ptid] {
                    put32(b, *v);
                }
                put64(b, *time_ns);
            }
            PerfEvent::Exit { pid, tid, time_ns } => {
                put32(b, *pid);
                put32(b, *tid);
                put64(b, *time_ns);
            }
            PerfEvent::Mmap {
                pid,
                tid,
                start,
                len,
                pgoff,
                prot,
                flags,
                path,
                time_ns,
            } => {
                put32(b, *pid);
                put32(b, *tid);
                put64(b, *start);
                put64(b, *len);
                put64(b, *pgoff);
                put32(b, *prot);
                put32(b, *flags);
                put_str(b, path);
                put64(b, *time_ns);
            }
        }
        self.end(at);
    }

    /// Adds the text of a `/proc/PID/maps` snapshot.
    pub fn maps(&mut self, pid: u32, now_ns: u64, text: &str) {
        if self.file.is_none() {
            return;
        }
        let at = self.begin(MAPS);
        put32(&mut self.buffer, pid);
        put64(&mut self.buffer, now_ns);
        put_str(&mut self.buffer, text);
        self.end(at);
    }

    /// Writes what was added since the last call.
    pub fn flush(&mut self) {
        let Some(file) = &mut self.file else {
            return;
        };
        if file.write_all(&self.buffer).is_err() {
            // A full disk: what is in the file stays readable up to its last whole record.
            self.file = None;
        }
        self.buffer.clear();
    }

    /// Starts a record: its kind and room for its length.
    fn begin(&mut self, kind: u8) -> usize {
        self.buffer.push(kind);
        self.buffer.extend_from_slice(&[0; 4]);
        self.buffer.len()
    }

    fn end(&mut self, payload_at: usize) {
        let len = (self.buffer.len() - payload_at) as u32;
        self.buffer[payload_at - 4..payload_at].copy_from_slice(&len.to_le_bytes());
    }
}

fn kind(event: &PerfEvent) -> u8 {
    match event {
        PerfEvent::Fault(_) => FAULT,
        PerfEvent::Access(_) => ACCESS,
        PerfEvent::Lost { .. } => LOST,
        PerfEvent::Comm { .. } => COMM,
        PerfEvent::Fork { .. } => FORK,
        PerfEvent::Exit { .. } => EXIT,
        PerfEvent::Mmap { .. } => MMAP,
    }
}

fn put_access(b: &mut Vec<u8>, a: &Access) {
    put32(b, a.pid);
    put32(b, a.tid);
    put64(b, a.time_ns);
    put64(b, a.address);
    put64(b, a.ip);
    put32(b, a.weight);
    for v in [a.cpu, a.latency, a.node, a.page_size] {
        put32(b, v.unwrap_or(NONE_U32));
    }
    put_str(b, a.kind.label());
    put_str(b, a.data_source.label());
    // Last, so that a record written before the field was added still reads (without it).
    put_str(b, a.snoop.map_or("", |s| s.label()));
}

fn put32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put32(b, s.len() as u32);
    b.extend_from_slice(s.as_bytes());
}

/// What a spill file gave back.
#[derive(Default)]
pub struct Spilled {
    pub faults: Vec<Fault>,
    pub accesses: Vec<Access>,
    pub tasks: Vec<PerfEvent>,
    pub lost: u64,
    pub maps: MapsHistory,
    /// The file exists and begins with the magic.
    pub found: bool,
    /// The file ended inside a record, or a record could not be decoded.
    pub cut_off: bool,
}

/// Reads `events_dir`'s spill file; a missing or foreign file gives nothing.
pub fn read_spill(events_dir: &Path) -> Spilled {
    let mut spilled = Spilled::default();
    let Ok(bytes) = std::fs::read(events_dir.join(SPILL_FILE)) else {
        return spilled;
    };
    let Some(mut rest) = bytes.strip_prefix(MAGIC.as_slice()) else {
        return spilled;
    };
    spilled.found = true;
    while !rest.is_empty() {
        let Some((kind, payload, after)) = split_record(rest) else {
            spilled.cut_off = true;
            break;
        };
        rest = after;
        if decode(kind, &mut Reader(payload), &mut spilled).is_none() {
            spilled.cut_off = true;
            break;
        }
    }
    spilled
}

fn split_record(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&kind, rest) = bytes.split_first()?;
    let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let payload = rest.get(4..4 + len)?;
    Some((kind, payload, &rest[4 + len..]))
}

fn decode(kind: u8, r: &mut Reader<'_>, out: &mut Spilled) -> Option<()> {
    match kind {
        FAULT => out.faults.push(Fault {
            pid: r.u32()?,
            tid: r.u32()?,
            time_ns: r.u64()?,
            address: r.u64()?,
            cpu: r.u32()?,
            mapped_page_size: r.u32()?,
            ip: r.u64()?,
        }),
        ACCESS => out.accesses.push(read_access(r)?),
        LOST => out.lost += r.u64()?,
        COMM => out.tasks.push(PerfEvent::Comm {
            pid: r.u32()?,
            tid: r.u32()?,
            name: r.string()?,
            exec: r.u8()? != 0,
            time_ns: r.u64()?,
        }),
        FORK => out.tasks.push(PerfEvent::Fork {
            pid: r.u32()?,
            ppid: r.u32()?,
            tid: r.u32()?,
            ptid: r.u32()?,
            time_ns: r.u64()?,
        }),
        EXIT => out.tasks.push(PerfEvent::Exit {
            pid: r.u32()?,
            tid: r.u32()?,
            time_ns: r.u64()?,
        }),
        MMAP => out.tasks.push(PerfEvent::Mmap {
            pid: r.u32()?,
            tid: r.u32()?,
            start: r.u64()?,
            len: r.u64()?,
            pgoff: r.u64()?,
            prot: r.u32()?,
            flags: r.u32()?,
            path: r.string()?,
            time_ns: r.u64()?,
        }),
        MAPS => {
            let (pid, now) = (r.u32()?, r.u64()?);
            out.maps.add(pid, &r.string()?, now);
        }
        // A kind this reader does not know: skipped whole.
        _ => {}
    }
    Some(())
}

fn read_access(r: &mut Reader<'_>) -> Option<Access> {
    let (pid, tid, time_ns, address, ip, weight) =
        (r.u32()?, r.u32()?, r.u64()?, r.u64()?, r.u64()?, r.u32()?);
    let mut optional = [None; 4];
    for v in &mut optional {
        *v = Some(r.u32()?).filter(|&v| v != NONE_U32);
    }
    let [cpu, latency, node, page_size] = optional;
    Some(Access {
        pid,
        tid,
        time_ns,
        address,
        cpu,
        ip,
        kind: SampleKind::from_label(&r.string()?)?,
        weight,
        data_source: DataSource::from_label(&r.string()?)?,
        latency,
        node,
        page_size,
        snoop: r.string().and_then(|s| Snoop::from_label(&s)),
    })
}

/// Little-endian fields from a record's payload; `None` past its end.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn string(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(i: u64) -> PerfEvent {
        PerfEvent::Fault(Fault {
            pid: 7,
            tid: 8,
            time_ns: 1000 + i,
            address: 0x1000 * i,
            cpu: 1,
            mapped_page_size: 4096,
            ip: 0x400000 + i,
        })
    }

    fn access() -> Access {
        Access {
            pid: 7,
            tid: 9,
            time_ns: 1500,
            address: 0x7f00_1234,
            cpu: Some(1),
            ip: 0x401000,
            kind: SampleKind::Store,
            weight: 500,
            data_source: DataSource::RemoteDram,
            latency: None,
            node: Some(1),
            page_size: None,
            snoop: Some(Snoop::Hitm),
        }
    }

    #[test]
    fn every_record_comes_back_and_a_cut_off_end_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::create(dir.path());
        let events = vec![
            PerfEvent::Comm {
                pid: 7,
                tid: 7,
                name: "worker".into(),
                exec: true,
                time_ns: 5,
            },
            PerfEvent::Fork {
                pid: 7,
                ppid: 7,
                tid: 8,
                ptid: 7,
                time_ns: 6,
            },
            PerfEvent::Mmap {
                pid: 7,
                tid: 8,
                start: 0x7000,
                len: 0x2000,
                pgoff: 0,
                prot: 3,
                flags: 2,
                path: "//anon".into(),
                time_ns: 9,
            },
            fault(1),
            PerfEvent::Access(access()),
            PerfEvent::Lost { count: 3 },
            PerfEvent::Exit {
                pid: 7,
                tid: 8,
                time_ns: 20,
            },
        ];
        for e in &events {
            spill.event(e);
        }
        spill.maps(7, 15, "1000-2000 rw-p 00000000 00:00 0 [heap]\n");
        spill.flush();
        spill.event(&fault(2));
        spill.flush();
        let back = read_spill(dir.path());
        assert!(back.found && !back.cut_off);
        assert_eq!(back.lost, 3);
        assert_eq!(back.faults.len(), 2);
        assert_eq!(PerfEvent::Fault(back.faults[0]), fault(1));
        assert_eq!(back.accesses, vec![access()]);
        let tasks: Vec<_> = events
            .iter()
            .filter(|e| {
                !matches!(
                    e,
                    PerfEvent::Fault(_) | PerfEvent::Access(_) | PerfEvent::Lost { .. }
                )
            })
            .cloned()
            .collect();
        assert_eq!(back.tasks, tasks);
        assert_eq!(back.maps.mappings()[0].mapping.path, "[heap]");

        // Killed in the middle of a write: the whole records before it are kept.
        let path = dir.path().join(SPILL_FILE);
        let len = std::fs::metadata(&path).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len - 5).unwrap();
        let back = read_spill(dir.path());
        assert!(back.cut_off);
        assert_eq!(back.faults.len(), 1);
    }

    #[test]
    fn a_foreign_or_missing_file_gives_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!read_spill(dir.path()).found);
        std::fs::write(dir.path().join(SPILL_FILE), b"garbage, not a spill").unwrap();
        let back = read_spill(dir.path());
        assert!(!back.found && back.faults.is_empty());
    }
}
