//! The event log written by the `libnumalens` runtime: the Rust mirror of
//! `runtime/include/numalens_events.h`, which is the one definition of the layout.
//!
//! A log is a 64-byte [`FileHeader`] followed by 64-byte little-endian records. A record may own
//! `payload` raw records that follow it (strings, build ids, call-site frames). Files are written
//! a thread buffer at a time, so a killed process can leave a torn last record: the reader drops
//! it and reports [`EventLog::truncated`]. Record kinds this reader does not know are skipped and
//! counted. A round-trip test (`tests/runtime_events_roundtrip.rs`: C writes every kind, Rust reads
//! it back field by field) and a check of the header's kind numbers keep the two sides equal.

use std::path::{Path, PathBuf};

/// First 8 bytes of every event log.
pub const MAGIC: &[u8; 8] = b"NLEVENTS";
/// The version this reader writes and reads; newer files are refused.
pub const VERSION: u32 = 1;
/// Size of the header and of every record.
pub const RECORD_SIZE: usize = 64;
/// Most frames in a call site.
pub const MAX_FRAMES: usize = 8;
/// Size of the build-id part of a MODULE payload.
pub const BUILD_ID_MAX: usize = 64;

/// Record kinds (`enum nl_record_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
#[non_exhaustive]
pub enum RecordKind {
    /// `NL_REC_ALLOC`
    Alloc = 1,
    /// `NL_REC_FREE`
    Free = 2,
    /// `NL_REC_REALLOC`
    Realloc = 3,
    /// `NL_REC_MMAP`
    Mmap = 4,
    /// `NL_REC_MUNMAP`
    Munmap = 5,
    /// `NL_REC_MREMAP`
    Mremap = 6,
    /// `NL_REC_THREAD_START`
    ThreadStart = 7,
    /// `NL_REC_THREAD_EXIT`
    ThreadExit = 8,
    /// `NL_REC_FORK`
    Fork = 9,
    /// `NL_REC_EXEC`
    Exec = 10,
    /// `NL_REC_MODULE`
    Module = 11,
    /// `NL_REC_STACK`
    Stack = 12,
    /// `NL_REC_TLS`
    Tls = 13,
    /// `NL_REC_SITE`
    Site = 14,
    /// `NL_REC_PAGE_NODES`
    PageNodes = 15,
    /// `NL_REC_SMALL_ALLOCS`
    SmallAllocs = 16,
    /// `NL_REC_END`
    End = 17,
    /// `NL_REC_SIGNAL`
    Signal = 18,
    /// `NL_REC_DAEMON`
    Daemon = 19,
    /// `NL_REC_PLACE`
    Place = 20,
}

impl RecordKind {
    /// Every kind, in numeric order.
    pub const ALL: [RecordKind; 20] = [
        Self::Alloc,
        Self::Free,
        Self::Realloc,
        Self::Mmap,
        Self::Munmap,
        Self::Mremap,
        Self::ThreadStart,
        Self::ThreadExit,
        Self::Fork,
        Self::Exec,
        Self::Module,
        Self::Stack,
        Self::Tls,
        Self::Site,
        Self::PageNodes,
        Self::SmallAllocs,
        Self::End,
        Self::Signal,
        Self::Daemon,
        Self::Place,
    ];

    /// The kind with this number, if this reader knows it.
    pub fn from_u16(v: u16) -> Option<Self> {
        Self::ALL.get(usize::from(v).checked_sub(1)?).copied()
    }

    /// The C name without its `NL_REC_` prefix, e.g. `THREAD_START`.
    pub fn c_name(self) -> &'static str {
        match self {
            Self::Alloc => "ALLOC",
            Self::Free => "FREE",
            Self::Realloc => "REALLOC",
            Self::Mmap => "MMAP",
            Self::Munmap => "MUNMAP",
            Self::Mremap => "MREMAP",
            Self::ThreadStart => "THREAD_START",
            Self::ThreadExit => "THREAD_EXIT",
            Self::Fork => "FORK",
            Self::Exec => "EXEC",
            Self::Module => "MODULE",
            Self::Stack => "STACK",
            Self::Tls => "TLS",
            Self::Site => "SITE",
            Self::PageNodes => "PAGE_NODES",
            Self::SmallAllocs => "SMALL_ALLOCS",
            Self::End => "END",
            Self::Signal => "SIGNAL",
            Self::Daemon => "DAEMON",
            Self::Place => "PLACE",
        }
    }
}

/// Which function made an allocation (`enum nl_alloc_fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AllocFn {
    /// `malloc`
    Malloc,
    /// `calloc`
    Calloc,
    /// `posix_memalign`
    PosixMemalign,
    /// `aligned_alloc`
    AlignedAlloc,
    /// `memalign`
    Memalign,
    /// `valloc`
    Valloc,
    /// `pvalloc`
    Pvalloc,
    /// A number this reader does not know.
    Other(u64),
}

impl AllocFn {
    /// Decodes `NL_FN_*`.
    pub fn from_raw(v: u64) -> Self {
        match v {
            1 => Self::Malloc,
            2 => Self::Calloc,
            3 => Self::PosixMemalign,
            4 => Self::AlignedAlloc,
            5 => Self::Memalign,
            6 => Self::Valloc,
            7 => Self::Pvalloc,
            x => Self::Other(x),
        }
    }
}

/// The file header (`struct nl_file_header`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Format version of the file.
    pub version: u32,
    /// Size of each record (64).
    pub record_size: u32,
    /// Process id of the traced process.
    pub pid: u32,
    /// Its parent (the forking process for a fork child).
    pub ppid: u32,
    /// CLOCK_MONOTONIC when the runtime started in this process image.
    pub start_ns: u64,
    /// The system page size.
    pub page_size: u32,
    /// Allocations of at least this size have records and call sites.
    pub min_object: u32,
    /// How many execs led to this image (0 for the first program).
    pub exec_count: u64,
    /// 0, or the errno of the write after which the runtime could write no more of the log (a
    /// seccomp filter, a full disk): the log stops there although the process went on.
    pub write_errno: u32,
    /// Threads of the `inst` runtime in this process that could not make their count files (no
    /// descriptor left, no space): their accesses are not counted.
    pub inst_uncounted: u32,
}

/// One raw record (`struct nl_record`) with the payload records that belong to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// `enum nl_record_kind` as written.
    pub kind: u16,
    /// Kernel thread id of the writer.
    pub tid: u32,
    /// CLOCK_MONOTONIC.
    pub time_ns: u64,
    /// Generic fields; their meaning depends on `kind` (see the header).
    pub a: u64,
    /// See `a`.
    pub b: u64,
    /// See `a`.
    pub c: u64,
    /// See `a`.
    pub d: u64,
    /// See `a`.
    pub e: u64,
    /// See `a`.
    pub f: u64,
    /// The raw payload records.
    pub payload: Vec<[u8; RECORD_SIZE]>,
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A heap allocation of at least `min_object` bytes.
    Alloc {
        /// Address returned.
        address: u64,
        /// Size requested.
        size: u64,
        /// Alignment requested (0 = default).
        alignment: u64,
        /// Call site (0 = none), see [`Event::Site`].
        site_id: u64,
        /// The allocating function.
        function: AllocFn,
    },
    /// A heap block that may have been a recorded allocation was freed.
    Free {
        /// Address freed.
        address: u64,
    },
    /// A `realloc` involving at least `min_object` bytes (address 0 and size 0: freed).
    Realloc {
        /// New address.
        address: u64,
        /// New size.
        size: u64,
        /// Old address (0 for `realloc(NULL, n)`).
        old_address: u64,
        /// Call site (0 = none).
        site_id: u64,
    },
    /// An `mmap` by the program.
    Mmap {
        /// Address mapped.
        address: u64,
        /// Length.
        length: u64,
        /// `PROT_*`.
        prot: u32,
        /// `MAP_*`.
        flags: u32,
        /// Call site (0 = none; only mappings of at least `min_object`).
        site_id: u64,
        /// File descriptor (-1 for anonymous).
        fd: i64,
    },
    /// An `munmap` (recorded before the unmapping).
    Munmap {
        /// Address.
        address: u64,
        /// Length.
        length: u64,
    },
    /// An `mremap`.
    Mremap {
        /// New address.
        address: u64,
        /// New length.
        length: u64,
        /// Old address.
        old_address: u64,
        /// Old length.
        old_length: u64,
    },
    /// A thread started (the main thread too, with id 0).
    ThreadStart {
        /// Logical thread id: creation order within the process.
        logical_id: i64,
        /// Address of its start routine (0 for the main thread).
        start_routine: u64,
        /// Kernel tid of the creating thread (0 for the main thread).
        parent_tid: u32,
        /// Lowest address of its stack.
        stack_low: u64,
        /// Stack size.
        stack_size: u64,
        /// Logical id of the creating thread.
        parent_logical_id: i64,
    },
    /// A thread returned from its start routine or called `pthread_exit`.
    ThreadExit {
        /// Logical thread id.
        logical_id: i64,
    },
    /// This process forked.
    Fork {
        /// The child's pid (it writes its own log).
        child_pid: u32,
    },
    /// This process image is about to exec.
    Exec {
        /// The exec count of the new image.
        exec_count: u64,
        /// Path given to exec.
        path: String,
    },
    /// A loaded module.
    Module {
        /// Load bias (`dlpi_addr`).
        load_bias: u64,
        /// Lowest mapped address.
        low: u64,
        /// One past the highest mapped address.
        high: u64,
        /// GNU build id (empty if none).
        build_id: Vec<u8>,
        /// Path (the executable's real path for the main program).
        path: String,
        /// The main executable.
        is_main: bool,
    },
    /// A thread's stack.
    Stack {
        /// Lowest address.
        low: u64,
        /// Size.
        size: u64,
        /// Logical thread id.
        logical_id: i64,
    },
    /// A static TLS block of a thread.
    Tls {
        /// Address of the block for this thread.
        address: u64,
        /// Size (`PT_TLS` memory size).
        size: u64,
        /// `dlpi_tls_modid`.
        module_id: u64,
        /// Logical thread id.
        logical_id: i64,
    },
    /// A call site, written once per process before (or near) the records that use it.
    Site {
        /// Its id (hash of the frames, never 0).
        site_id: u64,
        /// Return addresses, innermost first.
        frames: Vec<u64>,
    },
    /// A run of pages on one node (queried at exit).
    PageNodes {
        /// Address of the first page.
        first_page: u64,
        /// Number of pages.
        count: u64,
        /// Node, or `-errno` (`-ENOENT` = never touched).
        node: i64,
        /// Page size of the run.
        page_size: u64,
    },
    /// Allocations below `min_object` since the previous such record of the thread.
    SmallAllocs {
        /// How many.
        count: u64,
        /// Their total size.
        bytes: u64,
    },
    /// The runtime finished cleanly in this process.
    End,
    /// `daemon(3)` was called, with every record before it written: once its fork succeeds the
    /// process ends with `_exit(0)`, past any exit path, so a log that ends here ended cleanly.
    Daemon,
    /// A rule of `numalens run --plan` was applied (`mbind` of an object's pages, or a thread's
    /// CPUs).
    Place {
        /// First address placed (0 for a thread).
        address: u64,
        /// Bytes placed.
        len: u64,
        /// Index of the rule in the plan's `objects[]` (or `threads[]`).
        rule: u32,
        /// The node; of an action that spreads pages over several, the lowest of them.
        node: i64,
        /// 0, or the errno the kernel gave.
        errno: i32,
        /// What was placed (`enum nl_place_what`): 0 heap/mmap object, 1 static, 2 thread.
        what: u8,
        /// The pages were spread over the rule's nodes (interleave, weighted pattern).
        spread: bool,
    },
    /// A fatal signal arrived; the process died of it.
    Signal {
        /// Signal number.
        signal: i32,
        /// `si_addr`.
        address: u64,
        /// `si_code`.
        code: i64,
    },
}

/// An [`Event`] with its writer and time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedEvent {
    /// Kernel tid of the writer.
    pub tid: u32,
    /// CLOCK_MONOTONIC.
    pub time_ns: u64,
    /// What happened.
    pub event: Event,
}

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

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
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
        assert_eq!(RecordKind::from_u16(21), None);
    }
}
