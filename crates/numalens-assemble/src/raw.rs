//! What a recording holds before it is assembled: the samples and task records of the page-fault
//! sampler, the mappings seen, the page scans and where the runtimes wrote their files. The live
//! recorder (`numalens-record`) fills it as the program runs; [`crate::stored`] reads it back
//! from a recording's directory.

use std::path::PathBuf;
use std::time::Duration;

use numalens_format::{DataSource, Host, Migration, SampleKind, Snoop};

use crate::attribute::ObjectSpec;
use crate::procmaps::MapsHistory;
use crate::symbols::ModuleFiles;

/// A recording, as the assembly takes it.
pub struct RawRecording {
    pub command: Vec<String>,
    /// The runtime's event logs (and the hooks' files, unless `inst_dir` says otherwise); `None`
    /// when no runtime ran beside the program (a recording made by `perf` and imported).
    pub events_dir: Option<PathBuf>,
    /// Where the `inst` hooks wrote their files, when not in `events_dir`.
    pub inst_dir: Option<PathBuf>,
    /// What the recorder read of the hooks' sample files while the program ran: only the rest
    /// is read after its end.
    pub inst_live: Option<numalens_inst::live_read::LiveSampleFiles>,
    pub faults: Vec<Fault>,
    /// Sampled loads and stores with what the hardware said of them (PMU samples).
    pub accesses: Vec<Access>,
    /// More of them, read while the profile is written instead of held (in time order), so that
    /// memory is bounded by objects and pages rather than samples: an imported file read again.
    pub access_stream: Option<Box<dyn AccessStream>>,
    pub tasks: Vec<PerfEvent>,
    /// Objects known without a runtime's log (the statics of an imported recording's binaries).
    pub objects: Vec<ObjectSpec>,
    /// Records the kernel dropped: its own count on the events (Linux 6.0+), else the sum of
    /// its `PERF_RECORD_LOST` records.
    pub lost: u64,
    /// A ring filled up on a kernel that does not count what it drops: `lost` is a lower bound.
    pub lost_uncounted: bool,
    /// Set when processes of the program ran on after the first one exited.
    pub outlived: Option<Outlived>,
    pub maps: MapsHistory,
    /// Answers of the periodic page → node scans.
    pub scans: Vec<ScannedRun>,
    /// Pages the online engine moved while the program ran (`migrations` rows, times since the
    /// clock origin).
    pub migrations: Vec<Migration>,
    pub sampler: Option<SamplerInfo>,
    pub start_unix_ns: u64,
    /// Why the recording is incomplete, as its source says (an imported file whose page faults
    /// were sampled, not all recorded).
    pub incomplete: Vec<String>,
    /// When the recording ended, when it says (an imported file); else the moment the profile is
    /// written.
    pub end_unix_ns: Option<u64>,
    pub clock_origin_ns: u64,
    /// The machine the program ran on, and its base page size.
    pub host: Host,
    pub page_size: u64,
    /// Where the files of the modules it names are read, for symbols and static objects.
    pub module_files: ModuleFiles,
}

/// A decoded perf record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerfEvent {
    /// A page fault.
    Fault(Fault),
    /// A sampled load or store (the `pmu` backend's precise event).
    Access(Access),
    /// The kernel dropped `count` records because the ring was full.
    Lost { count: u64 },
    /// A task got a (new) name; `exec` when it comes from an exec.
    Comm {
        pid: u32,
        tid: u32,
        name: String,
        exec: bool,
        time_ns: u64,
    },
    /// A task was created (`pid == tid` for a new process).
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time_ns: u64,
    },
    /// A task exited.
    Exit { pid: u32, tid: u32, time_ns: u64 },
    /// A mapping was created.
    Mmap {
        pid: u32,
        tid: u32,
        start: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        flags: u32,
        path: String,
        time_ns: u64,
    },
}

/// [`Fault::cpu`] when the recording does not say.
pub const UNKNOWN_CPU: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub address: u64,
    /// The CPU that took it; [`UNKNOWN_CPU`] when the recording does not say (a perf.data file
    /// recorded without `PERF_SAMPLE_CPU`).
    pub cpu: u32,
    /// MMU page size at `address` when the fault was taken: 0 when the page was not mapped or
    /// the kernel does not report it (see `SamplerInfo::page_sizes`).
    pub mapped_page_size: u32,
    pub ip: u64,
}

/// A sampled load or store, as a PMU reports it (precise sampling, or a `perf` recording with
/// data addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub address: u64,
    pub cpu: Option<u32>,
    pub ip: u64,
    /// `Load` or `Store`.
    pub kind: SampleKind,
    /// Accesses the sample stands for (the sampling period).
    pub weight: u32,
    pub data_source: DataSource,
    /// Cycles, when the hardware measured it.
    pub latency: Option<u32>,
    /// Node of the physical page, when the sample carried its physical address and the recording
    /// says which node holds it.
    pub node: Option<u32>,
    pub page_size: Option<u32>,
    /// What the coherence snoop found (HITM: modified in another core's cache), when the
    /// hardware says.
    pub snoop: Option<Snoop>,
}

/// Memory samples produced on demand, in time order.
pub trait AccessStream: Send {
    /// Gives every access to `sink`; an error says why the rest could not be read.
    fn for_each(self: Box<Self>, sink: &mut dyn FnMut(Access)) -> Result<(), String>;
}

/// How the sampler was set up.
#[derive(Debug, Clone)]
pub struct SamplerInfo {
    pub cpus: Vec<u32>,
    pub ring_pages: usize,
    /// False when the kernel refused kernel-mode samples and only user-mode faults are seen
    /// (faults taken inside system calls, e.g. `read()` into a fresh buffer, are then missed).
    pub kernel_faults: bool,
    /// True when each fault carries the page size of its address (Linux 5.11+).
    pub page_sizes: bool,
    /// True when the kernel counts every record it dropped on the event itself (`read_format`
    /// `PERF_FORMAT_LOST`, Linux 6.0+), so the loss is known exactly; before that only the
    /// `PERF_RECORD_LOST` records tell, and they are written late or not at all (see
    /// the recorder's sampler).
    pub lost_counted: bool,
    /// What else the backend chose and the kernel accepted (the `pmu` backend's event, period
    /// and sample fields), for the profile's backend settings.
    pub settings: std::collections::BTreeMap<String, serde_json::Value>,
}

/// Processes of the program that ran on after the first one exited.
#[derive(Debug, Clone, Default)]
pub struct Outlived {
    /// Processes of the program seen in all (the first one included).
    pub processes: u64,
    /// From the first process's exit to the end of the recording.
    pub after_first: Duration,
    /// A signal to the recorder ended the recording while processes of the program still ran:
    /// what they did afterwards is not in the profile.
    pub stopped_early: bool,
    /// Those of them that could be named (a lost FORK record leaves one unnamed).
    pub still_running: Vec<u32>,
}

/// Consecutive pages of one process with the same answer at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedRun {
    pub time_ns: u64,
    pub pid: u32,
    pub start: u64,
    pub pages: u64,
    pub page_size: u64,
    /// Node, or a negative errno (`-ENOENT`: never touched).
    pub node: i32,
}
