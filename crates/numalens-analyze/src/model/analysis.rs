//! The analysis sections of the report model: access matrices, sharing classes, placement, the
//! communication matrix, timelines and findings. Every matrix is bounded (binned) so that a
//! renderer can draw it whole; each says its resolution.
//!
//! Threads are referred to by their position in [`super::ReportModel::threads`] (a `usize`).

use serde::{Deserialize, Serialize};

/// How the analysis was made: where the accesses come from, what the data allows, the
/// thresholds of the findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AnalysisInfo {
    /// `page_stats` (exact per-thread page counts), `samples` (weighted samples) or `none`.
    pub access_source: String,
    /// Accesses over all objects and unattributed pages (reads + writes + unknown direction).
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    /// Accesses of unknown direction (page-fault samples).
    pub unknown_direction: u64,
    /// Pages with at least one access.
    pub pages: u64,
    /// Threads with at least one access.
    pub active_threads: u64,
    /// Granularity of pages in the analysis (the profile's base page size).
    pub page_size: u64,
    /// How first touchers are known: `page_stats first_access_ns`, `first-touch samples`,
    /// `earliest sample` or `none`.
    pub first_touch_source: String,
    /// Whether false sharing could be looked for, and at what granularity.
    pub false_sharing: String,
    pub time: TimeAxis,
    pub thresholds: Thresholds,
    /// What the evidence cannot tell and how to record what can; absent when the profile has
    /// access data (exact counts, load, store or hinting-fault samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// How much of the run exact counts cover: pages first touched with no counted access;
    /// absent without exact counts or first-touch faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// Pages the program first touched (a fault) on which the hooks counted nothing: accesses the
/// compiler did not instrument (stack arrays it kept local, code built without `numalens cc`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Coverage {
    /// Pages with a first-touch fault.
    pub touched_pages: u64,
    /// Of those, pages without a counted access.
    pub uncounted_pages: u64,
    /// The objects holding most of them, most first (at most 8).
    pub uncounted: Vec<UncountedObject>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct UncountedObject {
    /// Object id; null for pages in no known object.
    pub object: Option<u64>,
    pub name: String,
    pub kind: String,
    pub pages: u64,
}

/// What a profile cannot tell: the first lines of a report of page faults alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Limits {
    /// What the accesses come from, in words.
    pub evidence: String,
    /// What cannot be told from it (those columns say `unknown`).
    pub cannot_tell: Vec<String>,
    /// How to record what can tell it, the ways this host allows first.
    pub remedies: Vec<String>,
}

/// The time buckets of every timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TimeAxis {
    /// Width of one bucket in ns; bucket `i` covers `[i * bucket_ns, (i + 1) * bucket_ns)` of
    /// profile time. 0 when no access has a time (exact counts alone).
    pub bucket_ns: u64,
    /// Buckets in every timeline.
    pub buckets: usize,
}

/// The thresholds the sharing classes and findings use (docs/FINDINGS.md says why).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Thresholds {
    /// A thread uses a page when it makes at least this fraction of the page's top user's
    /// accesses.
    pub user_fraction: f64,
    /// A page has a dominant user when that user makes more than this share of its accesses
    /// (kMAF's locality exclusivity).
    pub exclusivity: f64,
    /// Objects with less than this share of all accesses get no finding.
    pub min_object_share: f64,
    /// A class or pattern describes an object when its pages hold at least this share of the
    /// object's accesses.
    pub majority: f64,
    /// First-touch mismatch: pages whose dominant user is not their first toucher hold at least
    /// this share of the object's accesses. Below one half: with two threads, a serial
    /// initialisation leaves exactly half the accesses on mismatched pages (the toucher's own
    /// half is local), and the boundary pages tip it under 50 %.
    #[serde(default = "default_mismatch_share")]
    pub mismatch_share: f64,
    /// Shared read-only: at least this share of the accesses are reads.
    pub read_ratio: f64,
    /// Hotspot: coefficient of variation (stddev/mean) of accesses per page at least this.
    pub hotspot_cv: f64,
    /// Neighbour sharing: communication between logical neighbours is at least this share of the
    /// object's communication (kMAF/SPCD pairs).
    pub neighbour_share: f64,
    /// Neighbour sharing: the object's communication is at least this share of its accesses
    /// (what co-locating the threads can save at most); a point estimate on samples.
    #[serde(default = "default_min_communication_share")]
    pub min_communication_share: f64,
    /// False sharing: lines written by several threads at distinct bytes hold at least this share
    /// of the object's writes.
    pub false_sharing_share: f64,
    /// False-sharing candidate from exact page counts: each of two or more writers writes the
    /// page at least this many times per 8-byte word.
    pub hammer_writes_per_word: u64,
    /// From samples, a share reaches a threshold when its lower bound at this (one-sided)
    /// confidence does, and an order of samples in time counts when chance gives it at most
    /// 1 − confidence of the time (docs/FINDINGS.md, "Evidence from samples").
    #[serde(default = "default_confidence")]
    pub confidence: f64,
}

/// `confidence` of a model written before samples were judged by it: the one used since.
fn default_confidence() -> f64 {
    crate::stats::CONFIDENCE
}

/// `min_communication_share` of a model written before it existed: its findings were judged
/// without it.
fn default_min_communication_share() -> f64 {
    0.0
}

/// `mismatch_share` of a model written before it was a threshold of its own: the majority.
fn default_mismatch_share() -> f64 {
    0.5
}

/// Where pages and threads are, and what that gives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PlacementReport {
    /// `recorded` (the run's own page and thread placement) or `what-if` (a machine model).
    pub mode: String,
    /// The machine: a preset name, a topology file's name, or the recorded host.
    pub topology: String,
    /// Why this placement was used.
    pub reason: String,
    /// Node ids of the machine, in the order of the traffic matrix.
    pub nodes: Vec<u32>,
    /// How threads were given nodes.
    pub thread_rule: String,
    /// How pages were given nodes.
    pub page_rule: String,
    /// Node of each thread (by position in `threads`), when known.
    pub thread_nodes: Vec<Option<u32>>,
    pub accesses: u64,
    pub local: u64,
    pub remote: u64,
    /// Accesses whose page or thread has no node.
    pub unknown: u64,
    /// Local accesses / (local + remote).
    pub local_ratio: Option<f64>,
    /// Per node: accesses its memory served, its pages, its threads.
    pub load: Vec<NodeLoad>,
    /// Standard deviation / mean of the accesses served per node.
    pub imbalance: Option<f64>,
    /// `traffic[i][j]`: accesses by threads on `nodes[i]` to memory on `nodes[j]`.
    pub traffic: Vec<Vec<u64>>,
    /// The machine's nodes, in the order of `nodes`: CPUs and memory.
    #[serde(default)]
    pub machine_nodes: Vec<MachineNode>,
    /// ACPI SLIT distances between `nodes` (10 = local), when the machine gives them.
    #[serde(default)]
    pub distances: Option<Vec<Vec<u32>>>,
}

/// One node of the placement's machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineNode {
    pub node: u32,
    /// Its logical CPUs as a Linux CPU list (`0-3,8`); empty for a memory-only node.
    pub cpus: String,
    /// Bytes of memory, when known.
    pub memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLoad {
    pub node: u32,
    pub accesses: u64,
    pub pages: u64,
    pub threads: u64,
}

/// Thread × thread communication (kMAF/SPCD): two threads communicate on a block both access,
/// by the smaller of their two counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CommunicationMatrix {
    /// Block size in bytes.
    pub block_size: u64,
    /// Consecutive threads (positions in `threads`) summed into one cell; 1 when not binned.
    pub threads_per_cell: usize,
    /// Thread positions of each row (and column), before binning: row `i` covers
    /// `threads[i * threads_per_cell ..]`.
    pub threads: Vec<usize>,
    /// Symmetric; the diagonal is 0.
    pub values: Vec<Vec<u64>>,
}

/// Everything about how one object was accessed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectAccess {
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub unknown_direction: u64,
    /// Of all accesses.
    pub share: f64,
    /// Pages with accesses.
    pub pages: u64,
    /// `private`, `shared-read-only`, `shared-read-write`, `migratory`, `false-sharing`: the class
    /// of the pages that hold most of its accesses.
    pub sharing: String,
    /// Pages and accesses per sharing class.
    pub classes: Vec<ClassCount>,
    /// Threads using it, most accesses first.
    pub users: Vec<ThreadUse>,
    /// The object × thread × node matrix: accesses of each thread to its pages on each node.
    pub matrix: Vec<AccessCell>,
    /// The thread that first touched most of its pages.
    pub first_toucher: Option<ThreadShare>,
    /// The thread with most accesses.
    pub main_user: Option<ThreadShare>,
    /// Pages whose dominant user is not their first toucher, and the accesses on them.
    pub mismatched_pages: u64,
    pub mismatched_accesses: u64,
    pub local_ratio: Option<f64>,
    pub remote: u64,
    /// Advice ids of the findings about this object.
    pub advice: Vec<String>,
    pub heatmap: Heatmap,
    pub timeline: Timeline,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassCount {
    pub class: String,
    pub pages: u64,
    pub accesses: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadUse {
    pub thread: usize,
    pub reads: u64,
    pub writes: u64,
    pub accesses: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessCell {
    pub thread: usize,
    /// Node of the pages (null when unknown).
    pub node: Option<u32>,
    pub reads: u64,
    pub writes: u64,
    pub accesses: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThreadShare {
    pub thread: usize,
    /// Pages (first toucher) or accesses (main user).
    pub count: u64,
    pub share: f64,
}

/// TABARNAC's distribution view: threads × pages of the object, binned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heatmap {
    /// Pages the object spans.
    pub pages: u64,
    /// Pages summed into one column.
    pub pages_per_column: u64,
    /// Thread position of each row (the object's users, by position; at most 64).
    pub threads: Vec<usize>,
    /// `values[row][column]`: accesses.
    pub values: Vec<Vec<u64>>,
    /// Per column: accesses per page per thread (all threads, not only the rows).
    pub page_average: Vec<f64>,
    /// Per row: the thread's accesses per page of the object.
    pub thread_average: Vec<f64>,
    /// Per column: the thread that first touched most of its pages, and that share of its
    /// touched pages.
    pub first_touch: Vec<Option<ThreadShare>>,
}

/// Accesses per thread per time bucket (see [`AnalysisInfo::time`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    pub threads: Vec<usize>,
    /// `values[row][bucket]`.
    pub values: Vec<Vec<u64>>,
}

/// What one thread did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadAccess {
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    /// Its node under the placement, when known.
    pub node: Option<u32>,
    pub local_ratio: Option<f64>,
    /// Its most accessed objects (at most 8), with accesses per time bucket.
    pub objects: Vec<ObjectTimeline>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectTimeline {
    pub object: u64,
    pub name: String,
    pub accesses: u64,
    pub buckets: Vec<u64>,
}

/// One thing wrong, in terms of the program's code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The pattern (docs/FINDINGS.md).
    pub id: String,
    /// The fix.
    pub advice: String,
    pub object: FindingObject,
    /// One sentence with the evidence.
    pub summary: String,
    pub evidence: Vec<Evidence>,
    pub fix: String,
    pub why: String,
    pub cost: Cost,
    /// What the simulator predicts the fix gives, when the fix is a placement.
    #[serde(default)]
    pub predicted: Option<numalens_place::fixes::Prediction>,
    /// What the finding rests on, in words: the data, how much of it, and the tests it passed
    /// ([`Basis`] in one sentence). Every finding has it; a model written before only the
    /// measured findings (data sources, HITM snoops) had it, with their words alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rests_on: Option<String>,
    /// What the finding rests on, structured; absent in a model written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
}

impl Finding {
    /// Whether the finding is the PMU's measurement (data sources, HITM snoops) rather than a
    /// verdict on the accesses and the placement: its cost is then measured, not modelled.
    pub fn is_measured(&self) -> bool {
        matches!(
            self.id.as_str(),
            "measured-remote" | "hitm-false-sharing" | "hitm-true-sharing"
        )
    }
}

/// The data a finding rests on and the tests its rule passed on them (docs/FINDINGS.md, "What a
/// finding rests on").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Basis {
    /// The data, the first being what the rule's shares are measured on.
    pub data: Vec<BasisData>,
    /// Every threshold the rule passed, in the order the rule checks them.
    pub tests: Vec<BasisTest>,
    /// The (one-sided) confidence of the lower bounds; null when no test is on samples.
    pub confidence: Option<f64>,
}

/// One kind of data and how much of it the finding saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasisData {
    /// `exact-counts`, `load-store-samples`, `fault-samples`, `first-touch-faults`,
    /// `first-access-times`, `earliest-samples`, `first-touch-faults-else-earliest-samples`, `data-source-samples`, `hitm-samples`.
    pub kind: String,
    pub count: u64,
    /// What `count` counts: `accesses`, `samples` or `pages`.
    pub unit: String,
}

/// One threshold a rule passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BasisTest {
    /// What was measured (an evidence key where the finding has one).
    pub measure: String,
    pub value: f64,
    /// `at-least` (value ≥ threshold) or `below` (value < threshold).
    pub passes: String,
    pub threshold: f64,
    /// From samples: the (effective) samples the share is measured on; null for exact counts
    /// and for counts that are not shares.
    pub samples: Option<u64>,
    /// From samples: the share's lower Wilson bound at `confidence`, which is what reached the
    /// threshold.
    pub lower_bound: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingObject {
    pub id: u64,
    pub pid: u32,
    pub name: String,
    pub kind: String,
    /// `function file:line` of the allocation site, when known; for a static, `file:line` of its
    /// definition.
    pub site: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub key: String,
    pub value: f64,
}

/// Findings of one rule, with one fix, on objects whose allocation sites name the same
/// function (and file): one entry for what is one change in the code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingGroup {
    /// The findings' pattern.
    pub id: String,
    pub advice: String,
    /// "<id> on <n> objects allocated in <function> (<file>:<first line>–<last line>)".
    pub summary: String,
    pub fix: String,
    pub why: String,
    /// The function of the members' allocation sites, and its file.
    pub function: String,
    pub file: Option<String>,
    /// The distinct source lines of the members' sites, ascending.
    pub lines: Vec<u32>,
    /// The members' costs added up.
    pub cost: Cost,
    /// Positions of the members in `findings`, most costly first.
    pub members: Vec<usize>,
}

/// What a finding costs under the placement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Accesses the finding concerns.
    pub accesses: u64,
    /// Of all accesses.
    pub share: f64,
    /// Remote accesses among them.
    pub remote: u64,
}
