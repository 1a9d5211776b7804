//! The topology data model: what numalens knows about a NUMA machine.
//!
//! Matrices are indexed by the *position* of a node in [`Topology::nodes`], which is kept sorted by
//! node id; node ids themselves may be sparse (`0, 2, 5`), as Linux allows. Every number that is
//! not read from the running kernel carries a [`Provenance`] saying where it comes from and how
//! much to trust it.

use serde::{Deserialize, Serialize};

/// Version of the topology JSON schema written by [`Topology`]'s serialisation.
pub const TOPOLOGY_SCHEMA_VERSION: u32 = 1;

/// A NUMA machine: nodes, CPUs, distances and, when known, latencies, bandwidths and links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Schema version of this JSON document (see [`TOPOLOGY_SCHEMA_VERSION`]).
    #[serde(default = "default_schema")]
    pub schema: u32,
    /// Short name: a preset name, or the host name for a machine read from sysfs.
    pub name: String,
    /// One line saying what machine this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Where the node/CPU layout itself comes from (sysfs, a paper, a datasheet).
    pub source: Provenance,
    /// Nominal CPU clock, needed to convert latencies given in cycles into nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ghz: Option<Quantity>,
    /// NUMA nodes sorted by id. Nodes without CPUs (memory-only: CXL, HBM, PMEM) are allowed.
    pub nodes: Vec<Node>,
    /// Logical CPUs with their place in the package/core/SMT hierarchy, sorted by id. May omit
    /// CPUs whose place is unknown (offline ones); every entry must agree with `nodes[].cpus`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<Cpu>,
    /// ACPI SLIT distances (10 = local), `distances.values[i][j]` from node position i to j.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distances: Option<DistanceMatrix>,
    /// Unloaded memory latency from the CPUs of node i (row) to memory of node j (column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyMatrix>,
    /// Interconnect links between nodes. Empty when the link graph is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Explicit routes overriding the shortest path through [`Topology::links`], for machines whose
    /// routing tables are asymmetric.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
}

fn default_schema() -> u32 {
    TOPOLOGY_SCHEMA_VERSION
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Kernel node id (`/sys/devices/system/node/nodeN`).
    pub id: u32,
    /// Logical CPU ids on this node; empty for a memory-only node.
    #[serde(with = "crate::cpulist::serde_cpulist")]
    pub cpus: Vec<u32>,
    /// Memory attached to the node, in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Memory-controller bandwidth of this node, in MB/s (10^6 bytes per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bandwidth_mbps: Option<Quantity>,
    /// What kind of memory the node holds (DRAM, CXL, HBM, …), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_kind: Option<String>,
}

/// One logical CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cpu {
    pub id: u32,
    /// NUMA node id the CPU belongs to.
    pub node: u32,
    /// Physical package (socket) id.
    pub package: u32,
    /// Core id, unique within the package; SMT siblings share it.
    pub core: u32,
    /// Id of the last-level cache this CPU shares (the lowest CPU id sharing it), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llc: Option<u32>,
}

/// How far a number can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProvenanceKind {
    /// Read from this machine (sysfs) or measured on it.
    Measured,
    /// Published: a paper's table, a vendor datasheet.
    Published,
    /// An assumption, to be calibrated on real hardware.
    Assumed,
    /// Derived from ACPI SLIT distances (latency = local × distance / 10).
    DerivedFromSlit,
    /// Computed from other numbers that have their own provenance.
    Derived,
}

/// Where a number comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    pub kind: ProvenanceKind,
    /// Free text: the paper and table, the sysfs path, the reasoning behind an assumption.
    pub source: String,
}

/// A number with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantity {
    pub value: f64,
    #[serde(flatten)]
    pub provenance: Provenance,
}

/// SLIT distances between nodes: relative numbers, 10 for local.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistanceMatrix {
    pub values: Vec<Vec<u32>>,
    pub provenance: Provenance,
}

/// Unit of a latency matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LatencyUnit {
    Ns,
    Cycles,
}

/// Unloaded latency from CPU node (row) to memory node (column).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyMatrix {
    pub unit: LatencyUnit,
    pub values: Vec<Vec<f64>>,
    /// Provenance of every entry unless `entry_provenance` says otherwise.
    pub provenance: Provenance,
    /// Per-entry provenance where entries differ (e.g. local latency published, remote assumed):
    /// same shape as `values`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_provenance: Option<Vec<Vec<Provenance>>>,
}

/// An interconnect link between two nodes (HyperTransport, QPI/UPI, xGMI, CXL).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Node id at one end.
    pub a: u32,
    /// Node id at the other end.
    pub b: u32,
    /// Bandwidth per direction in MB/s, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_mbps: Option<Quantity>,
    /// Link width in bits, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width_bits: Option<u32>,
    /// Where the link itself (its existence) comes from.
    pub provenance: Provenance,
}

/// An explicit route from a CPU node to a memory node, as a list of node ids from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub from: u32,
    pub to: u32,
    /// Node ids visited, starting with `from` and ending with `to`.
    pub path: Vec<u32>,
    pub provenance: Provenance,
}

impl Provenance {
    pub fn new(kind: ProvenanceKind, source: impl Into<String>) -> Self {
        Provenance {
            kind,
            source: source.into(),
        }
    }
}

impl Quantity {
    pub fn new(value: f64, kind: ProvenanceKind, source: impl Into<String>) -> Self {
        Quantity {
            value,
            provenance: Provenance::new(kind, source),
        }
    }
}

impl Topology {
    /// Position of node `id` in [`Topology::nodes`] (the matrix index), if the node exists.
    pub fn node_index(&self, id: u32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// Node ids in matrix order.
    pub fn node_ids(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Total number of logical CPUs over all nodes.
    pub fn cpu_count(&self) -> usize {
        self.nodes.iter().map(|n| n.cpus.len()).sum()
    }
}
