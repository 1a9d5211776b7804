//! What guest to boot: nodes, vCPUs, memory split, SLIT distances and kernel settings, scaled
//! down from a numalens topology to something software emulation on a small host can run.

use std::path::PathBuf;
use std::time::Duration;

use numalens_topology::Topology;
use numalens_topology::cpulist::format_cpulist;

use crate::Error;
use crate::view::TopologyView;

/// QEMU's limit on `-numa node` entries is higher, but the SLIT and our tests stop at 8 nodes.
pub const MAX_GUEST_NODES: usize = 8;
/// Memory granularity of a guest node: keeps node boundaries aligned for huge pages.
pub const NODE_MEMORY_ALIGN_MIB: u64 = 64;
/// Below this a node cannot hold a booted kernel's per-node structures plus a test buffer.
pub const MIN_NODE_MEMORY_MIB: u64 = 128;

/// Transparent huge pages in the guest (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thp {
    Always,
    Madvise,
    Never,
}

impl Thp {
    pub fn sysfs_value(self) -> &'static str {
        match self {
            Thp::Always => "always",
            Thp::Madvise => "madvise",
            Thp::Never => "never",
        }
    }
}

/// How to shrink a topology to the host.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// vCPUs given to each node that has CPUs (at most its real CPU count).
    pub vcpus_per_node: u32,
    /// Upper bound on the guest's vCPUs; TCG runs them all on the host's cores.
    pub max_vcpus: u32,
    /// Total guest memory, split over the nodes.
    pub memory_mib: u64,
}

impl Default for ScaleOptions {
    fn default() -> Self {
        ScaleOptions {
            vcpus_per_node: 1,
            max_vcpus: 8,
            memory_mib: 2048,
        }
    }
}

/// One guest node: dense id (as Linux will number it), vCPU ids, memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestNode {
    /// Guest node id. Linux numbers nodes densely in SRAT order, so sparse ids are compacted.
    pub id: u32,
    /// Id of the node in the source topology.
    pub source_id: u32,
    /// Guest CPU ids (QEMU CPU index = Linux CPU id with one socket per vCPU).
    pub cpus: Vec<u32>,
    pub memory_mib: u64,
}

/// Everything needed to boot one guest.
#[derive(Debug, Clone)]
pub struct GuestSpec {
    /// Name of the source topology, for messages.
    pub name: String,
    pub nodes: Vec<GuestNode>,
    /// SLIT distances indexed by node position (10 on the diagonal).
    pub distances: Vec<Vec<u32>>,
    pub thp: Thp,
    /// `kernel.numa_balancing`: 0 off, 1 normal, 2 memory tiering.
    pub numa_balancing: u8,
    /// Files under debugfs `sched/numa_balancing/` and the value to write, e.g. `scan_delay_ms`.
    pub balancing_tunables: Vec<(String, String)>,
    /// The guest is killed after this long.
    pub timeout: Duration,
    /// Host executables copied to `/bin` with their shared-library closure.
    pub binaries: Vec<PathBuf>,
    /// Host shared objects (e.g. an `LD_PRELOAD` runtime) copied to `/lib` with their closure.
    pub libraries: Vec<PathBuf>,
    /// Leave debug sections out of the copied binaries (smaller archive, faster boot).
    pub strip_binaries: bool,
    /// Host files copied into the guest: (host path, absolute guest path).
    pub files: Vec<(PathBuf, String)>,
}

impl GuestSpec {
    /// Scales `topology` down to a guest. Returns the spec and one note per change made
    /// (CPUs or memory scaled, ids renumbered, distances assumed), to be shown to the user.
    pub fn from_topology(
        topology: &Topology,
        scale: &ScaleOptions,
    ) -> Result<(GuestSpec, Vec<String>), Error> {
        GuestSpec::from_view(&TopologyView::from_topology(topology), scale)
    }

    /// Like [`GuestSpec::from_topology`], from the JSON-derived view.
    pub fn from_view(
        view: &TopologyView,
        scale: &ScaleOptions,
    ) -> Result<(GuestSpec, Vec<String>), Error> {
        check_shape(view)?;
        let mut notes = Vec::new();
        let vcpus = scale_cpus(view, scale, &mut notes)?;
        let memory = scale_memory(view, scale, &mut notes)?;
        let distances = guest_distances(view, &mut notes)?;
        let mut next_cpu = 0;
        let nodes = view
            .nodes
            .iter()
            .enumerate()
            .map(|(pos, n)| {
                let cpus: Vec<u32> = (next_cpu..next_cpu + vcpus[pos]).collect();
                next_cpu += vcpus[pos];
                GuestNode {
                    id: pos as u32,
                    source_id: n.id,
                    cpus,
                    memory_mib: memory[pos],
                }
            })
            .collect::<Vec<_>>();
        if nodes.iter().any(|n| n.id != n.source_id) {
            notes.push("node ids renumbered densely, as Linux numbers SRAT domains".into());
        }
        let spec = GuestSpec {
            name: view.name.clone(),
            nodes,
            distances,
            thp: Thp::Never,
            numa_balancing: 0,
            balancing_tunables: Vec::new(),
            timeout: Duration::from_secs(120),
            binaries: Vec::new(),
            libraries: Vec::new(),
            strip_binaries: true,
            files: Vec::new(),
        };
        Ok((spec, notes))
    }

    pub fn vcpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.cpus.len() as u32).sum()
    }

    pub fn memory_mib(&self) -> u64 {
        self.nodes.iter().map(|n| n.memory_mib).sum()
    }

    /// Sets the NUMA-balancing scan tunables to values that make migration visible within a
    /// second or two of emulated time instead of the default's tens of seconds.
    pub fn fast_balancing(&mut self) {
        self.numa_balancing = 1;
        self.balancing_tunables = [
            ("scan_delay_ms", "0"),
            ("scan_period_min_ms", "100"),
            ("scan_period_max_ms", "400"),
            ("scan_size_mb", "1024"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    }

    /// What `/sys/devices/system/node` of the booted guest must show, one line per node:
    /// `node ID cpus CPULIST distance D D ..`, the format the guest's check script writes too.
    pub fn expected_sysfs(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(pos, n)| {
                let d: Vec<String> = self.distances[pos].iter().map(u32::to_string).collect();
                format!(
                    "node {} cpus {} distance {}\n",
                    n.id,
                    format_cpulist(&n.cpus),
                    d.join(" ")
                )
            })
            .collect()
    }

    /// The topology the guest's `numalens topology --json` must report (nodes, CPUs, distances).
    pub fn expected_view(&self) -> TopologyView {
        TopologyView {
            name: self.name.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| crate::view::NodeView {
                    id: n.id,
                    cpus: n.cpus.clone(),
                    memory_bytes: Some(n.memory_mib << 20),
                })
                .collect(),
            distances: Some(self.distances.clone()),
        }
    }
}

fn check_shape(view: &TopologyView) -> Result<(), Error> {
    if view.nodes.is_empty() {
        return Err(Error::Topology(format!("{}: no nodes", view.name)));
    }
    if view.nodes.len() > MAX_GUEST_NODES {
        return Err(Error::Topology(format!(
            "{}: {} nodes, the test bed supports at most {MAX_GUEST_NODES}",
            view.name,
            view.nodes.len()
        )));
    }
    if view.nodes.iter().all(|n| n.cpus.is_empty()) {
        return Err(Error::Topology(format!("{}: no node has CPUs", view.name)));
    }
    Ok(())
}

fn scale_cpus(
    view: &TopologyView,
    scale: &ScaleOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<u32>, Error> {
    let cpu_nodes = view.nodes.iter().filter(|n| !n.cpus.is_empty()).count() as u32;
    if cpu_nodes > scale.max_vcpus {
        return Err(Error::Topology(format!(
            "{}: {cpu_nodes} nodes with CPUs need at least {cpu_nodes} vCPUs, the limit is {}",
            view.name, scale.max_vcpus
        )));
    }
    // Fewer vCPUs per node when the total would exceed the limit, never fewer than one.
    let mut per_node = scale.vcpus_per_node.max(1);
    while per_node > 1 && per_node * cpu_nodes > scale.max_vcpus {
        per_node -= 1;
    }
    let vcpus: Vec<u32> = view
        .nodes
        .iter()
        .map(|n| (n.cpus.len() as u32).min(per_node))
        .collect();
    let real: usize = view.nodes.iter().map(|n| n.cpus.len()).sum();
    let total: u32 = vcpus.iter().sum();
    if total as usize != real {
        notes.push(format!(
            "CPUs scaled down from {real} to {total} ({per_node} vCPU per node with CPUs) for emulation"
        ));
    }
    Ok(vcpus)
}

fn scale_memory(
    view: &TopologyView,
    scale: &ScaleOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<u64>, Error> {
    let n = view.nodes.len() as u64;
    if scale.memory_mib < n * MIN_NODE_MEMORY_MIB {
        return Err(Error::Topology(format!(
            "{}: {} MiB cannot give {n} nodes {MIN_NODE_MEMORY_MIB} MiB each",
            view.name, scale.memory_mib
        )));
    }
    let known: Option<Vec<u64>> = view.nodes.iter().map(|n| n.memory_bytes).collect();
    let weights = match known {
        Some(w) if w.iter().all(|&b| b > 0) => w,
        _ => vec![1; view.nodes.len()],
    };
    let sum: u128 = weights.iter().map(|&w| w as u128).sum();
    // Proportional split, rounded down to the alignment, each node at least the minimum.
    let mem: Vec<u64> = weights
        .iter()
        .map(|&w| {
            let share = (scale.memory_mib as u128 * w as u128 / sum) as u64;
            (share / NODE_MEMORY_ALIGN_MIB * NODE_MEMORY_ALIGN_MIB).max(MIN_NODE_MEMORY_MIB)
        })
        .collect();
    let real_gib: u64 = view
        .nodes
        .iter()
        .filter_map(|n| n.memory_bytes)
        .sum::<u64>()
        >> 30;
    notes.push(format!(
        "memory scaled to {} MiB total ({} MiB per node{})",
        mem.iter().sum::<u64>(),
        mem.iter().map(u64::to_string).collect::<Vec<_>>().join("/"),
        if real_gib > 0 {
            format!(", real machine {real_gib} GiB")
        } else {
            String::new()
        }
    ));
    Ok(mem)
}

fn guest_distances(view: &TopologyView, notes: &mut Vec<String>) -> Result<Vec<Vec<u32>>, Error> {
    let n = view.nodes.len();
    let Some(m) = &view.distances else {
        notes.push("topology has no distances: assuming 10 local, 20 remote".into());
        return Ok((0..n)
            .map(|i| (0..n).map(|j| if i == j { 10 } else { 20 }).collect())
            .collect());
    };
    if m.len() != n || m.iter().any(|row| row.len() != n) {
        return Err(Error::Topology(format!(
            "{}: distance matrix is not {n}x{n}",
            view.name
        )));
    }
    for (i, row) in m.iter().enumerate() {
        for (j, &d) in row.iter().enumerate() {
            // ACPI SLIT: 10 is local, remote entries must be larger, 255 means unreachable.
            let ok = if i == j { d == 10 } else { d > 10 && d < 255 };
            if !ok {
                return Err(Error::Topology(format!(
                    "{}: distance {d} from node position {i} to {j} cannot be put in a SLIT",
                    view.name
                )));
            }
        }
    }
    Ok(m.clone())
}

#[cfg(test)]
mod tests;
