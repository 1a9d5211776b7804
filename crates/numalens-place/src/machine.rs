//! The machine as the policies and the simulator use it: a topology reduced to per-node CPU
//! counts, latencies in ns, controller and link bandwidths in bytes/ns, memory capacities and
//! the links each (CPU node, memory node) pair crosses. What the topology does not give is
//! assumed, and every assumption is listed so that results can say what they rest on.

use numalens_topology::Topology;

/// Local latency assumed when the topology has no latency matrix (a SLIT-derived matrix is
/// built from it).
pub const ASSUMED_LOCAL_NS: f64 = 100.0;

/// Controller bandwidth assumed per node when the topology gives none: one DDR4-3200 channel
/// pair, 51.2 GB/s.
pub const ASSUMED_CONTROLLER_GBPS: f64 = 51.2;

/// One interconnect link.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkModel {
    pub a: u32,
    pub b: u32,
    /// Per direction.
    pub bytes_per_ns: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub name: String,
    /// Node ids; every per-node vector is indexed by position in this list.
    pub nodes: Vec<u32>,
    /// Logical CPUs per node.
    pub cpus: Vec<usize>,
    /// `latency_ns[c][m]`: an access from a CPU of node `c` to memory of node `m`, unloaded.
    pub latency_ns: Vec<Vec<f64>>,
    /// Memory-controller bandwidth per node, bytes/ns (= GB/s).
    pub controller_bytes_per_ns: Vec<f64>,
    /// Memory per node in bytes; `None`: unknown (unlimited for the model).
    pub memory_bytes: Vec<Option<u64>>,
    pub links: Vec<LinkModel>,
    /// `routes[c][m]`: indices into `links` an access from node `c` to memory `m` crosses
    /// (empty when local or when the link map is unknown).
    pub routes: Vec<Vec<Vec<usize>>>,
    /// What the model had to assume, in words.
    pub assumptions: Vec<String>,
}

impl Machine {
    pub fn from_topology(topology: &Topology) -> Machine {
        let n = topology.nodes.len();
        let mut assumptions = Vec::new();
        let nodes = topology.node_ids();
        let cpus = topology.nodes.iter().map(|node| node.cpus.len()).collect();
        let latency_ns = match topology.latency_ns() {
            Some((values, _)) if square(&values, n) => values,
            _ => {
                assumptions.push(format!(
                    "no latency matrix: latencies derived from the SLIT distances with a local \
                     latency of {ASSUMED_LOCAL_NS} ns"
                ));
                topology.derived_latency_from_slit(ASSUMED_LOCAL_NS).values
            }
        };
        let mut missing_bandwidth = false;
        let controller_bytes_per_ns = topology
            .nodes
            .iter()
            .map(|node| match &node.memory_bandwidth_mbps {
                Some(q) if q.value > 0.0 => q.value / 1000.0,
                _ => {
                    missing_bandwidth = true;
                    ASSUMED_CONTROLLER_GBPS
                }
            })
            .collect();
        if missing_bandwidth {
            assumptions.push(format!(
                "memory-controller bandwidth unknown for some nodes: {ASSUMED_CONTROLLER_GBPS} GB/s assumed"
            ));
        }
        let memory_bytes = topology
            .nodes
            .iter()
            .map(|node| node.memory_bytes)
            .collect();
        let links: Vec<LinkModel> = topology
            .links
            .iter()
            .filter_map(|l| {
                let bw = l.bandwidth_mbps.as_ref()?.value / 1000.0;
                (bw > 0.0).then_some(LinkModel {
                    a: l.a,
                    b: l.b,
                    bytes_per_ns: bw,
                })
            })
            .collect();
        if links.len() < topology.links.len() {
            assumptions.push("links without a bandwidth are not modelled".to_string());
        }
        if topology.links.is_empty() && n > 1 {
            assumptions.push("no link map: interconnect contention is not modelled".to_string());
        }
        let routes = routes(topology, &nodes, &links);
        Machine {
            name: topology.name.clone(),
            nodes,
            cpus,
            latency_ns,
            controller_bytes_per_ns,
            memory_bytes,
            links,
            routes,
            assumptions,
        }
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Positions of the nodes with memory (capacity unknown or above zero).
    pub fn memory_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.memory_bytes[i] != Some(0))
            .collect()
    }

    /// Positions of the nodes with CPUs.
    pub fn cpu_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.cpus[i] > 0)
            .collect()
    }

    /// Position of node `id`.
    pub fn index(&self, id: u32) -> Option<usize> {
        self.nodes.iter().position(|&n| n == id)
    }

    /// Pages of `page_size` each node holds; `None` when unknown.
    pub fn capacity_pages(&self, page_size: u64) -> Vec<Option<u64>> {
        self.memory_bytes
            .iter()
            .map(|m| m.map(|b| b / page_size.max(1)))
            .collect()
    }

    /// Memory nodes ordered by latency from memory node `from` (itself first), ties by position:
    /// where Linux's fallback puts a page that does not fit.
    pub fn fallback_order(&self, from: usize) -> Vec<usize> {
        let mut order = self.memory_nodes();
        let row = |m: usize| {
            // Distance between memory nodes: latency from `from`'s CPUs when it has some, else
            // the mirrored column.
            self.latency_ns[from][m].min(self.latency_ns[m][from])
        };
        order.sort_by(|&a, &b| {
            (a != from)
                .cmp(&(b != from))
                .then(row(a).total_cmp(&row(b)))
                .then(a.cmp(&b))
        });
        order
    }
}

fn square(values: &[Vec<f64>], n: usize) -> bool {
    values.len() == n
        && values
            .iter()
            .all(|r| r.len() == n && r.iter().all(|v| v.is_finite() && *v > 0.0))
}

/// Link indices on each route; links with no bandwidth are left out (not modelled). An
/// explicit route of the topology wins; otherwise the path of a breadth-first search from the
/// source over the links, neighbours in node order: the path `Topology::route` gives, found
/// with one search per source instead of one per pair (a topology may have 1024 nodes).
fn routes(topology: &Topology, nodes: &[u32], links: &[LinkModel]) -> Vec<Vec<Vec<usize>>> {
    let n = nodes.len();
    let find = |a: u32, b: u32| {
        links
            .iter()
            .position(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
    };
    let index = |id: u32| nodes.iter().position(|&x| x == id);
    let mut adjacent: Vec<Vec<usize>> = vec![Vec::new(); n];
    for l in &topology.links {
        if let (Some(a), Some(b)) = (index(l.a), index(l.b))
            && a != b
        {
            adjacent[a].push(b);
            adjacent[b].push(a);
        }
    }
    for list in &mut adjacent {
        list.sort_unstable();
        list.dedup();
    }
    let mut explicit: std::collections::HashMap<(u32, u32), &Vec<u32>> = Default::default();
    for r in &topology.routes {
        explicit.entry((r.from, r.to)).or_insert(&r.path);
    }
    let links_of =
        |path: &[u32]| -> Vec<usize> { path.windows(2).filter_map(|w| find(w[0], w[1])).collect() };
    (0..n)
        .map(|c| {
            let previous = bfs(&adjacent, c);
            (0..n)
                .map(|m| {
                    if c == m {
                        return Vec::new();
                    }
                    if let Some(path) = explicit.get(&(nodes[c], nodes[m])) {
                        return links_of(path);
                    }
                    let mut path = vec![nodes[m]];
                    let mut at = m;
                    while let Some(p) = previous[at] {
                        path.push(nodes[p]);
                        at = p;
                    }
                    if at != c {
                        return Vec::new();
                    }
                    path.reverse();
                    links_of(&path)
                })
                .collect()
        })
        .collect()
}

/// Predecessor of each node on the breadth-first tree from `start`.
fn bfs(adjacent: &[Vec<usize>], start: usize) -> Vec<Option<usize>> {
    let mut previous = vec![None; adjacent.len()];
    let mut seen = vec![false; adjacent.len()];
    seen[start] = true;
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for &next in &adjacent[at] {
            if !seen[next] {
                seen[next] = true;
                previous[next] = Some(at);
                queue.push_back(next);
            }
        }
    }
    previous
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalens_topology::presets::preset;

    #[test]
    fn machine_b_has_its_published_numbers() {
        let m = Machine::from_topology(&preset("machine-b").unwrap());
        assert_eq!(m.nodes, vec![0, 1, 2, 3]);
        assert_eq!(m.cpus, vec![6; 4]);
        // 175 and 247 cycles at 1.7 GHz.
        assert!((m.latency_ns[0][0] - 175.0 / 1.7).abs() < 1e-9);
        assert!((m.latency_ns[0][1] - 247.0 / 1.7).abs() < 1e-9);
        assert!((m.controller_bytes_per_ns[0] - 5.85).abs() < 1e-9);
        // The 8-bit 0-3 link is the slow one.
        let l03 = m.routes[0][3][0];
        assert!((m.links[l03].bytes_per_ns - 2.1).abs() < 1e-9);
        assert!(m.assumptions.is_empty(), "{:?}", m.assumptions);
    }

    #[test]
    fn routes_are_the_topology_s_own() {
        for name in [
            "machine-a",
            "machine-c",
            "xeon-spr-2s-snc4",
            "epyc-genoa-2s-nps4",
        ] {
            let t = preset(name).unwrap();
            let m = Machine::from_topology(&t);
            for (c, &from) in m.nodes.iter().enumerate() {
                for (k, &to) in m.nodes.iter().enumerate() {
                    let path = t.route(from, to).unwrap_or_default();
                    let hops: Vec<(u32, u32)> = m.routes[c][k]
                        .iter()
                        .map(|&l| (m.links[l].a, m.links[l].b))
                        .collect();
                    let want: Vec<(u32, u32)> = path
                        .windows(2)
                        .filter_map(|w| {
                            m.links
                                .iter()
                                .find(|l| (l.a, l.b) == (w[0], w[1]) || (l.a, l.b) == (w[1], w[0]))
                                .map(|l| (l.a, l.b))
                        })
                        .collect();
                    assert_eq!(hops, want, "{name} {from}->{to}");
                }
            }
        }
    }

    #[test]
    fn cxl_memory_node_has_no_cpus_and_falls_back_to_dram_first() {
        let m = Machine::from_topology(&preset("cxl-tier").unwrap());
        assert_eq!(m.cpu_nodes(), vec![0]);
        assert_eq!(m.memory_nodes(), vec![0, 1]);
        assert_eq!(m.fallback_order(1), vec![1, 0]);
    }
}
