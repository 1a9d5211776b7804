//! The report model: everything `numalens report` shows, as plain data. The text and JSON outputs
//! (and later the HTML report) are views of it; `docs/REPORT.md` documents every field.
//!
//! Sections are independent structs so that new analyses (findings, per-object × thread × node
//! matrices, timelines) arrive as new fields without changing the existing ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod analysis;
mod groups;
mod sources;
pub use analysis::*;
pub use groups::*;
pub use sources::*;

/// Version of the model's JSON shape. Adding fields keeps it; changing or removing one bumps it.
/// 2: objects are ranked by accesses; findings, placement, communication and per-object analysis.
pub const MODEL_VERSION: u32 = 2;

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportModel {
    pub model_version: u32,
    pub profile: ProfileSummary,
    pub selection: Selection,
    pub totals: Totals,
    /// The top objects, best first (see [`Totals::objects_ranked`] for how many there were).
    pub objects: Vec<ObjectReport>,
    /// Objects grouped by allocation site, best first: the first `top` groups over every ranked
    /// object (a group may have members that `objects` does not list).
    #[serde(default)]
    pub groups: Vec<SiteGroup>,
    /// Every thread with a selected sample or a row in the threads table, by process then
    /// logical id.
    pub threads: Vec<ThreadReport>,
    pub nodes: NodeTotals,
    /// How the analysis was made.
    pub analysis: AnalysisInfo,
    /// Most costly first.
    pub findings: Vec<Finding>,
    /// Findings of one rule and fix on objects allocated in one function, two or more, most
    /// costly first (`ReportModel::finding_entries` interleaves them with the other findings).
    /// Every member is still in `findings`; absent in a model written before groups.
    #[serde(default)]
    pub finding_groups: Vec<FindingGroup>,
    pub placement: PlacementReport,
    pub communication: CommunicationMatrix,
    /// Every placement policy on the placement's machine, simulated (docs/SIMULATOR.md); absent
    /// without access counts.
    #[serde(default)]
    pub what_if: Option<numalens_place::WhatIf>,
    /// Where the sampled accesses were served from and their measured latency, when the PMU said
    /// (`pmu` profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_sources: Option<DataSources>,
}

/// What `meta.json` says about the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileSummary {
    /// The profile directory as it was given.
    pub path: String,
    pub format_version: String,
    pub numalens_version: String,
    pub command: Vec<String>,
    pub start_unix_ns: u64,
    pub end_unix_ns: Option<u64>,
    pub host: HostSummary,
    pub backend: BackendSummary,
    pub page_size: u64,
    /// `kernel.numa_balancing` during the recording, when known.
    pub numa_balancing: Option<u32>,
    /// Nodes of the recorded machine's topology, when it was recorded.
    pub topology_nodes: Option<Vec<u32>>,
    pub lost_samples: u64,
    /// What the loss means and how to avoid it, when samples were lost (shown first).
    #[serde(default)]
    pub lost_samples_note: Option<String>,
    pub completeness: CompletenessSummary,
    /// Rows per table, from `meta.json`.
    pub table_rows: BTreeMap<String, u64>,
    /// Side tables that could not be read: the report is made without them. Absent from the
    /// JSON when every table was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable_tables: Vec<UnreadableTable>,
}

/// A side table the analysis could do without, and could not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableTable {
    /// The table's name (`code_locations`, `page_nodes`, `sites`).
    pub table: String,
    /// Why, naming the file.
    pub problem: String,
    /// What the report lacks without it.
    pub missing: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    pub hostname: String,
    pub kernel: String,
    pub arch: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendSummary {
    pub name: String,
    pub settings: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletenessSummary {
    pub complete: bool,
    /// How the program ended: `code` or `signal`, when known.
    pub exit: Option<ExitSummary>,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitSummary {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

/// What the report was asked to show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    /// At most this many objects are listed.
    pub top: usize,
    /// Only objects with this name (exact, or else containing it), and only their samples.
    pub object: Option<String>,
    /// Only samples of threads with this logical id.
    pub thread: Option<u32>,
}

impl Selection {
    /// Whether some samples are left out (`--object`, `--thread`).
    pub fn filters(&self) -> bool {
        self.object.is_some() || self.thread.is_some()
    }
}

/// Sample counts by kind. `total` is their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounts {
    pub load: u64,
    pub store: u64,
    pub first_touch: u64,
    pub hint: u64,
    pub fault: u64,
    pub total: u64,
}

/// Counts over the selected samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Selected samples by kind.
    pub samples: KindCounts,
    /// Accesses the selected samples stand for (sum of `weight`).
    pub weight: u64,
    /// Selected samples not attributed to a known object.
    pub unattributed: KindCounts,
    /// Objects in the profile.
    pub objects: u64,
    /// Objects with a selected sample or a resident page, i.e. candidates for the top list.
    pub objects_ranked: u64,
    /// Threads in the threads table.
    pub threads: u64,
}

/// One data object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectReport {
    pub id: u64,
    pub pid: u32,
    /// `heap`, `mmap`, `static`, `stack`, `tls`, `file`, `code` or `unknown`.
    pub kind: String,
    pub name: String,
    pub start: u64,
    pub size: u64,
    pub alloc_ns: u64,
    pub free_ns: Option<u64>,
    pub alloc_tid: Option<u32>,
    /// Logical id of the allocating thread, when it is in the threads table.
    pub alloc_thread: Option<u32>,
    /// Where it was allocated; for a static, where it is defined.
    pub site: Option<SiteReport>,
    pub samples: KindCounts,
    pub weight: u64,
    /// Threads whose first-touch samples fell in this object, most first.
    pub first_touchers: Vec<ThreadCount>,
    /// Where the object's pages were at the end of the run.
    pub pages: PagePlacement,
    /// How it was accessed; null when it has no access.
    pub access: Option<ObjectAccess>,
}

/// An allocation call site, or a static's definition: one frame at the static's address, with
/// the file and line that define it and no function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteReport {
    /// The site key, as hex (it does not fit a JSON number exactly).
    pub key: String,
    /// The frame that names the site: the innermost one with a source line, else the innermost
    /// with a function name, else the innermost.
    pub location: Frame,
    /// Every frame, innermost (the allocation call) first.
    pub frames: Vec<Frame>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub module: String,
    pub offset: u64,
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// A count for one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCount {
    pub pid: u32,
    pub tid: u32,
    /// Logical id, when the thread is in the threads table.
    pub thread: Option<u32>,
    pub count: u64,
}

/// Pages of a range by node, from the last `page_nodes` answer for each page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePlacement {
    /// Pages on each node, by node id.
    pub by_node: Vec<NodeCount>,
    /// Pages never touched (no node).
    pub untouched: u64,
    /// Pages whose node could not be queried.
    pub unknown: u64,
    /// Pages no query covered.
    pub not_queried: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCount {
    pub node: u32,
    pub count: u64,
}

/// One thread of the profiled program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    pub pid: u32,
    pub tid: u32,
    /// Logical id (creation order in its process); missing when the thread only appears in
    /// samples.
    pub logical_id: Option<u32>,
    pub name: Option<String>,
    /// Address of the start routine, as hex, when created through `pthread_create`.
    pub start_routine: Option<String>,
    /// The start routine's `function (file:line)`, when the profile symbolised it.
    pub start_function: Option<String>,
    pub parent_tid: Option<u32>,
    pub create_ns: Option<u64>,
    pub exit_ns: Option<u64>,
    pub samples: KindCounts,
    pub weight: u64,
    /// Samples by the node their page was on at that time.
    pub nodes: Vec<NodeCount>,
    /// Samples whose page node was not known.
    pub unknown_node: u64,
    /// Its accesses (exact counts or weighted samples) under the placement.
    pub access: ThreadAccess,
}

/// Totals per memory node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeTotals {
    /// Rows of the `page_nodes` table: 0 when the recording did not query page placement, in
    /// which case every page count of the report is 0.
    pub page_runs: u64,
    /// Every node that holds a page or a sample, by id.
    pub nodes: Vec<NodeSummary>,
    /// Pages the queries found untouched.
    pub untouched_pages: u64,
    /// Pages whose node could not be queried.
    pub unknown_pages: u64,
    /// Selected samples whose page node was not known.
    pub unknown_node_samples: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSummary {
    pub node: u32,
    /// Pages on the node at the end of the run (every queried page, not only listed objects).
    pub pages: u64,
    pub bytes: u64,
    /// Selected samples whose page was on this node at that time.
    pub samples: u64,
}

/// The note for a recording that lost samples: how many, their share of all samples, and the
/// option that avoids it (rings at least four times larger, never under 1024 pages per CPU).
pub fn lost_samples_note(lost: u64, kept: u64, ring_pages: Option<u64>) -> Option<String> {
    if lost == 0 {
        return None;
    }
    let share = 100.0 * lost as f64 / (lost + kept) as f64;
    let larger = ring_pages
        .map_or(1024, |pages| pages.saturating_mul(4).next_power_of_two())
        .max(1024);
    Some(format!(
        "{lost} samples or task records ({share:.1} %) were lost because the ring buffer filled: record again \
         with a larger --ring-pages, e.g. --ring-pages {larger}"
    ))
}
