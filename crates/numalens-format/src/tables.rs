//! The tables of profile format v1. `docs/FORMAT.md` documents each column; a test checks that
//! the document and these declarations name the same columns.

use crate::columns::label_enum;
use crate::table::table;

label_enum! {
    /// What a sample observed.
    pub enum SampleKind {
        /// A sampled load (PMU or instrumentation).
        Load = "load",
        /// A sampled store.
        Store = "store",
        /// The first fault on a page: the access that placed it (Linux first-touch).
        FirstTouch = "first-touch",
        /// A NUMA-balancing hinting fault on a present page: a sampled access.
        Hint = "hint",
        /// Another fault on an already placed page (copy-on-write, zero-page upgrade) while NUMA
        /// balancing is off.
        Fault = "fault",
    }
}

label_enum! {
    /// Where the sampled access was served from, when the hardware says.
    pub enum DataSource {
        Unknown = "unknown",
        L1 = "l1",
        L2 = "l2",
        L3 = "l3",
        LocalDram = "local-dram",
        RemoteDram = "remote-dram",
        RemoteCache = "remote-cache",
    }
}

label_enum! {
    /// What the cache-coherence snoop found for the sampled access, when the hardware says
    /// (`perf_mem_data_src` `mem_snoop` and `mem_snoopx`).
    pub enum Snoop {
        /// No snoop was needed.
        None = "none",
        /// Another core's cache held the line, unmodified.
        Hit = "hit",
        /// No other cache held the line.
        Miss = "miss",
        /// Another core's cache held the line modified (HITM): the line was written by another
        /// core, the signal of true or false sharing.
        Hitm = "hitm",
        /// Another core's cache forwarded the line (`snoopx` FWD), unmodified.
        Forward = "forward",
        /// A peer cache transferred the line (`snoopx` PEER), unmodified.
        Peer = "peer",
    }
}

label_enum! {
    /// What kind of memory an object is.
    pub enum ObjectKind {
        Heap = "heap",
        Mmap = "mmap",
        Static = "static",
        Stack = "stack",
        Tls = "tls",
        File = "file",
        Code = "code",
        Unknown = "unknown",
    }
}

table! {
    /// One sampled memory access (or page fault).
    pub struct Sample in "samples", columns SampleColumns, cluster s => { ((s.pid as u64) << 32) | s.tid as u64 } {
        /// Time in ns since the profile's clock origin (`meta.json` `clock`); non-decreasing within a thread.
        pub time_ns: u64 => Delta,
        // pid, tid and weight are runs within a thread's rows: zstd shrinks their plain values to
        // under 0.01 byte a row, as a dictionary does, and a dictionary hashes every value as it
        // is written (a fifth of the column writers' instructions on a sampled profile's rows).
        /// Process id.
        pub pid: u32 => Plain,
        /// Kernel thread id.
        pub tid: u32 => Plain,
        /// CPU the access ran on, when known.
        pub cpu: Option<u32> => Dict,
        /// Virtual data address accessed.
        pub address: u64 => Split,
        /// `load`, `store`, `first-touch`, `hint` or `fault`.
        pub kind: SampleKind => Dict,
        /// Number of accesses this sample stands for (the sampling period).
        pub weight: u32 => Plain,
        /// Object the address belonged to at that time (`objects.object_id`), when attributed.
        pub object_id: Option<u64> => Dict,
        /// NUMA node of the page at that time, when known.
        pub node: Option<u32> => Dict,
        /// Where the access was served from: `unknown`, `l1`, `l2`, `l3`, `local-dram`, `remote-dram`, `remote-cache`.
        pub data_source: DataSource => Dict,
        /// Access latency in CPU cycles, when the backend measures it.
        pub latency: Option<u32> => Dict,
        /// Instruction address of the access, when known (`code_locations` symbolises it).
        pub ip: Option<u64> => Dict,
        /// Size in bytes of the page the address lies in (4096, or 2097152 for a transparent huge page), when known; a first touch places the whole page. Since 1.1.
        pub page_size: Option<u32> => Dict,
        /// What the coherence snoop found, when the hardware says: `none`, `hit`, `miss`, `hitm` (modified in another core's cache), `forward`, `peer`. Since 1.3.
        pub snoop: Option<Snoop> => Dict,
    }
}

table! {
    /// One thread of the profiled program.
    pub struct Thread in "threads", columns ThreadColumns {
        /// Process id.
        pub pid: u32 => Dict,
        /// Kernel thread id.
        pub tid: u32 => Plain,
        /// Logical id: creation order within the process (0 = main thread), stable across runs.
        pub logical_id: u32 => Plain,
        /// Thread name (`comm`), when known.
        pub name: Option<String> => Dict,
        /// Address of the thread's start routine, when created through `pthread_create`.
        pub start_routine: Option<u64> => Dict,
        /// Creation time, ns since the clock origin.
        pub create_ns: u64 => Plain,
        /// Exit time, when the thread exited during the recording.
        pub exit_ns: Option<u64> => Plain,
        /// Kernel thread id of the creating thread, when known.
        pub parent_tid: Option<u32> => Dict,
    }
}

table! {
    /// One frame of an allocation call site; a site has one row per frame.
    pub struct SiteFrame in "sites", columns SiteFrameColumns {
        /// Stable site key: hash of (module build id, offset) of every frame; survives ASLR.
        pub site_key: u64 => Dict,
        /// Frame depth, 0 = the allocation call itself; functions inlined at a return address are frames of their own, at the same offset.
        pub depth: u32 => Dict,
        /// Path of the module (executable or shared library) holding the frame.
        pub module: String => Dict,
        /// Offset of the return address within the module.
        pub offset: u64 => Plain,
        /// Function name, when symbolised.
        pub function: Option<String> => Dict,
        /// Source file, when debug information has it.
        pub file: Option<String> => Dict,
        /// Source line, when debug information has it.
        pub line: Option<u32> => Plain,
    }
}

/// True for a source file of the compiler's or the system's headers (`/usr/include`, the C++
/// standard library): a site frame inlined from there is not where the user allocates, so names
/// and reports skip it.
pub fn is_system_source(file: &str) -> bool {
    file.starts_with("/usr/include/")
        || file.starts_with("/usr/lib/gcc/")
        || file.starts_with("/usr/lib/llvm")
        || file.contains("/include/c++/")
}

table! {
    /// A data object: heap block, mapping, static variable, stack, TLS block, file mapping.
    pub struct Object in "objects", columns ObjectColumns {
        /// Object id, unique within the profile; samples refer to it.
        pub object_id: u64 => Plain,
        /// Process id.
        pub pid: u32 => Dict,
        /// `heap`, `mmap`, `static`, `stack`, `tls`, `file`, `code` or `unknown`.
        pub kind: ObjectKind => Dict,
        /// Symbol, `file:line` of the allocation site, or a description such as `stack[T3]`.
        pub name: String => Dict,
        /// First address.
        pub start: u64 => Plain,
        /// Size in bytes.
        pub size: u64 => Plain,
        /// Allocation time, ns since the clock origin (0 for objects that exist at start).
        pub alloc_ns: u64 => Plain,
        /// Free time, when freed during the recording; an address maps to the object live at a time.
        pub free_ns: Option<u64> => Plain,
        /// Kernel thread id of the allocating thread, when known.
        pub alloc_tid: Option<u32> => Dict,
        /// Allocation site (`sites.site_key`), when recorded.
        pub site_key: Option<u64> => Dict,
    }
}

table! {
    /// Exact per-thread access counts of one page (instrumentation backend).
    pub struct PageStat in "page_stats", columns PageStatColumns {
        /// Process id.
        pub pid: u32 => Dict,
        /// Kernel thread id.
        pub tid: u32 => Dict,
        /// Address of the first byte of the page.
        pub page: u64 => Delta,
        /// Reads by this thread.
        pub reads: u64 => Delta,
        /// Writes by this thread.
        pub writes: u64 => Delta,
        /// Time of this thread's first access, ns since the clock origin.
        pub first_access_ns: u64 => Delta,
        /// Object the page belonged to at this thread's first access (`objects.object_id`): the object holding most of the page's bytes, when attributed. Since 1.2.
        pub object_id: Option<u64> => Dict,
    }
}

table! {
    /// One placement action: pages moved (or attempted) between nodes.
    pub struct Migration in "migrations", columns MigrationColumns {
        /// Time of the action, ns since the clock origin.
        pub time_ns: u64 => Plain,
        /// Process id.
        pub pid: u32 => Dict,
        /// First address of the page range.
        pub start: u64 => Plain,
        /// Length of the range in bytes.
        pub len: u64 => Plain,
        /// Node the pages were on, when known.
        pub from_node: Option<u32> => Dict,
        /// Node the pages were sent to.
        pub to_node: u32 => Dict,
        /// Policy that decided (`carrefour`, `kmaf`, `spm`, a plan file, …).
        pub policy: String => Dict,
        /// Why, in words (e.g. `majority node 3 of 12 samples`).
        pub reason: String => Dict,
        /// `ok`, or the error the kernel gave (`EBUSY`, `ENOMEM`, …).
        pub result: String => Dict,
    }
}

table! {
    /// Where a run of pages was at a moment: the answer of a `move_pages` query.
    pub struct PageNodes in "page_nodes", columns PageNodesColumns {
        /// Time of the query, ns since the clock origin.
        pub time_ns: u64 => Delta,
        /// Process id.
        pub pid: u32 => Dict,
        /// Address of the first page of the run.
        pub start: u64 => Delta,
        /// Number of pages in the run (consecutive pages with the same answer).
        pub pages: u64 => Dict,
        /// Page size the query used, in bytes.
        pub page_size: u64 => Dict,
        /// Node the pages were on; missing when never touched (`-ENOENT`) or not queryable.
        pub node: Option<u32> => Dict,
        /// Why the node is missing: `untouched`, or the error `move_pages` gave; empty when known.
        pub status: String => Dict,
        /// `exit` (queried by the runtime as the process ended) or `scan` (periodic query).
        pub source: String => Dict,
    }
}

table! {
    /// Where the instruction of sampled accesses is: one row per distinct (pid, ip) of the samples,
    /// symbolised when the profile was written so it reads on any machine.
    pub struct CodeLocation in "code_locations" since 1, columns CodeLocationColumns {
        /// Process id.
        pub pid: u32 => Dict,
        /// Instruction address (`samples.ip`).
        pub ip: u64 => Plain,
        /// Path of the module (executable or shared library) holding it; empty when no module does.
        pub module: String => Dict,
        /// Offset of the instruction within the module.
        pub offset: u64 => Plain,
        /// Function name, when symbolised.
        pub function: Option<String> => Dict,
        /// Source file, when debug information has it.
        pub file: Option<String> => Dict,
        /// Source line, when debug information has it.
        pub line: Option<u32> => Plain,
    }
}
