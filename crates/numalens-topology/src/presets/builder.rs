//! A small builder for regular machines: nodes × cores × SMT, uniform memory, links and a
//! latency rule, from which the SLIT distances are derived.

use crate::{
    Cpu, DistanceMatrix, LatencyMatrix, LatencyUnit, Link, Node, Provenance, ProvenanceKind,
    Quantity, Route, TOPOLOGY_SCHEMA_VERSION, Topology,
};

pub const GIB: u64 = 1 << 30;

/// How the latency matrix is produced once nodes and links are known.
enum LatencyRule {
    /// `values[h]` for a request crossing `h` links (hops from routes/links).
    ByHops(Vec<f64>),
    /// An explicit matrix, rows = CPU node position.
    Matrix(Vec<Vec<f64>>),
}

pub struct Builder {
    name: String,
    description: String,
    source: Provenance,
    cpu_ghz: Option<Quantity>,
    cpu_nodes: u32,
    cores_per_node: u32,
    smt: u32,
    cores_per_package: u32,
    cores_per_llc: Option<u32>,
    memory_per_node: Option<u64>,
    memory_kind: Option<String>,
    mc_bandwidth: Option<Quantity>,
    memory_only: Vec<Node>,
    links: Vec<Link>,
    routes: Vec<Route>,
    latency: Option<(LatencyUnit, LatencyRule, Provenance)>,
    entry_provenance: Option<Box<dyn Fn(usize, usize) -> Provenance>>,
    distances: Option<DistanceMatrix>,
}

/// Shorthands for provenance kinds, to keep preset definitions readable.
pub fn published(source: &str) -> Provenance {
    Provenance::new(ProvenanceKind::Published, source)
}
pub fn assumed(source: &str) -> Provenance {
    Provenance::new(ProvenanceKind::Assumed, source)
}
pub fn derived(source: &str) -> Provenance {
    Provenance::new(ProvenanceKind::Derived, source)
}
pub fn qty(value: f64, p: Provenance) -> Quantity {
    Quantity {
        value,
        provenance: p,
    }
}

impl Builder {
    /// `nodes` CPU nodes numbered from 0, each with `cores` cores of `smt` hardware threads.
    pub fn new(
        name: &str,
        description: &str,
        source: Provenance,
        nodes: u32,
        cores: u32,
        smt: u32,
    ) -> Self {
        Builder {
            name: name.to_string(),
            description: description.to_string(),
            source,
            cpu_ghz: None,
            cpu_nodes: nodes,
            cores_per_node: cores,
            smt,
            cores_per_package: cores,
            cores_per_llc: Some(cores),
            memory_per_node: None,
            memory_kind: None,
            mc_bandwidth: None,
            memory_only: Vec::new(),
            links: Vec::new(),
            routes: Vec::new(),
            latency: None,
            entry_provenance: None,
            distances: None,
        }
    }

    pub fn ghz(mut self, value: f64, p: Provenance) -> Self {
        self.cpu_ghz = Some(qty(value, p));
        self
    }

    /// Cores per physical package (default: one package per node).
    pub fn cores_per_package(mut self, n: u32) -> Self {
        self.cores_per_package = n;
        self
    }

    /// Cores sharing one last-level cache (default: one per node); `None` for no L3.
    pub fn cores_per_llc(mut self, n: Option<u32>) -> Self {
        self.cores_per_llc = n;
        self
    }

    pub fn memory(mut self, bytes: u64, kind: Option<&str>) -> Self {
        self.memory_per_node = Some(bytes);
        self.memory_kind = kind.map(str::to_string);
        self
    }

    /// Memory-controller bandwidth of every CPU node, MB/s.
    pub fn mc_bandwidth(mut self, mbps: f64, p: Provenance) -> Self {
        self.mc_bandwidth = Some(qty(mbps, p));
        self
    }

    /// Adds a CPU-less node after the CPU nodes.
    pub fn memory_only_node(mut self, bytes: u64, kind: &str, bandwidth: Quantity) -> Self {
        let id = self.cpu_nodes + self.memory_only.len() as u32;
        self.memory_only.push(Node {
            id,
            cpus: Vec::new(),
            memory_bytes: Some(bytes),
            memory_bandwidth_mbps: Some(bandwidth),
            memory_kind: Some(kind.to_string()),
        });
        self
    }

    /// Adds undirected links, skipping pairs that are already linked.
    pub fn links(
        mut self,
        pairs: &[(u32, u32)],
        mbps: Option<Quantity>,
        width: Option<u32>,
        p: &Provenance,
    ) -> Self {
        for &(a, b) in pairs {
            let (a, b) = (a.min(b), a.max(b));
            if a != b && !self.links.iter().any(|l| l.a == a && l.b == b) {
                self.links.push(Link {
                    a,
                    b,
                    bandwidth_mbps: mbps.clone(),
                    width_bits: width,
                    provenance: p.clone(),
                });
            }
        }
        self
    }

    pub fn route(mut self, path: &[u32], p: Provenance) -> Self {
        self.routes.push(Route {
            from: path[0],
            to: *path.last().expect("a route has at least one node"),
            path: path.to_vec(),
            provenance: p,
        });
        self
    }

    pub fn latency_by_hops(mut self, unit: LatencyUnit, by_hops: &[f64], p: Provenance) -> Self {
        self.latency = Some((unit, LatencyRule::ByHops(by_hops.to_vec()), p));
        self
    }

    pub fn latency_matrix(
        mut self,
        unit: LatencyUnit,
        values: Vec<Vec<f64>>,
        p: Provenance,
    ) -> Self {
        self.latency = Some((unit, LatencyRule::Matrix(values), p));
        self
    }

    /// Per-entry provenance of the latency matrix, by (row, column) position.
    pub fn latency_entry_provenance(
        mut self,
        f: impl Fn(usize, usize) -> Provenance + 'static,
    ) -> Self {
        self.entry_provenance = Some(Box::new(f));
        self
    }

    /// Explicit distances, for machines without a latency matrix.
    pub fn distances(mut self, values: Vec<Vec<u32>>, p: Provenance) -> Self {
        self.distances = Some(DistanceMatrix {
            values,
            provenance: p,
        });
        self
    }

    pub fn build(self) -> Topology {
        let (nodes, cpus) = self.layout();
        let mut t = Topology {
            schema: TOPOLOGY_SCHEMA_VERSION,
            name: self.name,
            description: Some(self.description),
            source: self.source,
            cpu_ghz: self.cpu_ghz,
            nodes,
            cpus,
            distances: self.distances,
            latency: None,
            links: self.links,
            routes: self.routes,
        };
        if let Some((unit, rule, provenance)) = self.latency {
            let values = match rule {
                LatencyRule::Matrix(values) => values,
                LatencyRule::ByHops(by_hops) => latency_by_hops(&t, &by_hops),
            };
            let n = values.len();
            let entry_provenance = self
                .entry_provenance
                .map(|f| (0..n).map(|i| (0..n).map(|j| f(i, j)).collect()).collect());
            t.latency = Some(LatencyMatrix {
                unit,
                values,
                provenance,
                entry_provenance,
            });
        }
        if t.distances.is_none() {
            t.distances = t.latency.as_ref().map(distances_from_latency);
        }
        t
    }

    /// CPU ids follow Linux's usual x86 numbering: first thread of every core, then the second.
    fn layout(&self) -> (Vec<Node>, Vec<Cpu>) {
        let total_cores = self.cpu_nodes * self.cores_per_node;
        let mut nodes: Vec<Node> = (0..self.cpu_nodes)
            .map(|id| Node {
                id,
                cpus: Vec::new(),
                memory_bytes: self.memory_per_node,
                memory_bandwidth_mbps: self.mc_bandwidth.clone(),
                memory_kind: self.memory_kind.clone(),
            })
            .collect();
        let mut cpus = Vec::new();
        for thread in 0..self.smt {
            for core in 0..total_cores {
                let id = thread * total_cores + core;
                let node = core / self.cores_per_node;
                nodes[node as usize].cpus.push(id);
                cpus.push(Cpu {
                    id,
                    node,
                    package: core / self.cores_per_package,
                    core: core % self.cores_per_package,
                    llc: self.cores_per_llc.map(|n| core / n * n),
                });
            }
        }
        nodes.iter_mut().for_each(|n| n.cpus.sort_unstable());
        nodes.extend(self.memory_only.iter().cloned());
        (nodes, cpus)
    }
}

fn latency_by_hops(t: &Topology, by_hops: &[f64]) -> Vec<Vec<f64>> {
    let ids = t.node_ids();
    ids.iter()
        .map(|&from| {
            ids.iter()
                .map(|&to| {
                    let hops = t.hops(from, to).expect("preset links connect all nodes");
                    by_hops[hops as usize]
                })
                .collect()
        })
        .collect()
}

/// SLIT distances from latencies: `round(10 × latency / local latency of the row)`, kept inside
/// the range Linux and QEMU accept (11..=254 between different nodes).
pub fn distances_from_latency(lat: &LatencyMatrix) -> DistanceMatrix {
    let values = lat
        .values
        .iter()
        .enumerate()
        .map(|(i, row)| {
            row.iter()
                .enumerate()
                .map(|(j, &v)| {
                    if i == j {
                        10
                    } else {
                        ((10.0 * v / row[i]).round() as u32).clamp(11, 254)
                    }
                })
                .collect()
        })
        .collect();
    DistanceMatrix {
        values,
        provenance: derived("round(10 × latency / local latency of the row), clamped to 11..=254"),
    }
}
