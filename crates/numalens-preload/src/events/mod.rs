//! The event log written by the `libnumalens` runtime: the Rust mirror of
//! `runtime/include/numalens_events.h`, which is the one definition of the layout.
//!
//! A log is a 64-byte [`FileHeader`] followed by 64-byte little-endian records. A record may own
//! `payload` raw records that follow it (strings, build ids, call-site frames). Files are written
//! a thread buffer at a time, so a killed process can leave a torn last record: the reader drops
//! it and reports [`EventLog::truncated`]. Record kinds this reader does not know are skipped and
//! counted. A round-trip test (`tests/runtime_events_roundtrip.rs`: C writes every kind, Rust reads
//! it back field by field) and a check of the header's kind numbers keep the two sides equal.

mod decode;
mod log;

pub use log::{EventLog, EventsError, find_event_logs, parse_event_log, read_event_log};

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
    /// `NL_REC_FLUSH_MARK`
    FlushMark = 21,
    /// `NL_REC_THREAD_CREATE`
    ThreadCreate = 22,
}

impl RecordKind {
    /// Every kind, in numeric order.
    pub const ALL: [RecordKind; 22] = [
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
        Self::FlushMark,
        Self::ThreadCreate,
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
            Self::FlushMark => "FLUSH_MARK",
            Self::ThreadCreate => "THREAD_CREATE",
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
    /// The writing thread's buffer was written out up to this record: every record of the
    /// thread up to its time is in the log.
    FlushMark,
    /// The writing thread is about to create a thread (`pthread_create`): no record of the new
    /// thread is older than this one. A second record with an error says it was not created.
    ThreadCreate {
        /// The logical id the new thread gets.
        logical_id: i64,
        /// 0, or the error `pthread_create` returned (the thread does not exist).
        error: i32,
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
