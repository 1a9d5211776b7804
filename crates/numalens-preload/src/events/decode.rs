//! A record's fields decoded into an [`Event`], as `numalens_events.h` lays them out.

use super::{AllocFn, BUILD_ID_MAX, Event, MAX_FRAMES, Record, RecordKind};

/// Little-endian fields at byte `at` of a header or record (which the caller has checked is
/// long enough).
pub(super) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A NUL-terminated string from payload bytes (lossy UTF-8).
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Record {
    /// The payload as one byte slice.
    pub fn payload_bytes(&self) -> Vec<u8> {
        self.payload.concat()
    }

    /// Decodes the record; `None` for a kind this reader does not know.
    pub fn decode(&self) -> Option<Event> {
        let kind = RecordKind::from_u16(self.kind)?;
        let (a, b, c, d, e) = (self.a, self.b, self.c, self.d, self.e);
        Some(match kind {
            RecordKind::Alloc => Event::Alloc {
                address: a,
                size: b,
                alignment: c,
                site_id: d,
                function: AllocFn::from_raw(e),
            },
            RecordKind::Free => Event::Free { address: a },
            RecordKind::Realloc => Event::Realloc {
                address: a,
                size: b,
                old_address: c,
                site_id: d,
            },
            RecordKind::Mmap => Event::Mmap {
                address: a,
                length: b,
                prot: c as u32,
                flags: (c >> 32) as u32,
                site_id: d,
                fd: e as i64,
            },
            RecordKind::Munmap => Event::Munmap {
                address: a,
                length: b,
            },
            RecordKind::Mremap => Event::Mremap {
                address: a,
                length: b,
                old_address: c,
                old_length: d,
            },
            RecordKind::ThreadStart => Event::ThreadStart {
                logical_id: a as i64,
                start_routine: b,
                parent_tid: c as u32,
                stack_low: d,
                stack_size: e,
                parent_logical_id: self.f as i64,
            },
            RecordKind::ThreadExit => Event::ThreadExit {
                logical_id: a as i64,
            },
            RecordKind::Fork => Event::Fork {
                child_pid: a as u32,
            },
            RecordKind::Exec => Event::Exec {
                exec_count: a,
                path: c_string(&self.payload_bytes()),
            },
            RecordKind::Module => {
                let p = self.payload_bytes();
                let id_len = (d as usize).min(BUILD_ID_MAX).min(p.len());
                Event::Module {
                    load_bias: a,
                    low: b,
                    high: c,
                    build_id: p[..id_len].to_vec(),
                    path: c_string(p.get(BUILD_ID_MAX..).unwrap_or(&[])),
                    is_main: e == 1,
                }
            }
            RecordKind::Stack => Event::Stack {
                low: a,
                size: b,
                logical_id: c as i64,
            },
            RecordKind::Tls => Event::Tls {
                address: a,
                size: b,
                module_id: c,
                logical_id: d as i64,
            },
            RecordKind::Site => {
                let p = self.payload_bytes();
                let n = (b as usize).min(MAX_FRAMES).min(p.len() / 8);
                Event::Site {
                    site_id: a,
                    frames: (0..n).map(|i| u64_at(&p, i * 8)).collect(),
                }
            }
            RecordKind::PageNodes => Event::PageNodes {
                first_page: a,
                count: b,
                node: c as i64,
                page_size: d,
            },
            RecordKind::SmallAllocs => Event::SmallAllocs { count: a, bytes: b },
            RecordKind::End => Event::End,
            RecordKind::Daemon => Event::Daemon,
            RecordKind::FlushMark => Event::FlushMark,
            RecordKind::ThreadCreate => Event::ThreadCreate {
                logical_id: a as i64,
                error: b as i32,
            },
            RecordKind::Place => Event::Place {
                address: a,
                len: b,
                rule: c as u32,
                node: d as i64,
                errno: e as i32,
                what: self.f as u8,
                spread: self.f & 0x100 != 0,
            },
            RecordKind::Signal => Event::Signal {
                signal: a as i32,
                address: b,
                code: c as i64,
            },
        })
    }
}
