//! Semantic checks of a [`Topology`]: everything JSON's types cannot say.

use std::collections::{BTreeMap, BTreeSet};

use crate::cpulist::MAX_NODES;
use crate::{TOPOLOGY_SCHEMA_VERSION, Topology, TopologyError};

/// Largest SLIT distance a kernel accepts for a reachable node (255 means unreachable).
pub const MAX_DISTANCE: u32 = 254;
/// SLIT distance of a node to itself.
pub const LOCAL_DISTANCE: u32 = 10;

type Check = Result<(), (String, String)>;

fn fail<T>(field: impl Into<String>, problem: impl Into<String>) -> Result<T, (String, String)> {
    Err((field.into(), problem.into()))
}

impl Topology {
    /// Checks that the topology is consistent; the error names the field and what to change.
    pub fn validate(&self) -> Result<(), TopologyError> {
        self.check_all()
            .map_err(|(field, problem)| TopologyError::Invalid {
                origin: format!("topology `{}`", self.name),
                field,
                problem,
            })
    }

    fn check_all(&self) -> Check {
        if self.schema > TOPOLOGY_SCHEMA_VERSION {
            return fail(
                "schema",
                format!(
                    "version {} is newer than the {TOPOLOGY_SCHEMA_VERSION} this numalens reads; upgrade numalens",
                    self.schema
                ),
            );
        }
        self.check_nodes()?;
        self.check_cpus()?;
        self.check_quantities()?;
        self.check_distances()?;
        self.check_latency()?;
        self.check_links()?;
        self.check_routes()
    }

    fn check_nodes(&self) -> Check {
        if self.nodes.is_empty() {
            return fail("nodes", "is empty; a topology needs at least one node");
        }
        if self.nodes.len() > MAX_NODES {
            return fail(
                "nodes",
                format!(
                    "{} nodes, more than the {MAX_NODES} a Linux machine can have",
                    self.nodes.len()
                ),
            );
        }
        for (i, pair) in self.nodes.windows(2).enumerate() {
            if pair[1].id <= pair[0].id {
                let what = if pair[1].id == pair[0].id {
                    "repeats"
                } else {
                    "comes after"
                };
                return fail(
                    format!("nodes[{}].id", i + 1),
                    format!(
                        "node id {} {what} node id {}; list each node once, sorted by id",
                        pair[1].id, pair[0].id
                    ),
                );
            }
        }
        let mut owner = BTreeMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            for &cpu in &node.cpus {
                if let Some(other) = owner.insert(cpu, node.id) {
                    return fail(
                        format!("nodes[{i}].cpus"),
                        format!("CPU {cpu} is also on node {other}; a CPU belongs to one node"),
                    );
                }
            }
        }
        Ok(())
    }

    /// `cpus[]` may omit CPUs whose place is unknown (offline ones), but what it lists must
    /// agree with the nodes' CPU lists.
    fn check_cpus(&self) -> Check {
        let mut seen = BTreeSet::new();
        for (i, cpu) in self.cpus.iter().enumerate() {
            if !seen.insert(cpu.id) {
                return fail(
                    format!("cpus[{i}].id"),
                    format!("CPU {} is listed twice", cpu.id),
                );
            }
            let Some(node) = self.nodes.iter().find(|n| n.id == cpu.node) else {
                return fail(
                    format!("cpus[{i}].node"),
                    format!(
                        "CPU {} names node {}, which is not in `nodes`",
                        cpu.id, cpu.node
                    ),
                );
            };
            if !node.cpus.contains(&cpu.id) {
                return fail(
                    format!("cpus[{i}].node"),
                    format!(
                        "CPU {} says node {}, but that node's `cpus` does not list it; \
                         add it there or fix the node",
                        cpu.id, cpu.node
                    ),
                );
            }
            if let Some(llc) = cpu.llc
                && !self.nodes.iter().any(|n| n.cpus.contains(&llc))
            {
                return fail(
                    format!("cpus[{i}].llc"),
                    format!(
                        "LLC id {llc} is not a CPU id of any node (it is the lowest CPU sharing the cache)"
                    ),
                );
            }
        }
        Ok(())
    }

    fn check_quantities(&self) -> Check {
        if let Some(ghz) = &self.cpu_ghz {
            positive("cpu_ghz.value", ghz.value)?;
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if let Some(bw) = &node.memory_bandwidth_mbps {
                positive(&format!("nodes[{i}].memory_bandwidth_mbps.value"), bw.value)?;
            }
        }
        for (i, link) in self.links.iter().enumerate() {
            if let Some(bw) = &link.bandwidth_mbps {
                positive(&format!("links[{i}].bandwidth_mbps.value"), bw.value)?;
            }
        }
        Ok(())
    }

    fn check_distances(&self) -> Check {
        let Some(d) = &self.distances else {
            return Ok(());
        };
        self.check_square("distances.values", d.values.iter().map(Vec::len))?;
        for (i, row) in d.values.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let field = format!("distances.values[{i}][{j}]");
                if i == j && v != LOCAL_DISTANCE {
                    return fail(
                        field,
                        format!("is {v}, but a node's distance to itself must be 10"),
                    );
                }
                if i != j && !(LOCAL_DISTANCE + 1..=MAX_DISTANCE).contains(&v) {
                    return fail(
                        field,
                        format!(
                            "is {v}; distances between different nodes must be 11..=254 (10 is local)"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn check_latency(&self) -> Check {
        let Some(lat) = &self.latency else {
            return Ok(());
        };
        self.check_square("latency.values", lat.values.iter().map(Vec::len))?;
        for (i, row) in lat.values.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                positive(&format!("latency.values[{i}][{j}]"), v)?;
            }
        }
        if let Some(entries) = &lat.entry_provenance {
            self.check_square("latency.entry_provenance", entries.iter().map(Vec::len))?;
        }
        Ok(())
    }

    fn check_links(&self) -> Check {
        let mut seen = BTreeSet::new();
        for (i, link) in self.links.iter().enumerate() {
            self.known_node(&format!("links[{i}].a"), link.a)?;
            self.known_node(&format!("links[{i}].b"), link.b)?;
            if link.a == link.b {
                return fail(
                    format!("links[{i}]"),
                    format!("links node {} to itself", link.a),
                );
            }
            if !seen.insert((link.a.min(link.b), link.a.max(link.b))) {
                return fail(
                    format!("links[{i}]"),
                    format!(
                        "link {}-{} is listed twice (links are undirected)",
                        link.a, link.b
                    ),
                );
            }
        }
        Ok(())
    }

    fn check_routes(&self) -> Check {
        let mut seen = BTreeSet::new();
        for (i, route) in self.routes.iter().enumerate() {
            let field = format!("routes[{i}]");
            self.known_node(&format!("{field}.from"), route.from)?;
            self.known_node(&format!("{field}.to"), route.to)?;
            if !seen.insert((route.from, route.to)) {
                return fail(field, format!("a second route {}→{}", route.from, route.to));
            }
            if route.path.first() != Some(&route.from) || route.path.last() != Some(&route.to) {
                return fail(
                    format!("{field}.path"),
                    format!(
                        "must start at `from` ({}) and end at `to` ({})",
                        route.from, route.to
                    ),
                );
            }
            for (k, hop) in route.path.windows(2).enumerate() {
                if !self.has_link(hop[0], hop[1]) {
                    return fail(
                        format!("{field}.path[{k}]"),
                        format!(
                            "step {}→{} is not in `links`; add the link or fix the path",
                            hop[0], hop[1]
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn check_square(
        &self,
        field: &str,
        row_lengths: impl ExactSizeIterator<Item = usize>,
    ) -> Check {
        let n = self.nodes.len();
        if row_lengths.len() != n {
            return fail(
                field,
                format!(
                    "has {} rows but there are {n} nodes; it must be {n}×{n}",
                    row_lengths.len()
                ),
            );
        }
        for (i, len) in row_lengths.enumerate() {
            if len != n {
                return fail(
                    format!("{field}[{i}]"),
                    format!("has {len} entries but there are {n} nodes; it must be {n}×{n}"),
                );
            }
        }
        Ok(())
    }

    fn known_node(&self, field: &str, id: u32) -> Check {
        if self.node_index(id).is_none() {
            return fail(
                field,
                format!(
                    "names node {id}, which is not in `nodes` ({:?})",
                    self.node_ids()
                ),
            );
        }
        Ok(())
    }

    /// Whether an undirected link joins the two nodes.
    pub fn has_link(&self, a: u32, b: u32) -> bool {
        self.links
            .iter()
            .any(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
    }
}

fn positive(field: &str, v: f64) -> Check {
    if !(v.is_finite() && v > 0.0) {
        return fail(
            field,
            format!("is {v}; it must be a positive finite number"),
        );
    }
    Ok(())
}
